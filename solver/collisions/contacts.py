"""Contact rows and their solve: the unilateral normal constraint C = n . (x - q) - r >= 0, whose
accumulated multiplier may only push (clamp_unilateral, sign +1), then the position-level
Coulomb friction of 001 sec. 6.3 on the displacement relative to the collider surface (002 sec. 3).

A contact is one row of ``c_vertex`` / ``c_normal`` / ``c_point`` / ``c_radius`` / ``c_disp`` (the
collider surface's displacement at the contact point over the substep) / ``c_mu_s`` / ``c_mu_k``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ..kernels import clamp_unilateral, inverse_denominator, xpbd_delta_lambda
from ._jit import _JIT


class ContactRows(NamedTuple):
    """The contact rows a narrow phase writes (see the module docstring), as one argument."""

    vertex: np.ndarray
    normal: np.ndarray
    point: np.ndarray
    radius: np.ndarray
    disp: np.ndarray
    mu_s: np.ndarray
    mu_k: np.ndarray


@njit(inline="always", **_JIT)
def emit_contact(
    row,
    i,
    n0,
    n1,
    n2,
    q0,
    q1,
    q2,
    radius,
    d0,
    d1,
    d2,
    mu_s,
    mu_k,
    c_vertex,
    c_normal,
    c_point,
    c_radius,
    c_disp,
    c_mu_s,
    c_mu_k,
):
    """Write one contact row: vertex, unit normal, surface point, radius, the surface point's
    displacement over the substep (for friction relative to the moving collider) and the
    friction coefficients. Returns the next row."""
    c_vertex[row] = i
    c_normal[row, 0] = n0
    c_normal[row, 1] = n1
    c_normal[row, 2] = n2
    c_point[row, 0] = q0
    c_point[row, 1] = q1
    c_point[row, 2] = q2
    c_radius[row] = radius
    c_disp[row, 0] = d0
    c_disp[row, 1] = d1
    c_disp[row, 2] = d2
    c_mu_s[row] = mu_s
    c_mu_k[row] = mu_k
    return row + 1


# ----------------------------------------------------------------------------------------------
# Contact solve: unilateral normal constraint, then position-level Coulomb friction.
# ----------------------------------------------------------------------------------------------
@njit(**_JIT)
def solve_contacts(
    x,
    x_substep_start,
    inv_mass,
    c_vertex,
    c_normal,
    c_point,
    c_radius,
    c_disp,
    c_mu_s,
    c_mu_k,
    count,
    lam,
    friction_acc,
):
    """One Gauss-Seidel pass over the contacts (hard, alpha = 0).

    Normal: ``C = n . (x - q) - r``; ``dlambda`` from :func:`xpbd_delta_lambda`, clamped so
    the accumulated multiplier stays >= 0 (a contact never pulls, 002 sec. 3).
    Friction (001 sec. 6.3): ``d = w lambda`` is this substep's normal correction; the
    tangential displacement relative to the collider surface is cancelled when shorter than
    ``mu_s d``, else shortened by ``mu_k d``. ``friction_acc`` keeps the friction correction
    applied so far in this substep, so repeated iterations do not apply kinetic friction twice.
    """
    for c in range(count):
        i = c_vertex[c]
        w = inv_mass[i]
        if w == 0.0:
            continue
        n0, n1, n2 = c_normal[c, 0], c_normal[c, 1], c_normal[c, 2]
        C = (
            n0 * (x[i, 0] - c_point[c, 0])
            + n1 * (x[i, 1] - c_point[c, 1])
            + n2 * (x[i, 2] - c_point[c, 2])
            - c_radius[c]
        )
        if C < 0.0 or lam[c] > 0.0:
            dlam = xpbd_delta_lambda(C, 0.0, 0.0, 0.0, lam[c], inverse_denominator(w, 0.0, 0.0))
            dlam = clamp_unilateral(lam[c], dlam, 1.0)
            lam[c] += dlam
            x[i, 0] += w * dlam * n0
            x[i, 1] += w * dlam * n1
            x[i, 2] += w * dlam * n2
        fa0, fa1, fa2 = friction_acc[c, 0], friction_acc[c, 1], friction_acc[c, 2]
        d = w * lam[c]
        if d <= 0.0 and fa0 == 0.0 and fa1 == 0.0 and fa2 == 0.0:
            continue
        # tangential displacement relative to the surface, with the friction applied so far undone
        r0 = x[i, 0] - x_substep_start[i, 0] - c_disp[c, 0]
        r1 = x[i, 1] - x_substep_start[i, 1] - c_disp[c, 1]
        r2 = x[i, 2] - x_substep_start[i, 2] - c_disp[c, 2]
        rn = r0 * n0 + r1 * n1 + r2 * n2
        t0 = r0 - rn * n0 + fa0
        t1 = r1 - rn * n1 + fa1
        t2 = r2 - rn * n2 + fa2
        length = sqrt(t0 * t0 + t1 * t1 + t2 * t2)
        f0 = f1 = f2 = 0.0
        if d > 0.0 and length > 0.0:
            if length < c_mu_s[c] * d:
                s = 1.0
            else:
                s = min(c_mu_k[c] * d / length, 1.0)
            f0, f1, f2 = s * t0, s * t1, s * t2
        x[i, 0] -= f0 - fa0
        x[i, 1] -= f1 - fa1
        x[i, 2] -= f2 - fa2
        friction_acc[c, 0] = f0
        friction_acc[c, 1] = f1
        friction_acc[c, 2] = f2


@njit(**_JIT)
def add_push_normals(x, vertex, normal, point, radius, n_contacts, push, reach=1.0):
    """Add to ``push[vertex[c]]`` the normal of every contact row ``c < n_contacts`` whose vertex
    lies, at ``x``, within ``reach`` times the contact's own distance of touching
    (``n . (x - q) - r <= reach r``); rows in order (the sums of ``np.add.at``).
    :meth:`.colliders.Colliders.add_push_normals` (reach 1; measured 93 us for 1063 contacts in
    NumPy, a fine-projection or contact-aware substep pays it) and
    :meth:`.colliders.Colliders.add_touching_normals` (reach 0.05)."""
    for c in range(n_contacts):
        v = vertex[c]
        n0, n1, n2 = normal[c, 0], normal[c, 1], normal[c, 2]
        gap = n0 * (x[v, 0] - point[c, 0]) + n1 * (x[v, 1] - point[c, 1]) + n2 * (x[v, 2] - point[c, 2])
        if gap - radius[c] <= reach * radius[c]:
            push[v, 0] += n0
            push[v, 1] += n1
            push[v, 2] += n2
