/*
 * random.c — counter-based random numbers: Philox4x32-10 (Salmon, Moraes,
 * Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
 * Element i of a call draws from counter (offset + i), so values depend on
 * the seed and the call sequence only — never on the thread count.
 */
#include "../backend/backend.h"

#include <math.h>

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

/* Uniform in [0, 1) with 53 random bits; 2nd value for Box–Muller in u2. */
static double uniform(uint64_t i, double *u2) {
    uint32_t o[4];
    philox(tl_offset + i, tl_seed, o);
    double a = (double)(((uint64_t)o[0] << 21) ^ (o[1] >> 11)) * 0x1p-53;
    if (u2) *u2 = (double)(((uint64_t)o[2] << 21) ^ (o[3] >> 11)) * 0x1p-53;
    return a;
}

static nb_tensor *random_fill(const char *op, const int64_t *shape, int ndim, nb_dtype dt, bool normal) {
    if (!nb_dtype_is_float(dt)) {
        nb__error(NB_ERR_DTYPE, "%s: expected a float dtype, got %s", op, nb_dtype_name(dt));
        return NULL;
    }
    nb_tensor *t = nb__tensor_new_op(op, shape, ndim, dt, NB_CPU);
    if (!t) return NULL;
    int64_t n = nb__numel(t);
    size_t es = nb_dtype_size(dt);
    char *p = nb__ptr(t);
    for (int64_t i = 0; i < n; i++) {
        double u2, u = uniform((uint64_t)i, &u2), v;
        if (normal) v = sqrt(-2.0 * log1p(-u)) * cos(6.283185307179586477 * u2);
        else {
            v = u;
            /* rounding to a narrow float can reach 1.0; keep the interval half-open */
            if (dt == NB_F32 && (float)v >= 1.0f) v = 0x1.fffffep-1;
            if ((dt == NB_F16 || dt == NB_BF16) && v >= 0.99) v = floor(v * 256) / 256;
        }
        nb__store(p + (size_t)i * es, dt, v);
    }
    tl_offset += (uint64_t)n;
    return t;
}

nb_tensor *nb_rand(const int64_t *shape, int ndim, nb_dtype dt) {
    return nb__own(random_fill("rand", shape, ndim, dt, false));
}
nb_tensor *nb_randn(const int64_t *shape, int ndim, nb_dtype dt) {
    return nb__own(random_fill("randn", shape, ndim, dt, true));
}

nb_tensor *nb_bernoulli(nb_tensor *p) {
    NB_CHECK_ARG("bernoulli", p);
    if (!nb_dtype_is_float(p->dtype)) {
        nb__error(NB_ERR_DTYPE, "bernoulli: probabilities must be float, got %s", nb_dtype_name(p->dtype));
        return NULL;
    }
    if (!nb__is_host(p->storage->device)) {
        nb__error(NB_ERR_DEVICE, "bernoulli: probabilities must be in host memory");
        return NULL;
    }
    nb_tensor *out = nb__tensor_new(p->shape, p->ndim, p->dtype, p->storage->device);
    if (!out) return NULL;
    int64_t n = nb__numel(p), idx[NB_MAX_DIMS] = {0};
    size_t es = nb_dtype_size(p->dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = p->offset;
        for (int d = 0; d < p->ndim; d++) off += idx[d] * p->stride[d];
        double pr = nb__load((char *)p->storage->data + off * (int64_t)es, p->dtype);
        if (!(pr >= 0 && pr <= 1)) {
            nb_release(out);
            nb__error(NB_ERR_ARG, "bernoulli: probability %g outside [0, 1]", pr);
            return NULL;
        }
        nb__store(nb__ptr(out) + (size_t)i * es, out->dtype, uniform((uint64_t)i, NULL) < pr ? 1 : 0);
        for (int d = p->ndim - 1; d >= 0; d--) {
            if (++idx[d] < p->shape[d]) break;
            idx[d] = 0;
        }
    }
    tl_offset += (uint64_t)n;
    return nb__own(out);
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
