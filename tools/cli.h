/* cli.h — what the files of the `nabla` command-line tool share: commands, options, models, data, output. */
#ifndef NB_CLI_H
#define NB_CLI_H

#include "nabla.h"

#include <stdbool.h>
#include <stdio.h>

/* Exit codes: 0 success, 1 a failure while running, 2 a bad command line. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/** Print "nabla <cmd>: <message>" as one line on stderr; returns code. */
int cli_error(const char *cmd, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/** cli_error with nabla's last error message appended after `what`. */
int cli_nb_error(const char *cmd, const char *what);

/* ---- options ---- */

typedef enum { OPT_INT, OPT_DOUBLE, OPT_STRING, OPT_FLAG } opt_type;

typedef struct cli_opt {
    const char *name; /* "--epochs" */
    opt_type type;
    void *dst;        /* int64_t *, double *, const char **, bool * */
    const char *help;
    double min, max;  /* numeric range (inclusive) */
} cli_opt;

/**
 * Parse argv[0..argc) ("--name value" or "--name=value") into opts.  "--help"
 * prints the usage and sets *help.  Returns CLI_OK or CLI_USAGE after printing
 * one error line (unknown option, missing or non-numeric value, out of range).
 */
int cli_parse(const char *cmd, const char *usage, int argc, char **argv, const cli_opt *opts, int nopts, bool *help);

/* ---- data (data.c) ---- */

/** The geometry a model is built for: images H x W (one channel), labels in [0, classes). */
typedef struct cli_geom {
    int64_t height, width, classes;
} cli_geom;

/** One split of an IDX data set. */
typedef struct cli_split {
    nb_tensor *images;                 /* f32 [N, H*W], pixel / 255 in [0, 1] (owned) */
    nb_tensor *labels;                 /* i64 [N] (owned) */
    int64_t n, height, width, classes; /* classes: the largest label + 1 */
} cli_split;

/** True when dir/name.gz or else dir/name is readable; the path goes to path. */
bool cli_data_file(const char *dir, const char *name, char *path, size_t len);
/**
 * The training (`train-images-idx3-ubyte[.gz]`, `train-labels-idx1-ubyte[.gz]`) or test split (`t10k-…`)
 * from dir (NULL: the Debian Fashion-MNIST location): u8 images [N, H, W] of any size, u8 labels [N].
 * CLI_OK, or CLI_FAIL after one error line (s then holds nothing).
 */
int cli_load_split(const char *cmd, const char *dir, bool train, cli_split *s);
/** Release s's tensors. */
void cli_split_free(cli_split *s);
/**
 * Image rows [b, H*W] (pixels in [0, 1]) as the model's input: standardized with the Fashion-MNIST
 * pixel mean and std (a fixed transform), then [b, H*W] for "mlp" or [b, 1, H, W] for "cnn".
 */
nb_tensor *cli_model_input(const char *model, const cli_geom *g, nb_tensor *rows);
/**
 * Accuracy of m on split s in batches, no recording; when confusion is not NULL, adds counts to
 * confusion[true * g->classes + predicted].  Returns the number of correct predictions, or -1 (error set).
 */
int64_t cli_evaluate(nb_module *m, const char *model, const cli_geom *g, const cli_split *s, int64_t *confusion);

/* ---- models (models.c) ---- */

/**
 * "mlp" (H*W-256-128-classes, ReLU) or "cnn" (two conv3x3+ReLU+maxpool2 blocks, then
 * 64*(H/4)*(W/4)-128-classes); NULL if unknown or on a library error.
 */
nb_module *cli_model_new(const char *name, const cli_geom *g);
/** True when `name` is a model cli_model_new knows. */
bool cli_model_known(const char *name);
/** CLI_OK when model `name` can be built for g, else CLI_FAIL after one error line saying why. */
int cli_model_fits(const char *cmd, const char *name, const cli_geom *g);
/** The model a checkpoint holds, told from its tensor names; NULL (error printed) when it cannot be told. */
const char *cli_model_of_checkpoint(const char *cmd, nb_safetensors *h, const char *path);
/** The class count of a checkpoint of `model` (its last layer's outputs); -1 (error printed) when absent. */
int64_t cli_checkpoint_classes(const char *cmd, nb_safetensors *h, const char *model, const char *path);
/** Copy every parameter of m from checkpoint h (strict: names, shapes); CLI_OK or CLI_FAIL after one error line. */
int cli_load_params(const char *cmd, nb_module *m, const char *model, nb_safetensors *h, const char *path);
/** Save m's parameters to path (atomically, via the io layer); CLI_OK or CLI_FAIL after one error line. */
int cli_save_params(const char *cmd, nb_module *m, const char *path);

/* ---- output files (output.c) ---- */

/**
 * Check before a run that `path` can be written as the `what` ("checkpoint", "metrics file"): an
 * existing target must be a regular file (a symlink is followed; devices, FIFOs and directories are
 * refused) and the directory of the file it resolves to must be writable.  CLI_OK or CLI_FAIL after
 * one error line.
 */
int cli_output_check(const char *cmd, const char *what, const char *path);

/* ---- dist.c ---- */
/** Under mpirun (Open MPI's OMPI_COMM_WORLD_SIZE or a PMI launcher's PMI_SIZE / PMIX_RANK in the
 *  environment) start MPI (nb_dist_init) and give this process's rank and the world size; alone,
 *  rank 0 of 1.  CLI_FAIL after one error line when MPI does not start or this build lacks it. */
int cli_dist_start(const char *cmd, int *argc, char ***argv, int *rank, int *world);
/**
 * Replace the file at path with data[0, n) atomically: written to a temporary file next to the
 * file a symlink at path resolves to, flushed, given the existing file's mode (new files: 0666 less
 * the umask) and renamed over it; a failure leaves an existing file intact.  Non-regular targets are
 * refused as by cli_output_check.  CLI_OK or CLI_FAIL after one error line.
 */
int cli_output_write(const char *cmd, const char *what, const char *path, const void *data, size_t n);

/* ---- output ---- */

typedef struct cli_progress {
    FILE *out;
    bool tty;
    int epochs;
    int64_t steps;   /* steps per epoch */
    double t_start;  /* epoch start (seconds) */
    double t_drawn;  /* last redraw */
    int64_t next_line;
} cli_progress;

/** Monotonic time in seconds. */
double cli_now(void);
void cli_progress_begin(cli_progress *p, FILE *out, int epoch, int epochs, int64_t steps);
/** Report step `step` (1-based) of the epoch with the running mean loss and samples seen. */
void cli_progress_step(cli_progress *p, int epoch, int64_t step, double loss, int64_t samples);
/** Finish the epoch's bar (a tty line is cleared). */
void cli_progress_end(cli_progress *p);

/**
 * Draw a PNG line chart (cairo) of per-epoch loss (scaled to its maximum) and train / test accuracy
 * and write it to path with cli_output_write.  CLI_OK or CLI_FAIL after one error line.
 */
int cli_chart_png(const char *cmd, const char *path, int n, const double *loss, const double *train_acc,
                  const double *test_acc);

/* ---- commands ---- */

int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_doctor(int argc, char **argv);


/* ---- the compiled training step (train_compiled.c) ---- */
/** Optimizer settings of a compiled step (the same meaning as nb_sgd_opts / nb_adam_opts). */
typedef struct cli_step_opts {
    bool adam, decoupled;                  /* Adam (AdamW when decoupled) or SGD */
    double beta1, beta2, eps, weight_decay; /* Adam(W); weight_decay also SGD's L2 */
    double momentum, dampening;             /* SGD */
    double clip;                            /* global gradient 2-norm bound, 0 = off */
    bool data_parallel;                     /* under mpirun: two graphs, the gradients averaged between */
} cli_step_opts;
typedef struct cli_step cli_step;
/** Trace and compile one training step of net (model `model`, images of geom) with a symbolic
 *  batch dim.  NULL with nabla's error set. */
cli_step *cli_step_new(nb_module *net, const char *model, const cli_geom *geom, cli_step_opts o);
/** One step on f32 pixel rows x [B, H*W] (in [0, 1]) and i64 labels y [B] at learning rate lr: updates the model's
 *  parameters in place; *loss gets the batch's mean loss, *hits its correct predictions.  Data-parallel:
 *  x, y are this rank's share (NULL for none), its loss weighted `weight` (share · world / global batch)
 *  before the gradients are averaged over the ranks. */
nb_status cli_step_run(cli_step *s, nb_tensor *x, nb_tensor *y, double weight, double lr, double *loss, int64_t *hits);
void cli_step_free(cli_step *s);
/** The compiled plan of the step (borrowed). */
nb_compiled *cli_step_plan(cli_step *s);

#endif
