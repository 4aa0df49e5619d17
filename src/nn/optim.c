/*
 * optim.c — optimizers (N2): SGD (momentum, dampening, Nesterov, weight
 * decay), Adam and AdamW with torch.optim's update rules, and gradient
 * clipping by global norm.  An optimizer step is one fused pass per
 * parameter over host memory; SGD updates each element in double precision
 * (as cheap as float: the pass is bound by memory), Adam in the parameter's
 * dtype (see NB_ADAM_LOOP).
 */
#include "nn_internal.h"
#include "../backend/cpu/pool.h"

#include <math.h>

typedef enum { OPT_SGD, OPT_ADAM, OPT_ADAMW } opt_kind;

struct nb_optimizer {
    opt_kind kind;
    const char *name;
    nb_sgd_opts sgd;
    nb_adam_opts adam;
    int n;
    nb_tensor **param;
    nb_tensor **state[2]; /* SGD: momentum buffer; Adam: exp_avg, exp_avg_sq (created at the first step) */
    int64_t *steps;       /* per-parameter step count, as torch's state['step'] */
};

/* ---- construction ---- */

/* A parameter list: n >= 0 entries, none NULL (the array may be NULL only when n is 0). */
static nb_status check_list(const char *op, nb_tensor *const *params, int n) {
    if (n < 0) return nb__error_set(NB_ERR_ARG, "%s: parameter count %d is negative", op, n);
    if (n > 0 && !params) return nb__error_set(NB_ERR_NULL, "%s: %d parameters given as a NULL array", op, n);
    for (int i = 0; i < n; i++)
        if (!params[i]) return nb__error_set(NB_ERR_NULL, "%s: parameter %d is NULL", op, i);
    return NB_OK;
}

static bool check_params(const char *op, nb_tensor *const *params, int n) {
    if (check_list(op, params, n) != NB_OK) return false;
    for (int i = 0; i < n; i++) {
        if (params[i]->dtype != NB_F32 && params[i]->dtype != NB_F64) {
            nb__error_set(NB_ERR_DTYPE, "%s: parameter %d has dtype %s; float32 and float64 are supported", op, i,
                          nb_dtype_name(params[i]->dtype));
            return false;
        }
        if (!nb__is_host(params[i]->storage->device) || !nb_is_contiguous(params[i])) {
            nb__error_set(NB_ERR_DEVICE, "%s: parameter %d (%s) must be contiguous in host memory", op, i,
                          NB_SHAPE_STR(params[i]));
            return false;
        }
    }
    return true;
}

static nb_optimizer *optimizer_new(opt_kind kind, const char *name, nb_tensor *const *params, int n) {
    nb_optimizer *o = nb__calloc(1, sizeof *o);
    if (o) {
        o->param = nb__calloc((size_t)n + 1, sizeof *o->param);
        o->state[0] = nb__calloc((size_t)n + 1, sizeof *o->state[0]);
        o->state[1] = nb__calloc((size_t)n + 1, sizeof *o->state[1]);
        o->steps = nb__calloc((size_t)n + 1, sizeof *o->steps);
    }
    if (!o || !o->param || !o->state[0] || !o->state[1] || !o->steps) {
        nb_optim_free(o);
        nb__error_set(NB_ERR_OOM, "%s: out of memory", name);
        return NULL;
    }
    o->kind = kind;
    o->name = name;
    o->n = n;
    for (int i = 0; i < n; i++) o->param[i] = nb_retain(params[i]);
    return o;
}

static bool arg_ok(const char *op, const char *what, double v, bool ok) {
    if (!ok) nb__error_set(NB_ERR_ARG, "%s: invalid %s %g", op, what, v);
    return ok;
}

nb_optimizer *nb_optim_sgd(nb_tensor *const *params, int n, nb_sgd_opts o) {
    const char *op = "sgd";
    if (!arg_ok(op, "learning rate", o.lr, o.lr >= 0) || !arg_ok(op, "momentum", o.momentum, o.momentum >= 0) ||
        !arg_ok(op, "weight_decay", o.weight_decay, o.weight_decay >= 0) || !arg_ok(op, "dampening", o.dampening, isfinite(o.dampening)))
        return NULL;
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
        nb__error_set(NB_ERR_ARG, "sgd: Nesterov momentum requires momentum > 0 and zero dampening (got %g, %g)",
                      o.momentum, o.dampening);
        return NULL;
    }
    if (!check_params(op, params, n)) return NULL;
    nb_optimizer *opt = optimizer_new(OPT_SGD, op, params, n);
    if (opt) opt->sgd = o;
    return opt;
}

static nb_optimizer *adam_new(opt_kind kind, const char *op, nb_tensor *const *params, int n, nb_adam_opts o) {
    if (!arg_ok(op, "learning rate", o.lr, o.lr >= 0) || !arg_ok(op, "beta1", o.beta1, o.beta1 >= 0 && o.beta1 < 1) ||
        !arg_ok(op, "beta2", o.beta2, o.beta2 >= 0 && o.beta2 < 1) || !arg_ok(op, "eps", o.eps, o.eps >= 0) ||
        !arg_ok(op, "weight_decay", o.weight_decay, o.weight_decay >= 0) || !check_params(op, params, n))
        return NULL;
    nb_optimizer *opt = optimizer_new(kind, op, params, n);
    if (opt) opt->adam = o;
    return opt;
}

nb_optimizer *nb_optim_adam(nb_tensor *const *params, int n, nb_adam_opts o) {
    return adam_new(OPT_ADAM, "adam", params, n, o);
}

nb_optimizer *nb_optim_adamw(nb_tensor *const *params, int n, nb_adam_opts o) {
    return adam_new(OPT_ADAMW, "adamw", params, n, o);
}

void nb_optim_free(nb_optimizer *o) {
    if (!o) return;
    for (int i = 0; i < o->n; i++) {
        nb_release(o->param[i]);
        nb_release(o->state[0][i]);
        nb_release(o->state[1][i]);
    }
    nb__free(o->param);
    nb__free(o->state[0]);
    nb__free(o->state[1]);
    nb__free(o->steps);
    nb__free(o);
}

double nb_optim_lr(const nb_optimizer *o) { return !o ? NAN : o->kind == OPT_SGD ? o->sgd.lr : o->adam.lr; }

nb_status nb_optim_set_lr(nb_optimizer *o, double lr) {
    if (!o) return nb__error_set(NB_ERR_NULL, "optim_set_lr: optimizer is NULL");
    if (!(lr >= 0) || isinf(lr)) return nb__error_set(NB_ERR_ARG, "optim_set_lr: learning rate must be finite and >= 0, got %g", lr);
    if (o->kind == OPT_SGD) o->sgd.lr = lr;
    else o->adam.lr = lr;
    return NB_OK;
}

void nb_optim_zero_grad(nb_optimizer *o) {
    for (int i = 0; o && i < o->n; i++) nb_zero_grad(o->param[i]);
}

/* ---- the update rules: one pass over each parameter ----
 * Each rule is a branch-free loop (its options folded into coefficients) so
 * that it vectorizes; the elements are split across the CPU pool, and as
 * each element is updated on its own the result is the same for any split. */

typedef struct step_coefs {
    double lr, wd;
    double keep, take, cg, cb;                 /* SGD: b = keep b + take g;  p -= lr (cg g + cb b) */
    double decay, l2, b1, b2, step, inv_bc2, eps; /* Adam(W) */
} step_coefs;

typedef struct step_job {
    const step_coefs *k;
    bool adam, f64;
    void *p, *s0, *s1; /* s0 / s1 NULL when the rule keeps no such state */
    const void *g;
} step_job;

/* torch.optim.SGD: g += wd p; b = g (first step) or μ b + (1 - dampening) g; g = nesterov ? g + μ b : b. */
#define NB_SGD_LOOP(T)                                                                                       \
    NB_SIMD_CLONES static void sgd_##T(const step_coefs *k, int64_t lo, int64_t hi, T *restrict p,           \
                                       const T *restrict g, T *restrict b) {                                \
        const double lr = k->lr, wd = k->wd, keep = k->keep, take = k->take, cg = k->cg, cb = k->cb;       \
        if (!b) {                                                                                            \
            for (int64_t i = lo; i < hi; i++) p[i] = (T)(p[i] - lr * (g[i] + wd * p[i]));                    \
            return;                                                                                          \
        }                                                                                                    \
        for (int64_t i = lo; i < hi; i++) {                                                                  \
            double gi = g[i] + wd * p[i], bi = keep * b[i] + take * gi;                                      \
            b[i] = (T)bi;                                                                                    \
            p[i] = (T)(p[i] - lr * (cg * gi + cb * bi));                                                     \
        }                                                                                                    \
    }
/* torch.optim.Adam / AdamW: p *= decay (AdamW); g += l2 p (Adam); m, v moving averages;
 * p -= lr / (1 - β1ᵗ) · m / (√v / √(1 - β2ᵗ) + eps).  In the parameter's dtype T (SQRT its square
 * root), as torch.optim computes it: a float square root and division cost a quarter of double's,
 * and with the moving averages in double too the conversions made the MLP's update 2-3x slower
 * (0.08 against 0.23 ms a step: bench/RESULTS.md §24). */
#define NB_ADAM_LOOP(T, SQRT)                                                                                \
    NB_SIMD_CLONES static void adam_##T(const step_coefs *k, int64_t lo, int64_t hi, T *restrict p,          \
                                        const T *restrict g, T *restrict m, T *restrict v) {                \
        const T decay = (T)k->decay, l2 = (T)k->l2, b1 = (T)k->b1, b2 = (T)k->b2, step = (T)k->step;        \
        const T c1 = (T)(1 - k->b1), c2 = (T)(1 - k->b2), inv_bc2 = (T)k->inv_bc2, eps = (T)k->eps;         \
        for (int64_t i = lo; i < hi; i++) {                                                                  \
            T pi = p[i] * decay, gi = g[i] + l2 * pi;                                                        \
            T mi = b1 * m[i] + c1 * gi, vi = b2 * v[i] + c2 * gi * gi;                                       \
            m[i] = mi;                                                                                       \
            v[i] = vi;                                                                                       \
            p[i] = pi - step * (mi / (SQRT(vi) * inv_bc2 + eps));                                            \
        }                                                                                                    \
    }
NB_SGD_LOOP(float)
NB_SGD_LOOP(double)
NB_ADAM_LOOP(float, sqrtf)
NB_ADAM_LOOP(double, sqrt)
#undef NB_SGD_LOOP
#undef NB_ADAM_LOOP

static void step_range(void *ctx, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const step_job *j = ctx;
    if (j->adam && j->f64) adam_double(j->k, lo, hi, j->p, j->g, j->s0, j->s1);
    else if (j->adam) adam_float(j->k, lo, hi, j->p, j->g, j->s0, j->s1);
    else if (j->f64) sgd_double(j->k, lo, hi, j->p, j->g, j->s0);
    else sgd_float(j->k, lo, hi, j->p, j->g, j->s0);
}

/* The gradient of p as a contiguous tensor of p's shape and dtype (scoped); NULL with an error. */
static nb_tensor *dense_grad(const char *op, nb_tensor *p, int i) {
    nb_tensor *g = p->grad;
    if (!nb__same_shape(g, p) || g->dtype != p->dtype || !nb__same_device(g->storage->device, p->storage->device)) {
        nb__error_set(NB_ERR_SHAPE, "%s: gradient %s %s of parameter %d does not match the parameter %s %s", op,
                      nb_dtype_name(g->dtype), NB_SHAPE_STR(g), i, nb_dtype_name(p->dtype), NB_SHAPE_STR(p));
        return NULL;
    }
    return nb_contiguous(g);
}

/* The state tensors rule `kind` keeps for p, created as zeros at the first step. */
static bool ensure_state(nb_optimizer *o, int i, int count) {
    nb_tensor *p = o->param[i];
    for (int s = 0; s < count; s++)
        if (!o->state[s][i] && !(o->state[s][i] = nb__full_on(p->shape, p->ndim, 0, p->dtype, p->storage->device)))
            return false;
    return true;
}

/* The coefficients of parameter step t (1-based). */
static step_coefs coefs_for(const nb_optimizer *o, int64_t t) {
    if (o->kind == OPT_SGD) {
        const nb_sgd_opts *s = &o->sgd;
        return (step_coefs){.lr = s->lr, .wd = s->weight_decay, .keep = t == 1 ? 0 : s->momentum,
                            .take = t == 1 ? 1 : 1 - s->dampening, .cg = s->nesterov ? 1 : 0,
                            .cb = s->nesterov ? s->momentum : 1};
    }
    const nb_adam_opts *a = &o->adam;
    bool decoupled = o->kind == OPT_ADAMW;
    return (step_coefs){.decay = decoupled ? 1 - a->lr * a->weight_decay : 1, .l2 = decoupled ? 0 : a->weight_decay,
                        .b1 = a->beta1, .b2 = a->beta2, .step = a->lr / (1 - pow(a->beta1, (double)t)),
                        .inv_bc2 = 1 / sqrt(1 - pow(a->beta2, (double)t)), .eps = a->eps};
}

/* Ready parameter i for its update, allocating all it needs (a dense gradient,
 * which replaces p->grad, and the state) but updating nothing. */
static nb_status prepare(nb_optimizer *o, int i) {
    nb_tensor *p = o->param[i];
    nb_tensor *g = dense_grad(o->name, p, i);
    int nstate = o->kind != OPT_SGD ? 2 : o->sgd.momentum != 0;
    if (!g || !ensure_state(o, i, nstate)) return nb_last_status();
    if (g != p->grad) { /* same values, contiguous */
        nb_release(p->grad);
        p->grad = nb_retain(g);
    }
    return NB_OK;
}

/* Update parameter i (prepared) in place; allocates nothing, so it cannot fail. */
static void update(nb_optimizer *o, int i) {
    nb_tensor *p = o->param[i], *s0 = o->state[0][i], *s1 = o->state[1][i];
    step_coefs k = coefs_for(o, ++o->steps[i]);
    step_job j = {.k = &k, .adam = o->kind != OPT_SGD, .f64 = p->dtype == NB_F64, .p = nb__ptr(p),
                  .g = nb__ptr(p->grad), .s0 = s0 ? nb__ptr(s0) : NULL, .s1 = s1 ? nb__ptr(s1) : NULL};
    nb__parallel_for(nb__numel(p), 1 << 14, step_range, &j);
}

static nb_status step_impl(nb_optimizer *o) {
    if (!o) return nb__error_set(NB_ERR_NULL, "optim_step: optimizer is NULL");
    nb_status st = NB_OK;
    nb_scope_begin();
    for (int i = 0; i < o->n && st == NB_OK; i++)
        if (o->param[i]->grad) st = prepare(o, i);
    /* all allocations done: a failure above left every parameter untouched, none can happen below */
    for (int i = 0; i < o->n && st == NB_OK; i++)
        if (o->param[i]->grad) update(o, i);
    nb_scope_end();
    return st;
}

/* ---- gradient clipping ---- */

static nb_status clip_impl(nb_tensor *const *params, int n, double max_norm, double norm_type, double *total_norm) {
    const char *op = "clip_grad_norm_";
    if (check_list(op, params, n) != NB_OK) return nb_last_status();
    if (!(max_norm >= 0) || !(norm_type > 0))
        return nb__error_set(NB_ERR_ARG, "%s: max_norm %g must be >= 0 and norm_type %g > 0", op, max_norm, norm_type);
    double total = 0;
    nb_scope_begin();
    nb_no_grad_begin();
    nb_status st = NB_OK;
    for (int i = 0; i < n && st == NB_OK; i++) {
        if (!params[i]->grad) continue;
        double v;
        st = nb_item(nb_norm(params[i]->grad, norm_type, NULL, 0, false), &v);
        total = isinf(norm_type) ? fmax(total, v) : total + pow(v, norm_type);
    }
    if (!isinf(norm_type)) total = pow(total, 1 / norm_type);
    double coef = max_norm / (total + 1e-6);
    /* replace (not scale in place): one gradient tensor may be shared by several leaves */
    for (int i = 0; i < n && st == NB_OK && coef < 1; i++) {
        nb_tensor *g = params[i]->grad;
        if (!g) continue;
        nb_tensor *scaled = nb__scope_take(nb_mul(g, coef));
        if (!scaled) {
            st = nb_last_status();
            break;
        }
        nb_release(g);
        params[i]->grad = scaled;
    }
    nb_no_grad_end();
    nb_scope_end();
    if (st == NB_OK && total_norm) *total_norm = total;
    return st;
}

nb_status nb_optim_step(nb_optimizer *o) {
    NB_OWN_STATUS("optim_step", step_impl(o));
}

nb_status nb_clip_grad_norm_(nb_tensor *const *params, int n, double max_norm, double norm_type, double *total_norm) {
    NB_OWN_STATUS("clip_grad_norm_", clip_impl(params, n, max_norm, norm_type, total_norm));
}
