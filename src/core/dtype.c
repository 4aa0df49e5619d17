/*
 * dtype.c — dtype names and sizes, the promotion table, and element
 * conversion to and from double (including IEEE binary16 and bfloat16, with
 * round-to-nearest-even).
 */
#include "internal.h"

#include <math.h>
#include <string.h>

static const struct { const char *name; size_t size; } info[NB_DTYPE_COUNT] = {
    [NB_F32] = {"float32", 4}, [NB_F64] = {"float64", 8}, [NB_F16] = {"float16", 2},
    [NB_BF16] = {"bfloat16", 2}, [NB_I8] = {"int8", 1},   [NB_I32] = {"int32", 4},
    [NB_I64] = {"int64", 8},    [NB_U8] = {"uint8", 1},   [NB_BOOL] = {"bool", 1},
};

static bool valid(nb_dtype dt) { return dt >= 0 && dt < NB_DTYPE_COUNT; }
const char *nb_dtype_name(nb_dtype dt) { return valid(dt) ? info[dt].name : "invalid"; }
size_t nb_dtype_size(nb_dtype dt) { return valid(dt) ? info[dt].size : 0; }
bool nb_dtype_is_float(nb_dtype dt) {
    return dt == NB_F32 || dt == NB_F64 || dt == NB_F16 || dt == NB_BF16;
}

/* Category then width, following torch.promote_types. */
static int category(nb_dtype d) { return d == NB_BOOL ? 0 : nb_dtype_is_float(d) ? 2 : 1; }

nb_dtype nb_promote_types(nb_dtype a, nb_dtype b) {
    if (!valid(a) || !valid(b)) return NB_DTYPE_COUNT;
    if (a == b) return a;
    int ca = category(a), cb = category(b);
    if (ca != cb) return ca > cb ? a : b;
    if (ca == 2) {
        if ((a == NB_F16 && b == NB_BF16) || (a == NB_BF16 && b == NB_F16)) return NB_F32;
        static const int rank[NB_DTYPE_COUNT] = {[NB_F16] = 1, [NB_BF16] = 1, [NB_F32] = 2, [NB_F64] = 3};
        return rank[a] >= rank[b] ? a : b;
    }
    /* integers: u8 & i8 do not fit each other; nabla has no i16, so i32. */
    if ((a == NB_U8 && b == NB_I8) || (a == NB_I8 && b == NB_U8)) return NB_I32;
    static const int irank[NB_DTYPE_COUNT] = {[NB_I8] = 1, [NB_U8] = 1, [NB_I32] = 2, [NB_I64] = 3};
    return irank[a] >= irank[b] ? a : b;
}

float nb__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) bits = sign;
        else { /* subnormal: value = man * 2^-24 */
            float f = (float)man * 0x1p-24f;
            memcpy(&bits, &f, 4);
            bits |= sign;
        }
    } else if (exp == 31) bits = sign | 0x7f800000u | (man << 13);
    else bits = sign | ((exp + 112) << 23) | (man << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t nb__f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) {                                 /* below 2^-14: subnormal or 0 */
        float a;
        memcpy(&a, &ax, 4);
        return (uint16_t)(sign | (uint32_t)nearbyintf(a * 0x1p24f));
    }
    uint32_t mant = ax + 0xfffu + ((ax >> 13) & 1); /* round to nearest even on bit 13 */
    return (uint16_t)(sign | ((mant - 0x38000000u) >> 13));
}

float nb__bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t nb__f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

double nb__load(const void *p, nb_dtype dt) {
    switch (dt) {
    case NB_F32: return *(const float *)p;
    case NB_F64: return *(const double *)p;
    case NB_F16: return nb__f16_to_f32(*(const uint16_t *)p);
    case NB_BF16: return nb__bf16_to_f32(*(const uint16_t *)p);
    case NB_I8: return *(const int8_t *)p;
    case NB_I32: return *(const int32_t *)p;
    case NB_I64: return (double)*(const int64_t *)p;
    case NB_U8: return *(const uint8_t *)p;
    case NB_BOOL: return *(const uint8_t *)p != 0;
    default: NB_ASSERT(0 && "bad dtype");
    }
}

/* Float → integer conversion that is defined for every input: truncation
 * toward zero, NaN → 0, saturation at the type's range (C leaves these
 * undefined; PyTorch's result there is platform-specific). */
static int64_t to_i64(double v, int64_t lo, int64_t hi) {
    if (v != v) return 0;
    if (v <= (double)lo) return lo;
    if (v >= (double)hi) return hi; /* (double)INT64_MAX is 2^63: anything below converts */
    return (int64_t)v;
}

void nb__store(void *p, nb_dtype dt, double v) {
    switch (dt) {
    case NB_F32: *(float *)p = (float)v; break;
    case NB_F64: *(double *)p = v; break;
    case NB_F16: *(uint16_t *)p = nb__f32_to_f16((float)v); break;
    case NB_BF16: *(uint16_t *)p = nb__f32_to_bf16((float)v); break;
    case NB_I8: *(int8_t *)p = (int8_t)to_i64(v, INT8_MIN, INT8_MAX); break;
    case NB_I32: *(int32_t *)p = (int32_t)to_i64(v, INT32_MIN, INT32_MAX); break;
    case NB_I64: *(int64_t *)p = to_i64(v, INT64_MIN, INT64_MAX); break;
    case NB_U8: *(uint8_t *)p = (uint8_t)to_i64(v, 0, UINT8_MAX); break;
    case NB_BOOL: *(uint8_t *)p = (v != 0); break;
    default: NB_ASSERT(0 && "bad dtype");
    }
}

void nb__convert(void *dst, nb_dtype ddt, const void *src, nb_dtype sdt) {
    if (!nb_dtype_is_float(ddt) && !nb_dtype_is_float(sdt)) nb__store_i64(dst, ddt, nb__load_i64(src, sdt));
    else nb__store(dst, ddt, nb__load(src, sdt));
}

int64_t nb__load_i64(const void *p, nb_dtype dt) {
    switch (dt) {
    case NB_I8: return *(const int8_t *)p;
    case NB_I32: return *(const int32_t *)p;
    case NB_I64: return *(const int64_t *)p;
    case NB_U8: return *(const uint8_t *)p;
    case NB_BOOL: return *(const uint8_t *)p != 0;
    default: return to_i64(nb__load(p, dt), INT64_MIN, INT64_MAX);
    }
}

void nb__store_i64(void *p, nb_dtype dt, int64_t v) {
    uint64_t u = (uint64_t)v; /* conversions to narrower unsigned types wrap, by definition */
    switch (dt) {
    case NB_I8: *(uint8_t *)p = (uint8_t)u; break;
    case NB_I32: *(uint32_t *)p = (uint32_t)u; break;
    case NB_I64: *(uint64_t *)p = u; break;
    case NB_U8: *(uint8_t *)p = (uint8_t)u; break;
    case NB_BOOL: *(uint8_t *)p = v != 0; break;
    default: nb__store(p, dt, (double)v);
    }
}
