/* cmd_eval.c — `nabla eval`: load a checkpoint, tell its model, print test accuracy and the 10x10 confusion matrix. */
#include "cli.h"

#include <stdint.h>

static const char *CMD = "eval";

static const char *const CLASSES[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                        "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

static void print_confusion(const int64_t *m) {
    printf("confusion matrix (rows: true class, columns: predicted class)\n%-12s", "");
    for (int j = 0; j < 10; j++) printf(" %5d", j);
    putchar('\n');
    for (int i = 0; i < 10; i++) {
        printf("%d %-10s", i, CLASSES[i]);
        for (int j = 0; j < 10; j++) printf(" %5lld", (long long)m[i * 10 + j]);
        putchar('\n');
    }
}

static int evaluate(const char *path, const char *data, nb_safetensors *h) {
    const char *model = cli_model_of_checkpoint(CMD, h, path);
    if (!model) return CLI_FAIL;
    nb_module *net = cli_model_new(model);
    if (!net) return cli_nb_error(CMD, "building the model");
    nb_tensor *x = NULL, *y = NULL;
    int rc = cli_load_params(CMD, net, model, h, path);
    if (rc == CLI_OK) rc = cli_load_split(CMD, data, false, &x, &y);
    int64_t confusion[100] = {0}, hits = rc == CLI_OK ? cli_evaluate(net, model, x, y, confusion) : 0;
    if (rc == CLI_OK && hits < 0) rc = cli_nb_error(CMD, "evaluation");
    if (rc == CLI_OK) {
        int64_t n = nb_size(x, 0);
        printf("model: %s (%s)\ntest accuracy: %.4f (%lld/%lld)\n", model, path, (double)hits / (double)n,
               (long long)hits, (long long)n);
        print_confusion(confusion);
    }
    nb_release(x);
    nb_release(y);
    nb_module_free(net);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    const char *path = NULL, *data = NULL;
    const cli_opt opts[] = {
        {"--model", OPT_STRING, &path, "checkpoint written by 'nabla train --save' (required)", 0, 0},
        {"--data", OPT_STRING, &data, "Fashion-MNIST directory (" NB_FASHION_MNIST_DIR ")", 0, 0},
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
