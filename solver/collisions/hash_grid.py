"""Uniform hash grid over axis-aligned boxes (triangles of a collider mesh or of the cloth)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from ._jit import _JIT


# ----------------------------------------------------------------------------------------------
# Uniform hash grid over axis-aligned boxes (triangles of a collider mesh or of the cloth).
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def cell_hash(ix, iy, iz, table_size):
    """Bucket of cell (ix, iy, iz) in a power-of-two table (Teschner 2003 primes, then a
    multiply-xorshift mix: the raw xor clusters badly on a 2D sheet in a 3D grid)."""
    h = (ix * 73856093) ^ (iy * 19349663) ^ (iz * 83492791)
    h ^= h >> 17
    h *= 1540483477
    h ^= h >> 15
    return h & (table_size - 1)


@njit(inline="always", **_JIT)
def finite_box(lo, hi, b):
    """False for a box with a non-finite or absurd (> 1e6 m) coordinate: it is never hashed."""
    for d in range(3):
        if not (abs(lo[b, d]) < 1e6 and abs(hi[b, d]) < 1e6):
            return False
    return True


@njit(inline="always", **_JIT)
def box_cells(lo, hi, b, inv_cell, max_cells_per_box):
    """Inclusive grid-cell range (i0, i1, j0, j1, k0, k1) of box b, clamped to max_cells_per_box per axis."""
    i0 = int(math.floor(lo[b, 0] * inv_cell))
    j0 = int(math.floor(lo[b, 1] * inv_cell))
    k0 = int(math.floor(lo[b, 2] * inv_cell))
    i1 = max(i0, min(int(math.floor(hi[b, 0] * inv_cell)), i0 + max_cells_per_box))
    j1 = max(j0, min(int(math.floor(hi[b, 1] * inv_cell)), j0 + max_cells_per_box))
    k1 = max(k0, min(int(math.floor(hi[b, 2] * inv_cell)), k0 + max_cells_per_box))
    return i0, i1, j0, j1, k0, k1


@njit(**_JIT)
def hash_boxes(lo, hi, cell, table_size, max_cells_per_box):
    """Counting-sort hash grid of boxes [lo, hi]: (bucket_start (table_size+1,), items).

    A box is entered in every bucket of the cells it overlaps (at most ``max_cells_per_box``
    cells per axis product; a larger box is entered in its clamped range, which only happens
    for an exploding state that the solver rolls back anyway).
    """
    nbox = lo.shape[0]
    counts = np.zeros(table_size + 1, dtype=np.int64)
    items = np.empty(0, dtype=np.int64)
    fill = np.empty(0, dtype=np.int64)
    inv = 1.0 / cell
    for filling in range(2):  # pass 0 counts the entries per bucket, pass 1 places them
        for b in range(nbox):
            if not finite_box(lo, hi, b):
                continue
            i0, i1, j0, j1, k0, k1 = box_cells(lo, hi, b, inv, max_cells_per_box)
            for i in range(i0, i1 + 1):
                for j in range(j0, j1 + 1):
                    for k in range(k0, k1 + 1):
                        t = cell_hash(i, j, k, table_size)
                        if filling:
                            items[fill[t]] = b
                            fill[t] += 1
                        else:
                            counts[t + 1] += 1
        if not filling:
            for t in range(table_size):
                counts[t + 1] += counts[t]
            items = np.empty(counts[table_size], dtype=np.int64)
            fill = counts[:table_size].copy()
    return counts, items


@njit(inline="always", **_JIT)
def boxes_overlapping(ql, qh, inv_cell, max_cells_per_box, table_size, bucket_start, items, lo, hi, stamp, mark, found):
    """The boxes [lo, hi] of a :func:`hash_boxes` grid that overlap the query box [ql[0], qh[0]],
    each once, written to ``found[:k]``; returns k. ``stamp`` (one slot per box) marks the boxes
    seen with ``mark``: use a new mark per query (e.g. the query's index), and clear the stamps
    before a query is repeated with the same mark."""
    k = 0
    i0, i1, j0, j1, k0, k1 = box_cells(ql, qh, 0, inv_cell, max_cells_per_box)
    for i in range(i0, i1 + 1):
        for j in range(j0, j1 + 1):
            for c in range(k0, k1 + 1):
                t = cell_hash(i, j, c, table_size)
                for s in range(bucket_start[t], bucket_start[t + 1]):
                    b = items[s]
                    if stamp[b] == mark:
                        continue
                    stamp[b] = mark
                    if (
                        lo[b, 0] > qh[0, 0]
                        or hi[b, 0] < ql[0, 0]
                        or lo[b, 1] > qh[0, 1]
                        or hi[b, 1] < ql[0, 1]
                        or lo[b, 2] > qh[0, 2]
                        or hi[b, 2] < ql[0, 2]
                    ):
                        continue
                    found[k] = b
                    k += 1
    return k


# ----------------------------------------------------------------------------------------------
# Hash grid of box centres: each box entered once, queries grown by the largest half-extent.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def centre_cell(lo, hi, b, d, inv_cell):
    """Cell number along axis ``d`` of box ``b``'s centre: the cell :func:`hash_box_centres` enters
    it in (a query that skips cells by their order has to compute its own the same way)."""
    return int(math.floor(0.5 * (lo[b, d] + hi[b, d]) * inv_cell))


@njit(**_JIT)
def hash_box_centres(lo, hi, boxes, cell, table_size):
    """Counting-sort hash grid of the boxes ``boxes`` (numbers into lo/hi), each entered once, in
    the cell of its centre: (bucket_start (table_size+1,), items (box numbers), item_cell (M, 3):
    each entry's cell, in bucket order, extent (3,): the largest half-extent per axis).

    A query box [ql, qh] then visits the cells of [ql - extent, qh + extent] and keeps an entry
    only when its cell is the visited one (two cells may share a bucket), so every box is seen
    at most once: none of the duplicate visits of a grid that enters a box in every cell it
    overlaps (a triangle of a sheet sat in ~6 cells, and a query met each one ~4 times)."""
    inv = 1.0 / cell
    m = boxes.shape[0]
    cells = np.empty((m, 3), dtype=np.int64)
    keep = np.zeros(m, dtype=np.bool_)
    extent = np.zeros(3)
    counts = np.zeros(table_size + 1, dtype=np.int64)
    for r in range(m):
        b = boxes[r]
        if not finite_box(lo, hi, b):
            continue
        keep[r] = True
        for d in range(3):
            extent[d] = max(extent[d], 0.5 * (hi[b, d] - lo[b, d]))
            cells[r, d] = centre_cell(lo, hi, b, d, inv)
        counts[cell_hash(cells[r, 0], cells[r, 1], cells[r, 2], table_size) + 1] += 1
    for t in range(table_size):
        counts[t + 1] += counts[t]
    items = np.empty(counts[table_size], dtype=np.int64)
    item_cell = np.empty((counts[table_size], 3), dtype=np.int64)
    fill = counts[:table_size].copy()
    for r in range(m):
        if keep[r]:
            t = cell_hash(cells[r, 0], cells[r, 1], cells[r, 2], table_size)
            items[fill[t]] = boxes[r]
            for d in range(3):
                item_cell[fill[t], d] = cells[r, d]
            fill[t] += 1
    return counts, items, item_cell, extent


@njit(inline="always", **_JIT)
def centre_query_cells(ql, qh, extent, inv_cell, max_cells):
    """Inclusive cell range (i0, i1, j0, j1, k0, k1) a :func:`hash_box_centres` query of the box
    [ql, qh] visits: the box grown by the grid's extent, clamped to ``max_cells`` per axis."""
    i0 = int(math.floor((ql[0] - extent[0]) * inv_cell))
    j0 = int(math.floor((ql[1] - extent[1]) * inv_cell))
    k0 = int(math.floor((ql[2] - extent[2]) * inv_cell))
    i1 = min(int(math.floor((qh[0] + extent[0]) * inv_cell)), i0 + max_cells)
    j1 = min(int(math.floor((qh[1] + extent[1]) * inv_cell)), j0 + max_cells)
    k1 = min(int(math.floor((qh[2] + extent[2]) * inv_cell)), k0 + max_cells)
    return i0, i1, j0, j1, k0, k1
