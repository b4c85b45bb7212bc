"""Closest points and distances between points, segments and triangles (Ericson, Real-Time
Collision Detection 5.1.2 and 5.1.5), shared by the mesh collider and self-collision.
"""

from __future__ import annotations

from numba import njit

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT


# ----------------------------------------------------------------------------------------------
# Point-triangle closest point (Ericson, Real-Time Collision Detection 5.1.5).
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def closest_on_triangle(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2):
    """Barycentric (u, v, w) of the point of triangle abc closest to p (q = u a + v b + w c)."""
    ab0, ab1, ab2 = b0 - a0, b1 - a1, b2 - a2
    ac0, ac1, ac2 = c0 - a0, c1 - a1, c2 - a2
    ap0, ap1, ap2 = p0 - a0, p1 - a1, p2 - a2
    d1 = ab0 * ap0 + ab1 * ap1 + ab2 * ap2
    d2 = ac0 * ap0 + ac1 * ap1 + ac2 * ap2
    if d1 <= 0.0 and d2 <= 0.0:
        return 1.0, 0.0, 0.0
    bp0, bp1, bp2 = p0 - b0, p1 - b1, p2 - b2
    d3 = ab0 * bp0 + ab1 * bp1 + ab2 * bp2
    d4 = ac0 * bp0 + ac1 * bp1 + ac2 * bp2
    if d3 >= 0.0 and d4 <= d3:
        return 0.0, 1.0, 0.0
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        v = d1 / (d1 - d3)
        return 1.0 - v, v, 0.0
    cp0, cp1, cp2 = p0 - c0, p1 - c1, p2 - c2
    d5 = ab0 * cp0 + ab1 * cp1 + ab2 * cp2
    d6 = ac0 * cp0 + ac1 * cp1 + ac2 * cp2
    if d6 >= 0.0 and d5 <= d6:
        return 0.0, 0.0, 1.0
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        w = d2 / (d2 - d6)
        return 1.0 - w, 0.0, w
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        return 0.0, 1.0 - w, w
    denom = va + vb + vc
    if denom == 0.0:  # degenerate triangle: fall back to vertex a
        return 1.0, 0.0, 0.0
    v = vb / denom
    w = vc / denom
    return 1.0 - v - w, v, w


@njit(inline="always", **_JIT)
def closest_on_triangle_d2(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2):
    """(u, v, w, squared distance) of the point of triangle abc closest to p; every caller that
    compares or caches these distances computes them here, so they agree to the bit."""
    u, v, w = closest_on_triangle(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2)
    q0 = u * a0 + v * b0 + w * c0
    q1 = u * a1 + v * b1 + w * c1
    q2 = u * a2 + v * b2 + w * c2
    return u, v, w, (p0 - q0) ** 2 + (p1 - q1) ** 2 + (p2 - q2) ** 2


@njit(inline="always", **_JIT)
def triangle_cross(a0, a1, a2, b0, b1, b2, c0, c1, c2):
    """(b - a) x (c - a): the normal of abc (right hand) scaled by twice its area."""
    e0, e1, e2 = b0 - a0, b1 - a1, b2 - a2
    f0, f1, f2 = c0 - a0, c1 - a1, c2 - a2
    return e1 * f2 - e2 * f1, e2 * f0 - e0 * f2, e0 * f1 - e1 * f0


@njit(inline="always", **_JIT)
def triangle_normal(a0, a1, a2, b0, b1, b2, c0, c1, c2):
    """Unit normal of abc (right hand), or zeros when degenerate."""
    n0, n1, n2 = triangle_cross(a0, a1, a2, b0, b1, b2, c0, c1, c2)
    length = sqrt(n0 * n0 + n1 * n1 + n2 * n2)
    if length < 1e-300:
        return 0.0, 0.0, 0.0
    return n0 / length, n1 / length, n2 / length


@njit(inline="always", **_JIT)
def point_segment_distance(p0, p1, p2, a0, a1, a2, b0, b1, b2):
    """Distance of p to the segment [a, b] (a point when a == b)."""
    d0, d1, d2 = b0 - a0, b1 - a1, b2 - a2
    len2 = d0 * d0 + d1 * d1 + d2 * d2
    s = 0.0
    if len2 > 0.0:
        s = min(max(((p0 - a0) * d0 + (p1 - a1) * d1 + (p2 - a2) * d2) / len2, 0.0), 1.0)
    return sqrt((p0 - a0 - s * d0) ** 2 + (p1 - a1 - s * d1) ** 2 + (p2 - a2 - s * d2) ** 2)


@njit(inline="always", **_JIT)
def segment_plane_gap(p0, p1, p2, q0, q1, q2, a0, a1, a2, b0, b1, b2, c0, c1, c2):
    """A lower bound of the distance between the segment [p, q] and the triangle abc: the
    distance of the nearer end to the triangle's plane when both ends are on the same side,
    else 0 (0 for a degenerate triangle). Every point of the segment is at least that far from
    the plane, every point of the triangle is in it; about 30 flops against ~200 for the exact
    distance (ends, crossing point, three edge pairs), and equal to it for a segment above the
    face."""
    n0, n1, n2 = triangle_cross(a0, a1, a2, b0, b1, b2, c0, c1, c2)
    length = sqrt(n0 * n0 + n1 * n1 + n2 * n2)
    if length < 1e-300:
        return 0.0
    sp = n0 * (p0 - a0) + n1 * (p1 - a1) + n2 * (p2 - a2)
    sq = n0 * (q0 - a0) + n1 * (q1 - a1) + n2 * (q2 - a2)
    if sp * sq <= 0.0:
        return 0.0
    return min(abs(sp), abs(sq)) / length


@njit(inline="always", **_JIT)
def point_triangle_distance(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2):
    u, v, w = closest_on_triangle(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2)
    return sqrt(
        (p0 - u * a0 - v * b0 - w * c0) ** 2
        + (p1 - u * a1 - v * b1 - w * c1) ** 2
        + (p2 - u * a2 - v * b2 - w * c2) ** 2
    )


@njit(**_JIT)
def triangle_spheres(v0, tris, center, rad):
    """Bounding sphere (centroid, largest corner distance) of every triangle at ``v0``."""
    for t in range(tris.shape[0]):
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        r2 = 0.0
        for d in range(3):
            center[t, d] = (v0[ia, d] + v0[ib, d] + v0[ic, d]) / 3.0
        for k in range(3):
            j = tris[t, k]
            r2 = max(
                r2, (v0[j, 0] - center[t, 0]) ** 2 + (v0[j, 1] - center[t, 1]) ** 2 + (v0[j, 2] - center[t, 2]) ** 2
            )
        rad[t] = sqrt(r2)


@njit(inline="always", **_JIT)
def push_vertex_triangle(x, i, ia, ib, ic, u, v, w, wi, wa, wb, wc, step, n0, n1, n2):
    """Apply a vertex-triangle correction: vertex i moves by ``wi step n``, the triangle's corners
    by ``-w_k b_k step n`` with b = (u, v, w) the barycentrics of the contact point (the gradient of
    ``C = n . (p - (u a + v b + w c))``; Bridson et al. 2002); ``w*`` each vertex's inverse mass (or
    its share of it)."""
    x[i, 0] += wi * step * n0
    x[i, 1] += wi * step * n1
    x[i, 2] += wi * step * n2
    x[ia, 0] -= wa * u * step * n0
    x[ia, 1] -= wa * u * step * n1
    x[ia, 2] -= wa * u * step * n2
    x[ib, 0] -= wb * v * step * n0
    x[ib, 1] -= wb * v * step * n1
    x[ib, 2] -= wb * v * step * n2
    x[ic, 0] -= wc * w * step * n0
    x[ic, 1] -= wc * w * step * n1
    x[ic, 2] -= wc * w * step * n2
