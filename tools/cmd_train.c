/*
 * cmd_train.c — `nabla train`: train the MLP or CNN on Fashion-MNIST (or any
 * IDX image set laid out as it is; the models take their sizes from the
 * files) with mini-batch SGD / Adam / AdamW, show progress, evaluate on the
 * test split after each epoch, and write the checkpoint, a metrics CSV with
 * its chart, and a final JSON summary on request.  Under mpirun each rank
 * takes its share of every global batch (--batch-size), the gradients are
 * averaged over the ranks (nb_ddp; --compiled: between its gradient and
 * update graphs), and rank 0 evaluates, prints and saves.
 */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "train";

typedef struct train_cfg {
    const char *model, *optimizer, *schedule, *data, *save, *metrics;
    int64_t epochs, batch, seed, threads, limit, warmup;
    double lr, momentum, weight_decay, clip;
    bool json, compiled, report;
} train_cfg;

typedef struct run {
    const train_cfg *cfg;
    nb_module *net;
    nb_optimizer *opt;
    cli_step *compiled;                 /* --compiled: the traced step, used instead of opt */
    nb_ddp *ddp;                        /* under mpirun: the gradient synchronizer */
    int rank, world;
    nb_tensor **params;
    int nparams;
    cli_split train, test;              /* data sets (owned) */
    cli_geom geom;                      /* image size and class count the model is built for */
    int64_t n;                          /* training rows used */
    int64_t step, total_steps;          /* optimizer steps taken / planned */
    FILE *log;                          /* progress and summaries */
} run;

typedef struct epoch_result {
    double loss, train_acc, test_acc, seconds;
} epoch_result;

static const char USAGE[] =
    "usage: nabla train [options]\n"
    "Train a model on Fashion-MNIST, or on another IDX image set with the same file names (--data);\n"
    "the model's input and output sizes follow the files.  After each epoch it is evaluated on the\n"
    "test split.  On Fashion-MNIST the defaults reach >= 88% (mlp) / >= 90% (cnn) in 5 epochs.\n"
    "Data-parallel: mpirun -np N nabla train --threads T ... (each rank takes its share of every\n"
    "global batch; rank 0 prints, evaluates and saves).\n";

static int parse(int argc, char **argv, train_cfg *c, bool *help) {
    const cli_opt opts[] = {
        {"--model", OPT_STRING, &c->model, "mlp (pixels-256-128-classes) or cnn (2 conv blocks + 2 linear); default mlp", 0, 0},
        {"--epochs", OPT_INT, &c->epochs, "passes over the training set (5)", 1, 10000},
        {"--batch-size", OPT_INT, &c->batch, "samples per step (128)", 1, 60000},
        {"--lr", OPT_DOUBLE, &c->lr, "peak learning rate (adam/adamw 0.002, sgd 0.05)", 0, 1e6},
        {"--optimizer", OPT_STRING, &c->optimizer, "sgd (momentum 0.9), adam or adamw (adam)", 0, 0},
        {"--momentum", OPT_DOUBLE, &c->momentum, "SGD momentum (0.9)", 0, 1},
        {"--weight-decay", OPT_DOUBLE, &c->weight_decay, "L2 (sgd, adam) or decoupled (adamw) decay (0; adamw 0.01)", 0, 1e6},
        {"--schedule", OPT_STRING, &c->schedule, "learning-rate schedule per step: constant or cosine (cosine)", 0, 0},
        {"--warmup", OPT_INT, &c->warmup, "linear warm-up steps from lr/10 (0)", 0, 1e9},
        {"--clip", OPT_DOUBLE, &c->clip, "clip gradients to this global 2-norm, 0 = off (0)", 0, 1e12},
        {"--seed", OPT_INT, &c->seed, "random seed for initialization and shuffling (0)", 0, 9.2e18},
        {"--threads", OPT_INT, &c->threads, "CPU threads (NB_NUM_THREADS or all CPUs)", 1, 256},
        {"--data", OPT_STRING, &c->data, "directory of {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (" NB_FASHION_MNIST_DIR ")", 0, 0},
        {"--limit", OPT_INT, &c->limit, "train on the first N samples only, 0 = all (0)", 0, 1e9},
        {"--save", OPT_STRING, &c->save, "write the trained parameters to this safetensors file", 0, 0},
        {"--metrics", OPT_STRING, &c->metrics, "write epoch,loss,train_accuracy,test_accuracy,seconds rows (CSV) and a PNG chart", 0, 0},
        {"--json", OPT_FLAG, &c->json, "print one final JSON line on stdout (progress goes to stderr)", 0, 0},
        {"--compiled", OPT_FLAG, &c->compiled, "trace the whole step (forward, loss, gradients, update) once and run it compiled", 0, 0},
        {"--report", OPT_FLAG, &c->report, "with --compiled: print what the compiler made of the step (fused kernels, memory plan)", 0, 0},
    };
    int rc = cli_parse(CMD, USAGE, argc, argv, opts, (int)(sizeof opts / sizeof *opts), help);
    if (rc != CLI_OK || *help) return rc;
    if (!cli_model_known(c->model)) return cli_error(CMD, CLI_USAGE, "--model must be mlp or cnn, got '%s'", c->model);
    bool sgd = !strcmp(c->optimizer, "sgd"), adamw = !strcmp(c->optimizer, "adamw");
    if (!sgd && !adamw && strcmp(c->optimizer, "adam"))
        return cli_error(CMD, CLI_USAGE, "--optimizer must be sgd, adam or adamw, got '%s'", c->optimizer);
    if (strcmp(c->schedule, "constant") && strcmp(c->schedule, "cosine"))
        return cli_error(CMD, CLI_USAGE, "--schedule must be constant or cosine, got '%s'", c->schedule);
    if (isnan(c->lr)) c->lr = sgd ? 0.05 : 2e-3;
    if (isnan(c->weight_decay)) c->weight_decay = adamw ? 1e-2 : 0;
    return CLI_OK;
}

static nb_optimizer *make_optimizer(const train_cfg *c, nb_tensor **params, int n) {
    if (!strcmp(c->optimizer, "sgd"))
        return nb_optim_sgd(params, n, (nb_sgd_opts){c->lr, c->momentum, 0, c->weight_decay, false});
    nb_adam_opts a = {c->lr, 0.9, 0.999, 1e-8, c->weight_decay};
    return strcmp(c->optimizer, "adam") ? nb_optim_adamw(params, n, a) : nb_optim_adam(params, n, a);
}

/* The learning rate for the next step under the configured warm-up and schedule. */
static double lr_at(const run *r) {
    const train_cfg *c = r->cfg;
    double lr = strcmp(c->schedule, "cosine") ? c->lr : nb_lr_cosine(c->lr, r->step, r->total_steps, 0);
    return c->warmup > 0 ? lr * (nb_lr_warmup(1, r->step, c->warmup, 0.1)) : lr;
}

/* This rank's part of the global batch starting at row s: b rows in all, this rank's
 * [s + off, s + off + cnt), and its mean loss's weight cnt · world / b in the global mean (1 alone). */
typedef struct share {
    int64_t b, off, cnt;
    double weight;
} share;

static bool share_of(const run *r, int64_t s, share *sh) {
    sh->b = r->n - s < r->cfg->batch ? r->n - s : r->cfg->batch;
    sh->off = 0;
    sh->cnt = sh->b;
    if (r->world > 1 && nb_dist_shard(sh->b, &sh->off, &sh->cnt) != NB_OK) return false;
    sh->weight = (double)sh->cnt * r->world / (double)sh->b;
    return true;
}

/* One compiled step on rows [s, s+batch) of perm (see train_step; under mpirun this rank's share). */
static int compiled_step(run *r, nb_tensor *perm, int64_t s, double *loss_sum, int64_t *correct) {
    nb_scope_begin();
    share sh;
    bool ok = share_of(r, s, &sh);
    nb_tensor *x = ok && sh.cnt > 0 ? nb_take_rows(r->train.images, perm, s + sh.off, sh.cnt) : NULL;
    nb_tensor *y = ok && sh.cnt > 0 ? nb_take_rows(r->train.labels, perm, s + sh.off, sh.cnt) : NULL;
    double lv = 0;
    int64_t h = 0;
    ok = ok && (sh.cnt == 0 || (x && y)) && cli_step_run(r->compiled, x, y, sh.weight, lr_at(r), &lv, &h) == NB_OK;
    r->step++;
    *loss_sum += lv * (double)sh.cnt;
    *correct += h;
    nb_scope_end();
    return ok ? CLI_OK : cli_nb_error(CMD, "compiled training step");
}

/* The forward and backward pass of this rank's rows of the global batch at row s of perm, its loss
 * weighted so that the ranks' mean gradient is the global batch's; adds the rows' summed loss and
 * correct count. */
static bool forward_backward(run *r, nb_tensor *perm, int64_t s, double *loss_sum, int64_t *correct) {
    share sh;
    if (!share_of(r, s, &sh)) return false;
    int64_t cnt = sh.cnt;
    if (cnt == 0) return true; /* no rows this step: zero gradients (nb_ddp_finish) */
    nb_tensor *x = nb_take_rows(r->train.images, perm, s + sh.off, cnt);
    nb_tensor *y = nb_take_rows(r->train.labels, perm, s + sh.off, cnt);
    nb_tensor *logits = x && y ? nb_module_forward(r->net, cli_model_input(r->cfg->model, &r->geom, x)) : NULL;
    nb_tensor *loss = nb_cross_entropy(logits, y, NB_CROSS_ENTROPY_DEFAULTS);
    double lv = 0, h = 0;
    nb_tensor *scaled = r->ddp ? nb_mul(loss, sh.weight) : loss;
    bool ok = scaled && nb_item(loss, &lv) == NB_OK && nb_backward(scaled, NULL, false) == NB_OK;
    nb_tensor *hits = ok ? nb_sum(nb_eq(nb_argmax(logits, 1, false), y), NULL, 0, false) : NULL;
    ok = hits && nb_item(hits, &h) == NB_OK;
    *loss_sum += lv * (double)cnt;
    *correct += (int64_t)h;
    return ok;
}

/* One optimizer step on rows [s, s+batch) of perm (this rank's share of them under mpirun); adds the
 * rows' summed loss and correct count. */
static int train_step(run *r, nb_tensor *perm, int64_t s, double *loss_sum, int64_t *correct) {
    if (r->compiled) return compiled_step(r, perm, s, loss_sum, correct);
    nb_scope_begin();
    bool ok = forward_backward(r, perm, s, loss_sum, correct);
    if (r->ddp) ok = nb_ddp_finish(r->ddp) == NB_OK && ok; /* every rank, even one that failed: MPI's order */
    if (ok && r->cfg->clip > 0) ok = nb_clip_grad_norm_(r->params, r->nparams, r->cfg->clip, 2, NULL) == NB_OK;
    if (ok) {
        nb_optim_set_lr(r->opt, lr_at(r));
        ok = nb_optim_step(r->opt) == NB_OK;
        nb_optim_zero_grad(r->opt);
        r->step++;
    }
    nb_scope_end();
    return ok ? CLI_OK : cli_nb_error(CMD, "training step");
}

/* The epoch's loss sum and correct count over every rank (sums; the identity alone). */
static int sum_over_ranks(run *r, double *loss_sum, int64_t *correct) {
    if (r->world == 1) return CLI_OK;
    nb_scope_begin();
    nb_tensor *t = nb_from_data((double[]){*loss_sum, (double)*correct}, (int64_t[]){2}, 1, NB_F64);
    double v[2];
    bool ok = t && nb_dist_all_reduce(t, NB_DIST_SUM) == NB_OK && nb_copy_to_host(t, v, sizeof v) == NB_OK;
    if (ok) {
        *loss_sum = v[0];
        *correct = (int64_t)v[1];
    }
    nb_scope_end();
    return ok ? CLI_OK : cli_nb_error(CMD, "summing the epoch over the ranks");
}

static int train_epoch(run *r, int epoch, epoch_result *res) {
    const train_cfg *c = r->cfg;
    int64_t steps = (r->n + c->batch - 1) / c->batch, correct = 0;
    double loss_sum = 0;
    cli_progress pr;
    cli_progress_begin(&pr, r->log, epoch, (int)c->epochs, steps);
    nb_scope_begin();
    nb_tensor *perm = nb_randperm(r->n);
    int rc = perm ? CLI_OK : cli_nb_error(CMD, "shuffling");
    for (int64_t k = 0; k < steps && rc == CLI_OK; k++) {
        rc = train_step(r, perm, k * c->batch, &loss_sum, &correct);
        int64_t seen = k + 1 < steps ? (k + 1) * c->batch : r->n;
        cli_progress_step(&pr, epoch, k + 1, loss_sum * r->world / (double)seen, seen); /* this rank's rows */
    }
    nb_scope_end();
    cli_progress_end(&pr);
    if (rc == CLI_OK) rc = sum_over_ranks(r, &loss_sum, &correct);
    res->seconds = cli_now() - pr.t_start;
    res->loss = loss_sum / (double)r->n;
    res->train_acc = (double)correct / (double)r->n;
    if (rc != CLI_OK || r->rank != 0) return rc; /* rank 0 evaluates and reports */
    int64_t hits = cli_evaluate(r->net, c->model, &r->geom, &r->test, NULL);
    if (hits < 0) return cli_nb_error(CMD, "evaluation");
    res->test_acc = (double)hits / (double)r->test.n;
    fprintf(r->log, "epoch %d/%d loss %.4f train_accuracy %.4f test_accuracy %.4f %.2fs %.0f samples/s\n", epoch,
            (int)c->epochs, res->loss, res->train_acc, res->test_acc, res->seconds, (double)r->n / res->seconds);
    fflush(r->log);
    return CLI_OK;
}

/* metrics.csv -> metrics.png (else the path with ".png" appended); caller frees. */
static char *chart_path(const char *metrics) {
    size_t n = strlen(metrics);
    char *p = malloc(n + 5);
    if (!p) return NULL;
    memcpy(p, metrics, n + 1);
    if (n > 4 && !strcmp(p + n - 4, ".csv")) n -= 4;
    strcpy(p + n, ".png");
    return p;
}

static int write_chart(const char *path, int n, const epoch_result *res) {
    double *v = malloc(sizeof(double) * 3 * (size_t)n);
    if (!v) return cli_error(CMD, CLI_FAIL, "out of memory drawing the chart");
    for (int i = 0; i < n; i++) {
        v[i] = res[i].loss;
        v[n + i] = res[i].train_acc;
        v[2 * n + i] = res[i].test_acc;
    }
    int rc = cli_chart_png(CMD, path, n, v, v + n, v + 2 * n);
    free(v);
    return rc;
}

/* The metrics CSV after epoch n (header and n rows), replacing the file atomically: an earlier file at
 * the path stays as it was until the first epoch is done. */
static int write_metrics(const char *path, int n, const epoch_result *res) {
    static const char HEADER[] = "epoch,loss,train_accuracy,test_accuracy,seconds\n";
    size_t cap = sizeof HEADER + 96 * (size_t)n, len = sizeof HEADER - 1;
    char *csv = malloc(cap);
    if (!csv) return cli_error(CMD, CLI_FAIL, "out of memory writing the metrics");
    memcpy(csv, HEADER, len);
    for (int e = 0; e < n; e++)
        len += (size_t)snprintf(csv + len, cap - len, "%d,%.6f,%.6f,%.6f,%.3f\n", e + 1, res[e].loss, res[e].train_acc,
                                res[e].test_acc, res[e].seconds);
    int rc = cli_output_write(CMD, "metrics file", path, csv, len);
    free(csv);
    return rc;
}

static int load_data(run *r) {
    const train_cfg *c = r->cfg;
    if (cli_load_split(CMD, c->data, true, &r->train) != CLI_OK || cli_load_split(CMD, c->data, false, &r->test) != CLI_OK)
        return CLI_FAIL;
    if (r->test.height != r->train.height || r->test.width != r->train.width)
        return cli_error(CMD, CLI_FAIL, "the test images are %lldx%lld but the training images %lldx%lld",
                         (long long)r->test.height, (long long)r->test.width, (long long)r->train.height,
                         (long long)r->train.width);
    r->geom = (cli_geom){r->train.height, r->train.width,
                         r->train.classes > r->test.classes ? r->train.classes : r->test.classes};
    r->n = r->train.n;
    if (c->limit > 0 && c->limit < r->n) r->n = c->limit;
    return cli_model_fits(CMD, c->model, &r->geom);
}

static int setup(run *r) {
    const train_cfg *c = r->cfg;
    if (c->threads > 0) nb_set_num_threads((int)c->threads);
    nb_manual_seed((uint64_t)c->seed);
    r->net = cli_model_new(c->model, &r->geom);
    if (!r->net) return cli_nb_error(CMD, "building the model");
    r->nparams = nb_module_param_count(r->net);
    r->params = calloc((size_t)r->nparams, sizeof *r->params);
    if (!r->params || nb_module_params(r->net, r->params, r->nparams) != r->nparams)
        return cli_error(CMD, CLI_FAIL, "out of memory");
    r->opt = make_optimizer(c, r->params, r->nparams);
    if (!r->opt) return cli_nb_error(CMD, "optimizer");
    if (r->world > 1 && !c->compiled && !(r->ddp = nb_ddp_new(r->params, r->nparams, 0)))
        return cli_nb_error(CMD, "setting up data-parallel training");
    if (c->compiled) {
        bool adam = strcmp(c->optimizer, "sgd") != 0;
        cli_step_opts o = {.adam = adam, .decoupled = !strcmp(c->optimizer, "adamw"), .beta1 = 0.9, .beta2 = 0.999,
                           .eps = 1e-8, .weight_decay = c->weight_decay, .momentum = c->momentum, .clip = c->clip,
                           .data_parallel = r->world > 1};
        nb_scope_begin(); /* the ranks start equal: rank 0's initial parameters */
        bool ok = true;
        for (int i = 0; ok && r->world > 1 && i < r->nparams; i++) {
            nb_tensor *d = nb_detach(r->params[i]);
            ok = d && nb_dist_broadcast(d, 0) == NB_OK;
        }
        nb_scope_end();
        if (!ok) return cli_nb_error(CMD, "broadcasting the parameters");
        r->compiled = cli_step_new(r->net, c->model, &r->geom, o);
        if (!r->compiled) return cli_nb_error(CMD, "compiling the training step");
    }
    r->total_steps = c->epochs * ((r->n + c->batch - 1) / c->batch);
    return CLI_OK;
}

static void teardown(run *r) {
    if (r->compiled && r->cfg->report) {
        char *rep = nb_compiled_report(cli_step_plan(r->compiled));
        if (rep) fprintf(r->log, "%s", rep);
        nb_free_string(rep);
    }
    cli_step_free(r->compiled);
    nb_ddp_free(r->ddp);
    nb_optim_free(r->opt);
    for (int i = 0; r->params && i < r->nparams; i++) nb_release(r->params[i]);
    free(r->params);
    nb_module_free(r->net);
    cli_split_free(&r->train);
    cli_split_free(&r->test);
}

static int train(run *r, const char *chart, epoch_result *res) {
    const train_cfg *c = r->cfg;
    int rc = CLI_OK;
    double seconds = 0;
    for (int e = 1; e <= c->epochs && rc == CLI_OK; e++) {
        epoch_result *er = &res[e - 1];
        rc = train_epoch(r, e, er);
        if (rc != CLI_OK) break;
        seconds += er->seconds;
        if (c->metrics && r->rank == 0) rc = write_metrics(c->metrics, e, res);
    }
    if (rc != CLI_OK) return rc;
    if (r->rank != 0) return CLI_OK; /* rank 0 reports and saves */
    const epoch_result *last = &res[c->epochs - 1];
    double rate = (double)(r->n * c->epochs) / seconds;
    fprintf(r->log, "%s: test accuracy %.4f after %lld epoch%s, %.2f s training, %.0f samples/s\n", c->model,
            last->test_acc, (long long)c->epochs, c->epochs == 1 ? "" : "s", seconds, rate);
    if (chart) rc = write_chart(chart, (int)c->epochs, res);
    if (rc == CLI_OK && c->save) rc = cli_save_params(CMD, r->net, c->save);
    if (rc == CLI_OK && c->json)
        printf("{\"model\":\"%s\",\"epochs\":%lld,\"test_accuracy\":%.4f,\"train_seconds\":%.3f,\"samples_per_second\":%.1f}\n",
               c->model, (long long)c->epochs, last->test_acc, seconds, rate);
    return rc;
}

int cmd_train(int argc, char **argv) {
    train_cfg c = {.model = "mlp", .optimizer = "adam", .schedule = "cosine", .epochs = 5, .batch = 128,
                   .lr = NAN, .momentum = 0.9, .weight_decay = NAN};
    bool help;
    int rc = parse(argc, argv, &c, &help);
    if (rc != CLI_OK || help) return rc;
    /* the outputs are written after an epoch or after the run: refuse unwritable ones at the start */
    char *chart = c.metrics ? chart_path(c.metrics) : NULL;
    if (c.metrics && !chart) return cli_error(CMD, CLI_FAIL, "out of memory");
    if ((c.save && cli_output_check(CMD, "checkpoint", c.save) != CLI_OK) ||
        (c.metrics && (cli_output_check(CMD, "metrics file", c.metrics) != CLI_OK ||
                       cli_output_check(CMD, "chart", chart) != CLI_OK))) {
        free(chart);
        return CLI_FAIL;
    }
    run r = {.cfg = &c, .log = c.json ? stderr : stdout, .world = 1};
    rc = cli_dist_start(CMD, &argc, &argv, &r.rank, &r.world);
    if (rc == CLI_OK && r.rank != 0) r.log = fopen("/dev/null", "w"); /* the other ranks stay quiet */
    if (!r.log) rc = cli_error(CMD, CLI_FAIL, "cannot open /dev/null");
    epoch_result *res = rc == CLI_OK ? calloc((size_t)c.epochs, sizeof *res) : NULL;
    if (rc == CLI_OK) rc = res ? load_data(&r) : cli_error(CMD, CLI_FAIL, "out of memory");
    if (rc == CLI_OK) rc = setup(&r);
    if (rc == CLI_OK) rc = train(&r, chart, res);
    teardown(&r);
    if (r.rank != 0 && r.log) fclose(r.log);
    free(res);
    free(chart);
    nb_dist_finalize();
    return rc;
}
