"""Untangling cloth that already crosses itself or another cloth: intersection contour
minimization (ICM; Volino & Magnenat-Thalmann 2006, "Resolving surface collisions through
intersection contour minimization"), as plain gradient descent on the contour's length.

The contacts (:mod:`.cloth_contacts`) keep pairs apart that are apart. A fold too fast for the
substeps carries a layer through another; a pair crossed that way can stay crossed for good (an
edge through a triangle near its corner: no vertex lies over the other face and no edge pair has
its closest points inside both edges, so no contact pushes it back), and until now the world's
only answer was to run the frame again at 2, 4 and 8 times the substeps. ICM instead moves the
two meshes so that the curves along which they intersect get shorter, until they vanish.

Each crossing triangle pair meets along one segment between two points where an edge of one
pierces the other; the move is minus the exact gradient of the segments' total length with
respect to every vertex (:func:`contour_gradient_of_pair`; Volino's per-edge direction
``R - (E . R) / (E . N) N`` is this gradient for an edge moved rigidly, but the two piercing
edges of one triangle share a vertex, and the summed directions lengthened the contour for a
third of random crossing pairs). Each vertex moves at most ``step_m`` a round (``g step / sqrt(|g|^2 +
step^2)``), pinned and kinematic vertices (inverse mass 0) not at all. A crossing with no
segment to shorten (shrunk to a point, or through a vertex) slides the piercing edge off the
triangle along its normal (:func:`_slide_off`).
"""

from __future__ import annotations

from math import sqrt

import numpy as np
from numba import njit

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from ._jit import _JIT
from .intersections import TriangleGroups, list_crossings, segment_pierces_triangle


@njit(**_JIT)
def contour_moves(x, tris, inv_mass, pairs, move):
    """Add to ``move`` (n, 3) minus the gradient of the intersection contours' length
    (:func:`contour_gradient_of_pair` for each crossing pair, rows (s, t) of ``pairs``), on the
    vertices that move (inverse mass > 0). Returns the number of pairs with a contour segment."""
    segments = 0
    # per piercing point (at most six, two kept): its edge (p, q), tau along it, the pierced
    # triangle's vertices and the point's barycentrics in it, the point
    edge = np.empty((6, 2), dtype=np.int64)
    face = np.empty((6, 3), dtype=np.int64)
    tau = np.empty(6)
    lam = np.empty((6, 3))
    point = np.empty((6, 3))
    for k in range(pairs.shape[0]):
        segments += contour_gradient_of_pair(
            x, tris, inv_mass, pairs[k, 0], pairs[k, 1], move, edge, face, tau, lam, point
        )
    return segments


@njit(inline="always", **_JIT)
def _slide_off(x, inv_mass, p, q, tau, face, move):
    """A crossing with no contour to shorten (shrunk to a point, or through a vertex): move the
    edge (p, q) along the face's unit normal towards the side of its far end, so that its near end
    leaves through the plane, and the face the other way (unit size, as a gradient's)."""
    a, b, c = face[0], face[1], face[2]
    e10, e11, e12 = x[b, 0] - x[a, 0], x[b, 1] - x[a, 1], x[b, 2] - x[a, 2]
    e20, e21, e22 = x[c, 0] - x[a, 0], x[c, 1] - x[a, 1], x[c, 2] - x[a, 2]
    n0, n1, n2 = e11 * e22 - e12 * e21, e12 * e20 - e10 * e22, e10 * e21 - e11 * e20
    nl = sqrt(n0 * n0 + n1 * n1 + n2 * n2)
    if nl < 1e-300:
        return
    n0, n1, n2 = n0 / nl, n1 / nl, n2 / nl
    near = p if tau < 0.5 else q
    side = n0 * (x[near, 0] - x[a, 0]) + n1 * (x[near, 1] - x[a, 1]) + n2 * (x[near, 2] - x[a, 2])
    g = -1.0 if side > 0.0 else 1.0
    for v in (p, q):
        if inv_mass[v] > 0.0:
            move[v, 0] += g * n0
            move[v, 1] += g * n1
            move[v, 2] += g * n2
    for v in (a, b, c):
        if inv_mass[v] > 0.0:
            move[v, 0] -= g * n0
            move[v, 1] -= g * n1
            move[v, 2] -= g * n2


@njit(**_JIT)
def contour_gradient_of_pair(x, tris, inv_mass, s, t, move, edge, face, tau, lam, point):
    """Subtract from ``move`` the gradient of the length of the segment along which triangles s
    and t intersect (rows of movable vertices only); returns 1, or 0 when the crossing is not
    one segment between two piercing points (degenerate: through a vertex; shrunk to a point;
    an edge through an edge is one point, found from both triangles), which :func:`_slide_off`
    moves instead.

    The segment runs between two points where an edge (p, q) of one triangle pierces the other
    triangle (a, b, c): P = p + tau (q - p) with n . (P - a) = 0, n the pierced triangle's normal.
    With u the segment's unit direction (P1 - P2) / |P1 - P2|, d L = u . (d P1 - d P2), and for
    one point, d = q - p::

        d (u . P) / d p = (1 - tau) w,  d (u . P) / d q = tau w,  w = u - (u . d) / (n . d) n
        d (u . P) / d a_i = lambda_i (u . d) / (n . d) n

    (lambda the point's barycentrics in abc: the plane moves by n . sum lambda_i d a_i where the
    point lies, and the point slides along the edge to stay in it). A translation of all five
    vertices gives d (u . P) = u . delta, as it must. ``edge``, ``face``, ``tau``, ``lam``,
    ``point``: scratch rows for the piercing points (:func:`contour_moves`)."""
    points = 0
    size = 0.0
    for d in range(3):
        size += abs(x[tris[s, 1], d] - x[tris[s, 0], d]) + abs(x[tris[t, 1], d] - x[tris[t, 0], d])
    for side in range(2):
        h = s if side == 0 else t
        f = t if side == 0 else s
        for e in range(3):
            p, q = tris[h, e], tris[h, (e + 1) % 3]
            found, tt, lb, lc = segment_pierces_triangle(x, p, q, tris[f, 0], tris[f, 1], tris[f, 2])
            if not found:
                continue
            la = 1.0 - lb - lc
            for d in range(3):
                point[points, d] = x[p, d] + tt * (x[q, d] - x[p, d])
            # an edge through the other triangle's edge is found from both: keep it once
            seen = False
            for j in range(points):
                gap = (
                    abs(point[j, 0] - point[points, 0])
                    + abs(point[j, 1] - point[points, 1])
                    + abs(point[j, 2] - point[points, 2])
                )
                if gap <= 1e-9 * size:
                    seen = True
            if seen:
                continue
            edge[points, 0], edge[points, 1], tau[points] = p, q, tt
            for i in range(3):
                face[points, i] = tris[f, i]
            lam[points, 0], lam[points, 1], lam[points, 2] = la, lb, lc
            points += 1
    if points == 0:
        return 0
    length = 0.0
    if points == 2:
        u0, u1, u2 = point[0, 0] - point[1, 0], point[0, 1] - point[1, 1], point[0, 2] - point[1, 2]
        length = sqrt(u0 * u0 + u1 * u1 + u2 * u2)
    if length <= 1e-9 * size:
        _slide_off(x, inv_mass, edge[0, 0], edge[0, 1], tau[0], face[0], move)
        return 0
    u0, u1, u2 = u0 / length, u1 / length, u2 / length
    for j in range(2):
        sign = 1.0 if j == 0 else -1.0
        a, b, c = face[j, 0], face[j, 1], face[j, 2]
        e10, e11, e12 = x[b, 0] - x[a, 0], x[b, 1] - x[a, 1], x[b, 2] - x[a, 2]
        e20, e21, e22 = x[c, 0] - x[a, 0], x[c, 1] - x[a, 1], x[c, 2] - x[a, 2]
        n0, n1, n2 = e11 * e22 - e12 * e21, e12 * e20 - e10 * e22, e10 * e21 - e11 * e20
        p, q = edge[j, 0], edge[j, 1]
        d0, d1, d2 = x[q, 0] - x[p, 0], x[q, 1] - x[p, 1], x[q, 2] - x[p, 2]
        nd = n0 * d0 + n1 * d1 + n2 * d2  # not 0: the segment passed the determinant test
        coef = (u0 * d0 + u1 * d1 + u2 * d2) / nd
        w0, w1, w2 = sign * (u0 - coef * n0), sign * (u1 - coef * n1), sign * (u2 - coef * n2)
        for v, share in ((p, 1.0 - tau[j]), (q, tau[j])):
            if inv_mass[v] > 0.0:
                move[v, 0] -= share * w0
                move[v, 1] -= share * w1
                move[v, 2] -= share * w2
        for i in range(3):
            v = face[j, i]
            if inv_mass[v] > 0.0:
                g = sign * lam[j, i] * coef
                move[v, 0] -= g * n0
                move[v, 1] -= g * n1
                move[v, 2] -= g * n2
    return 1


@njit(**_JIT)
def apply_moves(x, move, h0, moved):
    """x += each vertex's move g scaled to ``h0 g / sqrt(|g|^2 + h0^2)`` (about ``h0`` long where
    |g| is about 1 or more, as a gradient of a length is); marks ``moved``."""
    for i in range(x.shape[0]):
        m0, m1, m2 = move[i, 0], move[i, 1], move[i, 2]
        m2sum = m0 * m0 + m1 * m1 + m2 * m2
        if m2sum == 0.0:
            continue
        scale = h0 / sqrt(m2sum + h0 * h0)
        x[i, 0] += scale * m0
        x[i, 1] += scale * m1
        x[i, 2] += scale * m2
        moved[i] = True


def untangle(x, tris, inv_mass, groups: TriangleGroups, step_m: float, iterations: int, crossings=None):
    """Move x (in place) by ICM until none of the crossing pairs that the contacts keep apart
    (``groups``) is left, for at most ``iterations`` rounds, each vertex at most ``step_m`` a round.
    ``crossings``: :func:`.intersections.list_crossings` at x, if the caller has it.

    Returns ``(pairs before, pairs after, rounds run, moved, crossings after)``: ``moved`` (n,)
    bool, the vertices it moved; ``crossings after``: ``list_crossings`` at the new x."""
    moved = np.zeros(x.shape[0], dtype=np.bool_)
    move = np.zeros_like(x)
    crossings = list_crossings(x, tris, groups) if crossings is None else crossings
    before = int(crossings[1].shape[0])
    rounds = 0
    while crossings[1].shape[0] and rounds < iterations:
        move[:] = 0.0
        contour_moves(x, tris, inv_mass, crossings[1], move)
        apply_moves(x, move, step_m, moved)
        rounds += 1
        crossings = list_crossings(x, tris, groups)
    return before, int(crossings[1].shape[0]), rounds, moved, crossings
