/* args.c — command-line options: "--name value" / "--name=value", strict numbers with ranges, --help. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void print_usage(const char *usage, const cli_opt *opts, int nopts) {
    fputs(usage, stdout);
    fputs("options:\n", stdout);
    for (int i = 0; i < nopts; i++) {
        const char *arg = opts[i].type == OPT_INT ? " N" : opts[i].type == OPT_DOUBLE ? " X"
                          : opts[i].type == OPT_STRING ? " VALUE" : "";
        char flag[64];
        snprintf(flag, sizeof flag, "%s%s", opts[i].name, arg);
        printf("  %-20s %s\n", flag, opts[i].help);
    }
    printf("  %-20s %s\n", "--help", "show this help");
}

static const cli_opt *find(const cli_opt *opts, int nopts, const char *name, size_t len) {
    for (int i = 0; i < nopts; i++)
        if (strlen(opts[i].name) == len && !strncmp(opts[i].name, name, len)) return &opts[i];
    return NULL;
}

/* Store text v into option o; CLI_USAGE after one error line when it is not a valid value. */
static int set_value(const char *cmd, const cli_opt *o, const char *v) {
    if (o->type == OPT_STRING) {
        if (!*v) return cli_error(cmd, CLI_USAGE, "%s expects a non-empty value", o->name);
        *(const char **)o->dst = v;
        return CLI_OK;
    }
    char *end = NULL;
    errno = 0;
    if (o->type == OPT_INT) {
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno || x < o->min || x > o->max)
            return cli_error(cmd, CLI_USAGE, "%s expects an integer in [%.0f, %.0f], got '%s'", o->name, o->min, o->max, v);
        *(int64_t *)o->dst = x;
        return CLI_OK;
    }
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x) || x < o->min || x > o->max)
        return cli_error(cmd, CLI_USAGE, "%s expects a number in [%g, %g], got '%s'", o->name, o->min, o->max, v);
    *(double *)o->dst = x;
    return CLI_OK;
}

int cli_parse(const char *cmd, const char *usage, int argc, char **argv, const cli_opt *opts, int nopts, bool *help) {
    *help = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_usage(usage, opts, nopts);
            *help = true;
            return CLI_OK;
        }
        if (strncmp(a, "--", 2) != 0)
            return cli_error(cmd, CLI_USAGE, "unexpected argument '%s' (see 'nabla %s --help')", a, cmd);
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_opt *o = find(opts, nopts, a, len);
        if (!o) return cli_error(cmd, CLI_USAGE, "unknown option '%.*s' (see 'nabla %s --help')", (int)len, a, cmd);
        if (o->type == OPT_FLAG) {
            if (eq) return cli_error(cmd, CLI_USAGE, "%s takes no value", o->name);
            *(bool *)o->dst = true;
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) return cli_error(cmd, CLI_USAGE, "%s needs a value", o->name);
        int rc = set_value(cmd, o, v);
        if (rc != CLI_OK) return rc;
    }
    return CLI_OK;
}
