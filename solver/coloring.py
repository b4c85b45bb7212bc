"""Greedy graph colouring of constraints for parallel Gauss-Seidel (001 sec. 7.2).

Two constraints conflict when they write the same vertex. Kinematic vertices (inverse mass 0)
are never written, so they do not cause conflicts: all tethers of a cape may share one pin
and still run in parallel.
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
