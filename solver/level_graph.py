"""What the stretch limit's hierarchy (:mod:`.multilevel`) is built on: the level-0 graph (the mesh
edges, with each quad's diagonal chosen so that the diagonals alternate) and the taut hems its
levels take as members last (:func:`taut_borders`).

Why: a quad mesh cut into triangles from each quad's first corner (a fan, and Blender's loop
triangles of a flat quad) runs every diagonal one way on a grid. Coarsened over those edges the
levels come out lopsided, and a 64 x 64 grid hanging from two corners stretched to a P95 of 3.0 %
(1.6 % with both diagonals in the graph); the same grid cut along alternating diagonals (every
other vertex meets the diagonals of its four quads) holds 1.1 % (docs/design/stiff_fabric.md,
"Quads: the levels' diagonals alternate"). The surface keeps its triangles (what Blender renders,
and what the contacts and bending see); only the graph the levels are built on takes, for each
quad, the diagonal between its two vertices of colour 0 in a 2-colouring of the quads' sides. A
mesh already cut along alternating diagonals keeps its own edges, row for row.
"""

from __future__ import annotations

import numpy as np

from .constraints import hops_to_pins


def side_colours(n: int, sides: np.ndarray, component: np.ndarray) -> np.ndarray:
    """(N,) 0 or 1 such that the two ends of a side (an (S, 2) vertex pair: the quads' sides)
    differ wherever the sides allow it, -1 for a vertex on no side: the parity of each vertex's
    hop count from its component's lowest vertex (``component``, :func:`_components`; the hops by
    :func:`.constraints.hops_to_pins`). Runs once per cloth. The components' colours are flipped
    afterwards where that keeps more of the mesh's diagonals (:func:`alternating_level_graph`)."""
    colour = np.full(n, -1, dtype=np.int64)
    if sides.shape[0] == 0:
        return colour
    seeds = np.unique(component[sides.ravel()])
    hops = hops_to_pins(n, sides, seeds)
    reached = np.isfinite(hops)
    colour[reached] = hops[reached].astype(np.int64) % 2
    return colour


def _components(n: int, sides: np.ndarray) -> np.ndarray:
    """(N,) the lowest vertex of each vertex's component over ``sides`` (min-label propagation,
    one vectorised pass per step of the longest path)."""
    label = np.arange(n)
    a, b = sides[:, 0].astype(np.int64), sides[:, 1].astype(np.int64)
    while True:
        low = np.minimum(label[a], label[b])
        new = label.copy()
        np.minimum.at(new, a, low)
        np.minimum.at(new, b, low)
        new = new[new]  # pointer jumping: halves the passes
        if np.array_equal(new, label):
            return label
        label = new


#: A hinge is a quad's diagonal when the angles facing it in both its triangles are at least this
#: (90 degrees in a rectangle's two halves, 45 degrees facing a side; a general triangle mesh's
#: hinges face 40-80 degrees and are left alone).
QUAD_CORNER_MIN_DEG = 75.0


def quad_diagonals(rest: np.ndarray, topology) -> tuple[np.ndarray, np.ndarray]:
    """The quad-like pairs of triangles of a mesh: ``(rows (Q,), second (Q, 2))``, the row in
    ``topology.edges`` of each pair's shared edge (the diagonal the triangulation took) and its
    two vertices opposite that edge (the other diagonal). A hinge counts when both angles facing it
    are at least :data:`QUAD_CORNER_MIN_DEG`: from the shape, not the fabric grain, so a grid turned
    against the object's axes or its UVs is still seen as quads."""
    a, b = topology.hinge_edges[:, 0], topology.hinge_edges[:, 1]
    c, d = topology.hinge_opposite[:, 0], topology.hinge_opposite[:, 1]
    limit = np.cos(np.radians(QUAD_CORNER_MIN_DEG))

    def facing_cos(o):
        u, v = rest[a] - rest[o], rest[b] - rest[o]
        return np.einsum("ij,ij->i", u, v) / np.maximum(np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1), 1e-300)

    quad = (facing_cos(c) <= limit) & (facing_cos(d) <= limit)
    edges = np.asarray(topology.edges, dtype=np.int64)
    shift = np.int64(1) << 32
    hinge = np.sort(np.stack([a[quad], b[quad]], axis=1).astype(np.int64), axis=1)
    rows = np.searchsorted(edges[:, 0] * shift + edges[:, 1], hinge[:, 0] * shift + hinge[:, 1])
    return rows, np.sort(np.stack([c[quad], d[quad]], axis=1).astype(np.int64), axis=1)


def alternating_level_graph(
    n: int, edges: np.ndarray, diagonal_rows: np.ndarray, second_diagonals: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The level-0 graph: ``edges`` (E, 2) with each quad's diagonal chosen to alternate.

    ``diagonal_rows``: (Q,) the row in ``edges`` of each quad's mesh diagonal; ``second_diagonals``:
    (Q, 2) the quad's other diagonal (:func:`quad_diagonals`); the other edges are the sides. Each
    quad keeps the diagonal whose two ends have colour 0 in a 2-colouring of the sides
    (:func:`side_colours`); where neither has (the colouring is not proper there), its mesh
    diagonal. A component whose mesh diagonals mostly join colour-1 vertices has its colours
    flipped first, so a mesh cut along alternating diagonals keeps its own edges. Returns
    ``(graph (E, 2), row (E,))`` (int64), the rows sorted by their vertices as the mesh edges are
    (the levels' greedy aggregation follows the row order): ``row[r]`` the mesh edge that row r
    is, -1 where it is a quad's second diagonal.
    """
    graph = np.asarray(edges, dtype=np.int64).copy()
    row = np.arange(graph.shape[0])
    if diagonal_rows.shape[0] == 0:
        return graph, row
    sides = np.ones(graph.shape[0], dtype=bool)
    sides[diagonal_rows] = False
    side_pairs = graph[sides]
    comp = _components(n, side_pairs)
    colour = side_colours(n, side_pairs, comp)
    mesh_diag = graph[diagonal_rows]
    ci, cj = colour[mesh_diag[:, 0]], colour[mesh_diag[:, 1]]
    same = (ci == cj) & (ci >= 0)
    vote = np.zeros(n, dtype=np.int64)  # per component: diagonals joining colour 1 less those joining 0
    np.add.at(vote, comp[mesh_diag[same, 0]], np.where(ci[same] == 1, 1, -1))
    flip = (vote[comp] > 0) & (colour >= 0)
    colour[flip] = 1 - colour[flip]
    second = np.asarray(second_diagonals, dtype=np.int64)
    mesh_zero = (colour[mesh_diag[:, 0]] == 0) & (colour[mesh_diag[:, 1]] == 0)
    second_zero = (colour[second[:, 0]] == 0) & (colour[second[:, 1]] == 0)
    swap = second_zero & ~mesh_zero
    graph[diagonal_rows[swap]] = second[swap]
    row[diagonal_rows[swap]] = -1
    graph = np.sort(graph, axis=1)
    order = np.lexsort((graph[:, 1], graph[:, 0]))  # sorted as the mesh edges are (the levels' greedy order)
    return graph[order], row[order]


def quad_level_graph(rest: np.ndarray, topology) -> tuple[np.ndarray, np.ndarray]:
    """:func:`alternating_level_graph` of a cloth's mesh, its quads found by :func:`quad_diagonals`."""
    rows, second = quad_diagonals(rest, topology)
    return alternating_level_graph(rest.shape[0], topology.edges, rows, second)


#: A stretch of free border between two pins counts as taut when the pins' rest distance is at least
#: this fraction of the border's rest length between them (a hem pinned at both ends: 1.0).
TAUT_BORDER_STRAIGHTNESS = 0.9


def taut_borders(rest: np.ndarray, topology, pinned: np.ndarray) -> np.ndarray:
    """(N,) bool: the free-border vertices strung between two pins along a straight rest border (the
    hem of a sheet hung by the two corners of one edge), which the levels take as members last
    (:func:`.multilevel.build_hierarchy`, ``border``).

    A free border is a loop of edges of one triangle each; the pins on it cut it into stretches,
    and a stretch whose end pins lie at least :data:`TAUT_BORDER_STRAIGHTNESS` of its rest length
    apart is taut. Held on the levels, such a hem is a chain of links at their limit carrying the
    sheet below it, whose Gauss-Seidel corrections run along it while its load pulls across it
    (docs/design/stiff_fabric.md, "A taut hem stays off the levels"). Runs once per cloth, over
    the border only."""
    taut = np.zeros(rest.shape[0], dtype=bool)
    border = np.asarray(topology.edges, dtype=np.int64)[np.asarray(topology.edge_triangle_count) == 1]
    if border.shape[0] == 0 or not np.any(pinned):
        return taut
    neighbours: dict[int, list[int]] = {}
    for a, b in border.tolist():
        neighbours.setdefault(a, []).append(b)
        neighbours.setdefault(b, []).append(a)
    seen: set[int] = set()
    for first in neighbours:
        if first in seen or len(neighbours[first]) != 2:
            continue
        loop, prev, v = [first], first, neighbours[first][0]
        seen.add(first)
        while v != first and v not in seen and len(neighbours[v]) == 2:
            loop.append(v)
            seen.add(v)
            prev, v = v, neighbours[v][0] if neighbours[v][0] != prev else neighbours[v][1]
        if v != first:  # not a closed loop (a vertex where borders meet): no stretches to judge
            continue
        ring = np.array(loop)
        at = np.flatnonzero(pinned[ring])
        if at.shape[0] < 2:
            continue
        step = np.linalg.norm(rest[np.roll(ring, -1)] - rest[ring], axis=1)  # loop edge k: ring[k] -> ring[k+1]
        for a, b in zip(at, np.roll(at, -1)):
            span = np.arange(a, b if b > a else b + ring.shape[0]) % ring.shape[0]
            if span.shape[0] < 2:
                continue  # neighbouring pins: no free vertex between
            chord = np.linalg.norm(rest[ring[b]] - rest[ring[a]])
            if chord >= TAUT_BORDER_STRAIGHTNESS * step[span].sum():
                taut[ring[span[1:]]] = True
    return taut
