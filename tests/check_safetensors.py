#!/usr/bin/env python3
"""check_safetensors.py FILE — loads a safetensors file written by the C test
(tests/test_io_safetensors.c) with the Python `safetensors` package and checks
names, dtypes, shapes and values against gen_safetensors.expected().  Exit
status 0 when everything matches, 1 otherwise (the differences on stderr)."""
import sys

import numpy as np
from safetensors.numpy import load_file

from gen_safetensors import expected


def main(path):
    got, want = load_file(path), expected()
    errors = []
    if sorted(got) != sorted(want):
        errors.append(f"names {sorted(got)} != {sorted(want)}")
    for name in sorted(set(got) & set(want)):
        g, w = got[name], want[name]
        if g.dtype != w.dtype or g.shape != w.shape or not np.array_equal(g, w):
            errors.append(f"{name}: got {g.dtype}{list(g.shape)} {g.ravel()[:8]}, "
                          f"want {w.dtype}{list(w.shape)} {w.ravel()[:8]}")
    for e in errors:
        print(e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
