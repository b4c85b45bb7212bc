"""Fast projection of the fine level (Goldenthal et al. 2007, "Efficient simulation of inextensible
cloth"), as an inequality: a global solve of the mesh edges' stretch limit.

Why: one Gauss-Seidel sweep of the XPBD edge constraints per substep does not converge against
the body contacts (docs/design/stiff_fabric.md, "Garment: what was tried"). Here every mesh edge
longer than ``(1 + limit) L0`` (the active set; slack edges are never pulled, so folding and
compression stay free) is projected back onto its limit by Newton steps on the constraints
``C_k(x) = |x_i - x_j| - L_max,k``:

    (J W J^T) dlambda = C(x),    x <- x - W J^T dlambda

with ``J`` the active rows (unit edge directions), ``W`` the inverse masses (0 for pins). A vertex
in contact with a body (unit push normal ``c_i``) has ``W_i = w_i (I - c_i c_i^T)``: the projection
slides it along the surface, never into it (or off it). The linear system is solved matrix-free
with Jacobi-preconditioned conjugate gradients, warm-started from the last solve's multipliers.
Fixed loop order: bit-reproducible.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _numba_setup  # noqa: F401  (cache directory before any compilation)
from ._intrinsics import sqrt
from .kernels import _JIT


@njit(inline="always", **_JIT)
def _apply_w(y, inv_mass, normal, v):
    """y[v] <- W_v y[v] (inverse mass, with the contact normal's component removed)."""
    w = inv_mass[v]
    c0, c1, c2 = normal[v, 0], normal[v, 1], normal[v, 2]
    d = y[v, 0] * c0 + y[v, 1] * c1 + y[v, 2] * c2
    y[v, 0] = w * (y[v, 0] - d * c0)
    y[v, 1] = w * (y[v, 1] - d * c1)
    y[v, 2] = w * (y[v, 2] - d * c2)


@njit(**_JIT)
def _matvec(p, active, n_active, edges, dirs, inv_mass, normal, y, touched, out):
    """out = J W J^T p over the active rows; ``y`` (N, 3) must be zero on entry and is left zero."""
    for a in range(n_active):
        k = active[a]
        i, j = edges[k, 0], edges[k, 1]
        y[i, 0] += p[a] * dirs[a, 0]
        y[i, 1] += p[a] * dirs[a, 1]
        y[i, 2] += p[a] * dirs[a, 2]
        y[j, 0] -= p[a] * dirs[a, 0]
        y[j, 1] -= p[a] * dirs[a, 1]
        y[j, 2] -= p[a] * dirs[a, 2]
    for t in range(touched.shape[0]):
        _apply_w(y, inv_mass, normal, touched[t])
    for a in range(n_active):
        k = active[a]
        i, j = edges[k, 0], edges[k, 1]
        out[a] = dirs[a, 0] * (y[i, 0] - y[j, 0]) + dirs[a, 1] * (y[i, 1] - y[j, 1]) + dirs[a, 2] * (y[i, 2] - y[j, 2])
    for t in range(touched.shape[0]):
        v = touched[t]
        y[v, 0] = 0.0
        y[v, 1] = 0.0
        y[v, 2] = 0.0


@njit(**_JIT)
def fast_projection(x, inv_mass, edges, max_length, normal, lam, newton_steps, cg_iterations, cg_tolerance):
    """Project the active edges of ``edges`` onto ``max_length`` (module docstring), in place.

    ``normal``: (N, 3) unit contact normals (zero rows: free vertices); ``lam``: (E,) the
    multipliers of the last solve per edge (warm start; updated; pass zeros for a cold start).
    Returns (active edges in the first Newton step, CG iterations in all).
    """
    n_edges = edges.shape[0]
    n = x.shape[0]
    active = np.empty(n_edges, np.int64)
    dirs = np.empty((n_edges, 3))
    c = np.empty(n_edges)
    diag = np.empty(n_edges)
    dl = np.empty(n_edges)
    r = np.empty(n_edges)
    z = np.empty(n_edges)
    p = np.empty(n_edges)
    ap = np.empty(n_edges)
    y = np.zeros((n, 3))
    mark = np.zeros(n, np.bool_)
    touched_all = np.empty(n, np.int64)
    first_active = 0
    total_cg = 0
    for step in range(newton_steps):
        n_active = 0
        n_touched = 0
        for k in range(n_edges):
            i, j = edges[k, 0], edges[k, 1]
            dx = x[i, 0] - x[j, 0]
            dy = x[i, 1] - x[j, 1]
            dz = x[i, 2] - x[j, 2]
            length_sq = dx * dx + dy * dy + dz * dz
            limit = max_length[k]
            if length_sq <= limit * limit:
                lam[k] = 0.0
                continue
            length = sqrt(length_sq)
            d0, d1, d2 = dx / length, dy / length, dz / length
            ci = normal[i, 0] * d0 + normal[i, 1] * d1 + normal[i, 2] * d2
            cj = normal[j, 0] * d0 + normal[j, 1] * d1 + normal[j, 2] * d2
            dg = inv_mass[i] * (1.0 - ci * ci) + inv_mass[j] * (1.0 - cj * cj)
            if dg <= 1e-12 * (inv_mass[i] + inv_mass[j]) or dg <= 0.0:
                continue  # both ends held against the pull
            active[n_active] = k
            dirs[n_active, 0] = d0
            dirs[n_active, 1] = d1
            dirs[n_active, 2] = d2
            c[n_active] = length - limit
            diag[n_active] = dg
            dl[n_active] = lam[k] if step == 0 else 0.0
            n_active += 1
            for v in (i, j):
                if not mark[v]:
                    mark[v] = True
                    touched_all[n_touched] = v
                    n_touched += 1
        touched = touched_all[:n_touched]
        if step == 0:
            first_active = n_active
        if n_active == 0:
            for t in range(n_touched):
                mark[touched[t]] = False
            break
        # Jacobi-preconditioned CG on (J W J^T) dl = c
        _matvec(dl, active, n_active, edges, dirs, inv_mass, normal, y, touched, ap)
        rr0 = 0.0
        rz = 0.0
        for a in range(n_active):
            r[a] = c[a] - ap[a]
            z[a] = r[a] / diag[a]
            p[a] = z[a]
            rz += r[a] * z[a]
            rr0 += c[a] * c[a]
        tol_sq = cg_tolerance * cg_tolerance * rr0
        for _ in range(cg_iterations):
            rr = 0.0
            for a in range(n_active):
                rr += r[a] * r[a]
            if rr <= tol_sq:
                break
            total_cg += 1
            _matvec(p, active, n_active, edges, dirs, inv_mass, normal, y, touched, ap)
            pap = 0.0
            for a in range(n_active):
                pap += p[a] * ap[a]
            if pap <= 0.0:
                break
            alpha = rz / pap
            rz_new = 0.0
            for a in range(n_active):
                dl[a] += alpha * p[a]
                r[a] -= alpha * ap[a]
                z[a] = r[a] / diag[a]
                rz_new += r[a] * z[a]
            beta = rz_new / rz
            rz = rz_new
            for a in range(n_active):
                p[a] = z[a] + beta * p[a]
        # x <- x - W J^T dl
        for a in range(n_active):
            k = active[a]
            i, j = edges[k, 0], edges[k, 1]
            y[i, 0] += dl[a] * dirs[a, 0]
            y[i, 1] += dl[a] * dirs[a, 1]
            y[i, 2] += dl[a] * dirs[a, 2]
            y[j, 0] -= dl[a] * dirs[a, 0]
            y[j, 1] -= dl[a] * dirs[a, 1]
            y[j, 2] -= dl[a] * dirs[a, 2]
            if step == 0:
                lam[k] = dl[a]
            else:
                lam[k] += dl[a]
        for t in range(n_touched):
            v = touched[t]
            _apply_w(y, inv_mass, normal, v)
            x[v, 0] -= y[v, 0]
            x[v, 1] -= y[v, 1]
            x[v, 2] -= y[v, 2]
            y[v, 0] = 0.0
            y[v, 1] = 0.0
            y[v, 2] = 0.0
            mark[v] = False
    return first_active, total_cg
