/*
 * dim.c — symbolic dims: named symbols and the interned affine expressions
 * a*M + b over them (M a product of symbol powers) that shape inference
 * needs (cat adds, reshape's -1 divides, slices subtract, flatten
 * multiplies), their evaluation under a binding at run time, and their
 * printing.  The tables are process-wide, append-only and guarded by one
 * mutex; they are only touched while tracing or binding, never by eager ops.
 * They live as long as the process, so they come from the C library's
 * malloc, not from nb_set_allocator's function (whose blocks must all be
 * gone before another is installed).
 */
#include "../core/internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <ctype.h>
#include <string.h>

#define NB_DIM_FACTORS 4

typedef struct dim_expr {
    int64_t a, b;              /* a * M + b, a != 0 */
    int nf;                    /* factors of M, sorted by symbol id */
    int32_t sym[NB_DIM_FACTORS];
    int32_t pw[NB_DIM_FACTORS];
} dim_expr;

static pthread_mutex_t dim_lock = PTHREAD_MUTEX_INITIALIZER;
static char **sym_names;
static int n_syms, cap_syms, n_anon;
static dim_expr *exprs;
static int n_exprs, cap_exprs;
static atomic_int n_published; /* n_exprs, readable without the lock (nb__dim_sym) */

static bool grow(void **p, int *cap, int need, size_t elt) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elt);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

/* id of the interned expression e (caller holds the lock); -1 on OOM */
static int intern_locked(const dim_expr *e) {
    for (int i = 0; i < n_exprs; i++) {
        const dim_expr *x = &exprs[i];
        if (x->a == e->a && x->b == e->b && x->nf == e->nf &&
            !memcmp(x->sym, e->sym, sizeof(int32_t) * (size_t)e->nf) &&
            !memcmp(x->pw, e->pw, sizeof(int32_t) * (size_t)e->nf))
            return i;
    }
    if (!grow((void **)&exprs, &cap_exprs, n_exprs + 1, sizeof *exprs)) return -1;
    exprs[n_exprs] = *e;
    atomic_store_explicit(&n_published, n_exprs + 1, memory_order_release);
    return n_exprs++;
}

/* the dim value of e: a plain size when M is empty */
static int64_t encode(const char *op, dim_expr e) {
    if (e.nf == 0 || e.a == 0) return e.nf == 0 ? e.a + e.b : e.b;
    for (int i = e.nf; i < NB_DIM_FACTORS; i++) e.sym[i] = e.pw[i] = 0;
    pthread_mutex_lock(&dim_lock);
    int id = intern_locked(&e);
    pthread_mutex_unlock(&dim_lock);
    if (id < 0) {
        nb__error(NB_ERR_OOM, "%s: out of memory for a symbolic dim", op);
        return -1;
    }
    return NB_DIM_SYM_BASE - id;
}

static dim_expr decode(int64_t d) {
    dim_expr e = {0};
    if (!nb__dim_sym(d)) {
        e.b = d;
        return e;
    }
    pthread_mutex_lock(&dim_lock);
    int64_t id = NB_DIM_SYM_BASE - d; /* < n_exprs: nb__dim_sym only admits interned ids */
    if (id < n_exprs) e = exprs[id];
    pthread_mutex_unlock(&dim_lock);
    return e;
}

int nb__dim_count(void) { return atomic_load_explicit(&n_published, memory_order_acquire); }

static bool is_identifier(const char *s) {
    if (!isalpha((unsigned char)*s) && *s != '_') return false;
    while (*++s)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

int64_t nb_dim(const char *name) {
    char anon[32];
    if (name && *name && strcmp(name, "?") && !is_identifier(name)) {
        nb__error(NB_ERR_ARG, "dim: name '%s' is not an identifier ([A-Za-z_][A-Za-z0-9_]*); dims derived from "
                  "others come from ops or nb_dim_add / nb_dim_mul", name);
        return -1;
    }
    if (!name || !*name || !strcmp(name, "?")) {
        pthread_mutex_lock(&dim_lock);
        snprintf(anon, sizeof anon, "?%d", ++n_anon);
        pthread_mutex_unlock(&dim_lock);
        name = anon;
    }
    pthread_mutex_lock(&dim_lock);
    int s = 0;
    while (s < n_syms && strcmp(sym_names[s], name)) s++;
    if (s == n_syms) {
        char *copy = strdup(name);
        if (!copy || !grow((void **)&sym_names, &cap_syms, n_syms + 1, sizeof *sym_names)) {
            pthread_mutex_unlock(&dim_lock);
            free(copy);
            nb__error(NB_ERR_OOM, "dim: out of memory naming symbolic dim '%s'", name);
            return -1;
        }
        sym_names[n_syms++] = copy;
    }
    pthread_mutex_unlock(&dim_lock);
    return encode("dim", (dim_expr){.a = 1, .nf = 1, .sym = {s}, .pw = {1}});
}

bool nb_dim_is_symbolic(int64_t d) { return nb__dim_sym(d); }

int64_t nb_dim_add(int64_t a, int64_t b) { return nb__dim_add("dim_add", a, b); }
int64_t nb_dim_mul(int64_t a, int64_t b) { return nb__dim_mul("dim_mul", a, b); }

const char *nb__dim_str(char *buf, int64_t d) {
    if (!nb__dim_sym(d)) {
        snprintf(buf, 64, "%lld", (long long)d);
        return buf;
    }
    dim_expr e = decode(d);
    size_t n = 0;
    if (e.a != 1) n += (size_t)snprintf(buf + n, 64 - n, e.a == -1 ? "-" : "%lld*", (long long)e.a);
    pthread_mutex_lock(&dim_lock);
    for (int i = 0; i < e.nf && n < 64; i++) {
        n += (size_t)snprintf(buf + n, 64 - n, "%s%s", i ? "*" : "", sym_names[e.sym[i]]);
        if (e.pw[i] != 1 && n < 64) n += (size_t)snprintf(buf + n, 64 - n, "^%d", e.pw[i]);
    }
    pthread_mutex_unlock(&dim_lock);
    if (e.b && n < 64) snprintf(buf + n, 64 - n, "%+lld", (long long)e.b);
    return buf;
}

const char *nb_dim_name(int64_t d, char *buf, size_t size) {
    char tmp[64];
    if (!buf || !size) return NULL;
    snprintf(buf, size, "%s", nb__dim_str(tmp, d));
    return buf;
}

static bool same_monomial(const dim_expr *x, const dim_expr *y) {
    return x->nf == y->nf && !memcmp(x->sym, y->sym, sizeof(int32_t) * (size_t)x->nf) &&
           !memcmp(x->pw, y->pw, sizeof(int32_t) * (size_t)x->nf);
}

static int64_t unsupported(const char *op, const char *what, int64_t a, int64_t b) {
    char s1[64], s2[64];
    nb__error(NB_ERR_SHAPE, "%s: cannot %s symbolic dims %s and %s (supported: a*M + b over one "
              "product M of symbols)", op, what, nb__dim_str(s1, a), nb__dim_str(s2, b));
    return -1;
}

static int64_t overflow(const char *op, int64_t a, int64_t b) {
    char s1[64], s2[64];
    nb__error(NB_ERR_OVERFLOW, "%s: dim arithmetic on %s and %s overflows int64", op, nb__dim_str(s1, a),
              nb__dim_str(s2, b));
    return -1;
}

int64_t nb__dim_add(const char *op, int64_t a, int64_t b) {
    dim_expr x = decode(a), y = decode(b), r;
    if (x.nf == 0) { r = y; y = x; x = r; }  /* the symbolic one (if any) first */
    if (y.nf != 0 && !same_monomial(&x, &y)) return unsupported(op, "add", a, b);
    r = x;
    if ((y.nf && __builtin_add_overflow(x.a, y.a, &r.a)) || __builtin_add_overflow(x.b, y.b, &r.b))
        return overflow(op, a, b);
    return encode(op, r);
}

int64_t nb__dim_sub(const char *op, int64_t a, int64_t b) {
    int64_t nb_ = nb__dim_mul(op, b, -1);
    return nb_ == -1 && b != 1 ? -1 : nb__dim_add(op, a, nb_);
}

int64_t nb__dim_mul(const char *op, int64_t a, int64_t b) {
    dim_expr x = decode(a), y = decode(b), r = {0};
    if (x.nf == 0) { r = y; y = x; x = r; }
    if (y.nf == 0) { /* (a M + b) * k */
        r = x;
        if (__builtin_mul_overflow(x.a, y.b, &r.a) || __builtin_mul_overflow(x.b, y.b, &r.b))
            return overflow(op, a, b);
        return encode(op, r);
    }
    if (x.b || y.b) return unsupported(op, "multiply", a, b);
    r.nf = 0;
    int i = 0, j = 0;
    while (i < x.nf || j < y.nf) { /* merge the sorted factor lists */
        if (r.nf == NB_DIM_FACTORS) return unsupported(op, "multiply", a, b);
        if (j == y.nf || (i < x.nf && x.sym[i] < y.sym[j])) { r.sym[r.nf] = x.sym[i]; r.pw[r.nf++] = x.pw[i++]; }
        else if (i == x.nf || y.sym[j] < x.sym[i]) { r.sym[r.nf] = y.sym[j]; r.pw[r.nf++] = y.pw[j++]; }
        else { r.sym[r.nf] = x.sym[i]; r.pw[r.nf++] = x.pw[i++] + y.pw[j++]; }
    }
    if (__builtin_mul_overflow(x.a, y.a, &r.a)) return overflow(op, a, b);
    return encode(op, r);
}

int64_t nb__dim_div(const char *op, int64_t a, int64_t b) {
    dim_expr x = decode(a), y = decode(b), r = {0};
    if (y.nf == 0) {
        if (y.b == 0) return unsupported(op, "divide", a, b);
        if (x.a % y.b || x.b % y.b) return unsupported(op, "divide", a, b);
        r = x;
        r.a = x.nf ? x.a / y.b : 0;
        r.b = x.b / y.b;
        return x.nf ? encode(op, r) : x.b / y.b;
    }
    if (x.b || y.b || x.a % y.a) return unsupported(op, "divide", a, b);
    r.a = x.a / y.a;
    int j = 0;
    for (int i = 0; i < x.nf && i < NB_DIM_FACTORS; i++) { /* subtract y's powers from x's */
        int p = x.pw[i];
        if (j < y.nf && y.sym[j] == x.sym[i]) p -= y.pw[j++];
        if (p < 0) return unsupported(op, "divide", a, b);
        if (p) { r.sym[r.nf] = x.sym[i]; r.pw[r.nf++] = p; }
    }
    if (j != y.nf) return unsupported(op, "divide", a, b);
    return r.nf ? encode(op, r) : r.a;
}

int64_t nb__dims_prod(const char *op, const int64_t *d, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) {
        if (!nb__dim_sym(d[i]) && !nb__dim_sym(p)) {
            if (__builtin_mul_overflow(p, d[i], &p)) return overflow(op, p, d[i]);
        } else if ((p = nb__dim_mul(op, p, d[i])) == -1)
            return -1;
    }
    return p;
}

bool nb__dims_any_sym(const int64_t *d, int n) {
    for (int i = 0; i < n; i++)
        if (nb__dim_sym(d[i])) return true;
    return false;
}

static const int64_t *bound(const nb_dim_binding *bind, int32_t s) {
    for (int i = 0; bind && i < bind->n; i++)
        if (bind->sym[i] == s) return &bind->val[i];
    return NULL;
}

int64_t nb__dim_eval(const char *op, int64_t d, const nb_dim_binding *bind) {
    if (!nb__dim_sym(d)) return d;
    dim_expr e = decode(d);
    int64_t m = 1;
    for (int i = 0; i < e.nf; i++) {
        const int64_t *v = bound(bind, e.sym[i]);
        if (!v) {
            pthread_mutex_lock(&dim_lock);
            nb__error(NB_ERR_SHAPE, "%s: symbolic dim '%s' is not bound by any input", op, sym_names[e.sym[i]]);
            pthread_mutex_unlock(&dim_lock);
            return INT64_MIN;
        }
        for (int k = 0; k < e.pw[i]; k++)
            if (__builtin_mul_overflow(m, *v, &m)) return overflow(op, d, *v), INT64_MIN;
    }
    int64_t r;
    if (__builtin_mul_overflow(e.a, m, &r) || __builtin_add_overflow(r, e.b, &r)) return overflow(op, d, m), INT64_MIN;
    return r;
}

nb_status nb__dims_eval(const char *op, int64_t *d, int n, const nb_dim_binding *bind) {
    for (int i = 0; i < n; i++)
        if (nb__dim_sym(d[i]) && (d[i] = nb__dim_eval(op, d[i], bind)) == INT64_MIN) return nb_last_status();
    return NB_OK;
}

nb_status nb__dim_bind(const char *what, int64_t d, int64_t v, bool derived, nb_dim_binding *bind) {
    if (!nb__dim_sym(d)) {
        if (d == v) return NB_OK;
        return nb__error(NB_ERR_SHAPE, "%s: size %lld where the graph declares %lld", what, (long long)v,
                         (long long)d);
    }
    dim_expr e = decode(d);
    char s[64];
    if (e.nf == 1 && e.pw[0] == 1 && e.a == 1 && e.b == 0) {
        const int64_t *old = bound(bind, e.sym[0]);
        if (old && *old != v)
            return nb__error(NB_ERR_SHAPE, "%s: dim '%s' bound to %lld by an earlier input and to %lld here",
                             what, nb__dim_str(s, d), (long long)*old, (long long)v);
        if (!old && !derived) {
            if (bind->n == (int)(sizeof bind->sym / sizeof bind->sym[0]))
                return nb__error(NB_ERR_UNSUPPORTED, "%s: more than 16 symbolic dims", what);
            bind->sym[bind->n] = e.sym[0];
            bind->val[bind->n++] = v;
        }
        return NB_OK;
    }
    if (!derived) return NB_OK; /* checked once every lone symbol is bound */
    int64_t want = nb__dim_eval(what, d, bind);
    if (want == INT64_MIN) return nb_last_status();
    if (want != v) /* a negative want (B - 5 with B = 2) never matches a size */
        return nb__error(NB_ERR_SHAPE, "%s: size %lld where the graph's %s = %lld", what, (long long)v,
                         nb__dim_str(s, d), (long long)want);
    return NB_OK;
}
