"""Triangle-mesh collider, narrow phase: one contact per cloth vertex against its closest
triangle at the substep end, with the side rule from the frame start (the broad phase that gives
the candidates is :mod:`.mesh_kernels`).

The kernels take their arrays grouped by owner, as named tuples (Numba types them as records of
arrays): a cloth's candidate lists (:class:`CandidateLists`), the body at this frame
(:class:`BodyFrame`), the cloth's narrow-phase caches (:class:`NarrowCaches`) and per-vertex
scratch (:class:`NarrowScratch`), a standing body's shortcuts (:class:`.mesh_body.StandingData`)
and the contact rows written (:class:`.contacts.ContactRows`).

Per-vertex loops run in ``prange``: every vertex writes only its own slots, the compaction into
contact rows is a serial prefix sum afterwards, so the result does not depend on the thread count.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT, _JIT_PARALLEL
from .contacts import emit_contact
from .convexity import certified_walk
from .distance_bounds import distance_lower_bound, grid_cell
from .geometry import closest_on_triangle, closest_on_triangle_d2, point_segment_distance, triangle_normal

#: Edges a vertex's closest face may be followed across per substep before the narrow phase
#: falls back to the candidate list (a vertex sliding 2-5 mm a substep over 1-2 cm faces
#: crosses one; see :func:`convexity.certified_walk`).
CERTIFIED_WALK_STEPS = 2


class CandidateLists(NamedTuple):
    """A cloth's candidate triangles per vertex (CSR ``cand[first[i]:stop[i]]``, sorted by ``d0``,
    a lower bound of their distance to the segment [seg_a, seg_b] the list was built around, of
    reach ``r_built``; ``base_shift`` the collider's motion since)."""

    first: np.ndarray
    stop: np.ndarray
    cand: np.ndarray
    d0: np.ndarray
    seg_a: np.ndarray
    seg_b: np.ndarray
    r_built: np.ndarray
    base_shift: np.ndarray


class BodyFrame(NamedTuple):
    """The body over this frame: triangles, positions at the start and end, the triangles' bounding
    spheres at the start, edge neighbours, the largest vertex motion this frame and the motion
    bound summed over the frames before (m)."""

    tris: np.ndarray
    v0: np.ndarray
    v1: np.ndarray
    center: np.ndarray
    rad: np.ndarray
    nbr: np.ndarray
    motion: float
    motion_before: float


class NarrowCaches(NamedTuple):
    """A cloth's per-vertex state of the narrow phase that outlives a substep (see :func:`mesh_narrow_phase`)."""

    side: np.ndarray
    path: np.ndarray
    path_prev: np.ndarray
    clear: np.ndarray
    clear_pos: np.ndarray
    clear_mark: np.ndarray
    near_t: np.ndarray
    near_other: np.ndarray
    near_pos: np.ndarray
    near_mark: np.ndarray


class NarrowScratch(NamedTuple):
    """Per-vertex results of one narrow-phase pass (``lost``: to re-query; the rest counted)."""

    lost: np.ndarray
    hit: np.ndarray
    res: np.ndarray
    from_cache: np.ndarray
    certified: np.ndarray
    cell_scan: np.ndarray


@njit(inline="always", **_JIT)
def _interp(verts, v1, idx, t_frac):
    return (
        verts[idx, 0] + t_frac * (v1[idx, 0] - verts[idx, 0]),
        verts[idx, 1] + t_frac * (v1[idx, 1] - verts[idx, 1]),
        verts[idx, 2] + t_frac * (v1[idx, 2] - verts[idx, 2]),
    )


@njit(inline="always", **_JIT)
def _mesh_closest_within(
    p0,
    p1,
    p2,
    first,
    stop,
    cand,
    d0,
    i,
    tris,
    verts,
    t_frac,
    v1,
    shift,
    limit,
    center,
    rad,
    motion,
    seed_t,
    seed_u,
    seed_v,
    seed_w,
    seed_d2,
):
    """Closest candidate triangle of vertex i within ``limit`` (collider at t_frac), or t = -1.

    Each vertex's candidates are sorted by ``d0``, their distance when the list was built;
    ``shift`` bounds how much any distance can have shrunk since (vertex travel + collider
    motion). Once ``d0 - shift`` exceeds the best distance found, no later candidate can be
    closer and the scan stops: usually after one or two triangles (temporal coherence). A
    candidate is also skipped without the closest-point computation when its bounding sphere
    (centroid and radius at the frame start, grown by the collider's motion up to t_frac) is
    farther than both the best distance so far and ``limit`` (pass ``math.inf`` for none).

    ``seed_t`` (>= 0) is a triangle already measured (closest point ``seed_u, seed_v, seed_w`` at
    squared distance ``seed_d2``), e.g. the vertex's closest one at the last substep: it starts
    the scan with a tight best distance, so that the bounds reject more of the others.

    Also returns ``lower``, a lower bound of the distance to every listed triangle other than
    the one returned (measured, or bounded by its bounding sphere or the sorted-list bound), for
    the narrow phase's caches.
    """
    best = 1e300
    best_d = 1e300
    best_t = -1
    bu = bv = bw = 0.0
    lower = 1e300
    if seed_t >= 0:
        if seed_d2 <= limit * limit:
            best, best_d, best_t = seed_d2, sqrt(seed_d2), seed_t
            bu, bv, bw = seed_u, seed_v, seed_w
        else:
            lower = sqrt(seed_d2)
    grow = motion * t_frac
    for s in range(first[i], stop[i]):
        bound = min(best_d, limit)
        if d0[s] - shift > bound:
            lower = min(lower, d0[s] - shift)  # every later candidate is at least this far
            break
        t = cand[s]
        if t == seed_t:
            continue
        g = sqrt((p0 - center[t, 0]) ** 2 + (p1 - center[t, 1]) ** 2 + (p2 - center[t, 2]) ** 2)
        if g - rad[t] - grow > bound:
            lower = min(lower, g - rad[t] - grow)
            continue
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        a0 = verts[ia, 0] + t_frac * (v1[ia, 0] - verts[ia, 0])
        a1 = verts[ia, 1] + t_frac * (v1[ia, 1] - verts[ia, 1])
        a2 = verts[ia, 2] + t_frac * (v1[ia, 2] - verts[ia, 2])
        b0 = verts[ib, 0] + t_frac * (v1[ib, 0] - verts[ib, 0])
        b1 = verts[ib, 1] + t_frac * (v1[ib, 1] - verts[ib, 1])
        b2 = verts[ib, 2] + t_frac * (v1[ib, 2] - verts[ib, 2])
        c0 = verts[ic, 0] + t_frac * (v1[ic, 0] - verts[ic, 0])
        c1 = verts[ic, 1] + t_frac * (v1[ic, 1] - verts[ic, 1])
        c2 = verts[ic, 2] + t_frac * (v1[ic, 2] - verts[ic, 2])
        u, v, w, d2 = closest_on_triangle_d2(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2)
        if d2 < best and d2 <= limit * limit:
            lower = min(lower, best_d)  # the one it replaces is now another triangle
            best = d2
            best_d = sqrt(d2)
            best_t = t
            bu, bv, bw = u, v, w
        else:
            lower = min(lower, sqrt(d2))  # measured but not kept: still a bound
    return best_t, bu, bv, bw, best, lower


@njit(**_JIT_PARALLEL)
def mesh_frame_sides(x, lists, body, shortcuts, one_sided, standing, near_t, side):
    """Which side (+1 front, -1 back of the closest face) each vertex is on at the frame start;
    0 where its list cannot name the closest face of the whole mesh (the nearest listed one is
    farther than the list's reach ``r_built`` less the vertex's offset from its segment): the
    narrow phase then takes the side the vertex comes from when it first nears the mesh. (Taken
    from a farther listed face, the side of a vertex falling past a ball was the back of a face
    across the ball, and the vertex was pushed through it.) A ``standing`` collider's cell lists
    (:mod:`.cell_lists`) name that face for every vertex in a cell that has one; first, the
    certified walk from the vertex's last closest face (``near_t``): a certified face has the
    vertex in front (a draped frame: 0.4 ms of cell-list scans, most of them for such vertices)."""
    first, stop, cand, d0, seg_a, seg_b, r_built, base_shift = lists
    tris, v0, v1, center, rad, nbr, _, _ = body
    tnorm, cert, dbounds, dorigin, dinv, _, cell_first, cell_stop, cell_cand, cell_d0, cell_reach, _ = shortcuts
    for i in prange(x.shape[0]):
        side[i] = 1.0
        if one_sided:
            continue
        side[i] = 0.0
        cell = -1
        off = 0.0
        if standing:
            t = near_t[i]
            if t >= 0:
                ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
                u, v, w, d2 = closest_on_triangle_d2(
                    x[i, 0],
                    x[i, 1],
                    x[i, 2],
                    v0[ia, 0],
                    v0[ia, 1],
                    v0[ia, 2],
                    v0[ib, 0],
                    v0[ib, 1],
                    v0[ib, 2],
                    v0[ic, 0],
                    v0[ic, 1],
                    v0[ic, 2],
                )
                if certified_walk(
                    x[i, 0], x[i, 1], x[i, 2], t, u, v, w, d2, tris, v0, tnorm, cert, nbr, CERTIFIED_WALK_STEPS
                )[5]:
                    side[i] = 1.0
                    continue
            cell, off = grid_cell(x[i, 0], x[i, 1], x[i, 2], dbounds, dorigin, dinv)
        if cell >= 0 and cell_reach[cell] >= 0.0:
            t, u, v, w, d2, _ = _mesh_closest_within(
                x[i, 0],
                x[i, 1],
                x[i, 2],
                cell_first,
                cell_stop,
                cell_cand,
                cell_d0,
                cell,
                tris,
                v0,
                0.0,
                v1,
                off,
                math.inf,
                center,
                rad,
                0.0,
                -1,
                0.0,
                0.0,
                0.0,
                0.0,
            )
            if t < 0:
                continue
        else:
            if stop[i] == first[i]:
                continue
            shift = (
                point_segment_distance(
                    x[i, 0],
                    x[i, 1],
                    x[i, 2],
                    seg_a[i, 0],
                    seg_a[i, 1],
                    seg_a[i, 2],
                    seg_b[i, 0],
                    seg_b[i, 1],
                    seg_b[i, 2],
                )
                + base_shift[i]
            )
            t, u, v, w, d2, _ = _mesh_closest_within(
                x[i, 0],
                x[i, 1],
                x[i, 2],
                first,
                stop,
                cand,
                d0,
                i,
                tris,
                v0,
                0.0,
                v1,
                shift,
                math.inf,
                center,
                rad,
                0.0,
                -1,
                0.0,
                0.0,
                0.0,
                0.0,
            )
            if t < 0 or sqrt(d2) > r_built[i] - shift:
                continue
        side[i] = 1.0
        a0, a1, a2 = _interp(v0, v1, tris[t, 0], 0.0)
        b0, b1, b2 = _interp(v0, v1, tris[t, 1], 0.0)
        c0, c1, c2 = _interp(v0, v1, tris[t, 2], 0.0)
        n0, n1, n2 = triangle_normal(a0, a1, a2, b0, b1, b2, c0, c1, c2)
        q0 = u * a0 + v * b0 + w * c0
        q1 = u * a1 + v * b1 + w * c1
        q2 = u * a2 + v * b2 + w * c2
        if n0 * (x[i, 0] - q0) + n1 * (x[i, 1] - q1) + n2 * (x[i, 2] - q2) < 0.0:
            side[i] = -1.0


@njit(**_JIT_PARALLEL)
def mesh_narrow_phase(
    x_start,
    x_pred,
    inv_mass,
    lists,
    body,
    caches,
    scratch,
    shortcuts,
    rows,
    t_start,
    t_end,
    radius,
    mu_s,
    mu_k,
    only_lost,
    standing,
    offset,
):
    """One contact per vertex against its closest candidate triangle at the substep end.

    A vertex on its frame-start side gets the normal (x - q)/|x - q| (smooth over edges and
    corners); a vertex found on the other side is pushed back along the face normal toward
    its frame-start side. A vertex whose side was not known at the frame start (``side`` 0: too
    far from the mesh for its list to name the closest face) takes the side of the face it nears,
    seen from its position at the substep start, for the rest of the frame.

    The candidates of vertex i were built around the segment [seg_a, seg_b] (sorted by their
    distance d0 to it, collider at a frame start); ``dev = |x - segment| + collider motion since``
    bounds how much any distance can have shrunk, so the scan stops once ``d0 - dev`` exceeds the
    best distance found. A triangle missing from the list is farther than ``r_built - dev``;
    when that bound could hide a closer triangle within contact reach, ``lost[i]`` is set and
    the vertex gets no row (the caller re-queries those vertices and runs this again with
    ``only_lost``, which recomputes just them; ``hit`` / ``res`` are per-vertex scratch).

    Far vertices are skipped: ``path[i]`` is the length of the vertex's path to the substep
    start from the frame start or from where a scan last found it clean (on its frame-start side
    of the closest triangle, or with no triangle in reach), at ``path_prev[i]``. A vertex farther
    than ``radius + travel + path + collider motion`` from every triangle cannot have touched
    the surface since, so it is still on its frame-start side and needs no contact; the scan
    only looks for a triangle within that distance (bounding-sphere rejection first). Resetting
    the path where the vertex was found clean keeps that reach short for a fast vertex sliding
    over the surface (a landing frame of bench_collisions measured 15,000 closest points a substep
    with the path from the frame start).
    Clearance cache (conservative advancement): ``clear[i]`` is a lower bound of the vertex's
    distance to the surface when it stood at ``clear_pos[i]``, when the collider's motion bound
    summed since the first frame was ``clear_mark[i]`` (now: ``motion_before + motion t_end``,
    ``motion_before`` the sum over the frames done); the distance can since have shrunk by at
    most ``|x - clear_pos| + now - clear_mark``. While that bound stays beyond contact reach
    (2 radius + travel) the vertex cannot touch nor have crossed the surface, and the scan is
    skipped: a falling cloth scans only the vertices about to land. The bounds are about the
    whole mesh, not a list, so they outlive a frame and a rebuilt list. ``clear < 0`` forces a
    scan (the caller resets it when the collider jumps or a frame is retried).
    Nearest-triangle cache: after a scan, ``near_t[i]`` is the closest triangle and
    ``near_other[i]`` a lower bound of the distance to every other triangle of the mesh (listed:
    measured or bounded in the scan; unlisted: ``r_built - dev``), both for the vertex at
    ``near_pos[i]`` at the motion mark ``near_mark[i]``. Later that bound has shrunk by at most
    the vertex's displacement from there plus the collider's motion since; while the
    cached triangle is still strictly nearer than it, it is the closest triangle and the only one
    measured (a vertex resting on
    the surface would otherwise measure the 4-6 triangles around its contact point every
    substep). The result is the scan's (on a tie, a closest point on an edge two triangles share,
    the scan may name the other triangle: the contact differs by rounding). ``near_t < 0`` forces
    a scan (reset with ``clear``).
    A collider standing still this frame (``standing``) adds two whole-mesh shortcuts. A vertex
    whose cell of the coarse distance grid (``dbounds`` from :mod:`.distance_bounds`, origin
    ``dorigin``, 1 / spacing ``dinv``, cap ``dband``) keeps it out of contact reach is skipped like
    one the clearance cache keeps out (the list bounds the triangles it does not hold only by
    its own radius, ~1 cm, so a vertex a few cm off the body was scanned every substep or two).
    Certified faces (``tnorm`` / ``cert`` / ``nbr`` from :mod:`.convexity`): the cached triangle,
    or a neighbour across the edge its closest point lies on, proves itself the closest of the
    whole mesh when the vertex is in front of its face, over its inside, at most half its
    certificate away; then its list is not scanned (``certified[i]`` is set) and the vertex is
    not lost even where it left its capsule.
    A vertex sliding over a convex part of the body follows its face this way; elsewhere the
    caches decide, and a scan takes the list of the vertex's cell (``cell_first`` .. ``cell_reach``
    from :mod:`.cell_lists`: it holds the closest face of the whole mesh, and every face left out
    is at least ``cell_reach`` less the vertex's offset from the cell centre away) instead of the
    vertex's own; ``cell_scan[i]`` is set (counted). A vertex in a cell with no list (too far from
    the mesh) scans its own list, which is empty unless it was re-queried: it is lost if it needs one.
    Per-vertex results in parallel, then a serial compaction: returns (new row count, lost count,
    count of vertices whose scan the clearance cache skipped, count answered by the nearest-triangle
    cache, count certified, count of cell-list scans; ``from_cache`` is per-vertex scratch).
    """
    first, stop, cand, d0, seg_a, seg_b, r_built, base_shift = lists
    tris, v0, v1, center, rad, nbr, motion, motion_before = body
    side, path, path_prev, clear, clear_pos, clear_mark, near_t, near_other, near_pos, near_mark = caches
    lost, hit, res, from_cache, certified, cell_scan = scratch
    tnorm, cert, dbounds, dorigin, dinv, dband, cell_first, cell_stop, cell_cand, cell_d0, cell_reach, _ = shortcuts
    c_vertex, c_normal, c_point, c_radius, c_disp, c_mu_s, c_mu_k = rows
    n = x_pred.shape[0]
    now = motion_before + motion * t_end
    for i in prange(n):
        if only_lost and not lost[i]:
            continue  # the result of the previous pass stands
        if not only_lost:
            path[i] += sqrt(
                (x_start[i, 0] - path_prev[i, 0]) ** 2
                + (x_start[i, 1] - path_prev[i, 1]) ** 2
                + (x_start[i, 2] - path_prev[i, 2]) ** 2
            )
            path_prev[i, 0], path_prev[i, 1], path_prev[i, 2] = x_start[i, 0], x_start[i, 1], x_start[i, 2]
        lost[i] = False
        hit[i] = 0
        from_cache[i] = False
        cell_scan[i] = False
        certified[i] = False
        if inv_mass[i] == 0.0:
            continue
        p0, p1, p2 = x_pred[i, 0], x_pred[i, 1], x_pred[i, 2]
        travel = sqrt((p0 - x_start[i, 0]) ** 2 + (p1 - x_start[i, 1]) ** 2 + (p2 - x_start[i, 2]) ** 2)
        if clear[i] >= 0.0:
            bound = (
                clear[i]
                - sqrt((p0 - clear_pos[i, 0]) ** 2 + (p1 - clear_pos[i, 1]) ** 2 + (p2 - clear_pos[i, 2]) ** 2)
                - (now - clear_mark[i])
            )
            if bound > 2.0 * radius + travel:
                hit[i] = -1  # skipped: counted below
                continue
        cell = -1
        cell_off = 0.0
        if standing:
            bound = distance_lower_bound(p0, p1, p2, dbounds, dorigin, dinv, dband)
            if bound > 2.0 * radius + travel:
                hit[i] = -1
                clear[i] = bound
                clear_pos[i, 0], clear_pos[i, 1], clear_pos[i, 2] = p0, p1, p2
                clear_mark[i] = now
                if bound >= 2.0 * radius + travel + path[i] + 1e-9:  # no triangle in reach: clean here
                    path[i] = 0.0
                    path_prev[i, 0], path_prev[i, 1], path_prev[i, 2] = p0, p1, p2
                continue
            cell, cell_off = grid_cell(p0, p1, p2, dbounds, dorigin, dinv)
            if cell >= 0 and cell_reach[cell] < 0.0:
                cell = -1  # too far from the mesh for a list: the vertex's own list
        if cell >= 0:  # the cell's list holds the closest face of the whole mesh
            dev = cell_off
            outside = cell_reach[cell] - cell_off  # every triangle not in it is at least this far
        else:
            dev = (
                point_segment_distance(
                    p0, p1, p2, seg_a[i, 0], seg_a[i, 1], seg_a[i, 2], seg_b[i, 0], seg_b[i, 1], seg_b[i, 2]
                )
                + base_shift[i]
                + motion * t_end
            )
            outside = r_built[i] - dev  # every triangle not in the list is at least this far
        best_t = -1
        d2 = 1e300
        lower = 1e300
        u = v = w = 0.0
        cached = False
        seed = -1
        limit = 2.0 * radius + travel + path[i] + motion * t_end + 1e-9
        if near_t[i] >= 0 and (standing or stop[i] > first[i]):
            other = (
                near_other[i]
                - sqrt((p0 - near_pos[i, 0]) ** 2 + (p1 - near_pos[i, 1]) ** 2 + (p2 - near_pos[i, 2]) ** 2)
                - (now - near_mark[i])
            )
            t = near_t[i]
            a0, a1, a2 = _interp(v0, v1, tris[t, 0], t_end)
            b0, b1, b2 = _interp(v0, v1, tris[t, 1], t_end)
            c0, c1, c2 = _interp(v0, v1, tris[t, 2], t_end)
            u, v, w, d2 = closest_on_triangle_d2(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2)  # as the scan does
            if standing:
                t, u, v, w, d2, certified[i] = certified_walk(
                    p0, p1, p2, t, u, v, w, d2, tris, v0, tnorm, cert, nbr, CERTIFIED_WALK_STEPS
                )
            if certified[i]:
                best_t = t
                lower = sqrt(d2)  # every other triangle is at least as far
                outside = lower
            elif t != near_t[i]:
                seed = t  # the walk measured a nearer one: it starts the scan
            elif d2 <= limit * limit and sqrt(d2) < min(other, outside):
                best_t = t
                lower = other
                cached = True
                from_cache[i] = True
            else:
                seed = t  # measured: it starts the scan
        answered = cached or certified[i]
        if not answered and cell >= 0:
            cell_scan[i] = True
            best_t, u, v, w, d2, lower = _mesh_closest_within(
                p0,
                p1,
                p2,
                cell_first,
                cell_stop,
                cell_cand,
                cell_d0,
                cell,
                tris,
                v0,
                t_end,
                v1,
                dev,
                limit,
                center,
                rad,
                motion,
                seed,
                u,
                v,
                w,
                d2,
            )
        elif not answered and (stop[i] > first[i] or seed >= 0):
            best_t, u, v, w, d2, lower = _mesh_closest_within(
                p0,
                p1,
                p2,
                first,
                stop,
                cand,
                d0,
                i,
                tris,
                v0,
                t_end,
                v1,
                dev,
                limit,
                center,
                rad,
                motion,
                seed,
                u,
                v,
                w,
                d2,
            )
        found = sqrt(d2) if best_t >= 0 else 1e300
        if outside < min(found, radius + travel):
            lost[i] = True
            clear[i] = -1.0
            near_t[i] = -1
            continue
        # the nearest measured triangle, bounds of the unmeasured listed ones, and of the unlisted
        clear[i] = max(min(found, lower, outside), 0.0)
        clear_pos[i, 0] = p0
        clear_pos[i, 1] = p1
        clear_pos[i, 2] = p2
        clear_mark[i] = now
        if not cached:  # a new anchor (a cached pass keeps the old one: the bound through it is tighter)
            near_t[i] = best_t
            near_other[i] = min(lower, outside)
            near_pos[i, 0] = p0
            near_pos[i, 1] = p1
            near_pos[i, 2] = p2
            near_mark[i] = now
        if best_t < 0:
            if outside >= limit:  # no triangle in reach: clean here
                path[i] = 0.0
                path_prev[i, 0], path_prev[i, 1], path_prev[i, 2] = p0, p1, p2
            continue
        t = best_t
        a0, a1, a2 = _interp(v0, v1, tris[t, 0], t_end)
        b0, b1, b2 = _interp(v0, v1, tris[t, 1], t_end)
        c0, c1, c2 = _interp(v0, v1, tris[t, 2], t_end)
        if standing:  # (the same bits: the faces are at v0, where tnorm was taken)
            fn0, fn1, fn2 = tnorm[t, 0], tnorm[t, 1], tnorm[t, 2]
        else:
            fn0, fn1, fn2 = triangle_normal(a0, a1, a2, b0, b1, b2, c0, c1, c2)
        if fn0 == 0.0 and fn1 == 0.0 and fn2 == 0.0:
            continue
        q0 = u * a0 + v * b0 + w * c0
        q1 = u * a1 + v * b1 + w * c1
        q2 = u * a2 + v * b2 + w * c2
        s = side[i]
        if s == 0.0:  # far at the frame start: the side of this face it comes from (its substep start)
            sa0, sa1, sa2 = _interp(v0, v1, tris[t, 0], t_start)
            sb0, sb1, sb2 = _interp(v0, v1, tris[t, 1], t_start)
            sc0, sc1, sc2 = _interp(v0, v1, tris[t, 2], t_start)
            us, vs, ws = closest_on_triangle(
                x_start[i, 0], x_start[i, 1], x_start[i, 2], sa0, sa1, sa2, sb0, sb1, sb2, sc0, sc1, sc2
            )
            sn0, sn1, sn2 = triangle_normal(sa0, sa1, sa2, sb0, sb1, sb2, sc0, sc1, sc2)
            s = (
                1.0
                if (
                    sn0 * (x_start[i, 0] - (us * sa0 + vs * sb0 + ws * sc0))
                    + sn1 * (x_start[i, 1] - (us * sa1 + vs * sb1 + ws * sc1))
                    + sn2 * (x_start[i, 2] - (us * sa2 + vs * sb2 + ws * sc2))
                )
                >= 0.0
                else -1.0
            )
            if found <= outside:  # the closest face of the whole mesh: the side stands for the frame
                side[i] = s
        dist = found
        along = fn0 * (p0 - q0) + fn1 * (p1 - q1) + fn2 * (p2 - q2)
        if s * along >= 0.0 and dist > 1e-9:
            n0, n1, n2 = (p0 - q0) / dist, (p1 - q1) / dist, (p2 - q2) / dist
            C = dist - radius
            if found <= outside:  # on its side of the closest triangle of the whole mesh: clean here
                path[i] = 0.0
                path_prev[i, 0], path_prev[i, 1], path_prev[i, 2] = p0, p1, p2
        else:
            n0, n1, n2 = s * fn0, s * fn1, s * fn2
            C = s * along - radius
        if travel + radius < C:
            continue
        hit[i] = 1
        res[i, 0] = n0
        res[i, 1] = n1
        res[i, 2] = n2
        res[i, 3] = q0
        res[i, 4] = q1
        res[i, 5] = q2
        if motion == 0.0:  # a collider that does not move: no surface displacement (exactly)
            res[i, 6] = res[i, 7] = res[i, 8] = 0.0
            continue
        sa0, sa1, sa2 = _interp(v0, v1, tris[t, 0], t_start)
        sb0, sb1, sb2 = _interp(v0, v1, tris[t, 1], t_start)
        sc0, sc1, sc2 = _interp(v0, v1, tris[t, 2], t_start)
        res[i, 6] = q0 - (u * sa0 + v * sb0 + w * sc0)
        res[i, 7] = q1 - (u * sa1 + v * sb1 + w * sc1)
        res[i, 8] = q2 - (u * sa2 + v * sb2 + w * sc2)
    count = offset
    n_lost = 0
    n_skipped = 0
    n_cached = 0
    n_certified = 0
    n_cell = 0
    for i in range(n):
        if cell_scan[i]:
            n_cell += 1
        if lost[i]:
            n_lost += 1
        if hit[i] == -1:
            n_skipped += 1
        if from_cache[i]:
            n_cached += 1
        if certified[i]:
            n_certified += 1
        if hit[i] != 1:
            continue
        count = emit_contact(
            count,
            i,
            res[i, 0],
            res[i, 1],
            res[i, 2],
            res[i, 3],
            res[i, 4],
            res[i, 5],
            radius,
            res[i, 6],
            res[i, 7],
            res[i, 8],
            mu_s,
            mu_k,
            c_vertex,
            c_normal,
            c_point,
            c_radius,
            c_disp,
            c_mu_s,
            c_mu_k,
        )
    return count, n_lost, n_skipped, n_cached, n_certified, n_cell
