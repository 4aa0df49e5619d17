/* cmd_eval.c — `nabla eval`: load a checkpoint, tell its model, print test accuracy and the confusion matrix. */
#include "cli.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "eval";

/* Fashion-MNIST's class names, shown only for the data set at its Debian location. */
static const char *const FASHION_CLASSES[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

static void print_confusion(const int64_t *m, int64_t classes, bool fashion) {
    printf("confusion matrix (rows: true class, columns: predicted class)\n%-14s", "");
    for (int64_t j = 0; j < classes; j++) printf(" %5lld", (long long)j);
    putchar('\n');
    for (int64_t i = 0; i < classes; i++) {
        if (fashion && classes == 10) printf("%lld %-12s", (long long)i, FASHION_CLASSES[i]);
        else printf("%lld %-12s", (long long)i, "");
        for (int64_t j = 0; j < classes; j++) printf(" %5lld", (long long)m[i * classes + j]);
        putchar('\n');
    }
}

static int report(const char *path, const char *model, const cli_geom *g, const cli_split *test, nb_module *net,
                  bool fashion) {
    int64_t *confusion = calloc((size_t)(g->classes * g->classes), sizeof *confusion);
    if (!confusion) return cli_error(CMD, CLI_FAIL, "out of memory");
    int64_t hits = cli_evaluate(net, model, g, test, confusion);
    int rc = hits < 0 ? cli_nb_error(CMD, "evaluation") : CLI_OK;
    if (rc == CLI_OK) {
        printf("model: %s (%s)\ndata: %s, %lld test images of %lldx%lld, %lld classes\n", model, path,
               fashion ? "Fashion-MNIST" : "IDX data set", (long long)test->n, (long long)g->height,
               (long long)g->width, (long long)g->classes);
        printf("test accuracy: %.4f (%lld/%lld)\n", (double)hits / (double)test->n, (long long)hits,
               (long long)test->n);
        print_confusion(confusion, g->classes, fashion);
    }
    free(confusion);
    return rc;
}

static int evaluate(const char *path, const char *data, nb_safetensors *h) {
    const char *model = cli_model_of_checkpoint(CMD, h, path);
    int64_t classes = model ? cli_checkpoint_classes(CMD, h, model, path) : -1;
    if (classes < 1) return CLI_FAIL;
    cli_split test;
    if (cli_load_split(CMD, data, false, &test) != CLI_OK) return CLI_FAIL;
    cli_geom g = {test.height, test.width, classes};
    int rc = test.classes > classes
                 ? cli_error(CMD, CLI_FAIL, "the test labels go up to %lld but checkpoint %s has %lld classes",
                             (long long)test.classes - 1, path, (long long)classes)
                 : cli_model_fits(CMD, model, &g);
    nb_module *net = rc == CLI_OK ? cli_model_new(model, &g) : NULL;
    if (rc == CLI_OK && !net) rc = cli_nb_error(CMD, "building the model");
    if (rc == CLI_OK) rc = cli_load_params(CMD, net, model, h, path);
    if (rc == CLI_OK) rc = report(path, model, &g, &test, net, !data || !strcmp(data, NB_FASHION_MNIST_DIR));
    cli_split_free(&test);
    nb_module_free(net);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    const char *path = NULL, *data = NULL;
    const cli_opt opts[] = {
        {"--model", OPT_STRING, &path, "checkpoint written by 'nabla train --save' (required)", 0, 0},
        {"--data", OPT_STRING, &data, "directory of the test split t10k-*-ubyte[.gz] (" NB_FASHION_MNIST_DIR ")", 0, 0},
    };
    bool help;
    int rc = cli_parse(CMD, "usage: nabla eval --model FILE [--data DIR]\n", argc, argv, opts, 2, &help);
    if (rc != CLI_OK || help) return rc;
    if (!path) return cli_error(CMD, CLI_USAGE, "--model FILE is required (a checkpoint from 'nabla train --save')");
    nb_safetensors *h = nb_safetensors_open(path);
    if (!h) return cli_error(CMD, CLI_FAIL, "%s", nb_last_message());
    rc = evaluate(path, data, h);
    nb_safetensors_close(h);
    return rc;
}
