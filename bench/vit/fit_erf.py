#!/usr/bin/env python3
"""The coefficients of the ViT kernels' erf (runtime/vit_kernel_math.hpp).

The GELU needs 1 + erf(z) (= 2 Phi(z sqrt 2)) in float32, accurately also
for negative z, where it is erfc(-z). The kernels compute, for |z| < 4,
erfc(|z|) = exp(-z^2 + F(|z| - 2)) with F a polynomial of degree 11 fitted
here to log(erfc(z)) + z^2 on [0, 4] (a smooth function from 0 to about
-2.2), and take 1 + erf(z) = 2 - erfc(z) for z >= 0 and erfc(-z) for z < 0;
beyond |z| = 4, 2 or 0. One branch, one exp.

The fit: least squares at 8,000 Chebyshev nodes, reweighted 100 times
towards the nodes with the largest error (Lawson's iteration, which tends
to the minimax polynomial). Prints the fit's largest error, the largest
error of 1 + erf evaluated in float32 as the kernels evaluate it (float32
coefficients, fused multiply-adds, a correctly rounded exp), and the
coefficients as C++ float literals, lowest degree first.

    /usr/bin/python3 bench/vit/fit_erf.py     (needs numpy)
"""
import math

import numpy as np

DEGREE = 11
LOW, HIGH, CENTRE = 0.0, 4.0, 2.0
NODES = 8000


def fit():
    z = (np.cos(np.pi * (np.arange(NODES) + 0.5) / NODES) * 0.5 + 0.5) * (HIGH - LOW) + LOW
    target = np.array([math.log(math.erfc(v)) + v * v for v in z])
    powers = np.vstack([(z - CENTRE) ** i for i in range(DEGREE + 1)]).T
    weights = np.ones(NODES)
    for _ in range(100):
        coefficients, *_ = np.linalg.lstsq(powers * weights[:, None], target * weights,
                                           rcond=None)
        error = np.abs(powers @ coefficients - target)
        weights *= np.sqrt(error / error.max() + 1e-4)
    return coefficients, np.max(np.abs(powers @ coefficients - target))


def one_plus_erf_float32(z, coefficients):
    f32 = np.float32
    z = f32(z)
    a = f32(min(abs(z), HIGH))
    t = f32(a - f32(CENTRE))
    p = coefficients[-1]
    for c in coefficients[-2::-1]:
        p = f32(np.float64(p) * np.float64(t) + np.float64(c))  # one rounding: a fused multiply-add
    exponent = f32(-np.float64(a) * np.float64(a) + np.float64(p))
    erfc = f32(math.exp(float(exponent)))
    if abs(z) >= HIGH:
        return f32(2.0) if z > 0 else f32(0.0)
    return f32(f32(2.0) - erfc) if z >= 0 else erfc


def main():
    coefficients, fit_error = fit()
    as_float = [np.float32(c) for c in coefficients]
    grid = np.linspace(-5.0, 5.0, 100001)
    worst = max(abs(float(one_plus_erf_float32(v, as_float)) - (1.0 + math.erf(float(np.float32(v)))))
                for v in grid)
    print(f"degree {DEGREE} on [{LOW}, {HIGH}] in z - {CENTRE}: fit error {fit_error:.2e}, "
          f"1 + erf in float32 within {worst:.2e}")
    print(", ".join(f"{float(c):.9g}f" for c in as_float))


if __name__ == "__main__":
    main()
