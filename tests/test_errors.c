/*
 * test_errors.c — the bad-input suite: every public function of nabla.h
 * that exists today, called with NULL tensors or pointers, mismatched
 * shapes, bad axes, out-of-range indices, negative sizes, element counts
 * that overflow int64, and wrong dtypes.  Each call must fail without
 * crashing, with the specific NB_ERR_* status and a message that starts
 * with the op's name; the sanitizer build checks that no failure path leaks.
 */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define IDX(...) ((const int64_t[]){__VA_ARGS__})
#define BIG ((int64_t)1 << 40) /* BIG * BIG overflows int64 (and wraps to 0) */

/* The call failed (`failed`), with `code`, and the message starts with the
 * op's name ("op: …", or "op 'equation': …" for einsum). */
static void check_fail(const char *expr, int line, bool failed, nb_status code, const char *op) {
    const char *msg = nb_last_message();
    size_t n = strlen(op);
    if (!failed || nb_last_status() != code || strncmp(msg, op, n) != 0 || (msg[n] != ':' && msg[n] != ' ')) {
        fprintf(stderr, "%s\n  expected failure %s naming '%s'; got %s, status %s: \"%s\"\n", expr,
                nb_status_name(code), op, failed ? "failure" : "success", nb_status_name(nb_last_status()), msg);
        _fail(__FILE__, line);
    }
    nb_clear_error();
}
/* An error of another op pending, as a failed call earlier in the program leaves one. */
static void plant_unrelated_error(void) {
    nb_clear_error();
    if (nb_reshape(NULL, NULL, 0) || nb_last_status() != NB_ERR_NULL) fail_msg("reshape(NULL) did not fail");
}
/* pointer results: NULL;  status results: the status;  count results: -1.
 * A status result is the call's own: checked once more with an unrelated error pending. */
#define FAILS(code, op, call) check_fail(#call, __LINE__, (nb_clear_error(), (call) == NULL), code, op)
#define FAILS_ST(code, op, call)                                                                       \
    do {                                                                                               \
        check_fail(#call, __LINE__, (nb_clear_error(), (call) == (code)), code, op);                   \
        check_fail(#call " (error pending)", __LINE__, (plant_unrelated_error(), (call) == (code)), code, op); \
    } while (0)
#define FAILS_NEG(code, op, call) check_fail(#call, __LINE__, (nb_clear_error(), (call) < 0), code, op)

static nb_tensor *f32(const int64_t *shape, int ndim) { return NBT(nb_zeros(shape, ndim, NB_F32)); }
static nb_tensor *i64s(const int64_t *shape, int ndim) { return NBT(nb_zeros(shape, ndim, NB_I64)); }

static int teardown(void **state) {
    (void)state;
    nb_scope_end();
    nb_clear_error();
    return 0;
}

/* ---- status, dtypes, op table ---- */

static void status_dtype_optable(void **state) {
    (void)state;
    for (int i = 0; i < NB_STATUS_COUNT; i++) {
        assert_true(strncmp(nb_status_name((nb_status)i), "NB_", 3) == 0);
        for (int j = 0; j < i; j++) assert_string_not_equal(nb_status_name((nb_status)i), nb_status_name((nb_status)j));
    }
    assert_string_equal(nb_status_name(NB_STATUS_COUNT), "NB_UNKNOWN");
    assert_string_equal(nb_status_name((nb_status)-1), "NB_UNKNOWN");
    assert_string_equal(nb_last_message(), "");
    assert_int_equal(nb_promote_types(NB_DTYPE_COUNT, NB_F32), NB_DTYPE_COUNT);
    assert_int_equal(nb_promote_types(NB_I8, (nb_dtype)-1), NB_DTYPE_COUNT);
    assert_int_equal(nb_promote_types((nb_dtype)100, (nb_dtype)100), NB_DTYPE_COUNT);
    assert_true(nb_op_count() > 0);
    assert_null(nb_op_name(-1));
    assert_null(nb_op_name(nb_op_count()));
    for (int i = 0; i < nb_op_count(); i++) assert_non_null(nb_op_name(i));
    assert_non_null(nb_version());
}

/* ---- devices and threads ---- */

static void devices_and_threads(void **state) {
    (void)state;
    FAILS_ST(NB_ERR_NULL, "backend_register", nb_backend_register(NB_DEVICE_CUDA, NULL));
    FAILS_ST(NB_ERR_DEVICE, "backend_register",
             nb_backend_register(NB_DEVICE_TYPE_COUNT, nb_backend_for(NB_CPU)));
    FAILS(NB_ERR_DEVICE, "backend_for", nb_backend_for((nb_device){NB_DEVICE_CUDA, 0}));
    FAILS(NB_ERR_DEVICE, "backend_for", nb_backend_for((nb_device){(nb_device_type)-1, 0}));
    assert_string_equal(nb_backend_name(NULL), "(null)");
    assert_string_equal(nb_backend_name(nb_backend_for(NB_CPU)), "cpu");
    assert_string_equal(nb_backend_name(nb_backend_for(NB_REF)), "ref");
    int saved = nb_get_num_threads();
    nb_set_num_threads(0);
    assert_int_equal(nb_get_num_threads(), 1);
    nb_set_num_threads(-5);
    assert_int_equal(nb_get_num_threads(), 1);
    nb_set_num_threads(100000);
    assert_int_equal(nb_get_num_threads(), 256);
    nb_set_num_threads(saved);
    const char *simd = nb_cpu_simd_level();
    assert_true(!strcmp(simd, "avx512") || !strcmp(simd, "avx2") || !strcmp(simd, "scalar"));
}

/* ---- handles and inspection ---- */

static void inspection_of_null(void **state) {
    (void)state;
    assert_null(nb_retain(NULL));
    nb_release(NULL);
    assert_int_equal(nb_ndim(NULL), -1);
    assert_null(nb_shape(NULL));
    assert_null(nb_strides(NULL));
    assert_int_equal(nb_numel(NULL), -1);
    assert_int_equal(nb_offset(NULL), -1);
    assert_int_equal(nb_dtype_of(NULL), NB_DTYPE_COUNT);
    assert_int_equal(nb_device_of(NULL).type, NB_DEVICE_TYPE_COUNT);
    assert_false(nb_is_contiguous(NULL));
    nb_tensor *t = f32(NB_SHAPE(2, 3));
    assert_false(nb_shares_storage(NULL, t) || nb_shares_storage(t, NULL));
    assert_int_equal(nb_last_status(), NB_OK); /* the plain queries set no error */
    FAILS_NEG(NB_ERR_NULL, "size", nb_size(NULL, 0));
    FAILS_NEG(NB_ERR_AXIS, "size", nb_size(t, 2));
    FAILS_NEG(NB_ERR_AXIS, "size", nb_size(t, -3));
    FAILS(NB_ERR_NULL, "data_ptr", nb_data_ptr(NULL));
    assert_false(nb_requires_grad(NULL) || nb_is_leaf(NULL));
}

/* ---- constructors ---- */

static void constructors(void **state) {
    (void)state;
    const int64_t ovf[] = {BIG, BIG}, neg[] = {2, -1};
    const nb_dtype bad[] = {NB_DTYPE_COUNT, (nb_dtype)-1};
    float data[4] = {0};
    /* shape-taking constructors: overflow, negative size, NULL shape, rank, dtype */
    FAILS(NB_ERR_OVERFLOW, "empty", nb_empty(ovf, 2, NB_F32));
    FAILS(NB_ERR_OVERFLOW, "zeros", nb_zeros(ovf, 2, NB_F32));
    FAILS(NB_ERR_OVERFLOW, "ones", nb_ones(ovf, 2, NB_F32));
    FAILS(NB_ERR_OVERFLOW, "full", nb_full(ovf, 2, 1, NB_F32));
    FAILS(NB_ERR_OVERFLOW, "from_data", nb_from_data(data, ovf, 2, NB_F32));
    FAILS(NB_ERR_OVERFLOW, "from_blob", nb_from_blob(data, ovf, NULL, 2, NB_F32, NULL, NULL));
    FAILS(NB_ERR_OVERFLOW, "rand", nb_rand(ovf, 2, NB_F32));
    FAILS(NB_ERR_OVERFLOW, "randn", nb_randn(ovf, 2, NB_F32));
    FAILS(NB_ERR_OVERFLOW, "eye", nb_eye(BIG, BIG, NB_F32));
    FAILS(NB_ERR_OVERFLOW, "randperm", nb_randperm((int64_t)1 << 62)); /* bytes overflow */
    FAILS(NB_ERR_OVERFLOW, "arange", nb_arange(0, 1e19, 1, NB_F32));
    FAILS(NB_ERR_ARG, "empty", nb_empty(neg, 2, NB_F32));
    FAILS(NB_ERR_ARG, "zeros", nb_zeros(neg, 2, NB_F32));
    FAILS(NB_ERR_ARG, "ones", nb_ones(neg, 2, NB_F32));
    FAILS(NB_ERR_ARG, "full", nb_full(neg, 2, 1, NB_F32));
    FAILS(NB_ERR_ARG, "from_data", nb_from_data(data, neg, 2, NB_F32));
    FAILS(NB_ERR_ARG, "rand", nb_rand(neg, 2, NB_F32));
    FAILS(NB_ERR_ARG, "randn", nb_randn(neg, 2, NB_F32));
    FAILS(NB_ERR_ARG, "eye", nb_eye(3, -1, NB_F32));
    FAILS(NB_ERR_ARG, "linspace", nb_linspace(0, 1, -1, NB_F32));
    FAILS(NB_ERR_ARG, "randperm", nb_randperm(-1));
    FAILS(NB_ERR_NULL, "empty", nb_empty(NULL, 2, NB_F32));
    FAILS(NB_ERR_NULL, "zeros", nb_zeros(NULL, 1, NB_F32));
    FAILS(NB_ERR_NULL, "rand", nb_rand(NULL, 1, NB_F32));
    FAILS(NB_ERR_ARG, "ones", nb_ones(IDX(1, 1, 1, 1, 1, 1, 1, 1, 1), 9, NB_F32));
    FAILS(NB_ERR_ARG, "empty", nb_empty(IDX(1), -1, NB_F32));
    for (int k = 0; k < 2; k++) {
        FAILS(NB_ERR_DTYPE, "empty", nb_empty(IDX(2), 1, bad[k]));
        FAILS(NB_ERR_DTYPE, "zeros", nb_zeros(IDX(2), 1, bad[k]));
        FAILS(NB_ERR_DTYPE, "ones", nb_ones(IDX(2), 1, bad[k]));
        FAILS(NB_ERR_DTYPE, "full", nb_full(IDX(2), 1, 0, bad[k]));
        FAILS(NB_ERR_DTYPE, "scalar", nb_scalar(1, bad[k]));
        FAILS(NB_ERR_DTYPE, "arange", nb_arange(0, 3, 1, bad[k]));
        FAILS(NB_ERR_DTYPE, "linspace", nb_linspace(0, 3, 4, bad[k]));
        FAILS(NB_ERR_DTYPE, "eye", nb_eye(2, 2, bad[k]));
        FAILS(NB_ERR_DTYPE, "from_data", nb_from_data(data, IDX(2), 1, bad[k]));
        FAILS(NB_ERR_DTYPE, "from_blob", nb_from_blob(data, IDX(2), NULL, 1, bad[k], NULL, NULL));
        FAILS(NB_ERR_DTYPE, "rand", nb_rand(IDX(2), 1, bad[k]));
        FAILS(NB_ERR_DTYPE, "randn", nb_randn(IDX(2), 1, bad[k]));
    }
    FAILS(NB_ERR_DTYPE, "rand", nb_rand(IDX(2), 1, NB_I32)); /* float dtypes only */
    FAILS(NB_ERR_DTYPE, "randn", nb_randn(IDX(2), 1, NB_BOOL));
    FAILS(NB_ERR_NULL, "from_data", nb_from_data(NULL, IDX(2), 1, NB_F32));
    FAILS(NB_ERR_NULL, "from_blob", nb_from_blob(NULL, IDX(2), NULL, 1, NB_F32, NULL, NULL));
    FAILS(NB_ERR_OVERFLOW, "from_blob", nb_from_blob(data, IDX(2, 2), IDX(INT64_MAX, 1), 2, NB_F32, NULL, NULL));
    FAILS(NB_ERR_OVERFLOW, "from_blob", nb_from_blob(data, IDX(3), IDX(INT64_MAX / 4), 1, NB_F32, NULL, NULL));
    FAILS(NB_ERR_ARG, "arange", nb_arange(0, 1, 0, NB_F32));
    FAILS(NB_ERR_ARG, "arange", nb_arange(0, -1, 1, NB_F32));
    FAILS(NB_ERR_ARG, "arange", nb_arange(0, INFINITY, 1, NB_F32));
    FAILS(NB_ERR_NULL, "zeros_like", nb_zeros_like(NULL));
    FAILS(NB_ERR_NULL, "ones_like", nb_ones_like(NULL));
    FAILS(NB_ERR_NULL, "full_like", nb_full_like(NULL, 1));
    FAILS(NB_ERR_NULL, "bernoulli", nb_bernoulli(NULL));
    FAILS(NB_ERR_DTYPE, "bernoulli", nb_bernoulli(i64s(NB_SHAPE(2))));
    FAILS(NB_ERR_ARG, "bernoulli", nb_bernoulli(NBT(nb_full(NB_SHAPE(2), 1.5, NB_F32))));
    FAILS(NB_ERR_ARG, "bernoulli", nb_bernoulli(NBT(nb_full(NB_SHAPE(2), NAN, NB_F32))));
}

/* ---- device moves and copies ---- */

static void moves_and_casts(void **state) {
    (void)state;
    nb_tensor *t = f32(NB_SHAPE(2));
    FAILS(NB_ERR_NULL, "to_device", nb_to_device(NULL, NB_REF));
    FAILS(NB_ERR_DEVICE, "to_device", nb_to_device(t, ((nb_device){NB_DEVICE_TYPE_COUNT, 0})));
    FAILS(NB_ERR_DEVICE, "to_device", nb_to_device(t, ((nb_device){(nb_device_type)-3, 0})));
    FAILS(NB_ERR_UNSUPPORTED, "to_device", nb_to_device(t, ((nb_device){NB_DEVICE_CUDA, 0})));
    FAILS(NB_ERR_NULL, "cast", nb_cast(NULL, NB_F32));
    FAILS(NB_ERR_DTYPE, "cast", nb_cast(t, NB_DTYPE_COUNT));
    FAILS(NB_ERR_DTYPE, "cast", nb_cast(t, (nb_dtype)-1));
    FAILS(NB_ERR_NULL, "contiguous", nb_contiguous(NULL));
    FAILS(NB_ERR_NULL, "clone", nb_clone(NULL));
}

/* ---- views ---- */

static void views(void **state) {
    (void)state;
    nb_tensor *t = f32(NB_SHAPE(2, 3, 4));
    nb_tensor *tr = NBT(nb_transpose(t, 0, 2));
    FAILS(NB_ERR_NULL, "reshape", nb_reshape(NULL, NB_SHAPE(24)));
    FAILS(NB_ERR_SHAPE, "reshape", nb_reshape(t, NB_SHAPE(5, 5)));
    FAILS(NB_ERR_SHAPE, "reshape", nb_reshape(t, NB_SHAPE(-1, 5)));
    FAILS(NB_ERR_ARG, "reshape", nb_reshape(t, NB_SHAPE(-2, -12)));
    FAILS(NB_ERR_ARG, "reshape", nb_reshape(t, NB_SHAPE(-1, -1, 24)));
    FAILS(NB_ERR_OVERFLOW, "reshape", nb_reshape(t, NB_SHAPE(BIG, BIG, 0)));
    FAILS(NB_ERR_OVERFLOW, "reshape", nb_reshape(f32(NB_SHAPE(0)), NB_SHAPE(0, (int64_t)1 << 62, 4)));
    FAILS(NB_ERR_NULL, "reshape", nb_reshape(t, NULL, 2));
    FAILS(NB_ERR_ARG, "reshape", nb_reshape(t, IDX(1, 1, 1, 1, 1, 1, 1, 1, 24), 9));
    FAILS(NB_ERR_SHAPE, "view", nb_view(tr, NB_SHAPE(24)));
    FAILS(NB_ERR_NULL, "view", nb_view(NULL, NB_SHAPE(24)));
    FAILS(NB_ERR_NULL, "flatten", nb_flatten(NULL, 0, -1));
    FAILS(NB_ERR_AXIS, "flatten", nb_flatten(t, 0, 3));
    FAILS(NB_ERR_AXIS, "flatten", nb_flatten(t, 2, 1));
    FAILS(NB_ERR_NULL, "permute", nb_permute(NULL, (int[]){0}, 1));
    FAILS(NB_ERR_AXIS, "permute", nb_permute(t, (int[]){0, 1}, 2));
    FAILS(NB_ERR_AXIS, "permute", nb_permute(t, (int[]){0, 1, 1}, 3));
    FAILS(NB_ERR_AXIS, "permute", nb_permute(t, (int[]){0, 1, 3}, 3));
    FAILS(NB_ERR_NULL, "permute", nb_permute(t, NULL, 3));
    FAILS(NB_ERR_NULL, "transpose", nb_transpose(NULL, 0, 1));
    FAILS(NB_ERR_AXIS, "transpose", nb_transpose(t, 0, 3));
    FAILS(NB_ERR_AXIS, "transpose", nb_transpose(t, -4, 0));
    FAILS(NB_ERR_NULL, "t", nb_t(NULL));
    FAILS(NB_ERR_NULL, "narrow", nb_narrow(NULL, 0, 0, 1));
    FAILS(NB_ERR_AXIS, "narrow", nb_narrow(t, 3, 0, 1));
    FAILS(NB_ERR_INDEX, "narrow", nb_narrow(t, 1, 2, 2));
    FAILS(NB_ERR_INDEX, "narrow", nb_narrow(t, 1, -1, 1));
    FAILS(NB_ERR_INDEX, "narrow", nb_narrow(t, 1, 0, -1));
    FAILS(NB_ERR_INDEX, "narrow", nb_narrow(t, 1, 1, INT64_MAX));
    FAILS(NB_ERR_NULL, "slice", nb_slice(NULL, 0, 0, 1, 1));
    FAILS(NB_ERR_AXIS, "slice", nb_slice(t, -4, 0, 1, 1));
    FAILS(NB_ERR_ARG, "slice", nb_slice(t, 0, 0, 1, 0));
    FAILS(NB_ERR_ARG, "slice", nb_slice(t, 0, 0, 1, INT64_MIN));
    FAILS(NB_ERR_NULL, "select", nb_select(NULL, 0, 0));
    FAILS(NB_ERR_AXIS, "select", nb_select(t, 3, 0));
    FAILS(NB_ERR_INDEX, "select", nb_select(t, 0, 2));
    FAILS(NB_ERR_INDEX, "select", nb_select(t, 0, -3));
    FAILS(NB_ERR_INDEX, "select", nb_select(t, 0, INT64_MIN));
    FAILS(NB_ERR_NULL, "squeeze", nb_squeeze(NULL, 0));
    FAILS(NB_ERR_AXIS, "squeeze", nb_squeeze(t, 5));
    FAILS(NB_ERR_SHAPE, "squeeze", nb_squeeze(t, 0));
    FAILS(NB_ERR_NULL, "squeeze_all", nb_squeeze_all(NULL));
    FAILS(NB_ERR_NULL, "unsqueeze", nb_unsqueeze(NULL, 0));
    FAILS(NB_ERR_AXIS, "unsqueeze", nb_unsqueeze(t, 4));
    FAILS(NB_ERR_AXIS, "unsqueeze", nb_unsqueeze(t, -5));
    FAILS(NB_ERR_SHAPE, "unsqueeze", nb_unsqueeze(NBT(nb_zeros(IDX(1, 1, 1, 1, 1, 1, 1, 1), 8, NB_F32)), 0));
    FAILS(NB_ERR_NULL, "expand", nb_expand(NULL, NB_SHAPE(2)));
    FAILS(NB_ERR_SHAPE, "expand", nb_expand(t, NB_SHAPE(2, 5, 4)));
    FAILS(NB_ERR_SHAPE, "expand", nb_expand(t, NB_SHAPE(3, 4)));
    FAILS(NB_ERR_SHAPE, "expand", nb_expand(t, NB_SHAPE(-1, 2, 3, 4)));
    FAILS(NB_ERR_SHAPE, "expand", nb_expand(t, IDX(1, 1, 1, 1, 1, 1, 2, 3, 4), 9));
    FAILS(NB_ERR_NULL, "expand", nb_expand(t, NULL, 3));
    FAILS(NB_ERR_OVERFLOW, "expand", nb_expand(f32(NB_SHAPE(1, 1)), NB_SHAPE(BIG, BIG)));
    FAILS(NB_ERR_NULL, "broadcast_to", nb_broadcast_to(NULL, NB_SHAPE(2)));
    FAILS(NB_ERR_SHAPE, "broadcast_to", nb_broadcast_to(t, NB_SHAPE(2, -1, 4)));
    FAILS(NB_ERR_OVERFLOW, "broadcast_to", nb_broadcast_to(f32(NB_SHAPE(1)), NB_SHAPE(BIG, BIG)));
    FAILS(NB_ERR_NULL, "flip", nb_flip(NULL, NB_AXES(0)));
    FAILS(NB_ERR_AXIS, "flip", nb_flip(t, NB_AXES(3)));
    FAILS(NB_ERR_AXIS, "flip", nb_flip(t, NB_AXES(1, -2)));
    FAILS(NB_ERR_NULL, "diagonal", nb_diagonal(NULL, 0, 0, 1));
    FAILS(NB_ERR_AXIS, "diagonal", nb_diagonal(t, 0, 0, 0));
    FAILS(NB_ERR_AXIS, "diagonal", nb_diagonal(t, 0, 0, 3));
    FAILS(NB_ERR_NULL, "as_strided", nb_as_strided(NULL, IDX(2), IDX(1), 1, 0));
    FAILS(NB_ERR_NULL, "as_strided", nb_as_strided(t, IDX(2), NULL, 1, 0));
    FAILS(NB_ERR_NULL, "as_strided", nb_as_strided(t, NULL, IDX(1), 1, 0));
    FAILS(NB_ERR_INDEX, "as_strided", nb_as_strided(t, IDX(25), IDX(1), 1, 0));
    FAILS(NB_ERR_INDEX, "as_strided", nb_as_strided(t, IDX(2), IDX(1), 1, 23));
    FAILS(NB_ERR_INDEX, "as_strided", nb_as_strided(t, IDX(2), IDX(-1), 1, 0));
    FAILS(NB_ERR_INDEX, "as_strided", nb_as_strided(t, IDX(1), IDX(1), 1, -1));
    FAILS(NB_ERR_ARG, "as_strided", nb_as_strided(t, IDX(-2), IDX(1), 1, 0));
    FAILS(NB_ERR_OVERFLOW, "as_strided", nb_as_strided(t, IDX(BIG, BIG), IDX(0, 0), 2, 0));
    FAILS(NB_ERR_OVERFLOW, "as_strided", nb_as_strided(t, IDX(3), IDX(INT64_MAX), 1, 0));
    FAILS(NB_ERR_OVERFLOW, "as_strided", nb_as_strided(t, IDX(2), IDX(INT64_MAX), 1, 1));
}

/* ---- element access ---- */

static void element_access(void **state) {
    (void)state;
    nb_tensor *t = f32(NB_SHAPE(2, 3));
    double v;
    float buf[6];
    FAILS_ST(NB_ERR_NULL, "get", nb_get(NULL, IDX(0, 0), &v));
    FAILS_ST(NB_ERR_NULL, "get", nb_get(t, IDX(0, 0), NULL));
    FAILS_ST(NB_ERR_NULL, "get", nb_get(t, NULL, &v));
    FAILS_ST(NB_ERR_INDEX, "get", nb_get(t, IDX(2, 0), &v));
    FAILS_ST(NB_ERR_INDEX, "get", nb_get(t, IDX(0, -4), &v));
    FAILS_ST(NB_ERR_INDEX, "get", nb_get(t, IDX(INT64_MIN, 0), &v));
    FAILS_ST(NB_ERR_NULL, "set", nb_set(NULL, IDX(0, 0), 1));
    FAILS_ST(NB_ERR_NULL, "set", nb_set(t, NULL, 1));
    FAILS_ST(NB_ERR_INDEX, "set", nb_set(t, IDX(0, 3), 1));
    FAILS_ST(NB_ERR_NULL, "item", nb_item(NULL, &v));
    FAILS_ST(NB_ERR_NULL, "item", nb_item(t, NULL));
    FAILS_ST(NB_ERR_SHAPE, "item", nb_item(t, &v));
    FAILS_ST(NB_ERR_SHAPE, "item", nb_item(f32(NB_SHAPE(0)), &v));
    FAILS_ST(NB_ERR_NULL, "copy_to_host", nb_copy_to_host(NULL, buf, sizeof buf));
    FAILS_ST(NB_ERR_NULL, "copy_to_host", nb_copy_to_host(t, NULL, sizeof buf));
    FAILS_ST(NB_ERR_ARG, "copy_to_host", nb_copy_to_host(t, buf, sizeof buf - 4));
    FAILS_ST(NB_ERR_ARG, "copy_to_host", nb_copy_to_host(t, buf, sizeof buf + 4));
    FAILS_ST(NB_ERR_NULL, "copy_from_host", nb_copy_from_host(NULL, buf, sizeof buf));
    FAILS_ST(NB_ERR_NULL, "copy_from_host", nb_copy_from_host(t, NULL, sizeof buf));
    FAILS_ST(NB_ERR_ARG, "copy_from_host", nb_copy_from_host(NBT(nb_transpose(t, 0, 1)), buf, 4));
}

/* ---- in-place updates ---- */

static void inplace_updates(void **state) {
    (void)state;
    nb_tensor *t = NBT(nb_ones(NB_SHAPE(2, 3), NB_F32)), *w = NBT(nb_ones(NB_SHAPE(3), NB_F32));
    assert_int_equal(nb_set_requires_grad(w, true), NB_OK);
    FAILS_ST(NB_ERR_NULL, "copy_", nb_copy_(NULL, t));
    FAILS_ST(NB_ERR_NULL, "copy_", nb_copy_(t, NULL));
    FAILS_ST(NB_ERR_SHAPE, "copy_", nb_copy_(t, f32(NB_SHAPE(4))));
    FAILS_ST(NB_ERR_DEVICE, "copy_", nb_copy_(t, NBT(nb_to_device(t, NB_REF))));
    FAILS_ST(NB_ERR_NULL, "fill_", nb_fill_(NULL, 1));
    FAILS_ST(NB_ERR_NULL, "add_", nb_add_(NULL, t, 1));
    FAILS_ST(NB_ERR_NULL, "add_", nb_add_(t, NULL, 1));
    FAILS_ST(NB_ERR_SHAPE, "add_", nb_add_(f32(NB_SHAPE(3)), t, 1));
    FAILS_ST(NB_ERR_NULL, "mul_scalar_", nb_mul_scalar_(NULL, 2));
    /* a leaf that requires grad cannot be updated while recording */
    nb_tensor *g = NBT(nb_ones(NB_SHAPE(3), NB_F32));
    assert_int_equal(nb_set_requires_grad(g, true), NB_OK);
    FAILS_ST(NB_ERR_STATE, "copy_", nb_copy_(g, w));
    FAILS_ST(NB_ERR_STATE, "fill_", nb_fill_(g, 0));
    FAILS_ST(NB_ERR_STATE, "add_", nb_add_(g, w, 1));
    FAILS_ST(NB_ERR_STATE, "mul_scalar_", nb_mul_scalar_(g, 2));
    nb_no_grad_begin();
    assert_int_equal(nb_fill_(g, 3), NB_OK); /* allowed under no_grad */
    nb_no_grad_end();
    /* failing calls leave their inputs untouched */
    for (int i = 0; i < 6; i++) assert_true(nbt_at(t, i) == 1);
    assert_true(nbt_at(g, 0) == 3);
}

/* ---- elementwise ops ---- */

typedef nb_tensor *(*unary_fn)(nb_tensor *);
static const struct { const char *name; unary_fn f; } unary_ops[] = {
    {"neg", nb_neg}, {"abs", nb_abs}, {"sign", nb_sign}, {"exp", nb_exp}, {"expm1", nb_expm1},
    {"log", nb_log}, {"log1p", nb_log1p}, {"sqrt", nb_sqrt}, {"rsqrt", nb_rsqrt}, {"square", nb_square},
    {"reciprocal", nb_reciprocal}, {"sin", nb_sin}, {"cos", nb_cos}, {"tan", nb_tan}, {"tanh", nb_tanh},
    {"sigmoid", nb_sigmoid}, {"relu", nb_relu}, {"silu", nb_silu}, {"erf", nb_erf}, {"floor", nb_floor},
    {"ceil", nb_ceil}, {"round", nb_round}, {"logical_not", nb_logical_not}, {"gelu", nb_gelu},
    {"gelu_tanh", nb_gelu_tanh}, {"contiguous", nb_contiguous}, {"clone", nb_clone}, {"t", nb_t},
    {"squeeze_all", nb_squeeze_all}, {"detach", nb_detach}, {"bernoulli", nb_bernoulli}, {"grad", nb_grad},
};

typedef nb_tensor *(*binary_t)(nb_tensor *, nb_tensor *);
typedef nb_tensor *(*binary_sf)(nb_tensor *, double);
typedef nb_tensor *(*binary_si)(nb_tensor *, int64_t);
#define BIN(n) {#n, nb_##n##_t, nb_##n##_sf, nb_##n##_si}
static const struct { const char *name; binary_t t; binary_sf sf; binary_si si; } binary_ops[] = {
    BIN(add), BIN(sub), BIN(mul), BIN(div), BIN(pow), BIN(maximum), BIN(minimum), BIN(atan2), BIN(remainder),
    BIN(eq), BIN(ne), BIN(lt), BIN(le), BIN(gt), BIN(ge), BIN(logical_and), BIN(logical_or), BIN(logical_xor),
};

static void elementwise(void **state) {
    (void)state;
    nb_tensor *a = f32(NB_SHAPE(2, 3)), *b = f32(NB_SHAPE(4)), *r = NBT(nb_to_device(a, NB_REF));
    for (size_t k = 0; k < sizeof unary_ops / sizeof *unary_ops; k++)
        FAILS(NB_ERR_NULL, unary_ops[k].name, unary_ops[k].f(NULL));
    FAILS(NB_ERR_NULL, "leaky_relu", nb_leaky_relu(NULL, 0.1));
    FAILS(NB_ERR_NULL, "elu", nb_elu(NULL, 1));
    FAILS(NB_ERR_NULL, "softplus", nb_softplus(NULL, 1, 20));
    FAILS(NB_ERR_ARG, "softplus", nb_softplus(a, 0, 20));
    FAILS(NB_ERR_NULL, "clamp", nb_clamp(NULL, 0, 1));
    FAILS(NB_ERR_ARG, "clamp", nb_clamp(a, NAN, 1));
    for (size_t k = 0; k < sizeof binary_ops / sizeof *binary_ops; k++) {
        const char *op = binary_ops[k].name;
        FAILS(NB_ERR_NULL, op, binary_ops[k].t(NULL, a));
        FAILS(NB_ERR_NULL, op, binary_ops[k].t(a, NULL));
        FAILS(NB_ERR_NULL, op, binary_ops[k].sf(NULL, 1.5));
        FAILS(NB_ERR_NULL, op, binary_ops[k].si(NULL, 2));
        assert_null(binary_ops[k].t(a, b)); /* shapes [2, 3] and [4]: both named */
        assert_true(strstr(nb_last_message(), "[2, 3]") && strstr(nb_last_message(), "[4]"));
        FAILS(NB_ERR_SHAPE, op, binary_ops[k].t(a, b));
        FAILS(NB_ERR_DEVICE, op, binary_ops[k].t(a, r));
    }
    nb_tensor *c = NBT(nb_gt(a, 0.0));
    FAILS(NB_ERR_NULL, "where", nb_where(NULL, a, a));
    FAILS(NB_ERR_NULL, "where", nb_where(c, NULL, a));
    FAILS(NB_ERR_NULL, "where", nb_where(c, a, NULL));
    FAILS(NB_ERR_SHAPE, "where", nb_where(c, a, b));
    FAILS(NB_ERR_SHAPE, "where", nb_where(NBT(nb_gt(b, 0.0)), a, a));
    FAILS(NB_ERR_DEVICE, "where", nb_where(c, a, r));
    FAILS(NB_ERR_NULL, "masked_fill", nb_masked_fill(NULL, c, 0));
    FAILS(NB_ERR_NULL, "masked_fill", nb_masked_fill(a, NULL, 0));
    FAILS(NB_ERR_SHAPE, "masked_fill", nb_masked_fill(a, NBT(nb_gt(b, 0.0)), 0));
    FAILS(NB_ERR_SHAPE, "masked_fill", nb_masked_fill(f32(NB_SHAPE(3)), c, 0));
}

/* ---- reductions ---- */

typedef nb_tensor *(*reduce_fn)(nb_tensor *, const int *, int, bool);
static const struct { const char *name; reduce_fn f; bool float_only; } reductions[] = {
    {"sum", nb_sum, false}, {"prod", nb_prod, false}, {"max", nb_max, false}, {"min", nb_min, false},
    {"mean", nb_mean, true}, {"logsumexp", nb_logsumexp, true},
};

static void reductions_and_scans(void **state) {
    (void)state;
    nb_tensor *x = f32(NB_SHAPE(2, 3)), *xi = i64s(NB_SHAPE(2, 3)), *e = f32(NB_SHAPE(2, 0));
    int nine[9] = {0, 1, 0, 1, 0, 1, 0, 1, 0};
    for (size_t k = 0; k < sizeof reductions / sizeof *reductions; k++) {
        const char *op = reductions[k].name;
        reduce_fn f = reductions[k].f;
        FAILS(NB_ERR_NULL, op, f(NULL, NULL, 0, false));
        FAILS(NB_ERR_AXIS, op, f(x, NB_AXES(2), false));
        FAILS(NB_ERR_AXIS, op, f(x, NB_AXES(-3), false));
        FAILS(NB_ERR_AXIS, op, f(x, NB_AXES(1, -1), false));
        FAILS(NB_ERR_AXIS, op, f(x, nine, 9, false));
        FAILS(NB_ERR_AXIS, op, f(x, nine, -1, false));
        if (reductions[k].float_only) FAILS(NB_ERR_DTYPE, op, f(xi, NULL, 0, false));
    }
    FAILS(NB_ERR_SHAPE, "max", nb_max(e, NB_AXES(1), false));
    FAILS(NB_ERR_SHAPE, "min", nb_min(e, NULL, 0, false));
    FAILS(NB_ERR_NULL, "var", nb_var(NULL, NULL, 0, 1, false));
    FAILS(NB_ERR_AXIS, "var", nb_var(x, NB_AXES(2), 1, false));
    FAILS(NB_ERR_DTYPE, "var", nb_var(xi, NULL, 0, 1, false));
    /* nb_std names itself for a NULL input; its other checks are nb_var's, whose messages name var */
    FAILS(NB_ERR_NULL, "std", nb_std(NULL, NULL, 0, 1, false));
    FAILS(NB_ERR_DTYPE, "var", nb_std(xi, NULL, 0, 1, false));
    FAILS(NB_ERR_NULL, "norm", nb_norm(NULL, 2, NULL, 0, false));
    FAILS(NB_ERR_ARG, "norm", nb_norm(x, 0, NULL, 0, false));
    FAILS(NB_ERR_ARG, "norm", nb_norm(x, NAN, NULL, 0, false));
    FAILS(NB_ERR_DTYPE, "norm", nb_norm(xi, 2, NULL, 0, false));
    FAILS(NB_ERR_NULL, "argmax", nb_argmax(NULL, 0, false));
    FAILS(NB_ERR_AXIS, "argmax", nb_argmax(x, 2, false));
    FAILS(NB_ERR_SHAPE, "argmax", nb_argmax(e, 1, false));
    FAILS(NB_ERR_NULL, "argmin", nb_argmin(NULL, 0, false));
    FAILS(NB_ERR_AXIS, "argmin", nb_argmin(x, -3, true));
    FAILS(NB_ERR_NULL, "cumsum", nb_cumsum(NULL, 0));
    FAILS(NB_ERR_AXIS, "cumsum", nb_cumsum(x, 2));
    FAILS(NB_ERR_NULL, "cumprod", nb_cumprod(NULL, 0));
    FAILS(NB_ERR_AXIS, "cumprod", nb_cumprod(x, -3));
}

/* ---- linear algebra ---- */

static void linear_algebra(void **state) {
    (void)state;
    nb_tensor *a = f32(NB_SHAPE(2, 3)), *b = f32(NB_SHAPE(4, 5));
    FAILS(NB_ERR_NULL, "matmul", nb_matmul(NULL, a));
    FAILS(NB_ERR_NULL, "matmul", nb_matmul(a, NULL));
    FAILS(NB_ERR_SHAPE, "matmul", nb_matmul(a, b));
    FAILS(NB_ERR_SHAPE, "matmul", nb_matmul(NBT(nb_scalar(1, NB_F32)), a));
    FAILS(NB_ERR_SHAPE, "matmul", nb_matmul(f32(NB_SHAPE(2, 2, 3)), f32(NB_SHAPE(3, 3, 4))));
    FAILS(NB_ERR_DTYPE, "matmul", nb_matmul(a, NBT(nb_zeros(NB_SHAPE(3, 2), NB_F64))));
    FAILS(NB_ERR_DTYPE, "matmul", nb_matmul(i64s(NB_SHAPE(2, 3)), i64s(NB_SHAPE(3, 2))));
    FAILS(NB_ERR_DEVICE, "matmul", nb_matmul(a, NBT(nb_to_device(f32(NB_SHAPE(3, 2)), NB_REF))));
    nb_tensor *a32 = f32(NB_SHAPE(3, 2));
    FAILS(NB_ERR_NULL, "addmm", nb_addmm(NULL, a, a32));
    FAILS(NB_ERR_NULL, "addmm", nb_addmm(a, NULL, a32));
    FAILS(NB_ERR_SHAPE, "addmm", nb_addmm(f32(NB_SHAPE(2)), f32(NB_SHAPE(3)), a32)); /* rank 1: no promotion */
    FAILS(NB_ERR_SHAPE, "addmm", nb_addmm(f32(NB_SHAPE(2)), a, b));                  /* inner dims */
    FAILS(NB_ERR_DTYPE, "addmm", nb_addmm(NBT(nb_zeros(NB_SHAPE(2), NB_F64)), a, a32));
    FAILS(NB_ERR_DEVICE, "addmm", nb_addmm(NBT(nb_to_device(f32(NB_SHAPE(2)), NB_REF)), a, a32));
    /* c [3] against the product [2, 2]: all three shapes named */
    nb_clear_error();
    assert_null(nb_addmm(f32(NB_SHAPE(3)), a, a32));
    assert_int_equal(nb_last_status(), NB_ERR_SHAPE);
    assert_string_equal(nb_last_message(),
                        "addmm: c [3] does not broadcast to the product's shape [2, 2] (a [2, 3] @ b [3, 2])");
    FAILS(NB_ERR_SHAPE, "addmm", nb_addmm(f32(NB_SHAPE(2, 2, 2, 2)), a, a32)); /* c of a higher rank */
    FAILS(NB_ERR_NULL, "linear", nb_linear(NULL, a, NULL));
    FAILS(NB_ERR_NULL, "linear", nb_linear(a, NULL, NULL));
    FAILS(NB_ERR_SHAPE, "linear", nb_linear(a, f32(NB_SHAPE(3)), NULL));
    /* x [4, 5] against weight [out 2, in 3]: named linear, with the weight as given (not its transpose) */
    nb_clear_error();
    assert_null(nb_linear(b, a, NULL));
    assert_int_equal(nb_last_status(), NB_ERR_SHAPE);
    assert_string_equal(nb_last_message(),
                        "linear: x [4, 5] must be [..., in] with in = 3, the weight's [out, in] = [2, 3]");
    FAILS(NB_ERR_SHAPE, "linear", nb_linear(NBT(nb_scalar(1, NB_F32)), a, NULL));
}

/* an nb_scope_end without its nb_scope_begin is reported, not silent */
static void unmatched_scope_end(void **state) {
    (void)state;
    nb_scope_end(); /* closes the fixture's scope: fine */
    assert_int_equal(nb_last_status(), NB_OK);
    nb_scope_end(); /* nothing left to close */
    assert_int_equal(nb_last_status(), NB_ERR_STATE);
    assert_true(strncmp(nb_last_message(), "scope_end:", 10) == 0);
    nb_clear_error();
    nb_scope_begin(); /* for the teardown */
}

/* ---- indexing and joining ---- */

static void indexing_and_joining(void **state) {
    (void)state;
    nb_tensor *x = f32(NB_SHAPE(3, 4));
    nb_tensor *ix = NBT(nb_from_data((int64_t[]){0, 2}, NB_SHAPE(2), NB_I64));
    nb_tensor *bad = NBT(nb_from_data((int64_t[]){0, 3}, NB_SHAPE(2), NB_I64));
    nb_tensor *neg = NBT(nb_from_data((int64_t[]){-1, 0}, NB_SHAPE(2), NB_I64));
    nb_tensor *fx = f32(NB_SHAPE(2));
    nb_tensor *ix2 = NBT(nb_reshape(ix, NB_SHAPE(1, 2))), *bad2 = NBT(nb_reshape(bad, NB_SHAPE(1, 2)));
    FAILS(NB_ERR_NULL, "index_select", nb_index_select(NULL, 0, ix));
    FAILS(NB_ERR_NULL, "index_select", nb_index_select(x, 0, NULL));
    FAILS(NB_ERR_AXIS, "index_select", nb_index_select(x, 2, ix));
    FAILS(NB_ERR_SHAPE, "index_select", nb_index_select(x, 0, ix2));
    FAILS(NB_ERR_INDEX, "index_select", nb_index_select(x, 0, bad));
    FAILS(NB_ERR_DTYPE, "index_select", nb_index_select(x, 0, fx));
    FAILS(NB_ERR_NULL, "gather", nb_gather(NULL, 0, ix2));
    FAILS(NB_ERR_NULL, "gather", nb_gather(x, 0, NULL));
    FAILS(NB_ERR_AXIS, "gather", nb_gather(x, 2, ix2));
    FAILS(NB_ERR_SHAPE, "gather", nb_gather(x, 0, ix));
    FAILS(NB_ERR_INDEX, "gather", nb_gather(x, 0, bad2));
    FAILS(NB_ERR_INDEX, "gather", nb_gather(x, 1, NBT(nb_reshape(neg, NB_SHAPE(1, 2)))));
    FAILS(NB_ERR_DTYPE, "gather", nb_gather(x, 0, f32(NB_SHAPE(1, 2))));
    nb_tensor *src = f32(NB_SHAPE(1, 2));
    FAILS(NB_ERR_NULL, "scatter_add", nb_scatter_add(NULL, 0, ix2, src));
    FAILS(NB_ERR_NULL, "scatter_add", nb_scatter_add(x, 0, NULL, src));
    FAILS(NB_ERR_NULL, "scatter_add", nb_scatter_add(x, 0, ix2, NULL));
    FAILS(NB_ERR_AXIS, "scatter_add", nb_scatter_add(x, 5, ix2, src));
    FAILS(NB_ERR_SHAPE, "scatter_add", nb_scatter_add(x, 0, ix, src));
    FAILS(NB_ERR_INDEX, "scatter_add", nb_scatter_add(x, 0, bad2, src));
    FAILS(NB_ERR_DTYPE, "scatter_add", nb_scatter_add(x, 0, ix2, NBT(nb_zeros(NB_SHAPE(1, 2), NB_F64))));
    FAILS(NB_ERR_NULL, "take_along_axis", nb_take_along_axis(NULL, ix2, 0));
    FAILS(NB_ERR_NULL, "take_along_axis", nb_take_along_axis(x, NULL, 0));
    FAILS(NB_ERR_SHAPE, "take_along_axis", nb_take_along_axis(x, ix, 0));
    FAILS(NB_ERR_AXIS, "take_along_axis", nb_take_along_axis(x, ix2, 2));
    FAILS(NB_ERR_SHAPE, "take_along_axis", nb_take_along_axis(x, i64s(NB_SHAPE(2, 3)), 0));
    FAILS(NB_ERR_NULL, "one_hot", nb_one_hot(NULL, 3));
    FAILS(NB_ERR_DTYPE, "one_hot", nb_one_hot(fx, 3));
    FAILS(NB_ERR_ARG, "one_hot", nb_one_hot(ix, 0));
    FAILS(NB_ERR_ARG, "one_hot", nb_one_hot(ix, -2));
    FAILS(NB_ERR_INDEX, "one_hot", nb_one_hot(ix, 2));
    FAILS(NB_ERR_INDEX, "one_hot", nb_one_hot(neg, 2));
    FAILS(NB_ERR_NULL, "embedding", nb_embedding(NULL, ix));
    FAILS(NB_ERR_NULL, "embedding", nb_embedding(x, NULL));
    FAILS(NB_ERR_SHAPE, "embedding", nb_embedding(f32(NB_SHAPE(3)), ix));
    FAILS(NB_ERR_INDEX, "embedding", nb_embedding(f32(NB_SHAPE(3, 2)), bad));
    nb_tensor *pair[2] = {x, f32(NB_SHAPE(3, 5))}, *holes[2] = {x, NULL};
    FAILS(NB_ERR_NULL, "cat", nb_cat(NULL, 2, 0));
    FAILS(NB_ERR_ARG, "cat", nb_cat(pair, 0, 0));
    FAILS(NB_ERR_NULL, "cat", nb_cat(holes, 2, 0));
    FAILS(NB_ERR_SHAPE, "cat", nb_cat(pair, 2, 0));
    FAILS(NB_ERR_AXIS, "cat", nb_cat(pair, 2, 2));
    FAILS(NB_ERR_SHAPE, "cat", nb_cat((nb_tensor *[]){x, f32(NB_SHAPE(3))}, 2, 0));
    FAILS(NB_ERR_DEVICE, "cat", nb_cat((nb_tensor *[]){x, NBT(nb_to_device(x, NB_REF))}, 2, 0));
    FAILS(NB_ERR_NULL, "stack", nb_stack(NULL, 1, 0));
    FAILS(NB_ERR_ARG, "stack", nb_stack(pair, 0, 0));
    FAILS(NB_ERR_NULL, "unsqueeze", nb_stack(holes, 2, 0)); /* names its part (see report) */
    FAILS(NB_ERR_SHAPE, "stack", nb_stack(pair, 2, 0));
    nb_tensor *out[4];
    FAILS_NEG(NB_ERR_NULL, "split", nb_split(NULL, 2, 0, out, 4));
    FAILS_NEG(NB_ERR_ARG, "split", nb_split(x, 0, 0, out, 4));
    FAILS_NEG(NB_ERR_ARG, "split", nb_split(x, -1, 0, out, 4));
    FAILS_NEG(NB_ERR_AXIS, "split", nb_split(x, 2, 2, out, 4));
    FAILS_NEG(NB_ERR_NULL, "chunk", nb_chunk(NULL, 2, 0, out, 4));
    FAILS_NEG(NB_ERR_ARG, "chunk", nb_chunk(x, 0, 0, out, 4));
    FAILS_NEG(NB_ERR_AXIS, "chunk", nb_chunk(x, 2, -3, out, 4));
    FAILS(NB_ERR_NULL, "pad", nb_pad(NULL, IDX(1, 1), 2, NB_PAD_CONSTANT, 0));
    FAILS(NB_ERR_ARG, "pad", nb_pad(x, IDX(1, 1, 1), 3, NB_PAD_CONSTANT, 0));
    FAILS(NB_ERR_ARG, "pad", nb_pad(x, IDX(1, 1, 1, 1, 1, 1), 6, NB_PAD_CONSTANT, 0));
    FAILS(NB_ERR_ARG, "pad", nb_pad(x, NULL, 2, NB_PAD_CONSTANT, 0));
    FAILS(NB_ERR_ARG, "pad", nb_pad(x, IDX(-3, -2), 2, NB_PAD_CONSTANT, 0));
    FAILS(NB_ERR_ARG, "pad", nb_pad(x, IDX(4, 0), 2, NB_PAD_REFLECT, 0));
    FAILS(NB_ERR_ARG, "pad", nb_pad(x, IDX(-1, 0), 2, NB_PAD_REFLECT, 0));
    FAILS(NB_ERR_ARG, "pad", nb_pad(x, IDX(1, 1), 2, NB_PAD_MODE_COUNT, 0));
}

/* ---- autograd ---- */

static void autograd(void **state) {
    (void)state;
    nb_tensor *x = f32(NB_SHAPE(2)), *o = NULL;
    FAILS_ST(NB_ERR_NULL, "set_requires_grad", nb_set_requires_grad(NULL, true));
    FAILS_ST(NB_ERR_DTYPE, "set_requires_grad", nb_set_requires_grad(i64s(NB_SHAPE(2)), true));
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    nb_tensor *y = NBT(nb_mul(x, x));
    FAILS_ST(NB_ERR_STATE, "set_requires_grad", nb_set_requires_grad(y, false));
    FAILS(NB_ERR_NULL, "grad", nb_grad(NULL));
    FAILS(NB_ERR_NULL, "detach", nb_detach(NULL));
    nb_zero_grad(NULL);
    FAILS_ST(NB_ERR_NULL, "backward", nb_backward(NULL, NULL, false));
    FAILS_ST(NB_ERR_STATE, "backward", nb_backward(f32(NB_SHAPE(1)), NULL, false));
    FAILS_ST(NB_ERR_SHAPE, "backward", nb_backward(y, NULL, false));
    FAILS_ST(NB_ERR_SHAPE, "backward", nb_backward(y, f32(NB_SHAPE(3)), false));
    FAILS_ST(NB_ERR_DEVICE, "backward", nb_backward(y, NBT(nb_to_device(x, NB_REF)), false));
    FAILS_ST(NB_ERR_ARG, "autograd_grad", nb_autograd_grad(y, NULL, &x, -1, false, &o));
    FAILS_ST(NB_ERR_NULL, "autograd_grad", nb_autograd_grad(y, NULL, NULL, 1, false, &o));
    FAILS_ST(NB_ERR_NULL, "autograd_grad", nb_autograd_grad(y, NULL, &x, 1, false, NULL));
    FAILS_ST(NB_ERR_NULL, "autograd_grad", nb_autograd_grad(y, NULL, (nb_tensor *[]){NULL}, 1, false, &o));
    FAILS_ST(NB_ERR_NULL, "autograd_grad", nb_autograd_grad(NULL, NULL, &x, 1, false, &o));
    FAILS_ST(NB_ERR_STATE, "autograd_grad", nb_autograd_grad(y, NULL, (nb_tensor *[]){f32(NB_SHAPE(2))}, 1, false, &o));
    FAILS_ST(NB_ERR_SHAPE, "autograd_grad", nb_autograd_grad(y, NULL, &x, 1, false, &o));
    assert_null(o); /* outputs stay NULL on failure */
    assert_null(nb_grad(x));
}

/* ---- printing, einsum, neural-network functions and losses ---- */

static void printing_einsum_nn(void **state) {
    (void)state;
    nb_tensor *x = f32(NB_SHAPE(2, 3)), *xi = i64s(NB_SHAPE(2, 3)), *t = i64s(NB_SHAPE(2));
    FAILS_ST(NB_ERR_NULL, "print", nb_print(NULL, stdout));
    FAILS_ST(NB_ERR_NULL, "print", nb_print(x, NULL));
    FILE *ro = fopen("/dev/null", "r"); /* a stream that refuses writes */
    assert_non_null(ro);
    FAILS_ST(NB_ERR_IO, "print", nb_print(x, ro));
    fclose(ro);
    FAILS(NB_ERR_NULL, "to_string", nb_to_string(NULL));
    FAILS(NB_ERR_NULL, "einsum", nb_einsum(NULL, &x, 1));
    FAILS(NB_ERR_NULL, "einsum", nb_einsum("ij->ji", NULL, 1));
    FAILS(NB_ERR_NULL, "einsum", nb_einsum("ij->ji", (nb_tensor *[]){NULL}, 1));
    FAILS(NB_ERR_ARG, "einsum", nb_einsum("ij,jk->ik", &x, 1));
    FAILS(NB_ERR_ARG, "einsum", nb_einsum("i$->i", &x, 1));
    FAILS(NB_ERR_ARG, "einsum", nb_einsum("ij->k", &x, 1));
    FAILS(NB_ERR_SHAPE, "einsum", nb_einsum("ijk->i", &x, 1));
    FAILS(NB_ERR_SHAPE, "einsum", nb_einsum("ij,ij->i", (nb_tensor *[]){x, f32(NB_SHAPE(3, 2))}, 2));
    FAILS(NB_ERR_DTYPE, "einsum", nb_einsum("ij->ji", &xi, 1));
    FAILS(NB_ERR_NULL, "softmax", nb_softmax(NULL, 0));
    FAILS(NB_ERR_AXIS, "softmax", nb_softmax(x, 2));
    FAILS(NB_ERR_DTYPE, "softmax", nb_softmax(xi, 0));
    FAILS(NB_ERR_NULL, "log_softmax", nb_log_softmax(NULL, 0));
    FAILS(NB_ERR_AXIS, "log_softmax", nb_log_softmax(x, -3));
    FAILS(NB_ERR_DTYPE, "log_softmax", nb_log_softmax(xi, 0));
    FAILS(NB_ERR_NULL, "layer_norm", nb_layer_norm(NULL, 1, NULL, NULL, 1e-5));
    FAILS(NB_ERR_ARG, "layer_norm", nb_layer_norm(x, 0, NULL, NULL, 1e-5));
    FAILS(NB_ERR_ARG, "layer_norm", nb_layer_norm(x, 3, NULL, NULL, 1e-5));
    FAILS(NB_ERR_SHAPE, "layer_norm", nb_layer_norm(x, 1, f32(NB_SHAPE(2)), NULL, 1e-5));
    FAILS(NB_ERR_SHAPE, "layer_norm", nb_layer_norm(x, 1, NULL, f32(NB_SHAPE(4)), 1e-5));
    FAILS(NB_ERR_DTYPE, "layer_norm", nb_layer_norm(xi, 1, NULL, NULL, 1e-5));
    FAILS(NB_ERR_NULL, "rms_norm", nb_rms_norm(NULL, 1, NULL, 1e-5));
    FAILS(NB_ERR_ARG, "rms_norm", nb_rms_norm(x, -1, NULL, 1e-5));
    FAILS(NB_ERR_SHAPE, "rms_norm", nb_rms_norm(x, 2, f32(NB_SHAPE(3)), 1e-5));
    FAILS(NB_ERR_DTYPE, "rms_norm", nb_rms_norm(xi, 1, NULL, 1e-5));
    FAILS(NB_ERR_NULL, "dropout", nb_dropout(NULL, 0.5, true));
    FAILS(NB_ERR_ARG, "dropout", nb_dropout(x, 1.5, true));
    FAILS(NB_ERR_ARG, "dropout", nb_dropout(x, NAN, true));
    FAILS(NB_ERR_DTYPE, "dropout", nb_dropout(xi, 0.5, true));
    nb_cross_entropy_opts ce = NB_CROSS_ENTROPY_DEFAULTS;
    FAILS(NB_ERR_NULL, "cross_entropy", nb_cross_entropy(NULL, t, ce));
    FAILS(NB_ERR_NULL, "cross_entropy", nb_cross_entropy(x, NULL, ce));
    FAILS(NB_ERR_INDEX, "cross_entropy", nb_cross_entropy(x, NBT(nb_full(NB_SHAPE(2), 3, NB_I64)), ce));
    FAILS(NB_ERR_SHAPE, "cross_entropy", nb_cross_entropy(x, i64s(NB_SHAPE(3)), ce));
    FAILS(NB_ERR_DTYPE, "cross_entropy", nb_cross_entropy(xi, t, ce));
    FAILS(NB_ERR_DTYPE, "cross_entropy", nb_cross_entropy(x, f32(NB_SHAPE(2)), ce));
    FAILS(NB_ERR_ARG, "cross_entropy", nb_cross_entropy(x, t, ((nb_cross_entropy_opts){NB_REDUCE_MEAN, -100, 2})));
    FAILS(NB_ERR_ARG, "cross_entropy", nb_cross_entropy(x, t, ((nb_cross_entropy_opts){NB_REDUCTION_COUNT, -100, 0})));
    FAILS(NB_ERR_NULL, "nll_loss", nb_nll_loss(NULL, t, NB_REDUCE_MEAN, -100));
    FAILS(NB_ERR_INDEX, "nll_loss", nb_nll_loss(x, NBT(nb_full(NB_SHAPE(2), -1, NB_I64)), NB_REDUCE_MEAN, -100));
    FAILS(NB_ERR_SHAPE, "nll_loss", nb_nll_loss(x, i64s(NB_SHAPE(5)), NB_REDUCE_SUM, -100));
    FAILS(NB_ERR_NULL, "mse_loss", nb_mse_loss(NULL, x, NB_REDUCE_MEAN));
    FAILS(NB_ERR_NULL, "mse_loss", nb_mse_loss(x, NULL, NB_REDUCE_MEAN));
    FAILS(NB_ERR_SHAPE, "mse_loss", nb_mse_loss(x, f32(NB_SHAPE(4)), NB_REDUCE_MEAN));
    FAILS(NB_ERR_ARG, "mse_loss", nb_mse_loss(x, x, NB_REDUCTION_COUNT));
    FAILS(NB_ERR_NULL, "bce_with_logits", nb_bce_with_logits(NULL, x, NB_REDUCE_MEAN));
    FAILS(NB_ERR_SHAPE, "bce_with_logits", nb_bce_with_logits(x, f32(NB_SHAPE(3)), NB_REDUCE_MEAN));
    FAILS(NB_ERR_DTYPE, "bce_with_logits", nb_bce_with_logits(xi, xi, NB_REDUCE_MEAN));
}

/* ---- convolution and pooling ---- */

static void convolution_pooling(void **state) {
    (void)state;
    nb_tensor *x = f32(NB_SHAPE(1, 2, 5, 5)), *w = f32(NB_SHAPE(3, 2, 3, 3)), *v = f32(NB_SHAPE(5));
    nb_conv2d_opts o = NB_CONV2D_DEFAULTS;
    nb_window2d pw = NB_POOL2D(2, 2);
    FAILS(NB_ERR_NULL, "conv2d", nb_conv2d(NULL, w, NULL, o));
    FAILS(NB_ERR_NULL, "conv2d", nb_conv2d(x, NULL, NULL, o));
    FAILS(NB_ERR_SHAPE, "conv2d", nb_conv2d(v, w, NULL, o));
    FAILS(NB_ERR_SHAPE, "conv2d", nb_conv2d(x, f32(NB_SHAPE(3, 4, 3, 3)), NULL, o));
    FAILS(NB_ERR_SHAPE, "conv2d", nb_conv2d(x, w, f32(NB_SHAPE(4)), o));
    FAILS(NB_ERR_SHAPE, "conv2d", nb_conv2d(x, f32(NB_SHAPE(3, 2, 7, 7)), NULL, o));
    FAILS(NB_ERR_ARG, "conv2d", nb_conv2d(x, w, NULL, ((nb_conv2d_opts){{0, 1}, {0, 0}, {1, 1}, 1})));
    FAILS(NB_ERR_ARG, "conv2d", nb_conv2d(x, w, NULL, ((nb_conv2d_opts){{1, 1}, {-1, 0}, {1, 1}, 1})));
    FAILS(NB_ERR_ARG, "conv2d", nb_conv2d(x, w, NULL, ((nb_conv2d_opts){{1, 1}, {0, 0}, {1, 1}, 0})));
    FAILS(NB_ERR_DTYPE, "conv2d", nb_conv2d(x, NBT(nb_zeros(NB_SHAPE(3, 2, 3, 3), NB_F64)), NULL, o));
    FAILS(NB_ERR_NULL, "conv1d", nb_conv1d(NULL, w, NULL, 1, 0, 1, 1));
    FAILS(NB_ERR_SHAPE, "conv1d", nb_conv1d(f32(NB_SHAPE(1, 2, 5)), w, NULL, 1, 0, 1, 1));
    FAILS(NB_ERR_ARG, "conv1d", nb_conv1d(f32(NB_SHAPE(1, 2, 5)), f32(NB_SHAPE(3, 2, 3)), NULL, 0, 0, 1, 1));
    FAILS(NB_ERR_NULL, "unfold", nb_unfold(NULL, pw));
    FAILS(NB_ERR_SHAPE, "unfold", nb_unfold(v, pw));
    FAILS(NB_ERR_ARG, "unfold", nb_unfold(x, NB_POOL2D(0, 2)));
    FAILS(NB_ERR_NULL, "fold", nb_fold(NULL, 4, 4, pw));
    FAILS(NB_ERR_SHAPE, "fold", nb_fold(f32(NB_SHAPE(1, 8, 5)), 4, 4, pw));
    FAILS(NB_ERR_NULL, "max_pool2d", nb_max_pool2d(NULL, pw));
    FAILS(NB_ERR_SHAPE, "max_pool2d", nb_max_pool2d(v, pw));
    FAILS(NB_ERR_ARG, "max_pool2d", nb_max_pool2d(x, ((nb_window2d){{2, 2}, {2, 2}, {2, 2}, {1, 1}})));
    FAILS(NB_ERR_SHAPE, "max_pool2d", nb_max_pool2d(x, NB_POOL2D(6, 6)));
    nb_tensor *idx = (nb_tensor *)1;
    FAILS(NB_ERR_NULL, "max_pool2d", nb_max_pool2d_with_indices(x, pw, NULL));
    FAILS(NB_ERR_NULL, "max_pool2d", nb_max_pool2d_with_indices(NULL, pw, &idx));
    assert_null(idx);
    nb_tensor *pooled = NBT(nb_max_pool2d_with_indices(x, pw, &idx)); /* idx is scope-owned too */
    FAILS(NB_ERR_NULL, "max_unpool2d", nb_max_unpool2d(NULL, idx, 4, 4));
    FAILS(NB_ERR_NULL, "max_unpool2d", nb_max_unpool2d(pooled, NULL, 4, 4));
    FAILS(NB_ERR_INDEX, "max_unpool2d", nb_max_unpool2d(pooled, idx, 1, 1));
    FAILS(NB_ERR_SHAPE, "max_unpool2d", nb_max_unpool2d(pooled, i64s(NB_SHAPE(1, 2, 3, 3)), 4, 4));
    FAILS(NB_ERR_NULL, "avg_pool2d", nb_avg_pool2d(NULL, pw, true));
    FAILS(NB_ERR_SHAPE, "avg_pool2d", nb_avg_pool2d(v, pw, true));
    FAILS(NB_ERR_ARG, "avg_pool2d", nb_avg_pool2d(x, ((nb_window2d){{2, 2}, {0, 2}, {0, 0}, {1, 1}}), true));
}

/* ---- files, data, layers, optimizers, schedules ---- */

static void data_and_training(void **state) {
    (void)state;
    nb_tensor *x = f32(NB_SHAPE(4, 3)), *perm = NBT(nb_randperm(4)), *img = NULL, *lab = NULL;
    FAILS(NB_ERR_NULL, "idx_load", nb_idx_load(NULL));
    FAILS(NB_ERR_IO, "idx_load", nb_idx_load("/nonexistent/nabla-test.idx"));
    img = lab = (nb_tensor *)1;
    FAILS_ST(NB_ERR_NULL, "fashion_mnist_load", nb_fashion_mnist_load(NULL, true, NULL, &lab));
    FAILS_ST(NB_ERR_IO, "fashion_mnist_load", nb_fashion_mnist_load("/nonexistent", true, &img, &lab));
    assert_true(img == NULL && lab == NULL);
    FAILS(NB_ERR_NULL, "take_rows", nb_take_rows(NULL, perm, 0, 2));
    FAILS(NB_ERR_NULL, "take_rows", nb_take_rows(x, NULL, 0, 2));
    FAILS(NB_ERR_SHAPE, "take_rows", nb_take_rows(NBT(nb_scalar(1, NB_F32)), perm, 0, 2));
    FAILS(NB_ERR_SHAPE, "take_rows", nb_take_rows(x, i64s(NB_SHAPE(2, 2)), 0, 2));
    FAILS(NB_ERR_DTYPE, "take_rows", nb_take_rows(x, f32(NB_SHAPE(4)), 0, 2));
    FAILS(NB_ERR_ARG, "take_rows", nb_take_rows(x, perm, 5, 1));
    FAILS(NB_ERR_ARG, "take_rows", nb_take_rows(x, perm, -1, 1));
    FAILS(NB_ERR_ARG, "take_rows", nb_take_rows(x, perm, 0, -1));
    FAILS(NB_ERR_INDEX, "take_rows", nb_take_rows(x, NBT(nb_full(NB_SHAPE(2), 4, NB_I64)), 0, 2));

    const char *names[] = {"a"};
    FAILS_ST(NB_ERR_NULL, "safetensors_save", nb_safetensors_save(NULL, names, &x, 1));
    FAILS_ST(NB_ERR_NULL, "safetensors_save", nb_safetensors_save("/tmp/x.safetensors", NULL, &x, 1));
    FAILS_ST(NB_ERR_NULL, "safetensors_save", nb_safetensors_save("/tmp/x.safetensors", names, (nb_tensor *[]){NULL}, 1));
    FAILS_ST(NB_ERR_ARG, "safetensors_save", nb_safetensors_save("/tmp/x.safetensors", names, &x, -1));
    FAILS_ST(NB_ERR_ARG, "safetensors_save", nb_safetensors_save("/tmp/x.safetensors", (const char *[]){""}, &x, 1));
    FAILS_ST(NB_ERR_ARG, "safetensors_save",
             nb_safetensors_save("/tmp/x.safetensors", (const char *[]){"a", "a"}, (nb_tensor *[]){x, x}, 2));
    FAILS_ST(NB_ERR_IO, "safetensors_save", nb_safetensors_save("/nonexistent/dir/x.safetensors", names, &x, 1));
    FAILS(NB_ERR_NULL, "safetensors_open", nb_safetensors_open(NULL));
    FAILS(NB_ERR_IO, "safetensors_open", nb_safetensors_open("/nonexistent/x.safetensors"));
    FAILS(NB_ERR_IO, "safetensors_open", nb_safetensors_open("/tmp"));
    FAILS_NEG(NB_ERR_NULL, "safetensors_count", nb_safetensors_count(NULL));
    FAILS(NB_ERR_NULL, "safetensors_name", nb_safetensors_name(NULL, 0));
    FAILS(NB_ERR_NULL, "safetensors_get", nb_safetensors_get(NULL, "a"));
    nb_safetensors_close(NULL);

    FAILS(NB_ERR_ARG, "Linear", nb_nn_linear(0, 3, true));
    FAILS(NB_ERR_ARG, "Linear", nb_nn_linear(3, -1, true));
    FAILS(NB_ERR_ARG, "Conv2d", nb_nn_conv2d(2, 3, 0, 3, NB_CONV2D_DEFAULTS, true));
    FAILS(NB_ERR_ARG, "Conv2d", nb_nn_conv2d(2, 3, 3, 3, ((nb_conv2d_opts){{1, 1}, {0, 0}, {1, 1}, 2}), true));
    FAILS(NB_ERR_ARG, "Embedding", nb_nn_embedding(-5, 3));
    FAILS(NB_ERR_ARG, "LayerNorm", nb_nn_layer_norm(IDX(0), 1, 1e-5, true));
    FAILS(NB_ERR_ARG, "LayerNorm", nb_nn_layer_norm(IDX(3), 9, 1e-5, true));
    FAILS(NB_ERR_ARG, "LayerNorm", nb_nn_layer_norm(IDX(3), 1, -1, true));
    FAILS(NB_ERR_ARG, "Dropout", nb_nn_dropout(1));
    FAILS(NB_ERR_ARG, "Dropout", nb_nn_dropout(NAN));
    nb_module *seq = nb_nn_sequential(), *lin = nb_nn_linear(3, 2, true);
    assert_non_null(seq);
    assert_non_null(lin);
    FAILS_ST(NB_ERR_NULL, "sequential_add", nb_sequential_add(NULL, NULL, nb_nn_relu()));
    FAILS_ST(NB_ERR_NULL, "sequential_add", nb_sequential_add(seq, NULL, NULL));
    FAILS_ST(NB_ERR_ARG, "sequential_add", nb_sequential_add(lin, NULL, nb_nn_relu())); /* not a Sequential */
    FAILS_ST(NB_ERR_ARG, "sequential_add", nb_sequential_add(seq, "a.b", nb_nn_relu()));
    assert_int_equal(nb_sequential_add(seq, "fc", lin), NB_OK);
    FAILS_ST(NB_ERR_ARG, "sequential_add", nb_sequential_add(seq, "fc", nb_nn_relu())); /* name taken */
    FAILS_ST(NB_ERR_ARG, "sequential_add", nb_sequential_add(seq, "again", lin));   /* already placed */
    FAILS(NB_ERR_NULL, "module_forward", nb_module_forward(NULL, x));
    FAILS(NB_ERR_NULL, "Sequential", nb_module_forward(seq, NULL));
    FAILS(NB_ERR_SHAPE, "linear", nb_module_forward(seq, f32(NB_SHAPE(4, 5)))); /* through nb_linear */
    assert_int_equal(nb_module_param_count(NULL), -1);
    assert_null(nb_module_param_name(seq, 5));
    FAILS(NB_ERR_INDEX, "module_param", nb_module_param(seq, 2));
    FAILS(NB_ERR_INDEX, "module_param", nb_module_param(seq, -1));
    FAILS(NB_ERR_ARG, "module_param_named", nb_module_param_named(seq, "fc.nothing"));
    FAILS_NEG(NB_ERR_NULL, "module_params", nb_module_params(seq, NULL, 2));
    nb_module_train(NULL, false);
    nb_module_free(lin); /* belongs to seq: left alone */
    assert_int_equal(nb_last_status(), NB_ERR_STATE);
    nb_clear_error();

    nb_tensor *params[2];
    assert_int_equal(nb_module_params(seq, params, 2), 2); /* scoped references */
    FAILS(NB_ERR_NULL, "sgd", nb_optim_sgd(NULL, 2, NB_SGD_DEFAULTS(0.1)));
    FAILS(NB_ERR_NULL, "sgd", nb_optim_sgd((nb_tensor *[]){NULL}, 1, NB_SGD_DEFAULTS(0.1)));
    FAILS(NB_ERR_ARG, "sgd", nb_optim_sgd(params, -1, NB_SGD_DEFAULTS(0.1)));
    FAILS(NB_ERR_ARG, "adam", nb_optim_adam(params, -1, NB_ADAM_DEFAULTS));
    FAILS(NB_ERR_ARG, "sgd", nb_optim_sgd(params, 2, NB_SGD_DEFAULTS(-1)));
    FAILS(NB_ERR_ARG, "sgd", nb_optim_sgd(params, 2, ((nb_sgd_opts){0.1, 0, 0, 0, true})));
    FAILS(NB_ERR_DTYPE, "sgd", nb_optim_sgd((nb_tensor *[]){i64s(NB_SHAPE(2))}, 1, NB_SGD_DEFAULTS(0.1)));
    FAILS(NB_ERR_DEVICE, "sgd", nb_optim_sgd((nb_tensor *[]){NBT(nb_transpose(x, 0, 1))}, 1, NB_SGD_DEFAULTS(0.1)));
    FAILS(NB_ERR_ARG, "adam", nb_optim_adam(params, 2, ((nb_adam_opts){1e-3, 1.0, 0.999, 1e-8, 0})));
    FAILS(NB_ERR_ARG, "adamw", nb_optim_adamw(params, 2, ((nb_adam_opts){1e-3, 0.9, 0.999, -1, 0})));
    FAILS_ST(NB_ERR_NULL, "optim_step", nb_optim_step(NULL));
    FAILS_ST(NB_ERR_NULL, "optim_set_lr", nb_optim_set_lr(NULL, 0.1));
    nb_optimizer *sgd = nb_optim_sgd(params, 2, NB_SGD_DEFAULTS(0.1));
    assert_non_null(sgd);
    FAILS_ST(NB_ERR_ARG, "optim_set_lr", nb_optim_set_lr(sgd, -1));
    FAILS_ST(NB_ERR_ARG, "optim_set_lr", nb_optim_set_lr(sgd, NAN));
    nb_optim_free(sgd);
    nb_optim_zero_grad(NULL);
    nb_optim_free(NULL);
    FAILS_ST(NB_ERR_NULL, "clip_grad_norm_", nb_clip_grad_norm_(NULL, 1, 1, 2, NULL));
    FAILS_ST(NB_ERR_ARG, "clip_grad_norm_", nb_clip_grad_norm_(params, 2, -1, 2, NULL));
    FAILS_ST(NB_ERR_ARG, "clip_grad_norm_", nb_clip_grad_norm_(params, -1, 1, 2, NULL));
    FAILS_ST(NB_ERR_ARG, "clip_grad_norm_", nb_clip_grad_norm_(params, 2, 1, 0, NULL));
    FAILS_ST(NB_ERR_NULL, "clip_grad_norm_", nb_clip_grad_norm_((nb_tensor *[]){NULL}, 1, 1, 2, NULL));
    nb_module_free(seq); /* params[] are scope-owned references: still valid until teardown */
    assert_int_equal(nb_last_status(), NB_OK);

    check_fail("nb_lr_step", __LINE__, (nb_clear_error(), isnan(nb_lr_step(0.1, 3, 0, 0.5))), NB_ERR_ARG, "lr_step");
    check_fail("nb_lr_cosine", __LINE__, (nb_clear_error(), isnan(nb_lr_cosine(0.1, 3, 0, 0))), NB_ERR_ARG, "lr_cosine");
    check_fail("nb_lr_warmup", __LINE__, (nb_clear_error(), isnan(nb_lr_warmup(0.1, 3, 5, 0))), NB_ERR_ARG, "lr_warmup");
}

/* ---- error chains ---- */

static void first_error_of_a_chain_is_kept(void **state) {
    (void)state;
    nb_tensor *x = f32(NB_SHAPE(2, 3)), *w = f32(NB_SHAPE(4, 5)), *b = f32(NB_SHAPE(5));
    nb_clear_error();
    nb_tensor *r = nb_relu(nb_add(nb_matmul(x, w), b));
    assert_null(r);
    assert_int_equal(nb_last_status(), NB_ERR_SHAPE);
    assert_true(strncmp(nb_last_message(), "matmul:", 7) == 0);
    assert_true(strstr(nb_last_message(), "[2, 3]") && strstr(nb_last_message(), "[4, 5]"));
    /* a later valid call still works, and a later failure does not replace the first */
    assert_non_null(nb_add(x, 1.0));
    assert_null(nb_reshape(x, NB_SHAPE(7)));
    assert_true(strncmp(nb_last_message(), "matmul:", 7) == 0);
    nb_clear_error();
    assert_int_equal(nb_last_status(), NB_OK);
    assert_string_equal(nb_last_message(), "");
    /* status-returning calls report their own failure */
    nb_clear_error();
    assert_null(nb_sum(NULL, NULL, 0, false));
    assert_int_equal(nb_get(x, IDX(9, 9), &(double){0}), NB_ERR_INDEX);
    assert_true(strncmp(nb_last_message(), "get:", 4) == 0);
    nb_clear_error();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(status_dtype_optable, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(devices_and_threads, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(inspection_of_null, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(constructors, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(moves_and_casts, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(views, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(element_access, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(inplace_updates, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(elementwise, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(reductions_and_scans, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(linear_algebra, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(unmatched_scope_end, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(indexing_and_joining, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(autograd, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(printing_einsum_nn, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(convolution_pooling, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(data_and_training, nbt_setup, teardown),
        cmocka_unit_test_setup_teardown(first_error_of_a_chain_is_kept, nbt_setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
