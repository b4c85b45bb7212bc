"""Per-vertex searches run in parallel chunks of consecutive vertices, each chunk filling its own
fixed buffers (no atomics, no shared scratch), then concatenated in vertex order: the result does
not depend on the chunk count nor on the thread count.

The Numba side is a ``fill_chunks`` kernel with a ``prange`` over chunks; the loop that grows
full buffers lives here, in Python: a cached Numba function that calls a parallel one crashes
once loaded from the on-disk cache (numba/numba#8578, ``tests/solver/test_kernels_from_disk_cache.py``).
"""

from __future__ import annotations

import numpy as np


def equal_chunks(n: int, chunks: int, min_per_chunk: int = 256) -> np.ndarray:
    """Bounds (chunks + 1,) of up to ``chunks`` equal runs of ``n`` items, at least ``min_per_chunk`` each."""
    chunks = max(1, min(int(chunks), n // min_per_chunk))
    return (np.arange(chunks + 1) * n) // chunks


def active_chunks(active: np.ndarray, chunks: int, min_per_chunk: int = 64) -> np.ndarray:
    """Bounds (chunks + 1,) of up to ``chunks`` consecutive runs holding equal numbers of the items
    marked ``active``, at least ``min_per_chunk`` active ones each (a re-query of a handful: one)."""
    n_active = int(np.count_nonzero(active))
    chunks = max(1, min(int(chunks), n_active // min_per_chunk))
    before = np.cumsum(active) - active  # active items before each one
    targets = (np.arange(1, chunks) * n_active) // chunks
    return np.concatenate([[0], np.searchsorted(before, targets, side="left"), [active.shape[0]]]).astype(np.int64)


def fill_in_chunks(fill_chunks, inputs, bounds, buffers, stamps=None):
    """Run ``fill_chunks(*inputs, bounds, resume, counts, [stamps,] *buffers)`` until every chunk c
    has written the results of its items ``bounds[c] .. bounds[c+1] - 1`` into row c of each
    (chunks, capacity) array of ``buffers`` and set ``counts[c]``.

    A chunk whose rows fill up sets ``resume[c]`` to the item that did not fit (its partial
    results dropped); the rows are then doubled and the kernel called again, chunks that are
    done skip, the others go on from ``resume`` with their ``stamps`` row (per-chunk scratch
    marks) cleared. Returns (buffers, counts).
    """
    chunks = bounds.shape[0] - 1
    counts = np.zeros(chunks, dtype=np.int64)
    resume = bounds[:-1].copy()
    scratch = () if stamps is None else (stamps,)
    while True:
        fill_chunks(*inputs, bounds, resume, counts, *scratch, *buffers)
        full = resume < bounds[1:]
        if not full.any():
            return buffers, counts
        buffers = [np.concatenate([b, np.empty_like(b)], axis=1) for b in buffers]
        if stamps is not None:
            stamps[full] = -1


def concatenate_chunks(buffers, counts):
    """Each buffer's chunk rows, cut to their counts, one after the other."""
    return [np.concatenate([b[c, : counts[c]] for c in range(counts.shape[0])]) for b in buffers]
