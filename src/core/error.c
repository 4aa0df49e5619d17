/* error.c — the per-thread last error: typed status plus a formatted message. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local nb_status tl_status = NB_OK;
static _Thread_local char tl_msg[sizeof(((nb__error_frame *)0)->msg)];

static nb_status set_v(nb_status s, const char *fmt, va_list ap) {
    tl_status = s;
    vsnprintf(tl_msg, sizeof tl_msg, fmt, ap);
    return s;
}

nb_status nb__error(nb_status s, const char *fmt, ...) {
    if (tl_status != NB_OK) return s; /* keep the first error of a chain */
    va_list ap;
    va_start(ap, fmt);
    set_v(s, fmt, ap);
    va_end(ap);
    return s;
}

nb_status nb__error_set(nb_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_v(s, fmt, ap);
    va_end(ap);
    return s;
}

void nb__own_begin(nb__error_frame *f) {
    f->status = tl_status;
    if (tl_status != NB_OK) memcpy(f->msg, tl_msg, sizeof tl_msg);
    nb_clear_error();
}

nb_status nb__own_end(const nb__error_frame *f, const char *op, nb_status st) {
    if (st == NB_OK) {
        tl_status = f->status;
        if (f->status != NB_OK) memcpy(tl_msg, f->msg, sizeof tl_msg);
    } else if (tl_status == NB_OK) {
        nb__error_set(st, "%s: failed (%s)", op, nb_status_name(st));
    }
    return st;
}

nb_status nb_last_status(void) { return tl_status; }
const char *nb_last_message(void) { return tl_status == NB_OK ? "" : tl_msg; }
void nb_clear_error(void) {
    tl_status = NB_OK;
    tl_msg[0] = 0;
}

const char *nb_status_name(nb_status s) {
    static const char *names[NB_STATUS_COUNT] = {
        "NB_OK", "NB_ERR_NULL", "NB_ERR_ARG", "NB_ERR_SHAPE", "NB_ERR_DTYPE",
        "NB_ERR_AXIS", "NB_ERR_INDEX", "NB_ERR_OVERFLOW", "NB_ERR_OOM", "NB_ERR_DEVICE",
        "NB_ERR_UNSUPPORTED", "NB_ERR_STATE", "NB_ERR_IO", "NB_ERR_FORMAT"};
    return (s >= 0 && s < NB_STATUS_COUNT) ? names[s] : "NB_UNKNOWN";
}

const char *nb__shape_str(char *buf, const int64_t *shape, int ndim) {
    int n = 0;
    buf[n++] = '[';
    for (int i = 0; i < ndim && n < 150; i++)
        n += snprintf(buf + n, 192 - (size_t)n, i ? ", %s" : "%s", nb__dim_str((char[64]){0}, shape[i]));
    snprintf(buf + n, 192 - (size_t)n, "]");
    return buf;
}

_Noreturn void nb__abort(const char *file, int line, const char *what) {
    fprintf(stderr, "nabla: internal invariant failed at %s:%d: %s\n", file, line, what);
    abort();
}

const char *nb_version(void) { return "0.1.0"; }
