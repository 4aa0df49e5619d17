/*
 * random.c — counter-based random numbers: Philox4x32-10 (Salmon, Moraes,
 * Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
 * Element i of a call draws from counter (offset + i), so values depend on
 * the seed and the call sequence only — never on the thread count.  rand,
 * randn and bernoulli are ops of the RANDOM kind (so a traced graph draws
 * when it runs); randperm draws at call time.
 */
#include "../backend/backend.h"

#include <math.h>
#include <string.h>

static _Thread_local uint64_t tl_seed = 0x853c49e6748fea9bULL;
static _Thread_local uint64_t tl_offset;

void nb_manual_seed(uint64_t seed) {
    tl_seed = seed;
    tl_offset = 0;
}

static void philox(uint64_t ctr, uint64_t key, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* Uniform in [0, 1) with 53 random bits from counter ctr under key seed; 2nd value for
 * Box–Muller in u2. */
static double uniform_at(uint64_t seed, uint64_t ctr, double *u2) {
    uint32_t o[4];
    philox(ctr, seed, o);
    double a = (double)(((uint64_t)o[0] << 21) ^ (o[1] >> 11)) * 0x1p-53;
    if (u2) *u2 = (double)(((uint64_t)o[2] << 21) ^ (o[3] >> 11)) * 0x1p-53;
    return a;
}

static double uniform(uint64_t i, double *u2) { return uniform_at(tl_seed, tl_offset + i, u2); }

/*
 * The RANDOM kind: rand / randn (no input; attrs.shape, attrs.sub the dtype) and bernoulli
 * (input: the probabilities).  attrs.i[0], i[1] are the generator's seed and counter when the
 * op was applied eagerly: execute reproduces exactly that draw and leaves the generator
 * alone.  attrs.i[2] = 1 (traced: seed and counter stored as 0) asks for a fresh draw:
 * execute takes the seed and counter from this thread's generator when it runs and advances
 * it, so each run of a compiled graph draws anew, as the same code run eagerly would (with
 * the same nb_manual_seed, the same values).
 */
enum { RNG_SEED, RNG_COUNTER, RNG_FRESH, RNG_NI };

static int infer_random(nb_op op, nb_tensor *const *in, int n, nb_attrs *a, nb_meta *m) {
    (void)n;
    const char *name = nb__ops[op].name;
    if (op == NB_OP_BERNOULLI) {
        nb_tensor *p = in[0];
        if (!nb_dtype_is_float(p->dtype)) {
            nb__error(NB_ERR_DTYPE, "bernoulli: probabilities must be float, got %s", nb_dtype_name(p->dtype));
            return -1;
        }
        if (!nb__is_host(p->storage->device)) {
            nb__error(NB_ERR_DEVICE, "bernoulli: probabilities must be in host memory");
            return -1;
        }
        nb__meta_of(m, p);
    } else {
        if (!nb_dtype_is_float((nb_dtype)a->sub)) {
            nb__error(NB_ERR_DTYPE, "%s: expected a float dtype, got %s", name, nb_dtype_name((nb_dtype)a->sub));
            return -1;
        }
        m->dtype = (nb_dtype)a->sub;
        m->ndim = a->shape_ndim;
        memcpy(m->shape, a->shape, sizeof(int64_t) * (size_t)a->shape_ndim);
    }
    m->weak = false;
    return 1;
}

/* Element i of a draw: uniform (rand), normal (randn) or u < pr (bernoulli with probability pr). */
static double draw(nb_op op, uint64_t seed, uint64_t ctr, nb_dtype dt, double pr) {
    double u2, u = uniform_at(seed, ctr, op == NB_OP_RANDN ? &u2 : NULL);
    if (op == NB_OP_RANDN) return sqrt(-2.0 * log1p(-u)) * cos(6.283185307179586477 * u2);
    if (op == NB_OP_BERNOULLI) return u < pr ? 1 : 0;
    /* rounding to a narrow float can reach 1.0; keep the interval half-open */
    if (dt == NB_F32 && (float)u >= 1.0f) return 0x1.fffffep-1;
    if ((dt == NB_F16 || dt == NB_BF16) && u >= 0.99) return floor(u * 256) / 256;
    return u;
}

static nb_status exec_random(nb_op op, nb_tensor *const *in, int n, const nb_attrs *a, const nb_meta *m, int nout,
                             nb_tensor **out) {
    (void)n;
    (void)nout;
    nb_tensor *p = op == NB_OP_BERNOULLI ? in[0] : NULL;
    nb_tensor *t = nb__tensor_new_op(nb__ops[op].name, m->shape, m->ndim, m->dtype, p ? p->storage->device : NB_CPU);
    if (!t) return nb_last_status();
    bool fresh = a->i[RNG_FRESH] != 0;
    uint64_t seed = fresh ? tl_seed : (uint64_t)a->i[RNG_SEED], ctr = fresh ? tl_offset : (uint64_t)a->i[RNG_COUNTER];
    int64_t cnt = nb__numel(t), idx[NB_MAX_DIMS] = {0};
    size_t es = nb_dtype_size(m->dtype);
    for (int64_t i = 0; i < cnt; i++) {
        double pr = 0;
        if (p) {
            int64_t off = p->offset;
            for (int d = 0; d < p->ndim; d++) off += idx[d] * p->stride[d];
            pr = nb__load((char *)p->storage->data + off * (int64_t)es, p->dtype);
            if (!(pr >= 0 && pr <= 1)) {
                nb_release(t);
                return nb__error(NB_ERR_ARG, "bernoulli: probability %g outside [0, 1]", pr);
            }
            for (int d = p->ndim - 1; d >= 0; d--) {
                if (++idx[d] < p->shape[d]) break;
                idx[d] = 0;
            }
        }
        nb__store(nb__ptr(t) + (size_t)i * es, m->dtype, draw(op, seed, ctr + (uint64_t)i, m->dtype, pr));
    }
    if (fresh) tl_offset += (uint64_t)cnt;
    out[0] = t;
    return NB_OK;
}

const nb_kind_impl nb__kind_random = {infer_random, exec_random};

/* Apply a RANDOM op: eagerly with the generator's state in attrs (advanced by the draw),
 * under an interpreter or on a symbolic input as a fresh draw. Unscoped. */
static nb_tensor *random_apply(nb_op op, nb_tensor *p, nb_attrs *a) {
    bool fresh = nb__interp_top() || nb__is_symbolic(p);
    a->ni = RNG_NI;
    a->i[RNG_FRESH] = fresh;
    a->i[RNG_SEED] = fresh ? 0 : (int64_t)tl_seed;
    a->i[RNG_COUNTER] = fresh ? 0 : (int64_t)tl_offset;
    nb_tensor *r = nb__apply(op, &p, p ? 1 : 0, a);
    if (r && !fresh) tl_offset += (uint64_t)nb__numel(r);
    return r;
}

static nb_tensor *random_fill(nb_op op, const int64_t *shape, int ndim, nb_dtype dt) {
    const char *name = nb__ops[op].name;
    if (!nb_dtype_is_float(dt)) {
        nb__error(NB_ERR_DTYPE, "%s: expected a float dtype, got %s", name, nb_dtype_name(dt));
        return NULL;
    }
    if (nb__numel_checked(name, shape, ndim) < 0) return NULL;
    nb_attrs a = {.sub = (int)dt, .shape_ndim = ndim};
    memcpy(a.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return random_apply(op, NULL, &a);
}

nb_tensor *nb_rand(const int64_t *shape, int ndim, nb_dtype dt) {
    return nb__own(random_fill(NB_OP_RAND, shape, ndim, dt));
}
nb_tensor *nb_randn(const int64_t *shape, int ndim, nb_dtype dt) {
    return nb__own(random_fill(NB_OP_RANDN, shape, ndim, dt));
}

nb_tensor *nb_bernoulli(nb_tensor *p) {
    NB_CHECK_ARG("bernoulli", p);
    nb_attrs a = {0};
    return nb__own(random_apply(NB_OP_BERNOULLI, p, &a));
}

nb_tensor *nb_randperm(int64_t n) {
    if (n < 0) {
        nb__error(NB_ERR_ARG, "randperm: n = %lld is negative", (long long)n);
        return NULL;
    }
    nb_tensor *t = nb__tensor_new_op("randperm", &n, 1, NB_I64, NB_CPU);
    if (!t) return NULL;
    int64_t *v = (int64_t *)nb__ptr(t);
    for (int64_t i = 0; i < n; i++) v[i] = i;
    for (int64_t i = n - 1; i > 0; i--) { /* Fisher–Yates */
        int64_t j = (int64_t)(uniform((uint64_t)i, NULL) * (double)(i + 1));
        int64_t tmp = v[i];
        v[i] = v[j];
        v[j] = tmp;
    }
    tl_offset += (uint64_t)n;
    return nb__own(t);
}
