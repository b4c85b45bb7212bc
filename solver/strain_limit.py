"""Strain limiting as an XPBD inequality constraint (Provot 1995; Mueller 2008 HPBD's unilateral links).

``C = |x_i - x_j| - L_max <= 0`` with ``L_max = (1 + limit) L0`` and compliance 0: nothing happens
while the pair is closer than ``L_max`` (the material's own compliance governs there), and a
violating pair is projected back onto ``L_max`` with the usual mass-weighted split,
``dx_i = -w_i / (w_i + w_j) C n``. With alpha = 0 the XPBD multiplier never enters the update
(alpha~ lambda = 0) and one projection per pass makes the unilateral clamp a test on C, so no
multiplier is stored. Used for every coarse level of :mod:`.multilevel`.
"""

from __future__ import annotations

from numba import njit

from . import _numba_setup  # noqa: F401  (cache directory before any compilation)
from ._intrinsics import sqrt
from .kernels import _JIT


@njit(inline="always", **_JIT)
def solve_strain_limit(k, x, inv_mass, vertices, max_length):
    """Project pair k back onto ``max_length[k]`` when it is longer (see the module docstring).

    Returns 1 when the pair was violating (for the diagnostics' active-set count), else 0.
    """
    i = vertices[k, 0]
    j = vertices[k, 1]
    dx = x[i, 0] - x[j, 0]
    dy = x[i, 1] - x[j, 1]
    dz = x[i, 2] - x[j, 2]
    length_sq = dx * dx + dy * dy + dz * dz
    limit = max_length[k]
    if length_sq <= limit * limit:
        return 0
    wi = inv_mass[i]
    wj = inv_mass[j]
    w = wi + wj
    if w <= 0.0:
        return 0
    length = sqrt(length_sq)
    s = (length - limit) / (length * w)
    x[i, 0] -= wi * s * dx
    x[i, 1] -= wi * s * dy
    x[i, 2] -= wi * s * dz
    x[j, 0] += wj * s * dx
    x[j, 1] += wj * s * dy
    x[j, 2] += wj * s * dz
    return 1
