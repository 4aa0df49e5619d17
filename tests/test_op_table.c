/*
 * test_op_table.c — the op table (src/ops/ops.def) checked row by row against
 * what the library does:
 *  - every name is unique and public through nb_op_name; every kind but
 *    COMPOSITE has an infer and an execute step (nb__kinds); every RULE op has
 *    a derivative rule and no other op has one; only REDUCE / SCAN rows have a
 *    start (ident), and all of them have one and an integer step;
 *  - every op marked integer-exact (iexpr INT) computes exactly on int64
 *    operands near ±2^62 through the CPU backend (where double precision
 *    would drop the low bits), against an oracle written here in 128-bit
 *    arithmetic; an exact op without an oracle here, or an oracle of an op not
 *    marked exact, fails;
 *  - the starts: a reduction or scan of one element gives that element; the
 *    start's value appended to an axis changes nothing (f32 and i64); ZERO and
 *    ONE are what reducing an empty axis gives, LOWEST and HIGHEST refuse an
 *    empty axis (NB_ERR_SHAPE), as PyTorch's max and min do.
 */
#include "support.h"

#include "ops/ops.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef __int128 i128;

/* ---- the structure of the table ------------------------------------------ */

static bool folds(nb_op op) { return nb__ops[op].kind == NB_KIND_REDUCE || nb__ops[op].kind == NB_KIND_SCAN; }

static void rows_are_consistent(void **state) {
    (void)state;
    for (int op = 0; op < NB_OP_COUNT; op++) {
        const nb_op_info *r = &nb__ops[op];
        assert_non_null(r->name);
        assert_true(r->name[0] != '\0');
        assert_ptr_equal(nb_op_name(op), r->name);
        for (int o = 0; o < op; o++)
            if (!strcmp(nb__ops[o].name, r->name)) fail_msg("ops %d and %d are both named '%s'", o, op, r->name);
        assert_true((unsigned)r->kind < NB_KIND_COUNT);
        if (r->kind == NB_KIND_COMPOSITE) {
            assert_null(nb__kinds[r->kind]);
        } else {
            const nb_kind_impl *k = nb__kinds[r->kind];
            if (!k || !k->infer || !k->execute) fail_msg("op '%s': kind %d has no infer / execute", r->name, (int)r->kind);
        }
        if ((r->grad == NB_GRAD_RULE) != (r->vjp != NULL))
            fail_msg("op '%s': RULE mark and derivative rule disagree", r->name);
        if (folds(op) != (r->ident != NB_IDENT_NA)) fail_msg("op '%s': a start (ident) exactly for REDUCE / SCAN", r->name);
        if (folds(op) && !r->int_exact) fail_msg("op '%s': a reduction or scan without an integer step", r->name);
        if (r->int_exact && !folds(op) && r->kind != NB_KIND_UNARY && r->kind != NB_KIND_BINARY)
            fail_msg("op '%s': integer formula on kind %d", r->name, (int)r->kind);
    }
    assert_null(nb_op_name(NB_OP_COUNT));
    assert_null(nb_op_name(-1));
}

/* ---- integer exactness ------------------------------------------------------
 * Oracles in 128-bit arithmetic, reduced modulo 2^64 (two's complement wrap-around,
 * as documented in nabla.h), with nabla's documented results where PyTorch raises:
 * remainder / fmod by zero give 0, negative powers 0 (±1 for bases ±1). */

static int64_t wrap128(i128 v) { return (int64_t)(uint64_t)(unsigned __int128)v; }

static int64_t o_neg(int64_t x) { return wrap128(-(i128)x); }
static int64_t o_abs(int64_t x) { return wrap128(x < 0 ? -(i128)x : (i128)x); }
static int64_t o_sign(int64_t x) { return x > 0 ? 1 : x < 0 ? -1 : 0; }
static int64_t o_square(int64_t x) { return wrap128((i128)x * x); }
static int64_t o_relu(int64_t x) { return x > 0 ? x : 0; }
static int64_t o_same(int64_t x) { return x; } /* floor, ceil, round of an integer */

static int64_t o_add(int64_t a, int64_t b) { return wrap128((i128)a + b); }
static int64_t o_sub(int64_t a, int64_t b) { return wrap128((i128)a - b); }
static int64_t o_mul(int64_t a, int64_t b) { return wrap128((unsigned __int128)(uint64_t)a * (uint64_t)b); }
static int64_t o_pow(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
    unsigned __int128 r = 1, base = (uint64_t)a, mask = UINT64_MAX;
    for (uint64_t e = (uint64_t)b; e; e /= 2) { /* modulo 2^64 at every step */
        if (e % 2) r = (r * base) & mask;
        base = (base * base) & mask;
    }
    return wrap128((i128)r);
}
static int64_t o_maximum(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t o_minimum(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t o_remainder(int64_t a, int64_t b) { /* a - floor(a / b) b */
    if (b == 0) return 0;
    i128 q = (i128)a / b;
    if ((i128)a % b != 0 && ((a < 0) != (b < 0))) q -= 1;
    return wrap128((i128)a - q * b);
}
static int64_t o_fmod(int64_t a, int64_t b) { return b == 0 ? 0 : wrap128((i128)a % b); }
static int64_t o_eq(int64_t a, int64_t b) { return a == b; }
static int64_t o_ne(int64_t a, int64_t b) { return a != b; }
static int64_t o_lt(int64_t a, int64_t b) { return a < b; }
static int64_t o_le(int64_t a, int64_t b) { return a <= b; }
static int64_t o_gt(int64_t a, int64_t b) { return a > b; }
static int64_t o_ge(int64_t a, int64_t b) { return a >= b; }

typedef struct {
    nb_op op;
    int64_t (*u)(int64_t);
    int64_t (*b)(int64_t, int64_t);
} int_oracle;

static const int_oracle ORACLES[] = {
    {NB_OP_NEG, o_neg, NULL},           {NB_OP_ABS, o_abs, NULL},           {NB_OP_SIGN, o_sign, NULL},
    {NB_OP_SQUARE, o_square, NULL},     {NB_OP_RELU, o_relu, NULL},         {NB_OP_FLOOR, o_same, NULL},
    {NB_OP_CEIL, o_same, NULL},         {NB_OP_ROUND, o_same, NULL},        {NB_OP_ADD, NULL, o_add},
    {NB_OP_SUB, NULL, o_sub},           {NB_OP_MUL, NULL, o_mul},           {NB_OP_POW, NULL, o_pow},
    {NB_OP_MAXIMUM, NULL, o_maximum},   {NB_OP_MINIMUM, NULL, o_minimum},   {NB_OP_REMAINDER, NULL, o_remainder},
    {NB_OP_FMOD, NULL, o_fmod},         {NB_OP_EQ, NULL, o_eq},             {NB_OP_NE, NULL, o_ne},
    {NB_OP_LT, NULL, o_lt},             {NB_OP_LE, NULL, o_le},             {NB_OP_GT, NULL, o_gt},
    {NB_OP_GE, NULL, o_ge},
};
#define NORACLES (sizeof ORACLES / sizeof ORACLES[0])

#define P62 ((int64_t)1 << 62)
/* Operands where double precision loses the low bits, signs and small values around them. */
static const int64_t XS[] = {P62 + 1, P62 + 3, -P62 - 5, P62 - 1, INT64_MAX, INT64_MIN + 7, 7, -3, 2, 1, 0, -1};
#define NXS ((int64_t)(sizeof XS / sizeof XS[0]))

static int64_t elem_i64(nb_tensor *t, int64_t i) {
    const char *p = nb_data_ptr(t);
    switch (nb_dtype_of(t)) {
    case NB_I64: return ((const int64_t *)p)[i];
    case NB_BOOL: return ((const uint8_t *)p)[i];
    default: fail_msg("unexpected result dtype %s", nb_dtype_name(nb_dtype_of(t))); return 0;
    }
}

static void elementwise_int_ops_are_exact(void **state) {
    (void)state;
    for (size_t k = 0; k < NORACLES; k++)
        if (!nb__ops[ORACLES[k].op].int_exact) fail_msg("op '%s' has an oracle here but is not marked INT", nb__ops[ORACLES[k].op].name);
    nb_tensor *col = NBT(nb_from_data(XS, (int64_t[]){NXS, 1}, 2, NB_I64));
    nb_tensor *row = NBT(nb_from_data(XS, (int64_t[]){1, NXS}, 2, NB_I64));
    int checked = 0;
    for (int op = 0; op < NB_OP_COUNT; op++) {
        if (!nb__ops[op].int_exact || folds(op)) continue;
        const int_oracle *o = NULL;
        for (size_t k = 0; k < NORACLES && !o; k++)
            if ((int)ORACLES[k].op == op) o = &ORACLES[k];
        if (!o) fail_msg("op '%s' is marked INT in ops.def but has no oracle in test_op_table.c", nb__ops[op].name);
        const char *name = nb__ops[op].name;
        if (nb__ops[op].kind == NB_KIND_UNARY) {
            nb_tensor *r = NBT(nb__own(nb__unary(op, row, 0, 0)));
            for (int64_t i = 0; i < NXS; i++)
                if (elem_i64(r, i) != o->u(XS[i]))
                    fail_msg("%s(%lld) = %lld, want %lld", name, (long long)XS[i], (long long)elem_i64(r, i),
                             (long long)o->u(XS[i]));
        } else {
            nb_tensor *r = NBT(nb__own(nb__binary(op, col, row))); /* [NXS, NXS] by broadcasting */
            for (int64_t i = 0; i < NXS; i++)
                for (int64_t j = 0; j < NXS; j++) {
                    int64_t got = elem_i64(r, i * NXS + j), want = o->b(XS[i], XS[j]);
                    if (got != want)
                        fail_msg("%s(%lld, %lld) = %lld, want %lld", name, (long long)XS[i], (long long)XS[j],
                                 (long long)got, (long long)want);
                }
        }
        checked++;
    }
    assert_int_equal(checked, (int)NORACLES);
}

/* Reductions and scans on int64 near 2^62: a fold from the first element in 128-bit
 * arithmetic (no start needed), each prefix for scans. */
static int64_t fold_step(nb_op op, int64_t acc, int64_t v) {
    switch (op) {
    case NB_OP_SUM: case NB_OP_CUMSUM: return o_add(acc, v);
    case NB_OP_PROD: case NB_OP_CUMPROD: return o_mul(acc, v);
    case NB_OP_MAX: return o_maximum(acc, v);
    case NB_OP_MIN: return o_minimum(acc, v);
    default: fail_msg("no oracle for reduction '%s' in test_op_table.c", nb__ops[op].name); return 0;
    }
}

static nb_tensor *fold_op(nb_op op, nb_tensor *x) {
    if (nb__ops[op].kind == NB_KIND_REDUCE) return nb__own(nb__reduce(op, x, (int[]){0}, 1, false));
    nb_attrs a = {.naxes = 1, .axes = {0}};
    return nb__own(nb__apply(op, &x, 1, &a));
}

static void int_reductions_are_exact(void **state) {
    (void)state;
    nb_tensor *x = NBT(nb_from_data(XS, (int64_t[]){NXS}, 1, NB_I64));
    for (int op = 0; op < NB_OP_COUNT; op++) {
        if (!folds(op)) continue;
        nb_tensor *r = NBT(fold_op(op, x));
        bool scan = nb__ops[op].kind == NB_KIND_SCAN;
        int64_t acc = XS[0];
        for (int64_t i = 0; i < NXS; i++) {
            if (i > 0) acc = fold_step(op, acc, XS[i]);
            if (scan && elem_i64(r, i) != acc)
                fail_msg("%s: element %lld is %lld, want %lld", nb__ops[op].name, (long long)i, (long long)elem_i64(r, i),
                         (long long)acc);
        }
        if (!scan && elem_i64(r, 0) != acc)
            fail_msg("%s = %lld, want %lld", nb__ops[op].name, (long long)elem_i64(r, 0), (long long)acc);
    }
}

/* ---- the starts of reductions and scans ------------------------------------ */

static double ident_f(nb_ident id) {
    return id == NB_IDENT_ZERO ? 0 : id == NB_IDENT_ONE ? 1 : id == NB_IDENT_LOWEST ? -INFINITY : INFINITY;
}
static int64_t ident_i(nb_ident id) {
    return id == NB_IDENT_ZERO ? 0 : id == NB_IDENT_ONE ? 1 : id == NB_IDENT_LOWEST ? INT64_MIN : INT64_MAX;
}

/* Last element of a scan / the value of a reduction, as double. */
static double last(nb_tensor *r) { return nbt_at(r, nb_numel(r) - 1); }

static void starts_are_neutral(void **state) {
    (void)state;
    for (int op = 0; op < NB_OP_COUNT; op++) {
        if (!folds(op)) continue;
        const char *name = nb__ops[op].name;
        nb_ident id = nb__ops[op].ident;
        bool scan = nb__ops[op].kind == NB_KIND_SCAN;
        /* one element: the start combined with it gives it back */
        const float one_f[] = {-5.5f, 3.25f};
        for (int k = 0; k < 2; k++) {
            nb_tensor *r = NBT(fold_op(op, NBT(nb_from_data(&one_f[k], (int64_t[]){1}, 1, NB_F32))));
            if (last(r) != one_f[k]) fail_msg("%s([%g]) = %g", name, (double)one_f[k], last(r));
        }
        const int64_t one_i[] = {-P62 - 5, P62 + 1};
        for (int k = 0; k < 2; k++) {
            nb_tensor *r = NBT(fold_op(op, NBT(nb_from_data(&one_i[k], (int64_t[]){1}, 1, NB_I64))));
            if (elem_i64(r, nb_numel(r) - 1) != one_i[k]) fail_msg("%s([%lld]) is not its element", name, (long long)one_i[k]);
        }
        /* the start appended changes nothing */
        const float vf[] = {1.5f, -2.25f, (float)ident_f(id)};
        nb_tensor *with = NBT(fold_op(op, NBT(nb_from_data(vf, (int64_t[]){3}, 1, NB_F32))));
        nb_tensor *without = NBT(fold_op(op, NBT(nb_from_data(vf, (int64_t[]){2}, 1, NB_F32))));
        if (last(with) != last(without)) fail_msg("%s: the f32 start %g is not neutral", name, ident_f(id));
        const int64_t vi[] = {P62 + 3, -7, ident_i(id)};
        with = NBT(fold_op(op, NBT(nb_from_data(vi, (int64_t[]){3}, 1, NB_I64))));
        without = NBT(fold_op(op, NBT(nb_from_data(vi, (int64_t[]){2}, 1, NB_I64))));
        if (elem_i64(with, nb_numel(with) - 1) != elem_i64(without, nb_numel(without) - 1))
            fail_msg("%s: the int64 start %lld is not neutral", name, (long long)ident_i(id));
        /* an empty axis: the identity (ZERO, ONE) or NB_ERR_SHAPE (LOWEST, HIGHEST) */
        if (scan) {
            assert_true(id == NB_IDENT_ZERO || id == NB_IDENT_ONE);
            continue;
        }
        nb_dtype dts[] = {NB_F32, NB_I64};
        for (int k = 0; k < 2; k++) {
            nb_tensor *empty = NBT(nb_zeros((int64_t[]){0, 3}, 2, dts[k]));
            nb_tensor *r = fold_op(op, empty);
            if (id == NB_IDENT_ZERO || id == NB_IDENT_ONE) {
                NBT(r);
                assert_int_equal(nb_numel(r), 3);
                for (int64_t i = 0; i < 3; i++) assert_true(nbt_at(r, i) == ident_f(id));
            } else {
                assert_null(r);
                assert_int_equal(nb_last_status(), NB_ERR_SHAPE);
                nb_clear_error();
            }
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(rows_are_consistent, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(elementwise_int_ops_are_exact, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(int_reductions_are_exact, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(starts_are_neutral, nbt_setup, nbt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
