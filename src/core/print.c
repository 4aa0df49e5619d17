/*
 * print.c — the text form of a tensor (nb_to_string, nb_print), following
 * PyTorch 2.x's repr (torch/_tensor_str.py with the default print options:
 * precision 4, threshold 1000, edgeitems 3, linewidth 80).
 */
#include "../ops/ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PRECISION = 4, THRESHOLD = 1000, EDGEITEMS = 3, LINEWIDTH = 80 };

/* ---- text: nb__text in libc memory (nb_to_string's result is the caller's, freed with free()) ---- */

static void sb_puts(nb__text *b, const char *s) { nb__text_printf(b, "%s", s); }
static void sb_spaces(nb__text *b, int n) {
    if (n > 0) nb__text_printf(b, "%*s", n, "");
}

/* ---- elements ---- */

typedef struct printer {
    const nb_tensor *t;
    bool floating;
    bool int_mode; /* float tensor whose shown values are all integers: "3." */
    bool sci;      /* scientific notation: "1.0000e+08" */
    int width;     /* every element is right-aligned to this width */
    bool summarize;
} printer;

static const char *elem_ptr(const nb_tensor *t, const int64_t *idx) {
    int64_t off = t->offset;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
    return (const char *)t->storage->data + off * (int64_t)nb_dtype_size(t->dtype);
}

/* Text of one element without padding, as Python formats the value torch hands it. */
static void format_elem(const printer *pr, const int64_t *idx, char *buf, size_t size) {
    const char *p = elem_ptr(pr->t, idx);
    if (!pr->floating) {
        if (pr->t->dtype == NB_BOOL) snprintf(buf, size, "%s", *(const uint8_t *)p ? "True" : "False");
        else if (pr->t->dtype == NB_I64) snprintf(buf, size, "%lld", (long long)*(const int64_t *)p);
        else snprintf(buf, size, "%lld", (long long)nb__load(p, pr->t->dtype));
        return;
    }
    double v = nb__load(p, pr->t->dtype);
    if (isnan(v)) snprintf(buf, size, "nan"); /* Python never writes "-nan" */
    else if (pr->sci) snprintf(buf, size, "%.*e", PRECISION, v);
    else if (pr->int_mode) snprintf(buf, size, isinf(v) ? "%.0f" : "%.0f.", v);
    else snprintf(buf, size, "%.*f", PRECISION, v);
}

/* Indices shown along an axis of size n: all, or the first and last EDGEITEMS when summarizing. */
static bool axis_elided(const printer *pr, int64_t n) { return pr->summarize && n > 2 * EDGEITEMS; }
static int64_t shown_count(const printer *pr, int64_t n) { return axis_elided(pr, n) ? 2 * EDGEITEMS : n; }
static int64_t shown_index(const printer *pr, int64_t n, int64_t k) {
    return axis_elided(pr, n) && k >= EDGEITEMS ? n - 2 * EDGEITEMS + k : k;
}

/* Visit every shown element in row-major order. */
typedef void (*visit_fn)(printer *pr, const int64_t *idx, void *ctx);
static void visit_shown(printer *pr, int d, int64_t *idx, visit_fn fn, void *ctx) {
    if (d == pr->t->ndim) {
        fn(pr, idx, ctx);
        return;
    }
    int64_t n = pr->t->shape[d];
    for (int64_t k = 0; k < shown_count(pr, n); k++) {
        idx[d] = shown_index(pr, n, k);
        visit_shown(pr, d + 1, idx, fn, ctx);
    }
}

/* torch _Formatter, pass 1: extent of the nonzero finite values and whether they are all integers. */
typedef struct value_stats {
    int64_t count;
    double min_abs, max_abs;
    bool all_int;
} value_stats;

static void gather_stats(printer *pr, const int64_t *idx, void *ctx) {
    value_stats *s = ctx;
    double v = nb__load(elem_ptr(pr->t, idx), pr->t->dtype);
    if (!isfinite(v) || v == 0) return;
    double a = fabs(v);
    if (s->count == 0 || a < s->min_abs) s->min_abs = a;
    if (s->count == 0 || a > s->max_abs) s->max_abs = a;
    if (v != ceil(v)) s->all_int = false;
    s->count++;
}

/* Pass 2: the width is the longest text among the nonzero finite values (every value for ints). */
static void measure(printer *pr, const int64_t *idx, void *ctx) {
    (void)ctx;
    if (pr->floating) {
        double v = nb__load(elem_ptr(pr->t, idx), pr->t->dtype);
        if (!isfinite(v) || v == 0) return;
    }
    char buf[64];
    format_elem(pr, idx, buf, sizeof buf);
    int w = (int)strlen(buf);
    if (w > pr->width) pr->width = w;
}

static void init_printer(printer *pr, const nb_tensor *t) {
    *pr = (printer){.t = t, .floating = nb_dtype_is_float(t->dtype), .width = 1,
                    .summarize = nb__numel(t) > THRESHOLD};
    int64_t idx[NB_MAX_DIMS] = {0};
    if (pr->floating) {
        value_stats s = {.all_int = true};
        visit_shown(pr, 0, idx, gather_stats, &s);
        if (s.count == 0) { /* no nonzero finite value: integer mode, width 1 */
            pr->int_mode = true;
            return;
        }
        pr->int_mode = s.all_int;
        pr->sci = s.max_abs / s.min_abs > 1000.0 || s.max_abs > 1.0e8 || (!s.all_int && s.min_abs < 1.0e-4);
        if (pr->sci) pr->int_mode = false;
    }
    visit_shown(pr, 0, idx, measure, NULL);
}

static void put_elem(nb__text *b, const printer *pr, const int64_t *idx) {
    char buf[64];
    format_elem(pr, idx, buf, sizeof buf);
    sb_spaces(b, pr->width - (int)strlen(buf));
    sb_puts(b, buf);
}

/* ---- layout (torch _vector_str / _tensor_str_with_formatter) ---- */

static void put_vector(nb__text *b, const printer *pr, int64_t *idx, int indent) {
    int d = pr->t->ndim - 1;
    int64_t n = pr->t->shape[d], shown = shown_count(pr, n);
    int64_t items = shown + axis_elided(pr, n); /* the " ..." marker counts as an item */
    int per_line = (LINEWIDTH - indent) / (pr->width + 2);
    if (per_line < 1) per_line = 1;
    sb_puts(b, "[");
    for (int64_t k = 0, item = 0; item < items; item++) {
        if (item > 0) {
            sb_puts(b, ",");
            if (item % per_line == 0) {
                sb_puts(b, "\n");
                sb_spaces(b, indent + 1);
            } else {
                sb_puts(b, " ");
            }
        }
        if (axis_elided(pr, n) && item == EDGEITEMS) {
            sb_puts(b, " ...");
            continue;
        }
        idx[d] = shown_index(pr, n, k++);
        put_elem(b, pr, idx);
    }
    sb_puts(b, "]");
}

/* Newlines and indent between the slices of a rank-`rank` tensor: "," + "\n" * (rank-1) + indent. */
static void put_slice_sep(nb__text *b, int rank, int indent) {
    sb_puts(b, ",");
    for (int i = 0; i < rank - 1; i++) sb_puts(b, "\n");
    sb_spaces(b, indent + 1);
}

static void put_tensor(nb__text *b, const printer *pr, int d, int64_t *idx, int indent) {
    if (d == pr->t->ndim - 1) {
        put_vector(b, pr, idx, indent);
        return;
    }
    int64_t n = pr->t->shape[d], shown = shown_count(pr, n);
    int rank = pr->t->ndim - d;
    sb_puts(b, "[");
    for (int64_t k = 0; k < shown; k++) {
        if (k > 0) put_slice_sep(b, rank, indent);
        if (axis_elided(pr, n) && k == EDGEITEMS) { /* the "..." slice between the edges */
            sb_puts(b, "...");
            put_slice_sep(b, rank, indent);
        }
        idx[d] = shown_index(pr, n, k);
        put_tensor(b, pr, d + 1, idx, indent + 1);
    }
    sb_puts(b, "]");
}

/* ---- suffixes (torch _str_intern / _add_suffixes) ---- */

static void add_suffix(nb__text *b, int *last_line, const char *s, int indent) {
    int len = (int)strlen(s);
    if (*last_line + len + 2 > LINEWIDTH) {
        sb_puts(b, ",\n");
        sb_spaces(b, indent);
        *last_line = indent + len;
    } else {
        sb_puts(b, ", ");
        *last_line += len + 2;
    }
    sb_puts(b, s);
}

static void put_suffixes(nb__text *b, const nb_tensor *t, int indent) {
    if (b->oom) return;
    const char *nl = strrchr(b->s, '\n');
    /* torch's len(s) - s.rfind("\n") + 1 (rfind is -1 without a newline) */
    int last_line = (int)((ptrdiff_t)b->n - (nl ? nl - b->s : -1) + 1);
    char s[128];
    nb_device dev = t->storage->device;
    if (dev.type != NB_DEVICE_CPU) {
        const nb_backend *be = nb_backend_for(dev);
        snprintf(s, sizeof s, "device='%s:%d'", be ? nb_backend_name(be) : "unknown", dev.index);
        add_suffix(b, &last_line, s, indent);
    }
    bool empty = nb__numel(t) == 0;
    if (empty && t->ndim != 1) {
        int k = snprintf(s, sizeof s, "size=(");
        for (int d = 0; d < t->ndim; d++)
            k += snprintf(s + k, sizeof s - (size_t)k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        snprintf(s + k, sizeof s - (size_t)k, ")");
        add_suffix(b, &last_line, s, indent);
    }
    bool default_dtype = t->dtype == NB_F32 || (!empty && (t->dtype == NB_I64 || t->dtype == NB_BOOL));
    if (!default_dtype) {
        snprintf(s, sizeof s, "dtype=%s", nb_dtype_name(t->dtype));
        add_suffix(b, &last_line, s, indent);
    }
    if (t->node) {
        snprintf(s, sizeof s, "grad_fn=<%s>", nb__ops[t->node->op].name);
        add_suffix(b, &last_line, s, indent);
    } else if (t->requires_grad) {
        add_suffix(b, &last_line, "requires_grad=True", indent);
    }
}

char *nb_to_string(const nb_tensor *t) {
    NB_CHECK_ARG("to_string", t);
    if (!(t = nb__readable("to_string", t))) return NULL;
    if (!nb__is_host(t->storage->device)) {
        nb__error(NB_ERR_DEVICE, "to_string: tensor %s is not in host memory", NB_SHAPE_STR(t));
        return NULL;
    }
    nb__text b = {.libc = true};
    const char *prefix = "tensor(";
    int indent = (int)strlen(prefix);
    sb_puts(&b, prefix);
    if (nb__numel(t) == 0) {
        sb_puts(&b, "[]");
    } else {
        printer pr;
        init_printer(&pr, t);
        int64_t idx[NB_MAX_DIMS] = {0};
        if (t->ndim == 0) put_elem(&b, &pr, idx);
        else put_tensor(&b, &pr, 0, idx, indent);
    }
    put_suffixes(&b, t, indent);
    sb_puts(&b, ")");
    if (b.oom) {
        free(b.s);
        nb__error(NB_ERR_OOM, "to_string: out of memory formatting %s", NB_SHAPE_STR(t));
        return NULL;
    }
    return b.s;
}

static nb_status print_impl(const nb_tensor *t, FILE *f) {
    if (!f) return nb__error(NB_ERR_NULL, "print: FILE is NULL");
    if (!t) return nb__error(NB_ERR_NULL, "print: tensor is NULL");
    char *s = nb_to_string(t);
    if (!s) return nb_last_status();
    int rc = fprintf(f, "%s\n", s);
    free(s);
    return rc < 0 ? nb__error(NB_ERR_IO, "print: write failed") : NB_OK;
}

nb_status nb_print(const nb_tensor *t, FILE *f) {
    NB_OWN_STATUS("print", print_impl(t, f));
}
