/*
 * test_print.c — nb_to_string / nb_print against strings derived by hand from
 * PyTorch's repr rules (torch/_tensor_str.py, default print options): the
 * fixed/integer/scientific modes, padding to a common width, line wrapping at
 * 80 columns, summarization beyond 1000 elements, and the suffixes.
 */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect_str(nb_tensor *t, const char *want) {
    char *s = nb_to_string(t);
    assert_non_null(s);
    if (strcmp(s, want)) {
        fprintf(stderr, "got:\n%s\nwant:\n%s\n", s, want);
        free(s);
        fail();
    }
    free(s);
}

static nb_tensor *f32(const float *v, const int64_t *shape, int ndim) {
    return NBT(nb_from_data(v, shape, ndim, NB_F32));
}

static void float_modes(void **state) {
    (void)state;
    nb_scope_begin();
    /* all integers: "%.0f" + ".", width = longest + 1 */
    nb_tensor *m = f32((float[]){1, 2, 3, 4}, NB_SHAPE(2, 2));
    expect_str(m, "tensor([[1., 2.],\n        [3., 4.]])");
    /* a strided view prints in its own order */
    expect_str(NBT(nb_t(m)), "tensor([[1., 3.],\n        [2., 4.]])");
    /* fixed point, 4 decimals, right-aligned to the widest */
    expect_str(f32((float[]){1.5f, 2, 3, 4}, NB_SHAPE(2, 2)), "tensor([[1.5000, 2.0000],\n        [3.0000, 4.0000]])");
    expect_str(f32((float[]){0.25f, 100.25f}, NB_SHAPE(2)), "tensor([  0.2500, 100.2500])");
    expect_str(f32((float[]){0.1f, 100.25f}, NB_SHAPE(2)), "tensor([1.0000e-01, 1.0025e+02])"); /* ratio > 1000 */
    /* rank 0 */
    expect_str(NBT(nb_scalar(3.5, NB_F32)), "tensor(3.5000)");
    expect_str(NBT(nb_scalar(-2, NB_F32)), "tensor(-2.)");
    expect_str(NBT(nb_scalar(0, NB_F32)), "tensor(0.)");
    /* scientific: a value below 1e-4, a ratio above 1000, or a value above 1e8 */
    expect_str(f32((float[]){1e-5f, 1}, NB_SHAPE(2)), "tensor([1.0000e-05, 1.0000e+00])");
    expect_str(f32((float[]){1, 1e9f}, NB_SHAPE(2)), "tensor([1.0000e+00, 1.0000e+09])");
    expect_str(f32((float[]){0.5f, -2000}, NB_SHAPE(2)), "tensor([ 5.0000e-01, -2.0000e+03])");
    /* nan and inf: width comes from the finite nonzero values only; Python never writes "-nan" */
    expect_str(f32((float[]){NAN, INFINITY, -INFINITY, 1}, NB_SHAPE(4)), "tensor([nan, inf, -inf, 1.])");
    expect_str(f32((float[]){-NAN, 0.5f}, NB_SHAPE(2)), "tensor([   nan, 0.5000])");
    expect_str(f32((float[]){-0.0f, 1}, NB_SHAPE(2)), "tensor([-0., 1.])");
    expect_str(NBT(nb_zeros(NB_SHAPE(3), NB_F32)), "tensor([0., 0., 0.])");
    nb_scope_end();
}

static void dtypes_and_suffixes(void **state) {
    (void)state;
    nb_scope_begin();
    expect_str(NBT(nb_from_data((int64_t[]){1, -20, 300}, NB_SHAPE(3), NB_I64)), "tensor([  1, -20, 300])");
    expect_str(NBT(nb_from_data((int32_t[]){1, 2}, NB_SHAPE(2), NB_I32)), "tensor([1, 2], dtype=int32)");
    expect_str(NBT(nb_from_data((uint8_t[]){7, 255}, NB_SHAPE(2), NB_U8)), "tensor([  7, 255], dtype=uint8)");
    expect_str(NBT(nb_from_data((int8_t[]){-7, 5}, NB_SHAPE(2), NB_I8)), "tensor([-7,  5], dtype=int8)");
    expect_str(NBT(nb_from_data((bool[]){true, false}, NB_SHAPE(2), NB_BOOL)), "tensor([ True, False])");
    expect_str(NBT(nb_from_data((int64_t[]){INT64_MAX}, NB_SHAPE(1), NB_I64)), "tensor([9223372036854775807])");
    expect_str(NBT(nb_from_data((double[]){1.25, -0.5}, NB_SHAPE(2), NB_F64)),
               "tensor([ 1.2500, -0.5000], dtype=float64)");
    /* f16 0.1 is 0.0999755859375 */
    expect_str(NBT(nb_cast(NBT(nb_full(NB_SHAPE(1), 0.1, NB_F32)), NB_F16)), "tensor([0.1000], dtype=float16)");
    expect_str(NBT(nb_full(NB_SHAPE(1), 1.5, NB_BF16)), "tensor([1.5000], dtype=bfloat16)");
    /* empty tensors: "[]", the size unless 1-D, the dtype unless float32 (int64 and bool too) */
    expect_str(NBT(nb_zeros(NB_SHAPE(0), NB_F32)), "tensor([])");
    expect_str(NBT(nb_zeros(NB_SHAPE(0, 3), NB_F32)), "tensor([], size=(0, 3))");
    expect_str(NBT(nb_zeros(NB_SHAPE(0), NB_I64)), "tensor([], dtype=int64)");
    expect_str(NBT(nb_zeros(NB_SHAPE(2, 0, 1), NB_BOOL)), "tensor([], size=(2, 0, 1), dtype=bool)");
    /* autograd and device suffixes */
    nb_tensor *leaf = NBT(nb_ones(NB_SHAPE(2), NB_F32));
    assert_int_equal(nb_set_requires_grad(leaf, true), NB_OK);
    expect_str(leaf, "tensor([1., 1.], requires_grad=True)");
    expect_str(NBT(nb_mul(leaf, 2.0)), "tensor([2., 2.], grad_fn=<mul>)");
    expect_str(NBT(nb_to_device(NBT(nb_arange(1, 3, 1, NB_F32)), NB_REF)), "tensor([1., 2.], device='ref:0')");
    /* a suffix that would pass column 80 goes on its own line, indented by len("tensor(") */
    expect_str(NBT(nb_arange(0, 14, 1, NB_F64)),
               "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.],\n"
               "       dtype=float64)");
    nb_scope_end();
}

static void layout(void **state) {
    (void)state;
    nb_scope_begin();
    /* (80 - 7) / (3 + 2) = 14 elements per line */
    expect_str(NBT(nb_arange(0, 30, 1, NB_F32)),
               "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
               "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
               "        28., 29.])");
    /* rank 3: slices separated by rank-1 newlines */
    expect_str(NBT(nb_reshape(NBT(nb_arange(0, 8, 1, NB_I64)), NB_SHAPE(2, 2, 2))),
               "tensor([[[0, 1],\n"
               "         [2, 3]],\n"
               "\n"
               "        [[4, 5],\n"
               "         [6, 7]]])");
    /* more than 1000 elements: 3 edge items per axis, " ..." in a row, "..." between rows */
    expect_str(NBT(nb_arange(0, 1001, 1, NB_I64)), "tensor([   0,    1,    2,  ...,  998,  999, 1000])");
    expect_str(NBT(nb_reshape(NBT(nb_arange(0, 2000, 1, NB_I64)), NB_SHAPE(40, 50))),
               "tensor([[   0,    1,    2,  ...,   47,   48,   49],\n"
               "        [  50,   51,   52,  ...,   97,   98,   99],\n"
               "        [ 100,  101,  102,  ...,  147,  148,  149],\n"
               "        ...,\n"
               "        [1850, 1851, 1852,  ..., 1897, 1898, 1899],\n"
               "        [1900, 1901, 1902,  ..., 1947, 1948, 1949],\n"
               "        [1950, 1951, 1952,  ..., 1997, 1998, 1999]])");
    /* the format is chosen from the shown values only: the hidden 0.5 does not force decimals */
    nb_tensor *big = NBT(nb_arange(100, 1300, 1, NB_F32));
    float half = 0.5f;
    assert_int_equal(nb_copy_from_host(NBT(nb_slice(big, 0, 600, 601, 1)), &half, sizeof half), NB_OK);
    expect_str(big, "tensor([ 100.,  101.,  102.,  ..., 1297., 1298., 1299.])");
    nb_scope_end();
}

static void print_to_file(void **state) {
    (void)state;
    nb_scope_begin();
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(nb_print(NBT(nb_scalar(7, NB_I64)), f), NB_OK);
    rewind(f);
    char buf[64] = {0};
    assert_int_equal(fread(buf, 1, sizeof buf - 1, f), strlen("tensor(7)\n"));
    assert_string_equal(buf, "tensor(7)\n");
    fclose(f);
    assert_int_equal(nb_print(NULL, stdout), NB_ERR_NULL);
    nb_clear_error();
    assert_int_equal(nb_print(NBT(nb_scalar(1, NB_F32)), NULL), NB_ERR_NULL);
    nb_clear_error();
    assert_null(nb_to_string(NULL));
    assert_int_equal(nb_last_status(), NB_ERR_NULL);
    nb_clear_error();
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(float_modes),
        cmocka_unit_test(dtypes_and_suffixes),
        cmocka_unit_test(layout),
        cmocka_unit_test(print_to_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
