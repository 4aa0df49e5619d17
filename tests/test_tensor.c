/*
 * test_tensor.c — the tensor core (SPEC T1–T7): dtypes, promotion and
 * conversion; storage sharing and borrowed memory; layout edge cases;
 * constructors and seeded random numbers; zero-copy views; element access;
 * broadcasting; autorelease scopes.  Expected values come from closed forms,
 * the IEEE 754 definitions, Python/NumPy semantics worked out by hand, or a
 * brute-force oracle written here — never from nabla's own output.
 */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

#define IDX(...) ((const int64_t[]){__VA_ARGS__})

static nb_tensor *vec_f64(const double *v, int64_t n) { return NBT(nb_from_data(v, &n, 1, NB_F64)); }

/* t's elements in row-major order equal want[0..n) exactly. */
static void assert_values(nb_tensor *t, const double *want, int64_t n) {
    assert_int_equal(nb_numel(t), n);
    for (int64_t i = 0; i < n; i++) {
        double v = nbt_at(t, i);
        if (!(v == want[i] || (isnan(v) && isnan(want[i])))) {
            fprintf(stderr, "element %lld: got %.17g want %.17g\n", (long long)i, v, want[i]);
            fail();
        }
    }
}

static void assert_shape(nb_tensor *t, const int64_t *shape, int ndim) {
    assert_int_equal(nb_ndim(t), ndim);
    for (int d = 0; d < ndim; d++) assert_int_equal(nb_shape(t)[d], shape[d]);
}

/* A call failed with status `code` and a message naming `op`. */
static void assert_error(nb_status code, const char *op) {
    if (nb_last_status() != code || !strstr(nb_last_message(), op)) {
        fprintf(stderr, "expected %s naming '%s', got %s: %s\n", nb_status_name(code), op,
                nb_status_name(nb_last_status()), nb_last_message());
        fail();
    }
    nb_clear_error();
}

/* arange(0, n) as f64 in the given shape. */
static nb_tensor *iota(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return NBT(nb_reshape(NBT(nb_arange(0, (double)n, 1, NB_F64)), shape, ndim));
}

/* ======================================================================== */
/* T1 dtypes                                                                */
/* ======================================================================== */

static void dtype_names_sizes(void **state) {
    (void)state;
    static const char *names[] = {"float32", "float64", "float16", "bfloat16", "int8",
                                  "int32",   "int64",   "uint8",   "bool"};
    static const size_t sizes[] = {4, 8, 2, 2, 1, 4, 8, 1, 1};
    for (int d = 0; d < NB_DTYPE_COUNT; d++) {
        assert_string_equal(nb_dtype_name((nb_dtype)d), names[d]);
        assert_int_equal(nb_dtype_size((nb_dtype)d), sizes[d]);
        assert_int_equal(nb_dtype_is_float((nb_dtype)d), d <= NB_BF16);
    }
    assert_string_equal(nb_dtype_name(NB_DTYPE_COUNT), "invalid");
    assert_string_equal(nb_dtype_name((nb_dtype)-1), "invalid");
    assert_int_equal(nb_dtype_size(NB_DTYPE_COUNT), 0);
    assert_false(nb_dtype_is_float(NB_DTYPE_COUNT));
}

/* torch.promote_types, with nabla's documented u8 x i8 -> i32 (no i16). */
static void promotion_table(void **state) {
    (void)state;
    enum { F32 = NB_F32, F64 = NB_F64, F16 = NB_F16, BF = NB_BF16, I8 = NB_I8, I32 = NB_I32, I64 = NB_I64,
           U8 = NB_U8, B = NB_BOOL };
    static const int want[9][9] = {
        /*          F32  F64  F16  BF   I8   I32  I64  U8   B  */
        /* F32 */ {F32, F64, F32, F32, F32, F32, F32, F32, F32},
        /* F64 */ {F64, F64, F64, F64, F64, F64, F64, F64, F64},
        /* F16 */ {F32, F64, F16, F32, F16, F16, F16, F16, F16},
        /* BF  */ {F32, F64, F32, BF, BF, BF, BF, BF, BF},
        /* I8  */ {F32, F64, F16, BF, I8, I32, I64, I32, I8},
        /* I32 */ {F32, F64, F16, BF, I32, I32, I64, I32, I32},
        /* I64 */ {F32, F64, F16, BF, I64, I64, I64, I64, I64},
        /* U8  */ {F32, F64, F16, BF, I32, I32, I64, U8, U8},
        /* B   */ {F32, F64, F16, BF, I8, I32, I64, U8, B},
    };
    for (int a = 0; a < 9; a++)
        for (int b = 0; b < 9; b++) {
            nb_dtype got = nb_promote_types((nb_dtype)a, (nb_dtype)b);
            if ((int)got != want[a][b]) {
                fprintf(stderr, "promote(%s, %s) = %s\n", nb_dtype_name((nb_dtype)a), nb_dtype_name((nb_dtype)b),
                        nb_dtype_name(got));
                fail();
            }
        }
}

/* Result dtypes of real ops: tensors, rank-0 tensors and C scalars (torch.result_type). */
static void promotion_in_ops(void **state) {
    (void)state;
    nb_tensor *i32 = NBT(nb_full(NB_SHAPE(2), 1, NB_I32)), *i8 = NBT(nb_full(NB_SHAPE(2), 3, NB_I8));
    nb_tensor *u8 = NBT(nb_full(NB_SHAPE(2), 200, NB_U8)), *bo = NBT(nb_ones(NB_SHAPE(2), NB_BOOL));
    nb_tensor *f16 = NBT(nb_full(NB_SHAPE(2), 1.5, NB_F16)), *bf = NBT(nb_full(NB_SHAPE(2), 1.5, NB_BF16));
    nb_tensor *f32 = NBT(nb_ones(NB_SHAPE(2), NB_F32));

    nb_tensor *r = NBT(nb_add(i32, 2.5)); /* int tensor + float scalar -> default float */
    assert_int_equal(nb_dtype_of(r), NB_F32);
    assert_values(r, (double[]){3.5, 3.5}, 2);
    r = NBT(nb_add(bo, 2)); /* bool tensor + int scalar -> i64 */
    assert_int_equal(nb_dtype_of(r), NB_I64);
    assert_values(r, (double[]){3, 3}, 2);
    r = NBT(nb_add(bo, 2.5));
    assert_int_equal(nb_dtype_of(r), NB_F32);
    assert_int_equal(nb_dtype_of(NBT(nb_add(f16, 2.5))), NB_F16); /* same category: tensor wins */
    assert_int_equal(nb_dtype_of(NBT(nb_mul(i8, 2))), NB_I8);
    assert_int_equal(nb_dtype_of(NBT(nb_add(u8, i8))), NB_I32); /* documented deviation (torch: int16) */
    assert_values(NBT(nb_add(u8, i8)), (double[]){203, 203}, 2);
    assert_int_equal(nb_dtype_of(NBT(nb_add(f16, bf))), NB_F32);
    assert_int_equal(nb_dtype_of(NBT(nb_div(i32, 2))), NB_F32); /* true division */
    assert_values(NBT(nb_div(i32, 2)), (double[]){0.5, 0.5}, 2);
    assert_int_equal(nb_dtype_of(NBT(nb_lt(i32, 2.5))), NB_BOOL);
    /* a rank-0 tensor promotes like a scalar against dimensioned tensors (torch.result_type) */
    nb_tensor *s64 = NBT(nb_scalar(0.5, NB_F64)), *si64 = NBT(nb_scalar(2, NB_I64));
    assert_int_equal(nb_dtype_of(NBT(nb_mul(f16, s64))), NB_F16);
    assert_int_equal(nb_dtype_of(NBT(nb_mul(f32, s64))), NB_F32);
    assert_int_equal(nb_dtype_of(NBT(nb_mul(i32, s64))), NB_F64); /* category rises: its own dtype */
    assert_int_equal(nb_dtype_of(NBT(nb_mul(i8, si64))), NB_I8);
    assert_int_equal(nb_dtype_of(NBT(nb_mul(s64, NBT(nb_scalar(1, NB_F32))))), NB_F64); /* both rank 0 */
    assert_int_equal(nb_dtype_of(NBT(nb_where(bo, f16, s64))), NB_F16);
}

/* IEEE binary16 value of bit pattern h, from the definition. */
static double f16_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}
/* bfloat16: the top 16 bits of a binary32 (8 exponent bits, 7 mantissa bits). */
static double bf16_value(uint16_t h) {
    int s = h >> 15, e = (h >> 7) & 255, m = h & 127;
    double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(128 + m, e - 134);
    return s ? -v : v;
}

/* Every one of the 65536 patterns decodes to its IEEE value. */
static void half_decode_exhaustive(void **state) {
    (void)state;
    uint16_t *bits = malloc(65536 * sizeof *bits);
    double *got = malloc(65536 * sizeof *got);
    for (int i = 0; i < 65536; i++) bits[i] = (uint16_t)i;
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = k ? NB_BF16 : NB_F16;
        nb_tensor *h = NBT(nb_from_data(bits, NB_SHAPE(65536), dt));
        nb_tensor *d = NBT(nb_cast(h, NB_F64));
        assert_int_equal(nb_copy_to_host(d, got, 65536 * sizeof *got), NB_OK);
        for (int i = 0; i < 65536; i++) {
            double want = k ? bf16_value((uint16_t)i) : f16_value((uint16_t)i);
            if (!(got[i] == want || (isnan(got[i]) && isnan(want))) || signbit(got[i]) != signbit(want)) {
                fprintf(stderr, "%s 0x%04x: got %.17g want %.17g\n", nb_dtype_name(dt), i, got[i], want);
                fail();
            }
        }
    }
    free(bits);
    free(got);
}

/* Round-to-nearest-even from f32: for every finite positive pattern h, the
 * value itself, the midpoint to the next pattern, and the f32 neighbours of
 * that midpoint must land on h / the even one of (h, h+1) / h / h+1. */
static void half_encode_rne(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = k ? NB_BF16 : NB_F16;
        uint16_t top = k ? 0x7f80 : 0x7c00; /* +inf */
        int64_t n = 4 * (int64_t)top;
        float *in = malloc((size_t)n * sizeof *in);
        uint16_t *want = malloc((size_t)n * sizeof *want), *got = malloc((size_t)n * sizeof *got);
        for (uint16_t h = 0; h < top; h++) {
            double lo = k ? bf16_value(h) : f16_value(h), hi = k ? bf16_value(h + 1) : f16_value(h + 1);
            /* the midpoint toward +inf is 2^(emax+1) - half an ulp: finite in f32 */
            double mid = isinf(hi) ? lo + (lo - (k ? bf16_value(h - 1) : f16_value(h - 1))) / 2 : (lo + hi) / 2;
            float m = (float)mid;
            assert_true((double)m == mid); /* exact in binary32 */
            int64_t j = 4 * (int64_t)h;
            in[j] = (float)lo, want[j] = h;
            in[j + 1] = m, want[j + 1] = (h & 1) ? (uint16_t)(h + 1) : h;
            in[j + 2] = nextafterf(m, 0), want[j + 2] = h;
            in[j + 3] = nextafterf(m, INFINITY), want[j + 3] = (uint16_t)(h + 1);
        }
        nb_tensor *f = NBT(nb_from_data(in, &n, 1, NB_F32));
        nb_tensor *c = NBT(nb_cast(f, dt));
        assert_int_equal(nb_copy_to_host(c, got, (size_t)n * sizeof *got), NB_OK);
        for (int64_t j = 0; j < n; j++)
            if (got[j] != want[j]) {
                fprintf(stderr, "%s from %.9g: got 0x%04x want 0x%04x\n", nb_dtype_name(dt), (double)in[j], got[j],
                        want[j]);
                fail();
            }
        /* signs, infinities, NaN */
        float sp[] = {-0.0f, -2.0f, INFINITY, -INFINITY, NAN, 1e30f, -0x1.8p127f};
        uint16_t out[7];
        nb_tensor *s = NBT(nb_cast(NBT(nb_from_data(sp, NB_SHAPE(7), NB_F32)), dt));
        assert_int_equal(nb_copy_to_host(s, out, sizeof out), NB_OK);
        uint16_t inf = top, sign = 0x8000;
        assert_int_equal(out[0], sign);
        assert_int_equal(out[1], 0xc000); /* -2 = -1.0 x 2^1 in both formats */
        assert_int_equal(out[2], inf);
        assert_int_equal(out[3], sign | inf);
        assert_true((out[4] & inf) == inf && (out[4] & ~(sign | inf)) != 0); /* a NaN */
        if (!k) assert_int_equal(out[5], inf);                 /* beyond 65520: overflows f16 */
        assert_int_equal(out[6], sign | (k ? 0x7f40 : inf)); /* -1.5 x 2^127: exact in bf16 */
        free(in);
        free(want);
        free(got);
    }
}

/* Float -> integer: truncation toward zero, NaN -> 0, saturation (src/core/dtype.c). */
static void float_to_int_conversion(void **state) {
    (void)state;
    double v[] = {2.7, -2.7, NAN, 1e10, -1e10, INFINITY, -INFINITY, 127.9, -128.9, 255.5, 0x1p63, -0x1p63, 0x1p62};
    nb_tensor *x = vec_f64(v, 13);
    const double big = 9223372036854775807.0; /* INT64_MAX as double is 2^63 */
    struct { nb_dtype dt; double want[13]; } cases[] = {
        {NB_I8, {2, -2, 0, 127, -128, 127, -128, 127, -128, 127, 127, -128, 127}},
        {NB_U8, {2, 0, 0, 255, 0, 255, 0, 127, 0, 255, 255, 0, 255}},
        {NB_I32, {2, -2, 0, 2147483647, -2147483648.0, 2147483647, -2147483648.0, 127, -128, 255, 2147483647,
                  -2147483648.0, 2147483647}},
        {NB_BOOL, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        assert_values(NBT(nb_cast(x, cases[c].dt)), cases[c].want, 13);
    /* i64 saturates at exactly INT64_MAX / INT64_MIN */
    int64_t out[13];
    assert_int_equal(nb_copy_to_host(NBT(nb_cast(x, NB_I64)), out, sizeof out), NB_OK);
    assert_true(out[0] == 2 && out[1] == -2 && out[2] == 0 && out[3] == 10000000000LL);
    assert_true(out[5] == INT64_MAX && out[6] == INT64_MIN && out[10] == INT64_MAX && out[11] == INT64_MIN);
    assert_true(out[12] == (int64_t)1 << 62);
    (void)big;
    /* nb_full converts the same way */
    assert_values(NBT(nb_full(NB_SHAPE(1), -2.5, NB_I8)), (double[]){-2}, 1);
    assert_values(NBT(nb_full(NB_SHAPE(1), NAN, NB_I32)), (double[]){0}, 1);
}

static void cast_round_trips(void **state) {
    (void)state;
    int32_t iv[] = {0, 1, -1, 2147483647, -2147483647 - 1, 16777217};
    nb_tensor *i = NBT(nb_from_data(iv, NB_SHAPE(6), NB_I32));
    nb_tensor *back = NBT(nb_cast(NBT(nb_cast(i, NB_F64)), NB_I32));
    int32_t ov[6];
    assert_int_equal(nb_copy_to_host(back, ov, sizeof ov), NB_OK);
    assert_memory_equal(iv, ov, sizeof iv);
    float fv[] = {0.1f, -3.25e-39f, 1e38f, 3.14159274f};
    nb_tensor *f = NBT(nb_from_data(fv, NB_SHAPE(4), NB_F32));
    float fo[4];
    assert_int_equal(nb_copy_to_host(NBT(nb_cast(NBT(nb_cast(f, NB_F64)), NB_F32)), fo, sizeof fo), NB_OK);
    assert_memory_equal(fv, fo, sizeof fv);
    /* f16 -> f32 -> f16 is exact for every finite pattern (checked widely above); cast to the same dtype is identity */
    assert_ptr_equal(NBT(nb_cast(f, NB_F32)), f);
}

/* ======================================================================== */
/* T2 storage                                                               */
/* ======================================================================== */

static void views_share_and_write_through(void **state) {
    (void)state;
    nb_tensor *a = NBT(nb_zeros(NB_SHAPE(2, 3), NB_F32));
    nb_tensor *row = NBT(nb_select(a, 0, 1));
    nb_tensor *col = NBT(nb_select(NBT(nb_transpose(a, 0, 1)), 0, 2));
    assert_true(nb_shares_storage(a, row) && nb_shares_storage(a, col));
    assert_int_equal(nb_set(row, IDX(2), 5), NB_OK); /* a[1][2] */
    assert_int_equal(nb_set(col, (int64_t[]){0}, 7), NB_OK); /* a[0][2] */
    assert_values(a, (double[]){0, 0, 7, 0, 0, 5}, 6);
    assert_int_equal(nb_fill_(row, 1), NB_OK);
    assert_values(a, (double[]){0, 0, 7, 1, 1, 1}, 6);
    /* the storage outlives the handle that created it */
    nb_scope_begin();
    nb_tensor *b = NBT(nb_ones(NB_SHAPE(4), NB_F64));
    nb_tensor *v = nb_scope_keep(NBT(nb_narrow(b, 0, 1, 2))); /* now owned by the test's scope */
    nb_scope_end();
    assert_values(v, (double[]){1, 1}, 2);
    assert_false(nb_shares_storage(a, NBT(nb_clone(a))));
}

typedef struct blob_ctx {
    int calls;
    void *ptr;
} blob_ctx;
static void blob_release(void *ctx, void *data) {
    blob_ctx *c = ctx;
    c->calls++;
    c->ptr = data;
}

static void from_blob_borrow(void **state) {
    (void)state;
    float buf[6] = {0, 1, 2, 3, 4, 5};
    blob_ctx c = {0};
    nb_clear_error();
    nb_scope_begin(); /* the only scope: keep hands references to this function */
    nb_tensor *t = NBT(nb_from_blob(buf, IDX(2, 3), NULL, 2, NB_F32, blob_release, &c));
    nb_tensor *v1 = nb_scope_keep(NBT(nb_transpose(t, 0, 1)));
    nb_tensor *v2 = nb_scope_keep(NBT(nb_slice(t, 1, NB_END, NB_END, -1)));
    assert_int_equal(nb_set(t, IDX(1, 1), 40), NB_OK);
    assert_true(buf[4] == 40); /* no copy: writes land in the caller's memory */
    nb_scope_end();             /* t and its scope-owned results are gone */
    assert_int_equal(c.calls, 0);
    assert_values(v2, (double[]){2, 1, 0, 5, 40, 3}, 6);
    nb_release(v1);
    assert_int_equal(c.calls, 0);
    nb_release(v2);
    assert_int_equal(c.calls, 1); /* exactly once, with the caller's pointer */
    assert_ptr_equal(c.ptr, buf);


    /* negative strides: data points at element 0 and the buffer lies below it */
    c = (blob_ctx){0};
    nb_scope_begin();
    nb_tensor *r = NBT(nb_from_blob(buf + 5, IDX(2, 3), (int64_t[]){-3, -1}, 2, NB_F32, blob_release, &c));
    assert_values(r, (double[]){5, 40, 3, 2, 1, 0}, 6);
    assert_false(nb_shares_storage(r, NBT(nb_contiguous(r))));
    assert_ptr_equal(nb_data_ptr(r), buf + 5);
    nb_scope_end();
    assert_int_equal(c.calls, 1);
    assert_ptr_equal(c.ptr, buf + 5);

    /* on error the callback is never called and the caller keeps the memory */
    c = (blob_ctx){0};
    assert_null(nb_from_blob(buf, IDX(2, -3), NULL, 2, NB_F32, blob_release, &c));
    assert_error(NB_ERR_ARG, "from_blob");
    assert_null(nb_from_blob(NULL, IDX(2, 3), NULL, 2, NB_F32, blob_release, &c));
    assert_error(NB_ERR_NULL, "from_blob");
    assert_null(nb_from_blob(buf, IDX(2, 3), NULL, 2, NB_DTYPE_COUNT, blob_release, &c));
    assert_error(NB_ERR_DTYPE, "from_blob");
    assert_null(nb_from_blob(buf, IDX(3, 3), (int64_t[]){INT64_MAX / 2, 1}, 2, NB_F32, blob_release, &c));
    assert_error(NB_ERR_OVERFLOW, "from_blob");
    assert_int_equal(c.calls, 0);
    /* a NULL callback is allowed */
    nb_release(NBT(nb_from_blob(buf, IDX(6), NULL, 1, NB_F32, NULL, NULL)));
}

/* ======================================================================== */
/* T3 layout                                                                */
/* ======================================================================== */

static void rank0_scalars(void **state) {
    (void)state;
    nb_tensor *s = NBT(nb_scalar(3.5, NB_F64));
    assert_int_equal(nb_ndim(s), 0);
    assert_int_equal(nb_numel(s), 1);
    assert_true(nb_is_contiguous(s));
    double v = 0;
    assert_int_equal(nb_item(s, &v), NB_OK);
    assert_true(v == 3.5);
    assert_int_equal(nb_get(s, NULL, &v), NB_OK);
    assert_int_equal(nb_set(s, NULL, -1.25), NB_OK);
    assert_int_equal(nb_item(s, &v), NB_OK);
    assert_true(v == -1.25);
    nb_tensor *m = iota(NB_SHAPE(2, 3));
    nb_tensor *r = NBT(nb_add(m, s)); /* broadcasts against any shape */
    assert_values(r, (double[]){-1.25, -0.25, 0.75, 1.75, 2.75, 3.75}, 6);
    nb_tensor *sum = NBT(nb_sum(s, NULL, 0, false)); /* reduces to itself */
    assert_int_equal(nb_ndim(sum), 0);
    assert_true(nbt_at(sum, 0) == -1.25);
    assert_int_equal(nb_ndim(NBT(nb_sum(m, NULL, 0, false))), 0);
    assert_int_equal(nb_ndim(NBT(nb_reshape(NBT(nb_reshape(s, NB_SHAPE(1, 1, 1))), NULL, 0))), 0);
    assert_int_equal(nb_ndim(NBT(nb_select(NBT(nb_arange(0, 3, 1, NB_F32)), 0, 1))), 0);
    assert_null(nb_transpose(s, 0, 1));
    assert_error(NB_ERR_AXIS, "transpose");
}

static void zero_size_dims(void **state) {
    (void)state;
    nb_tensor *z = NBT(nb_zeros(NB_SHAPE(2, 0, 3), NB_F32));
    assert_int_equal(nb_numel(z), 0);
    assert_true(nb_is_contiguous(z));
    assert_true(nb_strides(z)[0] == 3 && nb_strides(z)[1] == 3 && nb_strides(z)[2] == 1); /* as torch */
    nb_tensor *s = NBT(nb_sum(z, NB_AXES(1), false)); /* empty sum is 0 */
    assert_shape(s, NB_SHAPE(2, 3));
    assert_values(s, (double[]){0, 0, 0, 0, 0, 0}, 6);
    assert_null(nb_max(z, NB_AXES(1), false)); /* no identity */
    assert_error(NB_ERR_SHAPE, "max");
    nb_tensor *b = NBT(nb_add(z, NBT(nb_ones(NB_SHAPE(1, 3), NB_F32))));
    assert_shape(b, NB_SHAPE(2, 0, 3));
    assert_shape(NBT(nb_reshape(z, NB_SHAPE(-1, 3))), NB_SHAPE(0, 3));
    assert_shape(NBT(nb_transpose(z, 0, 2)), NB_SHAPE(3, 0, 2));
    assert_true(nb_is_contiguous(NBT(nb_transpose(z, 0, 2)))); /* no element is out of place */
    assert_int_equal(nb_copy_to_host(z, NULL, 0), NB_OK);
    assert_shape(NBT(nb_slice(NBT(nb_arange(0, 5, 1, NB_F32)), 0, 3, 3, 1)), NB_SHAPE(0));
    assert_shape(NBT(nb_empty(NB_SHAPE(0), NB_F64)), NB_SHAPE(0));
    /* an empty inner dimension: every element is an empty sum */
    nb_tensor *mm = NBT(nb_matmul(NBT(nb_full(NB_SHAPE(2, 0), NAN, NB_F32)), NBT(nb_ones(NB_SHAPE(0, 3), NB_F32))));
    assert_shape(mm, NB_SHAPE(2, 3));
    assert_values(mm, (double[]){0, 0, 0, 0, 0, 0}, 6);
    assert_values(NBT(nb_prod(z, NB_AXES(1), false)), (double[]){1, 1, 1, 1, 1, 1}, 6);
    assert_values(NBT(nb_cumsum(z, 1)), NULL, 0);
    /* with a zero dimension, the others only need strides that fit (as torch) */
    int64_t big = (int64_t)1 << 28;
    assert_shape(NBT(nb_empty(NB_SHAPE(big, 0, big), NB_F64)), NB_SHAPE(big, 0, big));
    assert_null(nb_empty(NB_SHAPE(INT64_MAX, 0, 2), NB_U8));
    assert_error(NB_ERR_OVERFLOW, "empty");
}

static void rank8(void **state) {
    (void)state;
    nb_tensor *t = iota(NB_SHAPE(2, 1, 2, 1, 2, 1, 2, 3));
    assert_int_equal(nb_ndim(t), NB_MAX_DIMS);
    nb_tensor *p = NBT(nb_permute(t, (int[]){7, 6, 5, 4, 3, 2, 1, 0}, 8));
    /* p[i7..i0] = t[i0..i7]: check by walking t's multi-index */
    int64_t n = nb_numel(t), idx[8], rev[8];
    for (int64_t f = 0; f < n; f++) {
        int64_t r = f;
        for (int d = 7; d >= 0; d--) {
            idx[d] = r % nb_shape(t)[d];
            r /= nb_shape(t)[d];
        }
        for (int d = 0; d < 8; d++) rev[d] = idx[7 - d];
        double v;
        assert_int_equal(nb_get(p, rev, &v), NB_OK);
        assert_true(v == (double)f);
    }
    nb_tensor *s = NBT(nb_sum(p, NULL, 0, false));
    assert_true(nbt_at(s, 0) == (double)(n * (n - 1) / 2));
    /* sum over all axes but p's first (t's last): the values f with f % 3 == k */
    nb_tensor *c = NBT(nb_sum(NBT(nb_contiguous(p)), NB_AXES(1, 2, 3, 4, 5, 6, 7), false));
    double want[3] = {0, 0, 0};
    for (int64_t f = 0; f < n; f++) want[f % 3] += (double)f;
    assert_values(c, want, 3);
    assert_null(nb_unsqueeze(t, 0));
    assert_error(NB_ERR_SHAPE, "unsqueeze");
    assert_null(nb_zeros((int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, 9, NB_F32));
    assert_error(NB_ERR_ARG, "zeros");
}

static void overflow_checked_counts(void **state) {
    (void)state;
    int64_t k40 = (int64_t)1 << 40, k32 = (int64_t)1 << 32, k31 = (int64_t)1 << 31;
    /* products whose wrapped value is 0 must still be caught */
    assert_null(nb_empty((int64_t[]){k40, k40}, 2, NB_F32));
    assert_error(NB_ERR_OVERFLOW, "empty");
    assert_null(nb_zeros((int64_t[]){k32, k32}, 2, NB_F32));
    assert_error(NB_ERR_OVERFLOW, "zeros");
    assert_null(nb_ones((int64_t[]){3, INT64_MAX / 2}, 2, NB_U8));
    assert_error(NB_ERR_OVERFLOW, "ones");
    /* the count fits int64, the byte size does not */
    assert_null(nb_full((int64_t[]){k31, k31}, 2, 1, NB_F32));
    assert_error(NB_ERR_OVERFLOW, "full");
    /* views too: an expand whose count overflows */
    nb_tensor *one = NBT(nb_ones(NB_SHAPE(1, 1), NB_F32));
    assert_null(nb_expand(one, (int64_t[]){k40, k40}, 2));
    assert_error(NB_ERR_OVERFLOW, "expand");
    /* a huge but valid expanded view costs nothing */
    nb_tensor *e = NBT(nb_expand(one, (int64_t[]){k31, k31}, 2));
    assert_int_equal(nb_numel(e), k31 * k31);
    assert_true(nb_strides(e)[0] == 0 && nb_strides(e)[1] == 0);
}

/* ======================================================================== */
/* T4 constructors                                                          */
/* ======================================================================== */

static void arange_values(void **state) {
    (void)state;
    assert_values(NBT(nb_arange(0, 10, 3, NB_F64)), (double[]){0, 3, 6, 9}, 4);
    assert_values(NBT(nb_arange(1, 0, -0.25, NB_F64)), (double[]){1, 0.75, 0.5, 0.25}, 4);
    assert_values(NBT(nb_arange(-3, 3, 2, NB_I64)), (double[]){-3, -1, 1}, 3);
    assert_int_equal(nb_numel(NBT(nb_arange(0, 0, 1, NB_F32))), 0);
    /* length ceil((end - start) / step); value start + i * step */
    nb_tensor *t = NBT(nb_arange(0.5, 2.0, 0.1, NB_F64));
    int64_t n = (int64_t)ceil((2.0 - 0.5) / 0.1);
    assert_int_equal(nb_numel(t), n);
    for (int64_t i = 0; i < n; i++) assert_true(nbt_at(t, i) == 0.5 + (double)i * 0.1);
    assert_null(nb_arange(5, 0, 1, NB_F32));
    assert_error(NB_ERR_ARG, "arange");
    assert_null(nb_arange(0, 5, 0, NB_F32));
    assert_error(NB_ERR_ARG, "arange");
    assert_null(nb_arange(0, NAN, 1, NB_F32));
    assert_error(NB_ERR_ARG, "arange");
}

static void linspace_values(void **state) {
    (void)state;
    assert_values(NBT(nb_linspace(0, 1, 5, NB_F64)), (double[]){0, 0.25, 0.5, 0.75, 1}, 5);
    assert_values(NBT(nb_linspace(2, 7, 1, NB_F64)), (double[]){2}, 1);
    assert_int_equal(nb_numel(NBT(nb_linspace(2, 7, 0, NB_F64))), 0);
    /* endpoints exact; interior within one ulp of start + i (end - start) / (steps - 1) */
    double a = -1, b = 3.3;
    nb_tensor *t = NBT(nb_linspace(a, b, 7, NB_F64));
    assert_true(nbt_at(t, 0) == a && nbt_at(t, 6) == b);
    for (int i = 1; i < 6; i++) {
        double want = a + i * (b - a) / 6;
        assert_true(fabs(nbt_at(t, i) - want) <= 2 * nextafter(fabs(want), INFINITY) - 2 * fabs(want));
    }
    assert_values(NBT(nb_linspace(0, 10, 6, NB_I32)), (double[]){0, 2, 4, 6, 8, 10}, 6);
    assert_null(nb_linspace(0, 1, -1, NB_F32));
    assert_error(NB_ERR_ARG, "linspace");
}

static void eye_full_like(void **state) {
    (void)state;
    nb_tensor *e = NBT(nb_eye(3, 4, NB_F32));
    assert_shape(e, NB_SHAPE(3, 4));
    for (int64_t i = 0; i < 12; i++) assert_true(nbt_at(e, i) == (i / 4 == i % 4 ? 1.0 : 0.0));
    assert_shape(NBT(nb_eye(0, 3, NB_F64)), NB_SHAPE(0, 3));
    assert_null(nb_eye(-1, 3, NB_F64));
    assert_error(NB_ERR_ARG, "eye");
    assert_values(NBT(nb_full(NB_SHAPE(2, 2), 1.9, NB_I32)), (double[]){1, 1, 1, 1}, 4);
    assert_values(NBT(nb_full(NB_SHAPE(2), -0.0, NB_F64)), (double[]){0, 0}, 2);
    assert_true(signbit(nbt_at(NBT(nb_full(NB_SHAPE(2), -0.0, NB_F64)), 1)));
    assert_values(NBT(nb_ones(NB_SHAPE(3), NB_BOOL)), (double[]){1, 1, 1}, 3);
    /* *_like keeps shape, dtype and device */
    nb_tensor *r = NBT(nb_to_device(NBT(nb_empty(NB_SHAPE(2, 3), NB_F16)), NB_REF));
    nb_tensor *l = NBT(nb_full_like(r, 0.5));
    assert_shape(l, NB_SHAPE(2, 3));
    assert_int_equal(nb_dtype_of(l), NB_F16);
    assert_int_equal(nb_device_of(l).type, NB_DEVICE_REF);
    assert_values(l, (double[]){0.5, 0.5, 0.5, 0.5, 0.5, 0.5}, 6);
    assert_values(NBT(nb_zeros_like(r)), (double[]){0, 0, 0, 0, 0, 0}, 6);
    assert_values(NBT(nb_ones_like(r)), (double[]){1, 1, 1, 1, 1, 1}, 6);
    double d[] = {1, 2, 3};
    nb_tensor *fd = NBT(nb_from_data(d, NB_SHAPE(3), NB_F64));
    d[0] = 9; /* from_data copies */
    assert_values(fd, (double[]){1, 2, 3}, 3);
}

/* Draws of one random call into a malloc'd f64 buffer (the caller frees). */
static double *draw(int kind, int64_t n, nb_dtype dt) {
    nb_tensor *t = kind == 0 ? nb_rand(&n, 1, dt) : nb_randn(&n, 1, dt);
    NBT(t);
    double *buf = malloc((size_t)n * sizeof *buf);
    assert_int_equal(nb_copy_to_host(NBT(nb_cast(t, NB_F64)), buf, (size_t)n * sizeof *buf), NB_OK);
    return buf;
}

static void random_reproducible(void **state) {
    (void)state;
    int saved = nb_get_num_threads();
    const int64_t n = 4099;
    for (int kind = 0; kind < 2; kind++) {
        nb_set_num_threads(1);
        nb_manual_seed(42);
        double *a = draw(kind, n, NB_F32), *a2 = draw(kind, n, NB_F32);
        nb_set_num_threads(2);
        nb_manual_seed(42);
        double *b = draw(kind, n, NB_F32), *b2 = draw(kind, n, NB_F32);
        nb_manual_seed(43);
        double *c = draw(kind, n, NB_F32);
        assert_memory_equal(a, b, (size_t)n * sizeof *a);   /* same seed, any thread count */
        assert_memory_equal(a2, b2, (size_t)n * sizeof *a); /* and the same sequence after it */
        assert_memory_not_equal(a, a2, (size_t)n * sizeof *a);
        assert_memory_not_equal(a, c, (size_t)n * sizeof *a);
        free(a), free(a2), free(b), free(b2), free(c);
    }
    nb_manual_seed(7);
    nb_tensor *p = NBT(nb_full(NB_SHAPE(1000), 0.5, NB_F32));
    nb_set_num_threads(1);
    nb_tensor *b1 = NBT(nb_bernoulli(p));
    nb_manual_seed(7);
    nb_set_num_threads(2);
    nb_tensor *b2 = NBT(nb_bernoulli(p));
    assert_close(b1, b2, 0, 0);
    nb_manual_seed(7);
    nb_tensor *q1 = NBT(nb_randperm(50));
    nb_manual_seed(7);
    assert_close(q1, NBT(nb_randperm(50)), 0, 0);
    nb_set_num_threads(saved);
}

/* Sample statistics within 5 standard errors (false-failure odds ~1e-6 each). */
static void random_statistics(void **state) {
    (void)state;
    nb_manual_seed(1234);
    const int64_t n = 200000;
    double *u = draw(0, n, NB_F64);
    double sum = 0, lo = 1, hi = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += u[i];
        lo = fmin(lo, u[i]);
        hi = fmax(hi, u[i]);
    }
    assert_true(lo >= 0 && hi < 1);
    assert_true(fabs(sum / n - 0.5) < 5 * sqrt(1.0 / 12 / n));
    free(u);

    double *z = draw(1, n, NB_F64);
    double m = 0, m2 = 0;
    int64_t in1 = 0;
    for (int64_t i = 0; i < n; i++) {
        m += z[i];
        m2 += z[i] * z[i];
        in1 += fabs(z[i]) < 1;
    }
    m /= n;
    double sd = sqrt(m2 / n - m * m);
    assert_true(fabs(m) < 5 / sqrt((double)n));
    assert_true(fabs(sd - 1) < 5 * sqrt(0.5 / n));
    const double p1 = 0.682689492137086; /* P(|Z| < 1) = erf(1/sqrt 2) */
    assert_true(fabs((double)in1 / n - p1) < 5 * sqrt(p1 * (1 - p1) / n));
    free(z);

    /* narrow float dtypes stay in [0, 1) */
    for (nb_dtype dt = NB_F16; dt <= NB_BF16; dt++) {
        double *h = draw(0, 20000, dt);
        for (int i = 0; i < 20000; i++) assert_true(h[i] >= 0 && h[i] < 1);
        free(h);
    }

    nb_tensor *p = NBT(nb_full(NB_SHAPE(100000), 0.3, NB_F64));
    nb_tensor *bsum = NBT(nb_sum(NBT(nb_bernoulli(p)), NULL, 0, false));
    assert_true(fabs(nbt_at(bsum, 0) / 1e5 - 0.3) < 5 * sqrt(0.21 / 1e5));
    nb_tensor *edge = NBT(nb_bernoulli(vec_f64((double[]){0, 1, 0, 1}, 4)));
    assert_values(edge, (double[]){0, 1, 0, 1}, 4);
    assert_int_equal(nb_dtype_of(NBT(nb_bernoulli(NBT(nb_full(NB_SHAPE(2), 0.5, NB_F16))))), NB_F16);

    nb_tensor *perm = NBT(nb_randperm(1000));
    assert_int_equal(nb_dtype_of(perm), NB_I64);
    char seen[1000] = {0};
    for (int i = 0; i < 1000; i++) {
        double v = nbt_at(perm, i);
        assert_true(v >= 0 && v < 1000 && !seen[(int)v]);
        seen[(int)v] = 1;
    }
    assert_int_equal(nb_numel(NBT(nb_randperm(0))), 0);
}

/* ======================================================================== */
/* T5 views                                                                 */
/* ======================================================================== */

/* Storage offsets of t's elements in row-major order (read through nb_get
 * on a tensor whose values are their own storage offsets). */
static void offsets_of(nb_tensor *t, int64_t *off) {
    for (int64_t i = 0; i < nb_numel(t); i++) off[i] = (int64_t)nbt_at(t, i);
}

/* Brute force: does a strided view of `shape` over these offsets exist? */
static bool view_exists(const int64_t *off, int64_t n, const int64_t *shape, int ndim) {
    if (n == 0) return true;
    int64_t st[NB_MAX_DIMS] = {0}, step = 1;
    for (int d = ndim - 1; d >= 0; d--) { /* stride of axis d: offset at unit index */
        if (shape[d] > 1) st[d] = off[step] - off[0];
        step *= shape[d];
    }
    for (int64_t f = 0; f < n; f++) {
        int64_t r = f, o = off[0];
        for (int d = ndim - 1; d >= 0; d--) {
            o += (r % shape[d]) * st[d];
            r /= shape[d];
        }
        if (o != off[f]) return false;
    }
    return true;
}

/* reshape/view against the brute-force oracle over many strided inputs. */
static void reshape_view_or_copy(void **state) {
    (void)state;
    /* base values are their storage offsets */
    nb_tensor *base = NBT(nb_arange(0, 720, 1, NB_F64));
    struct { int64_t shape[4]; int ndim; } targets[] = {
        {{-1}, 1}, {{2, -1}, 2}, {{-1, 2}, 2}, {{3, 2, -1}, 3}, {{1, -1, 1}, 3}, {{2, 3, 2, -1}, 4}, {{-1, 3}, 2},
        {{6, -1}, 2},
    };
    int nviews = 0, ncopies = 0;
    for (int variant = 0; variant < 6; variant++) {
        nb_scope_begin();
        nb_tensor *t = NULL;
        nb_tensor *b3 = NBT(nb_reshape(base, NB_SHAPE(6, 10, 12)));
        switch (variant) {
        case 0: t = NBT(nb_narrow(b3, 2, 0, 6)); break;                          /* [6,10,6] gaps */
        case 1: t = NBT(nb_transpose(NBT(nb_narrow(b3, 1, 0, 6)), 0, 1)); break; /* [6,6,12] */
        case 2: t = NBT(nb_slice(NBT(nb_slice(b3, 2, 0, 12, 2)), 1, 0, 6, 1)); break;
        case 3: t = NBT(nb_slice(NBT(nb_narrow(b3, 1, 2, 6)), 0, NB_END, NB_END, -1)); break;
        case 4: t = NBT(nb_permute(NBT(nb_narrow(b3, 2, 0, 6)), (int[]){2, 0, 1}, 3)); break;
        case 5: t = NBT(nb_narrow(NBT(nb_narrow(b3, 1, 0, 6)), 2, 0, 6)); break;
        }
        int64_t n = nb_numel(t), *off = malloc((size_t)n * sizeof *off);
        offsets_of(t, off);
        for (size_t k = 0; k < sizeof targets / sizeof *targets; k++) {
            int64_t shape[4];
            int nd = targets[k].ndim;
            int64_t known = 1;
            for (int d = 0; d < nd; d++)
                if (targets[k].shape[d] > 0) known *= targets[k].shape[d];
            if (n % known) continue;
            for (int d = 0; d < nd; d++) shape[d] = targets[k].shape[d] > 0 ? targets[k].shape[d] : n / known;
            nb_tensor *r = NBT(nb_reshape(t, shape, nd));
            assert_shape(r, shape, nd);
            for (int64_t f = 0; f < n; f++) assert_true(nbt_at(r, f) == (double)off[f]); /* row-major order kept */
            bool exists = view_exists(off, n, shape, nd);
            nb_tensor *v = nb_view(t, shape, nd);
            assert_int_equal(v != NULL, exists);
            assert_int_equal(nb_shares_storage(r, base), exists);
            if (v) {
                assert_true(nb_shares_storage(v, base));
                nviews++;
            } else {
                assert_error(NB_ERR_SHAPE, "view");
                ncopies++;
            }
        }
        free(off);
        nb_scope_end();
    }
    assert_true(nviews > 5 && ncopies > 5); /* both paths exercised */
    /* a contiguous reshape is a view at the same offset */
    nb_tensor *sub = NBT(nb_narrow(base, 0, 100, 24));
    nb_tensor *r = NBT(nb_reshape(sub, NB_SHAPE(2, 3, 4)));
    assert_true(nb_shares_storage(r, base) && nb_offset(r) == 100);
    nb_tensor *fl = NBT(nb_flatten(NBT(nb_transpose(r, 0, 2)), 0, 1));
    assert_shape(fl, NB_SHAPE(12, 2));
    assert_null(nb_reshape(r, NB_SHAPE(5, 5)));
    assert_error(NB_ERR_SHAPE, "reshape");
    assert_null(nb_reshape(r, NB_SHAPE(-1, -1)));
    assert_error(NB_ERR_ARG, "reshape");
}

static void permute_transpose_narrow(void **state) {
    (void)state;
    nb_tensor *a = iota(NB_SHAPE(2, 3, 4));
    nb_tensor *p = NBT(nb_permute(a, (int[]){2, 0, 1}, 3));
    assert_shape(p, NB_SHAPE(4, 2, 3));
    assert_true(nb_strides(p)[0] == 1 && nb_strides(p)[1] == 12 && nb_strides(p)[2] == 4);
    assert_false(nb_is_contiguous(p));
    double v;
    assert_int_equal(nb_get(p, IDX(3, 1, 2), &v), NB_OK);
    assert_true(v == 1 * 12 + 2 * 4 + 3);
    nb_tensor *t = NBT(nb_transpose(a, -1, 0));
    assert_int_equal(nb_get(t, IDX(3, 2, 1), &v), NB_OK);
    assert_true(v == 1 * 12 + 2 * 4 + 3);
    nb_tensor *m = iota(NB_SHAPE(2, 3));
    assert_values(NBT(nb_t(m)), (double[]){0, 3, 1, 4, 2, 5}, 6);
    nb_tensor *one = NBT(nb_arange(0, 3, 1, NB_F64));
    assert_ptr_equal(NBT(nb_t(one)), one);
    nb_tensor *n = NBT(nb_narrow(a, 2, 1, 2));
    assert_shape(n, NB_SHAPE(2, 3, 2));
    assert_int_equal(nb_offset(n), 1);
    assert_values(NBT(nb_narrow(m, -1, 2, 1)), (double[]){2, 5}, 2);
    assert_null(nb_narrow(m, 1, 2, 2));
    assert_error(NB_ERR_INDEX, "narrow");
    assert_null(nb_permute(a, (int[]){0, 0, 1}, 3));
    assert_error(NB_ERR_AXIS, "permute");
}

/* Python slice semantics, expected lists worked out from the language definition. */
static void slice_python_semantics(void **state) {
    (void)state;
    nb_tensor *a = NBT(nb_arange(0, 10, 1, NB_F64));
    const int64_t M = INT64_MAX;
    struct { int64_t start, stop, step; int n; double want[10]; } cases[] = {
        {0, NB_END, 1, 10, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
        {NB_END, NB_END, -1, 10, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
        {8, 2, -3, 2, {8, 5}},
        {-3, NB_END, 1, 3, {7, 8, 9}},
        {-100, 100, 1, 10, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
        {100, -100, -1, 10, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}},
        {5, 2, 1, 0, {0}},
        {2, 5, -1, 0, {0}},
        {1, 9, 3, 3, {1, 4, 7}},
        {-1, -4, -1, 3, {9, 8, 7}},
        {0, NB_END, M, 1, {0}},
        {NB_END, NB_END, -M, 1, {9}},
        {-11, NB_END, 4, 3, {0, 4, 8}},
        {NB_END, -11, -4, 3, {9, 5, 1}},
        {INT64_MIN, M - 1, 5, 2, {0, 5}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        nb_tensor *s = NBT(nb_slice(a, 0, cases[k].start, cases[k].stop, cases[k].step));
        assert_values(s, cases[k].want, cases[k].n);
        assert_true(nb_shares_storage(s, a));
        if (cases[k].n > 1) assert_true(nb_strides(s)[0] == cases[k].step);
    }
    nb_tensor *r = NBT(nb_slice(a, 0, NB_END, NB_END, -2));
    assert_true(nb_strides(r)[0] == -2 && nb_offset(r) == 9);
    /* writes through a negative-stride view */
    assert_int_equal(nb_set(r, (int64_t[]){1}, 70), NB_OK);
    assert_true(nbt_at(a, 7) == 70);
    nb_tensor *m = iota(NB_SHAPE(3, 4));
    nb_tensor *ms = NBT(nb_slice(m, -1, NB_END, 0, -2)); /* columns 3, 1 */
    assert_values(ms, (double[]){3, 1, 7, 5, 11, 9}, 6);
    assert_null(nb_slice(a, 0, 0, 5, 0));
    assert_error(NB_ERR_ARG, "slice");
    assert_null(nb_slice(a, 1, 0, 5, 1));
    assert_error(NB_ERR_AXIS, "slice");
}

static void select_squeeze_unsqueeze(void **state) {
    (void)state;
    nb_tensor *a = iota(NB_SHAPE(2, 3, 4));
    nb_tensor *s = NBT(nb_select(a, 1, -1));
    assert_shape(s, NB_SHAPE(2, 4));
    for (int64_t i = 0; i < 8; i++) assert_true(nbt_at(s, i) == (double)((i / 4) * 12 + 2 * 4 + i % 4));
    assert_null(nb_select(a, 1, 3));
    assert_error(NB_ERR_INDEX, "select");
    assert_null(nb_select(a, 1, -4));
    assert_error(NB_ERR_INDEX, "select");
    nb_tensor *u = NBT(nb_unsqueeze(a, -1));
    assert_shape(u, NB_SHAPE(2, 3, 4, 1));
    assert_true(nb_shares_storage(u, a));
    assert_shape(NBT(nb_unsqueeze(a, 0)), NB_SHAPE(1, 2, 3, 4));
    assert_shape(NBT(nb_unsqueeze(a, -4)), NB_SHAPE(1, 2, 3, 4));
    assert_null(nb_unsqueeze(a, 4 + 1));
    assert_error(NB_ERR_AXIS, "unsqueeze");
    /* unsqueeze/squeeze of a non-contiguous tensor stay views */
    nb_tensor *t = NBT(nb_transpose(a, 0, 2));
    nb_tensor *tu = NBT(nb_unsqueeze(t, 1));
    assert_true(nb_shares_storage(tu, a));
    assert_shape(tu, NB_SHAPE(4, 1, 3, 2));
    nb_tensor *sq = NBT(nb_squeeze(tu, 1));
    assert_true(nb_shares_storage(sq, a));
    assert_close(sq, t, 0, 0);
    assert_null(nb_squeeze(a, 0));
    assert_error(NB_ERR_SHAPE, "squeeze");
    assert_shape(NBT(nb_squeeze_all(NBT(nb_zeros(NB_SHAPE(1, 2, 1, 3, 1), NB_F32)))), NB_SHAPE(2, 3));
    assert_int_equal(nb_ndim(NBT(nb_squeeze_all(NBT(nb_zeros(NB_SHAPE(1, 1), NB_F32))))), 0);
}

static void expand_broadcast_to(void **state) {
    (void)state;
    nb_tensor *c = iota(NB_SHAPE(3, 1));
    nb_tensor *e = NBT(nb_expand(c, NB_SHAPE(2, -1, 4)));
    assert_shape(e, NB_SHAPE(2, 3, 4));
    assert_true(nb_strides(e)[0] == 0 && nb_strides(e)[1] == 1 && nb_strides(e)[2] == 0);
    assert_true(nb_shares_storage(e, c));
    for (int64_t i = 0; i < 24; i++) assert_true(nbt_at(e, i) == (double)((i / 4) % 3));
    nb_tensor *b = NBT(nb_broadcast_to(c, NB_SHAPE(3, 5)));
    assert_shape(b, NB_SHAPE(3, 5));
    assert_null(nb_broadcast_to(c, NB_SHAPE(-1, 5)));
    assert_error(NB_ERR_SHAPE, "broadcast_to");
    assert_null(nb_expand(c, NB_SHAPE(2, 4)));
    assert_true(strstr(nb_last_message(), "[3, 1]") && strstr(nb_last_message(), "[2, 4]"));
    assert_error(NB_ERR_SHAPE, "expand");
    assert_null(nb_expand(c, NB_SHAPE(3)));
    assert_error(NB_ERR_SHAPE, "expand");
    /* contiguous() of an expanded view materializes it */
    nb_tensor *m = NBT(nb_contiguous(e));
    assert_true(nb_is_contiguous(m) && !nb_shares_storage(m, c));
    assert_close(m, e, 0, 0);
}

static void flip_diagonal(void **state) {
    (void)state;
    nb_tensor *a = iota(NB_SHAPE(3, 4));
    nb_tensor *f = NBT(nb_flip(a, NB_AXES(0, -1)));
    assert_true(nb_shares_storage(f, a));
    assert_true(nb_strides(f)[0] == -4 && nb_strides(f)[1] == -1);
    for (int64_t i = 0; i < 12; i++) assert_true(nbt_at(f, i) == (double)(11 - i));
    assert_values(NBT(nb_flip(a, NB_AXES(1))), (double[]){3, 2, 1, 0, 7, 6, 5, 4, 11, 10, 9, 8}, 12);
    assert_null(nb_flip(a, NB_AXES(0, 0)));
    assert_error(NB_ERR_AXIS, "flip");

    assert_values(NBT(nb_diagonal(a, 0, 0, 1)), (double[]){0, 5, 10}, 3);
    assert_values(NBT(nb_diagonal(a, 1, 0, 1)), (double[]){1, 6, 11}, 3);
    assert_values(NBT(nb_diagonal(a, 2, 0, 1)), (double[]){2, 7}, 2);
    assert_values(NBT(nb_diagonal(a, -1, 0, 1)), (double[]){4, 9}, 2);
    assert_values(NBT(nb_diagonal(a, 1, 1, 0)), (double[]){4, 9}, 2); /* swapped axes */
    assert_int_equal(nb_numel(NBT(nb_diagonal(a, 5, 0, 1))), 0);
    assert_int_equal(nb_numel(NBT(nb_diagonal(a, -3, 0, 1))), 0);
    nb_tensor *b = iota(NB_SHAPE(2, 3, 3));
    nb_tensor *d = NBT(nb_diagonal(b, 0, 1, 2));
    assert_shape(d, NB_SHAPE(2, 3));
    assert_true(nb_strides(d)[1] == 3 + 1);
    assert_values(d, (double[]){0, 4, 8, 9, 13, 17}, 6);
    assert_null(nb_diagonal(a, 0, 1, 1));
    assert_error(NB_ERR_AXIS, "diagonal");
}

static void as_strided_bounds(void **state) {
    (void)state;
    nb_tensor *a = NBT(nb_arange(0, 10, 1, NB_F64));
    nb_tensor *w = NBT(nb_as_strided(a, IDX(4, 3), (int64_t[]){2, 1}, 2, 1)); /* sliding windows */
    for (int64_t i = 0; i < 12; i++) assert_true(nbt_at(w, i) == (double)(1 + 2 * (i / 3) + i % 3));
    assert_true(nb_shares_storage(w, a));
    assert_values(NBT(nb_as_strided(a, IDX(3), (int64_t[]){-1}, 1, 2)), (double[]){2, 1, 0}, 3);
    assert_values(NBT(nb_as_strided(a, IDX(10), (int64_t[]){0}, 1, 9)), (double[]){9, 9, 9, 9, 9, 9, 9, 9, 9, 9},
                  10);
    /* bounds are those of the storage, not of the view it is called on */
    nb_tensor *n = NBT(nb_narrow(a, 0, 2, 2));
    assert_values(NBT(nb_as_strided(n, IDX(2), (int64_t[]){1}, 1, 8)), (double[]){8, 9}, 2);
    assert_null(nb_as_strided(a, IDX(4, 3), (int64_t[]){3, 1}, 2, 0)); /* reaches 11 */
    assert_error(NB_ERR_INDEX, "as_strided");
    assert_null(nb_as_strided(a, IDX(3), (int64_t[]){-1}, 1, 1)); /* reaches -1 */
    assert_error(NB_ERR_INDEX, "as_strided");
    assert_null(nb_as_strided(a, IDX(1), (int64_t[]){1}, 1, -1));
    assert_error(NB_ERR_INDEX, "as_strided");
    assert_null(nb_as_strided(a, IDX(3), (int64_t[]){INT64_MAX}, 1, 0));
    assert_error(NB_ERR_OVERFLOW, "as_strided");
    assert_int_equal(nb_numel(NBT(nb_as_strided(a, IDX(0, 3), (int64_t[]){100, 100}, 2, 0))), 0);
}

static void contiguous_noop(void **state) {
    (void)state;
    nb_tensor *a = iota(NB_SHAPE(2, 3));
    assert_ptr_equal(NBT(nb_contiguous(a)), a);
    nb_tensor *t = NBT(nb_transpose(a, 0, 1));
    nb_tensor *c = NBT(nb_contiguous(t));
    assert_true(c != t && nb_is_contiguous(c) && !nb_shares_storage(c, a));
    assert_values(c, (double[]){0, 3, 1, 4, 2, 5}, 6);
    /* size-1 axes do not matter for contiguity */
    nb_tensor *u = NBT(nb_select(NBT(nb_unsqueeze(t, 0)), 1, 0)); /* [1, 2] with stride 3 */
    assert_true(nb_is_contiguous(NBT(nb_unsqueeze(a, 1))));
    assert_false(nb_is_contiguous(u));
    nb_tensor *col = NBT(nb_narrow(a, 1, 1, 1));
    assert_false(nb_is_contiguous(col));
    assert_true(nb_is_contiguous(NBT(nb_narrow(a, 0, 1, 1))));
}

/* ======================================================================== */
/* T6 element access                                                        */
/* ======================================================================== */

static void access_through_views(void **state) {
    (void)state;
    nb_tensor *a = iota(NB_SHAPE(2, 3));
    nb_tensor *t = NBT(nb_transpose(a, 0, 1)); /* t[i][j] = a[j][i] = 3j + i */
    double out[6];
    assert_int_equal(nb_copy_to_host(t, out, sizeof out), NB_OK);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) assert_true(out[i * 2 + j] == 3 * j + i);
    double v;
    assert_int_equal(nb_get(t, IDX(-1, -2), &v), NB_OK); /* negatives count from the end */
    assert_true(v == 3 * 0 + 2);
    assert_int_equal(nb_get(t, IDX(3, 0), &v), NB_ERR_INDEX);
    assert_error(NB_ERR_INDEX, "get");
    assert_int_equal(nb_set(t, IDX(0, -3), 1), NB_ERR_INDEX);
    assert_error(NB_ERR_INDEX, "set");

    /* copy_from_host into a reversed column writes through to the base */
    nb_tensor *col = NBT(nb_slice(NBT(nb_select(a, 1, 1)), 0, NB_END, NB_END, -1)); /* a[1][1], a[0][1] */
    double in[2] = {10, 20};
    assert_int_equal(nb_copy_from_host(col, in, sizeof in), NB_OK);
    assert_values(a, (double[]){0, 20, 2, 3, 10, 5}, 6);
    assert_int_equal(nb_copy_from_host(col, in, sizeof in - 1), NB_ERR_ARG);
    assert_error(NB_ERR_ARG, "copy_from_host");
    assert_int_equal(nb_copy_to_host(t, out, 8), NB_ERR_ARG);
    assert_error(NB_ERR_ARG, "copy_to_host");

    /* item: any one-element shape; converted through the dtype */
    assert_int_equal(nb_item(NBT(nb_full(NB_SHAPE(1, 1, 1), 0.1, NB_F16)), &v), NB_OK);
    assert_true(v == f16_value(0x2e66)); /* 0.1 rounds to 0x2e66 = 1638/16384 */
    assert_int_equal(nb_item(a, &v), NB_ERR_SHAPE);
    assert_error(NB_ERR_SHAPE, "item");
    /* set converts: truncation for ints, rounding for bf16 */
    nb_tensor *i8 = NBT(nb_zeros(NB_SHAPE(2), NB_I8));
    assert_int_equal(nb_set(i8, IDX(1), -7.9), NB_OK);
    assert_true(nbt_at(i8, 1) == -7);
    nb_tensor *bf = NBT(nb_zeros(NB_SHAPE(1), NB_BF16));
    assert_int_equal(nb_set(bf, IDX(0), 1.0 + 1.0 / 256), NB_OK); /* halfway: ties to even 1.0 */
    assert_true(nbt_at(bf, 0) == 1.0);
    /* a stride-0 view reads one element many times */
    float one = 3;
    nb_tensor *e = NBT(nb_expand(NBT(nb_from_data(&one, NB_SHAPE(1), NB_F32)), NB_SHAPE(2, 2)));
    float eo[4];
    assert_int_equal(nb_copy_to_host(e, eo, sizeof eo), NB_OK);
    assert_true(eo[0] == 3 && eo[3] == 3);
    /* host copies work on the reference device too */
    nb_tensor *r = NBT(nb_to_device(t, NB_REF));
    assert_int_equal(nb_copy_to_host(r, out, sizeof out), NB_OK);
    assert_true(out[2] == 20); /* t[1][0] = a[0][1] */
}

/* ======================================================================== */
/* T7 broadcasting                                                          */
/* ======================================================================== */

static void broadcasting(void **state) {
    (void)state;
    nb_tensor *a = iota(NB_SHAPE(2, 1, 3)), *b = iota(NB_SHAPE(4, 1));
    nb_tensor *s = NBT(nb_add(a, b));
    assert_shape(s, NB_SHAPE(2, 4, 3));
    for (int64_t i = 0; i < 24; i++) {
        int64_t x = i / 12, y = (i / 3) % 4, z = i % 3;
        assert_true(nbt_at(s, i) == (double)(x * 3 + z) + (double)y);
    }
    /* the same through non-contiguous and reversed operands, CPU vs REF */
    nb_tensor *at = NBT(nb_flip(NBT(nb_transpose(iota(NB_SHAPE(3, 1, 2)), 0, 2)), NB_AXES(2)));
    nb_tensor *bt = NBT(nb_slice(iota(NB_SHAPE(5, 3)), 0, NB_END, NB_END, -2));
    nb_tensor *cpu = NBT(nb_mul(at, bt));
    nb_tensor *ref = NBT(nb_mul(NBT(nb_to_device(at, NB_REF)), NBT(nb_to_device(bt, NB_REF))));
    assert_shape(cpu, NB_SHAPE(2, 3, 3));
    assert_close(cpu, ref, 0, 0);
    /* three-way where */
    nb_tensor *w = NBT(nb_where(NBT(nb_gt(b, 1.5)), a, NBT(nb_scalar(-1, NB_F64))));
    assert_shape(w, NB_SHAPE(2, 4, 3));
    assert_true(nbt_at(w, 0) == -1 && nbt_at(w, 11) == 2);
    /* errors name both shapes */
    nb_tensor *x = iota(NB_SHAPE(2, 3)), *y = iota(NB_SHAPE(4));
    assert_null(nb_add(x, y));
    assert_true(strstr(nb_last_message(), "[2, 3]") && strstr(nb_last_message(), "[4]"));
    assert_error(NB_ERR_SHAPE, "add");
    assert_null(nb_where(NBT(nb_gt(x, 1.0)), x, y));
    assert_error(NB_ERR_SHAPE, "where");
    assert_int_equal(nb_copy_(x, iota(NB_SHAPE(3, 3))), NB_ERR_SHAPE);
    assert_error(NB_ERR_SHAPE, "copy_");
    assert_int_equal(nb_copy_(iota(NB_SHAPE(1, 3)), x), NB_ERR_SHAPE); /* src does not fit dst */
    assert_error(NB_ERR_SHAPE, "copy_");
    assert_int_equal(nb_add_(iota(NB_SHAPE(1, 3)), x, 1), NB_ERR_SHAPE);
    assert_error(NB_ERR_SHAPE, "add_");
    nb_tensor *mask = NBT(nb_gt(iota(NB_SHAPE(2, 3)), 2.0));
    assert_null(nb_masked_fill(iota(NB_SHAPE(1, 3)), mask, 0)); /* mask must broadcast to x */
    assert_error(NB_ERR_SHAPE, "masked_fill");
    assert_values(NBT(nb_masked_fill(x, NBT(nb_gt(iota(NB_SHAPE(3)), 0.5)), -1)), (double[]){0, -1, -1, 3, -1, -1}, 6);
}

/* ======================================================================== */
/* Scopes                                                                   */
/* ======================================================================== */

static nb_tensor *counted_blob(float *buf, blob_ctx *c) {
    return NBT(nb_from_blob(buf, IDX(4), NULL, 1, NB_F32, blob_release, c));
}

static void scopes_release_and_keep(void **state) {
    (void)state;
    float buf[4] = {1, 2, 3, 4};
    blob_ctx c1 = {0}, c2 = {0}, c3 = {0}, c4 = {0}, c5 = {0};
    nb_scope_begin();
    nb_scope_begin();
    nb_tensor *a = counted_blob(buf, &c1);
    NBT(nb_mul(nb_add(a, 1.0), 2.0));   /* temporaries */
    NBT(nb_reshape(a, NB_SHAPE(2, 2))); /* a view keeps the blob alive until the scope ends */
    nb_tensor *b = counted_blob(buf, &c2);
    nb_tensor *kept = nb_scope_keep(NBT(nb_narrow(b, 0, 1, 2))); /* moves to the outer scope */
    nb_tensor *k3 = nb_scope_keep(counted_blob(buf, &c3));
    nb_scope_end();
    assert_int_equal(c1.calls, 1); /* everything made in the inner scope is gone... */
    assert_int_equal(c2.calls + c3.calls, 0); /* ...except what was kept */
    assert_values(kept, (double[]){2, 3}, 2);
    assert_values(k3, (double[]){1, 2, 3, 4}, 4);
    nb_scope_end(); /* the outer scope releases what was kept into it */
    assert_int_equal(c2.calls, 1);
    assert_int_equal(c3.calls, 1);

    /* keep out of the outermost scope: the caller owns it */
    nb_scope_begin();
    nb_tensor *mine = nb_scope_keep(counted_blob(buf, &c4));
    nb_scope_end();
    assert_int_equal(c4.calls, 0);
    nb_release(mine);
    assert_int_equal(c4.calls, 1);

    /* keep of a tensor the innermost scope does not own takes a new reference */
    nb_tensor *own = counted_blob(buf, &c5); /* no scope open: the caller's */
    nb_scope_begin();
    nb_tensor *extra = nb_scope_keep(own);
    assert_ptr_equal(extra, own);
    nb_scope_end();
    nb_release(own);
    assert_int_equal(c5.calls, 0);
    nb_release(extra);
    assert_int_equal(c5.calls, 1);

    /* an unbalanced end changes nothing but is reported; keep(NULL) is harmless */
    nb_clear_error();
    assert_null(nb_scope_keep(NULL));
    assert_int_equal(nb_last_status(), NB_OK);
    nb_scope_end();
    assert_int_equal(nb_last_status(), NB_ERR_STATE);
    nb_clear_error();
}

/* Internal paths that take a public result's reference, run with no scope
 * open (every result here is released by hand; ASan checks for leaks). */
static void unscoped_paths(void **state) {
    (void)state;
    nb_clear_error();
    nb_tensor *a = NBT(nb_arange(0, 6, 1, NB_F64));
    nb_tensor *m = NBT(nb_reshape(a, NB_SHAPE(2, 3)));
    nb_tensor *t = NBT(nb_transpose(m, 0, 1));
    nb_tensor *r = NBT(nb_reshape(t, NB_SHAPE(6))); /* copy path */
    assert_false(nb_shares_storage(r, a));
    assert_values(r, (double[]){0, 3, 1, 4, 2, 5}, 6);
    nb_tensor *f = NBT(nb_flip(a, NB_AXES(0)));
    assert_int_equal(nb_copy_(a, f), NB_OK); /* overlapping source: copied first */
    assert_values(a, (double[]){5, 4, 3, 2, 1, 0}, 6);
    nb_tensor *k = nb_scope_keep(a); /* no scope: a new reference */
    assert_ptr_equal(k, a);
    nb_release(k);
    nb_tensor *views[] = {m, t, r, f, a};
    for (size_t i = 0; i < sizeof views / sizeof *views; i++) nb_release(views[i]);
}

/* Integer arithmetic is exact in int64 and wraps like PyTorch (two's complement);
 * expected values follow from that definition, read back bit-exactly. */
static void integer_arithmetic_exact_and_wraps(void **state) {
    (void)state;
    const int64_t big = ((int64_t)1 << 53) + 1, imax = INT64_MAX;
    int64_t v[3] = {big, big, 1}, got[3];
    nb_tensor *x = NBT(nb_from_data(v, NB_SHAPE(3), NB_I64));
    assert_int_equal(nb_copy_to_host(NBT(nb_add(x, 1)), got, sizeof got), NB_OK);
    assert_true(got[0] == big + 1 && got[2] == 2);
    assert_int_equal(nb_copy_to_host(NBT(nb_sum(x, NULL, 0, false)), got, 8), NB_OK);
    assert_true(got[0] == 2 * big + 1);
    assert_int_equal(nb_copy_to_host(NBT(nb_max(x, NULL, 0, false)), got, 8), NB_OK);
    assert_true(got[0] == big);
    assert_int_equal(nb_copy_to_host(NBT(nb_cumsum(x, 0)), got, sizeof got), NB_OK);
    assert_true(got[1] == 2 * big && got[2] == 2 * big + 1);
    nb_tensor *m = NBT(nb_from_data(&imax, NULL, 0, NB_I64));
    assert_int_equal(nb_copy_to_host(NBT(nb_add(m, 1)), got, 8), NB_OK);
    assert_true(got[0] == INT64_MIN);
    assert_int_equal(nb_copy_to_host(NBT(nb_where(NBT(nb_gt(x, 1)), x, NBT(nb_neg(x)))), got, sizeof got), NB_OK);
    assert_true(got[0] == big && got[2] == -1);

    uint8_t u[2] = {0, 200}, ug[2];
    nb_tensor *xu = NBT(nb_from_data(u, NB_SHAPE(2), NB_U8));
    assert_int_equal(nb_copy_to_host(NBT(nb_sub(xu, 1)), ug, 2), NB_OK);
    assert_true(ug[0] == 255 && ug[1] == 199);
    assert_int_equal(nb_copy_to_host(NBT(nb_add(xu, NBT(nb_full(NB_SHAPE(2), 100, NB_U8)))), ug, 2), NB_OK);
    assert_true(ug[0] == 100 && ug[1] == 44);
    int8_t i8 = -128, i8g;
    assert_int_equal(nb_copy_to_host(NBT(nb_abs(NBT(nb_from_data(&i8, NULL, 0, NB_I8)))), &i8g, 1), NB_OK);
    assert_true(i8g == -128);

    int64_t a[4] = {-7, 7, 3, 2}, b[4] = {3, -3, 0, 63}, r[4];
    nb_tensor *ta = NBT(nb_from_data(a, NB_SHAPE(4), NB_I64)), *tb = NBT(nb_from_data(b, NB_SHAPE(4), NB_I64));
    assert_int_equal(nb_copy_to_host(NBT(nb_remainder(ta, tb)), r, sizeof r), NB_OK);
    assert_true(r[0] == 2 && r[1] == -2 && r[2] == 0 && r[3] == 2); /* Python's %; x % 0 -> 0 (documented) */
    assert_int_equal(nb_copy_to_host(NBT(nb_pow(ta, tb)), r, sizeof r), NB_OK);
    assert_true(r[0] == -343 && r[1] == 0 && r[2] == 1 && r[3] == INT64_MIN); /* 7^-3 -> 0 (documented); 2^63 wraps */
}

/* C integer scalars stay exact (never through double) and convert into an
 * integer operand's dtype wrapping around, as do integer casts; the expected
 * values are PyTorch 2.x's (torch.tensor(...) op python_int, .to(dtype)).
 * On both backends. */
static void integer_scalars_exact_and_wrap(void **state) {
    (void)state;
    const int64_t p53 = (int64_t)1 << 53;
    for (int d = 0; d < 2; d++) {
        nb_device dev = d ? NB_REF : NB_CPU;
        uint8_t u = 250, ug;
        nb_tensor *xu = NBT(nb_to_device(NBT(nb_from_data(&u, NB_SHAPE(1), NB_U8)), dev));
        assert_int_equal(nb_copy_to_host(NBT(nb_add(xu, 300)), &ug, 1), NB_OK);
        assert_int_equal(ug, 38); /* 300 -> 44 in u8; 250 + 44 = 294 -> 38 */
        assert_int_equal(nb_copy_to_host(NBT(nb_mul(xu, 300)), &ug, 1), NB_OK);
        assert_int_equal(ug, 248);
        assert_true(nbt_at(NBT(nb_gt(xu, 300)), 0) == 1); /* compared with 44, as torch */
        int8_t i8 = 7, i8g;
        nb_tensor *x8 = NBT(nb_to_device(NBT(nb_from_data(&i8, NB_SHAPE(1), NB_I8)), dev));
        assert_int_equal(nb_copy_to_host(NBT(nb_sub(x8, 300)), &i8g, 1), NB_OK);
        assert_int_equal(i8g, -37);
        int32_t v[3] = {0, 1, 2}, vg[3];
        nb_tensor *x32 = NBT(nb_to_device(NBT(nb_from_data(v, NB_SHAPE(3), NB_I32)), dev));
        nb_tensor *r32 = NBT(nb_add(x32, (int64_t)1 << 32));
        assert_int_equal(nb_dtype_of(r32), NB_I32);
        assert_int_equal(nb_copy_to_host(r32, vg, sizeof vg), NB_OK);
        assert_true(vg[0] == 0 && vg[1] == 1 && vg[2] == 2);
        assert_int_equal(nb_copy_to_host(NBT(nb_add(x32, ((int64_t)1 << 40) + 3)), vg, sizeof vg), NB_OK);
        assert_true(vg[0] == 3 && vg[2] == 5);
        /* int64 with 2^53 + 1: exact arithmetic and comparisons */
        int64_t w = p53, wg;
        nb_tensor *x64 = NBT(nb_to_device(NBT(nb_from_data(&w, NB_SHAPE(1), NB_I64)), dev));
        assert_int_equal(nb_copy_to_host(NBT(nb_add(x64, p53 + 1)), &wg, 8), NB_OK);
        assert_true(wg == 2 * p53 + 1);
        assert_int_equal(nb_copy_to_host(NBT(nb_sub(x64, p53 + 1)), &wg, 8), NB_OK);
        assert_true(wg == -1);
        assert_true(nbt_at(NBT(nb_eq(x64, p53 + 1)), 0) == 0);
        assert_true(nbt_at(NBT(nb_ne(x64, p53 + 1)), 0) == 1);
        assert_true(nbt_at(NBT(nb_lt(x64, p53 + 1)), 0) == 1);
        assert_true(nbt_at(NBT(nb_ge(x64, p53 + 1)), 0) == 0);
        assert_int_equal(nb_copy_to_host(NBT(nb_maximum(x64, p53 + 1)), &wg, 8), NB_OK);
        assert_true(wg == p53 + 1);
        /* a rank-0 i64 tensor converts into u8 the same way (torch: maximum(u8 5, tensor(300)) = 44) */
        uint8_t five = 5;
        nb_tensor *r0 = NBT(nb_to_device(NBT(nb_full(NULL, 0, 300, NB_I64)), dev));
        nb_tensor *x5 = NBT(nb_to_device(NBT(nb_from_data(&five, NB_SHAPE(1), NB_U8)), dev));
        assert_int_equal(nb_copy_to_host(NBT(nb_maximum(x5, r0)), &ug, 1), NB_OK);
        assert_int_equal(ug, 44);
        /* integer casts wrap: [300, -1, 2^32 + 5] -> u8 [44, 255, 5], i32 [300, -1, 5] */
        int64_t c[3] = {300, -1, ((int64_t)1 << 32) + 5};
        uint8_t cu[3];
        int32_t ci[3];
        nb_tensor *xc = NBT(nb_to_device(NBT(nb_from_data(c, NB_SHAPE(3), NB_I64)), dev));
        assert_int_equal(nb_copy_to_host(NBT(nb_cast(xc, NB_U8)), cu, 3), NB_OK);
        assert_true(cu[0] == 44 && cu[1] == 255 && cu[2] == 5);
        assert_int_equal(nb_copy_to_host(NBT(nb_cast(xc, NB_I32)), ci, sizeof ci), NB_OK);
        assert_true(ci[0] == 300 && ci[1] == -1 && ci[2] == 5);
        /* a double value converts as nb_full does: saturating (documented) */
        assert_int_equal(nb_copy_to_host(NBT(nb_masked_fill(xu, NBT(nb_to_device(NBT(nb_scalar(1, NB_BOOL)), dev)), 300.0)), &ug, 1), NB_OK);
        assert_int_equal(ug, 255);
        /* an int scalar with a float tensor still promotes to the tensor's float dtype */
        float f = 1.5f, fg;
        nb_tensor *xf = NBT(nb_to_device(NBT(nb_from_data(&f, NB_SHAPE(1), NB_F32)), dev));
        nb_tensor *rf = NBT(nb_add(xf, p53 + 1));
        assert_int_equal(nb_dtype_of(rf), NB_F32);
        assert_int_equal(nb_copy_to_host(rf, &fg, 4), NB_OK);
        assert_true(fg == 0x1p53f); /* 1.5 + 2^53 rounds to 2^53 in f32 */
        assert_int_equal(nb_dtype_of(NBT(nb_add(x32, 2.5))), NB_F32);
    }
}

/* In-place writers refuse a destination whose elements may share an address
 * (stride 0 on an axis of more than one element, or strides that let axes
 * overlap) and leave it untouched; views with distinct elements — negative,
 * gapped, permuted or column-major strides — are written at the addresses
 * their strides name. */
typedef struct { int ndim; int64_t shape[3], stride[3], offset; } layout;

static nb_tensor *view_of(nb_tensor *base, const layout *l) {
    return NBT(nb_as_strided(base, l->shape, l->stride, l->ndim, l->offset));
}

static void inplace_refuses_overlapping_destinations(void **state) {
    (void)state;
    const layout overlapping[] = {
        {2, {3, 2}, {1, 1}, 0},      /* the example: rows overlap by one */
        {2, {2, 3}, {2, 1}, 0},      /* row 0 ends where row 1 starts */
        {1, {4}, {0}, 0},            /* stride 0 */
        {3, {2, 2, 2}, {4, 1, 1}, 0},
        {2, {3, 2}, {-1, 1}, 4},     /* negative strides overlapping */
        {2, {3, 3}, {3, 2}, 0},      /* 0 3 6 / 2 5 8 / 4 7 10: distinct but interleaved: refused (conservative) */
    };
    nb_tensor *base = NBT(nb_zeros(NB_SHAPE(32), NB_F64)), *one = NBT(nb_ones(NULL, 0, NB_F64));
    for (size_t k = 0; k < sizeof overlapping / sizeof *overlapping; k++) {
        nb_tensor *v = view_of(base, &overlapping[k]);
        double buf[27] = {0};
        assert_int_equal(nb_copy_(v, one), NB_ERR_ARG);
        assert_error(NB_ERR_ARG, "copy_");
        assert_int_equal(nb_fill_(v, 2), NB_ERR_ARG);
        assert_error(NB_ERR_ARG, "fill_");
        assert_int_equal(nb_add_(v, one, 1), NB_ERR_ARG);
        assert_error(NB_ERR_ARG, "add_");
        assert_int_equal(nb_mul_scalar_(v, 2), NB_ERR_ARG);
        assert_error(NB_ERR_ARG, "mul_scalar_");
        assert_int_equal(nb_copy_from_host(v, buf, (size_t)nb_numel(v) * sizeof(double)), NB_ERR_ARG);
        assert_error(NB_ERR_ARG, "copy_from_host");
    }
    nb_tensor *v = view_of(base, &overlapping[0]);
    assert_int_equal(nb_copy_(v, one), NB_ERR_ARG);
    assert_non_null(strstr(nb_last_message(), "[3, 2]"));
    assert_non_null(strstr(nb_last_message(), "strides [1, 1]"));
    nb_clear_error();
    for (int i = 0; i < 32; i++) assert_true(nbt_at(base, i) == 0); /* untouched */

    const layout distinct[] = {
        {2, {2, 3}, {1, 2}, 0},      /* column-major */
        {2, {2, 2}, {5, 2}, 1},      /* gaps */
        {2, {3, 2}, {2, 5}, 0},      /* 0 5 / 2 7 / 4 9: strides out of order, no overlap */
        {2, {3, 4}, {-4, 1}, 8},     /* rows reversed */
        {2, {3, 4}, {4, -1}, 3},     /* columns reversed */
        {3, {2, 3, 2}, {1, 4, 2}, 0}, /* permuted */
        {3, {2, 1, 3}, {3, 0, 1}, 0}, /* stride 0 on an axis of one element */
        {2, {0, 3}, {0, 0}, 0},      /* empty */
    };
    for (size_t k = 0; k < sizeof distinct / sizeof *distinct; k++) {
        const layout *l = &distinct[k];
        nb_tensor *b = NBT(nb_zeros(NB_SHAPE(32), NB_F64)), *w = view_of(b, l);
        int64_t n = nb_numel(w);
        nb_tensor *src = NBT(nb_reshape(NBT(nb_arange(1, (double)n + 1, 1, NB_F64)), l->shape, l->ndim));
        assert_int_equal(nb_copy_(w, src), NB_OK);
        assert_int_equal(nb_add_(w, src, 1), NB_OK);     /* 2 (i + 1) */
        assert_int_equal(nb_mul_scalar_(w, 0.5), NB_OK); /* i + 1 */
        double want[32] = {0};
        for (int64_t i = 0; i < n; i++) { /* the address of row-major element i from the strides */
            int64_t off = l->offset, r = i;
            for (int d = l->ndim - 1; d >= 0; d--) {
                off += (r % l->shape[d]) * l->stride[d];
                r /= l->shape[d];
            }
            want[off] = (double)(i + 1);
        }
        assert_values(b, want, 32);
        assert_int_equal(nb_fill_(w, 7), NB_OK);
        assert_int_equal(nb_last_status(), NB_OK);
    }
    /* the views nabla makes: flip, transpose, step slices */
    nb_tensor *m = NBT(nb_zeros(NB_SHAPE(4, 6), NB_F64));
    nb_tensor *views[] = {NBT(nb_flip(m, (int[]){0, 1}, 2)), NBT(nb_t(m)),
                          NBT(nb_slice(NBT(nb_t(m)), 0, NB_END, NB_END, -2))};
    for (int k = 0; k < 3; k++) assert_int_equal(nb_fill_(views[k], k + 1), NB_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(dtype_names_sizes, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(promotion_table, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(promotion_in_ops, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(half_decode_exhaustive, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(half_encode_rne, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(float_to_int_conversion, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(cast_round_trips, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(integer_arithmetic_exact_and_wraps, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(integer_scalars_exact_and_wrap, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(inplace_refuses_overlapping_destinations, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(views_share_and_write_through, nbt_setup, nbt_teardown),
        cmocka_unit_test(from_blob_borrow),
        cmocka_unit_test_setup_teardown(rank0_scalars, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(zero_size_dims, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(rank8, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(overflow_checked_counts, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(arange_values, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(linspace_values, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(eye_full_like, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(random_reproducible, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(random_statistics, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(reshape_view_or_copy, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(permute_transpose_narrow, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(slice_python_semantics, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(select_squeeze_unsqueeze, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(expand_broadcast_to, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(flip_diagonal, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(as_strided_bounds, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(contiguous_noop, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(access_through_views, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(broadcasting, nbt_setup, nbt_teardown),
        cmocka_unit_test(scopes_release_and_keep),
        cmocka_unit_test(unscoped_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
