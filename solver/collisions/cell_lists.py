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
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT, _JIT_PARALLEL
from .distance_bounds import cell_range, grid_slabs
from .geometry import point_triangle_distance
from .mesh_kernels import sort_by_distance

#: Slack (m) added to a list's reach against rounding of the distances it is built from.
REACH_SLACK_M = 1e-9


@njit(**_JIT)
def _cell_pairs(
    verts, tris, center, rad, origin, spacing, shape, reach, grow, i_lo, i_hi, t_first, cells, faces, dists, count
):
    """(cell, face, distance from the centre) of every face within its cell's ``reach``, for the
    cells of x index ``i_lo .. i_hi - 1`` and the faces from ``t_first`` on, appended after
    ``count``. Returns (next face, count): ``tris.shape[0]`` when all are done, else the face whose
    pairs might not fit (resume from it with larger arrays). The arrays are never reassigned here
    (Numba would count references every iteration)."""
    ny, nz = shape[1], shape[2]
    cell = np.empty((2, 3), dtype=np.int64)
    for t in range(t_first, tris.shape[0]):
        cell_range(verts, tris, t, grow, origin, spacing, shape, cell)
        i0, i1 = max(cell[0, 0], i_lo), min(cell[1, 0] + 1, i_hi)
        span = max(i1 - i0, 0) * (cell[1, 1] - cell[0, 1] + 1) * (cell[1, 2] - cell[0, 2] + 1)
        if count + span > cells.shape[0]:
            return t, count
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        for i in range(i0, i1):
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
                    d = point_triangle_distance(
                        px,
                        py,
                        pz,
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
                    if d <= r:
                        cells[count] = c
                        faces[count] = t
                        dists[count] = d
                        count += 1
    return tris.shape[0], count


@njit(**_JIT_PARALLEL)
def _cell_pairs_slabs(
    verts, tris, center, rad, origin, spacing, shape, reach, grow, slabs, resume, counts, cells, faces, dists
):
    """One :func:`_cell_pairs` per slab of cells, in parallel, each into its own rows."""
    for s in prange(slabs.shape[0] - 1):
        if resume[s] < tris.shape[0]:
            t, count = _cell_pairs(
                verts,
                tris,
                center,
                rad,
                origin,
                spacing,
                shape,
                reach,
                grow,
                slabs[s],
                slabs[s + 1],
                resume[s],
                cells[s],
                faces[s],
                dists[s],
                counts[s],
            )
            resume[s] = t
            counts[s] = count


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
def _sorted_lists(n_cells, cells, faces, dists, counts):
    """The pairs of the slabs' rows (row s holds ``counts[s]``) as CSR lists per cell (counting
    sort, keeping their order within a cell)."""
    offsets = np.zeros(n_cells + 1, dtype=np.int64)
    for r in range(cells.shape[0]):
        for s in range(counts[r]):
            offsets[cells[r, s] + 1] += 1
    for c in range(n_cells):
        offsets[c + 1] += offsets[c]
    fill = offsets[:-1].copy()
    cand = np.empty(offsets[n_cells], dtype=np.int64)
    d0 = np.empty(offsets[n_cells])
    for r in range(cells.shape[0]):
        for s in range(counts[r]):
            c = cells[r, s]
            cand[fill[c]] = faces[r, s]
            d0[fill[c]] = dists[r, s]
            fill[c] += 1
    return offsets, cand, d0


@njit(**_JIT_PARALLEL)
def _sort_cells(offsets, cand, d0):
    """Each cell's list sorted by distance (independent lists: in parallel)."""
    for c in prange(offsets.shape[0] - 1):
        sort_by_distance(cand, d0, offsets[c], offsets[c + 1])


def closest_face_lists(
    verts, tris, center, rad, origin, spacing, centre, list_band, max_entries, room_per_cell=64, slabs=None
):
    """(offsets (cells + 1,), cand, d0, reach (cells,)): CSR lists of the cells, flat index
    ``(i * ny + j) * nz + k`` of the grid whose centre distances are ``centre`` (from
    :func:`distance_bounds.centre_distances`, exact up to its band), each sorted by ``d0``, the
    distance from the cell centre; ``reach`` -1 where D(c) > ``list_band``. ``center`` / ``rad``:
    the triangles' bounding spheres (cheap rejection). One sweep over the triangles (each measures
    the cells within reach of it) per slab of cells (:func:`distance_bounds.grid_slabs`), in
    parallel, into rows with ``room_per_cell`` entries a listed cell in all (the bench body has
    58), doubled when full; then a counting sort by cell, which keeps the faces of a cell in face
    order whatever the slabs, and the lists sorted in parallel. The bench body (5k faces, 1.5 cm
    cells, 3 cm band): 580,000 entries. None when the lists would hold more than ``max_entries``
    (16 bytes each; a list grows with the faces per area: a 100k-face body would need ~10 million)."""
    reach = _list_reach(centre, spacing, list_band)
    grow = list_band + np.sqrt(3.0) * spacing + 1e-6
    bounds = grid_slabs(centre.shape[0], slabs)
    n = bounds.shape[0] - 1
    room = max(16, min(room_per_cell * int(np.count_nonzero(reach >= 0.0)), max_entries) // n)
    rows = [np.empty((n, room), dtype=np.int64), np.empty((n, room), dtype=np.int64), np.empty((n, room))]
    resume = np.zeros(n, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    while True:
        _cell_pairs_slabs(
            verts, tris, center, rad, origin, spacing, centre.shape, reach, grow, bounds, resume, counts, *rows
        )
        if counts.sum() > max_entries:
            return None
        if (resume == tris.shape[0]).all():
            break
        if n * rows[0].shape[1] >= max_entries:
            return None
        rows = [np.concatenate([r, np.empty_like(r)], axis=1) for r in rows]  # full: twice the room, go on
    offsets, cand, d0 = _sorted_lists(reach.shape[0], *rows, counts)
    _sort_cells(offsets, cand, d0)
    return offsets, cand, d0, reach
