/* golden_reader.c — bounds-checked parser of the NBG1 golden files (see golden_reader.h). */
#include "golden_reader.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_NAME = 4096, MAX_TENSORS = 4096, MAX_CASES = 1 << 20 };

typedef struct cursor {
    const unsigned char *p;
    size_t left;
    char *err;
    size_t errlen;
} cursor;

static int fail(cursor *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (c->errlen) vsnprintf(c->err, c->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int take(cursor *c, size_t n, const unsigned char **at) {
    if (n > c->left) return fail(c, "truncated: need %zu bytes, %zu left", n, c->left);
    *at = c->p;
    c->p += n;
    c->left -= n;
    return 0;
}

static int read_u32(cursor *c, uint32_t *v) {
    const unsigned char *b = NULL;
    if (take(c, 4, &b)) return -1;
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return 0;
}

static int read_i64(cursor *c, int64_t *v) {
    const unsigned char *b = NULL;
    if (take(c, 8, &b)) return -1;
    uint64_t u = 0;
    for (int i = 7; i >= 0; i--) u = u << 8 | b[i];
    memcpy(v, &u, sizeof u);
    return 0;
}

/* A length-prefixed string as a new NUL-terminated copy. */
static int read_str(cursor *c, char **s) {
    uint32_t n;
    const unsigned char *b = NULL;
    if (read_u32(c, &n)) return -1;
    if (n > MAX_NAME) return fail(c, "name of %u bytes", n);
    if (take(c, n, &b)) return -1;
    *s = malloc((size_t)n + 1);
    if (!*s) return fail(c, "out of memory");
    memcpy(*s, b, n);
    (*s)[n] = '\0';
    return 0;
}

static int read_tensor(cursor *c, nbg_tensor *t) {
    uint32_t dt, nd;
    if (read_str(c, &t->name) || read_u32(c, &dt) || read_u32(c, &nd)) return -1;
    if (dt >= NB_DTYPE_COUNT) return fail(c, "%s: dtype code %u", t->name, dt);
    if (nd > NB_MAX_DIMS) return fail(c, "%s: rank %u > %d", t->name, nd, NB_MAX_DIMS);
    t->dtype = (nb_dtype)dt;
    t->ndim = (int)nd;
    size_t esize = nb_dtype_size(t->dtype), room = c->left / esize;
    int64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (read_i64(c, &t->shape[d])) return -1;
        if (t->shape[d] < 0) return fail(c, "%s: negative dimension %lld", t->name, (long long)t->shape[d]);
        if (t->shape[d] > 0 && (uint64_t)numel > room / (uint64_t)t->shape[d])
            return fail(c, "%s: %lld x %lld elements exceed the file", t->name, (long long)numel,
                        (long long)t->shape[d]);
        numel *= t->shape[d];
    }
    t->numel = numel;
    size_t nbytes = (size_t)numel * esize;
    const unsigned char *b = NULL;
    if (take(c, nbytes, &b)) return -1;
    t->data = malloc(nbytes ? nbytes : 1);
    if (!t->data) return fail(c, "out of memory");
    memcpy(t->data, b, nbytes);
    return 0;
}

static int read_case(cursor *c, nbg_case *k) {
    uint32_t n;
    if (read_str(c, &k->name) || read_u32(c, &n)) return -1;
    if (n > MAX_TENSORS) return fail(c, "%s: %u tensors", k->name, n);
    k->tensors = calloc(n ? n : 1, sizeof *k->tensors);
    if (!k->tensors) return fail(c, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        k->ntensors = (int)i + 1; /* so nbg_free releases a partly read tensor */
        if (read_tensor(c, &k->tensors[i])) return -1;
    }
    k->ntensors = (int)n;
    return 0;
}

static int little_endian(void) {
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

int nbg_parse(const void *buf, size_t size, nbg_file *out, char *err, size_t errlen) {
    cursor c = {buf, size, err, errlen};
    const unsigned char *magic = NULL;
    uint32_t n;
    memset(out, 0, sizeof *out);
    if (errlen) err[0] = '\0';
    if (!little_endian()) return fail(&c, "golden data is little-endian; this host is not");
    if (!buf || take(&c, 4, &magic) || memcmp(magic, "NBG1", 4)) return fail(&c, "not an NBG1 file");
    if (read_u32(&c, &n)) return -1;
    if (n > MAX_CASES) return fail(&c, "%u cases", n);
    out->cases = calloc(n ? n : 1, sizeof *out->cases);
    if (!out->cases) return fail(&c, "out of memory");
    for (uint32_t i = 0; i < n; i++) {
        out->ncases = (int)i + 1;
        if (read_case(&c, &out->cases[i])) {
            nbg_free(out);
            return -1;
        }
    }
    out->ncases = (int)n;
    if (c.left) {
        nbg_free(out);
        return fail(&c, "%zu trailing bytes", c.left);
    }
    return 0;
}

int nbg_load(const char *path, nbg_file *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s", path);
        return -1;
    }
    unsigned char *buf = NULL;
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0) buf = malloc((size_t)size + 1);
    int rc = -1;
    if (!buf)
        snprintf(err, errlen, "cannot read %s", path);
    else if (fread(buf, 1, (size_t)size, f) != (size_t)size)
        snprintf(err, errlen, "short read on %s", path);
    else
        rc = nbg_parse(buf, (size_t)size, out, err, errlen);
    free(buf);
    fclose(f);
    return rc;
}

void nbg_free(nbg_file *f) {
    for (int i = 0; i < f->ncases; i++) {
        nbg_case *k = &f->cases[i];
        for (int j = 0; j < k->ntensors; j++) {
            free(k->tensors[j].name);
            free(k->tensors[j].data);
        }
        free(k->tensors);
        free(k->name);
    }
    free(f->cases);
    memset(f, 0, sizeof *f);
}

const nbg_tensor *nbg_find(const nbg_case *c, const char *name) {
    for (int i = 0; i < c->ntensors; i++)
        if (c->tensors[i].name && !strcmp(c->tensors[i].name, name)) return &c->tensors[i];
    return NULL;
}

double nbg_at(const nbg_tensor *t, int64_t i) {
    const char *p = t->data;
    switch (t->dtype) {
    case NB_F32: { float v; memcpy(&v, p + 4 * i, 4); return v; }
    case NB_F64: { double v; memcpy(&v, p + 8 * i, 8); return v; }
    case NB_I8: return (int8_t)p[i];
    case NB_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case NB_I64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case NB_U8: return (unsigned char)p[i];
    case NB_BOOL: return p[i] != 0;
    default: return NAN; /* f16/bf16: never written by the generator */
    }
}

nb_tensor *nbg_to_tensor(const nbg_tensor *t) {
    return nb_from_data(t->data, t->shape, t->ndim, t->dtype);
}
