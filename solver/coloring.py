"""Graph colouring of constraints for parallel Gauss-Seidel (001 sec. 7.2).

Two constraints conflict when they write the same vertex. Kinematic vertices (inverse mass 0)
are never written, so they do not cause conflicts: all tethers of a cape may share one pin
and still run in parallel.

Two granularities: :func:`color_constraints` colours single constraints (the serial sweep
uses it inside short windows so neighbouring projections overlap in the CPU);
:func:`block_schedule` colours blocks of the mesh for the parallel mode (one block per thread,
each swept in serial order, then the constraints that cross a cut).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import _numba_setup  # noqa: F401

MAX_COLORS = 64


@njit(cache=True)
def _greedy_colors(vertices, writable):
    m, arity = vertices.shape
    n = writable.shape[0]
    used = np.zeros(n, dtype=np.uint64)
    color = np.empty(m, dtype=np.int64)
    for k in range(m):
        mask = np.uint64(0)
        for a in range(arity):
            v = vertices[k, a]
            if writable[v]:
                mask |= used[v]
        c = 0
        while c < 64 and (mask >> np.uint64(c)) & np.uint64(1):
            c += 1
        if c == 64:
            return color, False
        color[k] = c
        bit = np.uint64(1) << np.uint64(c)
        for a in range(arity):
            v = vertices[k, a]
            if writable[v]:
                used[v] |= bit
    return color, True


def color_constraints(vertices: np.ndarray, inv_mass: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(order, color_offsets)``: a permutation that groups constraints by colour.

    ``order[color_offsets[c]:color_offsets[c + 1]]`` are the constraints of colour ``c``; within
    one colour no two constraints write the same vertex. Constraints keep their relative order
    inside a colour (stable sort), so the schedule is deterministic.
    """
    vertices = np.ascontiguousarray(vertices.reshape(vertices.shape[0], -1), dtype=np.int32)
    if vertices.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64)
    colors, ok = _greedy_colors(vertices, inv_mass > 0.0)
    if not ok:
        raise RuntimeError(f"constraint graph needs more than {MAX_COLORS} colours")
    order = np.argsort(colors, kind="stable")
    offsets = np.searchsorted(colors[order], np.arange(colors.max() + 2)).astype(np.int64)
    return order, offsets


def partition_vertices(rest: np.ndarray, writable: np.ndarray, n_parts: int) -> np.ndarray:
    """Part id per vertex (0..n_parts-1) by recursive coordinate bisection of the rest shape.

    Each cut is a plane normal to the longest side of the part's bounding box, at the quantile
    that leaves every part the same number of writable vertices (the ones that carry work).
    Kinematic vertices get the part of their position like the others; they never decide where
    a constraint runs.
    """
    part = np.zeros(rest.shape[0], dtype=np.int64)

    def split(index: np.ndarray, first: int, count: int) -> None:
        if count <= 1 or index.size == 0:
            part[index] = first
            return
        pts = rest[index]
        axis = int(np.argmax(pts.max(axis=0) - pts.min(axis=0)))
        low = count // 2
        key = pts[:, axis]
        free = writable[index]
        order = np.lexsort((np.arange(index.size), key))  # by coordinate, ties by index: deterministic
        free_sorted = np.cumsum(free[order])
        total = int(free_sorted[-1]) if free_sorted.size else 0
        cut = int(np.searchsorted(free_sorted, total * low / count, side="right"))
        split(index[order[:cut]], first, low)
        split(index[order[cut:]], first + low, count - low)

    split(np.arange(rest.shape[0]), 0, max(1, int(n_parts)))
    return part


def block_schedule(vertices: np.ndarray, part: np.ndarray, inv_mass: np.ndarray,
                   n_parts: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(order, block_offsets)`` for block-parallel Gauss-Seidel.

    A constraint whose writable vertices all lie in part p joins block p; blocks share no
    writable vertex (one colour), so they run at the same time. A constraint with writable
    vertices in two parts crosses a cut and joins the last segment (the second colour), run
    after the blocks. ``order[block_offsets[b]:block_offsets[b + 1]]`` is block b (b <
    n_parts) and the last segment the crossing constraints; a stable sort keeps each block in
    the serial sweep order.
    """
    vertices = np.asarray(vertices).reshape(vertices.shape[0], -1)
    m = vertices.shape[0]
    if m == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(n_parts + 2, dtype=np.int64)
    writable = inv_mass[vertices] > 0.0
    parts = part[vertices]
    lo = np.where(writable, parts, n_parts).min(axis=1)
    hi = np.where(writable, parts, -1).max(axis=1)
    block = np.where(~writable.any(axis=1), 0, np.where(lo == hi, lo, n_parts))
    order = np.argsort(block, kind="stable")
    offsets = np.searchsorted(block[order], np.arange(n_parts + 2)).astype(np.int64)
    return order, offsets
