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
def _cell_pairs(verts, tris, center, rad, origin, spacing, shape, reach, grow, t_first, cells, faces, dists, count):
    """(cell, face, distance from the centre) of every face within its cell's ``reach``, for the
    faces from ``t_first`` on, appended after ``count``. Returns (next face, count): ``tris.shape[0]``
    when all are done, else the face whose pairs might not fit (resume from it with larger arrays).
    The arrays are never reassigned here (Numba would count references every iteration)."""
    nx, ny, nz = shape
    cell = np.empty((2, 3), dtype=np.int64)
    for t in range(t_first, tris.shape[0]):
        cell_range(verts, tris, t, grow, origin, spacing, shape, cell)
        span = (cell[1, 0] - cell[0, 0] + 1) * (cell[1, 1] - cell[0, 1] + 1) * (cell[1, 2] - cell[0, 2] + 1)
        if count + span > cells.shape[0]:
            return t, count
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
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
                    g = (px - center[t, 0]) ** 2 + (py - center[t, 1]) ** 2 + (pz - center[t, 2]) ** 2
                    if g > (r + rad[t]) ** 2:  # bounding sphere beyond reach
                        continue
                    d = point_triangle_distance(px, py, pz, verts[ia, 0], verts[ia, 1], verts[ia, 2], verts[ib, 0],
                                                verts[ib, 1], verts[ib, 2], verts[ic, 0], verts[ic, 1], verts[ic, 2])
                    if d <= r:
                        cells[count] = c
                        faces[count] = t
                        dists[count] = d
                        count += 1
    return tris.shape[0], count


@njit(**_JIT)
def _list_reach(centre, spacing, list_band):
    """Each cell's list radius D(c) + 2 half diagonals (flat), -1 where D(c) > ``list_band``."""
    nx, ny, nz = centre.shape
    half = 0.5 * sqrt(3.0) * spacing
    reach = np.full(nx * ny * nz, -1.0)
    for i in range(nx):
        for j in range(ny):
            for k in range(nz):
                if centre[i, j, k] <= list_band:
                    reach[(i * ny + j) * nz + k] = centre[i, j, k] + 2.0 * half + REACH_SLACK_M
    return reach


@njit(**_JIT)
def _sorted_lists(n_cells, cells, faces, dists, count):
    """The pairs as CSR lists per cell (counting sort), each sorted by distance."""
    offsets = np.zeros(n_cells + 1, dtype=np.int64)
    for s in range(count):
        offsets[cells[s] + 1] += 1
    for c in range(n_cells):
        offsets[c + 1] += offsets[c]
    fill = offsets[:-1].copy()
    cand = np.empty(count, dtype=np.int64)
    d0 = np.empty(count)
    for s in range(count):
        c = cells[s]
        cand[fill[c]] = faces[s]
        d0[fill[c]] = dists[s]
        fill[c] += 1
    for c in range(n_cells):
        sort_by_distance(cand, d0, offsets[c], offsets[c + 1])
    return offsets, cand, d0


def closest_face_lists(verts, tris, center, rad, origin, spacing, centre, list_band, max_entries, room_per_cell=64):
    """(offsets (cells + 1,), cand, d0, reach (cells,)): CSR lists of the cells, flat index
    ``(i * ny + j) * nz + k`` of the grid whose centre distances are ``centre`` (from
    :func:`distance_bounds.centre_distances`, exact up to its band), each sorted by ``d0``, the
    distance from the cell centre; ``reach`` -1 where D(c) > ``list_band``. ``center`` / ``rad``:
    the triangles' bounding spheres (cheap rejection). One sweep over the triangles (each measures
    the cells within reach of it), into arrays with ``room_per_cell`` entries a listed cell (the
    bench body has 58), doubled when full; then a counting sort by cell. The bench body (5k
    faces, 1.5 cm cells, 3 cm band): 580,000 entries in 40-45 ms. None when the lists would hold
    more than ``max_entries`` (16 bytes each; a list grows with the faces per area: a 100k-face
    body would need ~10 million)."""
    reach = _list_reach(centre, spacing, list_band)
    grow = list_band + np.sqrt(3.0) * spacing + 1e-6
    size = min(max(16, room_per_cell * int(np.count_nonzero(reach >= 0.0))), max_entries)
    cells, faces, dists = np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64), np.empty(size)
    t, count = 0, 0
    while True:
        t, count = _cell_pairs(verts, tris, center, rad, origin, spacing, centre.shape, reach, grow, t, cells, faces,
                               dists, count)
        if t == tris.shape[0]:
            break
        if size >= max_entries:
            return None
        size = min(2 * size, max_entries)  # full: twice the room, then go on from face t
        cells, faces, dists = (np.concatenate([a[:count], np.empty(size - count, dtype=a.dtype)])
                               for a in (cells, faces, dists))
    offsets, cand, d0 = _sorted_lists(reach.shape[0], cells, faces, dists, count)
    return offsets, cand, d0, reach
