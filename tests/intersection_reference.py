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


def _dot(a, b):
    return np.einsum("ij,ij->i", a, b)


def segment_distances(p, q, r, s):
    """Rows' distances between segments p q and r s (closest points clamped to both segments,
    Ericson, Real-Time Collision Detection sec. 5.1.9, vectorised)."""
    d1, d2, w = q - p, s - r, p - r
    a, e, f = _dot(d1, d1), _dot(d2, d2), _dot(d2, w)
    c, b = _dot(d1, w), _dot(d1, d2)
    denom = a * e - b * b
    t_s = np.where(denom > 1e-30 * a * e, np.clip((b * f - c * e) / np.where(denom > 0, denom, 1.0), 0, 1), 0.0)
    t_t = (b * t_s + f) / np.where(e > 0, e, 1.0)
    # t outside [0, 1]: clamp it and recompute s for it
    low, high = t_t < 0, t_t > 1
    t_t = np.clip(t_t, 0, 1)
    t_s = np.where(low, np.clip(-c / np.where(a > 0, a, 1.0), 0, 1), t_s)
    t_s = np.where(high, np.clip((b - c) / np.where(a > 0, a, 1.0), 0, 1), t_s)
    return np.linalg.norm(p + t_s[:, None] * d1 - (r + t_t[:, None] * d2), axis=1)


def point_triangle_distances(x, a, b, c):
    """Rows' distances from point x to triangle abc: the plane distance when the projection lies
    inside, else the nearest of the three edges."""
    n = np.cross(b - a, c - a)
    nn = _dot(n, n)
    h = _dot(x - a, n) / nn
    proj = x - h[:, None] * n
    inside = np.ones(x.shape[0], dtype=bool)
    for u, v in ((a, b), (b, c), (c, a)):
        inside &= _dot(np.cross(v - u, proj - u), n) >= 0
    plane = np.abs(h) * np.sqrt(nn)
    edges = np.minimum.reduce([segment_distances(x, x, u, v) for u, v in ((a, b), (b, c), (c, a))])
    return np.where(inside, plane, edges)
