/* test_smoke.c — a first end-to-end check: build, broadcast add, matmul, backward. */
#include "support.h"

static void smoke(void **state) {
    (void)state;
    nb_scope_begin();
    float av[] = {1, 2, 3, 4, 5, 6};
    nb_tensor *a = NBT(nb_from_data(av, NB_SHAPE(2, 3), NB_F32));
    nb_tensor *b = NBT(nb_add(a, 1.0));
    assert_true(nbt_at(b, 5) == 7.0);
    nb_tensor *w = NBT(nb_ones(NB_SHAPE(3, 2), NB_F32));
    assert_int_equal(nb_set_requires_grad(w, true), NB_OK);
    nb_tensor *y = NBT(nb_sum(nb_matmul(a, w), NULL, 0, false));
    assert_true(nbt_at(y, 0) == 42.0);
    assert_int_equal(nb_backward(y, NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(w));
    /* d sum(a @ w) / dw[k][j] = sum_i a[i][k] */
    assert_true(nbt_at(g, 0) == 5.0 && nbt_at(g, 2) == 7.0 && nbt_at(g, 4) == 9.0);
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(smoke)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
