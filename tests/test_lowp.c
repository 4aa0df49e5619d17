/*
 * test_lowp.c — the low-precision formats and ops (O10) beyond what the op goldens
 * (tests/golden/o10_lowp.nbg) and the table walks check: the codecs bit for bit against
 * ml_dtypes over every code point and float32 values around each of them
 * (tests/golden/lowp/codec.nbg), the packing of 6- and 4-bit codes, round trips within each
 * format's precision, scaled_matmul at GEMM sizes against float64 of the dequantized operands
 * (edge tiles, the thin-C path, thread counts), graphs and vmap, and the typed errors.
 */
#include "golden_reader.h"
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nb_scaled_format ALL[] = {NB_FMT_F8E4M3FN, NB_FMT_F8E5M2, NB_FMT_F8E4M3FNUZ, NB_FMT_F8E5M2FNUZ,
                                       NB_FMT_F6E2M3,   NB_FMT_F6E3M2, NB_FMT_F4E2M1};

static void load_codec(nbg_file *f) {
    const char *dir = getenv("NB_GOLDEN_DIR");
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/lowp/codec.nbg", dir ? dir : NB_GOLDEN_DEFAULT_DIR);
    if (nbg_load(path, f, err, sizeof err) != 0) fail_msg("%s: %s", path, err);
}

static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; } /* NaNs: sign and payload too */

/* Every case of the codec golden: encode (ml_dtypes' astype) and decode, bit for bit. */
static void codec_matches_ml_dtypes(void **state) {
    (void)state;
    nbg_file f;
    load_codec(&f);
    int encoded = 0, decoded = 0;
    for (int c = 0; c < f.ncases; c++) {
        const nbg_case *k = &f.cases[c];
        nb_scaled_format fmt = (nb_scaled_format)nbg_at(nbg_find(k, "p.format"), 0);
        const nbg_tensor *want = nbg_find(k, "out.0");
        if (!strncmp(k->name, "encode/", 7)) {
            const nbg_tensor *x = nbg_find(k, "in.x");
            assert_true(x && x->dtype == NB_F32 && want->dtype == NB_U8);
            uint8_t *got = malloc((size_t)x->numel);
            assert_int_equal(nb_scaled_encode(fmt, x->data, x->numel, got), NB_OK);
            for (int64_t i = 0; i < x->numel; i++)
                if (got[i] != ((uint8_t *)want->data)[i])
                    fail_msg("%s: encode(%a) = 0x%02x, ml_dtypes 0x%02x", k->name, (double)((float *)x->data)[i],
                             got[i], ((uint8_t *)want->data)[i]);
            encoded += (int)x->numel;
            free(got);
        } else {
            const nbg_tensor *codes = nbg_find(k, "in.codes");
            assert_int_equal(codes->numel, 1 << nb_scaled_format_bits(fmt)); /* every code point */
            float got[256];
            assert_int_equal(nb_scaled_decode(fmt, codes->data, codes->numel, got), NB_OK);
            for (int64_t i = 0; i < codes->numel; i++)
                if (!same_bits(got[i], ((float *)want->data)[i]))
                    fail_msg("%s: decode(0x%02x) = %a, ml_dtypes %a", k->name, ((uint8_t *)codes->data)[i],
                             (double)got[i], (double)((float *)want->data)[i]);
            decoded++;
        }
    }
    assert_int_equal(decoded, 7);
    assert_true(encoded > 7 * 2000);
    nbg_free(&f);
}

/* Names, widths and ranges, and the scalar API's errors. */
static void format_facts(void **state) {
    (void)state;
    const double max[] = {448, 57344, 240, 57344, 7.5, 28, 6};
    const int bits[] = {8, 8, 8, 8, 6, 6, 4};
    for (int i = 0; i < 7; i++) {
        assert_int_equal(nb_scaled_format_bits(ALL[i]), bits[i]);
        assert_true(nb_scaled_format_max(ALL[i]) == max[i]);
    }
    assert_string_equal(nb_scaled_format_name(NB_FMT_F4E2M1), "float4_e2m1fn");
    assert_string_equal(nb_scaled_format_name(NB_SCALED_FORMAT_COUNT), "invalid");
    assert_int_equal(nb_scaled_format_bits((nb_scaled_format)-1), 0);
    uint8_t c = 0;
    float v = 1;
    assert_int_equal(nb_scaled_encode(NB_SCALED_FORMAT_COUNT, &v, 1, &c), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "unknown format");
    assert_int_equal(nb_scaled_encode(NB_FMT_F8E5M2, NULL, 1, &c), NB_ERR_NULL);
    nbt_expect_error(NB_ERR_NULL, "scaled_encode");
    assert_int_equal(nb_scaled_decode(NB_FMT_F8E5M2, &c, -1, &v), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "negative count");
    c = 0x10;
    assert_int_equal(nb_scaled_decode(NB_FMT_F4E2M1, &c, 1, &v), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "more than the 4 bits");
    assert_int_equal(nb_scaled_encode(NB_FMT_F8E5M2, NULL, 0, NULL), NB_OK); /* nothing to do */
}

/* Hand-packed bytes decode in the documented order: FP4 even element in the low nibble, FP6 code
 * j of a group in bits 6j..6j+5 of the little-endian 24-bit word. */
static void packing_order(void **state) {
    (void)state;
    /* fp4 codes 1 (0.5), 2 (1.0), 15 (-6), 8 (-0) */
    nb_tensor *c4 = NBT(nb_from_data((uint8_t[]){0x21, 0x8f}, (int64_t[]){2}, 1, NB_U8));
    nb_quantized q4 = {c4, NBT(nb_scalar(1.0, NB_F32)), NULL, NB_FMT_F4E2M1, NB_SCALE_TENSOR};
    nb_tensor *v4 = NBT(nb_dequantize(&q4, NB_F32));
    const double w4[] = {0.5, 1.0, -6.0, -0.0};
    for (int i = 0; i < 4; i++) {
        assert_true(nbt_at(v4, i) == w4[i]);
        assert_int_equal(signbit(nbt_at(v4, i)) != 0, signbit(w4[i]) != 0);
    }
    /* fp6 e2m3 codes 0x08 (1.0), 0x1f (7.5), 0x21 (-0.125), 0x3f (-7.5): w = 0x08 | 0x1f<<6 | 0x21<<12 | 0x3f<<18 */
    uint32_t w = 0x08u | 0x1fu << 6 | 0x21u << 12 | 0x3fu << 18;
    uint8_t b6[3] = {(uint8_t)w, (uint8_t)(w >> 8), (uint8_t)(w >> 16)};
    nb_quantized q6 = {NBT(nb_from_data(b6, (int64_t[]){3}, 1, NB_U8)), NBT(nb_scalar(2.0, NB_F32)), NULL,
                       NB_FMT_F6E2M3, NB_SCALE_TENSOR};
    nb_tensor *v6 = NBT(nb_dequantize(&q6, NB_F64));
    const double w6[] = {2.0, 15.0, -0.25, -15.0};
    for (int i = 0; i < 4; i++) assert_true(nbt_at(v6, i) == w6[i]);
    assert_int_equal(nb_dtype_of(v6), NB_F64);
    /* and quantize packs the same way */
    nb_quantized back;
    assert_int_equal(nb_quantize(v6, NB_FMT_F6E2M3, NB_SCALE_TENSOR, &back), NB_OK);
    assert_int_equal(nb_shape(back.codes)[0], 3);
    assert_true(nbt_at(back.scales, 0) == 2.0); /* amax 15 / max 7.5 */
    for (int i = 0; i < 3; i++) assert_int_equal((int)nbt_at(back.codes, i), b6[i]);
}

/* x [rows, k] with magnitudes spread over 2^-spread .. 2^spread by block of 16 (fixed seed). */
static nb_tensor *spread(int64_t rows, int64_t k, double spread_bits, uint32_t seed) {
    float *v = malloc(sizeof(float) * (size_t)(rows * k));
    uint32_t s = seed;
    double mag = 1;
    for (int64_t i = 0; i < rows * k; i++) {
        s = s * 1664525u + 1013904223u;
        if (i % 16 == 0) mag = exp2(((double)(s >> 8) / 16777216.0 * 2 - 1) * spread_bits);
        s = s * 1664525u + 1013904223u;
        v[i] = (float)(((double)(s >> 8) / 16777216.0 * 2 - 1) * mag);
    }
    nb_tensor *t = nb_from_data(v, (int64_t[]){rows, k}, 2, NB_F32);
    free(v);
    return NBT(t);
}

/* dequantize(quantize(x)) within half a step of the format: relative 2^-(mbits+1) of the scaled
 * value, or half the subnormal step of the block's scale. */
static void round_trip_within_precision(void **state) {
    (void)state;
    const int mbits[] = {3, 2, 3, 2, 3, 2, 1}, emin[] = {-6, -14, -7, -15, 0, -2, 0}, emax[] = {8, 15, 7, 15, 2, 4, 2};
    const nb_scale_layout layouts[] = {NB_SCALE_TENSOR, NB_SCALE_MX, NB_SCALE_NVFP4};
    nb_tensor *x = spread(6, 64, 6, 7);
    for (int f = 0; f < 7; f++)
        for (int l = 0; l < 3; l++) {
            nb_scale_layout lay = layouts[l];
            if ((lay == NB_SCALE_MX && (ALL[f] == NB_FMT_F8E4M3FNUZ || ALL[f] == NB_FMT_F8E5M2FNUZ)) ||
                (lay == NB_SCALE_NVFP4 && ALL[f] != NB_FMT_F4E2M1))
                continue;
            nb_quantized q;
            assert_int_equal(nb_quantize(x, ALL[f], lay, &q), NB_OK);
            nb_tensor *y = NBT(nb_dequantize(&q, NB_F32));
            /* bounded by the block's amax: |y - x| <= max(|x| 2^-(m+1), scale 2^(emin-m-1)) */
            int64_t blk = lay == NB_SCALE_MX ? 32 : lay == NB_SCALE_NVFP4 ? 16 : 6 * 64;
            double top = nb_scaled_format_max(ALL[f]);
            for (int64_t b0 = 0; b0 < 6 * 64; b0 += blk) {
                double amax = 0;
                for (int64_t i = b0; i < b0 + blk; i++) amax = fmax(amax, fabs(nbt_at(x, i)));
                /* the block's scale is at most 2 amax / max (MX rounds the exponent down; NVFP4's
                 * E4M3 scale rounds by 2^-4) */
                double scale = 2 * amax / top * (lay == NB_SCALE_NVFP4 ? 1.0625 : 1);
                for (int64_t i = b0; i < b0 + blk; i++) {
                    double xi = nbt_at(x, i), err = fabs(nbt_at(y, i) - xi);
                    double bound = fmax(fabs(xi) * exp2(-(mbits[f] + 1)), scale * exp2(emin[f] - mbits[f] - 1));
                    if (lay == NB_SCALE_NVFP4) bound *= 1.07; /* the scale's own rounding */
                    if (lay == NB_SCALE_MX) /* the OCP rule's scale 2^(floor(log2 amax) - emax) clamps the
                                             * block's largest values to max · scale */
                        bound = fmax(bound, fabs(xi) - top * exp2(floor(log2(amax)) - emax[f]));
                    if (err > bound * (1 + 1e-6))
                        fail_msg("%s layout %d: element %lld: x %g -> %g, error %g > %g", nb_scaled_format_name(ALL[f]),
                                 (int)lay, (long long)i, xi, nbt_at(y, i), err, bound);
                }
            }
        }
}

/* C = A Bᵀ against float64 of the dequantized operands, at sizes with ragged tiles, the thin-C path
 * (N small) and a batch, on 1 and 2 threads (bitwise equal), and on the reference backend. */
static void scaled_matmul_matches_float64(void **state) {
    (void)state;
    const struct { int64_t m, n, k; nb_scaled_format fa, fb; nb_scale_layout lay; } C[] = {
        {70, 45, 256, NB_FMT_F8E4M3FN, NB_FMT_F8E5M2, NB_SCALE_MX},
        {300, 3, 64, NB_FMT_F4E2M1, NB_FMT_F4E2M1, NB_SCALE_NVFP4},  /* thin C: computed transposed */
        {33, 129, 96, NB_FMT_F6E3M2, NB_FMT_F6E2M3, NB_SCALE_MX},
        {17, 40, 520, NB_FMT_F8E4M3FNUZ, NB_FMT_F8E5M2FNUZ, NB_SCALE_TENSOR}, /* K over one block of 512 */
        {9, 600, 32, NB_FMT_F4E2M1, NB_FMT_F4E2M1, NB_SCALE_MX},
    };
    int threads = nb_get_num_threads();
    for (size_t c = 0; c < sizeof C / sizeof C[0]; c++) {
        nb_quantized a, b;
        assert_int_equal(nb_quantize(spread(C[c].m, C[c].k, 3, 11 + (uint32_t)c), C[c].fa, C[c].lay, &a), NB_OK);
        assert_int_equal(nb_quantize(spread(C[c].n, C[c].k, 3, 23 + (uint32_t)c), C[c].fb, C[c].lay, &b), NB_OK);
        nb_tensor *want = NBT(nb_cast(nb_matmul(NBT(nb_dequantize(&a, NB_F64)),
                                                nb_transpose(NBT(nb_dequantize(&b, NB_F64)), 0, 1)), NB_F32));
        nb_set_num_threads(1);
        nb_tensor *one = NBT(nb_scaled_matmul(&a, &b, NB_F32));
        nb_set_num_threads(2);
        nb_tensor *two = NBT(nb_scaled_matmul(&a, &b, NB_F32));
        nb_set_num_threads(threads);
        assert_close(one, want, 1e-5, 1e-5 * sqrt((double)C[c].k));
        assert_int_equal(memcmp(nb_data_ptr(one), nb_data_ptr(two), sizeof(float) * (size_t)(C[c].m * C[c].n)), 0);
        /* the reference backend, from the same codes */
        nb_quantized ar = {NBT(nb_to_device(a.codes, NB_REF)), NBT(nb_to_device(a.scales, NB_REF)),
                           a.global_scale ? NBT(nb_to_device(a.global_scale, NB_REF)) : NULL, a.format, a.layout};
        nb_quantized br = {NBT(nb_to_device(b.codes, NB_REF)), NBT(nb_to_device(b.scales, NB_REF)),
                           b.global_scale ? NBT(nb_to_device(b.global_scale, NB_REF)) : NULL, b.format, b.layout};
        assert_close(NBT(nb_to_device(NBT(nb_scaled_matmul(&ar, &br, NB_F32)), NB_CPU)), want, 1e-6, 1e-6);
        /* another result dtype: the f32 result rounded */
        assert_close(NBT(nb_scaled_matmul(&a, &b, NB_BF16)), nb_cast(one, NB_BF16), 0, 0);
    }
}

/* Traced with a symbolic batch, compiled and run: the same codes, scales and values as eager. */
static void traced_and_compiled(void **state) {
    (void)state;
    nb_tensor *x = spread(5, 64, 4, 3), *w = spread(8, 64, 2, 4);
    nb_quantized qw;
    assert_int_equal(nb_quantize(w, NB_FMT_F8E4M3FN, NB_SCALE_MX, &qw), NB_OK);
    nb_graph *g = nb_graph_begin("fp8_linear");
    nb_tensor *xs = nb_graph_input(g, "x", NB_F32, (int64_t[]){nb_dim("B"), 64}, 2);
    nb_quantized qx;
    assert_int_equal(nb_quantize(xs, NB_FMT_F8E4M3FN, NB_SCALE_MX, &qx), NB_OK);
    nb_graph_output(g, "y", nb_scaled_matmul(&qx, &qw, NB_F32));
    nb_graph_output(g, "codes", qx.codes);
    nb_graph_output(g, "back", nb_dequantize(&qx, NB_F32));
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *cp = nb_graph_compile(g, NB_CPU);
    assert_non_null(cp);
    nb_tensor *outs[3] = {NULL, NULL, NULL};
    assert_int_equal(nb_compiled_run(cp, 1, (const char *[]){"x"}, &x, 3, outs), NB_OK);
    nb_quantized qe;
    assert_int_equal(nb_quantize(x, NB_FMT_F8E4M3FN, NB_SCALE_MX, &qe), NB_OK);
    assert_close(outs[0], NBT(nb_scaled_matmul(&qe, &qw, NB_F32)), 0, 0);
    assert_close(outs[1], qe.codes, 0, 0);
    assert_close(outs[2], NBT(nb_dequantize(&qe, NB_F32)), 0, 0);
    nb_compiled_release(cp);
    nb_graph_release(g);
}

/* vmap runs the ops once per example: a per-tensor scale is each example's own. */
static void vmap_per_example_scales(void **state) {
    (void)state;
    nb_graph *f = nb_graph_begin("fake_quant");
    nb_tensor *xs = nb_graph_input(f, "x", NB_F32, (int64_t[]){32}, 1);
    nb_quantized q;
    assert_int_equal(nb_quantize(xs, NB_FMT_F8E5M2, NB_SCALE_TENSOR, &q), NB_OK);
    nb_graph_output(f, "y", nb_dequantize(&q, NB_F32));
    assert_int_equal(nb_graph_end(f), NB_OK);
    nb_graph *vf = nb_func_vmap(f, 1, (const char *[]){"x"}, (int[]){1}, 3, NULL);
    assert_non_null(vf);
    nb_tensor *x = spread(32, 3, 8, 9); /* the batch along axis 1 */
    nb_compiled *cp = nb_graph_compile(vf, NB_CPU);
    assert_non_null(cp);
    nb_tensor *y = NULL;
    assert_int_equal(nb_compiled_run(cp, 1, (const char *[]){"x"}, &x, 1, &y), NB_OK);
    for (int64_t b = 0; b < 3; b++) {
        nb_quantized qb;
        assert_int_equal(nb_quantize(NBT(nb_select(x, 1, b)), NB_FMT_F8E5M2, NB_SCALE_TENSOR, &qb), NB_OK);
        assert_close(NBT(nb_select(y, 0, b)), NBT(nb_dequantize(&qb, NB_F32)), 0, 0);
    }
    nb_compiled_release(cp);
    /* a symbolic batch cannot run once per example */
    assert_null(nb_func_vmap(f, 1, (const char *[]){"x"}, (int[]){0}, nb_dim("N"), NULL));
    nbt_expect_error(NB_ERR_SHAPE, "quantize runs once per example");
    nb_graph_release(vf);
    nb_graph_release(f);
}

/* Edge cases: empty tensors (no amax: the least scale), a batch of 0 through vmap's per-example
 * fallback, and scales that carry no gradient when x does. */
static void empty_and_untracked(void **state) {
    (void)state;
    const nb_scale_layout lays[] = {NB_SCALE_TENSOR, NB_SCALE_MX, NB_SCALE_NVFP4};
    for (int l = 0; l < 3; l++) {
        nb_quantized q;
        assert_int_equal(nb_quantize(NBT(nb_zeros((int64_t[]){0, 32}, 2, NB_F32)), NB_FMT_F4E2M1, lays[l], &q), NB_OK);
        assert_int_equal(nb_shape(q.codes)[0], 0);
        assert_int_equal(nb_shape(q.codes)[1], 16);
        if (lays[l] != NB_SCALE_MX) assert_true(nbt_at(lays[l] == NB_SCALE_TENSOR ? q.scales : q.global_scale, 0) == 0x1p-126);
        nb_tensor *y = NBT(nb_dequantize(&q, NB_F32));
        assert_int_equal(nb_numel(y), 0);
    }
    nb_graph *f = nb_graph_begin("q0");
    nb_tensor *xs = nb_graph_input(f, "x", NB_F32, (int64_t[]){3, 32}, 2);
    nb_quantized qs;
    assert_int_equal(nb_quantize(xs, NB_FMT_F8E4M3FN, NB_SCALE_MX, &qs), NB_OK);
    nb_graph_output(f, "y", nb_dequantize(&qs, NB_F32));
    assert_int_equal(nb_graph_end(f), NB_OK);
    nb_graph *vf = nb_func_vmap(f, 1, (const char *[]){"x"}, (int[]){0}, 0, NULL);
    assert_non_null(vf);
    nb_compiled *cp = nb_graph_compile(vf, NB_CPU);
    assert_non_null(cp);
    nb_tensor *x0 = NBT(nb_zeros((int64_t[]){0, 3, 32}, 3, NB_F32)), *y0 = NULL;
    assert_int_equal(nb_compiled_run(cp, 1, (const char *[]){"x"}, &x0, 1, &y0), NB_OK);
    assert_int_equal(nb_shape(y0)[0], 0);
    assert_int_equal(nb_shape(y0)[2], 32);
    nb_compiled_release(cp);
    nb_graph_release(vf);
    nb_graph_release(f);
    nb_tensor *x = spread(2, 32, 1, 5);
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    nb_quantized t, nv;
    assert_int_equal(nb_quantize(x, NB_FMT_F8E4M3FN, NB_SCALE_TENSOR, &t), NB_OK);
    assert_int_equal(nb_quantize(x, NB_FMT_F4E2M1, NB_SCALE_NVFP4, &nv), NB_OK);
    assert_false(nb_requires_grad(t.scales));
    assert_false(nb_requires_grad(nv.global_scale));
}

/* Typed errors naming the op and what is at fault; nothing changes. */
static void errors_are_typed(void **state) {
    (void)state;
    nb_tensor *x = spread(2, 64, 1, 1);
    nb_quantized q, ok;
    assert_int_equal(nb_quantize(x, NB_FMT_F8E4M3FNUZ, NB_SCALE_MX, &q), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "MX scales take the OCP formats, not float8_e4m3fnuz");
    assert_null(q.codes); /* zeroed */
    assert_int_equal(nb_quantize(x, NB_FMT_F8E4M3FN, NB_SCALE_NVFP4, &q), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "NVFP4 scales take float4_e2m1fn");
    assert_int_equal(nb_quantize(x, (nb_scaled_format)42, NB_SCALE_TENSOR, &q), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "unknown format 42");
    assert_int_equal(nb_quantize(x, NB_FMT_F4E2M1, (nb_scale_layout)9, &q), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "unknown scale layout 9");
    assert_int_equal(nb_quantize(NBT(nb_narrow(x, 1, 0, 48)), NB_FMT_F8E5M2, NB_SCALE_MX, &q), NB_ERR_SHAPE);
    nbt_expect_error(NB_ERR_SHAPE, "multiple of 32");
    assert_int_equal(nb_quantize(NBT(nb_narrow(x, 1, 0, 6)), NB_FMT_F6E2M3, NB_SCALE_TENSOR, &q), NB_ERR_SHAPE);
    nbt_expect_error(NB_ERR_SHAPE, "multiple of 4");
    assert_int_equal(nb_quantize(NBT(nb_ones((int64_t[]){4}, 1, NB_I32)), NB_FMT_F8E5M2, NB_SCALE_TENSOR, &q),
                     NB_ERR_DTYPE);
    nbt_expect_error(NB_ERR_DTYPE, "x must be float, got int32");
    assert_int_equal(nb_quantize(NBT(nb_scalar(1, NB_F32)), NB_FMT_F8E5M2, NB_SCALE_TENSOR, &q), NB_ERR_SHAPE);
    nbt_expect_error(NB_ERR_SHAPE, "scalar");
    assert_int_equal(nb_quantize(NULL, NB_FMT_F8E5M2, NB_SCALE_TENSOR, &q), NB_ERR_NULL);
    nbt_expect_error(NB_ERR_NULL, "quantize");
    assert_int_equal(nb_quantize(x, NB_FMT_F8E5M2, NB_SCALE_TENSOR, NULL), NB_ERR_NULL);
    nbt_expect_error(NB_ERR_NULL, "out");

    assert_int_equal(nb_quantize(x, NB_FMT_F4E2M1, NB_SCALE_MX, &ok), NB_OK);
    nb_quantized bad = ok;
    bad.scales = NBT(nb_narrow(ok.scales, 1, 0, 1));
    assert_null(nb_dequantize(&bad, NB_F32));
    nbt_expect_error(NB_ERR_SHAPE, "scales [2, 1] do not fit codes [2, 32] (want [2, 2])");
    bad = ok;
    bad.scales = NBT(nb_cast(ok.scales, NB_F32));
    assert_null(nb_dequantize(&bad, NB_F32));
    nbt_expect_error(NB_ERR_DTYPE, "scales must be uint8");
    bad = ok;
    bad.codes = NBT(nb_cast(ok.codes, NB_I32));
    assert_null(nb_dequantize(&bad, NB_F32));
    nbt_expect_error(NB_ERR_DTYPE, "codes must be uint8, got int32");
    assert_null(nb_dequantize(&ok, NB_I64));
    nbt_expect_error(NB_ERR_DTYPE, "result dtype must be float, got int64");
    bad = ok;
    bad.codes = NULL;
    assert_null(nb_dequantize(&bad, NB_F32));
    nbt_expect_error(NB_ERR_NULL, "q codes is NULL");

    nb_quantized t, nv, w3;
    assert_int_equal(nb_quantize(x, NB_FMT_F4E2M1, NB_SCALE_TENSOR, &t), NB_OK);
    assert_int_equal(nb_quantize(x, NB_FMT_F4E2M1, NB_SCALE_NVFP4, &nv), NB_OK);
    assert_null(nb_scaled_matmul(&ok, &t, NB_F32));
    nbt_expect_error(NB_ERR_ARG, "share a scale layout");
    bad = nv;
    bad.global_scale = NULL;
    assert_null(nb_scaled_matmul(&nv, &bad, NB_F32));
    nbt_expect_error(NB_ERR_NULL, "b global scale is NULL");
    assert_int_equal(nb_quantize(NBT(nb_reshape(x, (int64_t[]){2, 1, 64}, 3)), NB_FMT_F4E2M1, NB_SCALE_MX, &w3), NB_OK);
    assert_null(nb_scaled_matmul(&ok, &w3, NB_F32));
    nbt_expect_error(NB_ERR_SHAPE, "b's [N, K'], got [2, 32] and [2, 1, 32]");
    nb_quantized narrow;
    assert_int_equal(nb_quantize(NBT(nb_narrow(x, 1, 0, 32)), NB_FMT_F4E2M1, NB_SCALE_MX, &narrow), NB_OK);
    assert_null(nb_scaled_matmul(&ok, &narrow, NB_F32));
    nbt_expect_error(NB_ERR_SHAPE, "one K, got K = 64");
    assert_null(nb_scaled_matmul(&ok, &ok, NB_U8));
    nbt_expect_error(NB_ERR_DTYPE, "result dtype must be float");
    bad = t;
    bad.scales = NBT(nb_cast(t.scales, NB_F64));
    assert_null(nb_dequantize(&bad, NB_F32));
    nbt_expect_error(NB_ERR_DTYPE, "must be a float32 scalar [], got float64");
    bad = t;
    bad.global_scale = t.scales;
    assert_null(nb_dequantize(&bad, NB_F32));
    nbt_expect_error(NB_ERR_ARG, "only NVFP4 scales take");
    /* a symbolic K */
    nb_graph *g = nb_graph_begin("symbolic_k");
    nb_quantized qs;
    nb_tensor *xs = nb_graph_input(g, "x", NB_F32, (int64_t[]){2, nb_dim("K")}, 2);
    assert_int_equal(nb_quantize(xs, NB_FMT_F8E5M2, NB_SCALE_TENSOR, &qs), NB_ERR_SHAPE);
    nbt_expect_error(NB_ERR_SHAPE, "the last dim of x must be concrete");
    nb_graph_output(g, "x", xs);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_graph_release(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(codec_matches_ml_dtypes, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(format_facts, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(packing_order, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(round_trip_within_precision, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(scaled_matmul_matches_float64, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(traced_and_compiled, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(vmap_per_example_scales, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(empty_and_untracked, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(errors_are_typed, nbt_setup, nbt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
