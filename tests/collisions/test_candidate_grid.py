"""The cloth-contact candidate search (hash grid of box centres) against brute force over every pair.

The grid only decides which pairs get looked at; the pair rule itself (box overlap along the
paths, distance less the paths' closing within reach, no shared vertex, not closer than 2 d at
rest) is applied here to every vertex-triangle and edge-edge pair of a folded, randomly moved
sheet, without the grid, and the grid has to find exactly those pairs, each once.
"""

import numpy as np
import pytest

from selvedge.solver import Cloth, grid_mesh
from selvedge.solver.collisions import candidate_search as cs
from selvedge.solver.collisions.geometry import closest_on_triangle
from selvedge.solver.collisions.world import CollisionWorld

MARGIN = 0.004


def _folded_sheet(seed):
    """A 14 x 14 sheet (1.2 cm edges) folded over itself 5-9 mm apart, jittered, with random
    paths of up to ~half an edge: many pairs within reach across the fold and in the plane."""
    rng = np.random.default_rng(seed)
    pos, faces, _ = grid_mesh(14, 14, 0.156, 0.156, origin=(0.0, 0.0, 0.0))
    faces = np.asarray(faces)
    rest = pos.copy()
    x = pos.copy()
    over = x[:, 0] > 0.078  # the right half folded back over the left, a few millimetres up
    x[over, 0] = 0.156 - x[over, 0]
    x[over, 2] = rng.uniform(0.005, 0.009, over.sum())
    x += rng.normal(scale=0.0015, size=x.shape)
    path = rng.normal(scale=0.003, size=x.shape)
    world = CollisionWorld([Cloth(rest, faces)], margin_m=MARGIN)  # the contact mesh of one cloth
    return x, path, world.mesh


def _boxes(x, path, prims):
    ends = np.stack([x[prims], x[prims] + path[prims]], axis=1).reshape(len(prims), -1, 3)
    return ends.min(axis=1), ends.max(axis=1)


def _gap(path, i, j):
    return np.linalg.norm(path[i] - path[j])


def _vt_reference(x, path, mesh):
    tris, th = mesh.tris, mesh.thickness
    lo, hi = _boxes(x, path, tris)
    found = set()
    for i in range(len(x)):
        reach = 0.5 * (th[i] + th.max()) + MARGIN
        ql = np.minimum(x[i], x[i] + path[i]) - reach
        qh = np.maximum(x[i], x[i] + path[i]) + reach
        overlap = np.all((lo <= qh) & (hi >= ql), axis=1) & ~np.any(tris == i, axis=1)
        for t in np.flatnonzero(overlap):
            a, b, c = tris[t]
            d = 0.5 * (th[i] + th[a])
            u, v, w = closest_on_triangle(*x[i], *x[a], *x[b], *x[c])
            dist = np.linalg.norm(x[i] - (u * x[a] + v * x[b] + w * x[c]))
            closing = max(_gap(path, i, a), _gap(path, i, b), _gap(path, i, c))
            r = mesh.rest
            u, v, w = closest_on_triangle(*r[i], *r[a], *r[b], *r[c])
            if dist - closing <= d + MARGIN and np.linalg.norm(r[i] - (u * r[a] + v * r[b] + w * r[c])) >= 2 * d:
                found.add((i, int(t)))
    return found


def _segment_distance(p0, p1, q0, q1, samples=400):
    """Distance of two segments: minimum over a dense sampling of the first, each sample's
    distance to the second in closed form (the error is at most half a sample spacing)."""
    s = np.linspace(0.0, 1.0, samples)[:, None]
    p = p0 + s * (p1 - p0)
    d = q1 - q0
    t = np.clip(((p - q0) @ d) / (d @ d), 0.0, 1.0)[:, None]
    return np.linalg.norm(p - (q0 + t * d), axis=1).min(), np.linalg.norm(p1 - p0) / (2 * (samples - 1))


def _ee_reference(x, path, mesh):
    """Edge pairs by the rule, with the segment distance sampled: pairs within the sampling error
    of the reach are returned apart (either answer is right for them)."""
    edges, th = mesh.edges, mesh.thickness
    lo, hi = _boxes(x, path, edges)
    found, borderline = set(), set()
    for e, (a, b) in enumerate(edges):
        reach = 0.5 * (th[a] + th.max()) + MARGIN
        overlap = np.all((lo <= hi[e] + reach) & (hi >= lo[e] - reach), axis=1)
        overlap[: e + 1] = False
        overlap &= ~np.any((edges == a) | (edges == b), axis=1)
        for f in np.flatnonzero(overlap):
            c, dd = edges[f]
            d = 0.5 * (th[a] + th[c])
            dist, err = _segment_distance(x[a], x[b], x[c], x[dd])
            rest, rest_err = _segment_distance(mesh.rest[a], mesh.rest[b], mesh.rest[c], mesh.rest[dd])
            closing = _gap(path, a, b) + max(_gap(path, a, c), _gap(path, a, dd))
            limit = d + MARGIN + closing
            if abs(dist - limit) <= err or abs(rest - 2 * d) <= rest_err:
                borderline.add((e, int(f)))
            elif dist <= limit and rest >= 2 * d:
                found.add((e, int(f)))
    return found, borderline


def _grid_pairs(seed, find):
    """The folded sheet of ``seed`` and the set of pairs ``find`` (a candidate search) lists on it,
    after checking that it lists none twice."""
    x, path, mesh = _folded_sheet(seed)
    cell = max(0.012, float(mesh.thickness.max()) + MARGIN)
    first, second = find(x, np.ones(len(x)), mesh, MARGIN, cell, path)
    pairs = list(zip(first.tolist(), second.tolist()))
    assert len(pairs) == len(set(pairs)), "a pair listed twice"
    return x, path, mesh, cell, set(pairs)


@pytest.mark.parametrize("seed", [1, 2])
def test_grid_finds_exactly_the_vertex_triangle_pairs_of_brute_force(seed):
    x, path, mesh, cell, pairs = _grid_pairs(seed, cs.vertex_triangle_candidates)
    reference = _vt_reference(x, path, mesh)
    assert pairs == reference
    assert len(reference) > 300  # across the fold and in the plane
    # a subset of the vertices against a subset of the triangles: the pairs of the full list between them
    some_rows, some_tris = np.arange(0, len(x), 3), np.arange(0, len(mesh.tris), 2)
    rows, tris = cs.vertex_triangle_candidates(
        x, np.ones(len(x)), mesh, MARGIN, cell, path, rows=some_rows, triangles=some_tris
    )
    expected = {(i, t) for i, t in reference if i % 3 == 0 and t % 2 == 0}
    assert set(zip(rows.tolist(), tris.tolist())) == expected
    # the same from the triangles' side (a partial re-detection: a few triangles, many vertices)
    verts, tris = cs.triangle_vertex_candidates(x, np.ones(len(x)), mesh, MARGIN, cell, path, some_tris, some_rows)
    found = list(zip(verts.tolist(), tris.tolist()))
    assert len(found) == len(set(found)) and set(found) == expected


@pytest.mark.parametrize("seed", [1, 2])
def test_grid_finds_exactly_the_edge_edge_pairs_of_brute_force(seed):
    x, path, mesh, cell, pairs = _grid_pairs(seed, cs.edge_edge_candidates)
    reference, borderline = _ee_reference(x, path, mesh)
    assert pairs - borderline == reference
    assert len(reference) > 500 and len(borderline) < 0.01 * len(reference)
    # the pairs with at least one edge of a subset (a partial re-detection), each once, as (lower, higher)
    some = np.arange(0, len(mesh.edges), 5)
    a, b = cs.edge_edge_candidates(x, np.ones(len(x)), mesh, MARGIN, cell, path, rows=some)
    found = list(zip(a.tolist(), b.tolist()))
    assert len(found) == len(set(found)) and all(e < f for e, f in found)
    assert set(found) - borderline == {(e, f) for e, f in reference if e % 5 == 0 or f % 5 == 0}
