"""Closest-triangle certificates for a mesh collider standing still: a vertex sliding over a
locally convex part of the surface follows its closest face across edges, with no candidate list.

If every triangle of the mesh that comes within ``cert[t]`` of triangle t lies in the closed
half-space behind t's plane, and a point p is in front of t at height ``h`` (its projection
inside t), then t is the closest triangle of the whole mesh whenever ``2 h <= cert[t]``: a point
y behind the plane is at least ``n . (p - y) >= h`` from p, and any other triangle is at least
``cert[t]`` from the projection, so at least ``cert[t] - h`` from p. Heights up to ``tol`` above
the plane count as behind (coplanar neighbours), so "closest" holds to ``tol`` (1 nm).
The per-triangle data depend on the positions, so they are used only while the collider's
vertices do not move within the frame (a linear blend of moving vertices bends the faces).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT, _JIT_PARALLEL
from .chunks import equal_chunks
from .geometry import closest_on_triangle_d2, triangle_normal
from .hash_grid import boxes_overlapping

#: Heights (m) above a triangle's plane that still count as behind it (coplanar neighbours).
COPLANAR_TOL_M = 1e-9


@njit(**_JIT)
def edge_neighbours(tris, n_verts):
    """``nbr[t, k]``: the triangle across the edge of t opposite its corner k, -1 where that edge
    is a boundary or shared by more than two triangles (the walk stops there)."""
    nt = tris.shape[0]
    nbr = np.full((nt, 3), -1, dtype=np.int64)
    keys = np.empty(3 * nt, dtype=np.int64)
    for t in range(nt):
        for k in range(3):
            a, b = tris[t, (k + 1) % 3], tris[t, (k + 2) % 3]
            keys[3 * t + k] = min(a, b) * n_verts + max(a, b)
    order = np.argsort(keys)
    s = 0
    while s < order.shape[0]:
        e = s
        while e + 1 < order.shape[0] and keys[order[e + 1]] == keys[order[s]]:
            e += 1
        if e == s + 1:
            x, y = order[s], order[e]
            nbr[x // 3, x % 3] = y // 3
            nbr[y // 3, y % 3] = x // 3
        s = e + 1
    return nbr


def convexity_certificates(
    verts,
    tris,
    center,
    rad,
    reach,
    tol,
    tlo,
    thi,
    inv_cell,
    table_size,
    bucket_start,
    items,
    max_cells,
    tnorm,
    cert,
    chunks=None,
):
    """Unit normal ``tnorm[t]`` and certificate ``cert[t]`` (m) of every triangle at ``verts``
    (:func:`_certificates`), in ``chunks`` runs of faces in parallel (one per thread by default;
    each face writes only its own entries, so the results do not depend on the count)."""
    bounds = equal_chunks(tris.shape[0], chunks or numba.get_num_threads())
    _certificate_chunks(
        verts,
        tris,
        center,
        rad,
        reach,
        tol,
        tlo,
        thi,
        inv_cell,
        table_size,
        bucket_start,
        items,
        max_cells,
        tnorm,
        cert,
        bounds,
    )


@njit(**_JIT_PARALLEL)
def _certificate_chunks(
    verts,
    tris,
    center,
    rad,
    reach,
    tol,
    tlo,
    thi,
    inv_cell,
    table_size,
    bucket_start,
    items,
    max_cells,
    tnorm,
    cert,
    bounds,
):
    for c in prange(bounds.shape[0] - 1):
        _certificates(
            verts,
            tris,
            center,
            rad,
            reach,
            tol,
            tlo,
            thi,
            inv_cell,
            table_size,
            bucket_start,
            items,
            max_cells,
            tnorm,
            cert,
            bounds[c],
            bounds[c + 1],
        )


@njit(**_JIT)
def _certificates(
    verts,
    tris,
    center,
    rad,
    reach,
    tol,
    tlo,
    thi,
    inv_cell,
    table_size,
    bucket_start,
    items,
    max_cells,
    tnorm,
    cert,
    t_first,
    t_last,
):
    """Unit normal ``tnorm[t]`` and certificate ``cert[t]`` (m) of triangles ``t_first .. t_last - 1``:
    a lower bound of the distance from t to every other triangle with a corner more than ``tol``
    in front of t's plane, capped at ``reach``. Triangles come from the collider's hash grid
    (boxes ``tlo`` / ``thi``); one whose box misses the cube of half side ``rad[t] + reach``
    around t's centre is farther than ``reach`` from t. The distance bound between two triangles
    is the larger of their bounding spheres' gap (``center``, ``rad``) and the lowest corner's
    height over t's plane (a layer above t: the other side of a thin part); a concave neighbour
    (sharing a corner) gets 0, so nothing is certified next to a fold."""
    nt = tris.shape[0]
    stamp = np.full(nt, -1, dtype=np.int64)
    found = np.empty(nt, dtype=np.int64)
    ql = np.empty((1, 3))
    qh = np.empty((1, 3))
    for t in range(t_first, t_last):
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        n0, n1, n2 = triangle_normal(
            verts[ia, 0],
            verts[ia, 1],
            verts[ia, 2],
            verts[ib, 0],
            verts[ib, 1],
            verts[ib, 2],
            verts[ic, 0],
            verts[ic, 1],
            verts[ic, 2],
        )
        tnorm[t, 0], tnorm[t, 1], tnorm[t, 2] = n0, n1, n2
        cert[t] = reach
        if n0 == 0.0 and n1 == 0.0 and n2 == 0.0:
            cert[t] = 0.0
            continue
        for d in range(3):
            ql[0, d] = center[t, d] - rad[t] - reach
            qh[0, d] = center[t, d] + rad[t] + reach
        for e in range(
            boxes_overlapping(ql, qh, inv_cell, max_cells, table_size, bucket_start, items, tlo, thi, stamp, t, found)
        ):
            s = found[e]
            if s == t:
                continue
            gap = (
                sqrt(
                    (center[t, 0] - center[s, 0]) ** 2
                    + (center[t, 1] - center[s, 1]) ** 2
                    + (center[t, 2] - center[s, 2]) ** 2
                )
                - rad[t]
                - rad[s]
            )
            if gap >= cert[t]:
                continue
            lowest = 1e300
            highest = -1e300
            for k in range(3):
                j = tris[s, k]
                height = (
                    n0 * (verts[j, 0] - verts[ia, 0])
                    + n1 * (verts[j, 1] - verts[ia, 1])
                    + n2 * (verts[j, 2] - verts[ia, 2])
                )
                lowest = min(lowest, height)
                highest = max(highest, height)
            if highest > tol:  # in front: a certificate no larger than its distance to t
                cert[t] = min(cert[t], max(gap, lowest, 0.0))


@njit(inline="always", **_JIT)
def certified_walk(p0, p1, p2, t, u, v, w, d2, tris, verts, tnorm, cert, nbr, max_steps):
    """From triangle t (closest point ``u, v, w`` at squared distance ``d2``, measured on the
    standing collider ``verts``), step across the edge holding the closest point to the
    neighbour, up to ``max_steps`` times, until a triangle certifies itself the closest of the
    whole mesh (see the module docstring). Returns (t, u, v, w, d2, certified): the certified
    triangle, else the nearest one measured (a seed for the list scan)."""
    bt, bu, bv, bw, bd2 = t, u, v, w, d2
    for step in range(max_steps + 1):
        if u > 0.0 and v > 0.0 and w > 0.0:  # the projection lies inside t
            a = tris[t, 0]
            h = tnorm[t, 0] * (p0 - verts[a, 0]) + tnorm[t, 1] * (p1 - verts[a, 1]) + tnorm[t, 2] * (p2 - verts[a, 2])
            if h > 0.0 and 2.0 * h <= cert[t]:
                return t, u, v, w, d2, True
            break
        if u == 0.0 and v > 0.0 and w > 0.0:  # on the edge opposite corner k: the neighbour there
            nxt = nbr[t, 0]
        elif v == 0.0 and u > 0.0 and w > 0.0:
            nxt = nbr[t, 1]
        elif w == 0.0 and u > 0.0 and v > 0.0:
            nxt = nbr[t, 2]
        else:  # a corner: no single neighbour to go to
            break
        if nxt < 0 or step == max_steps:
            break
        t = nxt
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        u, v, w, d2 = closest_on_triangle_d2(
            p0,
            p1,
            p2,
            verts[ia, 0],
            verts[ia, 1],
            verts[ia, 2],
            verts[ib, 0],
            verts[ib, 1],
            verts[ib, 2],
            verts[ic, 0],
            verts[ic, 1],
            verts[ic, 2],
        )
        if d2 < bd2:
            bt, bu, bv, bw, bd2 = t, u, v, w, d2
    return bt, bu, bv, bw, bd2, False
