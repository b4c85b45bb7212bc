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


#: Cost of one place where consecutive vertex indices fall in different parts, in cut edges.
#: Neighbouring vertices share cache lines (2.7 of them per 64 bytes of positions), so two
#: threads writing either side of such a place pass the line back and forth every sweep: a
#: 32 x 32 sheet cut across its rows (63 such places) ran the two-thread frame in 2.9-4.6 ms,
#: cut between rows (one place, same 63 cut edges) in 2.3-2.6 ms, one thread 4.3 ms. A cut
#: edge costs its ~3.4 crossing constraints, run on one thread while the other waits.
SHARED_LINE_COST_EDGES = 4.0
#: An axis is a candidate for a cut when its side of the bounding box is at least this fraction
#: of the longest side.
MIN_SIDE_RATIO = 0.25


def _split_cost(side: np.ndarray, ordered: np.ndarray, edges: np.ndarray) -> float:
    """Cut edges plus :data:`SHARED_LINE_COST_EDGES` per index-order change of side, for a split
    of the vertices ``ordered`` (sorted indices; ``side`` 0/1 on them, -1 elsewhere)."""
    s = side[ordered]
    changes = np.count_nonzero((ordered[1:] == ordered[:-1] + 1) & (s[1:] != s[:-1]))
    a, b = side[edges[:, 0]], side[edges[:, 1]]
    cut = np.count_nonzero((a >= 0) & (b >= 0) & (a != b))
    return cut + SHARED_LINE_COST_EDGES * changes


def partition_vertices(rest: np.ndarray, writable: np.ndarray, n_parts: int, edges: np.ndarray) -> np.ndarray:
    """Part id per vertex (0..n_parts-1) by recursive coordinate bisection of the rest shape.

    Each cut is a plane normal to one axis, at the quantile that leaves both sides the same
    number of writable vertices (the ones that carry work). Of the axes not much shorter than the
    longest (:data:`MIN_SIDE_RATIO`) the one kept has the fewest cut ``edges`` (their constraints
    run after the blocks) plus places where memory neighbours change part (cache lines the two
    threads would share, :data:`SHARED_LINE_COST_EDGES`); ties go to the longest side. A
    row-major grid is so cut between rows, into two runs of memory (measured: docs/design/solver.md,
    "The cut between rows"). Kinematic
    vertices get a part like the others; they never decide where a constraint runs.
    """
    part = np.zeros(rest.shape[0], dtype=np.int64)
    side = np.full(rest.shape[0], -1, dtype=np.int64)
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)

    def split(index: np.ndarray, first: int, count: int) -> None:
        if count <= 1 or index.size == 0:
            part[index] = first
            return
        pts = rest[index]
        extent = pts.max(axis=0) - pts.min(axis=0)
        low = count // 2
        free = writable[index]
        # by coordinate (ties by index: deterministic), longest side first; a side much shorter
        # than the longest (the thickness of a flat sheet) would cut along the surface
        axes = [a for a in np.argsort(-extent, kind="stable") if extent[a] >= MIN_SIDE_RATIO * extent.max()]
        orders = [np.lexsort((index, pts[:, axis])) for axis in axes]
        ordered = np.sort(index)
        best = None
        for order in orders:
            free_sorted = np.cumsum(free[order])
            total = int(free_sorted[-1])
            cut = int(np.searchsorted(free_sorted, total * low / count, side="right"))
            side[index[order[:cut]]] = 0
            side[index[order[cut:]]] = 1
            cost = _split_cost(side, ordered, edges)
            side[index] = -1
            if best is None or cost < best[0]:
                best = (cost, order, cut)
        _, order, cut = best
        split(index[order[:cut]], first, low)
        split(index[order[cut:]], first + low, count - low)

    split(np.arange(rest.shape[0]), 0, max(1, int(n_parts)))
    return part


def block_schedule(
    vertices: np.ndarray, part: np.ndarray, inv_mass: np.ndarray, n_parts: int
) -> tuple[np.ndarray, np.ndarray]:
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
