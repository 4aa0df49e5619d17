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

/* ---- models (models.c) ---- */

/** "mlp" (784-256-128-10, ReLU) or "cnn" (two conv3x3+ReLU+maxpool2 blocks, then 3136-128-10); NULL if unknown. */
nb_module *cli_model_new(const char *name);
/** True when `name` is a model cli_model_new knows. */
bool cli_model_known(const char *name);
/** The model a checkpoint holds, told from its tensor names; NULL (error printed) when it cannot be told. */
const char *cli_model_of_checkpoint(const char *cmd, nb_safetensors *h, const char *path);
/** Copy every parameter of m from checkpoint h (strict: names, shapes); CLI_OK or CLI_FAIL after one error line. */
int cli_load_params(const char *cmd, nb_module *m, const char *model, nb_safetensors *h, const char *path);
/** Save m's parameters to path (atomically, via the io layer); CLI_OK or CLI_FAIL after one error line. */
int cli_save_params(const char *cmd, nb_module *m, const char *path);

/* ---- data ---- */

/** Fashion-MNIST split from dir (NULL: the Debian location); CLI_OK or CLI_FAIL after one error line. */
int cli_load_split(const char *cmd, const char *dir, bool train, nb_tensor **images, nb_tensor **labels);
/**
 * Image rows [b, 784] (pixels in [0, 1]) as the model's input: standardized with the training set's
 * pixel mean and std, then [b, 784] for "mlp" or [b, 1, 28, 28] for "cnn".
 */
nb_tensor *cli_model_input(const char *model, nb_tensor *rows);

/**
 * Accuracy of m on (images, labels) in batches, no recording; when confusion
 * is not NULL, adds counts to confusion[true * 10 + predicted].  Returns the
 * number of correct predictions, or -1 (error set) on failure.
 */
int64_t cli_evaluate(nb_module *m, const char *model, nb_tensor *images, nb_tensor *labels, int64_t *confusion);

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
 * Write a PNG line chart of per-epoch loss (scaled to its maximum) and
 * train / test accuracy to path.  Returns 0, or -1 with a message in err.
 */
int cli_chart_png(const char *path, int n, const double *loss, const double *train_acc, const double *test_acc,
                  char *err, size_t errlen);

/* ---- commands ---- */

int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_doctor(int argc, char **argv);

#endif
