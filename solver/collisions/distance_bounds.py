"""A coarse grid of lower bounds of the distance to a standing mesh collider.

Each cell holds ``max(0, d(centre) - half diagonal)``, ``d`` the exact distance from the cell's
centre to the closest triangle (Ericson 5.1.5), capped at ``band``: every point of the cell is
at least that far from the mesh (the distance is 1-Lipschitz), and a point outside the grid
(the mesh's box grown by ``band``) is at least ``band`` away. One lookup replaces a list scan
for a cloth vertex that is not about to touch the body (the narrow phase's clearance), where
the candidate list only bounds the triangles it does not hold by its own radius (~1 cm).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT
from .geometry import point_triangle_distance


@njit(**_JIT)
def distance_bound_grid(verts, tris, spacing, band):
    """(origin (3,), bounds (nx, ny, nz)): the lower bounds (m) of the cells of side ``spacing``
    over the mesh's box grown by ``band``. Each triangle measures the cell centres within
    ``band`` + half a diagonal of its box; a centre no triangle measured is farther than that."""
    half = 0.5 * sqrt(3.0) * spacing
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
    centre = np.full((shape[0], shape[1], shape[2]), band + half)
    cell = np.empty((2, 3), dtype=np.int64)
    for t in range(tris.shape[0]):
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        for d in range(3):
            a = min(verts[ia, d], verts[ib, d], verts[ic, d]) - band - half
            b = max(verts[ia, d], verts[ib, d], verts[ic, d]) + band + half
            cell[0, d] = max(0, int(math.floor((a - origin[d]) / spacing - 0.5)))
            cell[1, d] = min(shape[d] - 1, int(math.ceil((b - origin[d]) / spacing - 0.5)))
        for i in range(cell[0, 0], cell[1, 0] + 1):
            px = origin[0] + (i + 0.5) * spacing
            for j in range(cell[0, 1], cell[1, 1] + 1):
                py = origin[1] + (j + 0.5) * spacing
                for k in range(cell[0, 2], cell[1, 2] + 1):
                    pz = origin[2] + (k + 0.5) * spacing
                    d = point_triangle_distance(px, py, pz, verts[ia, 0], verts[ia, 1], verts[ia, 2], verts[ib, 0],
                                                verts[ib, 1], verts[ib, 2], verts[ic, 0], verts[ic, 1], verts[ic, 2])
                    if d < centre[i, j, k]:
                        centre[i, j, k] = d
    bounds = np.empty_like(centre)
    for i in range(shape[0]):
        for j in range(shape[1]):
            for k in range(shape[2]):
                bounds[i, j, k] = min(max(centre[i, j, k] - half, 0.0), band)
    return origin, bounds


@njit(inline="always", **_JIT)
def distance_lower_bound(p0, p1, p2, bounds, origin, inv_spacing, band):
    """A lower bound (m) of the distance from p to the mesh of a :func:`distance_bound_grid`;
    0 for a non-finite point."""
    if not (abs(p0) < 1e6 and abs(p1) < 1e6 and abs(p2) < 1e6):
        return 0.0
    fi = (p0 - origin[0]) * inv_spacing
    fj = (p1 - origin[1]) * inv_spacing
    fk = (p2 - origin[2]) * inv_spacing
    if not (0.0 <= fi < bounds.shape[0] and 0.0 <= fj < bounds.shape[1] and 0.0 <= fk < bounds.shape[2]):
        return band
    return bounds[int(fi), int(fj), int(fk)]


@njit(**_JIT)
def capsules_out_of_reach(x, seg_end, reach, candidate, bounds, origin, inv_spacing, band, far, r_far):
    """``far[i]``: candidate vertex i cannot come within ``reach[i]`` of the mesh on its travel
    segment [x, seg_end] (its bound at x exceeds the segment's length plus the reach); ``r_far[i]``
    that bound, the radius an empty candidate list around the point x stands for."""
    for i in range(x.shape[0]):
        far[i] = False
        if not candidate[i]:
            continue
        bound = distance_lower_bound(x[i, 0], x[i, 1], x[i, 2], bounds, origin, inv_spacing, band)
        length = sqrt((seg_end[i, 0] - x[i, 0]) ** 2 + (seg_end[i, 1] - x[i, 1]) ** 2 + (seg_end[i, 2] - x[i, 2]) ** 2)
        if bound >= length + reach[i]:
            far[i] = True
            r_far[i] = bound
