"""Count of crossing triangle pairs in a set of cloth meshes (a frame-end diagnostic).

Two triangles that share no vertex intersect when an edge of one passes through the other
(Moeller-Trumbore ray-triangle test restricted to the segment; coplanar touching is not
counted). Candidate pairs come from a hash grid of the triangles' box centres
(:func:`.hash_grid.hash_box_centres`), where each pair is met once.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from ._jit import _JIT, _JIT_PARALLEL
from .candidate_search import _hash, primitive_boxes
from .cloth_contacts import _pair_allowed
from .geometry import triangle_cross
from .hash_grid import cell_hash, centre_cell, centre_query_cells


@njit(inline="always", **_JIT)
def segment_pierces_triangle(x, p, q, a, b, c):
    """Where the open segment x[p] x[q] passes through the triangle x[a] x[b] x[c] (Moeller-Trumbore):
    ``(found, t, u, v)``, the point ``x[p] + t (x[q] - x[p]) = (1 - u - v) x[a] + u x[b] + v x[c]``
    (zeros when not found)."""
    d0, d1, d2 = x[q, 0] - x[p, 0], x[q, 1] - x[p, 1], x[q, 2] - x[p, 2]
    e10, e11, e12 = x[b, 0] - x[a, 0], x[b, 1] - x[a, 1], x[b, 2] - x[a, 2]
    e20, e21, e22 = x[c, 0] - x[a, 0], x[c, 1] - x[a, 1], x[c, 2] - x[a, 2]
    h0, h1, h2 = d1 * e22 - d2 * e21, d2 * e20 - d0 * e22, d0 * e21 - d1 * e20
    det = e10 * h0 + e11 * h1 + e12 * h2
    scale = (abs(e10) + abs(e11) + abs(e12)) * (abs(e20) + abs(e21) + abs(e22)) * (abs(d0) + abs(d1) + abs(d2))
    if abs(det) <= 1e-12 * scale:
        return False, 0.0, 0.0, 0.0  # parallel or degenerate
    inv = 1.0 / det
    s0, s1, s2 = x[p, 0] - x[a, 0], x[p, 1] - x[a, 1], x[p, 2] - x[a, 2]
    u = (s0 * h0 + s1 * h1 + s2 * h2) * inv
    if u < 0.0 or u > 1.0:
        return False, 0.0, 0.0, 0.0
    k0, k1, k2 = s1 * e12 - s2 * e11, s2 * e10 - s0 * e12, s0 * e11 - s1 * e10
    v = (d0 * k0 + d1 * k1 + d2 * k2) * inv
    if v < 0.0 or u + v > 1.0:
        return False, 0.0, 0.0, 0.0
    t = (e20 * k0 + e21 * k1 + e22 * k2) * inv
    if not 0.0 < t < 1.0:
        return False, 0.0, 0.0, 0.0
    return True, t, u, v


@njit(inline="always", **_JIT)
def segment_crosses_triangle(x, p, q, a, b, c):
    """The open segment x[p] x[q] passes through the triangle x[a] x[b] x[c]."""
    return segment_pierces_triangle(x, p, q, a, b, c)[0]


@njit(inline="always", **_JIT)
def _one_side(x, a, b, c, p, q, r):
    """Vertices p, q, r all strictly on one side of the plane of triangle (a, b, c) (by more than
    a rounding tolerance): then no point of triangle (p, q, r) lies in that plane, so the two
    triangles cannot cross (Moeller 1997's first rejection; most box-overlapping neighbours of a
    smooth sheet are rejected here, before six segment tests)."""
    n0, n1, n2 = triangle_cross(x[a, 0], x[a, 1], x[a, 2], x[b, 0], x[b, 1], x[b, 2], x[c, 0], x[c, 1], x[c, 2])
    dp = n0 * (x[p, 0] - x[a, 0]) + n1 * (x[p, 1] - x[a, 1]) + n2 * (x[p, 2] - x[a, 2])
    dq = n0 * (x[q, 0] - x[a, 0]) + n1 * (x[q, 1] - x[a, 1]) + n2 * (x[q, 2] - x[a, 2])
    dr = n0 * (x[r, 0] - x[a, 0]) + n1 * (x[r, 1] - x[a, 1]) + n2 * (x[r, 2] - x[a, 2])
    # rounding slack: the normal's size times the distances involved
    size = abs(x[p, 0] - x[a, 0]) + abs(x[p, 1] - x[a, 1]) + abs(x[p, 2] - x[a, 2])
    size += abs(x[b, 0] - x[a, 0]) + abs(x[b, 1] - x[a, 1]) + abs(x[b, 2] - x[a, 2])
    tol = 1e-9 * (abs(n0) + abs(n1) + abs(n2)) * size
    return (dp > tol and dq > tol and dr > tol) or (dp < -tol and dq < -tol and dr < -tol)


@njit(inline="always", **_JIT)
def triangles_cross(x, tris, s, t):
    a0, a1, a2 = tris[s, 0], tris[s, 1], tris[s, 2]
    b0, b1, b2 = tris[t, 0], tris[t, 1], tris[t, 2]
    if _one_side(x, b0, b1, b2, a0, a1, a2) or _one_side(x, a0, a1, a2, b0, b1, b2):
        return False
    return (
        segment_crosses_triangle(x, a0, a1, b0, b1, b2)
        or segment_crosses_triangle(x, a1, a2, b0, b1, b2)
        or segment_crosses_triangle(x, a2, a0, b0, b1, b2)
        or segment_crosses_triangle(x, b0, b1, a0, a1, a2)
        or segment_crosses_triangle(x, b1, b2, a0, a1, a2)
        or segment_crosses_triangle(x, b2, b0, a0, a1, a2)
    )


@njit(**_JIT_PARALLEL)
def _count(
    x, tris, lo, hi, inv, table_size, bucket_start, items, item_cell, extent, groups, per_triangle, kept_at, kept_pairs
):
    """Crossing pairs per triangle, each pair counted once: from the triangle whose centre cell
    comes first (cells in lexicographic order; by number within one cell). Both triangles of a
    box-overlapping pair find each other (each query's box is grown by the grid's largest
    half-extent), so a query visits only its own cell and the cells after it, half the bucket
    entries of a visit to every neighbour cell (docs/design/cloth_contacts.md, "Cost").
    ``per_triangle[s, 0]``: all crossing pairs; ``[s, 1]``: those the contacts keep apart
    (:class:`TriangleGroups`). With ``kept_at`` (T + 1,) non-empty, the prefix sums of a counting
    run's ``[s, 1]``, the kept pairs are also written to ``kept_pairs[kept_at[s]:]`` (s, t)."""
    listing = kept_at.shape[0] > 0
    for s in prange(tris.shape[0]):
        count = 0
        kept = 0
        own_i = centre_cell(lo, hi, s, 0, inv)
        own_j = centre_cell(lo, hi, s, 1, inv)
        own_k = centre_cell(lo, hi, s, 2, inv)
        i0, i1, j0, j1, k0, k1 = centre_query_cells(lo[s], hi[s], extent, inv, 64)
        for ci in range(max(i0, own_i), i1 + 1):
            for cj in range(j0, j1 + 1):
                if ci == own_i and cj < own_j:
                    continue
                for ck in range(k0, k1 + 1):
                    if ci == own_i and cj == own_j and ck < own_k:
                        continue
                    own_cell = ci == own_i and cj == own_j and ck == own_k
                    h = cell_hash(ci, cj, ck, table_size)
                    for r in range(bucket_start[h], bucket_start[h + 1]):
                        t = items[r]
                        if (
                            (own_cell and t <= s)
                            or item_cell[r, 0] != ci
                            or item_cell[r, 1] != cj
                            or item_cell[r, 2] != ck
                        ):
                            continue
                        if (
                            lo[t, 0] > hi[s, 0]
                            or hi[t, 0] < lo[s, 0]
                            or lo[t, 1] > hi[s, 1]
                            or hi[t, 1] < lo[s, 1]
                            or lo[t, 2] > hi[s, 2]
                            or hi[t, 2] < lo[s, 2]
                        ):
                            continue
                        shared = False
                        for p in range(3):
                            for q in range(3):
                                if tris[s, p] == tris[t, q]:
                                    shared = True
                        if shared:
                            continue
                        if triangles_cross(x, tris, s, t):
                            count += 1
                            if _pair_allowed(s, t, groups.cloth, groups.self_ok, groups.cross_ok):
                                if listing:
                                    kept_pairs[kept_at[s] + kept, 0] = s
                                    kept_pairs[kept_at[s] + kept, 1] = t
                                kept += 1
        per_triangle[s, 0] = count
        per_triangle[s, 1] = kept


class TriangleGroups(NamedTuple):
    """Which crossings the contacts keep apart: ``cloth`` (T,) the cloth of each triangle;
    ``self_ok`` / ``cross_ok`` (C,) whether a cloth collides with itself / with the other cloths
    (the pair rule of :class:`.cloth_contacts.ContactMesh`)."""

    cloth: np.ndarray
    self_ok: np.ndarray
    cross_ok: np.ndarray


def one_group(n_triangles: int) -> TriangleGroups:
    """Every triangle of one self-colliding cloth: every crossing is one the contacts keep apart."""
    return TriangleGroups(np.zeros(n_triangles, dtype=np.int64), np.ones(1, dtype=np.bool_), np.ones(1, dtype=np.bool_))


_NO_LIST = (np.zeros(0, dtype=np.int64), np.zeros((0, 2), dtype=np.int64))


def _grid(x, tris):
    nt = tris.shape[0]
    lo = np.empty((nt, 3))
    hi = np.empty((nt, 3))
    primitive_boxes(x, tris, lo, hi)
    cell = 2.0 * float(np.mean(np.max(hi - lo, axis=1))) or 1e-3  # two edges: 0.69 x the time of one
    table, bucket, items, item_cell, extent = _hash(lo, hi, cell)
    return (lo, hi, 1.0 / cell, table, bucket, items, item_cell, extent)


def count_crossings(x, tris, groups: TriangleGroups) -> tuple[int, int]:
    """Pairs of triangles (sharing no vertex) of ``tris`` that cross at positions x: all of them,
    and those of them that the contacts keep apart (``groups``): a cloth's own pairs when it
    collides with itself, two cloths' pairs when both collide with cloths."""
    nt = tris.shape[0]
    if nt < 2:
        return 0, 0
    per = np.zeros((nt, 2), dtype=np.int64)
    _count(x, tris, *_grid(x, tris), groups, per, *_NO_LIST)
    total, kept = per.sum(axis=0)
    return int(total), int(kept)


def list_crossings(x, tris, groups: TriangleGroups) -> tuple[int, np.ndarray]:
    """The crossing triangle pairs (sharing no vertex) of ``tris`` at x: how many in all (as
    :func:`count_crossings`), and those that the contacts keep apart (``groups``) as rows (s, t),
    each pair once (a second pass of the count, run only when there are any)."""
    nt = tris.shape[0]
    if nt < 2:
        return 0, np.zeros((0, 2), dtype=np.int64)
    grid = _grid(x, tris)
    per = np.zeros((nt, 2), dtype=np.int64)
    _count(x, tris, *grid, groups, per, *_NO_LIST)
    at = np.zeros(nt + 1, dtype=np.int64)
    np.cumsum(per[:, 1], out=at[1:])
    pairs = np.empty((int(at[-1]), 2), dtype=np.int64)
    if pairs.shape[0]:
        _count(x, tris, *grid, groups, per, at, pairs)
    return int(per[:, 0].sum()), pairs


def count_intersections(x, tris) -> int:
    """Number of pairs of triangles (sharing no vertex) of ``tris`` that cross at positions x."""
    return count_crossings(x, tris, one_group(tris.shape[0]))[0]
