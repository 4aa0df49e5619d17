"""lowp_oracle.py — the low-precision formats (O10) in NumPy and ml_dtypes: the oracle
gen_golden.py writes the quantize / dequantize / scaled_matmul goldens and the codec
goldens with.  Codes come from ml_dtypes' astype (round to nearest even); the MX scale
follows the OCP Microscaling spec v1.0 (section 6.3); NVFP4's follows NVIDIA's recipe
(a global scale amax / (448 * 6), per 16 elements an E4M3 scale of amax_block / 6 relative
to it).  Every step is done in float32 as include/nabla.h states, so the results are exact.
"""
import ml_dtypes
import numpy as np

# nabla's nb_scaled_format order: (ml_dtypes type, bits, emax of the largest normal)
FORMATS = [
    ("float8_e4m3fn", 8, 8), ("float8_e5m2", 8, 15), ("float8_e4m3fnuz", 8, 7), ("float8_e5m2fnuz", 8, 15),
    ("float6_e2m3fn", 6, 2), ("float6_e3m2fn", 6, 4), ("float4_e2m1fn", 4, 2),
]
TENSOR, MX, NVFP4 = 0, 1, 2  # nb_scale_layout
BLOCK = {MX: 32, NVFP4: 16}
F32 = np.float32


def dtype_of(fmt):
    return getattr(ml_dtypes, FORMATS[fmt][0])


def bits_of(fmt):
    return FORMATS[fmt][1]


def fmax(fmt):
    return F32(ml_dtypes.finfo(dtype_of(fmt)).max)


def encode(x, fmt):
    """ml_dtypes' codes of float32 x (one a byte)."""
    return np.asarray(x, F32).astype(dtype_of(fmt)).view(np.uint8)


def encode_sat(x, fmt):
    """Codes with finite values beyond the range saturated to +-max (NaN kept)."""
    x = np.asarray(x, F32)
    m = fmax(fmt)
    return encode(np.where(np.isnan(x), x, np.clip(x, -m, m)), fmt)


def decode(codes, fmt):
    return np.asarray(codes, np.uint8).view(dtype_of(fmt)).astype(F32)


def pack(codes, bits):
    """Codes [..., K] packed along the last axis as nabla stores them."""
    codes = np.asarray(codes, np.uint8)
    if bits == 8:
        return codes
    lead = codes.shape[:-1]
    if bits == 4:
        c = codes.reshape(*lead, -1, 2)
        return (c[..., 0] | (c[..., 1] << 4)).astype(np.uint8)
    c = codes.reshape(*lead, -1, 4).astype(np.uint32)
    w = c[..., 0] | c[..., 1] << 6 | c[..., 2] << 12 | c[..., 3] << 18
    return np.stack([w & 255, (w >> 8) & 255, (w >> 16) & 255], -1).reshape(*lead, -1).astype(np.uint8)


def unpack(packed, bits):
    packed = np.asarray(packed, np.uint8)
    if bits == 8:
        return packed
    lead = packed.shape[:-1]
    if bits == 4:
        return np.stack([packed & 15, packed >> 4], -1).reshape(*lead, -1)
    b = packed.reshape(*lead, -1, 3).astype(np.uint32)
    w = b[..., 0] | b[..., 1] << 8 | b[..., 2] << 16
    return np.stack([(w >> (6 * j)) & 63 for j in range(4)], -1).reshape(*lead, -1).astype(np.uint8)


def e8m0_decode(c):
    c = np.asarray(c, np.uint8)
    v = np.ldexp(np.ones(c.shape, np.float64), c.astype(np.int64) - 127).astype(F32)
    return np.where(c == 255, F32(np.nan), v)


def block_amax(xb):
    """Largest |x| per block (last axis); NaN where a block holds NaN or +-inf."""
    a = np.abs(xb)
    bad = ~np.isfinite(a).all(-1)
    return np.where(bad, F32(np.nan), np.max(np.where(np.isfinite(a), a, 0), -1)).astype(F32)


def quantize(x, fmt, layout):
    """(packed codes, scales, global scale or None) of float32 x [..., K]."""
    x = np.asarray(x, F32)
    bits = bits_of(fmt)
    if layout == TENSOR:
        s = np.maximum(F32(np.max(np.abs(x))) / fmax(fmt), F32(2.0**-126)).astype(F32)
        return pack(encode_sat(x / s, fmt), bits), np.asarray(s, F32), None
    xb = x.reshape(*x.shape[:-1], -1, BLOCK[layout])
    amax = block_amax(xb)
    g = None
    if layout == MX:
        e = np.frexp(np.where(amax > 0, amax, 1))[1] - 1 - FORMATS[fmt][2]
        e = np.clip(np.where(amax > 0, e, -127), -127, 127)
        sc = np.where(np.isnan(amax), 255, e + 127).astype(np.uint8)
        s = e8m0_decode(sc)
    else:
        g = np.maximum(F32(np.max(np.abs(x))) / F32(2688), F32(2.0**-126)).astype(F32)
        sb = (amax / (F32(6) * g)).astype(F32)
        sc = encode_sat(np.where(np.isnan(amax), F32(np.nan), sb), 0)
        s = (decode(sc, 0) * g).astype(F32)
    with np.errstate(invalid="ignore", divide="ignore"):  # NaN scales of non-finite blocks
        q = np.where(s[..., None] == 0, np.uint8(0), encode_sat(xb / s[..., None], fmt))
    return pack(q.reshape(x.shape), bits), sc, (None if g is None else np.asarray(g, F32))


def dequantize(codes, scales, g, fmt, layout):
    """float32 values of packed codes with their scales."""
    v = decode(unpack(codes, bits_of(fmt)), fmt)
    if layout == TENSOR:
        return (v * F32(scales)).astype(F32)
    s = e8m0_decode(scales) if layout == MX else (decode(scales, 0) * F32(g)).astype(F32)
    vb = v.reshape(*v.shape[:-1], -1, BLOCK[layout])
    return (vb * s[..., None]).astype(F32).reshape(v.shape)
