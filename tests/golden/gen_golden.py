#!/usr/bin/env python3
"""gen_golden.py — write the PyTorch golden files that tests/test_golden.c replays.

Run with a Python that has PyTorch 2.x and numpy from PyPI, or through CMake:
`cmake --build BUILD --target golden` creates a venv with them (see README.md).
The C test needs only the committed *.nbg files, never Python.

File format (little-endian; parsed by tests/golden_reader.c):

    file   := "NBG1" u32:ncases case*
    case   := str:name u32:ntensors tensor*
    tensor := str:name u32:dtype u32:ndim i64:shape[ndim] data
    str    := u32:len bytes
    data   := numel * itemsize bytes, row-major

dtype is nabla's nb_dtype value (F32=0, F64=1, I8=4, I32=5, I64=6, U8=7,
BOOL=8).  A case is named "KEY/variant"; KEY selects the C function in
test_golden.c's table.  Tensor names carry their role:

    in.NAME    an input (float inputs of gradient cases are differentiated)
    p.NAME     a parameter of the op (axes, reduction, slope, equation, ...)
    out.K      forward output K
    seed.K     upstream gradient for output K (fixed random values)
    grad.NAME  d(sum_K <out.K, seed.K>)/d(in.NAME), from torch.autograd.grad
    tol.atol   optional absolute tolerance of the float32 outputs, for long
               float32 sums whose rounding depends on the summation order

Gradient cases use float64 (the test compares to ~1e-10); float32 cases
check forward values (~1e-6 relative), including inf/NaN handling and
lengths that are not multiples of the SIMD width.

Every op of src/ops/ops.def with a torch counterpart has cases here (the C
test walks the op table and fails on an op without one, unless it is listed
there with the reason).  Signed zeros are compared bitwise in forward outputs:
each unary op runs on -0.0 and +0.0 in float32 and float64 ("KEY/zeros_*").

Two deliberate differences of nabla from torch are pinned with another oracle
(`expect`): sign(NaN) is NaN as np.sign (torch returns 0,
pytorch/pytorch#41245), and gelu's zero results (x = -0.0 or x <= -30) are
-0.0 in float32 as torch's own float64 kernel gives (its float32 kernel
returns +0.0).  Where torch's kernels disagree with each other on the sign of
a zero, nabla picks one rule for every dtype and the golden expects it:
maximum/minimum of -0.0 and +0.0 give a (torch: a in float32, b in float64).
"""
import argparse
import math
import os
import struct
import sys
import warnings
import zlib

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - depends on the machine
    sys.exit("gen_golden.py: needs torch 2.x and numpy (pip install -r tests/golden/requirements.txt in a venv)")
if int(torch.__version__.split(".")[0]) < 2:
    sys.exit(f"gen_golden.py: needs PyTorch 2.x (the header promises its semantics), found {torch.__version__}")

F32, F64 = torch.float32, torch.float64
I8, I32, I64, U8, BOOL = torch.int8, torch.int32, torch.int64, torch.uint8, torch.bool
DTYPE_CODE = {F32: 0, F64: 1, I8: 4, I32: 5, I64: 6, U8: 7, BOOL: 8}
INF, NAN = math.inf, math.nan
REDUCTION = {"mean": 0, "sum": 1, "none": 2}  # nb_reduction values
SUM_ATOL = 1e-5  # float32 sums of tens of terms (torch.testing's float32 atol): the order of additions differs

# Inputs that exercise inf/NaN, signed zero and both sides of common kinks.
SPECIAL = [-INF, -30.0, -3.7, -1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0, 2.5, 30.0, INF, NAN]


# ---------------------------------------------------------------------------
# writing


def enc_str(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def enc_tensor(name, t):
    t = t.detach().contiguous()
    if t.dtype not in DTYPE_CODE:
        raise ValueError(f"{name}: dtype {t.dtype} has no nabla code")
    head = enc_str(name) + struct.pack("<II", DTYPE_CODE[t.dtype], t.dim())
    head += struct.pack(f"<{t.dim()}q", *t.shape)
    return head + t.numpy().astype(t.numpy().dtype.newbyteorder("<")).tobytes()


def param_tensor(v):
    """A parameter as a tensor: bool, int -> i64, float -> f64, list of ints, str -> u8 bytes."""
    if isinstance(v, bool):
        return torch.tensor(v)
    if isinstance(v, int):
        return torch.tensor(v, dtype=I64)
    if isinstance(v, float):
        return torch.tensor(v, dtype=F64)
    if isinstance(v, str):
        return torch.tensor(list(v.encode()), dtype=U8)
    if isinstance(v, (list, tuple)) and all(isinstance(e, int) for e in v):
        return torch.tensor(list(v), dtype=I64)
    raise ValueError(f"unsupported parameter {v!r}")


class Golden:
    def __init__(self):
        self.groups = {}  # file stem -> list of encoded cases
        self.names = set()
        self.group = None
        self.rng = None

    def begin(self, group):
        self.group = group
        self.groups[group] = []

    def seed(self, name):
        """Reseed per case so adding a case does not change the others' values."""
        self.rng = np.random.default_rng(zlib.crc32(name.encode()))

    # random inputs (numpy's generator, then converted)
    def randn(self, *shape, dtype=F64, scale=1.0):
        return torch.from_numpy(self.rng.standard_normal(shape) * scale).to(dtype)

    def uniform(self, lo, hi, *shape, dtype=F64):
        return torch.from_numpy(self.rng.uniform(lo, hi, shape)).to(dtype)

    def randint(self, lo, hi, *shape, dtype=I64):
        return torch.from_numpy(self.rng.integers(lo, hi, shape)).to(dtype)

    def case(self, name, fn, inputs, params=None, grad=True, expect=None, atol=None):
        """Record one case: fn(*inputs.values(), **params) gives the output(s).

        With grad, float inputs are differentiated through torch.autograd.grad
        with a random seed per float output.  `expect`, when given, replaces
        the forward outputs (used only for the documented sign(NaN) deviation).
        `atol` loosens the absolute tolerance of float32 outputs (long sums).
        """
        if name in self.names:
            raise ValueError(f"duplicate case {name}")
        self.names.add(name)
        params = params or {}
        ins = {k: v.detach().clone() for k, v in inputs.items()}
        wrt = [k for k, v in ins.items() if grad and v.is_floating_point()]
        for k in wrt:
            ins[k].requires_grad_(True)
        res = fn(*ins.values(), **params)
        outs = list(res) if isinstance(res, (tuple, list)) else [res]
        tensors = [("in." + k, v) for k, v in inputs.items()]
        tensors += [("p." + k, param_tensor(v)) for k, v in params.items()]
        shown = expect if expect is not None else outs
        tensors += [(f"out.{i}", o) for i, o in enumerate(shown)]
        if atol is not None:
            tensors.append(("tol.atol", torch.tensor(atol, dtype=F64)))
        diff = [o for o in outs if o.requires_grad]
        if wrt and diff:
            if len(diff) != len(outs):
                raise ValueError(f"{name}: mixed differentiable and non-differentiable outputs")
            seeds = [torch.from_numpy(self.rng.standard_normal(tuple(o.shape))).to(o.dtype) for o in outs]
            grads = torch.autograd.grad(outs, [ins[k] for k in wrt], seeds, allow_unused=True)
            tensors += [(f"seed.{i}", s) for i, s in enumerate(seeds)]
            for k, g in zip(wrt, grads):
                tensors.append(("grad." + k, g if g is not None else torch.zeros_like(ins[k])))
        body = enc_str(name) + struct.pack("<I", len(tensors))
        body += b"".join(enc_tensor(n, t) for n, t in tensors)
        self.groups[self.group].append(body)

    def write(self, outdir):
        os.makedirs(outdir, exist_ok=True)
        total = 0
        for group, cases in self.groups.items():
            data = b"NBG1" + struct.pack("<I", len(cases)) + b"".join(cases)
            path = os.path.join(outdir, group + ".nbg")
            os.makedirs(os.path.dirname(path), exist_ok=True)  # layers/: read by their own tests
            with open(path, "wb") as f:
                f.write(data)
            total += len(data)
            print(f"{group}.nbg: {len(cases)} cases, {len(data)} bytes")
        print(f"total: {len(self.names)} cases, {total} bytes (torch {torch.__version__})")


def tensor(values, dtype):
    return torch.tensor(values, dtype=dtype)


# ---------------------------------------------------------------------------
# O1 unary


# name -> (torch function, domain of the random float64 gradient input)
UNARY = {
    "neg": (torch.neg, "any"), "abs": (torch.abs, "any"), "sign": (torch.sign, "any"),
    "exp": (torch.exp, "any"), "expm1": (torch.expm1, "any"), "log": (torch.log, "pos"),
    "log1p": (torch.log1p, "gt-1"), "sqrt": (torch.sqrt, "pos"), "rsqrt": (torch.rsqrt, "pos"),
    "square": (torch.square, "any"), "reciprocal": (torch.reciprocal, "nonzero"),
    "sin": (torch.sin, "any"), "cos": (torch.cos, "any"), "tan": (torch.tan, "tan"),
    "tanh": (torch.tanh, "any"), "sigmoid": (torch.sigmoid, "any"), "relu": (torch.relu, "any"),
    "silu": (F.silu, "any"), "erf": (torch.erf, "any"), "floor": (torch.floor, "any"),
    "ceil": (torch.ceil, "any"), "round": (torch.round, "any"), "gelu": (F.gelu, "any"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), "any"),
}


def gelu_f32_zero(name, fn, x):
    """torch's float32 gelu gives +0.0 where its float64 gives -0.0 (x = -0.0, x <= -30):
    expect float64's sign there."""
    if name != "gelu" or x.dtype != F32:
        return None
    y = fn(x)
    return [torch.where(y == 0, fn(x.double()).float(), y)]


def clamp(x, lo, hi):
    # nabla's clamp keeps x's dtype (its bounds are C doubles); torch promotes an integer x
    # with float bounds to float, so integer cases pass integer bounds to torch
    if not x.is_floating_point():
        lo, hi = int(lo), int(hi)
    return torch.clamp(x, min=lo, max=hi)


# every unary op of ops.def with parameters for the signed-zero cases: name -> (fn, params)
UNARY_ALL = {**{k: (v[0], {}) for k, v in UNARY.items()},
             "leaky_relu": (lambda x, slope: F.leaky_relu(x, slope), {"slope": 0.1}),
             "elu": (lambda x, alpha: F.elu(x, alpha), {"alpha": 0.5}),
             "softplus": (lambda x, beta, threshold: F.softplus(x, beta, threshold), {"beta": 2.0, "threshold": 1.0}),
             "clamp": (clamp, {"lo": -1.0, "hi": 2.0}), "logical_not": (torch.logical_not, {})}


def unary_grad_input(g, domain):
    """float64 [3, 4] input in the op's domain; "any" includes an exact 0 (kink conventions)."""
    if domain == "pos":
        return g.uniform(0.1, 3.0, 3, 4)
    if domain == "gt-1":
        return g.uniform(-0.9, 3.0, 3, 4)
    if domain == "tan":
        return g.uniform(-1.3, 1.3, 3, 4)
    if domain == "nonzero":
        return g.uniform(0.3, 3.0, 3, 4) * torch.tensor([1.0, -1.0]).repeat(6).reshape(3, 4).to(F64)
    x = g.randn(3, 4, scale=1.5)
    x[0, 0] = 0.0
    return x


def special_f32(g, extra=45):
    """The special values plus random ones: 59 elements (not a multiple of 8 or 16)."""
    return torch.cat([tensor(SPECIAL, F32), g.randn(extra, dtype=F32, scale=3.0)])


def gen_unary(g):
    g.begin("o1_unary")
    for name, (fn, domain) in UNARY.items():
        g.seed(name + "/f64")
        g.case(name + "/f64", fn, {"x": unary_grad_input(g, domain)})
        g.seed(name + "/f32")
        x = special_f32(g)
        if name == "sign":  # torch gives sign(NaN) = 0; that is pinned separately below
            x = x[~torch.isnan(x)]
        g.case(name + "/f32", fn, {"x": x}, grad=False, expect=gelu_f32_zero(name, fn, x))
    for name, (fn, prm) in UNARY_ALL.items():  # the sign of zero, bitwise, in both float types
        for dt, tag in ((F32, "f32"), (F64, "f64")):
            z = tensor([-0.0, 0.0, -0.0, 0.0], dt)
            g.case(f"{name}/zeros_{tag}", fn, {"x": z}, prm, grad=False, expect=gelu_f32_zero(name, fn, z))
    # nabla deliberately returns NaN for sign(NaN), as NumPy; oracle np.sign
    xs = tensor([NAN, -NAN, -2.0, 0.0, 3.0], F32)
    g.case("sign/nan_numpy", torch.sign, {"x": xs}, grad=False,
           expect=[torch.from_numpy(np.sign(xs.numpy()))])
    # integer and bool inputs: same dtype, or f32 for float-valued ops
    ints = tensor([-7, -3, -1, 0, 1, 2, 5, 9], I32)
    for name in ("neg", "abs", "sign", "square", "relu", "floor", "ceil", "round"):
        g.case(name + "/i32", UNARY[name][0], {"x": ints}, grad=False)
    g.case("exp/i32", torch.exp, {"x": ints}, grad=False)
    g.case("sqrt/i64", torch.sqrt, {"x": tensor([0, 1, 2, 9, 10], I64)}, grad=False)
    g.case("sigmoid/u8", torch.sigmoid, {"x": tensor([0, 1, 3, 200], U8)}, grad=False)
    g.case("exp/bool", torch.exp, {"x": tensor([True, False, True], BOOL)}, grad=False)
    g.case("neg/i64", torch.neg, {"x": tensor([-(2**40), -1, 0, 3], I64)}, grad=False)
    # round half to even
    halves = [-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, 2.5000002, -7.5, 8388609.0]
    g.case("round/f32_halves", torch.round, {"x": tensor(halves, F32)}, grad=False)
    g.case("round/f64_halves", torch.round, {"x": tensor(halves, F64)})

    # parametric unary ops
    def kinked(name):
        g.seed(name)
        x = g.randn(3, 4, scale=1.5)
        x[0, 0] = 0.0
        return x

    for slope in (0.01, 0.2):
        g.case(f"leaky_relu/f64_s{slope}", lambda x, slope: F.leaky_relu(x, slope),
               {"x": kinked(f"lrelu{slope}")}, {"slope": slope})
    g.seed("leaky_relu/f32")
    g.case("leaky_relu/f32", lambda x, slope: F.leaky_relu(x, slope), {"x": special_f32(g)},
           {"slope": 0.1}, grad=False)
    for alpha in (1.0, 0.5):
        g.case(f"elu/f64_a{alpha}", lambda x, alpha: F.elu(x, alpha), {"x": kinked(f"elu{alpha}")},
               {"alpha": alpha})
    g.seed("elu/f32")
    g.case("elu/f32", lambda x, alpha: F.elu(x, alpha), {"x": special_f32(g)}, {"alpha": 1.0}, grad=False)
    for beta, threshold in ((1.0, 20.0), (2.0, 1.0)):
        g.case(f"softplus/f64_b{beta}_t{threshold}", lambda x, beta, threshold: F.softplus(x, beta, threshold),
               {"x": kinked(f"softplus{beta}")}, {"beta": beta, "threshold": threshold})
    g.seed("softplus/f32")
    g.case("softplus/f32", lambda x, beta, threshold: F.softplus(x, beta, threshold), {"x": special_f32(g)},
           {"beta": 1.0, "threshold": 20.0}, grad=False)

    g.seed("clamp")
    xc = g.randn(3, 4)
    xc[0, 0], xc[0, 1] = -0.5, 0.8  # exactly at the bounds: torch 2.x passes no gradient there
    g.case("clamp/f64_both", clamp, {"x": xc}, {"lo": -0.5, "hi": 0.8})
    g.case("clamp/f64_hi_only", clamp, {"x": xc}, {"lo": -INF, "hi": 0.3})
    g.case("clamp/f64_lo_only", clamp, {"x": xc}, {"lo": 0.2, "hi": INF})
    g.case("clamp/f32", clamp, {"x": special_f32(g)}, {"lo": -1.0, "hi": 2.0}, grad=False)
    g.case("clamp/i32", clamp, {"x": ints}, {"lo": -2.0, "hi": 4.0}, grad=False)
    # lo > hi: torch gives hi everywhere (and no gradient)
    g.case("clamp/f64_lo_gt_hi", clamp, {"x": xc}, {"lo": 0.5, "hi": -0.25})
    g.case("clamp/f32_lo_gt_hi", clamp, {"x": special_f32(g)}, {"lo": 1.0, "hi": -1.0}, grad=False)
    g.case("clamp/i32_lo_gt_hi", clamp, {"x": ints}, {"lo": 3.0, "hi": -2.0}, grad=False)
    for z, tag in ((-0.0, "neg"), (0.0, "pos")):  # a bound of zero against signed zeros
        g.case(f"clamp/f32_zero_bound_{tag}", clamp, {"x": tensor([-0.0, 0.0, -1.0, 1.0], F32)},
               {"lo": z, "hi": 2.0}, grad=False)
        g.case(f"clamp/f64_zero_hi_{tag}", clamp, {"x": tensor([-0.0, 0.0, -1.0, 1.0], F64)},
               {"lo": -2.0, "hi": z}, grad=False)
    g.case("logical_not/f32", torch.logical_not, {"x": tensor(SPECIAL, F32)}, grad=False)
    g.case("logical_not/i32", torch.logical_not, {"x": ints}, grad=False)


# ---------------------------------------------------------------------------
# O2 binary, O3 scalar operands

BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "atan2": torch.atan2,
    "remainder": torch.remainder, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le,
    "gt": torch.gt, "ge": torch.ge, "logical_and": torch.logical_and,
    "logical_or": torch.logical_or, "logical_xor": torch.logical_xor, "fmod": torch.fmod,
}
ARITH = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2", "remainder", "fmod")


def zero_tie(name, a, b):
    """maximum/minimum of -0.0 and +0.0: torch's float32 kernel returns a there, its float64
    kernel b; nabla returns a in both (std::max/min).  Expect a there, torch elsewhere."""
    if name not in ("maximum", "minimum"):
        return None
    out = BINARY[name](a, b)
    return [torch.where((a == 0) & (b == 0), a.expand_as(out), out)]


def binary_grad_inputs(g, name):
    """a [2, 3, 4] and b [3, 1] (broadcast) in float64, inside the op's smooth domain."""
    a, b = g.randn(2, 3, 4), g.randn(3, 1)
    if name == "div":
        b = g.uniform(0.5, 2.0, 3, 1) * tensor([[1.0], [-1.0], [1.0]], F64)
    if name == "pow":
        a, b = g.uniform(0.2, 3.0, 2, 3, 4), g.uniform(-2.0, 2.0, 3, 1)
    if name in ("remainder", "fmod"):
        a, b = g.randn(2, 3, 4, scale=4.0), tensor([[1.5], [-2.5], [0.7]], F64)
    return a, b


def gen_binary(g):
    g.begin("o2_binary")
    for name in ARITH:
        g.seed(name + "/bcast")
        a, b = binary_grad_inputs(g, name)
        g.case(name + "/f64_bcast", BINARY[name], {"a": a, "b": b})
    for name in BINARY:  # every pair of special values (signed zeros included), forward
        for dt, tag in ((F32, "f32"), (F64, "f64")):
            sa = tensor(SPECIAL, dt)
            g.case(f"{name}/{tag}_special", BINARY[name], {"a": sa.reshape(-1, 1), "b": sa}, grad=False,
                   expect=zero_tie(name, sa.reshape(-1, 1), sa))
    g.seed("maximum/ties")
    a = g.randn(6)
    b = a.clone()
    b[1::2] = g.randn(3)  # elements 0, 2, 4 tie: torch splits the gradient in half
    g.case("maximum/f64_ties", torch.maximum, {"a": a, "b": b})
    g.case("minimum/f64_ties", torch.minimum, {"a": a, "b": b})
    # pow edge cases: negative bases with integral exponents, 0^0, 0^-1
    pa = tensor([-2.0, -1.5, -2.0, 0.0, 0.0, 0.0, 4.0, -8.0], F32)
    pb = tensor([2.0, 3.0, 0.5, 0.0, -1.0, 2.0, 0.5, 1.0 / 3.0], F32)
    g.case("pow/f32_edges", torch.pow, {"a": pa, "b": pb}, grad=False)
    # remainder with negative operands (Python sign-of-divisor rule)
    ra = tensor([-7, -7, 7, 7, 0, -1, 5, -6], I32)
    rb = tensor([3, -3, 3, -3, -2, 4, 5, 4], I32)
    g.case("remainder/i32_signs", torch.remainder, {"a": ra, "b": rb}, grad=False)
    g.case("remainder/f64_signs", torch.remainder, {"a": ra.to(F64) + 0.25, "b": rb.to(F64) * 0.5})
    # fmod: the sign of the dividend (C fmod); exact zeros keep the dividend's sign
    g.case("fmod/i32_signs", torch.fmod, {"a": ra, "b": rb}, grad=False)
    g.case("fmod/i64_signs", torch.fmod, {"a": ra.to(I64) * 1000003, "b": rb.to(I64)}, grad=False)
    g.case("fmod/f64_signs", torch.fmod, {"a": ra.to(F64) + 0.25, "b": rb.to(F64) * 0.5})
    g.case("fmod/f32_zeros", torch.fmod, {"a": tensor([-4.0, 4.0, -0.0, 0.0, -6.0], F32),
                                          "b": tensor([2.0, -2.0, 3.0, -3.0, 3.0], F32)}, grad=False)
    g.case("remainder/f32_zeros", torch.remainder, {"a": tensor([-4.0, 4.0, -0.0, 0.0, -6.0], F32),
                                                    "b": tensor([2.0, -2.0, 3.0, -3.0, 3.0], F32)}, grad=False)
    g.case("pow/i64", torch.pow, {"a": tensor([-3, -2, 0, 1, 2, 5], I64), "b": tensor([3, 2, 0, 5, 10, 3], I64)},
           grad=False)
    # integer-closed ops: exact in every integer dtype, wrapping around on overflow as torch
    ia = [-128, -9, -7, -1, 0, 1, 3, 7, 127]
    ib = [-7, -2, -1, 1, 2, 3, 5, 100]  # no zero: torch raises on integer remainder/fmod by 0
    big = [2**62, 2**63 - 1, -(2**63), -3, 3 * 2**40 + 1]
    for name in ("add", "sub", "mul", "maximum", "minimum", "remainder", "fmod"):
        for dt, tag in ((I8, "i8"), (I32, "i32"), (U8, "u8")):
            av, bv = (ia, ib) if dt != U8 else ([0, 1, 7, 128, 200, 255], [1, 2, 7, 100, 255])
            g.case(f"{name}/{tag}_grid", BINARY[name], {"a": tensor(av, I64).to(dt).reshape(-1, 1),
                                                        "b": tensor(bv, I64).to(dt)}, grad=False)
        g.case(f"{name}/i64_wrap", BINARY[name], {"a": tensor(big, I64).reshape(-1, 1),
                                                  "b": tensor([b for b in big if b != 0] + [-1, 2], I64)},
               grad=False)
    # type promotion between tensors
    g.seed("promote")
    i32 = g.randint(-5, 6, 3, 4, dtype=I32)
    f32 = g.randn(4, dtype=F32)
    g.case("add/i32_f32", torch.add, {"a": i32, "b": f32}, grad=False)
    g.case("mul/i64_f64", torch.mul, {"a": i32.to(I64), "b": g.randn(3, 1)}, grad=False)
    g.case("div/i32_i32", torch.div, {"a": i32, "b": tensor([1, -2, 3, 4], I32)}, grad=False)
    g.case("sub/f32_f64", torch.sub, {"a": f32, "b": g.randn(3, 1)})
    g.case("add/bool_bool", torch.add, {"a": tensor([True, True, False, False], BOOL),
                                        "b": tensor([True, False, True, False], BOOL)}, grad=False)
    g.case("add/u8_i32", torch.add, {"a": tensor([0, 200, 255], U8), "b": tensor([-1, 100, 1], I32)}, grad=False)
    g.case("maximum/i32_f32", torch.maximum, {"a": i32, "b": f32}, grad=False)
    g.case("atan2/i32_i32", torch.atan2, {"a": i32, "b": tensor([1, -2, 0, 4], I32)}, grad=False)
    g.case("lt/i32_f64", torch.lt, {"a": i32, "b": g.randn(4, scale=3.0)}, grad=False)
    g.case("eq/i64_f32", torch.eq, {"a": tensor([1, 2, 3], I64), "b": tensor([1.0, 2.5, 3.0], F32)}, grad=False)
    g.case("logical_and/i32_bool", torch.logical_and, {"a": i32, "b": tensor([True, False, True, True], BOOL)},
           grad=False)
    g.case("logical_xor/f64_i32", torch.logical_xor, {"a": tensor([0.0, NAN, 0.5, -0.0], F64),
                                                      "b": tensor([0, 0, 3, 1], I32)}, grad=False)
    # where: cond broadcasts with both operands
    g.seed("where")
    cond = g.randint(0, 2, 2, 1, 4).to(BOOL)
    g.case("where/f64_bcast", torch.where, {"cond": cond, "a": g.randn(3, 1), "b": g.randn(4)})
    g.case("where/f32", torch.where, {"cond": cond, "a": special_f32(g, 10)[:24].reshape(2, 3, 4),
                                      "b": tensor([1.0, NAN, -INF, 2.0], F32)}, grad=False)
    g.case("where/i64", torch.where, {"cond": cond, "a": tensor([1, 2, 3, 4], I64), "b": tensor([[-1], [-2]], I64)},
           grad=False)


def scalar_op(name):
    """torch oracle of x OP s with s a Python number (weak: only raises the category)."""
    fn = BINARY[name]

    def run(x, s):
        if name in ("add", "sub", "mul", "div", "pow", "remainder", "fmod", "eq", "ne", "lt", "le", "gt", "ge"):
            return fn(x, s)  # torch takes the Python number directly
        rt = torch.result_type(x, s)  # torch's promotion for a Python scalar operand
        return fn(x.to(rt), torch.tensor(s, dtype=rt))

    return run


# scalar for each op's float64 gradient case and its integer case
SCALARS = {
    "add": (2.5, 3), "sub": (-1.25, 4), "mul": (0.7, -3), "div": (-1.6, 2), "pow": (2.5, 2),
    "maximum": (0.3, 1), "minimum": (0.3, 1), "atan2": (-0.8, 2), "remainder": (-1.5, -3),
    "eq": (1.0, 2), "ne": (1.0, 2), "lt": (0.25, 0), "le": (0.25, 0), "gt": (0.25, 0), "ge": (0.25, 0),
    "logical_and": (0.0, 5), "logical_or": (0.0, 5), "logical_xor": (2.0, 0), "fmod": (-1.5, -3),
}


def gen_scalar(g):
    g.begin("o3_scalar")
    for name, (sf, si) in SCALARS.items():
        g.seed(name + "_sf")
        x = g.uniform(0.2, 3.0, 3, 4) if name == "pow" else g.randn(3, 4, scale=2.0)
        if name in ("eq", "ne", "le", "ge", "maximum", "minimum"):
            x[0, 0] = sf  # a tie with the scalar
        g.case(name + "_sf/f64", scalar_op(name), {"x": x}, {"s": sf})
        xi = tensor([-7, -3, -1, 0, 1, 2, 5, 9], I32)
        if name == "pow":
            xi = xi.abs()
        g.case(name + "_si/i32", scalar_op(name), {"x": xi}, {"s": si}, grad=False)
    # promotion by category only: int tensor + float scalar -> f32, bool + int -> i64, ...
    ints = tensor([-7, -3, 0, 2, 9], I32)
    g.case("add_sf/i32", scalar_op("add"), {"x": ints}, {"s": 2.5}, grad=False)
    g.case("mul_sf/bool", scalar_op("mul"), {"x": tensor([True, False], BOOL)}, {"s": 1.5}, grad=False)
    g.case("add_si/bool", scalar_op("add"), {"x": tensor([True, False], BOOL)}, {"s": 1}, grad=False)
    # no overflow here: torch wraps integer overflow (u8 0 - 1 = 255), nabla saturates (a known gap)
    g.case("sub_si/u8", scalar_op("sub"), {"x": tensor([1, 7, 255], U8)}, {"s": 1}, grad=False)
    g.case("mul_si/f32", scalar_op("mul"), {"x": tensor([1.5, -2.0, NAN], F32)}, {"s": 3}, grad=False)
    g.case("add_sf/f32", scalar_op("add"), {"x": special_f32(g)}, {"s": 0.1}, grad=False)
    g.case("div_sf/i64", scalar_op("div"), {"x": ints.to(I64)}, {"s": -0.5}, grad=False)
    g.case("lt_sf/i32", scalar_op("lt"), {"x": ints}, {"s": 2.5}, grad=False)
    g.case("maximum_sf/f32", scalar_op("maximum"), {"x": tensor(SPECIAL, F32)}, {"s": 0.5}, grad=False)
    g.case("maximum_sf/i32", scalar_op("maximum"), {"x": ints}, {"s": 0.5}, grad=False)
    g.case("remainder_sf/i32", scalar_op("remainder"), {"x": ints}, {"s": 2.5}, grad=False)
    g.case("fmod_sf/i32", scalar_op("fmod"), {"x": ints}, {"s": 2.5}, grad=False)
    g.case("pow_sf/i32", scalar_op("pow"), {"x": ints.abs()}, {"s": 0.5}, grad=False)
    g.case("pow_si/f32", scalar_op("pow"), {"x": tensor([-2.0, 0.0, 1.5, INF, NAN], F32)}, {"s": 3},
           grad=False)
    g.case("atan2_sf/f32", scalar_op("atan2"), {"x": tensor(SPECIAL, F32)}, {"s": -0.0}, grad=False)


# ---------------------------------------------------------------------------
# O4 reductions and scans

AXES_VARIANTS = [("all", None), ("a1", [1]), ("a02", [0, 2]), ("aneg", [-1])]


def reduce_params(axes, keepdim):
    p = {"keepdim": keepdim}
    if axes is not None:
        p["axes"] = axes
    return p


def torch_axes(axes):
    return tuple(axes) if axes is not None else None


def gen_reduce(g):
    g.begin("o4_reduce")

    def red(fn):
        def run(x, keepdim, axes=None):
            if axes is None:
                return fn(x, dim=tuple(range(x.dim())), keepdim=keepdim)
            return fn(x, dim=tuple(axes), keepdim=keepdim)

        return run

    sum_ = red(torch.sum)
    mean_ = red(torch.mean)
    amax, amin = red(torch.amax), red(torch.amin)
    lse = red(torch.logsumexp)
    for tag, axes in AXES_VARIANTS:
        for keep in (False, True):
            k = "_keep" if keep else ""
            g.seed(f"reduce/{tag}{k}")
            x = g.randn(2, 3, 4)
            g.case(f"sum/f64_{tag}{k}", sum_, {"x": x}, reduce_params(axes, keep))
            g.case(f"mean/f64_{tag}{k}", mean_, {"x": x}, reduce_params(axes, keep))
            g.case(f"logsumexp/f64_{tag}{k}", lse, {"x": x}, reduce_params(axes, keep))
    g.seed("reduce/f32")
    xf = g.randn(5, 37, dtype=F32, scale=3.0)
    for axes in ([1], [0]):
        p = reduce_params(axes, False)
        g.case(f"sum/f32_a{axes[0]}", sum_, {"x": xf}, p, grad=False, atol=SUM_ATOL)
        g.case(f"mean/f32_a{axes[0]}", mean_, {"x": xf}, p, grad=False, atol=SUM_ATOL)
    g.case("logsumexp/f32_large", lse, {"x": tensor([[1000.0, 1001.0, 999.0], [-INF, 0.0, -1e4]], F32)},
           reduce_params([1], False), grad=False)
    # prod: one zero in a row (gradient is the product of the others), two zeros (all zero)
    xp = torch.tensor([[1.5, -2.0, 0.5, 3.0], [0.0, 2.0, -1.5, 0.7], [0.0, 1.5, 0.0, 2.0]], dtype=F64)
    def prod(x, keepdim, axes=None):  # torch.prod takes one dim at most
        return torch.prod(x, axes[0], keepdim=keepdim) if axes is not None else torch.prod(x)

    g.case("prod/f64_zeros_a1", prod, {"x": xp}, reduce_params([1], False))
    g.case("prod/f64_all", prod, {"x": xp[:, 1:] + 0.5}, reduce_params(None, False))
    g.case("prod/f64_a0_keep", prod, {"x": xp + 0.25}, reduce_params([0], True))
    # max/min with ties (torch.amax splits the gradient evenly) and NaN
    xt = torch.tensor([[1.0, 3.0, 3.0, -2.0], [-1.0, -1.0, 0.5, -1.0], [2.0, 2.0, 2.0, 2.0]], dtype=F64)
    for name, fn in (("max", amax), ("min", amin)):
        g.case(f"{name}/f64_ties_a1", fn, {"x": xt}, reduce_params([1], False))
        g.case(f"{name}/f64_ties_all", fn, {"x": xt}, reduce_params(None, False))
        g.case(f"{name}/f64_a0_keep", fn, {"x": xt}, reduce_params([0], True))
        g.case(f"{name}/f32_nan", fn, {"x": tensor([[1.0, NAN, 3.0], [-INF, 2.0, 0.0]], F32)},
               reduce_params([1], False), grad=False)
        g.case(f"{name}/f32_long", fn, {"x": xf}, reduce_params([1], False), grad=False)
        g.case(f"{name}/i32", fn, {"x": tensor([[3, -1, 7], [2, 2, -5]], I32)}, reduce_params([1], False),
               grad=False)
    # argmax/argmin: first index of ties; NaN counts as the extreme
    xa = tensor([[1.0, 3.0, 3.0, -2.0], [NAN, 0.0, NAN, 5.0], [-1.0, -4.0, -4.0, 2.0]], F32)
    for name, fn in (("argmax", torch.argmax), ("argmin", torch.argmin)):
        for axis in (0, 1, -1):
            for keep in (False, True):
                g.case(f"{name}/f32_ax{axis}{'_keep' if keep else ''}", lambda x, axis, keepdim, fn=fn:
                       fn(x, dim=axis, keepdim=keepdim), {"x": xa}, {"axis": axis, "keepdim": keep}, grad=False)
        g.case(f"{name}/i32", lambda x, axis, keepdim, fn=fn: fn(x, dim=axis, keepdim=keepdim),
               {"x": tensor([[3, -1, 7, 7], [2, 2, -5, -5]], I32)}, {"axis": 1, "keepdim": False}, grad=False)
    # var / std with correction 0 and 1
    for name, fn in (("var", torch.var), ("std", torch.std)):
        for corr in (0, 1):
            for tag, axes in (("all", None), ("a1", [1]), ("a02", [0, 2])):
                for keep in (False, True):
                    g.seed(f"{name}{corr}{tag}{keep}")

                    def run(x, correction, keepdim, axes=None, fn=fn):
                        dims = tuple(axes) if axes is not None else tuple(range(x.dim()))
                        return fn(x, dim=dims, correction=correction, keepdim=keepdim)

                    p = reduce_params(axes, keep)
                    p["correction"] = corr
                    g.case(f"{name}/f64_c{corr}_{tag}{'_keep' if keep else ''}", run, {"x": g.randn(2, 3, 4)}, p)
    # one element with correction 1 (0/0) and an empty axis: NaN, as torch
    for name, fn in (("var", torch.var), ("std", torch.std)):
        def run(x, correction, keepdim, axes, fn=fn):
            return fn(x, dim=tuple(axes), correction=correction, keepdim=keepdim)

        g.seed(name + "/one")
        p = reduce_params([1], False)
        g.case(f"{name}/f64_one_c1", run, {"x": g.randn(3, 1)}, {**p, "correction": 1}, grad=False)
        g.case(f"{name}/f32_one_c1", run, {"x": g.randn(2, 1, dtype=F32)}, {**p, "correction": 1}, grad=False)
        g.case(f"{name}/f64_one_c0", run, {"x": g.randn(3, 1)}, {**p, "correction": 0})
        for corr in (0, 1):
            g.case(f"{name}/f64_empty_c{corr}", run, {"x": torch.zeros(2, 0, dtype=F64)}, {**p, "correction": corr},
                   grad=False)
    # norm p = 1, 2, inf, 3 (p=1 includes an exact zero: torch's gradient there is 0)
    g.seed("norm")
    xn = g.randn(3, 4)
    xn[1, 2] = 0.0
    for pv, ptag in ((1.0, "p1"), (2.0, "p2"), (INF, "pinf"), (3.0, "p3")):
        for tag, axes in (("all", None), ("a1", [1])):
            for keep in (False, True):
                def run(x, p, keepdim, axes=None):
                    return torch.linalg.vector_norm(x, p, dim=torch_axes(axes), keepdim=keepdim)

                prm = reduce_params(axes, keep)
                prm["p"] = pv
                g.case(f"norm/f64_{ptag}_{tag}{'_keep' if keep else ''}", run, {"x": xn}, prm)
    g.case("norm/f32_p2", lambda x, p, keepdim: torch.linalg.vector_norm(x, p), {"x": xf}, {"p": 2.0, "keepdim": False},
           grad=False, atol=SUM_ATOL)
    # cumsum / cumprod (cumprod with a zero: torch's gradient handles it exactly)
    g.seed("scan")
    xs = g.randn(3, 4)
    xz = xs.clone()
    xz[1, 1] = 0.0
    for axis in (0, 1, -1):
        g.case(f"cumsum/f64_ax{axis}", lambda x, axis: torch.cumsum(x, axis), {"x": xs}, {"axis": axis})
        g.case(f"cumprod/f64_ax{axis}", lambda x, axis: torch.cumprod(x, axis), {"x": xs}, {"axis": axis})
    g.case("cumprod/f64_zero_ax1", lambda x, axis: torch.cumprod(x, axis), {"x": xz}, {"axis": 1})
    g.case("cumsum/f32_long", lambda x, axis: torch.cumsum(x, axis), {"x": xf}, {"axis": 1}, grad=False,
           atol=SUM_ATOL)
    # integer and bool inputs: sums and products accumulate in int64
    xi = tensor([[3, -1, 7], [2, 2, -5]], I32)
    g.case("sum/i32", sum_, {"x": xi}, reduce_params([1], False), grad=False)
    g.case("sum/bool", sum_, {"x": tensor([[True, False, True], [True, True, True]], BOOL)},
           reduce_params(None, False), grad=False)
    g.case("prod/i32", prod, {"x": xi}, reduce_params([1], True), grad=False)
    g.case("cumsum/i32", lambda x, axis: torch.cumsum(x, axis), {"x": xi}, {"axis": 1}, grad=False)
    g.case("cumprod/u8", lambda x, axis: torch.cumprod(x, axis), {"x": tensor([2, 3, 4], U8)}, {"axis": 0},
           grad=False)
    # empty reductions: sum -> 0, prod -> 1, mean -> NaN
    e = torch.zeros(0, 3, dtype=F64)
    g.case("sum/f64_empty", sum_, {"x": e}, reduce_params([0], False), grad=False)
    g.case("prod/f64_empty", prod, {"x": e}, reduce_params([0], False), grad=False)
    g.case("mean/f64_empty", mean_, {"x": e}, reduce_params([0], False), grad=False)


# ---------------------------------------------------------------------------
# O5 linear algebra


def gen_linalg(g):
    g.begin("o5_linalg")
    shapes = {
        "vv": ((5,), (5,)), "vm": ((4,), (4, 3)), "mv": ((3, 4), (4,)), "mm": ((3, 4), (4, 5)),
        "bmm_bcast": ((2, 1, 3, 4), (3, 4, 5)), "vb": ((4,), (2, 4, 3)), "bv": ((2, 3, 4), (4,)),
    }
    for tag, (sa, sb) in shapes.items():
        g.seed("matmul/" + tag)
        g.case(f"matmul/f64_{tag}", torch.matmul, {"a": g.randn(*sa), "b": g.randn(*sb)})
    g.seed("matmul/f32")
    g.case("matmul/f32_tails", torch.matmul, {"a": g.randn(17, 33, dtype=F32), "b": g.randn(33, 9, dtype=F32)},
           grad=False, atol=SUM_ATOL)
    g.case("matmul/f32_batched", torch.matmul, {"a": g.randn(3, 5, 7, dtype=F32), "b": g.randn(7, 6, dtype=F32)},
           grad=False, atol=SUM_ATOL)
    g.seed("linear")
    g.case("linear/f64_bias", F.linear, {"x": g.randn(2, 3, 4), "w": g.randn(5, 4), "bias": g.randn(5)})
    g.case("linear/f64_nobias", F.linear, {"x": g.randn(3, 4), "w": g.randn(2, 4)})
    g.case("linear/f32", F.linear, {"x": g.randn(6, 10, dtype=F32), "w": g.randn(3, 10, dtype=F32),
                                    "bias": g.randn(3, dtype=F32)}, grad=False, atol=SUM_ATOL)
    einsums = [
        ("mm", "ij,jk->ik", [(3, 4), (4, 5)]),
        ("bmm", "bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]),
        ("diag", "ii->i", [(4, 4)]),
        ("trace", "ii", [(4, 4)]),
        ("sum", "ij->", [(3, 4)]),
        ("outer", "i,j->ij", [(3,), (4,)]),
        ("ellipsis", "...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
        ("implicit", "ij,jk", [(3, 4), (4, 2)]),
        ("attn", "bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
        ("rowdot", "ij,ij->i", [(3, 4), (3, 4)]),
        ("permute", "ijk->kji", [(2, 3, 4)]),
        ("three", "ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ]
    for tag, eq, shapes_ in einsums:
        g.seed("einsum/" + tag)
        ins = {f"op{i}": g.randn(*s) for i, s in enumerate(shapes_)}
        g.case(f"einsum/f64_{tag}", lambda *ops, eq: torch.einsum(eq, *ops), ins, {"eq": eq})
    g.seed("einsum/f32")
    g.case("einsum/f32_mm", lambda *ops, eq: torch.einsum(eq, *ops),
           {"op0": g.randn(5, 9, dtype=F32), "op1": g.randn(9, 3, dtype=F32)}, {"eq": "ij,jk->ik"},
           grad=False, atol=SUM_ATOL)


# ---------------------------------------------------------------------------
# O6 neural-network functions and losses


def rms_norm_ref(x, w=None, *, nnorm, eps):
    """torch.nn.functional.rms_norm over the last nnorm axes (torch >= 2.4)."""
    return F.rms_norm(x, x.shape[x.dim() - nnorm:], w, eps)


def gen_nn(g):
    g.begin("o6_nn")
    for name, fn in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
        g.seed(name)
        for axis in (-1, 0):
            g.case(f"{name}/f64_ax{axis}", lambda x, axis, fn=fn: fn(x, axis), {"x": g.randn(3, 5)}, {"axis": axis})
        g.case(f"{name}/f64_3d_ax1", lambda x, axis, fn=fn: fn(x, axis), {"x": g.randn(2, 3, 4)}, {"axis": 1})
        big = tensor([[1000.0, 1001.0, 999.0, -INF], [-50.0, 0.0, 3.0, 2.0]], F32)
        g.case(f"{name}/f32_large", lambda x, axis, fn=fn: fn(x, axis), {"x": big}, {"axis": 1}, grad=False)
        g.case(f"{name}/f32_long", lambda x, axis, fn=fn: fn(x, axis), {"x": g.randn(3, 37, dtype=F32, scale=4.0)},
               {"axis": 1}, grad=False)

    def layer_norm(x, w=None, b=None, *, nnorm, eps):
        return F.layer_norm(x, x.shape[x.dim() - nnorm:], w, b, eps)

    g.seed("layer_norm")
    x = g.randn(2, 3, 4, scale=2.0) + 1.0
    g.case("layer_norm/f64_affine1", layer_norm, {"x": x, "w": g.randn(4), "b": g.randn(4)},
           {"nnorm": 1, "eps": 1e-5})
    g.case("layer_norm/f64_affine2", layer_norm, {"x": x, "w": g.randn(3, 4), "b": g.randn(3, 4)},
           {"nnorm": 2, "eps": 1e-5})
    g.case("layer_norm/f64_plain", layer_norm, {"x": x}, {"nnorm": 1, "eps": 0.1})
    g.case("layer_norm/f64_weight_only", layer_norm, {"x": x, "w": g.randn(4)}, {"nnorm": 1, "eps": 1e-5})
    g.case("layer_norm/f32", layer_norm, {"x": g.randn(4, 37, dtype=F32, scale=3.0), "w": g.randn(37, dtype=F32),
                                          "b": g.randn(37, dtype=F32)}, {"nnorm": 1, "eps": 1e-5},
           grad=False, atol=SUM_ATOL)
    g.seed("rms_norm")
    g.case("rms_norm/f64_weight", rms_norm_ref, {"x": x, "w": g.randn(4)}, {"nnorm": 1, "eps": 1e-6})
    g.case("rms_norm/f64_plain2", rms_norm_ref, {"x": x}, {"nnorm": 2, "eps": 0.01})
    g.case("rms_norm/f32", rms_norm_ref, {"x": g.randn(4, 37, dtype=F32), "w": g.randn(37, dtype=F32)},
           {"nnorm": 1, "eps": 1e-6}, grad=False, atol=SUM_ATOL)

    # cross entropy: class indices, ignore_index, label smoothing, probabilities, each reduction
    def ce(logits, target, reduction, ignore_index, label_smoothing):
        return F.cross_entropy(logits, target, reduction=list(REDUCTION)[reduction], ignore_index=ignore_index,
                               label_smoothing=label_smoothing)

    def ce_params(red, ignore=-100, ls=0.0):
        return {"reduction": REDUCTION[red], "ignore_index": ignore, "label_smoothing": ls}

    g.seed("cross_entropy")
    logits = g.randn(5, 4, scale=2.0)
    tgt = tensor([0, 3, 1, 3, 2], I64)
    tgt_ign = tensor([0, -100, 2, 3, -100], I64)
    probs = torch.softmax(g.randn(5, 4), 1)
    for red in REDUCTION:
        g.case(f"cross_entropy/f64_idx_{red}", ce, {"logits": logits, "target": tgt}, ce_params(red))
        g.case(f"cross_entropy/f64_ignore_{red}", ce, {"logits": logits, "target": tgt_ign}, ce_params(red))
        g.case(f"cross_entropy/f64_smooth_{red}", ce, {"logits": logits, "target": tgt_ign}, ce_params(red, ls=0.1))
        g.case(f"cross_entropy/f64_probs_{red}", ce, {"logits": logits, "target": probs}, ce_params(red))
    g.case("cross_entropy/f64_ignore_class2", ce, {"logits": logits, "target": tgt}, ce_params("mean", ignore=2))
    g.case("cross_entropy/f64_probs_smooth", ce, {"logits": logits, "target": probs}, ce_params("mean", ls=0.2))
    g.case("cross_entropy/f64_1d", ce, {"logits": logits[0], "target": tensor(2, I64)}, ce_params("mean"))
    g.case("cross_entropy/f64_i32_target", lambda logits, target, **p: ce(logits, target.long(), **p),
           {"logits": logits, "target": tgt.to(I32)}, ce_params("sum"))  # torch wants int64; nabla takes any int
    g.case("cross_entropy/f32", ce, {"logits": g.randn(6, 37, dtype=F32, scale=5.0),
                                     "target": g.randint(0, 37, 6)}, ce_params("mean"), grad=False, atol=SUM_ATOL)

    def nll(logp, target, reduction, ignore_index):
        return F.nll_loss(logp, target, reduction=list(REDUCTION)[reduction], ignore_index=ignore_index)

    g.seed("nll_loss")
    logp = torch.log_softmax(g.randn(5, 4), 1)
    for red in REDUCTION:
        g.case(f"nll_loss/f64_{red}", nll, {"logp": logp, "target": tgt_ign},
               {"reduction": REDUCTION[red], "ignore_index": -100})
    g.case("nll_loss/f64_ignore_class3", nll, {"logp": logp, "target": tgt}, {"reduction": 0, "ignore_index": 3})

    def mse(input, target, reduction):
        return F.mse_loss(input, target, reduction=list(REDUCTION)[reduction])

    def bce(input, target, reduction):
        return F.binary_cross_entropy_with_logits(input, target, reduction=list(REDUCTION)[reduction])

    g.seed("losses")
    a, b = g.randn(3, 4), g.randn(3, 4)
    tprob = g.uniform(0.0, 1.0, 3, 4)
    for red in REDUCTION:
        g.case(f"mse_loss/f64_{red}", mse, {"input": a, "target": b}, {"reduction": REDUCTION[red]})
        g.case(f"bce_with_logits/f64_{red}", bce, {"input": a * 3.0, "target": tprob}, {"reduction": REDUCTION[red]})
    g.case("mse_loss/f64_bcast", mse, {"input": a, "target": b[0]}, {"reduction": 0})
    g.case("bce_with_logits/f32_extreme", bce, {"input": tensor([-100.0, -30.0, -1.0, 0.0, 2.0, 30.0, 100.0], F32),
                                                "target": tensor([0.0, 1.0, 0.5, 1.0, 0.0, 0.0, 1.0], F32)},
           {"reduction": 2}, grad=False)


# ---------------------------------------------------------------------------
# O7 indexing and joining


def gen_index(g):
    g.begin("o7_index")
    g.seed("index_select")
    x = g.randn(4, 3)
    for axis, idx in ((0, tensor([2, 0, 2], I64)), (1, tensor([2, 1], I32)), (-1, tensor([0, 0, 2, 1], I64))):
        g.case(f"index_select/f64_ax{axis}", lambda x, index, axis: torch.index_select(x, axis, index),
               {"x": x, "index": idx}, {"axis": axis})
    g.case("index_select/i32", lambda x, index, axis: torch.index_select(x, axis, index),
           {"x": tensor([[1, 2], [3, 4], [5, 6]], I32), "index": tensor([2, 2, 0], I64)}, {"axis": 0}, grad=False)
    g.seed("gather")
    x = g.randn(3, 4)
    g.case("gather/f64_ax1", lambda x, index, axis: torch.gather(x, axis, index),
           {"x": x, "index": tensor([[0, 0], [3, 1], [2, 2]], I64)}, {"axis": 1})
    g.case("gather/f64_ax0", lambda x, index, axis: torch.gather(x, axis, index),
           {"x": x, "index": tensor([[2, 0, 1, 2], [2, 2, 0, 0]], I64)}, {"axis": 0})
    g.seed("scatter_add")
    g.case("scatter_add/f64_ax1", lambda x, index, src, axis: torch.scatter_add(x, axis, index, src),
           {"x": g.randn(3, 5), "index": tensor([[0, 0, 4, 0], [1, 2, 2, 3], [4, 4, 4, 4]], I64),
            "src": g.randn(3, 4)}, {"axis": 1})
    g.case("scatter_add/f64_ax0", lambda x, index, src, axis: torch.scatter_add(x, axis, index, src),
           {"x": g.randn(3, 2), "index": tensor([[1, 0], [1, 1], [0, 2]], I64), "src": g.randn(3, 2)}, {"axis": 0})
    g.seed("take_along_axis")
    x = g.randn(3, 4)
    g.case("take_along_axis/f64", lambda x, index, axis: torch.take_along_dim(x, index, axis),
           {"x": x, "index": tensor([[3, 0], [1, 1], [2, 0]], I64)}, {"axis": 1})
    g.case("take_along_axis/f64_bcast", lambda x, index, axis: torch.take_along_dim(x, index, axis),
           {"x": x, "index": tensor([[1, 3, 1]], I64)}, {"axis": 1})
    g.case("one_hot/i64", lambda index, num_classes: F.one_hot(index, num_classes),
           {"index": tensor([[0, 4, 2], [1, 1, 3]], I64)}, {"num_classes": 5}, grad=False)
    g.case("one_hot/i32_1d", lambda index, num_classes: F.one_hot(index.long(), num_classes),
           {"index": tensor([2, 0, 2], I32)}, {"num_classes": 3}, grad=False)
    g.seed("embedding")
    w = g.randn(6, 3)
    g.case("embedding/f64", lambda weight, index: F.embedding(index, weight),
           {"weight": w, "index": tensor([[0, 5, 0], [2, 2, 2]], I64)})
    g.case("embedding/f64_i32", lambda weight, index: F.embedding(index, weight),
           {"weight": w, "index": tensor([4, 1, 4, 0], I32)})
    g.seed("masked_fill")
    mask = tensor([True, False, False, True], BOOL)
    g.case("masked_fill/f64_bcast", lambda x, mask, value: x.masked_fill(mask, value),
           {"x": g.randn(3, 4), "mask": mask}, {"value": -1.5})
    g.case("masked_fill/f32_inf", lambda x, mask, value: x.masked_fill(mask, value),
           {"x": g.randn(2, 4, dtype=F32), "mask": tensor([[True, False, True, False], [False] * 4], BOOL)},
           {"value": -INF}, grad=False)
    g.case("masked_fill/i32", lambda x, mask, value: x.masked_fill(mask, int(value)),
           {"x": tensor([[1, 2, 3, 4]], I32), "mask": mask}, {"value": 7.0}, grad=False)

    def cat(*ops, axis):
        return torch.cat(ops, axis)

    def stack(*ops, axis):
        return torch.stack(ops, axis)

    g.seed("cat")
    g.case("cat/f64_ax0", cat, {"op0": g.randn(2, 3), "op1": g.randn(1, 3)}, {"axis": 0})
    g.case("cat/f64_axneg", cat, {"op0": g.randn(2, 3), "op1": g.randn(2, 2), "op2": g.randn(2, 1)}, {"axis": -1})
    g.case("cat/f32_f64", cat, {"op0": g.randn(2, 2, dtype=F32), "op1": g.randn(1, 2)}, {"axis": 0})
    g.case("cat/i32_i64", cat, {"op0": tensor([1, 2], I32), "op1": tensor([3], I64)}, {"axis": 0}, grad=False)
    g.seed("stack")
    ops = {f"op{i}": g.randn(2, 3) for i in range(3)}
    for axis in (0, 1, 2, -1):
        g.case(f"stack/f64_ax{axis}", stack, ops, {"axis": axis})

    def split(x, split_size, axis):
        return torch.split(x, split_size, axis)

    def chunk(x, chunks, axis):
        return torch.chunk(x, chunks, axis)

    g.seed("split")
    x7 = g.randn(7, 4)
    g.case("split/f64_ax0", split, {"x": x7}, {"split_size": 3, "axis": 0})
    g.case("split/f64_ax1", split, {"x": x7}, {"split_size": 2, "axis": 1})
    g.case("split/f64_whole", split, {"x": x7}, {"split_size": 9, "axis": 0})
    g.case("chunk/f64_6_in_4", chunk, {"x": x7[:6]}, {"chunks": 4, "axis": 0})  # torch gives 3 chunks of 2
    g.case("chunk/f64_ax1", chunk, {"x": x7}, {"chunks": 3, "axis": 1})
    g.case("chunk/f64_7_in_3", chunk, {"x": x7}, {"chunks": 3, "axis": 0})

    def pad(x, pads, mode, value):
        return F.pad(x, tuple(pads), ["constant", "reflect"][mode], value if mode == 0 else None)

    g.seed("pad")
    x = g.randn(3, 4)
    g.case("pad/f64_const1", pad, {"x": x}, {"pads": [1, 2], "mode": 0, "value": 0.5})
    g.case("pad/f64_const2", pad, {"x": x}, {"pads": [1, 0, 2, 1], "mode": 0, "value": 0.0})
    g.case("pad/f64_crop", pad, {"x": x}, {"pads": [-1, 2, 0, -2], "mode": 0, "value": -3.0})
    g.case("pad/f64_reflect1", pad, {"x": g.randn(2, 5)}, {"pads": [2, 3], "mode": 1, "value": 0.0})
    g.case("pad/f64_reflect2", pad, {"x": g.randn(2, 3, 4)}, {"pads": [1, 2, 2, 1], "mode": 1, "value": 0.0})
    g.case("pad/i32_const", pad, {"x": tensor([[1, 2], [3, 4]], I32)}, {"pads": [1, 1], "mode": 0, "value": 9.0},
           grad=False)


# ---------------------------------------------------------------------------
# T5 layout: casts, copies and views (each differentiated through the view)


def gen_layout(g):
    g.begin("o9_layout")
    g.seed("layout")
    x = g.randn(2, 3, 4)
    g.case("reshape/f64", lambda x, shape: x.reshape(shape), {"x": x}, {"shape": [4, -1]})
    g.case("reshape/f64_rank0", lambda x, shape: x.reshape(shape), {"x": g.randn(1, 1)}, {"shape": []})
    g.case("reshape/i32", lambda x, shape: x.reshape(shape), {"x": tensor([[1, 2, 3], [4, 5, 6]], I32)},
           {"shape": [3, 2]}, grad=False)
    g.case("permute/f64", lambda x, perm: x.permute(perm), {"x": x}, {"perm": [2, 0, 1]})
    g.case("contiguous/f64_permuted", lambda x, perm: x.permute(perm).contiguous(), {"x": x}, {"perm": [1, 2, 0]})
    g.case("expand/f64", lambda x, shape: x.expand(shape), {"x": g.randn(3, 1)}, {"shape": [2, 3, 4]})
    g.case("expand/f64_keep", lambda x, shape: x.expand(shape), {"x": g.randn(1, 4)}, {"shape": [3, -1]})

    def slice_(x, axis, start, stop, step):
        idx = [slice(None)] * x.dim()
        idx[axis] = slice(start, stop, step)
        return x[tuple(idx)]

    g.case("slice/f64_step2", slice_, {"x": x}, {"axis": 2, "start": 0, "stop": 4, "step": 2})
    g.case("slice/f64_negative_bounds", slice_, {"x": x}, {"axis": 1, "start": -2, "stop": 3, "step": 1})
    g.case("slice/f64_empty", slice_, {"x": x}, {"axis": 0, "start": 1, "stop": 1, "step": 1})
    # torch forbids negative steps; x.flip over the walked range gives the same values
    g.case("slice/f64_backwards", lambda x, axis, start, stop, step: x[:, 1:].flip(1)[:, ::2],
           {"x": g.randn(3, 6)}, {"axis": 1, "start": 5, "stop": 0, "step": -2})
    g.case("select/f64", lambda x, axis, index: x.select(axis, index), {"x": x}, {"axis": 1, "index": -1})
    g.case("select/f32", lambda x, axis, index: x.select(axis, index), {"x": x.to(F32)}, {"axis": 0, "index": 1},
           grad=False)
    for off in (0, 1, -2):
        g.case(f"diagonal/f64_off{off}", lambda x, offset, a, b: torch.diagonal(x, offset, a, b),
               {"x": g.randn(3, 4, 5)}, {"offset": off, "a": 1, "b": 2})
    g.case("diagonal/f64_axes02", lambda x, offset, a, b: torch.diagonal(x, offset, a, b), {"x": x},
           {"offset": 0, "a": 0, "b": 2})
    g.case("as_strided/f32", lambda x, shape, strides, offset: torch.as_strided(x, shape, strides, offset),
           {"x": torch.arange(12, dtype=F32)}, {"shape": [3, 3], "strides": [3, 1], "offset": 2}, grad=False)
    g.case("as_strided/f32_overlap", lambda x, shape, strides, offset: torch.as_strided(x, shape, strides, offset),
           {"x": torch.arange(8, dtype=F32)}, {"shape": [4, 3], "strides": [1, 2], "offset": 0}, grad=False)

    def cast(x, dtype):
        return x.to({v: k for k, v in DTYPE_CODE.items()}[dtype])

    g.case("cast/f64_to_f32", cast, {"x": g.randn(3, 4)}, {"dtype": DTYPE_CODE[F32]})
    g.case("cast/f32_to_f64", cast, {"x": g.randn(3, 4, dtype=F32)}, {"dtype": DTYPE_CODE[F64]})
    vals = tensor([-2.75, -1.5, -0.5, -0.0, 0.0, 0.5, 1.99, 100.25], F32)  # truncation toward zero
    for dt in (I32, I64, I8):
        g.case(f"cast/f32_to_{str(dt).split('.')[-1]}", cast, {"x": vals}, {"dtype": DTYPE_CODE[dt]}, grad=False)
    g.case("cast/f32_to_u8", cast, {"x": vals.abs()}, {"dtype": DTYPE_CODE[U8]}, grad=False)
    g.case("cast/f32_to_bool", cast, {"x": tensor([0.0, -0.0, 0.5, NAN, -INF], F32)}, {"dtype": DTYPE_CODE[BOOL]},
           grad=False)
    g.case("cast/i32_to_f32", cast, {"x": tensor([-7, 0, 16777217], I32)}, {"dtype": DTYPE_CODE[F32]}, grad=False)
    g.case("cast/bool_to_i64", cast, {"x": tensor([True, False], BOOL)}, {"dtype": DTYPE_CODE[I64]}, grad=False)
    g.case("cast/i64_to_i8", cast, {"x": tensor([-128, 127, 5], I64)}, {"dtype": DTYPE_CODE[I8]}, grad=False)


# ---------------------------------------------------------------------------
# O8 convolution and pooling


def window(kernel, stride=None, padding=(0, 0), dilation=(1, 1)):
    return {"kernel": list(kernel), "stride": list(stride or kernel), "padding": list(padding),
            "dilation": list(dilation)}


def gen_conv(g):
    g.begin("o8_conv")

    def conv2d(x, w, bias=None, *, stride, padding, dilation, groups):
        return F.conv2d(x, w, bias, stride, padding, dilation, groups)

    g.seed("conv2d")
    g.case("conv2d/f64_bias", conv2d, {"x": g.randn(2, 3, 5, 6), "w": g.randn(4, 3, 3, 2), "bias": g.randn(4)},
           {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1})
    g.case("conv2d/f64_strided_padded", conv2d, {"x": g.randn(1, 2, 7, 6), "w": g.randn(3, 2, 3, 3)},
           {"stride": [2, 1], "padding": [1, 2], "dilation": [1, 2], "groups": 1})
    g.case("conv2d/f64_groups", conv2d, {"x": g.randn(2, 4, 5, 5), "w": g.randn(6, 2, 2, 2), "bias": g.randn(6)},
           {"stride": [1, 2], "padding": [1, 0], "dilation": [2, 1], "groups": 2})
    g.case("conv2d/f32", conv2d, {"x": g.randn(2, 3, 9, 9, dtype=F32), "w": g.randn(5, 3, 3, 3, dtype=F32),
                                  "bias": g.randn(5, dtype=F32)},
           {"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "groups": 1}, grad=False, atol=SUM_ATOL)

    def conv1d(x, w, bias=None, *, stride, padding, dilation, groups):
        return F.conv1d(x, w, bias, stride, padding, dilation, groups)

    g.seed("conv1d")
    g.case("conv1d/f64", conv1d, {"x": g.randn(2, 3, 9), "w": g.randn(4, 3, 3), "bias": g.randn(4)},
           {"stride": 2, "padding": 1, "dilation": 1, "groups": 1})
    g.case("conv1d/f64_groups_dilated", conv1d, {"x": g.randn(1, 4, 10), "w": g.randn(2, 2, 2)},
           {"stride": 1, "padding": 0, "dilation": 3, "groups": 2})

    def unfold(x, kernel, stride, padding, dilation):
        return F.unfold(x, kernel, dilation, padding, stride)

    def fold(cols, out_h, out_w, kernel, stride, padding, dilation):
        return F.fold(cols, (out_h, out_w), kernel, dilation, padding, stride)

    g.seed("unfold")
    g.case("unfold/f64", unfold, {"x": g.randn(2, 2, 4, 5)}, window((2, 3), (1, 1)))
    g.case("unfold/f64_padded_dilated", unfold, {"x": g.randn(1, 3, 5, 5)}, window((2, 2), (2, 1), (1, 1), (2, 1)))
    g.seed("fold")
    g.case("fold/f64_overlap", fold, {"cols": g.randn(2, 2 * 2 * 3, 3 * 3)},
           {"out_h": 4, "out_w": 5, **window((2, 3), (1, 1))})
    g.case("fold/f64_padded", fold, {"cols": g.randn(1, 3 * 2 * 2, 3 * 3)},
           {"out_h": 4, "out_w": 4, **window((2, 2), (2, 2), (1, 1))})

    def max_pool(x, kernel, stride, padding, dilation):
        return F.max_pool2d(x, kernel, stride, padding, dilation)

    def avg_pool(x, kernel, stride, padding, dilation, count_include_pad):
        assert dilation == [1, 1]
        return F.avg_pool2d(x, kernel, stride, padding, count_include_pad=count_include_pad)

    g.seed("max_pool2d")
    xp = g.randn(2, 3, 6, 7)
    g.case("max_pool2d/f64", max_pool, {"x": xp}, window((2, 2)))
    g.case("max_pool2d/f64_overlap_padded", max_pool, {"x": xp}, window((3, 3), (2, 1), (1, 1)))
    g.case("max_pool2d/f64_dilated", max_pool, {"x": xp}, window((2, 2), (1, 2), (0, 0), (2, 2)))
    xt = tensor([[[[1.0, 1.0, 2.0, 2.0], [1.0, 0.0, 2.0, -1.0], [NAN, 0.0, -INF, -INF], [3.0, 0.0, -INF, -INF]]]], F32)
    g.case("max_pool2d/f32_ties_nan", max_pool, {"x": xt}, window((2, 2)), grad=False)
    for inc in (True, False):
        g.case(f"avg_pool2d/f64_pad_{'incl' if inc else 'excl'}", avg_pool, {"x": xp},
               {**window((3, 2), (2, 2), (1, 1)), "count_include_pad": inc})
    g.case("avg_pool2d/f32", avg_pool, {"x": xp.to(F32)}, {**window((2, 2)), "count_include_pad": True}, grad=False)

    def unpool(x, indices, out_h, out_w):
        return F.max_unpool2d(x, indices, 2, output_size=(out_h, out_w))

    g.seed("max_unpool2d")
    pooled, idx = F.max_pool2d(g.randn(2, 2, 4, 6), 2, return_indices=True)
    g.case("max_unpool2d/f64", unpool, {"x": pooled, "indices": idx}, {"out_h": 4, "out_w": 6})
    g.case("max_unpool2d/f64_bigger", unpool, {"x": pooled, "indices": idx}, {"out_h": 5, "out_w": 7})


def gen_addmm(g):
    """addmm: torch.addmm (beta = alpha = 1) on matrices; batched, c + torch.matmul(a, b) (nabla's rounding:
    the product first, then c)."""
    g.begin("o5_addmm")
    g.seed("addmm/f64")
    g.case("addmm/f64_bias", torch.addmm, {"c": g.randn(5), "a": g.randn(3, 4), "b": g.randn(4, 5)})
    g.case("addmm/f64_column", torch.addmm, {"c": g.randn(3, 1), "a": g.randn(3, 4), "b": g.randn(4, 5)})
    g.case("addmm/f64_full", torch.addmm, {"c": g.randn(3, 5), "a": g.randn(3, 4), "b": g.randn(4, 5)})
    g.case("addmm/f64_batched", lambda c, a, b: c + torch.matmul(a, b),
           {"c": g.randn(2, 3, 1), "a": g.randn(2, 3, 4), "b": g.randn(4, 6)})
    g.seed("addmm/f32")
    g.case("addmm/f32_thin", torch.addmm, {"c": g.randn(9, dtype=F32), "a": g.randn(40, 33, dtype=F32),
                                           "b": g.randn(33, 9, dtype=F32)}, grad=False, atol=SUM_ATOL)


# ---------------------------------------------------------------------------
# O11 small batched linear algebra


def gen_small_linalg(g):
    g.begin("o11_linalg")

    def spd(*shape, dtype=F64):
        x = g.randn(*shape)
        n = shape[-1]
        return (x @ x.mT / n + torch.eye(n, dtype=F64)).to(dtype)

    def shifted(*shape, dtype=F64):  # diagonally dominant: well conditioned, det > 0
        return (g.randn(*shape) + 4 * torch.eye(shape[-1], dtype=F64)).to(dtype)

    g.seed("tril")
    g.case("tril/f64", lambda x, k: torch.tril(x, k), {"x": g.randn(2, 3, 4)}, {"k": 0})
    g.case("tril/f64_k1", lambda x, k: torch.tril(x, k), {"x": g.randn(3, 5)}, {"k": 1})
    g.seed("triu")
    g.case("triu/f64", lambda x, k: torch.triu(x, k), {"x": g.randn(2, 4, 3)}, {"k": -1})
    g.case("triu/i64", lambda x, k: torch.triu(x, k), {"x": g.randint(-5, 5, 3, 3)}, {"k": 0}, grad=False)
    g.seed("diag")
    g.case("diag/f64_vec", lambda x, k: torch.diag(x, k), {"x": g.randn(3)}, {"k": 1})
    g.case("diag/f64_mat", lambda x, k: torch.diag(x, k), {"x": g.randn(3, 4)}, {"k": -1})
    g.seed("diag_embed")
    g.case("diag_embed/f64", lambda x, offset, dim1, dim2: torch.diag_embed(x, offset, dim1, dim2),
           {"x": g.randn(2, 3)}, {"offset": 1, "dim1": 0, "dim2": 2})
    g.case("diag_embed/f64_last", lambda x, offset, dim1, dim2: torch.diag_embed(x, offset, dim1, dim2),
           {"x": g.randn(2, 3)}, {"offset": -2, "dim1": -2, "dim2": -1})
    g.seed("trace")
    g.case("trace/f64", torch.trace, {"x": g.randn(4, 3)})
    g.seed("cholesky")
    g.case("cholesky/f64", lambda a, upper: torch.linalg.cholesky(a, upper=bool(upper)), {"a": spd(3, 4, 4)},
           {"upper": 0})
    g.case("cholesky/f64_upper", lambda a, upper: torch.linalg.cholesky(a, upper=bool(upper)), {"a": spd(5, 5)},
           {"upper": 1})
    g.case("cholesky/f32", lambda a, upper: torch.linalg.cholesky(a, upper=bool(upper)),
           {"a": spd(2, 6, 6, dtype=F32)}, {"upper": 0}, grad=False)

    def tri(a, b, upper, transpose, unit):
        op_a = a.mT if transpose else a  # op(A) = A^T: A's upper triangle is op(A)'s lower one
        return torch.linalg.solve_triangular(op_a, b, upper=bool(upper) != bool(transpose), left=True,
                                             unitriangular=bool(unit))

    g.seed("solve_triangular")
    for upper in (0, 1):
        for transpose in (0, 1):
            for unit in (0, 1):
                g.case(f"solve_triangular/f64_u{upper}_t{transpose}_d{unit}", tri,
                       {"a": shifted(2, 3, 3), "b": g.randn(3, 2)},
                       {"upper": upper, "transpose": transpose, "unit": unit})
    g.case("solve_triangular/f32", tri, {"a": shifted(4, 4, dtype=F32), "b": g.randn(4, 3, dtype=F32)},
           {"upper": 0, "transpose": 0, "unit": 0}, grad=False)
    g.seed("solve")
    g.case("solve/f64", torch.linalg.solve, {"a": shifted(3, 3), "b": g.randn(3, 2)})
    g.case("solve/f64_vector", torch.linalg.solve, {"a": shifted(4, 4), "b": g.randn(4)})
    g.case("solve/f64_batch_vector", torch.linalg.solve, {"a": shifted(2, 3, 3), "b": g.randn(2, 3)})
    g.case("solve/f64_bcast", torch.linalg.solve, {"a": shifted(2, 1, 3, 3), "b": g.randn(4, 3, 2)})
    g.case("solve/f32", torch.linalg.solve, {"a": shifted(5, 5, dtype=F32), "b": g.randn(5, 3, dtype=F32)},
           grad=False)
    g.seed("slogdet")
    g.case("slogdet/f64", lambda a, both: torch.linalg.slogdet(a).logabsdet, {"a": shifted(2, 3, 3)}, {"both": 0})
    sing = torch.tensor([[[1.0, 2.0], [2.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]], [[-2.0, 0.0], [0.0, 3.0]]],
                        dtype=F64)
    g.case("slogdet/f64_signs", lambda a, both: tuple(torch.linalg.slogdet(a)), {"a": sing}, {"both": 1},
           grad=False)
    g.seed("det")
    g.case("det/f64", torch.linalg.det, {"x": shifted(2, 3, 3)})
    g.case("det/f64_signs", torch.linalg.det, {"x": sing}, grad=False)
    g.seed("logdet")
    g.case("logdet/f64", torch.logdet, {"x": spd(2, 3, 3)})
    g.case("logdet/f64_signs", torch.logdet, {"x": sing}, grad=False)
    g.seed("inv")
    g.case("inv/f64", torch.linalg.inv, {"x": shifted(2, 3, 3)})
    g.case("inv/f32", torch.linalg.inv, {"x": shifted(4, 4, dtype=F32)}, grad=False)


# ---------------------------------------------------------------------------
# O9 attention


ATTN = {"none": 0, "causal": 1, "sliding": 2, "key_padding": 3, "bool": 4, "bias": 5}  # nb_attn_mask


def attention(q, k, v, m=None, *, mask, window, scale, softcap):
    """nabla's scaled_dot_product_attention: torch's SDPA for the masks it has (GQA included), the
    float64 formula for the sliding window and the soft-cap (which torch's SDPA lacks)."""
    b, hq, lq, d = q.shape
    lk = k.shape[2]
    keep = None
    if mask == ATTN["causal"]:
        keep = torch.ones(lq, lk, dtype=torch.bool).tril()
    elif mask == ATTN["sliding"]:
        i, j = torch.arange(lq)[:, None], torch.arange(lk)[None, :]
        keep = (j <= i) & (j > i - window)
    elif mask == ATTN["key_padding"]:
        keep = (m if m.dtype == torch.bool else torch.arange(lk)[None, :] < m[:, None])[:, None, None, :]
    elif mask == ATTN["bool"]:
        keep = m
    if mask in (ATTN["sliding"],) or softcap:
        g = hq // k.shape[1]
        kk, vv = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        s = q @ kk.mT * (scale or d ** -0.5)
        if softcap:
            s = softcap * torch.tanh(s / softcap)
        if mask == ATTN["bias"]:
            s = s + m
        if keep is not None:
            s = s.masked_fill(~keep, -math.inf)
        return torch.softmax(s, -1) @ vv
    attn_mask = m if mask == ATTN["bias"] else keep
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, scale=scale or None, enable_gqa=True)


def rotary(x, *, offset, base, interleaved):
    """RoFormer's rotation in float64 (the formula; torch has no rotary op)."""
    l, d = x.shape[-2], x.shape[-1]
    ang = (offset + torch.arange(l, dtype=F64))[:, None] * base ** (-2 * torch.arange(d // 2, dtype=F64) / d)
    c, s = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    if interleaved:
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), -1).flatten(-2)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)


def gen_attention(g):
    g.begin("o9_attention")
    p0 = {"window": 0, "scale": 0.0, "softcap": 0.0}

    def case(tag, qs, ks, vs, mask, m=None, grad=True, dtype=F64, **kw):
        g.seed("scaled_dot_product_attention/" + tag)
        ins = {"q": g.randn(*qs, dtype=dtype), "k": g.randn(*ks, dtype=dtype), "v": g.randn(*vs, dtype=dtype)}
        if m is not None:
            ins["m"] = m
        params = dict(p0, mask=ATTN[mask], **kw)
        g.case(f"scaled_dot_product_attention/{tag}", attention, ins, params, grad=grad)

    case("none", (2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 4), "none")
    case("causal", (1, 2, 5, 4), (1, 2, 5, 4), (1, 2, 5, 3), "causal")
    case("causal_lq_lt_lk", (1, 2, 3, 4), (1, 2, 6, 4), (1, 2, 6, 4), "causal")
    case("gqa_causal", (2, 4, 5, 3), (2, 2, 5, 3), (2, 2, 5, 3), "causal")
    case("mqa", (1, 6, 4, 3), (1, 1, 5, 3), (1, 1, 5, 2), "none", scale=0.3)
    g.seed("attention_masks")
    keep = g.uniform(0, 1, 2, 1, 4, 6) > 0.4
    keep[..., 0] = True  # no query without keys (torch: NaN)
    case("bool", (2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 5), "bool", m=keep)
    case("bias", (2, 2, 4, 3), (2, 2, 5, 3), (2, 2, 5, 3), "bias", m=g.randn(1, 2, 4, 5))
    case("key_padding_lengths", (3, 2, 4, 3), (3, 2, 6, 3), (3, 2, 6, 3), "key_padding",
         m=torch.tensor([6, 2, 4], dtype=I64))
    pad = torch.tensor([[True] * 4 + [False] * 2, [True, False, True, True, True, False]])
    case("key_padding_bool", (2, 2, 3, 4), (2, 2, 6, 4), (2, 2, 6, 4), "key_padding", m=pad)
    case("sliding", (1, 2, 6, 4), (1, 2, 6, 4), (1, 2, 6, 4), "sliding", window=3)
    case("softcap", (2, 2, 4, 3), (2, 1, 5, 3), (2, 1, 5, 3), "causal", softcap=1.5, scale=0.8)
    case("f32_causal", (2, 4, 9, 8), (2, 2, 9, 8), (2, 2, 9, 8), "causal", grad=False, dtype=F32)
    g.seed("rotary_embedding")
    for inter in (0, 1):
        g.case(f"rotary_embedding/f64_i{inter}", rotary, {"x": g.randn(2, 3, 5, 6)},
               {"offset": 7, "base": 10000.0, "interleaved": inter})
    g.case("rotary_embedding/f32", rotary, {"x": g.randn(4, 8, dtype=F32)},
           {"offset": 0, "base": 500.0, "interleaved": 0}, grad=False)

    # a layer, not an op: in layers/ (test_golden replays only the op files beside it; test_attention reads it)
    g.begin("layers/n1_attention")
    g.seed("multi_head_attention")
    e, heads, kvh = 8, 4, 2
    kv = e // heads * kvh  # float32: the layer's parameters are float32
    ws = {"x": g.randn(2, 5, e, dtype=F32), "wq": g.randn(e, e, dtype=F32), "bq": g.randn(e, dtype=F32),
          "wk": g.randn(kv, e, dtype=F32), "bk": g.randn(kv, dtype=F32), "wv": g.randn(kv, e, dtype=F32),
          "bv": g.randn(kv, dtype=F32), "wo": g.randn(e, e, dtype=F32), "bo": g.randn(e, dtype=F32)}

    def mha(x, wq, bq, wk, bk, wv, bv, wo, bo, *, heads, kv_heads, mask):
        b, l, _ = x.shape

        def split(t, h):
            return t.reshape(b, l, h, -1).transpose(1, 2)

        q, k, v = split(F.linear(x, wq, bq), heads), split(F.linear(x, wk, bk), kv_heads), split(F.linear(x, wv, bv), kv_heads)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=mask == ATTN["causal"], enable_gqa=True)
        return F.linear(y.transpose(1, 2).reshape(b, l, -1), wo, bo)

    g.case("multi_head_attention/gqa_causal", mha, ws, {"heads": heads, "kv_heads": kvh, "mask": ATTN["causal"]},
           grad=False)



# ---------------------------------------------------------------------------
# O10 scaled low-precision formats (oracle: lowp_oracle.py, NumPy and ml_dtypes)


def gen_lowp(g):
    import lowp_oracle as lo

    g.begin("o10_lowp")
    t = torch.from_numpy
    names = [f[0] for f in lo.FORMATS]

    def quant_inputs(x, fmt, layout, tag):
        codes, sc, gs = lo.quantize(x, fmt, layout)
        d = {tag + "codes": t(codes), tag + "scales": t(np.asarray(sc))}
        if gs is not None:
            d[tag + "global"] = t(np.asarray(gs))
        return d

    def blocks_varied(rows, k, spread):  # magnitudes that differ by block
        x = g.rng.standard_normal((rows, k)) * np.exp2(g.rng.uniform(-spread, spread, (rows, k // 16))).repeat(16, 1)
        return x.astype(np.float32)

    for fmt, name in enumerate(names):
        bits = lo.bits_of(fmt)
        layouts = [lo.TENSOR] + ([lo.MX] if "fnuz" not in name else []) + ([lo.NVFP4] if bits == 4 else [])
        # every code point, decoded through the op (per-tensor scale 1)
        codes = lo.pack(np.arange(1 << bits, dtype=np.uint8), bits)
        g.case(f"dequantize/{name}_all_codes", lambda codes, scales, format, layout: t(lo.decode(np.arange(1 << bits), fmt)),
               {"codes": t(codes), "scales": torch.tensor(1.0, dtype=F32)}, {"format": fmt, "layout": lo.TENSOR},
               grad=False)
        for layout in layouts:
            lname = ["tensor", "mx", "nvfp4"][layout]
            g.seed(f"quantize/{name}_{lname}")
            x = blocks_varied(3, 64, 12 if layout != lo.TENSOR else 2)
            if layout != lo.TENSOR:
                x[1, 16:32] = 0  # a block of zeros
                x[2, 0:16] *= 1e-30  # tiny values: subnormal scales and results
            g.case(f"quantize/{name}_{lname}", lambda x, format, layout: tuple(
                       t(np.asarray(v)) for v in lo.quantize(x.numpy(), format, layout) if v is not None),
                   {"x": t(x)}, {"format": fmt, "layout": layout}, grad=False)
            if layout == lo.MX and fmt in (0, 6):  # NaN and inf make their block's scale NaN
                x[0, 3] = np.nan
                x[1, 40] = -np.inf
                g.case(f"quantize/{name}_{lname}_nonfinite", lambda x, format, layout: tuple(
                           t(np.asarray(v)) for v in lo.quantize(x.numpy(), format, layout) if v is not None),
                       {"x": t(x)}, {"format": fmt, "layout": layout}, grad=False)
            # dequantize random codes and scale codes (NaN codes and NaN scales included)
            k = 64
            rc = g.rng.integers(0, 1 << bits, (2, 2, k)).astype(np.uint8)
            ins = {"codes": t(lo.pack(rc, bits))}
            if layout == lo.TENSOR:
                ins["scales"] = torch.tensor(0.375, dtype=F32)
            elif layout == lo.MX:
                sc = g.rng.integers(100, 160, (2, 2, k // 32)).astype(np.uint8)
                sc[0, 0, 0] = 255
                sc[1, 1, 1] = 0
                ins["scales"] = t(sc)
            else:
                ins["scales"] = t(g.rng.integers(0, 256, (2, 2, k // 16)).astype(np.uint8))
                ins["global"] = torch.tensor(0.0123, dtype=F32)
            g.case(f"dequantize/{name}_{lname}", lambda codes, scales, *gl, format, layout: t(lo.dequantize(
                       codes.numpy(), scales.numpy(), gl[0].numpy() if gl else None, format, layout)),
                   ins, {"format": fmt, "layout": layout}, grad=False)
    # scaled_matmul: a [..., M, K] times b [N, K] transposed, against float64 of the dequantized operands
    combos = [(0, 0, lo.TENSOR), (0, 1, lo.TENSOR), (2, 3, lo.TENSOR), (0, 0, lo.MX), (1, 0, lo.MX), (4, 5, lo.MX),
              (6, 6, lo.MX), (6, 6, lo.NVFP4), (5, 6, lo.TENSOR)]
    for fa, fb, layout in combos:
        lname = ["tensor", "mx", "nvfp4"][layout]
        key = f"scaled_matmul/{names[fa]}_{names[fb]}_{lname}"
        g.seed(key)
        a = blocks_varied(2 * 5, 64, 3).reshape(2, 5, 64) if fa == 0 and layout == lo.MX else blocks_varied(5, 64, 3)
        b = blocks_varied(7, 64, 3)
        ins = {}
        ins.update(quant_inputs(a, fa, layout, "a_"))
        ins.update(quant_inputs(b, fb, layout, "b_"))

        def mm(*ts, fa=fa, fb=fb, layout=layout, **p):
            d = dict(zip(ins.keys(), [v.numpy() for v in ts]))
            av = lo.dequantize(d["a_codes"], d["a_scales"], d.get("a_global"), fa, layout).astype(np.float64)
            bv = lo.dequantize(d["b_codes"], d["b_scales"], d.get("b_global"), fb, layout).astype(np.float64)
            return t((av @ bv.T).astype(np.float32))

        g.case(key, mm, ins, {"format_a": fa, "format_b": fb, "layout": layout}, grad=False, atol=SUM_ATOL)


def gen_lowp_codec(g):
    """lowp/codec.nbg (read by tests/test_lowp.c, not test_golden.c): ml_dtypes' encoding of
    float32 values around every code point of each format, and the decoding of every code."""
    import lowp_oracle as lo

    g.begin("lowp/codec")
    f32 = np.float32
    for fmt, (name, bits, _) in enumerate(lo.FORMATS):
        g.seed("codec/" + name)
        v = lo.decode(np.arange(1 << bits), fmt).astype(np.float64)
        v = np.unique(np.abs(v[np.isfinite(v)]))  # 0 and the positive values, ascending
        mids = ((v[:-1] + v[1:]) / 2).astype(f32)  # ties: exact in float32
        top = v[-1] + (v[-1] - v[-2]) / 2  # the tie above the largest value
        vals = [v.astype(f32), mids, np.nextafter(mids, f32(np.inf)), np.nextafter(mids, f32(0)),
                np.array([top, v[-1] * 1.0001, v[-1] * 2, 1e30, np.finfo(f32).max, 1e-45, 1e-40, 1e-38,
                          np.finfo(f32).tiny, v[1] / 4, v[1] / 2 * 1.0000001], f32).astype(f32)]
        vals.append(np.nextafter(f32(top), f32(np.inf), dtype=f32).reshape(1))
        vals.append(np.nextafter(f32(top), f32(0), dtype=f32).reshape(1))
        e = g.rng.integers(-12 - 2 * bits, 20, 1200)
        vals.append((g.rng.uniform(1, 2, 1200) * np.exp2(e)).astype(f32))
        x = np.concatenate(vals).astype(f32)
        x = np.concatenate([x, -x, np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0], f32)])
        g.case(f"encode/{name}", lambda x, format: t_from(lo.encode(x.numpy(), format)), {"x": torch.from_numpy(x)},
               {"format": fmt}, grad=False)
        codes = np.arange(1 << bits, dtype=np.uint8)
        g.case(f"decode/{name}", lambda codes, format: t_from(lo.decode(codes.numpy(), format)),
               {"codes": torch.from_numpy(codes)}, {"format": fmt}, grad=False)


def t_from(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)), help="output folder")
    ap.add_argument("--only", nargs="*", help="write only these generators (e.g. gen_lowp gen_lowp_codec)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", message="Using a target size")  # mse_loss/f64_bcast broadcasts on purpose
    warnings.filterwarnings("ignore", message=".*degrees of freedom is <= 0")  # var/std NaN cases on purpose
    g = Golden()
    for gen in (gen_unary, gen_binary, gen_scalar, gen_reduce, gen_linalg, gen_addmm, gen_nn, gen_index, gen_conv,
                gen_layout, gen_small_linalg, gen_attention, gen_lowp, gen_lowp_codec):
        if not args.only or gen.__name__ in args.only:
            gen(g)
    g.write(args.out)


if __name__ == "__main__":
    main()
