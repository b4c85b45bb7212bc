"""Cloth-cloth and self contacts: vertex-triangle and edge-edge proximity constraints.

All cloths of a :class:`~.world.CollisionWorld` are one index space (global vertex, triangle
and edge numbers). Three stages, after Bridson et al. 2002 and the research note's takeaway
(``shared/research/stiff_cloth.md`` sec. 2):

* **Candidates** (:mod:`.candidate_search`): the pairs
  that can come within ``contact distance + margin`` while every vertex follows its straight
  predicted path, found through a hash grid of triangle (edge) boxes swept along the paths,
  each box entered once, at its centre (:func:`.hash_grid.hash_box_centres`); a vertex (edge)
  queries its swept box grown by that reach, each thread writes its own rows, and every pair is
  met once (a grid that entered each box in every cell it overlaps met a pair ~4 times, and
  twice in its list when two of those cells shared a bucket). The list is reused while every vertex stays
  within about ``margin / 2`` of its path, up to a common affine map
  (:func:`.candidate_lists.path_deviations`): no
  pair that was not a candidate can then have come into contact (the world re-detects when the
  bound breaks or the window ends).
* **Narrow phase** per substep (:func:`vertex_triangle_narrow`, :func:`edge_edge_narrow`):
  a candidate is active when its distance at the substep start is below the contact distance
  plus both primitives' predicted travel over the substep plus a slack: the substep's own solve
  carries a vertex beyond its predicted path (bending pulled a folded hem 3 mm a substep into the
  layer under it, a pair just out of reach at the substep start was left out, and the fold never
  came to rest). The slack is per vertex, read off how far the last substep's solve pulled it
  (:func:`solve_slack`, at most the detection margin); a pair farther from the face's plane (from
  the other edge's line) than its reach is dropped before its closest points are computed. Each
  pair remembers its **side** (of the
  triangle's plane; along the two edges' common normal): refreshed at every substep start while
  the pair is separated (farther than the contact distance), kept while it is in contact, so a
  vertex or an edge pushed across within a substep is pulled back to its side instead of being
  held on the wrong one.
* **Solve** (:func:`solve_vertex_triangle`, :func:`solve_edge_edge`): ``C = side n . (p - q) - d
  >= 0`` with ``q`` the closest point of the other primitive, the correction shared over the
  four vertices by inverse mass, the multiplier clamped to push only (001 sec. 6.4); then
  position-level Coulomb friction on the pair's relative tangential motion over the substep,
  at most ``mu`` times this iteration's normal correction (Mueller et al. 2007 sec. 3.5).
  Layer mass scale (Vellum's layer shock): in a pair of two layers, the lower layer's vertices
  move as if ``layer_mass_scale`` times heavier.

``d`` is half the sum of the two cloths' thicknesses (the gap between the mid-surfaces of two
cloths of thickness ``t_a`` and ``t_b``; ``t`` between two layers of one cloth).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT, _JIT_PARALLEL
from .geometry import closest_on_triangle, push_vertex_triangle, triangle_normal


class ContactMesh(NamedTuple):
    """The world's cloths as one mesh (global indices), built once."""

    tris: np.ndarray  # (T, 3) int64
    edges: np.ndarray  # (E, 2) int64, unique undirected
    thickness: np.ndarray  # (N,) m, the cloth's thickness at each vertex
    layer: np.ndarray  # (N,) int64, layer number (higher = outer)
    cloth: np.ndarray  # (N,) int64, which cloth
    friction: np.ndarray  # (N,) Coulomb coefficient of the cloth
    self_ok: np.ndarray  # (C,) bool: the cloth collides with itself
    cross_ok: np.ndarray  # (C,) bool: the cloth collides with the other cloths
    rest: np.ndarray  # (N, 3) rest positions: pairs closer than their contact distance at rest are skipped
    #: the pairs of one cloth closer than 2 d in the rest shape, which the candidate search skips,
    #: as (row starts, sorted items): per vertex its triangles, per edge its edges (both ways);
    #: built once per world by :func:`.candidate_search.rest_exclusions`
    vt_excluded: tuple | None = None
    ee_excluded: tuple | None = None


class Candidates(NamedTuple):
    """Pairs found by one detection, with their remembered sides."""

    vt_vertex: np.ndarray
    vt_triangle: np.ndarray
    vt_side: np.ndarray
    ee_a: np.ndarray
    ee_b: np.ndarray
    #: (K, 3): the pair's side as a unit vector, the common normal d_a x d_b turned towards the
    #: side the first edge belongs on (zeros: not known yet). A vector, not a sign: d_a x d_b
    #: reverses when the edges turn through parallel, and a remembered sign would then push the
    #: edges through each other; the solve orients the current normal along this one instead.
    ee_side: np.ndarray
    vt_held: np.ndarray  # bool: the pair pushed in the last substep (its side is kept)
    ee_held: np.ndarray
    #: the pair's constraint value C at this substep's start (m; < 0: it started the substep
    #: overlapping), written by the narrow phase; see :func:`solve_vertex_triangle`
    vt_start: np.ndarray
    ee_start: np.ndarray
    #: the pair's clearance at this substep's start (m): when it started the substep apart on its
    #: side (C >= 0), how far its vertices may move and keep C > 0 (:func:`_vt_clearance`,
    #: :func:`_ee_clearance`); else -1. Written by the narrow phase; the solve skips the pair
    #: while its vertices have moved less than that (:func:`_still_apart`)
    vt_clearance: np.ndarray
    ee_clearance: np.ndarray


def new_candidates(cv, ct, vt_side, ea, eb, ee_side, vt_held, ee_held) -> Candidates:
    """The lists of a detection: its pairs with their sides and held flags; the per-substep
    fields (start, clearance) are the narrow phase's to write."""
    k_vt, k_ee = cv.shape[0], ea.shape[0]
    return Candidates(
        cv,
        ct,
        vt_side.reshape(-1),
        ea,
        eb,
        ee_side,
        vt_held,
        ee_held,
        np.zeros(k_vt),
        np.zeros(k_ee),
        np.full(k_vt, -1.0),
        np.full(k_ee, -1.0),
    )


# ----------------------------------------------------------------------------------------------
# Small geometry: segment-segment closest points (Ericson 5.1.9), in-triangle projection.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def closest_on_segments(p0, p1, p2, q0, q1, q2, a0, a1, a2, b0, b1, b2):
    """Parameters (s, t) of the closest points p + s (q - p) and a + t (b - a), both in [0, 1]."""
    d10, d11, d12 = q0 - p0, q1 - p1, q2 - p2
    d20, d21, d22 = b0 - a0, b1 - a1, b2 - a2
    r0, r1, r2 = p0 - a0, p1 - a1, p2 - a2
    aa = d10 * d10 + d11 * d11 + d12 * d12
    ee = d20 * d20 + d21 * d21 + d22 * d22
    ff = d20 * r0 + d21 * r1 + d22 * r2
    if aa <= 1e-30 and ee <= 1e-30:
        return 0.0, 0.0
    if aa <= 1e-30:
        return 0.0, min(max(ff / ee, 0.0), 1.0)
    cc = d10 * r0 + d11 * r1 + d12 * r2
    if ee <= 1e-30:
        return min(max(-cc / aa, 0.0), 1.0), 0.0
    bb = d10 * d20 + d11 * d21 + d12 * d22
    den = aa * ee - bb * bb
    s = min(max((bb * ff - cc * ee) / den, 0.0), 1.0) if den > 1e-30 else 0.0
    t = (bb * s + ff) / ee
    if t < 0.0:
        t = 0.0
        s = min(max(-cc / aa, 0.0), 1.0)
    elif t > 1.0:
        t = 1.0
        s = min(max((bb - cc) / aa, 0.0), 1.0)
    return s, t


@njit(inline="always", **_JIT)
def _common_normal(x, a, b, c, d):
    """The unit common normal d1 x d2 of edges ab and cd at ``x``, zero for nearly parallel ones
    (why: :func:`_edge_frame`)."""
    u0, u1, u2 = x[b, 0] - x[a, 0], x[b, 1] - x[a, 1], x[b, 2] - x[a, 2]
    v0, v1, v2 = x[d, 0] - x[c, 0], x[d, 1] - x[c, 1], x[d, 2] - x[c, 2]
    n0, n1, n2 = u1 * v2 - u2 * v1, u2 * v0 - u0 * v2, u0 * v1 - u1 * v0
    ln = sqrt(n0 * n0 + n1 * n1 + n2 * n2)
    lu = sqrt(u0 * u0 + u1 * u1 + u2 * u2)
    lv = sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    if not ln > 0.15 * lu * lv:
        return 0.0, 0.0, 0.0
    return n0 / ln, n1 / ln, n2 / ln


@njit(inline="always", **_JIT)
def _edge_frame(x, a, b, c, d):
    """Closest parameters (s, t), the offset pa - pb, and the unit common normal (d1 x d2) of the
    edges ab and cd at ``x``; the normal is zero for (nearly) parallel edges (sin < 0.15, 8.6
    deg: their common normal swings with any small motion, and a side read off it pulled edges
    next to a pinned ring "back" through each other; two nearly parallel edges cannot pass
    through each other without a vertex passing through a face next to the other, which the
    vertex-triangle contacts hold. At sin < 0.05 a 5k-vertex tube swaying on its pinned ring held
    an edge at 200 %; at 0.15 its worst edge is within 2.5x a cloth without self-collision)."""
    s, t, g0, g1, g2 = _closest_offset(x, a, b, c, d)
    n0, n1, n2 = _common_normal(x, a, b, c, d)
    return s, t, g0, g1, g2, n0, n1, n2


@njit(inline="always", **_JIT)
def _closest_offset(x, a, b, c, d):
    """Closest parameters (s, t) of edges ab and cd at ``x`` and the offset pa - pb."""
    s, t = closest_on_segments(
        x[a, 0], x[a, 1], x[a, 2], x[b, 0], x[b, 1], x[b, 2], x[c, 0], x[c, 1], x[c, 2], x[d, 0], x[d, 1], x[d, 2]
    )
    g0 = x[a, 0] + s * (x[b, 0] - x[a, 0]) - x[c, 0] - t * (x[d, 0] - x[c, 0])
    g1 = x[a, 1] + s * (x[b, 1] - x[a, 1]) - x[c, 1] - t * (x[d, 1] - x[c, 1])
    g2 = x[a, 2] + s * (x[b, 2] - x[a, 2]) - x[c, 2] - t * (x[d, 2] - x[c, 2])
    return s, t, g0, g1, g2


@njit(inline="always", **_JIT)
def _inside(u, v, w, tolerance):
    return u >= -tolerance and v >= -tolerance and w >= -tolerance


@njit(inline="always", **_JIT)
def _plane_barycentrics(x, i, ia, ib, ic):
    """Barycentrics of the projection of x[i] onto the plane of triangle (ia, ib, ic) (unclamped)."""
    e0, e1, e2 = x[ib, 0] - x[ia, 0], x[ib, 1] - x[ia, 1], x[ib, 2] - x[ia, 2]
    f0, f1, f2 = x[ic, 0] - x[ia, 0], x[ic, 1] - x[ia, 1], x[ic, 2] - x[ia, 2]
    g0, g1, g2 = x[i, 0] - x[ia, 0], x[i, 1] - x[ia, 1], x[i, 2] - x[ia, 2]
    d00 = e0 * e0 + e1 * e1 + e2 * e2
    d01 = e0 * f0 + e1 * f1 + e2 * f2
    d11 = f0 * f0 + f1 * f1 + f2 * f2
    d20 = g0 * e0 + g1 * e1 + g2 * e2
    d21 = g0 * f0 + g1 * f1 + g2 * f2
    den = d00 * d11 - d01 * d01
    if den <= 0.0:
        return -1.0, -1.0, -1.0
    v = (d11 * d20 - d01 * d21) / den
    w = (d00 * d21 - d01 * d20) / den
    return 1.0 - v - w, v, w


@njit(inline="always", **_JIT)
def _travel(x_start, x_pred, i):
    return sqrt(
        (x_pred[i, 0] - x_start[i, 0]) ** 2 + (x_pred[i, 1] - x_start[i, 1]) ** 2 + (x_pred[i, 2] - x_start[i, 2]) ** 2
    )


@njit(inline="always", **_JIT)
def _pair_allowed(i, j, cloth, self_ok, cross_ok):
    ci, cj = cloth[i], cloth[j]
    if ci == cj:
        return self_ok[ci]
    return cross_ok[ci] and cross_ok[cj]


@njit(**_JIT_PARALLEL)
def initial_vt_sides(x, tris, cv, ct, side):
    """Side of each (vertex, triangle) pair at x: the sign of n . (p - q), n the triangle's normal."""
    for c in prange(cv.shape[0]):
        i, t = cv[c], ct[c]
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        u, v, w = closest_on_triangle(
            x[i, 0],
            x[i, 1],
            x[i, 2],
            x[ia, 0],
            x[ia, 1],
            x[ia, 2],
            x[ib, 0],
            x[ib, 1],
            x[ib, 2],
            x[ic, 0],
            x[ic, 1],
            x[ic, 2],
        )
        n0, n1, n2 = triangle_normal(
            x[ia, 0], x[ia, 1], x[ia, 2], x[ib, 0], x[ib, 1], x[ib, 2], x[ic, 0], x[ic, 1], x[ic, 2]
        )
        s = (
            n0 * (x[i, 0] - u * x[ia, 0] - v * x[ib, 0] - w * x[ic, 0])
            + n1 * (x[i, 1] - u * x[ia, 1] - v * x[ib, 1] - w * x[ic, 1])
            + n2 * (x[i, 2] - u * x[ia, 2] - v * x[ib, 2] - w * x[ic, 2])
        )
        side[c] = 1.0 if s >= 0.0 else -1.0


@njit(**_JIT_PARALLEL)
def initial_ee_sides(x, edges, ea, eb, side):
    """Side of each edge pair at x: n = d_a x d_b (unit) turned towards pa - pb (zeros: parallel)."""
    for c in prange(ea.shape[0]):
        a, b = edges[ea[c], 0], edges[ea[c], 1]
        cc, dd = edges[eb[c], 0], edges[eb[c], 1]
        s, t, g0, g1, g2, n0, n1, n2 = _edge_frame(x, a, b, cc, dd)
        sign = 1.0 if n0 * g0 + n1 * g1 + n2 * g2 >= 0.0 else -1.0
        side[c, 0], side[c, 1], side[c, 2] = sign * n0, sign * n1, sign * n2


def carry_sides(old_keys, old_sides, old_held, new_keys, new_sides, new_held):
    """Keep the remembered side (and held flag) of the pairs found again by a new detection (keys sorted)."""
    if old_keys.shape[0] == 0 or new_keys.shape[0] == 0:
        return
    at = np.searchsorted(old_keys, new_keys)
    at = np.minimum(at, old_keys.shape[0] - 1)
    found = old_keys[at] == new_keys
    new_sides[found] = old_sides[at[found]]
    new_held[found] = old_held[at[found]]


# ----------------------------------------------------------------------------------------------
# Narrow phase (every substep).
# ----------------------------------------------------------------------------------------------
#: barycentric tolerance of "the vertex is over the face" (a vertex beside the face is the
#: edge-edge contacts' business)
FACE_TOLERANCE = 0.05


@njit(inline="always", **_JIT)
def _vt_clearance(x, ia, ib, ic, u, v, w, margin, height):
    """How far (m, summed over the vertex and the farthest-moved corner) a vertex-triangle pair
    that starts ``margin = C >= 0`` clear may move and keep ``C > 0``. C is the height over the
    face's plane (less the contact distance), whatever the clamped barycentrics. Take the foot y
    of the vertex on the plane (barycentrics b, unclamped) and move y with the triangle: the
    vertex moves by dp, y by at most ``L dc`` (``L = |b_a| + |b_b| + |b_c|``, 1 on the face), and
    the plane tilts by at most ``3 dc / min altitude``, which lowers the height by ``height (1 -
    cos)``, second order. So C stays positive while ``dp + dc < min(margin / (L + 1), min alt^2 /
    (4.5 height))`` (the second bound keeps the tilt's part below ``dp + dc``), and below a tenth
    of the least altitude, where those first-order bounds hold. ``u, v, w``: the foot's
    barycentrics (:func:`_plane_barycentrics`, which the narrow phase has at hand)."""
    lever = abs(u) + abs(v) + abs(w)
    e0, e1, e2 = x[ib, 0] - x[ia, 0], x[ib, 1] - x[ia, 1], x[ib, 2] - x[ia, 2]
    f0, f1, f2 = x[ic, 0] - x[ia, 0], x[ic, 1] - x[ia, 1], x[ic, 2] - x[ia, 2]
    g0, g1, g2 = x[ic, 0] - x[ib, 0], x[ic, 1] - x[ib, 1], x[ic, 2] - x[ib, 2]
    c0, c1, c2 = e1 * f2 - e2 * f1, e2 * f0 - e0 * f2, e0 * f1 - e1 * f0
    twice_area = sqrt(c0 * c0 + c1 * c1 + c2 * c2)
    longest = max(e0 * e0 + e1 * e1 + e2 * e2, max(f0 * f0 + f1 * f1 + f2 * f2, g0 * g0 + g1 * g1 + g2 * g2))
    alt_min = twice_area / sqrt(longest) if longest > 0.0 else 0.0
    if not (alt_min > 0.0 and lever < 1e6):
        return -1.0
    tilt = min(alt_min * alt_min / (4.5 * max(height, 1e-12)), 0.1 * alt_min)  # (first order: moves << alt)
    return min(margin / (lever + 1.0), tilt)


@njit(inline="always", **_JIT)
def _ee_clearance(x, a, b, c, d, margin, height):
    """As :func:`_vt_clearance` for an edge-edge pair whose closest points lie inside both edges
    (the caller's test; at an end, C measures less than the distance). C is the distance between
    the two edges' lines along their common normal (less the contact distance), the same at any
    pair of points on the lines; follow the closest points with the edges (each moves by at most
    its edge's farthest-moved end) and the normal tilts by at most ``kappa delta``, with
    ``kappa = 2 (1 / |ab| + 1 / |cd|) / sin`` (sin >= 0.15, or the pair has no normal). C stays
    positive while the two moves sum to less than ``min(margin / 2, 2 / (height kappa^2))``, and
    below a tenth of the shorter edge times sin."""
    u0, u1, u2 = x[b, 0] - x[a, 0], x[b, 1] - x[a, 1], x[b, 2] - x[a, 2]
    v0, v1, v2 = x[d, 0] - x[c, 0], x[d, 1] - x[c, 1], x[d, 2] - x[c, 2]
    n0, n1, n2 = u1 * v2 - u2 * v1, u2 * v0 - u0 * v2, u0 * v1 - u1 * v0
    lu = sqrt(u0 * u0 + u1 * u1 + u2 * u2)
    lv = sqrt(v0 * v0 + v1 * v1 + v2 * v2)
    if not (lu > 0.0 and lv > 0.0):
        return -1.0
    sin = sqrt(n0 * n0 + n1 * n1 + n2 * n2) / (lu * lv)
    if not sin > 0.0:
        return -1.0
    kappa = 2.0 * (1.0 / lu + 1.0 / lv) / sin
    tilt = min(2.0 / (max(height, 1e-12) * kappa * kappa), 0.1 * min(lu, lv) * sin)  # (first order)
    return min(0.5 * margin, tilt)


@njit(**_JIT_PARALLEL)
def _vt_narrow_flags(x_start, x_pred, tris, thickness, cv, ct, side, held, start, clearance, active, slack, travel):
    for c in prange(cv.shape[0]):
        i, t = cv[c], ct[c]
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        d_pair = 0.5 * (thickness[i] + thickness[ia])
        reach = (
            d_pair
            + max(max(slack[i], slack[ia]), max(slack[ib], slack[ic]))
            + travel[i]
            + max(travel[ia], max(travel[ib], travel[ic]))
        )
        n0, n1, n2 = triangle_normal(
            x_start[ia, 0],
            x_start[ia, 1],
            x_start[ia, 2],
            x_start[ib, 0],
            x_start[ib, 1],
            x_start[ib, 2],
            x_start[ic, 0],
            x_start[ic, 1],
            x_start[ic, 2],
        )
        height = n0 * (x_start[i, 0] - x_start[ia, 0]) + n1 * (x_start[i, 1] - x_start[ia, 1])
        height += n2 * (x_start[i, 2] - x_start[ia, 2])
        if abs(height) > reach:  # farther from the plane than reach, so from the face: as below, sooner
            if not held[c]:
                side[c] = 1.0 if height >= 0.0 else -1.0
            held[c] = False
            start[c] = side[c] * height - d_pair
            clearance[c] = -1.0
            active[c] = False
            continue
        u, v, w = closest_on_triangle(
            x_start[i, 0],
            x_start[i, 1],
            x_start[i, 2],
            x_start[ia, 0],
            x_start[ia, 1],
            x_start[ia, 2],
            x_start[ib, 0],
            x_start[ib, 1],
            x_start[ib, 2],
            x_start[ic, 0],
            x_start[ic, 1],
            x_start[ic, 2],
        )
        e0 = x_start[i, 0] - u * x_start[ia, 0] - v * x_start[ib, 0] - w * x_start[ic, 0]
        e1 = x_start[i, 1] - u * x_start[ia, 1] - v * x_start[ib, 1] - w * x_start[ic, 1]
        e2 = x_start[i, 2] - u * x_start[ia, 2] - v * x_start[ib, 2] - w * x_start[ic, 2]
        dist = sqrt(e0 * e0 + e1 * e1 + e2 * e2)
        if dist >= d_pair and not held[c]:  # separated, not just pushed: the side is where the vertex is now
            side[c] = 1.0 if n0 * e0 + n1 * e1 + n2 * e2 >= 0.0 else -1.0
        held[c] = False
        start[c] = side[c] * (n0 * e0 + n1 * e1 + n2 * e2) - d_pair
        keep = dist <= reach and not (n0 == 0.0 and n1 == 0.0 and n2 == 0.0)
        clearance[c] = -1.0  # (read for the active pairs only)
        if keep:
            su, sv, sw = _plane_barycentrics(x_start, i, ia, ib, ic)
            keep = _inside(su, sv, sw, FACE_TOLERANCE)
            if not keep:
                pu, pv, pw = _plane_barycentrics(x_pred, i, ia, ib, ic)
                keep = _inside(pu, pv, pw, FACE_TOLERANCE)
            if keep and start[c] >= 0.0:
                clearance[c] = _vt_clearance(x_start, ia, ib, ic, su, sv, sw, start[c], start[c] + d_pair)
        active[c] = keep


@njit(**_JIT_PARALLEL)
def _ee_narrow_flags(x_start, x_pred, edges, thickness, ea, eb, side, held, start, clearance, active, slack, travel):
    for c in prange(ea.shape[0]):
        a, b = edges[ea[c], 0], edges[ea[c], 1]
        cc, dd = edges[eb[c], 0], edges[eb[c], 1]
        d_pair = 0.5 * (thickness[a] + thickness[cc])
        reach = (
            d_pair
            + max(max(slack[a], slack[b]), max(slack[cc], slack[dd]))
            + max(travel[a], travel[b])
            + max(travel[cc], travel[dd])
        )
        n0, n1, n2 = _common_normal(x_start, a, b, cc, dd)
        if n0 == 0.0 and n1 == 0.0 and n2 == 0.0:
            active[c] = False
            held[c] = False
            continue
        lines = n0 * (x_start[a, 0] - x_start[cc, 0]) + n1 * (x_start[a, 1] - x_start[cc, 1])
        lines += n2 * (x_start[a, 2] - x_start[cc, 2])  # the lines' offset along n: the same for any two points
        far = abs(lines) > reach  # farther apart than reach (so the edges too): no closest points needed
        m0, m1, m2 = side[c, 0], side[c, 1], side[c, 2]
        s, t, offset, dist = 0.0, 0.0, lines, abs(lines)
        if not far:
            s, t, g0, g1, g2 = _closest_offset(x_start, a, b, cc, dd)  # (the normal: as above)
            dist = sqrt(g0 * g0 + g1 * g1 + g2 * g2)
            offset = n0 * g0 + n1 * g1 + n2 * g2
        if (dist >= d_pair and not held[c]) or (m0 == 0.0 and m1 == 0.0 and m2 == 0.0):
            sign = 1.0 if offset >= 0.0 else -1.0  # separated: where the edges are now
        else:
            sign = 1.0 if n0 * m0 + n1 * m1 + n2 * m2 >= 0.0 else -1.0  # in contact: the remembered side
        side[c, 0], side[c, 1], side[c, 2] = sign * n0, sign * n1, sign * n2
        held[c] = False
        start[c] = sign * offset - d_pair
        if far:
            clearance[c] = -1.0
            active[c] = False
            continue
        keep = dist <= reach and 0.0 < s < 1.0 and 0.0 < t < 1.0
        clearance[c] = -1.0  # (read for the active pairs only; one kept at its predicted end alone has its
        if keep and start[c] >= 0.0:  # closest points at an end now, where C is not the lines' distance)
            clearance[c] = _ee_clearance(x_start, a, b, cc, dd, start[c], start[c] + d_pair)
        if not keep and dist <= reach:
            s, t, g0, g1, g2 = _closest_offset(x_pred, a, b, cc, dd)
            keep = 0.0 < s < 1.0 and 0.0 < t < 1.0
        active[c] = keep


@njit(**_JIT)
def vertex_travel(x_start, x_pred, out):
    """``out[i]``: how far vertex i's prediction is from its substep start (m); the narrow phase's
    reach reads it for the four vertices of every candidate (once per vertex, not per candidate)."""
    for i in range(x_start.shape[0]):
        out[i] = _travel(x_start, x_pred, i)
    return out


def _per_vertex(value, n):
    if np.ndim(value) == 0:
        return np.full(n, float(value))
    return value


def vertex_triangle_narrow(x_start, x_pred, mesh: ContactMesh, cand: Candidates, reach_slack_m=0.0, travel=None):
    """Indices into the candidates of the vertex-triangle pairs to solve this substep (sides refreshed):
    those within the contact distance plus both primitives' predicted travel plus ``reach_slack_m``
    (m, one for all or per vertex) at the substep start (the substep's solve moves a vertex beyond
    its predicted path). ``travel``: :func:`vertex_travel` of this substep, if the caller has it."""
    active = np.empty(cand.vt_vertex.shape[0], dtype=np.bool_)
    _vt_narrow_flags(
        x_start,
        x_pred,
        mesh.tris,
        mesh.thickness,
        cand.vt_vertex,
        cand.vt_triangle,
        cand.vt_side,
        cand.vt_held,
        cand.vt_start,
        cand.vt_clearance,
        active,
        _per_vertex(reach_slack_m, x_start.shape[0]),
        vertex_travel(x_start, x_pred, np.empty(x_start.shape[0])) if travel is None else travel,
    )
    return np.flatnonzero(active)


def edge_edge_narrow(x_start, x_pred, mesh: ContactMesh, cand: Candidates, reach_slack_m=0.0, travel=None):
    """Indices into the candidates of the edge-edge pairs to solve this substep (sides refreshed;
    the reach of :func:`vertex_triangle_narrow`)."""
    active = np.empty(cand.ee_a.shape[0], dtype=np.bool_)
    _ee_narrow_flags(
        x_start,
        x_pred,
        mesh.edges,
        mesh.thickness,
        cand.ee_a,
        cand.ee_b,
        cand.ee_side,
        cand.ee_held,
        cand.ee_start,
        cand.ee_clearance,
        active,
        _per_vertex(reach_slack_m, x_start.shape[0]),
        vertex_travel(x_start, x_pred, np.empty(x_start.shape[0])) if travel is None else travel,
    )
    return np.flatnonzero(active)


# ----------------------------------------------------------------------------------------------
# Solve (every iteration).
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def _layer_weight(w, layer_v, layer_other, scale):
    """Inverse mass of a vertex in a pair with another layer: the lower layer is ``scale`` times heavier."""
    return w / scale if layer_v < layer_other else w


@njit(inline="always", **_JIT)
def _body_share(body_normal, k, sign, n0, n1, n2):
    """The share (0-1) of its inverse mass with which vertex k follows a push along ``sign n``: 1
    when free; lying on a body (``body_normal[k]`` nonzero,
    :meth:`.colliders.Colliders.add_touching_normals`) and pushed into it, ``1 - (n . b)^2 / |b|^2``
    (b the body's normal), so the pair's other side takes the push that the body would only hand
    back. Without it the body's next pass pushed the vertex straight back out, through the layer
    above (docs/design/cloth_contacts.md, "The body under the layers"). Not the push without its
    part along b (the vertex sliding on the body): a pair along the body's normal then threw the
    vertex sideways by up to C / sqrt(share), and a tube twisted tight on a body tore."""
    b0, b1, b2 = body_normal[k, 0], body_normal[k, 1], body_normal[k, 2]
    bb = b0 * b0 + b1 * b1 + b2 * b2
    bn = b0 * n0 + b1 * n1 + b2 * n2
    if bb == 0.0 or sign * bn >= 0.0:
        return 1.0
    return max(1.0 - bn * bn / bb, 0.0)


@njit(inline="always", **_JIT)
def _still_apart(clearance, first_moved, second_moved):
    """A pair that started the substep ``clearance`` (m) clear (:func:`_vt_clearance`) is still
    clear while its vertices have moved less than that since (the most moved vertex of each
    primitive): its constraint is satisfied and the pair is skipped unread, as the solve would
    skip it after reading it. The bound is on the constraint itself, the height over the face's
    plane (or along the edges' common normal), not on the distance: a rule of distance alone
    also skipped a vertex gone out beside the face, whose plane the constraint still pushes it
    off; skipped in some rounds and pushed in others, a fold resting on a ball kept a vertex
    jittering at 8 cm/s after 7 s (3 cm/s without the skip)."""
    return clearance > first_moved + second_moved


@njit(inline="always", **_JIT)
def _moved_from(x, x_start, common, i):
    """|x_i - x_start_i - common|: how far vertex i moved since its substep start, less the pass's
    common translation (which moves no pair's constraint)."""
    return sqrt(
        (x[i, 0] - x_start[i, 0] - common[0]) ** 2
        + (x[i, 1] - x_start[i, 1] - common[1]) ** 2
        + (x[i, 2] - x_start[i, 2] - common[2]) ** 2
    )


@njit(inline="always", **_JIT)
def _moved_again(x, x_start, moved_m, common, a, b, c, d):
    """Keep ``moved_m`` current for the four vertices a pair just moved (later pairs of the same
    pass read it, :func:`_still_apart`)."""
    moved_m[a] = _moved_from(x, x_start, common, a)
    moved_m[b] = _moved_from(x, x_start, common, b)
    moved_m[c] = _moved_from(x, x_start, common, c)
    moved_m[d] = _moved_from(x, x_start, common, d)


@njit(inline="always", **_JIT)
def _unmoved(stamp, unmoved_before, a, b, c, d):
    """None of the pair's four vertices has moved since the previous pass of this substep began
    (``unmoved_before`` = that pass's number; :func:`stamp_moved` stamps every vertex at a
    substep's first pass, so nothing is skipped there): the pair's inputs are those that pass read
    or proved clear, so it would do what it did then, nothing (a pair that pushed moved its own
    vertices). Skipped unread."""
    return max(max(stamp[a], stamp[b]), max(stamp[c], stamp[d])) < unmoved_before


@njit(inline="always", **_JIT)
def _stamp(stamp, this_pass, a, b, c, d):
    stamp[a] = this_pass
    stamp[b] = this_pass
    stamp[c] = this_pass
    stamp[d] = this_pass


@njit(**_JIT)
def stamp_moved(x, x_seen, stamp, previous_pass, everything):
    """Before a pass of the cloth contacts: ``stamp[i] = previous_pass`` for each vertex not where
    it was when the previous pass began (``x_seen``, then updated to ``x``): moved by that pass,
    by the body contacts after it, or (``everything``: a substep's first pass) by anything else.
    Returns how many were stamped."""
    count = 0
    for i in range(x.shape[0]):
        if everything or x[i, 0] != x_seen[i, 0] or x[i, 1] != x_seen[i, 1] or x[i, 2] != x_seen[i, 2]:
            stamp[i] = previous_pass
            count += 1
        x_seen[i, 0] = x[i, 0]
        x_seen[i, 1] = x[i, 1]
        x_seen[i, 2] = x[i, 2]
    return count


@njit(**_JIT)
def solve_vertex_triangle(
    x,
    x_start,
    inv_mass,
    tris,
    thickness,
    layer,
    friction,
    layer_mass_scale,
    depenetration,
    cv,
    ct,
    cs,
    held,
    start,
    rows,
    lam,
    body_normal,
    clearance,
    moved_m,
    moved_common,
    stamp,
    this_pass,
):
    """One Gauss-Seidel pass over the active vertex-triangle pairs ``rows`` (module docstring).

    ``C = side n . (p - (u a + v b + w c)) - d``, gradient ``side n`` on p and ``-b_k side n`` on
    the corners; friction on the relative tangential displacement over the substep. Returns the
    number of pairs that pushed.

    ``body_normal`` (N, 3): the body contacts each vertex lies on (zeros: none); such a vertex is
    not pushed into the body (:func:`_body_share`).

    ``clearance`` (the narrow phase's, :attr:`Candidates.vt_clearance`) and ``moved_m`` (N,): how
    far each vertex is from its substep start now, less the pass's common translation
    ``moved_common`` (:func:`distances_moved`; kept current as this pass moves vertices). A pair
    whose clearance exceeds what its vertices have moved (:func:`_still_apart`) is skipped unread
    (two layered garments 6 mm apart on a swaying body: ~65k pairs within reach, none push).
    ``stamp`` (N,) and ``this_pass``: the pass each vertex last moved in or after
    (:func:`stamp_moved`; written here for the vertices a push moves); a pair none of whose
    vertices has moved since the previous pass began is skipped unread (:func:`_unmoved`): in the
    rounds after a substep's first, only the pairs around what moved are read again.

    Overlap a pair already had at the substep start (``start`` = C there, < 0) is taken out by
    at most ``depenetration`` (m) a substep: the target is ``C >= min(0, start + depenetration)``
    rather than ``C >= 0``. What the substep's own motion closed is undone in full; an old
    overlap (two layers pressed together by the body, a pair pulled back across its sheet) no
    longer comes out in one substep as a velocity of overlap / h. Without the cap a 64 x 64
    sheet crumpling on a body at 20 substeps gained speed at its hem (3.7 to 8.9 m/s in two
    substeps), crossed itself, and the pairs pulling the crossed parts back tore it (1268 %).
    """
    pushed = 0
    for r in range(rows.shape[0]):
        c = rows[r]
        i, t = cv[c], ct[c]
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        if _unmoved(stamp, this_pass - 1, i, ia, ib, ic):
            continue
        if _still_apart(clearance[c], moved_m[i], max(moved_m[ia], max(moved_m[ib], moved_m[ic]))):
            continue
        n0, n1, n2 = triangle_normal(
            x[ia, 0], x[ia, 1], x[ia, 2], x[ib, 0], x[ib, 1], x[ib, 2], x[ic, 0], x[ic, 1], x[ic, 2]
        )
        if n0 == 0.0 and n1 == 0.0 and n2 == 0.0:
            continue
        u, v, w = _plane_barycentrics(x, i, ia, ib, ic)
        u, v, w = max(u, 0.0), max(v, 0.0), max(w, 0.0)
        total = u + v + w
        if total <= 0.0:
            continue
        u, v, w = u / total, v / total, w / total
        s = cs[c]
        n0, n1, n2 = s * n0, s * n1, s * n2
        d_pair = 0.5 * (thickness[i] + thickness[ia])
        q0 = u * x[ia, 0] + v * x[ib, 0] + w * x[ic, 0]
        q1 = u * x[ia, 1] + v * x[ib, 1] + w * x[ic, 1]
        q2 = u * x[ia, 2] + v * x[ib, 2] + w * x[ic, 2]
        C = n0 * (x[i, 0] - q0) + n1 * (x[i, 1] - q1) + n2 * (x[i, 2] - q2) - d_pair
        C -= min(0.0, start[c] + depenetration)  # the target: old overlap comes out gradually
        if C >= 0.0:
            continue
        li, lt = layer[i], layer[ia]
        wi = _layer_weight(inv_mass[i], li, lt, layer_mass_scale)
        wa = _layer_weight(inv_mass[ia], lt, li, layer_mass_scale)
        wb = _layer_weight(inv_mass[ib], lt, li, layer_mass_scale)
        wc = _layer_weight(inv_mass[ic], lt, li, layer_mass_scale)
        mi = wi * _body_share(body_normal, i, 1.0, n0, n1, n2)  # mobility along the push: a vertex on a body stays
        ma = wa * _body_share(body_normal, ia, -1.0, n0, n1, n2)
        mb = wb * _body_share(body_normal, ib, -1.0, n0, n1, n2)
        mc = wc * _body_share(body_normal, ic, -1.0, n0, n1, n2)
        K = mi + u * u * ma + v * v * mb + w * w * mc
        if 0.05 * max(max(wi, wa), max(wb, wc)) > K or K <= 0.0:
            continue  # only a corner of small weight could move: it would be thrown by C / b
        dlam = -C / K
        lam[r] += dlam
        held[c] = True
        pushed += 1
        push_vertex_triangle(x, i, ia, ib, ic, u, v, w, mi, ma, mb, mc, dlam, n0, n1, n2)
        _moved_again(x, x_start, moved_m, moved_common, i, ia, ib, ic)
        _stamp(stamp, this_pass, i, ia, ib, ic)
        mu = sqrt(friction[i] * friction[ia])
        if mu <= 0.0:
            continue
        K = wi + u * u * wa + v * v * wb + w * w * wc  # friction: along the body, which does not hold it
        # relative displacement over the substep, tangential part
        r0 = (
            x[i, 0]
            - x_start[i, 0]
            - (u * (x[ia, 0] - x_start[ia, 0]) + v * (x[ib, 0] - x_start[ib, 0]) + w * (x[ic, 0] - x_start[ic, 0]))
        )
        r1 = (
            x[i, 1]
            - x_start[i, 1]
            - (u * (x[ia, 1] - x_start[ia, 1]) + v * (x[ib, 1] - x_start[ib, 1]) + w * (x[ic, 1] - x_start[ic, 1]))
        )
        r2 = (
            x[i, 2]
            - x_start[i, 2]
            - (u * (x[ia, 2] - x_start[ia, 2]) + v * (x[ib, 2] - x_start[ib, 2]) + w * (x[ic, 2] - x_start[ic, 2]))
        )
        rn = r0 * n0 + r1 * n1 + r2 * n2
        t0, t1, t2 = r0 - rn * n0, r1 - rn * n1, r2 - rn * n2
        length = sqrt(t0 * t0 + t1 * t1 + t2 * t2)
        if length <= 1e-15:
            continue
        fl = min(length / K, mu * dlam) / length  # multiplier along -t, per unit of t
        x[i, 0] -= wi * fl * t0
        x[i, 1] -= wi * fl * t1
        x[i, 2] -= wi * fl * t2
        x[ia, 0] += wa * u * fl * t0
        x[ia, 1] += wa * u * fl * t1
        x[ia, 2] += wa * u * fl * t2
        x[ib, 0] += wb * v * fl * t0
        x[ib, 1] += wb * v * fl * t1
        x[ib, 2] += wb * v * fl * t2
        x[ic, 0] += wc * w * fl * t0
        x[ic, 1] += wc * w * fl * t1
        x[ic, 2] += wc * w * fl * t2
        _moved_again(x, x_start, moved_m, moved_common, i, ia, ib, ic)
    return pushed


@njit(**_JIT)
def solve_edge_edge(
    x,
    x_start,
    inv_mass,
    edges,
    thickness,
    layer,
    friction,
    layer_mass_scale,
    depenetration,
    ea,
    eb,
    cs,
    held,
    start,
    rows,
    lam,
    body_normal,
    clearance,
    moved_m,
    moved_common,
    stamp,
    this_pass,
):
    """One Gauss-Seidel pass over the active edge-edge pairs ``rows``: ``C = side n . (pa - pb) - d``
    with pa = a + s (b - a), pb = c + t (d - c) the closest points and n the unit common normal;
    gradient (1 - s, s) side n on a, b and -(1 - t, t) side n on c, d; then friction. A pair
    overlapping at the substep start comes out by at most ``depenetration`` a substep, and a
    vertex lying on a body is not pushed into it, and a pair provably still apart is skipped
    (:func:`solve_vertex_triangle`)."""
    pushed = 0
    for r in range(rows.shape[0]):
        k = rows[r]
        a, b = edges[ea[k], 0], edges[ea[k], 1]
        c, d = edges[eb[k], 0], edges[eb[k], 1]
        if _unmoved(stamp, this_pass - 1, a, b, c, d):
            continue
        if _still_apart(clearance[k], max(moved_m[a], moved_m[b]), max(moved_m[c], moved_m[d])):
            continue
        s, t, g0, g1, g2, n0, n1, n2 = _edge_frame(x, a, b, c, d)
        if n0 == 0.0 and n1 == 0.0 and n2 == 0.0:
            continue
        sd = 1.0 if n0 * cs[k, 0] + n1 * cs[k, 1] + n2 * cs[k, 2] >= 0.0 else -1.0  # along the pair's side
        n0, n1, n2 = sd * n0, sd * n1, sd * n2
        d_pair = 0.5 * (thickness[a] + thickness[c])
        C = n0 * g0 + n1 * g1 + n2 * g2 - d_pair
        C -= min(0.0, start[k] + depenetration)
        if C >= 0.0:
            continue
        ka, kb, kc, kd = 1.0 - s, s, 1.0 - t, t
        moved = (
            ka * _travel(x_start, x, a)
            + kb * _travel(x_start, x, b)
            + kc * _travel(x_start, x, c)
            + kd * _travel(x_start, x, d)
        )
        if d_pair - min(0.0, start[k]) + moved < -C:
            continue  # deeper than its own motion this substep can carry it: a side read off a swung normal
        la, lc = layer[a], layer[c]
        wa = _layer_weight(inv_mass[a], la, lc, layer_mass_scale)
        wb = _layer_weight(inv_mass[b], la, lc, layer_mass_scale)
        wc = _layer_weight(inv_mass[c], lc, la, layer_mass_scale)
        wd = _layer_weight(inv_mass[d], lc, la, layer_mass_scale)
        ma = wa * _body_share(body_normal, a, 1.0, n0, n1, n2)  # mobility along the push: a vertex on a body stays
        mb = wb * _body_share(body_normal, b, 1.0, n0, n1, n2)
        mc = wc * _body_share(body_normal, c, -1.0, n0, n1, n2)
        md = wd * _body_share(body_normal, d, -1.0, n0, n1, n2)
        K = ka * ka * ma + kb * kb * mb + kc * kc * mc + kd * kd * md
        if 0.05 * max(max(wa, wb), max(wc, wd)) > K or K <= 0.0:
            continue  # only an end of small weight next to a pin could move: it would be thrown by C / (1 - s)
        dlam = -C / K
        lam[r] += dlam
        held[k] = True
        pushed += 1
        for dim, nd in ((0, n0), (1, n1), (2, n2)):
            x[a, dim] += ma * ka * dlam * nd
            x[b, dim] += mb * kb * dlam * nd
            x[c, dim] -= mc * kc * dlam * nd
            x[d, dim] -= md * kd * dlam * nd
        _moved_again(x, x_start, moved_m, moved_common, a, b, c, d)
        _stamp(stamp, this_pass, a, b, c, d)
        mu = sqrt(friction[a] * friction[c])
        if mu <= 0.0:
            continue
        K = (
            ka * ka * wa + kb * kb * wb + kc * kc * wc + kd * kd * wd
        )  # friction: along the body, which does not hold it
        r0 = (
            ka * (x[a, 0] - x_start[a, 0])
            + kb * (x[b, 0] - x_start[b, 0])
            - kc * (x[c, 0] - x_start[c, 0])
            - kd * (x[d, 0] - x_start[d, 0])
        )
        r1 = (
            ka * (x[a, 1] - x_start[a, 1])
            + kb * (x[b, 1] - x_start[b, 1])
            - kc * (x[c, 1] - x_start[c, 1])
            - kd * (x[d, 1] - x_start[d, 1])
        )
        r2 = (
            ka * (x[a, 2] - x_start[a, 2])
            + kb * (x[b, 2] - x_start[b, 2])
            - kc * (x[c, 2] - x_start[c, 2])
            - kd * (x[d, 2] - x_start[d, 2])
        )
        rn = r0 * n0 + r1 * n1 + r2 * n2
        t0, t1, t2 = r0 - rn * n0, r1 - rn * n1, r2 - rn * n2
        length = sqrt(t0 * t0 + t1 * t1 + t2 * t2)
        if length <= 1e-15:
            continue
        fl = min(length / K, mu * dlam) / length
        for dim, td in ((0, t0), (1, t1), (2, t2)):
            x[a, dim] -= wa * ka * fl * td
            x[b, dim] -= wb * kb * fl * td
            x[c, dim] += wc * kc * fl * td
            x[d, dim] += wd * kd * fl * td
        _moved_again(x, x_start, moved_m, moved_common, a, b, c, d)
    return pushed


@njit(**_JIT)
def solve_slack(excess, floor, factor, cap, out):
    """Per vertex, how far beyond its predicted path the coming substep's solve may carry it (m),
    read off how far the last substep's did (``excess``, :func:`track_excess`; NaN: not known,
    the cap): ``min(cap, floor + factor excess)``; ``excess`` is reset for the coming substep."""
    for i in range(excess.shape[0]):
        e = excess[i]
        out[i] = min(cap, floor + factor * e) if e == e else cap
        excess[i] = 0.0


@njit(**_JIT)
def track_excess(x, x_pred, excess):
    """``excess[i] = max(excess[i], |x[i] - x_pred[i]|)``: how far the substep's solve has carried
    each vertex from its prediction, at each pass of the cloth contacts (before they push: the
    elastic sets' pull, which the contacts must answer)."""
    for i in range(x.shape[0]):
        e = _travel(x_pred, x, i)
        if e > excess[i]:
            excess[i] = e


@njit(**_JIT)
def distances_moved(x, x_start, out):
    """``out[i] = |x[i] - x_start[i] - common|``: how far each vertex is from its substep start,
    less the vertices' mean displacement ``common`` (returned; a translation of all four vertices
    of a pair leaves its constraint as it is, so the clearance bounds hold for moves measured
    against any one translation: a garment carried by a swaying body then skips what it would skip
    at rest)."""
    n = x.shape[0]
    common = np.zeros(3)
    for i in range(n):
        for k in range(3):
            common[k] += x[i, k] - x_start[i, k]
    if n:
        common /= n
    for i in range(n):
        out[i] = _moved_from(x, x_start, common, i)
    return common


@njit(**_JIT)
def add_push_normals(x, tris, edges, cv, ct, vt_side, vt_rows, vt_lam, ea, eb, ee_side, ee_rows, ee_lam, normal):
    """Add to ``normal[i]`` the direction each pair that pushed this substep (multiplier > 0) pushed
    vertex i: ``side n`` for a vertex-triangle pair's vertex, ``-side n`` for its triangle's corners;
    ``side n`` for the first edge of an edge-edge pair, ``-side n`` for the second (n at x). Only
    pairs that pushed: taking every pair within reach (as the body contacts do) held the lower of
    two stacked sheets so that the upper one pressed it down 2.8 mm instead of 7.7 mm."""
    for r in range(vt_rows.shape[0]):
        if vt_lam[r] <= 0.0:
            continue
        c = vt_rows[r]
        i, t = cv[c], ct[c]
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        n0, n1, n2 = triangle_normal(
            x[ia, 0], x[ia, 1], x[ia, 2], x[ib, 0], x[ib, 1], x[ib, 2], x[ic, 0], x[ic, 1], x[ic, 2]
        )
        s = vt_side[c]
        for k, sign in ((i, s), (ia, -s), (ib, -s), (ic, -s)):
            normal[k, 0] += sign * n0
            normal[k, 1] += sign * n1
            normal[k, 2] += sign * n2
    for r in range(ee_rows.shape[0]):
        if ee_lam[r] <= 0.0:
            continue
        k = ee_rows[r]
        a, b = edges[ea[k], 0], edges[ea[k], 1]
        c, d = edges[eb[k], 0], edges[eb[k], 1]
        _, _, _, _, _, n0, n1, n2 = _edge_frame(x, a, b, c, d)
        s = 1.0 if n0 * ee_side[k, 0] + n1 * ee_side[k, 1] + n2 * ee_side[k, 2] >= 0.0 else -1.0
        for v, sign in ((a, s), (b, s), (c, -s), (d, -s)):
            normal[v, 0] += sign * n0
            normal[v, 1] += sign * n1
            normal[v, 2] += sign * n2
