#!/usr/bin/env python3
"""Fit of vmath.h's Gaussian tail: R(a) = e^{a^2/2} Phi(-a) = erfcx(a/sqrt(2))/2 ~ N(a)/D(a).

N has degree 3 and D degree 4, with N(0) = c/2 and D(0) = c.  The common scale c is free:
it moves the values of N and D within their binades, which changes the rounding error of
their float evaluation, not the quotient; vmath.h uses c = 1, the one of 1, 9/8, 5/4,
11/8, 3/2, 13/8, 7/4, 29/16, 15/8 and 31/16 whose float evaluation in nb_geluf (R = N/D
first, then R e^r) measured the smallest maximum error (the larger of with and without
FMA).  Minimized: the maximum relative error on [0, TL] (gelu's left side needs Phi(-a)
to relative accuracy there) and, on (TL, TR], the relative error times min(1, 16 Phi(-a))
(there only Phi(-a)'s absolute error counts: gelu's right side and erf's tail).

Method: Sanathanan-Koerner linearization (N - R D = 0 weighted by 1 / (|D_prev| R)) on
20000 Chebyshev points, with Lawson's iteratively reweighted least squares toward the
minimax solution; then the coefficients are rounded to float one at a time (N's from the
highest power down, then D's), the remaining ones refitted after each rounding.  R comes from
scipy.special.erfcx (double precision).

    python3 scripts/fit_gauss_tail.py [c]       prints the coefficients and the fit error
"""
import sys

import numpy as np
from scipy.special import erfcx

TL, TR, M, N = 4.0, 5.75, 3, 4
C = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0

a = np.cos(np.linspace(0, np.pi, 20000)) * TR / 2 + TR / 2
r = 0.5 * erfcx(a / np.sqrt(2))
q = np.exp(-a * a / 2) * r
weight = np.where(a <= TL, 1.0, np.minimum(1.0, 16 * q)) / r
s = a / TR  # solved in s = a / TR for conditioning
cols = np.stack([s**k for k in range(1, M + 1)] + [-r * s**k for k in range(1, N + 1)], 1)


def evaluate(coef):
    num = C / 2 + sum(coef[k - 1] * s**k for k in range(1, M + 1))
    den = C + sum(coef[M + k - 1] * s**k for k in range(1, N + 1))
    return num, den


def solve(fixed, iters=300):
    """Weighted minimax fit of the coefficients not in `fixed` (index -> value)."""
    free = [i for i in range(M + N) if i not in fixed]
    # N(s) - r D(s) = 0  <=>  sum n_k s^k - r sum d_k s^k = C r - C/2
    b0 = C * r - C / 2 - sum(cols[:, i] * v for i, v in fixed.items())
    den, lw, best = np.ones_like(s), np.ones_like(s), (np.inf, None)
    for it in range(iters):
        w = np.sqrt(lw) * weight / np.abs(den)
        sol = np.linalg.lstsq(cols[:, free] * w[:, None], b0 * w, rcond=None)[0]
        coef = np.zeros(M + N)
        coef[free] = sol
        for i, v in fixed.items():
            coef[i] = v
        num, den = evaluate(coef)
        err = np.abs(num / den - r) * weight
        if err.max() < best[0]:
            best = (err.max(), coef)
        if it > 20:
            lw = lw * np.sqrt(err)
            lw /= lw.sum()
    return best


err, _ = solve({})
print("double coefficients: max weighted relative error 2^%.2f" % np.log2(err))
fixed = {}
for i in list(range(M))[::-1] + list(range(M, M + N))[::-1]:
    _, coef = solve(fixed)
    k = i + 1 if i < M else i - M + 1
    fixed[i] = float(np.float32(coef[i] / TR**k)) * TR**k
err, coef = solve(fixed, 1)
print("float coefficients: max weighted relative error 2^%.2f" % np.log2(err))
num = [fixed[i] / TR ** (i + 1) for i in range(M)][::-1] + [C / 2]
den = [fixed[M + i] / TR ** (i + 1) for i in range(N)][::-1] + [C]
print("N (a^3 .. a^0):", ", ".join("%.8ef" % v for v in num))
print("D (a^4 .. a^0):", ", ".join("%.8ef" % v for v in den))
