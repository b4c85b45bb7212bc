"""Closest-face lists per cell of a standing mesh collider: the whole-mesh closest triangle of any
point near the body from a short precomputed list, with no per-vertex broad phase.

On the grid of :mod:`.distance_bounds` (cells of side s, half diagonal ``hd``, centre c at exact
distance D(c) from the mesh), the closest triangle t* of a point p in the cell satisfies
``|p - t*| = D(p) <= D(c) + |p - c|``, so ``|c - t*| <= D(p) + |p - c| <= D(c) + 2 hd``: the
cell's list holds every triangle within ``reach(c) = D(c) + 2 hd`` of its centre, sorted by that
distance, and a triangle not in it is at least ``reach(c) - |p - c|`` from p. The narrow phase
scans it like a vertex's candidate list (the bound ``d0 - |p - c|`` stops the scan), so the
answer is the closest triangle of the whole mesh. Cells farther than ``list_band`` from the mesh
get no list (``reach`` -1); a vertex there that needs a scan falls back to a candidate list of
its own (the narrow phase's re-query).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT
from .distance_bounds import cell_range
from .geometry import point_triangle_distance
from .mesh_kernels import sort_by_distance

#: Slack (m) added to a list's reach against rounding of the distances it is built from.
REACH_SLACK_M = 1e-9


@njit(**_JIT)
def closest_face_lists(verts, tris, center, rad, origin, spacing, centre, list_band):
    """(offsets (cells + 1,), cand, d0, reach (cells,)): CSR lists of the cells, flat index
    ``(i * ny + j) * nz + k`` of the grid whose centre distances are ``centre`` (from
    :func:`distance_bounds.centre_distances`, exact up to its band), each sorted by ``d0``, the
    distance from the cell centre; ``reach`` -1 where D(c) > ``list_band``. ``center`` / ``rad``:
    the triangles' bounding spheres (cheap rejection). Two sweeps over the triangles (count, fill)."""
    nx, ny, nz = centre.shape
    half = 0.5 * sqrt(3.0) * spacing
    reach = np.full(nx * ny * nz, -1.0)
    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                if centre[i, j, k] <= list_band:
                    reach[(i * ny + j) * nz + k] = centre[i, j, k] + 2.0 * half + REACH_SLACK_M
    offsets = np.zeros(nx * ny * nz + 1, dtype=np.int64)
    fill = np.zeros(0, dtype=np.int64)
    cand = np.zeros(0, dtype=np.int64)
    d0 = np.zeros(0)
    cell = np.empty((2, 3), dtype=np.int64)
    for sweep in range(2):
        for t in range(tris.shape[0]):
            ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
            cell_range(verts, tris, t, list_band + 2.0 * half + 1e-6, origin, spacing, centre.shape, cell)
            for i in range(cell[0, 0], cell[1, 0] + 1):
                px = origin[0] + (i + 0.5) * spacing
                for j in range(cell[0, 1], cell[1, 1] + 1):
                    py = origin[1] + (j + 0.5) * spacing
                    for k in range(cell[0, 2], cell[1, 2] + 1):
                        c = (i * ny + j) * nz + k
                        r = reach[c]
                        if r < 0.0:
                            continue
                        pz = origin[2] + (k + 0.5) * spacing
                        if sqrt((px - center[t, 0]) ** 2 + (py - center[t, 1]) ** 2
                                + (pz - center[t, 2]) ** 2) - rad[t] > r:
                            continue
                        d = point_triangle_distance(px, py, pz, verts[ia, 0], verts[ia, 1], verts[ia, 2],
                                                    verts[ib, 0], verts[ib, 1], verts[ib, 2], verts[ic, 0],
                                                    verts[ic, 1], verts[ic, 2])
                        if d > r:
                            continue
                        if sweep == 0:
                            offsets[c + 1] += 1
                        else:
                            cand[fill[c]] = t
                            d0[fill[c]] = d
                            fill[c] += 1
        if sweep == 0:
            for c in range(nx * ny * nz):
                offsets[c + 1] += offsets[c]
            cand = np.empty(offsets[-1], dtype=np.int64)
            d0 = np.empty(offsets[-1])
            fill = offsets[:-1].copy()
    for c in range(nx * ny * nz):
        sort_by_distance(cand, d0, offsets[c], offsets[c + 1])
    return offsets, cand, d0, reach
