/*
 * einsum.c — Einstein summation as a composite: parse the equation into
 * per-axis labels, take the diagonals of labels repeated within an operand,
 * then contract the operands left to right in pairs (permute + reshape +
 * nb_matmul, or a broadcast nb_mul when nothing is contracted), summing each
 * label away as soon as no later operand and not the output needs it.
 */
#include "ops.h"

#include <stdlib.h>
#include <string.h>

/* Labels: a letter is its ASCII code; the k-th broadcast ("...") axis is ELL + k. */
enum { ELL = 128, NLABELS = ELL + NB_MAX_DIMS };

/* A tensor with a label for each axis. */
typedef struct labeled {
    nb_tensor *t;
    int n;
    int lab[NB_MAX_DIMS];
} labeled;

/* One term of the equation as written: letters, and where "..." stood (-1 if absent). */
typedef struct term {
    int n;
    char letter[NB_MAX_DIMS + 1];
    int ell_at;
} term;

static bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* Parse one term from s (up to a ',' or "->" or the end); advances *s. */
static bool parse_term(const char *eq, const char **s, term *t) {
    t->n = 0;
    t->ell_at = -1;
    for (const char *p = *s;; p++) {
        if (*p == ' ') continue;
        if (is_letter(*p)) {
            if (t->n == NB_MAX_DIMS) {
                nb__error(NB_ERR_ARG, "einsum '%s': a term has more than %d subscripts", eq, NB_MAX_DIMS);
                return false;
            }
            t->letter[t->n++] = *p;
        } else if (*p == '.') {
            if (strncmp(p, "...", 3) || t->ell_at >= 0) {
                nb__error(NB_ERR_ARG, "einsum '%s': '.' must form one \"...\" per term", eq);
                return false;
            }
            t->ell_at = t->n;
            p += 2;
        } else if (*p == ',' || *p == '\0' || (*p == '-' && p[1] == '>')) {
            *s = p;
            return true;
        } else {
            nb__error(NB_ERR_ARG, "einsum '%s': invalid character '%c' in the equation", eq, *p);
            return false;
        }
    }
}

/* Axis labels of a term whose "..." covers `nell` axes, numbered against `total` broadcast axes. */
static void term_labels(const term *t, int nell, int total, labeled *out) {
    out->n = 0;
    for (int i = 0; i <= t->n; i++) {
        if (i == t->ell_at)
            for (int k = 0; k < nell; k++) out->lab[out->n++] = ELL + total - nell + k;
        if (i < t->n) out->lab[out->n++] = t->letter[i];
    }
}

/* Parsed equation: labels of each operand and of the output, and each label's size. */
typedef struct equation {
    labeled *in;
    labeled out;
    int64_t size[NLABELS];
    int count[NLABELS]; /* occurrences over all input axes */
} equation;

/* Record the size of every labeled axis; size-1 axes broadcast (as torch.einsum). */
static bool label_sizes(const char *eq, equation *e, int n) {
    for (int l = 0; l < NLABELS; l++) e->size[l] = -1;
    for (int i = 0; i < n; i++) {
        const labeled *x = &e->in[i];
        for (int a = 0; a < x->n; a++) {
            int l = x->lab[a];
            int64_t s = x->t->shape[a], *have = &e->size[l];
            bool repeated = false;
            for (int b = 0; b < a; b++) repeated |= x->lab[b] == l;
            if (*have >= 0 && s != *have && (repeated || (s != 1 && *have != 1))) {
                char name[24];
                if (l < ELL) snprintf(name, sizeof name, "'%c'", l);
                else snprintf(name, sizeof name, "...[%d]", l - ELL);
                nb__error(NB_ERR_SHAPE, "einsum '%s': subscript %s has size %lld in operand %d %s but %lld elsewhere",
                          eq, name, (long long)s, i, NB_SHAPE_STR(x->t), (long long)*have);
                return false;
            }
            if (*have < 0 || *have == 1) *have = s;
            e->count[l]++;
        }
    }
    return true;
}

/* Output labels: explicit after "->", else "..." then the letters seen once, in ASCII order. */
static bool output_labels(const char *eq, const char *arrow, equation *e, int total) {
    if (!arrow) {
        term_labels(&(term){.n = 0, .ell_at = 0}, total, total, &e->out);
        for (int l = 0; l < ELL; l++)
            if (e->count[l] == 1) e->out.lab[e->out.n++] = l;
        return true;
    }
    const char *s = arrow + 2;
    term t;
    if (!parse_term(eq, &s, &t)) return false;
    if (*s) {
        nb__error(NB_ERR_ARG, "einsum '%s': unexpected '%c' in the output", eq, *s);
        return false;
    }
    if (t.n + (t.ell_at >= 0 ? total : 0) > NB_MAX_DIMS) {
        nb__error(NB_ERR_ARG, "einsum '%s': the output has more than %d axes", eq, NB_MAX_DIMS);
        return false;
    }
    term_labels(&t, t.ell_at >= 0 ? total : 0, total, &e->out);
    for (int i = 0; i < t.n; i++) {
        if (!e->count[(int)t.letter[i]]) {
            nb__error(NB_ERR_ARG, "einsum '%s': output subscript '%c' does not appear in the inputs", eq, t.letter[i]);
            return false;
        }
        if (memchr(t.letter, t.letter[i], (size_t)i)) {
            nb__error(NB_ERR_ARG, "einsum '%s': output subscript '%c' appears twice", eq, t.letter[i]);
            return false;
        }
    }
    return true;
}

/* Parse `eq` against the n operands into e (e->in allocated by the caller). */
static bool parse(const char *eq, nb_tensor *const *ops, int n, equation *e) {
    term *terms = nb__malloc(sizeof *terms * (size_t)n);
    if (!terms) {
        nb__error(NB_ERR_OOM, "einsum: out of memory");
        return false;
    }
    const char *s = eq;
    int k = 0, total = 0;
    bool ok = true;
    for (; ok; k++) {
        term t;
        if (!(ok = parse_term(eq, &s, &t))) break;
        if (k < n) {
            terms[k] = t;
            int nell = ops[k]->ndim - t.n;
            if (nell < 0 || (t.ell_at < 0 && nell != 0)) {
                nb__error(NB_ERR_SHAPE, "einsum '%s': operand %d has shape %s, rank %d, but its term names %d axes%s",
                          eq, k, NB_SHAPE_STR(ops[k]), ops[k]->ndim, t.n, t.ell_at >= 0 ? " plus \"...\"" : "");
                ok = false;
            } else if (nell > total) {
                total = nell;
            }
        }
        if (*s != ',') break;
        s++;
    }
    if (ok && k + 1 != n) {
        nb__error(NB_ERR_ARG, "einsum '%s': the equation has %d input terms but %d operands were given", eq, k + 1, n);
        ok = false;
    }
    for (int i = 0; ok && i < n; i++) {
        e->in[i].t = ops[i];
        term_labels(&terms[i], ops[i]->ndim - terms[i].n, total, &e->in[i]);
    }
    nb__free(terms);
    return ok && label_sizes(eq, e, n) && output_labels(eq, *s ? s : NULL, e, total); /* *s: "->" or end */
}

/* Replace each label repeated within x by the diagonal over its axes. */
static void take_diagonals(labeled *x) {
    for (int a = 0; a < x->n; a++)
        for (int b = a + 1; b < x->n; b++) {
            if (x->lab[a] != x->lab[b]) continue;
            int l = x->lab[a];
            x->t = nb_diagonal(x->t, 0, a, b);
            memmove(x->lab + b, x->lab + b + 1, sizeof(int) * (size_t)(x->n - b - 1));
            memmove(x->lab + a, x->lab + a + 1, sizeof(int) * (size_t)(x->n - a - 2));
            x->lab[x->n - 2] = l;
            x->n--;
            a = -1; /* rescan: the axes moved */
            break;
        }
}

static bool has_label(const labeled *x, int l) {
    for (int a = 0; a < x->n; a++)
        if (x->lab[a] == l) return true;
    return false;
}

/* Sum away the axes of x whose label is neither in `other` (may be NULL) nor kept. */
static void sum_unneeded(labeled *x, const labeled *other, const bool *keep) {
    int axes[NB_MAX_DIMS], na = 0, n = 0;
    for (int a = 0; a < x->n; a++) {
        if (keep[x->lab[a]] || (other && has_label(other, x->lab[a]))) x->lab[n++] = x->lab[a];
        else axes[na++] = a;
    }
    if (na) x->t = nb_sum(x->t, axes, na, false);
    x->n = n;
}

/* Permute x's axes into the order of labels `order` (a permutation of x's labels). */
static nb_tensor *permuted(const labeled *x, const int *order, int n) {
    int perm[NB_MAX_DIMS];
    for (int i = 0; i < n; i++)
        for (int a = 0; a < x->n; a++)
            if (x->lab[a] == order[i]) perm[i] = a;
    return nb_permute(x->t, perm, n);
}

/* Sizes of labels in `lab` as seen on x (1 for labels x lacks). */
static void sizes_on(const labeled *x, const int *lab, int n, int64_t *out) {
    for (int i = 0; i < n; i++) {
        out[i] = 1;
        for (int a = 0; a < x->n; a++)
            if (x->lab[a] == lab[i]) out[i] = x->t->shape[a];
    }
}

static int64_t product(const int64_t *s, int n) {
    int64_t p = 1;
    for (int i = 0; i < n; i++) p *= s[i];
    return p;
}

static void cat_labels(int *dst, const int *x, int nx, const int *y, int ny, const int *z, int nz) {
    memcpy(dst, x, sizeof(int) * (size_t)nx);
    memcpy(dst + nx, y, sizeof(int) * (size_t)ny);
    memcpy(dst + nx + ny, z, sizeof(int) * (size_t)nz);
}

/*
 * Contract a with b into a, keeping the labels flagged in keep.  Shared kept
 * labels are batch axes, shared others are summed by a matmul, the rest are
 * its rows (a's) and columns (b's).  Result axes: batch, a's, b's.
 */
static bool contract(const char *eq, labeled *a, labeled b, const bool *keep) {
    sum_unneeded(a, &b, keep);
    sum_unneeded(&b, a, keep);
    int bat[NB_MAX_DIMS], con[NB_MAX_DIMS], ao[NB_MAX_DIMS], bo[NB_MAX_DIMS], nbat = 0, ncon = 0, nao = 0, nbo = 0;
    for (int i = 0; i < a->n; i++) {
        int l = a->lab[i];
        if (!has_label(&b, l)) ao[nao++] = l;
        else if (keep[l]) bat[nbat++] = l;
        else con[ncon++] = l;
    }
    for (int i = 0; i < b.n; i++)
        if (!has_label(a, b.lab[i])) bo[nbo++] = b.lab[i];
    int n = nbat + nao + nbo, lab[NB_MAX_DIMS * 3], order[NB_MAX_DIMS * 3];
    if (n > NB_MAX_DIMS) {
        nb__error(NB_ERR_UNSUPPORTED, "einsum '%s': an intermediate result needs %d axes (more than %d)", eq, n,
                  NB_MAX_DIMS);
        return false;
    }
    cat_labels(lab, bat, nbat, ao, nao, bo, nbo);
    int64_t sa[NB_MAX_DIMS * 3], sb[NB_MAX_DIMS * 3];
    if (ncon == 0) { /* nothing summed: a broadcast product laid out as [batch, a's, b's] */
        sizes_on(a, lab, n, sa);
        sizes_on(&b, lab, n, sb);
        cat_labels(order, bat, nbat, bo, nbo, con, 0);
        a->t = nb_mul(nb_reshape(permuted(a, lab, a->n), sa, n), nb_reshape(permuted(&b, order, b.n), sb, n));
    } else { /* [B, M, K] @ [B, K, N]; shared axes of size 1 broadcast first */
        int64_t sh[NB_MAX_DIMS * 3], sx[NB_MAX_DIMS * 3], ea[NB_MAX_DIMS * 3], eb[NB_MAX_DIMS * 3], rs[NB_MAX_DIMS * 3];
        cat_labels(order, bat, nbat, con, ncon, ao, 0);
        sizes_on(a, order, nbat + ncon, sh);
        sizes_on(&b, order, nbat + ncon, sx);
        for (int i = 0; i < nbat + ncon; i++) sh[i] = sh[i] > sx[i] ? sh[i] : sx[i];
        sizes_on(a, ao, nao, sa);
        sizes_on(&b, bo, nbo, sb);
        int64_t B = product(sh, nbat), K = product(sh + nbat, ncon), M = product(sa, nao), N = product(sb, nbo);
        /* a as [batch, a's, summed] */
        cat_labels(order, bat, nbat, ao, nao, con, ncon);
        memcpy(ea, sh, sizeof(int64_t) * (size_t)nbat);
        memcpy(ea + nbat, sa, sizeof(int64_t) * (size_t)nao);
        memcpy(ea + nbat + nao, sh + nbat, sizeof(int64_t) * (size_t)ncon);
        nb_tensor *ta = nb_reshape(nb_expand(permuted(a, order, a->n), ea, a->n), (int64_t[]){B, M, K}, 3);
        /* b as [batch, summed, b's] */
        cat_labels(order, bat, nbat, con, ncon, bo, nbo);
        memcpy(eb, sh, sizeof(int64_t) * (size_t)(nbat + ncon));
        memcpy(eb + nbat + ncon, sb, sizeof(int64_t) * (size_t)nbo);
        nb_tensor *tb = nb_reshape(nb_expand(permuted(&b, order, b.n), eb, b.n), (int64_t[]){B, K, N}, 3);
        memcpy(rs, sh, sizeof(int64_t) * (size_t)nbat);
        memcpy(rs + nbat, sa, sizeof(int64_t) * (size_t)nao);
        memcpy(rs + nbat + nao, sb, sizeof(int64_t) * (size_t)nbo);
        a->t = nb_reshape(nb_matmul(ta, tb), rs, n);
    }
    memcpy(a->lab, lab, sizeof(int) * (size_t)n);
    a->n = n;
    return a->t != NULL;
}

/* Contract everything into the first operand; returns the result in output order. */
static nb_tensor *evaluate(const char *eq, equation *e, int n) {
    for (int i = 0; i < n; i++) take_diagonals(&e->in[i]);
    labeled acc = e->in[0];
    for (int i = 1; i < n; i++) {
        bool keep[NLABELS] = {false};
        for (int a = 0; a < e->out.n; a++) keep[e->out.lab[a]] = true;
        for (int j = i + 1; j < n; j++)
            for (int a = 0; a < e->in[j].n; a++) keep[e->in[j].lab[a]] = true;
        if (!contract(eq, &acc, e->in[i], keep)) return NULL;
    }
    bool keep[NLABELS] = {false};
    for (int a = 0; a < e->out.n; a++) keep[e->out.lab[a]] = true;
    sum_unneeded(&acc, NULL, keep);
    /* an output label broadcast (size 1) in every operand that has it stays size 1 */
    return permuted(&acc, e->out.lab, e->out.n);
}

nb_tensor *nb_einsum(const char *equation_str, nb_tensor *const *operands, int n) {
    if (!equation_str || !operands) {
        nb__error(NB_ERR_NULL, "einsum: equation or operands is NULL");
        return NULL;
    }
    if (n <= 0) {
        nb__error(NB_ERR_ARG, "einsum '%s': expected at least one operand, got %d", equation_str, n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        NB_CHECK_ARG("einsum", operands[i]);
        if (operands[i]->dtype != operands[0]->dtype || !nb_dtype_is_float(operands[i]->dtype)) {
            nb__error(NB_ERR_DTYPE, "einsum '%s': operands must share one float dtype; operand %d is %s, operand 0 %s",
                      equation_str, i, nb_dtype_name(operands[i]->dtype), nb_dtype_name(operands[0]->dtype));
            return NULL;
        }
    }
    equation e = {.in = nb__calloc((size_t)n, sizeof(labeled))};
    if (!e.in) {
        nb__error(NB_ERR_OOM, "einsum: out of memory");
        return NULL;
    }
    nb_tensor *r = NULL;
    NB_COMPOSITE_BEGIN();
    if (parse(equation_str, operands, n, &e)) r = evaluate(equation_str, &e, n);
    nb__free(e.in);
    NB_COMPOSITE_RETURN(r);
}
