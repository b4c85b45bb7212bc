"""solver._intrinsics.sqrt: the same bits as math.sqrt, as an instruction instead of a library call."""

import math

import numpy as np
from numba import njit

from selvedge.solver import _intrinsics as intrinsics


@njit(error_model="numpy")
def _both(values, ours, libm):
    for i in range(values.shape[0]):
        ours[i] = intrinsics.sqrt(values[i])
        libm[i] = math.sqrt(values[i])


@njit(error_model="numpy")
def _distance_ours(a, b, out):
    for i in range(a.shape[0]):
        out[i] = intrinsics.sqrt((a[i, 0] - b[i, 0]) ** 2 + (a[i, 1] - b[i, 1]) ** 2 + (a[i, 2] - b[i, 2]) ** 2)


@njit(error_model="numpy")
def _distance_libm(a, b, out):
    for i in range(a.shape[0]):
        out[i] = math.sqrt((a[i, 0] - b[i, 0]) ** 2 + (a[i, 1] - b[i, 1]) ** 2 + (a[i, 2] - b[i, 2]) ** 2)


def test_sqrt_matches_math_sqrt_to_the_bit():
    rng = np.random.default_rng(3)
    values = np.concatenate(
        [
            10.0 ** rng.uniform(-300, 300, 20000),  # every exponent range
            rng.uniform(0.0, 1.0, 20000),
            np.array([0.0, -0.0, 5e-324, 2.2e-308, 1.0, 2.0, 4.0, np.inf, -np.inf, np.nan, -1.0, -1e-300]),
        ]
    )
    ours, libm = np.empty_like(values), np.empty_like(values)
    _both(values, ours, libm)
    assert np.array_equal(ours.view(np.int64)[np.isfinite(libm)], libm.view(np.int64)[np.isfinite(libm)])
    assert np.array_equal(np.isnan(ours), np.isnan(libm))  # negatives and NaN give NaN
    assert np.isnan(libm).sum() == 4 and np.signbit(ours[values == 0.0]).sum() == 1  # -0.0 stays -0.0
    assert ours[values == np.inf][0] == np.inf


def test_sqrt_of_squares_written_with_power_is_an_instruction_not_a_call():
    """The reason the module exists: LLVM keeps math.sqrt of ``x ** 2`` sums a C library call."""
    a, b = np.random.default_rng(0).normal(size=(2, 64, 3))
    ours, libm = np.empty(64), np.empty(64)
    _distance_ours(a, b, ours)
    _distance_libm(a, b, libm)
    assert np.array_equal(ours, libm)
    assert np.allclose(ours, np.linalg.norm(a - b, axis=1), rtol=1e-15, atol=0)
    ir_ours = _distance_ours.inspect_llvm(_distance_ours.signatures[0])
    ir_libm = _distance_libm.inspect_llvm(_distance_libm.signatures[0])
    assert "@sqrt(" in ir_libm  # the library call this replaces (if Numba ever inlines it, drop the module)
    assert "@sqrt(" not in ir_ours and "llvm.sqrt.f64" in ir_ours
