#!/usr/bin/env python3
"""The coefficients of the ViT kernels' erf (runtime/vit_kernel_math.hpp).

The GELU needs 1 + erf(z) (= 2 Phi(z sqrt 2)) in float32, accurately also
for negative z, where it is erfc(-z), and its derivative needs exp(-z^2)
(z = x / sqrt 2). The kernels compute e = exp(-z^2) once and, for |z| < 4,
erfc(|z|) = e * G(|z| - 2), with G a polynomial of degree 15 fitted here to
exp(a^2) erfc(a) (the scaled complementary error function, smooth, from 1
down to 0.14 on [0, 4]); then 1 + erf(z) = 2 - erfc(z) for z >= 0 and
erfc(-z) for z < 0, and beyond |z| = 4, 2 or 0. One branch, one exp shared
with the derivative.

The fit: least squares in relative error at 8,000 Chebyshev nodes,
reweighted 100 times towards the nodes with the largest error (Lawson's
iteration, which tends to the minimax polynomial). Prints the fit's largest
relative error, the largest error of 1 + erf evaluated in float32 as the
kernels evaluate it (float32 coefficients, fused multiply-adds, a correctly
rounded exp), and the coefficients as C++ float literals, lowest degree
first.

    /usr/bin/python3 bench/vit/fit_erf.py     (needs numpy)
"""
import math

import numpy as np

DEGREE = 15
LOW, HIGH, CENTRE = 0.0, 4.0, 2.0
NODES = 8000


def scaled_erfc(a):
    return math.exp(a * a) * math.erfc(a)


def fit():
    a = (np.cos(np.pi * (np.arange(NODES) + 0.5) / NODES) * 0.5 + 0.5) * (HIGH - LOW) + LOW
    target = np.array([scaled_erfc(v) for v in a])
    powers = np.vstack([(a - CENTRE) ** i for i in range(DEGREE + 1)]).T / target[:, None]
    weights = np.ones(NODES)
    for _ in range(100):
        coefficients, *_ = np.linalg.lstsq(powers * weights[:, None], weights, rcond=None)
        error = np.abs(powers @ coefficients - 1.0)
        weights *= np.sqrt(error / error.max() + 1e-4)
    return coefficients, np.max(np.abs(powers @ coefficients - 1.0))


def one_plus_erf_float32(z, coefficients):
    f32 = np.float32
    z = f32(z)
    e = f32(math.exp(float(f32(-np.float64(z) * np.float64(z)))))  # -z*z: one rounding
    a = f32(min(abs(z), HIGH))
    t = f32(a - f32(CENTRE))
    g = coefficients[-1]
    for c in coefficients[-2::-1]:
        g = f32(np.float64(g) * np.float64(t) + np.float64(c))  # one rounding: a fused multiply-add
    erfc = f32(e * g)
    if abs(z) >= HIGH:
        return f32(2.0) if z > 0 else f32(0.0)
    return f32(f32(2.0) - erfc) if z >= 0 else erfc


def main():
    coefficients, fit_error = fit()
    as_float = [np.float32(c) for c in coefficients]
    grid = np.linspace(-5.0, 5.0, 100001)
    worst = max(abs(float(one_plus_erf_float32(v, as_float)) - (1.0 + math.erf(float(np.float32(v)))))
                for v in grid)
    print(f"degree {DEGREE} on [{LOW}, {HIGH}] in a - {CENTRE}: relative fit error "
          f"{fit_error:.2e}, 1 + erf in float32 within {worst:.2e}")
    print(", ".join(f"{float(c):.9g}f" for c in as_float))


if __name__ == "__main__":
    main()
