/*
 * jit_source.c — C source for an elementwise fused kernel (backend/fused.h,
 * nred = 0): one loop that computes the kernel's whole chain per element in
 * registers, which the run-time compiler (jit.c) builds and loads.
 *
 * Every instruction is the C text the built-in loop of its op is compiled
 * from — f32_forms.h's forms, ops.def's formulas, the mask kernels' truth
 * rule, nb__store's conversions — expanded here by the preprocessor, so the
 * generated kernel computes each element as the eager op would.  Three things
 * keep it bit for bit equal to running the ops one by one:
 *  - An instruction reads a float operand through nb_jit_keep (an
 *    exclusive-or of the bits with a zero the compiler cannot see, a
 *    different one per instruction) where the compiler could otherwise
 *    contract a multiplication of one op into an addition of the next as a
 *    fused multiply-add (eager rounds between ops) — also through ops that
 *    hand a product on (where, relu, abs, neg, casts: may_be_product) —
 *    or share code between two instructions reading one value, which could
 *    change where it contracts inside one (needs_barrier).
 *    gelu(x * 1.5 + 0.5) keeps one barrier of three, 1.29 against 1.17 ns
 *    an element with none.
 *    A kernel whose every op is one correctly rounded operation or a
 *    selection (add, mul, div, sqrt, where, ...: exact_op) has nothing to
 *    contract inside an op, so it is compiled with contraction off instead
 *    (a pragma ahead of its loop) and without the barriers, which cost a
 *    data-dependent instruction per operand: Adam's update ran in 181
 *    against 91 us a call on 200,704 floats (bench/RESULTS.md §26).
 *  - The ranged f32 forms (f32_forms.h's F32_RANGE) run in blocks of JB
 *    elements, marking the elements with an input outside a form's range;
 *    those are computed again, one by one, each ranged op calling its form
 *    or, outside its range, its slow form (each compiled out of line, alone),
 *    as the eager loop recomputes them.  When an output shares memory with a
 *    load (`inplace`, the caller tells) a block goes through block buffers,
 *    so the second pass still reads the loads as they were.
 *
 * Every operand is contiguous along the loop (the caller stages strided and
 * broadcast rows into blocks), so the loop is the same vectorized loop the
 * built-in kernels run: no value is hoisted out of it and computed in a
 * scalar context of its own, where the compiler may contract differently.
 */
#include "jit.h"

#include "f32_forms.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JB = 2048 }; /* elements per block of a kernel with ranged forms */

#define JIT_STR(...) #__VA_ARGS__
#define JIT_XSTR(...) JIT_STR(__VA_ARGS__)

/* Each unary op's f32 form (f32_forms.h, expanded), whether that form is ranged (given the
 * parameters), its range test and slow form, and its formula in double (ops.def). */
typedef struct jit_unary_text {
    const char *f32, *f64, *test, *slow;
    bool (*ranged)(double p0d, double p1d);
} jit_unary_text;

#define JT_NONE(E, dt, expr)
#define JT_KIND_UNARY JT_UNARY
#define JT_KIND_BINARY JT_NONE
#define JT_KIND_WHERE JT_NONE
#define JT_KIND_REDUCE JT_NONE
#define JT_KIND_ARGREDUCE JT_NONE
#define JT_KIND_SCAN JT_NONE
#define JT_KIND_MATMUL JT_NONE
#define JT_KIND_GATHER JT_NONE
#define JT_KIND_SCATTER_ADD JT_NONE
#define JT_KIND_COPY JT_NONE
#define JT_KIND_VIEW JT_NONE
#define JT_KIND_VIEW_GRAD JT_NONE
#define JT_KIND_PAD JT_NONE
#define JT_KIND_CAT JT_NONE
#define JT_KIND_COMPOSITE JT_NONE
#define JT_KIND_WINDOW JT_NONE
#define JT_KIND_SIZE JT_NONE
#define JT_KIND_RANDOM JT_NONE
#define JT_KIND_LINALG JT_NONE
#define JT_KIND_QUANT JT_NONE
#define JT_KIND_CONV JT_NONE
#define JT_KIND_ATTENTION JT_NONE
#define NB_OP(E, name, kind, grad, dt, expr, iexpr, ident) JT_KIND_##kind(E, dt, expr)
#define JT_UNARY(E, dt, expr)                                                                      \
    NB_TYPED_##dt(static bool jt_ranged_##E(double p0d, double p1d) {                              \
        (void)p0d; (void)p1d;                                                                      \
        return F32_RANGED(E);                                                                      \
    })
#include "../../ops/ops.def"
#undef JT_UNARY
#define JT_UNARY(E, dt, expr)                                                                      \
    NB_TYPED_##dt([NB_OP_##E] = {JIT_XSTR(F32_FORM(E, expr)), JIT_XSTR(expr), JIT_XSTR(F32_TEST(E)), JIT_XSTR(F32_SLOW(E, expr)), \
                   jt_ranged_##E},)
static const jit_unary_text unary_text[NB_OP_COUNT] = {
#include "../../ops/ops.def"
};
#undef JT_UNARY
#undef NB_OP
#undef JT_KIND_UNARY
#undef JT_KIND_BINARY
#define JT_KIND_UNARY JT_NONE
#define JT_BINARY(E, dt, expr) [NB_OP_##E] = JIT_XSTR(expr),
#define JT_KIND_BINARY JT_BINARY
static const char *const binary_text[NB_OP_COUNT] = {
#define NB_OP(E, name, kind, grad, dt, expr, iexpr, ident) JT_KIND_##kind(E, dt, expr)
#include "../../ops/ops.def"
#undef NB_OP
};

/* ---- what the generator emits ---- */

static const char *ctype(nb_dtype dt) { return dt == NB_F32 ? "float" : dt == NB_F64 ? "double" : "uint8_t"; }

static bool jit_dtype(nb_dtype dt) { return dt == NB_F32 || dt == NB_F64 || dt == NB_BOOL; }

static const char *compare_op(nb_op op) {
    switch (op) {
    case NB_OP_EQ: return "==";
    case NB_OP_NE: return "!=";
    case NB_OP_LT: return "<";
    case NB_OP_LE: return "<=";
    case NB_OP_GT: return ">";
    case NB_OP_GE: return ">=";
    default: return NULL;
    }
}

bool nb__jit_instr_ranged(const nb_finstr *I) {
    return I->level == NB_FL_FULL && nb__ops[I->op].kind == NB_KIND_UNARY && I->dtype == NB_F32 &&
           unary_text[I->op].ranged(I->p0, I->p1);
}

/* Can instruction I be emitted? */
static bool emittable(const nb_fkernel *k, const nb_finstr *I) {
    if (I->level == NB_FL_ROW || !jit_dtype(I->dtype)) return false;
    for (int i = 0; i < 3; i++)
        if (I->in[i] >= 0 && !jit_dtype(nb__fk_dtype(k, I->in[i]))) return false;
    if (I->level == NB_FL_UNIFORM) return true; /* computed before the call */
    nb_op op = I->op;
    if (op == NB_OP_CAST || op == NB_OP_WHERE || compare_op(op)) return true;
    if (op == NB_OP_LOGICAL_AND || op == NB_OP_LOGICAL_OR || op == NB_OP_LOGICAL_XOR || op == NB_OP_LOGICAL_NOT)
        return I->dtype == NB_BOOL;
    if (I->dtype == NB_BOOL) return false;
    if (nb__ops[op].kind == NB_KIND_UNARY) return unary_text[op].f32 != NULL;
    if (nb__ops[op].kind == NB_KIND_BINARY) return binary_text[op] != NULL;
    return false;
}

/* Is op, at any level, one correctly rounded operation or a selection in both dtypes (ops.def's
 * formula and f32_forms.h's form), so that no fused multiply-add can form inside it? */
static bool exact_op(nb_op op) {
    switch (op) {
    case NB_OP_ADD: case NB_OP_SUB: case NB_OP_MUL: case NB_OP_DIV: case NB_OP_NEG: case NB_OP_ABS:
    case NB_OP_SQRT: case NB_OP_RSQRT: case NB_OP_SQUARE: case NB_OP_RECIPROCAL: case NB_OP_RELU: case NB_OP_MAXIMUM:
    case NB_OP_MINIMUM: case NB_OP_CAST: case NB_OP_WHERE: case NB_OP_LOGICAL_AND: case NB_OP_LOGICAL_OR:
    case NB_OP_LOGICAL_XOR: case NB_OP_LOGICAL_NOT: return true;
    default: return compare_op(op) != NULL;
    }
}

/* Is every instruction of k's loop exact (exact_op)?  Then k is compiled with contraction off
 * and without barriers.  (UNIFORM instructions are computed before the call, by the caller.) */
static bool exact_kernel(const nb_fkernel *k) {
    for (int j = 0; j < k->ninstr; j++)
        if (k->instr[j].level == NB_FL_FULL && !exact_op(k->instr[j].op)) return false;
    return true;
}

/* Does op, reading a value, add it (so that a product there could become a fused multiply-add:
 * an addition, a subtraction, maximum / minimum's NaN sum, any op that is not exact)? */
static bool adds(nb_op op) {
    return op == NB_OP_ADD || op == NB_OP_SUB || op == NB_OP_MAXIMUM || op == NB_OP_MINIMUM || !exact_op(op);
}

/* Does op hand an operand's value on, so that the compiler may see a product through it: a
 * selection (where, relu; in a loop it does not vectorize a branch, with the next op's addition
 * copied into each arm), abs (dropped from a square), neg (a negated multiply-add), a cast (f32 to
 * f64 and back is the identity)?  (maximum and minimum add: their operands get barriers.) */
static bool passes_on(nb_op op) {
    return op == NB_OP_WHERE || op == NB_OP_RELU || op == NB_OP_ABS || op == NB_OP_NEG || op == NB_OP_CAST;
}

/* May value v be a product the compiler can see: computed in the loop by a multiplication or an
 * op that is not exact, or handed on (passes_on) from such a value without a barrier?  Loads and
 * UNIFORM values are no products: the loop reads them from memory. */
static bool may_be_product(const nb_fkernel *k, int v) {
    if (v < k->nin || nb__fk_level(k, v) != NB_FL_FULL) return false;
    const nb_finstr *I = &k->instr[v - k->nin];
    if (I->op == NB_OP_MUL || I->op == NB_OP_SQUARE || !exact_op(I->op)) return true;
    if (!passes_on(I->op)) return false;
    for (int i = 0; i < 3; i++)
        if (I->in[i] >= 0 && may_be_product(k, I->in[i])) return true;
    return false;
}

/* Does operand v of instruction j need j's barrier?  When it may be a product (may_be_product)
 * that j adds; and when j is not exact and another instruction reads v too, whose code the
 * compiler could otherwise share with j's form. */
static bool needs_barrier(const nb_fkernel *k, int j, int v) {
    const nb_finstr *I = &k->instr[j];
    if (adds(I->op) && may_be_product(k, v)) return true;
    if (exact_op(I->op)) return false;
    for (int r = 0; r < k->ninstr; r++)
        if (r != j && k->instr[r].level == NB_FL_FULL)
            for (int i = 0; i < 3; i++)
                if (k->instr[r].in[i] == v) return true;
    return false;
}

/* Operand i of instruction j: the value itself in an exact kernel or where needs_barrier says
 * none is needed; else a float behind j's own barrier (nb_jit_keep with the zero z * (j + 1),
 * which the compiler can neither see nor prove equal to another instruction's), so no two
 * instructions share code that could be contracted differently; bools as they are. */
static void opnd(nb__text *b, const nb_fkernel *k, int j, int i) {
    int v = k->instr[j].in[i];
    nb_dtype dt = nb__fk_dtype(k, v);
    if (dt == NB_BOOL || exact_kernel(k) || !needs_barrier(k, j, v)) nb__text_printf(b, "v%d", v);
    else nb__text_printf(b, "nb_jit_keep_%s(v%d, z * %dull)", dt == NB_F32 ? "f" : "d", v, j + 1);
}

/* The truth of operand i of j as C (the mask kernels' rule: x != 0, so -0 is false and NaN true). */
static void truth(nb__text *b, const nb_fkernel *k, int j, int i) {
    nb__text_printf(b, "(");
    opnd(b, k, j, i);
    nb__text_printf(b, " != 0)");
}

/* The f32 parameters' declarations, ahead of a unary form (which may use p0, p1, p0d, p1d) in
 * the loop and in the out-of-line forms, where p0d and p1d are in scope. */
static const char f32_params[] =
    "const float p0 = (float)p0d, p1 = (float)p1d; (void)p0; (void)p1; (void)p0d; (void)p1d;";

/* Out of line, the form and the slow form of ranged instruction j (the exact pass calls them,
 * rarely): each compiled alone, sharing no code with the other or with the loop. */
static void emit_ranged_fns(nb__text *b, const nb_fkernel *k, int j) {
    const nb_finstr *I = &k->instr[j];
    if (!nb__jit_instr_ranged(I)) return;
    const char *fn = "static __attribute__((noinline)) float", *args = "float x, double p0d, double p1d";
    nb__text_printf(b, "%s nb_jit_form%d(%s) { %s return %s; }\n", fn, j, args, f32_params, unary_text[I->op].f32);
    nb__text_printf(b, "%s nb_jit_slow%d(%s) { %s return %s; }\n", fn, j, args, f32_params, unary_text[I->op].slow);
}

/* Instruction j of k as a C statement assigning v<nin + j>; mode 0: ranged forms unguarded
 * (plain kernels have none), 1: the form and `bad` set for inputs outside its range, 2: the
 * form or, outside the range, the slow form. */
static void emit_instr(nb__text *b, const nb_fkernel *k, int j, int mode) {
    const nb_finstr *I = &k->instr[j];
    int d = k->nin + j;
    nb_op op = I->op;
    const char *T = ctype(I->dtype);
    nb__text_printf(b, "    ");
    if (op == NB_OP_CAST) {
        nb__text_printf(b, I->dtype == NB_BOOL ? "v%d = (uint8_t)((double)" : "v%d = (%s)(double)", d, T);
        opnd(b, k, j, 0);
        nb__text_printf(b, I->dtype == NB_BOOL ? " != 0);\n" : ";\n");
    } else if (op == NB_OP_WHERE) {
        nb__text_printf(b, "v%d = ", d);
        truth(b, k, j, 0);
        nb__text_printf(b, " ? v%d : v%d;\n", I->in[1], I->in[2]); /* bits selected, not computed */
    } else if (compare_op(op)) {
        nb__text_printf(b, "v%d = (uint8_t)(", d);
        opnd(b, k, j, 0);
        nb__text_printf(b, " %s ", compare_op(op));
        opnd(b, k, j, 1);
        nb__text_printf(b, ");\n");
    } else if (op == NB_OP_LOGICAL_NOT) {
        nb__text_printf(b, "v%d = (uint8_t)!", d);
        truth(b, k, j, 0);
        nb__text_printf(b, ";\n");
    } else if (op == NB_OP_LOGICAL_AND || op == NB_OP_LOGICAL_OR || op == NB_OP_LOGICAL_XOR) {
        nb__text_printf(b, "v%d = (uint8_t)(", d);
        truth(b, k, j, 0);
        nb__text_printf(b, op == NB_OP_LOGICAL_AND ? " & " : op == NB_OP_LOGICAL_OR ? " | " : " ^ ");
        truth(b, k, j, 1);
        nb__text_printf(b, ");\n");
    } else if (nb__ops[op].kind == NB_KIND_UNARY && I->dtype == NB_F32) {
        nb__text_printf(b, "{ const float x = ");
        opnd(b, k, j, 0);
        nb__text_printf(b, "; const double p0d = prm[%d], p1d = prm[%d]; %s ", 2 * j, 2 * j + 1, f32_params);
        const char *test = unary_text[op].test;
        bool ranged = nb__jit_instr_ranged(I);
        if (mode != 0 && ranged) {
            if (mode == 1) nb__text_printf(b, "v%d = %s; bad |= !%s; }\n", d, unary_text[op].f32, test);
            else nb__text_printf(b, "v%d = %s ? nb_jit_form%d(x, p0d, p1d) : nb_jit_slow%d(x, p0d, p1d); }\n", d, test, j, j);
        } else { /* a plain form's slow form is the form itself */
            nb__text_printf(b, "v%d = %s; }\n", d, ranged ? unary_text[op].f32 : unary_text[op].slow);
        }
    } else if (nb__ops[op].kind == NB_KIND_UNARY) {
        nb__text_printf(b, "{ const double x = ");
        opnd(b, k, j, 0);
        nb__text_printf(b, "; const double p0 = prm[%d], p1 = prm[%d]; (void)p0; (void)p1; v%d = (double)(%s); }\n",
                        2 * j, 2 * j + 1, d, unary_text[op].f64);
    } else {
        nb__text_printf(b, "{ const %s a = ", T);
        opnd(b, k, j, 0);
        nb__text_printf(b, ", b = ");
        opnd(b, k, j, 1);
        nb__text_printf(b, "; v%d = (%s)(%s); }\n", d, T, binary_text[op]);
    }
}

/* The loop body over index i: FULL loads, instructions, outputs (into block buffers o<k>[t]
 * when `blocked`: outputs that may share memory with loads). */
static void emit_body(nb__text *b, const nb_fkernel *k, int mode, bool blocked) {
    for (int v = 0; v < k->nin; v++)
        if (k->in_level[v] == NB_FL_FULL)
            nb__text_printf(b, "    const %s v%d = p%d[i];\n", ctype(k->in_dtype[v]), v, v);
    for (int j = 0; j < k->ninstr; j++)
        if (k->instr[j].level == NB_FL_FULL) {
            nb__text_printf(b, "    %s v%d;\n", ctype(k->instr[j].dtype), k->nin + j);
            emit_instr(b, k, j, mode);
        }
    for (int o = 0; o < k->nout; o++) {
        int v = k->out_val[o];
        if (nb__fk_level(k, v) != NB_FL_FULL) continue; /* UNIFORM outputs: written before the call */
        if (blocked) nb__text_printf(b, "    o%d[t] = v%d;\n", o, v);
        else nb__text_printf(b, "    q%d[i] = v%d;\n", o, v);
    }
}

/* The barriers of opnd(): the bits of v exclusive-or'ed with z, which is 0 at run time. */
static const char keep_src[] =
    "static inline float nb_jit_keep_f(float v, uint64_t z) {\n"
    "    uint32_t u; memcpy(&u, &v, 4); u ^= (uint32_t)z; memcpy(&v, &u, 4); return v;\n}\n"
    "static inline double nb_jit_keep_d(double v, uint64_t z) {\n"
    "    uint64_t u; memcpy(&u, &v, 8); u ^= z; memcpy(&v, &u, 8); return v;\n}\n";

/* The FULL operands (loads, then outputs): as the loop's restrict parameters, or as the entry's
 * arguments that unpack ptr into them. */
static void emit_operands(nb__text *b, const nb_fkernel *k, bool params) {
    for (int o = 0; o < k->nin + k->nout; o++) {
        bool load = o < k->nin;
        int v = load ? o : k->out_val[o - k->nin];
        if (nb__fk_level(k, v) != NB_FL_FULL) continue;
        const char *T = ctype(nb__fk_dtype(k, v)), *c = load ? "const " : "";
        if (params) nb__text_printf(b, ", %s%s *restrict %c%d", c, T, load ? 'p' : 'q', load ? o : o - k->nin);
        else nb__text_printf(b, ", (%s%s *)ptr[%d]", c, T, o);
    }
}

/* The loop over blocks of a kernel with ranged forms: the forms (into the block buffers when an
 * output shares memory with a load, else straight into the outputs), then the marked elements
 * again, found 64 flags at a time, then (in place) the block buffers into the outputs. */
static void emit_blocks(nb__text *b, const nb_fkernel *k) {
    nb__text_printf(b, "    for (int64_t i0 = 0; i0 < n; i0 += %d) {\n", JB);
    nb__text_printf(b, "    const int64_t m = n - i0 < %d ? n - i0 : %d;\n", JB, JB);
    for (int o = 0; o < k->nout; o++)
        if (nb__fk_level(k, k->out_val[o]) == NB_FL_FULL)
            nb__text_printf(b, "    %s o%d[%d];\n", ctype(nb__fk_dtype(k, k->out_val[o])), o, JB);
    nb__text_printf(b, "    uint8_t outside[%d];\n    int any = 0;\n", JB + 64); /* the flags past m: zeroed when read */
    for (int inplace = 1; inplace >= 0; inplace--) {
        nb__text_printf(b, inplace ? "    if (inplace) {\n" : "    } else {\n");
        nb__text_printf(b, "    for (int64_t t = 0; t < m; t++) {\n    const int64_t i = i0 + t;\n    int bad = 0;\n");
        emit_body(b, k, 1, inplace);
        nb__text_printf(b, "    outside[t] = (uint8_t)bad;\n    any |= bad;\n    }\n");
    }
    nb__text_printf(b, "    }\n    if (any) memset(outside + m, 0, 64);\n"
                       "    if (any) for (int64_t w = 0; w < m; w += 64) {\n"
                       "    uint64_t f[8], g = 0;\n    memcpy(f, outside + w, 64);\n"
                       "    for (int u = 0; u < 8; u++) g |= f[u];\n    if (!g) continue;\n"
                       "    for (int64_t t = w; t < w + 64 && t < m; t++) {\n    if (!outside[t]) continue;\n"
                       "    const int64_t i = i0 + t;\n");
    for (int inplace = 1; inplace >= 0; inplace--) {
        nb__text_printf(b, inplace ? "    if (inplace) {\n" : "    } else {\n");
        emit_body(b, k, 2, inplace);
    }
    nb__text_printf(b, "    }\n    }\n    }\n    if (inplace) for (int64_t t = 0; t < m; t++) {\n"
                       "    const int64_t i = i0 + t;\n");
    for (int o = 0; o < k->nout; o++)
        if (nb__fk_level(k, k->out_val[o]) == NB_FL_FULL) nb__text_printf(b, "    q%d[i] = o%d[t];\n", o, o);
    nb__text_printf(b, "    }\n    }\n");
}

char *nb__jit_source(const nb_fkernel *k, const char *name) {
    if (k->nred != 0) return NULL;
    for (int v = 0; v < k->nin; v++)
        if (!jit_dtype(k->in_dtype[v]) || k->in_level[v] == NB_FL_ROW) return NULL;
    bool blocked = false;
    for (int j = 0; j < k->ninstr; j++) {
        if (!emittable(k, &k->instr[j])) return NULL;
        blocked |= nb__jit_instr_ranged(&k->instr[j]);
    }
    nb__text b = {.libc = true};
    /* GCC reads the first pragma, clang the second; both leave the prelude's functions as they are */
    if (exact_kernel(k))
        nb__text_printf(&b, "#pragma GCC optimize(\"fp-contract=off\")\n#pragma STDC FP_CONTRACT OFF\n");
    nb__text_printf(&b, "%s", keep_src);
    for (int j = 0; j < k->ninstr; j++) emit_ranged_fns(&b, k, j);
    /* the loop's function takes its operands as restrict parameters (GCC honours restrict there,
     * not on local pointers: without it, several outputs meant too many run-time alias checks to
     * vectorize at all); `name` unpacks ptr into them */
    nb__text_printf(&b, "static __attribute__((noinline)) void nb_jit_loop(int64_t n");
    emit_operands(&b, k, true);
    nb__text_printf(&b, ", const double *restrict prm, const void *const *uni, uint64_t z, int inplace) {\n"
                        "    (void)prm; (void)uni; (void)inplace;\n");
    for (int v = 0; v < k->nin + k->ninstr; v++) /* UNIFORM values, read once */
        if (nb__fk_level(k, v) == NB_FL_UNIFORM) {
            const char *T = ctype(nb__fk_dtype(k, v));
            nb__text_printf(&b, "    const %s v%d = *(const %s *)uni[%d];\n", T, v, T, v);
        }
    if (blocked) {
        emit_blocks(&b, k);
    } else {
        nb__text_printf(&b, "    for (int64_t i = 0; i < n; i++) {\n");
        emit_body(&b, k, 0, false);
        nb__text_printf(&b, "    }\n");
    }
    nb__text_printf(&b, "}\nvoid %s(int64_t n, char *const *ptr, const double *prm, const void *const *uni, uint64_t z, "
                        "int inplace) {\n    nb_jit_loop(n",
                    name);
    emit_operands(&b, k, false);
    nb__text_printf(&b, ", prm, uni, z, inplace);\n}\n");
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
