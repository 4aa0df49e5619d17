/*
 * text.c — a growing text buffer (nb__text, internal.h): the DOT writers,
 * the compile report and the run-time kernel compiler's C source build
 * their text with it.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void nb__text_printf(nb__text *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->n;
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? room : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if (b->s && (size_t)k < room) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + (size_t)k + 1) cap *= 2;
        char *s = b->libc ? realloc(b->s, cap) : nb__realloc(b->s, cap);
        if (!s) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

char *nb__text_done(nb__text *b, const char *op) {
    if (!b->oom && b->s) return b->s;
    nb__free(b->s);
    nb__error(NB_ERR_OOM, "%s: out of memory for the text", op);
    return NULL;
}
