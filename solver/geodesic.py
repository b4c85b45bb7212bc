"""Nearest pins for long range attachments: Euclidean and geodesic (along mesh edges).

Geodesic distances use a multi-source Dijkstra over the rest-length edge graph that settles each
vertex up to ``k`` times, once per distinct source, which yields the ``k`` nearest pins of every
vertex in one pass (Kim et al. 2012 use the geodesic distance as the tether rest length; UE's
Chaos Cloth offers the same choice, "slower to initialise, fewer artefacts").
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _numba_setup  # noqa: F401


@njit(cache=True)
def _heap_push(keys, nodes, srcs, size, key, node, src):
    i = size
    keys[i], nodes[i], srcs[i] = key, node, src
    while i > 0:
        parent = (i - 1) // 2
        if keys[parent] <= keys[i]:
            break
        keys[i], keys[parent] = keys[parent], keys[i]
        nodes[i], nodes[parent] = nodes[parent], nodes[i]
        srcs[i], srcs[parent] = srcs[parent], srcs[i]
        i = parent
    return size + 1


@njit(cache=True)
def _heap_pop(keys, nodes, srcs, size):
    key, node, src = keys[0], nodes[0], srcs[0]
    size -= 1
    keys[0], nodes[0], srcs[0] = keys[size], nodes[size], srcs[size]
    i = 0
    while True:
        left = 2 * i + 1
        right = left + 1
        smallest = i
        if left < size and keys[left] < keys[smallest]:
            smallest = left
        if right < size and keys[right] < keys[smallest]:
            smallest = right
        if smallest == i:
            break
        keys[i], keys[smallest] = keys[smallest], keys[i]
        nodes[i], nodes[smallest] = nodes[smallest], nodes[i]
        srcs[i], srcs[smallest] = srcs[smallest], srcs[i]
        i = smallest
    return key, node, src, size


@njit(cache=True)
def k_nearest_sources_geodesic(n, adjacency_start, adjacency_vertex, adjacency_length, sources, k):
    """For every vertex, the ``k`` nearest sources by shortest path length. -1 / inf where unreachable."""
    best_src = -np.ones((n, k), dtype=np.int64)
    best_dist = np.full((n, k), np.inf)
    settled = np.zeros(n, dtype=np.int64)
    capacity = 4 * (adjacency_vertex.shape[0] + sources.shape[0]) * k + 16
    keys = np.empty(capacity)
    nodes = np.empty(capacity, dtype=np.int64)
    srcs = np.empty(capacity, dtype=np.int64)
    size = 0
    for s in range(sources.shape[0]):
        size = _heap_push(keys, nodes, srcs, size, 0.0, sources[s], sources[s])
    while size > 0:
        dist, node, src, size = _heap_pop(keys, nodes, srcs, size)
        if settled[node] >= k:
            continue
        duplicate = False
        for a in range(settled[node]):
            if best_src[node, a] == src:
                duplicate = True
        if duplicate:
            continue
        best_src[node, settled[node]] = src
        best_dist[node, settled[node]] = dist
        settled[node] += 1
        for e in range(adjacency_start[node], adjacency_start[node + 1]):
            nb = adjacency_vertex[e]
            if settled[nb] < k:
                if size >= capacity:
                    return best_src, best_dist  # cannot happen with the capacity bound above
                size = _heap_push(keys, nodes, srcs, size, dist + adjacency_length[e], nb, src)
    return best_src, best_dist


@njit(cache=True)
def k_nearest_sources_euclidean(positions, sources, k):
    """Brute force k nearest sources in straight-line distance (sources are few: the pins)."""
    n = positions.shape[0]
    best_src = -np.ones((n, k), dtype=np.int64)
    best_dist = np.full((n, k), np.inf)
    for i in range(n):
        for s in range(sources.shape[0]):
            p = sources[s]
            dx = positions[i, 0] - positions[p, 0]
            dy = positions[i, 1] - positions[p, 1]
            dz = positions[i, 2] - positions[p, 2]
            d = np.sqrt(dx * dx + dy * dy + dz * dz)
            slot = k
            while slot > 0 and d < best_dist[i, slot - 1]:
                slot -= 1
            if slot < k:
                for a in range(k - 1, slot, -1):
                    best_dist[i, a] = best_dist[i, a - 1]
                    best_src[i, a] = best_src[i, a - 1]
                best_dist[i, slot] = d
                best_src[i, slot] = p
    return best_src, best_dist


def edge_adjacency(n: int, edges: np.ndarray, edge_length: np.ndarray):
    """CSR adjacency (start, neighbour, length) of an undirected edge list."""
    both = np.concatenate([edges, edges[:, ::-1]])
    lengths = np.concatenate([edge_length, edge_length])
    order = np.argsort(both[:, 0], kind="stable")
    start = np.searchsorted(both[order, 0], np.arange(n + 1)).astype(np.int64)
    return start, both[order, 1].astype(np.int64), lengths[order].astype(np.float64)
