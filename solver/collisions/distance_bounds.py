"""A coarse grid of lower bounds of the distance to a standing mesh collider.

Each cell holds ``max(0, d(centre) - half diagonal)``, ``d`` the exact distance from the cell's
centre to the closest triangle (Ericson 5.1.5), capped at ``band``: every point of the cell is
at least that far from the mesh (the distance is 1-Lipschitz), and a point outside the grid
(the mesh's box grown by ``band``) is at least ``band`` away. One lookup replaces a list scan
for a cloth vertex that is not about to touch the body (the narrow phase's clearance), where
the candidate list only bounds the triangles it does not hold by its own radius (~1 cm). The
exact centre distances also size the cells' closest-face lists (:mod:`.cell_lists`).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT, _JIT_PARALLEL
from .geometry import point_triangle_distance


@njit(**_JIT)
def grid_frame(verts, spacing, band):
    """(origin (3,), shape (3,)): the cells of side ``spacing`` over the mesh's box grown by ``band``."""
    origin = np.empty(3)
    shape = np.empty(3, dtype=np.int64)
    for d in range(3):
        lo = verts[0, d]
        hi = verts[0, d]
        for j in range(verts.shape[0]):
            lo = min(lo, verts[j, d])
            hi = max(hi, verts[j, d])
        origin[d] = lo - band
        shape[d] = max(1, int(math.ceil((hi - lo + 2.0 * band) / spacing)))
    return origin, shape


@njit(**_JIT)
def _centre_distances_slab(verts, tris, center, rad, spacing, band, origin, centre, i_lo, i_hi):
    """:func:`centre_distances` for the cells of x index ``i_lo .. i_hi - 1`` (a slab: each
    thread writes only its own cells)."""
    half = 0.5 * sqrt(3.0) * spacing
    cell = np.empty((2, 3), dtype=np.int64)
    for t in range(tris.shape[0]):
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        cell_range(verts, tris, t, band + half, origin, spacing, centre.shape, cell)
        for i in range(max(cell[0, 0], i_lo), min(cell[1, 0] + 1, i_hi)):
            px = origin[0] + (i + 0.5) * spacing
            for j in range(cell[0, 1], cell[1, 1] + 1):
                py = origin[1] + (j + 0.5) * spacing
                for k in range(cell[0, 2], cell[1, 2] + 1):
                    pz = origin[2] + (k + 0.5) * spacing
                    best = centre[i, j, k]
                    g = (px - center[t, 0]) ** 2 + (py - center[t, 1]) ** 2 + (pz - center[t, 2]) ** 2
                    if g >= (best + rad[t]) ** 2:  # its bounding sphere is no nearer than the best so far
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
                    if d < best:
                        centre[i, j, k] = d


@njit(**_JIT_PARALLEL)
def _centre_distances_slabs(verts, tris, center, rad, spacing, band, origin, centre, slabs):
    for s in prange(slabs.shape[0] - 1):
        _centre_distances_slab(verts, tris, center, rad, spacing, band, origin, centre, slabs[s], slabs[s + 1])


def grid_slabs(nx: int, slabs: int | None = None) -> np.ndarray:
    """Bounds (slabs + 1,) of equal runs of the grid's x index, one per thread by default: a slab's
    cells are written by one thread only, so the results do not depend on the count."""
    slabs = max(1, min(int(slabs or numba.get_num_threads()), int(nx)))
    return (np.arange(slabs + 1) * int(nx)) // slabs


def centre_distances(verts, tris, center, rad, spacing, band, slabs=None):
    """(origin (3,), centre (nx, ny, nz)): the exact distance (m) from each centre of the cells of
    side ``spacing`` over the mesh's box grown by ``band`` to the mesh, where it is at most ``band``
    + half a diagonal (elsewhere that value: no triangle measured the centre). Each triangle
    measures the centres within that distance of its box whose best distance so far its bounding
    sphere (``center``, ``rad``) could beat; in parallel slabs of cells (:func:`grid_slabs`)."""
    origin, shape = grid_frame(verts, spacing, band)
    centre = np.full((shape[0], shape[1], shape[2]), band + 0.5 * math.sqrt(3.0) * spacing)
    _centre_distances_slabs(verts, tris, center, rad, spacing, band, origin, centre, grid_slabs(shape[0], slabs))
    return origin, centre


@njit(**_JIT)
def cell_range(verts, tris, t, grow, origin, spacing, shape, cell):
    """``cell[0]`` / ``cell[1]``: the first / last cell (per axis, clamped to the grid) whose centre
    can lie within ``grow`` of triangle t's box."""
    for d in range(3):
        a = min(verts[tris[t, 0], d], verts[tris[t, 1], d], verts[tris[t, 2], d]) - grow
        b = max(verts[tris[t, 0], d], verts[tris[t, 1], d], verts[tris[t, 2], d]) + grow
        cell[0, d] = max(0, int(math.floor((a - origin[d]) / spacing - 0.5)))
        cell[1, d] = min(shape[d] - 1, int(math.ceil((b - origin[d]) / spacing - 0.5)))


@njit(**_JIT)
def bounds_from_centres(centre, spacing, band):
    """Each cell's lower bound: its centre's distance less half a diagonal, in [0, band]."""
    half = 0.5 * sqrt(3.0) * spacing
    bounds = np.empty_like(centre)
    for i in range(centre.shape[0]):
        for j in range(centre.shape[1]):
            for k in range(centre.shape[2]):
                bounds[i, j, k] = min(max(centre[i, j, k] - half, 0.0), band)
    return bounds


def distance_bound_grid(verts, tris, center, rad, spacing, band, slabs=None):
    """(origin (3,), centre (nx, ny, nz), bounds (nx, ny, nz)): the exact centre distances of the
    cells of side ``spacing`` over the mesh's box grown by ``band`` (:func:`centre_distances`,
    ``center`` / ``rad`` the triangles' bounding spheres) and the cells' lower bounds."""
    origin, centre = centre_distances(verts, tris, center, rad, spacing, band, slabs)
    return origin, centre, bounds_from_centres(centre, spacing, band)


@njit(inline="always", **_JIT)
def cell_of(p0, p1, p2, bounds, origin, inv_spacing):
    """(i, j, k) of the cell of a :func:`distance_bound_grid` holding p; i is -1 outside the grid
    and -2 for a non-finite point."""
    if not (abs(p0) < 1e6 and abs(p1) < 1e6 and abs(p2) < 1e6):
        return -2, 0, 0
    fi = (p0 - origin[0]) * inv_spacing
    fj = (p1 - origin[1]) * inv_spacing
    fk = (p2 - origin[2]) * inv_spacing
    if not (0.0 <= fi < bounds.shape[0] and 0.0 <= fj < bounds.shape[1] and 0.0 <= fk < bounds.shape[2]):
        return -1, 0, 0
    return int(fi), int(fj), int(fk)


@njit(inline="always", **_JIT)
def distance_lower_bound(p0, p1, p2, bounds, origin, inv_spacing, band):
    """A lower bound (m) of the distance from p to the mesh of a :func:`distance_bound_grid`;
    0 for a non-finite point."""
    i, j, k = cell_of(p0, p1, p2, bounds, origin, inv_spacing)
    if i < 0:
        return band if i == -1 else 0.0
    return bounds[i, j, k]


@njit(inline="always", **_JIT)
def grid_cell(p0, p1, p2, bounds, origin, inv_spacing):
    """(flat index ``(i * ny + j) * nz + k``, distance from p to that cell's centre) of the cell of a
    :func:`distance_bound_grid` holding p; (-1, 0) outside the grid or for a non-finite point."""
    i, j, k = cell_of(p0, p1, p2, bounds, origin, inv_spacing)
    if i < 0:
        return -1, 0.0
    spacing = 1.0 / inv_spacing
    off = sqrt(
        (p0 - origin[0] - (i + 0.5) * spacing) ** 2
        + (p1 - origin[1] - (j + 0.5) * spacing) ** 2
        + (p2 - origin[2] - (k + 0.5) * spacing) ** 2
    )
    return (i * bounds.shape[1] + j) * bounds.shape[2] + k, off
