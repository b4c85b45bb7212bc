"""Strain limiting as an XPBD inequality constraint (Provot 1995; Mueller 2008 HPBD's unilateral links).

``C = |x_i - x_j| - L_max <= 0`` with ``L_max = (1 + limit) L0`` and compliance 0: nothing happens
while the pair is closer than ``L_max`` (the material's own compliance governs there), and a
violating pair is projected back onto ``L_max`` with the usual mass-weighted split,
``dx_i = -w_i / (w_i + w_j) C n``. With alpha = 0 the XPBD multiplier never enters the update
(alpha~ lambda = 0) and one projection per pass makes the unilateral clamp a test on C, so no
multiplier is stored. Used for every coarse level of :mod:`.multilevel`.

Contacts: a vertex that a contact pushed in the last substep carries that push's direction
``n`` (unit, pointing out of the collider or the other cloth; zero for a free vertex). Its share
of the correction may slide it along the surface or lift it off, never press it in: the part of
its correction direction ``e`` along ``-n`` is removed (``e <- e - min(e . n, 0) n``) and the
multiplier is taken along the directions actually used, ``s = C / (w_i d . (-e_i) + w_j d . e_j)``
(d the unit vector from j to i), the Gauss-Seidel step of the constraint restricted to the
allowed motions. Without it the coarse links shorten their chords through a convex body and the
contacts then push the vertices back out, stretching the links again (issue 21).
"""

from __future__ import annotations

from numba import njit

from . import _numba_setup  # noqa: F401  (cache directory before any compilation)
from ._intrinsics import sqrt
from .kernels import _JIT


@njit(inline="always", **_JIT)
def separation_of_members(k, x, vertices):
    """Pair k's ends and the separation ``x_i - x_j`` of the two members themselves."""
    i = vertices[k, 0]
    j = vertices[k, 1]
    return i, j, x[i, 0] - x[j, 0], x[i, 1] - x[j, 1], x[i, 2] - x[j, 2]


@njit(inline="always", **_JIT)
def separation_with_offsets(k, x, vertices, offset):
    """Pair k's ends and the separation of the points its link is measured at, ``x + offset``
    (:func:`.multilevel.aggregate_offsets`: part of the way to the ends' aggregates' centres)."""
    i, j, dx, dy, dz = separation_of_members(k, x, vertices)
    return i, j, dx + offset[i, 0] - offset[j, 0], dy + offset[i, 1] - offset[j, 1], dz + offset[i, 2] - offset[j, 2]


@njit(inline="always", **_JIT)
def _violation(i, j, dx, dy, dz, inv_mass, limit):
    """Whether the pair (i, j) with separation (dx, dy, dz) is longer than ``limit`` with a movable
    end: ``(violating, length, wi, wj, w)`` (``length`` only computed for a violating pair)."""
    length_sq = dx * dx + dy * dy + dz * dz
    wi = inv_mass[i]
    wj = inv_mass[j]
    w = wi + wj
    if length_sq <= limit * limit or w <= 0.0:
        return False, 0.0, wi, wj, w
    return True, sqrt(length_sq), wi, wj, w


@njit(inline="always", **_JIT)
def _project(x, i, j, dx, dy, dz, length, limit, wi, wj, w):
    """The mass-weighted projection of a violating pair back onto ``limit`` (module docstring)."""
    s = (length - limit) / (length * w)
    x[i, 0] -= wi * s * dx
    x[i, 1] -= wi * s * dy
    x[i, 2] -= wi * s * dz
    x[j, 0] += wj * s * dx
    x[j, 1] += wj * s * dy
    x[j, 2] += wj * s * dz


@njit(inline="always", **_JIT)
def solve_strain_limit(x, inv_mass, i, j, dx, dy, dz, limit):
    """Project the pair (i, j), separated by (dx, dy, dz) (:func:`separation_of_members` or
    :func:`separation_with_offsets`), back onto ``limit`` when it is longer (see the module docstring).

    Returns 1 when the pair was violating (for the diagnostics' active-set count), else 0.
    """
    violating, length, wi, wj, w = _violation(i, j, dx, dy, dz, inv_mass, limit)
    if not violating:
        return 0
    _project(x, i, j, dx, dy, dz, length, limit, wi, wj, w)
    return 1


@njit(inline="always", **_JIT)
def solve_strain_limit_contacts(x, inv_mass, i, j, dx, dy, dz, limit, normal):
    """:func:`solve_strain_limit` that never presses a vertex into its contact (module docstring);
    ``normal``: (N, 3) unit push directions of the vertices in contact, zero rows elsewhere.

    Returns 1 when the pair was violating (for the diagnostics' active-set count), else 0.
    """
    violating, length, wi, wj, w = _violation(i, j, dx, dy, dz, inv_mass, limit)
    if not violating:
        return 0
    # i moves along -d, j along +d; a contact normal against that direction is "inward"
    ni = -(normal[i, 0] * dx + normal[i, 1] * dy + normal[i, 2] * dz)
    nj = normal[j, 0] * dx + normal[j, 1] * dy + normal[j, 2] * dz
    if ni >= 0.0 and nj >= 0.0:  # neither is pressed into a contact: the plain projection
        _project(x, i, j, dx, dy, dz, length, limit, wi, wj, w)
        return 1
    inv_length = 1.0 / length
    d0, d1, d2 = dx * inv_length, dy * inv_length, dz * inv_length
    ni *= inv_length
    nj *= inv_length
    ei0, ei1, ei2 = -d0, -d1, -d2
    if ni < 0.0:
        ei0 -= ni * normal[i, 0]
        ei1 -= ni * normal[i, 1]
        ei2 -= ni * normal[i, 2]
    ej0, ej1, ej2 = d0, d1, d2
    if nj < 0.0:
        ej0 -= nj * normal[j, 0]
        ej1 -= nj * normal[j, 1]
        ej2 -= nj * normal[j, 2]
    rate = -wi * (d0 * ei0 + d1 * ei1 + d2 * ei2) + wj * (d0 * ej0 + d1 * ej1 + d2 * ej2)
    if rate <= 1e-9 * w:  # both ends held against the pull (a chord through a body): leave it
        return 0
    s = (length - limit) / rate
    x[i, 0] += wi * s * ei0
    x[i, 1] += wi * s * ei1
    x[i, 2] += wi * s * ei2
    x[j, 0] += wj * s * ej0
    x[j, 1] += wj * s * ej1
    x[j, 2] += wj * s * ej2
    return 1
