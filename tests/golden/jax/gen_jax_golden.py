#!/usr/bin/env python3
"""gen_jax_golden.py — write x_transforms.nbg, the JAX goldens of tests/test_transforms.c.

Run with a Python that has JAX (with its CPU jaxlib) and numpy from PyPI
(requirements.txt beside it; `cmake --build BUILD --target golden_jax` makes the
venv).  The C test reads only the committed file.  Same format as
../gen_golden.py's (NBG1): each case holds in.NAME inputs and out.NAME results,
float64 (JAX with jax_enable_x64).

The functions are the ones test_transforms.c builds in nabla:
  vmap_grad/per_example   jit(vmap(grad(loss, (W, x)), in_axes (0, 0)))
  grad_grad/scalar        grad(grad(sin(x) x^3))
  jvp_grad/vector         jvp(grad(f), x, t) with f(x) = sum(exp(x) x) + sum(x)^2 (an hvp)
  vmap_vmap/axes          vmap(vmap(f, (0, None)), (None, 1)) of f(a, b) = sum(sin(a) b)
  jacobian/tanh_matvec    jacfwd (and jacrev) of tanh(W x)
"""
import argparse
import os
import struct

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

F64_CODE = 1  # nabla's NB_F64


def enc_str(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


def enc_array(name, a):
    a = np.array(a, dtype="<f8", order="C")  # (ascontiguousarray would make a 0-d array 1-d)
    head = enc_str(name) + struct.pack("<II", F64_CODE, a.ndim) + struct.pack(f"<{a.ndim}q", *a.shape)
    return head + a.tobytes()


def case(name, **tensors):
    body = enc_str(name) + struct.pack("<I", len(tensors))
    return body + b"".join(enc_array(k.replace("__", "."), v) for k, v in tensors.items())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    out = ap.parse_args().out
    rng = np.random.default_rng(20261202)
    cases = []

    def loss(W, b, x, y):
        z = jnp.tanh(x @ W + b)
        return -jnp.sum(y * jax.nn.log_softmax(z, axis=-1))

    W, b = rng.standard_normal((4, 3)), rng.standard_normal(3)
    x = rng.standard_normal((6, 4))
    y = np.eye(3)[rng.integers(0, 3, 6)]
    per_ex = jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 2)), in_axes=(None, None, 0, 0)))
    gW, gx = per_ex(W, b, x, y)
    cases.append(case("vmap_grad/per_example", in__W=W, in__b=b, in__x=x, in__y=y, out__gW=gW, out__gx=gx))

    xs = np.array(0.7)
    cases.append(case("grad_grad/scalar", in__x=xs, out__0=jax.grad(jax.grad(lambda v: jnp.sin(v) * v**3))(xs)))

    def f(v):
        return jnp.sum(jnp.exp(v) * v) + jnp.sum(v) ** 2

    xv, tv = rng.standard_normal(5), rng.standard_normal(5)
    primal, tangent = jax.jvp(jax.grad(f), (xv,), (tv,))
    cases.append(case("jvp_grad/vector", in__x=xv, in__t=tv, out__0=primal, out__1=tangent))

    def d(a, bb):
        return jnp.sum(jnp.sin(a) * bb)

    a, bb = rng.standard_normal((4, 3)), rng.standard_normal((3, 5))
    vv = jax.vmap(jax.vmap(d, in_axes=(0, None)), in_axes=(None, 1))(a, bb)
    cases.append(case("vmap_vmap/axes", in__a=a, in__b=bb, out__0=vv))

    Wj, xj = rng.standard_normal((3, 4)), rng.standard_normal(4)
    jf = jax.jacfwd(lambda v: jnp.tanh(Wj @ v))(xj)
    jr = jax.jacrev(lambda v: jnp.tanh(Wj @ v))(xj)
    assert np.allclose(jf, jr, rtol=1e-14, atol=1e-14)
    cases.append(case("jacobian/tanh_matvec", in__W=Wj, in__x=xj, out__0=jf))

    data = b"NBG1" + struct.pack("<I", len(cases)) + b"".join(cases)
    path = os.path.join(out, "x_transforms.nbg")
    with open(path, "wb") as fh:
        fh.write(data)
    print(f"{path}: {len(cases)} cases, {len(data)} bytes (jax {jax.__version__}, numpy {np.__version__})")


if __name__ == "__main__":
    main()
