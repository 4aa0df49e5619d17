/* nabla.c — the `nabla` command: dispatch to a subcommand, plus the error helpers every command uses. */
#include "cli.h"

#include <stdarg.h>
#include <string.h>

int cli_error(const char *cmd, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "nabla %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int cli_nb_error(const char *cmd, const char *what) {
    return cli_error(cmd, CLI_FAIL, "%s: %s", what, nb_last_message());
}

static const char USAGE[] =
    "usage: nabla <command> [options]\n"
    "commands:\n"
    "  train    train an MLP or CNN on Fashion-MNIST\n"
    "  eval     evaluate a saved checkpoint on the test split\n"
    "  doctor   show the build, the CPU, the backends and whether the data set is installed\n"
    "run 'nabla <command> --help' for its options\n";

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(USAGE, stderr);
        return CLI_USAGE;
    }
    const char *c = argv[1];
    if (!strcmp(c, "train")) return cmd_train(argc - 2, argv + 2);
    if (!strcmp(c, "eval")) return cmd_eval(argc - 2, argv + 2);
    if (!strcmp(c, "doctor")) return cmd_doctor(argc - 2, argv + 2);
    if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
        fputs(USAGE, stdout);
        return CLI_OK;
    }
    if (!strcmp(c, "--version")) {
        printf("nabla %s\n", nb_version());
        return CLI_OK;
    }
    fprintf(stderr, "nabla: unknown command '%s' (commands: train, eval, doctor)\n", c);
    return CLI_USAGE;
}
