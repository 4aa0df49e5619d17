/*
 * test_gemm.c — the CPU GEMM (src/backend/cpu/gemm.c and the per-ISA tiles)
 * against the reference backend: odd and tile-crossing sizes, empty
 * operands, transposed / sliced / reversed / broadcast operands, batches,
 * 1-D operands, f32 / f64 / f16 / bf16, bitwise determinism across thread
 * counts, and every ISA's tile and packing routines directly.
 *
 * Oracle: nb_matmul on NB_REF (double accumulation).  Tolerance: the
 * standard bound for a length-k dot product in precision u (Higham,
 * "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 3.5),
 * |fl(AB) - AB| <= gamma_k |A||B| with gamma_k = k u / (1 - k u), taken
 * twice (nabla's and the reference's error) plus one rounding of each
 * stored result; |A||B| is computed on NB_REF too.
 */
#include "support.h"
#include "backend/cpu/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool quick(void) { return getenv("NB_TEST_QUICK") != NULL; }

static double unit_roundoff(nb_dtype dt) {
    switch (dt) {
    case NB_F64: return ldexp(1, -53);
    case NB_F16: return ldexp(1, -11);
    case NB_BF16: return ldexp(1, -8);
    default: return ldexp(1, -24);
    }
}

/* Host copy of t's values as doubles (caller frees). */
static double *host_f64(nb_tensor *t) {
    nb_tensor *d = NBT(nb_cast(nb_contiguous(t), NB_F64));
    size_t n = (size_t)nb_numel(d);
    double *v = malloc((n ? n : 1) * sizeof(double));
    assert_non_null(v);
    assert_int_equal(nb_copy_to_host(d, v, n * sizeof(double)), NB_OK);
    return v;
}

/* nb_matmul(a, b) on the CPU backend agrees with NB_REF within the bound above. */
static void check_matmul(nb_tensor *a, nb_tensor *b) {
    nb_scope_begin();
    nb_tensor *got = NBT(nb_matmul(a, b));
    nb_tensor *ar = NBT(nb_to_device(a, NB_REF)), *br = NBT(nb_to_device(b, NB_REF));
    nb_tensor *want = NBT(nb_matmul(ar, br));
    nb_tensor *mag = NBT(nb_matmul(nb_abs(nb_cast(ar, NB_F64)), nb_abs(nb_cast(br, NB_F64))));
    assert_int_equal(nb_ndim(got), nb_ndim(want));
    for (int d = 0; d < nb_ndim(got); d++) assert_int_equal(nb_shape(got)[d], nb_shape(want)[d]);
    nb_dtype dt = nb_dtype_of(a);
    int64_t k = nb_shape(a)[nb_ndim(a) - 1];
    double u = unit_roundoff(dt == NB_F64 ? NB_F64 : NB_F32), uo = unit_roundoff(dt);
    double gamma = k * u / (1 - k * u);
    double *g = host_f64(got), *w = host_f64(want), *m = host_f64(mag);
    int64_t n = nb_numel(got);
    for (int64_t i = 0; i < n; i++) {
        double tol = 2 * gamma * m[i] + 2 * uo * fabs(w[i]) + 1e-300;
        if (!(fabs(g[i] - w[i]) <= tol)) {
            fprintf(stderr, "element %lld: %.17g vs %.17g (tol %g)\n", (long long)i, g[i], w[i], tol);
            fail();
        }
    }
    free(g);
    free(w);
    free(m);
    nb_scope_end();
}

static nb_tensor *randn2(int64_t r, int64_t c, nb_dtype dt) { return NBT(nb_randn(NB_SHAPE(r, c), dt)); }

/* Every (m, n, k) from sizes that straddle the tiles (mr up to 8, nr up to 32). */
static void odd_sizes(void **state) {
    (void)state;
    static const int64_t sizes[] = {1, 2, 3, 7, 8, 13, 17, 31, 33, 67};
    int ns = quick() ? 5 : 10;
    nb_manual_seed(1);
    for (int dt = 0; dt < 2; dt++)
        for (int i = 0; i < ns; i++)
            for (int j = 0; j < ns; j++)
                for (int l = 0; l < ns; l += 2) {
                    nb_dtype t = dt ? NB_F64 : NB_F32;
                    nb_scope_begin();
                    check_matmul(randn2(sizes[i], sizes[l], t), randn2(sizes[l], sizes[j], t));
                    nb_scope_end();
                }
}

/* Sizes that cross the cache blocks (gemm.c: KC 512 / 256, MC 128, NC 512
 * for f32 / f64): several k blocks accumulating into C, m > MC, n > NC,
 * prime extents, and blocks of more than DIRECT_M (256) rows, where
 * row-major B is packed rather than read in place; thin C (n < nr) taken
 * as its transpose. */
static void blocked_sizes(void **state) {
    (void)state;
    nb_manual_seed(2);
    nb_scope_begin();
    check_matmul(randn2(137, 263, NB_F32), randn2(263, 523, NB_F32));
    check_matmul(randn2(37, 1031, NB_F32), randn2(1031, 45, NB_F32));
    check_matmul(randn2(131, 269, NB_F64), randn2(269, 97, NB_F64));
    check_matmul(randn2(29, 40, NB_F64), randn2(40, 530, NB_F64));
    check_matmul(randn2(600, 40, NB_F32), randn2(40, 70, NB_F32)); /* > 256 rows a thread: B packed */
    if (!quick()) check_matmul(randn2(257, 600, NB_F32), randn2(600, 61, NB_F32));
    /* thin C (n < nr), computed transposed: several k blocks accumulate into the transposed tiles */
    check_matmul(randn2(300, 1100, NB_F32), randn2(1100, 9, NB_F32));
    check_matmul(NBT(nb_t(randn2(700, 150, NB_F64))), randn2(700, 5, NB_F64));
    nb_scope_end();
}

/* k = 0 gives zeros; m = 0 or n = 0 gives an empty result of the right shape. */
static void empty(void **state) {
    (void)state;
    nb_scope_begin();
    nb_tensor *z = NBT(nb_matmul(nb_ones(NB_SHAPE(3, 0), NB_F32), nb_ones(NB_SHAPE(0, 4), NB_F32)));
    assert_int_equal(nb_shape(z)[0], 3);
    assert_int_equal(nb_shape(z)[1], 4);
    for (int64_t i = 0; i < 12; i++) assert_true(nbt_at(z, i) == 0.0);
    nb_tensor *e = NBT(nb_matmul(nb_ones(NB_SHAPE(0, 5), NB_F64), nb_ones(NB_SHAPE(5, 3), NB_F64)));
    assert_int_equal(nb_numel(e), 0);
    assert_int_equal(nb_shape(e)[1], 3);
    nb_tensor *e2 = NBT(nb_matmul(nb_ones(NB_SHAPE(2, 4, 5), NB_F32), nb_ones(NB_SHAPE(5, 0), NB_F32)));
    assert_int_equal(nb_numel(e2), 0);
    nb_tensor *zb = NBT(nb_matmul(nb_ones(NB_SHAPE(2, 3, 0), NB_F64), nb_ones(NB_SHAPE(2, 0, 2), NB_F64)));
    for (int64_t i = 0; i < 12; i++) assert_true(nbt_at(zb, i) == 0.0);
    nb_scope_end();
}

/* Operands seen through transposes, strided and reversed slices: packing
 * absorbs every layout. */
static void layouts(void **state) {
    (void)state;
    nb_manual_seed(3);
    for (int dt = 0; dt < 2; dt++) {
        nb_dtype t = dt ? NB_F64 : NB_F32;
        nb_scope_begin();
        nb_tensor *at = randn2(45, 37, t), *bt = randn2(29, 45, t); /* a = at^T [37 x 45], b = bt^T [45 x 29] */
        nb_tensor *a = NBT(nb_transpose(at, 0, 1)), *b = NBT(nb_transpose(bt, 0, 1));
        nb_tensor *ac = NBT(nb_contiguous(a)), *bc = NBT(nb_contiguous(b));
        check_matmul(a, bc);
        check_matmul(ac, b);
        check_matmul(a, b);
        /* every other row and column, and a reversed one */
        nb_tensor *big = randn2(90, 80, t);
        nb_tensor *as = NBT(nb_slice(nb_slice(big, 0, 1, NB_END, 2), 1, 3, 77, 3)); /* [45 x 25] */
        nb_tensor *bs = NBT(nb_slice(randn2(50, 66, t), 0, NB_END, 0, -2));          /* [25 x 66], negative row stride */
        check_matmul(as, bs);
        check_matmul(NBT(nb_t(bs)), NBT(nb_t(as)));
        /* column vector broadcast to a matrix: stride 0 inside the matrix */
        nb_tensor *col = NBT(nb_expand(randn2(25, 1, t), NB_SHAPE(25, 19)));
        check_matmul(as, col);
        nb_scope_end();
    }
}

/* Batches with broadcast batch axes (stride 0), both ways, and the
 * batch-parallel path (batch a multiple of the thread count). */
static void batched(void **state) {
    (void)state;
    nb_manual_seed(4);
    for (int dt = 0; dt < 2; dt++) {
        nb_dtype t = dt ? NB_F64 : NB_F32;
        nb_scope_begin();
        check_matmul(NBT(nb_randn(NB_SHAPE(3, 1, 9, 21), t)), NBT(nb_randn(NB_SHAPE(4, 21, 35), t)));
        check_matmul(NBT(nb_randn(NB_SHAPE(8, 17, 40), t)), randn2(40, 33, t));
        check_matmul(randn2(17, 40, t), NBT(nb_randn(NB_SHAPE(5, 40, 3), t)));
        nb_tensor *x = NBT(nb_randn(NB_SHAPE(6, 40, 17), t));
        check_matmul(NBT(nb_transpose(x, 1, 2)), NBT(nb_randn(NB_SHAPE(6, 40, 70), t)));
        nb_scope_end();
    }
}

/* 1-D operands: NumPy's promotion to a row / column, then squeezed. */
static void vectors(void **state) {
    (void)state;
    nb_manual_seed(5);
    for (int dt = 0; dt < 2; dt++) {
        nb_dtype t = dt ? NB_F64 : NB_F32;
        nb_scope_begin();
        nb_tensor *v = NBT(nb_randn(NB_SHAPE(70), t)), *w = NBT(nb_randn(NB_SHAPE(70), t));
        nb_tensor *m = randn2(70, 23, t), *m2 = randn2(41, 70, t);
        check_matmul(v, m);
        check_matmul(m2, v);
        check_matmul(v, w);
        check_matmul(v, NBT(nb_randn(NB_SHAPE(3, 70, 5), t)));
        nb_scope_end();
    }
}

/* f16 / bf16 run through f32 and round once. */
static void low_precision(void **state) {
    (void)state;
    nb_manual_seed(6);
    nb_dtype dts[] = {NB_F16, NB_BF16};
    for (int i = 0; i < 2; i++) {
        nb_scope_begin();
        nb_tensor *a = NBT(nb_cast(randn2(19, 50, NB_F32), dts[i]));
        nb_tensor *b = NBT(nb_cast(NBT(nb_randn(NB_SHAPE(2, 50, 37), NB_F32)), dts[i]));
        check_matmul(a, b);
        check_matmul(NBT(nb_t(nb_slice(b, 2, 0, NB_END, 2))), NBT(nb_t(a)));
        nb_scope_end();
    }
}

/* Same bytes for 1, 2 and 3 threads, through the split-inside-GEMM and the
 * split-over-batch paths. */
static void determinism(void **state) {
    (void)state;
    nb_manual_seed(7);
    nb_scope_begin();
    int saved = nb_get_num_threads();
    nb_tensor *cases[][2] = {
        {randn2(150, 333, NB_F32), randn2(333, 290, NB_F32)},
        {randn2(40, 301, NB_F64), randn2(301, 200, NB_F64)},
        {NBT(nb_randn(NB_SHAPE(6, 33, 270), NB_F32)), randn2(270, 45, NB_F32)},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        nb_tensor *ref = NULL;
        for (int th = 1; th <= 3; th++) {
            nb_set_num_threads(th);
            nb_tensor *r = NBT(nb_matmul(cases[c][0], cases[c][1]));
            if (!ref) ref = r;
            size_t bytes = (size_t)nb_numel(r) * nb_dtype_size(nb_dtype_of(r));
            assert_memory_equal(nb_data_ptr(ref), nb_data_ptr(r), bytes);
        }
    }
    nb_set_num_threads(saved);
    nb_scope_end();
}

/* Each ISA's packing and tile kernel directly (the driver above only runs
 * the one dispatch.c picked): a tile from a packed strided A and from B both
 * packed (columns 2 apart) and read in place (row-major), overwriting and
 * accumulating, against a double loop on small integers (exact in every
 * dtype and order). */
#define NBT_AT(p, i) (dt == NB_F64 ? ((double *)(p))[i] : (double)((float *)(p))[i])
#define NBT_SET(p, i, v) (dt == NB_F64 ? (void)(((double *)(p))[i] = (v)) : (void)(((float *)(p))[i] = (float)(v)))
typedef void (*tile_fn)(int64_t, const void *, const void *, int64_t, void *, int64_t, bool);

/* The full tile (width nr) or the half tile (width nr / 2, B panels still nr wide). */
static void check_tiles(const nb_gemm_kern *kk, nb_dtype dt, bool half) {
    enum { KC = 37 };
    size_t es = nb_dtype_size(dt);
    tile_fn tile = half ? kk->tile_half : kk->tile;
    int mr = kk->mr, nr = kk->nr, w = half ? nr / 2 : nr, lda = KC + 3, ldb = 2 * nr + 1, ldc = nr + 5;
    char *a = calloc((size_t)(mr * lda), es), *b = calloc((size_t)(KC * ldb), es);
    char *ap = calloc((size_t)(mr * KC), es), *bp = calloc((size_t)(KC * nr), es);
    char *c = calloc((size_t)(mr * ldc), es);
    assert_true(a && b && ap && bp && c);
    for (int i = 0; i < mr * lda; i++) NBT_SET(a, i, (i * 7 % 13) - 6);
    for (int i = 0; i < KC * ldb; i++) NBT_SET(b, i, (i * 5 % 11) - 5);
    kk->pack_a(ap, a, lda, 1, mr, KC); /* A row-major, rows lda apart */
    kk->pack_b(bp, b, 2, ldb, nr, KC); /* B(p, j) = b[p*ldb + 2j] */
    for (int in_place = 0; in_place < 2; in_place++) {
        int cs = in_place ? 1 : 2; /* B(p, j) = b[p*ldb + cs*j] */
        for (int i = 0; i < mr * ldc; i++) NBT_SET(c, i, 1000 + i);
        for (int pass = 0; pass < 2; pass++) {
            if (in_place)
                tile(KC, ap, b, ldb, c, ldc, pass == 1);
            else
                tile(KC, ap, bp, nr, c, ldc, pass == 1);
            for (int i = 0; i < mr; i++)
                for (int j = 0; j < w; j++) {
                    double s = 0;
                    for (int p = 0; p < KC; p++) s += NBT_AT(a, i * lda + p) * NBT_AT(b, p * ldb + cs * j);
                    assert_true(NBT_AT(c, i * ldc + j) == (pass + 1) * s);
                }
            for (int i = 0; i < mr; i++) /* nothing past the tile's columns */
                for (int j = w; j < ldc; j++) assert_true(NBT_AT(c, i * ldc + j) == 1000 + i * ldc + j);
        }
    }
    /* a short panel (len < R) is zero-padded */
    kk->pack_a(ap, a, lda, 1, 1, KC);
    for (int p = 0; p < KC; p++)
        for (int r = 1; r < mr; r++) assert_true(NBT_AT(ap, p * mr + r) == 0);
    free(a), free(b), free(ap), free(bp), free(c);
}
#undef NBT_AT
#undef NBT_SET

static void isa_tiles(void **state) {
    (void)state;
    __builtin_cpu_init();
    const nb_cpu_kernels *tabs[] = {&nb__kernels_scalar, &nb__kernels_avx2, &nb__kernels_avx512};
    bool ok[] = {true, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"),
                 __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")};
    for (int i = 0; i < 3; i++) {
        if (!ok[i]) continue;
        for (int half = 0; half < 2; half++) {
            check_tiles(&tabs[i]->gemm[0], NB_F32, half);
            check_tiles(&tabs[i]->gemm[1], NB_F64, half);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(odd_sizes),   cmocka_unit_test(blocked_sizes), cmocka_unit_test(empty),
        cmocka_unit_test(layouts),     cmocka_unit_test(batched),       cmocka_unit_test(vectors),
        cmocka_unit_test(low_precision), cmocka_unit_test(determinism), cmocka_unit_test(isa_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
