/*
 * kern_mask_template.c — where, comparison and logical kernels over
 * contiguous operands, included by kern_template.c (so compiled per ISA).
 * cpu_backend.c stages strided and broadcast operands into contiguous
 * blocks before calling these.
 *
 * Elements are handled as unsigned integers of their size: `where` copies
 * bits, and an element is true when (bits & mask) != 0, the mask dropping a
 * float's sign bit (so -0 is false and NaN true, as x != 0).  Comparisons
 * are typed.  Results are written branch-free (masks and bitwise selects)
 * so gcc vectorizes them across the mixed widths.
 */

/* out[i] = truth(c[i]) ? a[i] : b[i]; T the element's bits, C the condition's. */
#define WHERE_K(T, C)                                                                       \
    static void where_##T##_##C(int64_t n, void *o_, const void *c_, uint64_t cmask,        \
                                const void *a_, const void *b_) {                           \
        T *restrict o = o_;                                                                 \
        const C *restrict c = c_;                                                           \
        const T *restrict a = a_, *restrict b = b_;                                         \
        const C cm = (C)cmask;                                                              \
        for (int64_t i = 0; i < n; i++) {                                                   \
            T m = (T)0 - (T)((c[i] & cm) != 0);                                             \
            o[i] = (a[i] & m) | (b[i] & (T)~m);                                             \
        }                                                                                   \
    }
#define WHERE_ROW(T) WHERE_K(T, uint8_t) WHERE_K(T, uint16_t) WHERE_K(T, uint32_t) WHERE_K(T, uint64_t)
WHERE_ROW(uint8_t)
WHERE_ROW(uint16_t)
WHERE_ROW(uint32_t)
WHERE_ROW(uint64_t)
#define WHERE_TAB_ROW(T) {where_##T##_uint8_t, where_##T##_uint16_t, where_##T##_uint32_t, where_##T##_uint64_t}
#define NB_WHERE_TABLE \
    {WHERE_TAB_ROW(uint8_t), WHERE_TAB_ROW(uint16_t), WHERE_TAB_ROW(uint32_t), WHERE_TAB_ROW(uint64_t)}

/* out[i] = a[i] OP b[i] as 0/1 for one value type. */
#define CMP_K(NAME, OP, T)                                                                  \
    static void cmp_##NAME##_##T(int64_t n, uint8_t *restrict o, const void *a_, const void *b_) { \
        const T *restrict a = a_, *restrict b = b_;                                         \
        for (int64_t i = 0; i < n; i++) o[i] = (uint8_t)(a[i] OP b[i]);                     \
    }
#define CMP_TYPES(NAME, OP)                                                                 \
    CMP_K(NAME, OP, float) CMP_K(NAME, OP, double) CMP_K(NAME, OP, int8_t)                  \
    CMP_K(NAME, OP, int32_t) CMP_K(NAME, OP, int64_t) CMP_K(NAME, OP, uint8_t)
CMP_TYPES(eq, ==)
CMP_TYPES(ne, !=)
CMP_TYPES(lt, <)
CMP_TYPES(le, <=)
CMP_TYPES(gt, >)
CMP_TYPES(ge, >=)
/* one op's row, by dtype; f16 / bf16 have none (the generic path converts them) */
#define CMP_TAB_ROW(NAME)                                                                   \
    {[NB_F32] = cmp_##NAME##_float, [NB_F64] = cmp_##NAME##_double, [NB_I8] = cmp_##NAME##_int8_t, \
     [NB_I32] = cmp_##NAME##_int32_t, [NB_I64] = cmp_##NAME##_int64_t, [NB_U8] = cmp_##NAME##_uint8_t, \
     [NB_BOOL] = cmp_##NAME##_uint8_t}
#define NB_CMP_TABLE \
    {CMP_TAB_ROW(eq), CMP_TAB_ROW(ne), CMP_TAB_ROW(lt), CMP_TAB_ROW(le), CMP_TAB_ROW(gt), CMP_TAB_ROW(ge)}

/* out[i] = truth(a[i]) OP truth(b[i]) as 0/1 (b unused by NOT). */
#define LOGIC_K(NAME, EXPR, T)                                                              \
    static void logic_##NAME##_##T(int64_t n, uint8_t *restrict o, const void *a_, const void *b_, \
                                   uint64_t mask) {                                         \
        const T *restrict a = a_, *restrict b = b_;                                         \
        const T m = (T)mask;                                                                \
        (void)b;                                                                            \
        for (int64_t i = 0; i < n; i++) {                                                   \
            uint8_t x = (a[i] & m) != 0;                                                    \
            o[i] = (uint8_t)(EXPR);                                                         \
        }                                                                                   \
    }
#define LOGIC_SIZES(NAME, EXPR) \
    LOGIC_K(NAME, EXPR, uint8_t) LOGIC_K(NAME, EXPR, uint16_t) LOGIC_K(NAME, EXPR, uint32_t) LOGIC_K(NAME, EXPR, uint64_t)
LOGIC_SIZES(and, x & ((b[i] & m) != 0))
LOGIC_SIZES(or, x | ((b[i] & m) != 0))
LOGIC_SIZES(xor, x ^ ((b[i] & m) != 0))
LOGIC_SIZES(not, x ^ 1)
#define LOGIC_TAB_ROW(NAME) {logic_##NAME##_uint8_t, logic_##NAME##_uint16_t, logic_##NAME##_uint32_t, logic_##NAME##_uint64_t}
#define NB_LOGIC_TABLE {LOGIC_TAB_ROW(and), LOGIC_TAB_ROW(or), LOGIC_TAB_ROW(xor), LOGIC_TAB_ROW(not)}
