"""Independent reference for the tests: the number of crossing triangle pairs, written apart from
the solver (scipy KD-tree of the triangles' bounding spheres, then a vectorised NumPy
segment-triangle test in both directions). Triangles sharing a vertex are not tested."""

import numpy as np
from scipy.spatial import cKDTree


def _segments_cross(p, q, a, b, c):
    """Rows where the open segment p q passes through triangle abc (Moeller-Trumbore, vectorised)."""
    d = q - p
    e1, e2 = b - a, c - a
    h = np.cross(d, e2)
    det = np.einsum("ij,ij->i", e1, h)
    ok = np.abs(det) > 1e-14 * np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1) * np.linalg.norm(d, axis=1)
    inv = np.where(ok, 1.0 / np.where(ok, det, 1.0), 0.0)
    s = p - a
    u = np.einsum("ij,ij->i", s, h) * inv
    k = np.cross(s, e1)
    v = np.einsum("ij,ij->i", d, k) * inv
    t = np.einsum("ij,ij->i", e2, k) * inv
    return ok & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 0) & (t < 1)


def crossing_pairs(x, tris):
    """(P, 2) indices of the triangle pairs (sharing no vertex) whose surfaces cross at x."""
    x = np.asarray(x, dtype=np.float64)
    tris = np.asarray(tris)
    corners = x[tris]  # (T, 3, 3)
    centre = corners.mean(axis=1)
    radius = np.linalg.norm(corners - centre[:, None], axis=2).max(axis=1)
    pairs = cKDTree(centre).query_pairs(2.0 * radius.max() + 1e-12, output_type="ndarray")
    if len(pairs) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    i, j = pairs[:, 0], pairs[:, 1]
    near = np.linalg.norm(centre[i] - centre[j], axis=1) <= radius[i] + radius[j]
    i, j = i[near], j[near]
    shared = (tris[i][:, :, None] == tris[j][:, None, :]).any(axis=(1, 2))
    i, j = i[~shared], j[~shared]
    hit = np.zeros(len(i), dtype=bool)
    for one, other in ((i, j), (j, i)):
        a, b, c = (x[tris[other, k]] for k in range(3))
        for e in range(3):
            p, q = x[tris[one, e]], x[tris[one, (e + 1) % 3]]
            hit |= _segments_cross(p, q, a, b, c)
    return np.stack([i[hit], j[hit]], axis=1)


def crossing_count(x, tris):
    return int(len(crossing_pairs(x, tris)))
