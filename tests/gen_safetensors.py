#!/usr/bin/env python3
"""gen_safetensors.py — writes tests/data/py_written.safetensors with the Python
`safetensors` package (pip install safetensors numpy), for the interop test in
tests/test_io_safetensors.c.

Every tensor's values come from a formula of the flat row-major index i; the
C test and tests/check_safetensors.py evaluate the same formulas (keep the
three in sync).  BF16 is left out: NumPy has no bfloat16.
"""
import os
import sys

import numpy as np


def expected():
    """name -> array, each value a formula of its flat index i."""

    def idx(n):
        return np.arange(n, dtype=np.float64)

    return {
        "f32_matrix": (idx(24) * 0.25 - 3).astype(np.float32).reshape(2, 3, 4),
        "f64_vector": (idx(5) * 0.5 - 7) / (idx(5) + 1),
        "f16_vector": (idx(6) * 0.5 - 1).astype(np.float16),
        "i64_matrix": (np.arange(6, dtype=np.int64) * 1000000007 - 5).reshape(3, 2),
        "i32_vector": np.arange(4, dtype=np.int32) * -3,
        "i8_vector": (np.arange(9) - 4).astype(np.int8),
        "u8_vector": (np.arange(7) * 37 % 256).astype(np.uint8),
        "bool_vector": np.arange(5) % 3 == 0,
        "f32_scalar": np.array(3.5, dtype=np.float32),
        "f32_empty": np.zeros((0, 3), dtype=np.float32),
    }


def main():
    from safetensors.numpy import save_file

    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "py_written.safetensors")
    save_file(expected(), out, metadata={"generator": "tests/gen_safetensors.py"})
    print("wrote", out)


if __name__ == "__main__":
    sys.exit(main())
