"""Triangle-mesh collider: per-frame broad phase along each vertex's travel segment (capsule
reach, parallel over vertices) and per-substep narrow phase with the side rule from frame start.

Per-vertex loops run in ``prange``: every vertex writes only its own slots, the compaction into
contact rows / CSR lists is a serial prefix sum afterwards, so the result does not depend on the
thread count (no atomics, no shared scratch).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT, _JIT_PARALLEL
from .chunks import active_chunks, concatenate_chunks, fill_in_chunks
from .contacts import emit_contact
from .convexity import certified_walk
from .distance_bounds import distance_lower_bound, grid_cell
from .geometry import (closest_on_triangle, closest_on_triangle_d2, point_segment_distance, point_triangle_distance,
                       segment_plane_gap, triangle_normal)
from .hash_grid import boxes_overlapping, cell_hash, finite_box

#: Edges a vertex's closest face may be followed across per substep before the narrow phase
#: falls back to the candidate list (a vertex sliding 2-5 mm a substep over 1-2 cm faces
#: crosses one; see :func:`convexity.certified_walk`).
CERTIFIED_WALK_STEPS = 2

# ----------------------------------------------------------------------------------------------
# Triangle-mesh collider.
# ----------------------------------------------------------------------------------------------
@njit(**_JIT)
def swept_triangle_boxes(v0, v1, tris, pad, lo, hi):
    for t in range(tris.shape[0]):
        for d in range(3):
            a = min(v0[tris[t, 0], d], v0[tris[t, 1], d], v0[tris[t, 2], d])
            b = min(v1[tris[t, 0], d], v1[tris[t, 1], d], v1[tris[t, 2], d])
            lo[t, d] = min(a, b) - pad
            a = max(v0[tris[t, 0], d], v0[tris[t, 1], d], v0[tris[t, 2], d])
            b = max(v1[tris[t, 0], d], v1[tris[t, 1], d], v1[tris[t, 2], d])
            hi[t, d] = max(a, b) + pad


@njit(**_JIT)
def mesh_merge_candidates(keep, first, stop, cand, d0, new_off, new_cand, new_d0, spare):
    """Per vertex: its current list ``cand[first:stop]`` where ``keep`` (still valid), else its
    list in the CSR ``new_*``; compacted into fresh arrays with ``spare`` free slots at the end
    (for re-queried lists, see :func:`mesh_append_lists`). Returns (first, stop, cand, d0, used)."""
    n = keep.shape[0]
    used = 0
    for i in range(n):
        used += stop[i] - first[i] if keep[i] else new_off[i + 1] - new_off[i]
    out_first = np.empty(n, dtype=np.int64)
    out_stop = np.empty(n, dtype=np.int64)
    out_cand = np.empty(used + spare, dtype=np.int64)
    out_d0 = np.empty(used + spare)
    pos = 0
    for i in range(n):
        if keep[i]:
            a, b, src_c, src_d = first[i], stop[i], cand, d0
        else:
            a, b, src_c, src_d = new_off[i], new_off[i + 1], new_cand, new_d0
        out_first[i] = pos
        for s in range(a, b):
            out_cand[pos] = src_c[s]
            out_d0[pos] = src_d[s]
            pos += 1
        out_stop[i] = pos
    return out_first, out_stop, out_cand, out_d0, pos


@njit(**_JIT)
def mesh_append_lists(idx, new_off, new_cand, new_d0, first, stop, cand, d0, used):
    """New lists (CSR ``new_*``, one per vertex in ``idx``) written after the ``used`` slots of
    ``cand`` / ``d0``, replacing those vertices' lists (their old slots become garbage until the
    next merge): a re-query costs its own lists, not a copy of every list. Returns the new
    ``used``, or -1 when the arrays have no room (grow them and call again)."""
    if used + new_off[idx.shape[0]] > cand.shape[0]:
        return -1
    for k in range(idx.shape[0]):
        i = idx[k]
        first[i] = used
        for s in range(new_off[k], new_off[k + 1]):
            cand[used] = new_cand[s]
            d0[used] = new_d0[s]
            used += 1
        stop[i] = used
    return used


@njit(inline="always", **_JIT)
def _interp(verts, v1, idx, t_frac):
    return (verts[idx, 0] + t_frac * (v1[idx, 0] - verts[idx, 0]),
            verts[idx, 1] + t_frac * (v1[idx, 1] - verts[idx, 1]),
            verts[idx, 2] + t_frac * (v1[idx, 2] - verts[idx, 2]))

@njit(**_JIT)
def vertex_travel_segments(x, v, v_prev, inv_mass, frame_dt, max_acceleration, margin, deflection, seg_b, pad,
                           active):
    """Each free vertex's predicted path this frame and the capsule radius around it.

    The path is the parabola ``x + v t + a t^2 / 2`` with ``a`` the vertex's velocity change
    over the previous frame (clamped to ``max_acceleration``); the segment [x, seg_b] is its
    chord, within ``|a| frame_dt^2 / 8`` of it. ``pad = margin + |a| dt^2 / 8 + deflection |v| dt``.
    """
    for i in range(x.shape[0]):
        active[i] = inv_mass[i] > 0.0
        a0 = (v[i, 0] - v_prev[i, 0]) / frame_dt
        a1 = (v[i, 1] - v_prev[i, 1]) / frame_dt
        a2 = (v[i, 2] - v_prev[i, 2]) / frame_dt
        acc = sqrt(a0 * a0 + a1 * a1 + a2 * a2)
        if not acc <= max_acceleration:  # also NaN
            scale = max_acceleration / acc if acc > 0.0 and math.isfinite(acc) else 0.0
            a0, a1, a2, acc = a0 * scale, a1 * scale, a2 * scale, max_acceleration
        h2 = 0.5 * frame_dt * frame_dt
        seg_b[i, 0] = x[i, 0] + v[i, 0] * frame_dt + a0 * h2
        seg_b[i, 1] = x[i, 1] + v[i, 1] * frame_dt + a1 * h2
        seg_b[i, 2] = x[i, 2] + v[i, 2] * frame_dt + a2 * h2
        speed = sqrt(v[i, 0] ** 2 + v[i, 1] ** 2 + v[i, 2] ** 2)
        pad[i] = margin + 0.25 * acc * h2 + deflection * speed * frame_dt


@njit(**_JIT)
def requery_capsules(lost, x_start, x_pred, remaining, h, margin, deflection):
    """Capsules of the vertices flagged ``lost``: (indices, segment starts, segment ends, pads).

    The segment runs from the prediction along this substep's velocity for the ``remaining``
    frame time; its pad is the substep travel + ``margin`` + ``deflection`` x the remaining path.
    """
    k = 0
    for i in range(lost.shape[0]):
        k += lost[i]
    idx = np.empty(k, dtype=np.int64)
    seg_a = np.empty((k, 3))
    seg_b = np.empty((k, 3))
    pad = np.empty(k)
    k = 0
    for i in range(lost.shape[0]):
        if not lost[i]:
            continue
        idx[k] = i
        travel = 0.0
        for d in range(3):
            step = x_pred[i, d] - x_start[i, d]
            seg_a[k, d] = x_pred[i, d]
            seg_b[k, d] = x_pred[i, d] + step * (remaining / h)
            travel += step * step
        travel = sqrt(travel)
        pad[k] = travel + margin + deflection * travel / h * remaining
        k += 1
    return idx, seg_a, seg_b, pad


@njit(**_JIT)
def mesh_keep_lists(x, seg_b_new, active, seg_a, seg_b, r_built, need, moved_since, slack, keep):
    """A vertex's candidate list (triangles within ``r_built`` of the segment it was built on,
    collider at that frame's start) still covers this frame's capsule (segment [x, seg_b_new],
    radius ``need``) when both new end points lie within ``r_built - need - moved_since`` of
    the old segment (the capsule is convex). Lists much larger than needed (beyond 1.5 x the
    reach plus the ``slack`` they are built with) are rebuilt."""
    for i in range(x.shape[0]):
        keep[i] = False
        if not active[i]:
            continue
        dev = max(point_segment_distance(x[i, 0], x[i, 1], x[i, 2], seg_a[i, 0], seg_a[i, 1], seg_a[i, 2],
                                         seg_b[i, 0], seg_b[i, 1], seg_b[i, 2]),
                  point_segment_distance(seg_b_new[i, 0], seg_b_new[i, 1], seg_b_new[i, 2], seg_a[i, 0],
                                         seg_a[i, 1], seg_a[i, 2], seg_b[i, 0], seg_b[i, 1], seg_b[i, 2]))
        old_len = sqrt((seg_b[i, 0] - seg_a[i, 0]) ** 2 + (seg_b[i, 1] - seg_a[i, 1]) ** 2
                       + (seg_b[i, 2] - seg_a[i, 2]) ** 2)
        new_len = sqrt((seg_b_new[i, 0] - x[i, 0]) ** 2 + (seg_b_new[i, 1] - x[i, 1]) ** 2
                       + (seg_b_new[i, 2] - x[i, 2]) ** 2)
        keep[i] = (dev + need[i] + moved_since[i] <= r_built[i] and r_built[i] <= 1.5 * need[i] + slack
                   and old_len <= 1.5 * new_len + need[i])


@njit(inline="always", **_JIT)
def sort_by_distance(cand, d0, start, stop):
    """In-place sort of ``cand[start:stop]`` by ``d0`` (Shell sort, Ciura's gaps; ties keep no
    particular order but always the same one). Most lists hold a few triangles, where this is an
    insertion sort (``np.argsort`` and its copies cost 27 % of the whole query); a vertex sliding
    fast along the surface can hold hundreds, where plain insertion sort went quadratic (12 of
    58 ms of a landing frame's query on bench_collisions)."""
    for gap in (701, 301, 132, 57, 23, 10, 4, 1):
        if gap >= stop - start:
            continue
        for s in range(start + gap, stop):
            key_d = d0[s]
            key_c = cand[s]
            j = s - gap
            while j >= start and d0[j] > key_d:
                d0[j + gap] = d0[j]
                cand[j + gap] = cand[j]
                j -= gap
            d0[j + gap] = key_d
            cand[j + gap] = key_c


@njit(**_JIT)
def _fill_candidates(seg_a, seg_b, pad, radius, active, tlo, thi, inv, table_size, bucket_start, items, max_cells,
                     tris, v0, center, rad, stamp, offsets, cand, d0, q_first, q_last, count):
    """The loop of :func:`mesh_query_candidates` over vertices ``q_first .. q_last - 1``, into
    fixed buffers; ``offsets[q + 1]`` gets the running ``count``.

    Returns (next vertex, count): ``q_last`` when all are done, else the vertex whose list did not
    fit in ``cand`` (its partial list is dropped: resume from it with bigger buffers and a cleared
    ``stamp``). No array is reassigned inside the loop: Numba would then count references on
    every iteration (atomic operations, 37 ns per vertex even for inactive ones).
    """
    ql = np.empty((1, 3))
    qh = np.empty((1, 3))
    found = np.empty(tlo.shape[0], dtype=np.int64)
    for q in range(q_first, q_last):
        if active[q]:
            for d in range(3):
                ql[0, d] = min(seg_a[q, d], seg_b[q, d]) - pad[q]
                qh[0, d] = max(seg_a[q, d], seg_b[q, d]) + pad[q]
            if finite_box(ql, qh, 0):
                limit = pad[q] + radius
                m0 = 0.5 * (seg_a[q, 0] + seg_b[q, 0])
                m1 = 0.5 * (seg_a[q, 1] + seg_b[q, 1])
                m2 = 0.5 * (seg_a[q, 2] + seg_b[q, 2])
                half = 0.5 * sqrt((seg_b[q, 0] - seg_a[q, 0]) ** 2 + (seg_b[q, 1] - seg_a[q, 1]) ** 2
                                  + (seg_b[q, 2] - seg_a[q, 2]) ** 2)
                start = count
                for e in range(boxes_overlapping(ql, qh, inv, max_cells, table_size, bucket_start, items, tlo, thi,
                                                 stamp, q, found)):
                    b = found[e]
                    # bounding spheres first: no point of the segment is nearer the midpoint
                    # than half its length, no point of the triangle farther from its centre
                    # than rad (a lower bound of the distance, a few flops)
                    if sqrt((m0 - center[b, 0]) ** 2 + (m1 - center[b, 1]) ** 2
                            + (m2 - center[b, 2]) ** 2) - rad[b] - half > limit:
                        continue
                    ia, ib, ic = tris[b, 0], tris[b, 1], tris[b, 2]
                    if half > 0.5 * limit:
                        # long segment: the larger of two lower bounds of the segment-triangle
                        # distance, the triangle's bounding sphere against the segment and the
                        # segment's gap to the triangle's plane (d0 is only used as a bound)
                        dist = point_segment_distance(center[b, 0], center[b, 1], center[b, 2], seg_a[q, 0],
                                                      seg_a[q, 1], seg_a[q, 2], seg_b[q, 0], seg_b[q, 1],
                                                      seg_b[q, 2]) - rad[b]
                        if dist > limit:
                            continue
                        dist = max(dist, segment_plane_gap(
                            seg_a[q, 0], seg_a[q, 1], seg_a[q, 2], seg_b[q, 0], seg_b[q, 1], seg_b[q, 2],
                            v0[ia, 0], v0[ia, 1], v0[ia, 2], v0[ib, 0], v0[ib, 1], v0[ib, 2], v0[ic, 0],
                            v0[ic, 1], v0[ic, 2]))
                    else:
                        # short segment: the midpoint's distance minus the half length bounds
                        # the segment's from below (d0 is only used as a bound)
                        dist = point_triangle_distance(m0, m1, m2, v0[ia, 0], v0[ia, 1], v0[ia, 2],
                                                       v0[ib, 0], v0[ib, 1], v0[ib, 2], v0[ic, 0],
                                                       v0[ic, 1], v0[ic, 2]) - half
                    if dist > limit:
                        continue
                    if count == cand.shape[0]:
                        return q, start
                    cand[count] = b
                    d0[count] = max(dist, 0.0)
                    count += 1
                sort_by_distance(cand, d0, start, count)  # nearest first
        offsets[q + 1] = count
    return q_last, count


@njit(**_JIT_PARALLEL)
def _fill_chunks(seg_a, seg_b, pad, radius, active, tlo, thi, inv, table_size, bucket_start, items, max_cells, tris, v0,
                 center, rad, offsets, bounds, resume, counts, stamps, cands, d0s):
    """One :func:`_fill_candidates` per vertex chunk, in parallel, each into its own buffers;
    ``resume[c]`` is where chunk c goes on from (its end when it is done)."""
    for c in prange(bounds.shape[0] - 1):
        if resume[c] < bounds[c + 1]:
            q, count = _fill_candidates(seg_a, seg_b, pad, radius, active, tlo, thi, inv, table_size, bucket_start,
                                        items, max_cells, tris, v0, center, rad, stamps[c], offsets, cands[c], d0s[c],
                                        resume[c], bounds[c + 1], counts[c])
            resume[c] = q
            counts[c] = count


@njit(**_JIT)
def query_on_this_thread(seg_a, seg_b, pad, radius, active, tlo, thi, inv, table_size, bucket_start, items, max_cells,
                         tris, v0, center, rad, n_active):
    """:func:`mesh_query_candidates` in one chunk, without a parallel region (for a few vertices:
    starting the parallel kernel, the chunk bookkeeping and buffers grown from 8 entries a vertex
    cost more than their queries). Returns the same (offsets, cand, d0)."""
    stamp = np.full(tlo.shape[0], -1, dtype=np.int64)
    offsets = np.zeros(seg_a.shape[0] + 1, dtype=np.int64)
    cand = np.empty(max(64, 64 * n_active), dtype=np.int64)
    d0 = np.empty(cand.shape[0])
    q, count = _fill_candidates(seg_a, seg_b, pad, radius, active, tlo, thi, inv, table_size, bucket_start, items,
                                max_cells, tris, v0, center, rad, stamp, offsets, cand, d0, 0, seg_a.shape[0], 0)
    while q < seg_a.shape[0]:  # full: grow and go on from the vertex that did not fit
        grown = np.empty(3 * cand.shape[0], dtype=np.int64)
        grown[:count] = cand[:count]
        cand = grown
        grown_d0 = np.empty(cand.shape[0])
        grown_d0[:count] = d0[:count]
        d0 = grown_d0
        stamp[:] = -1
        q, count = _fill_candidates(seg_a, seg_b, pad, radius, active, tlo, thi, inv, table_size, bucket_start, items,
                                    max_cells, tris, v0, center, rad, stamp, offsets, cand, d0, q, seg_a.shape[0],
                                    count)
    return offsets, cand[:count], d0[:count]


@njit(**_JIT)
def requery_lost(lost, x_start, x_pred, remaining, h, margin, deflection, radius, tlo, thi, inv, table_size,
                 bucket_start, items, max_cells, tris, v0, center, rad, first, stop, cand, d0, used, seg_a_all,
                 seg_b_all, mark, cum_motion, base_shift, r_built):
    """The narrow phase's re-query of its ``lost`` vertices in one call: their capsules
    (:func:`requery_capsules`), their lists (:func:`query_on_this_thread`), appended to the list
    storage (:func:`mesh_append_lists`) and the capsule recorded for each.

    A landing frame of bench_collisions re-queries up to 20 times (median 16 vertices); done as
    a dozen NumPy and Numba calls from Python it took 0.4 ms a call (6 ms a frame), several times
    the queries themselves. Returns (new ``used``, or -1 when the storage is full: the caller
    compacts and appends ``idx`` / ``offsets`` / ``new_cand`` / ``new_d0`` itself; idx, offsets,
    new_cand, new_d0)."""
    idx, seg_a, seg_b, pad = requery_capsules(lost, x_start, x_pred, remaining, h, margin, deflection)
    active = np.ones(idx.shape[0], dtype=np.bool_)
    offsets, new_cand, new_d0 = query_on_this_thread(seg_a, seg_b, pad, radius, active, tlo, thi, inv, table_size,
                                                     bucket_start, items, max_cells, tris, v0, center, rad,
                                                     idx.shape[0])
    for k in range(idx.shape[0]):
        i = idx[k]
        for d in range(3):
            seg_a_all[i, d] = seg_a[k, d]
            seg_b_all[i, d] = seg_b[k, d]
        mark[i] = cum_motion
        base_shift[i] = 0.0
        r_built[i] = pad[k] + radius
    new_used = mesh_append_lists(idx, offsets, new_cand, new_d0, first, stop, cand, d0, used)
    return new_used, idx, offsets, new_cand, new_d0


def mesh_query_candidates(seg_a, seg_b, pad, radius, active, tlo, thi, cell, table_size, bucket_start, items,
                          max_cells, tris, v0, center, rad, chunks):
    """Candidate triangles of every active vertex: CSR (offsets, cand, d0), each vertex's list
    sorted by d0 (nearest first).

    Vertex i travels along the segment [seg_a, seg_b] give or take ``pad[i]``; its query box
    is the segment's box grown by ``pad`` (triangle boxes already carry the contact radius),
    and a triangle is kept when d0, a lower bound of its distance to the segment (collider at
    ``v0``), is at most ``pad[i] + radius``: for a long segment the larger of the bounding-sphere
    bound and the segment's gap to the triangle's plane (:func:`geometry.segment_plane_gap`),
    for a short one (half length under half the reach) ``|midpoint - triangle| - half length``.
    A bound is all its users need (a superset is kept, and every list bound stays valid); the
    exact segment-triangle distance kept 2 % fewer of a landing frame's 121,000 candidates and
    made the broad phase 15 % slower (8.3-9.3 against 7.0-7.9 ms a frame, four interleaved runs).
    ``center`` / ``rad``: the triangles' bounding spheres at ``v0`` (cheap rejection). One pass
    per vertex (hash query, filter and sort fused), in ``chunks`` runs of consecutive
    vertices with equal numbers of active ones, in parallel, each with its own buffers, then
    concatenated: the lists do not depend on ``chunks`` (nor on the thread count). A landing
    frame of bench_collisions queries ~3,600 vertices with ~120,000 candidates: 55 ms serial,
    31 ms in 2 chunks on 2 cores (:mod:`.chunks`).
    """
    bounds = active_chunks(active, chunks)
    chunks = bounds.shape[0] - 1
    n_active = int(np.count_nonzero(active))
    if chunks == 1:
        return query_on_this_thread(seg_a, seg_b, pad, radius, active, tlo, thi, 1.0 / cell, table_size, bucket_start,
                                    items, max_cells, tris, v0, center, rad, n_active)
    cap = max(16, (8 * n_active) // chunks)  # allocate for the vertices asked for, not for all
    stamps = np.full((chunks, tlo.shape[0]), -1, dtype=np.int64)
    offsets = np.zeros(seg_a.shape[0] + 1, dtype=np.int64)
    inputs = (seg_a, seg_b, pad, radius, active, tlo, thi, 1.0 / cell, table_size, bucket_start, items, max_cells, tris,
              v0, center, rad, offsets)
    buffers, counts = fill_in_chunks(_fill_chunks, inputs, bounds,
                                     [np.empty((chunks, cap), dtype=np.int64), np.empty((chunks, cap))], stamps)
    base = np.concatenate([[0], np.cumsum(counts)])
    for c in range(chunks):  # chunk c's offsets count from its own start
        offsets[bounds[c] + 1:bounds[c + 1] + 1] += base[c]
    cand, d0 = concatenate_chunks(buffers, counts)
    return offsets, cand, d0


@njit(inline="always", **_JIT)
def _mesh_closest_within(p0, p1, p2, first, stop, cand, d0, i, tris, verts, t_frac, v1, shift, limit, center, rad,
                         motion, seed_t, seed_u, seed_v, seed_w, seed_d2):
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
def mesh_frame_sides_segments(x, first, stop, cand, d0, seg_a, seg_b, base_shift, r_built, tris, v0, v1, center, rad,
                              one_sided, standing, dbounds, dorigin, dinv, cell_first, cell_stop, cell_cand, cell_d0,
                              cell_reach, near_t, tnorm, cert, nbr, side):
    """Which side (+1 front, -1 back of the closest face) each vertex is on at the frame start;
    0 where its list cannot name the closest face of the whole mesh (the nearest listed one is
    farther than the list's reach ``r_built`` less the vertex's offset from its segment): the
    narrow phase then takes the side the vertex comes from when it first nears the mesh. (Taken
    from a farther listed face, the side of a vertex falling past a ball was the back of a face
    across the ball, and the vertex was pushed through it.) A ``standing`` collider's cell lists
    (:mod:`.cell_lists`) name that face for every vertex in a cell that has one; first, the
    certified walk from the vertex's last closest face (``near_t``): a certified face has the
    vertex in front (a draped frame: 0.4 ms of cell-list scans, most of them for such vertices)."""
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
                u, v, w, d2 = closest_on_triangle_d2(x[i, 0], x[i, 1], x[i, 2], v0[ia, 0], v0[ia, 1], v0[ia, 2],
                                                     v0[ib, 0], v0[ib, 1], v0[ib, 2], v0[ic, 0], v0[ic, 1], v0[ic, 2])
                if certified_walk(x[i, 0], x[i, 1], x[i, 2], t, u, v, w, d2, tris, v0, tnorm, cert, nbr,
                                  CERTIFIED_WALK_STEPS)[5]:
                    side[i] = 1.0
                    continue
            cell, off = grid_cell(x[i, 0], x[i, 1], x[i, 2], dbounds, dorigin, dinv)
        if cell >= 0 and cell_reach[cell] >= 0.0:
            t, u, v, w, d2, _ = _mesh_closest_within(x[i, 0], x[i, 1], x[i, 2], cell_first, cell_stop, cell_cand,
                                                  cell_d0, cell, tris, v0, 0.0, v1, off, math.inf, center, rad, 0.0,
                                                  -1, 0.0, 0.0, 0.0, 0.0)
            if t < 0:
                continue
        else:
            if stop[i] == first[i]:
                continue
            shift = point_segment_distance(x[i, 0], x[i, 1], x[i, 2], seg_a[i, 0], seg_a[i, 1], seg_a[i, 2],
                                           seg_b[i, 0], seg_b[i, 1], seg_b[i, 2]) + base_shift[i]
            t, u, v, w, d2, _ = _mesh_closest_within(x[i, 0], x[i, 1], x[i, 2], first, stop, cand, d0, i, tris, v0,
                                                  0.0, v1, shift, math.inf, center, rad, 0.0, -1, 0.0, 0.0, 0.0, 0.0)
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
def mesh_narrow_phase_segments(x_start, x_pred, seg_a, seg_b, r_built, base_shift, inv_mass, first, stop, cand, d0,
                               tris, v0, v1, motion, side, t_start, t_end, radius, mu_s, mu_k, path, path_prev, center,
                               rad, lost, only_lost, hit, res, clear, clear_pos, clear_mark, near_t, near_other,
                               near_pos, near_mark, motion_before, from_cache, standing, tnorm, cert, nbr, certified,
                               dbounds, dorigin, dinv, dband, cell_first, cell_stop, cell_cand, cell_d0, cell_reach,
                               cell_scan, c_vertex, c_normal, c_point, c_radius, c_disp, c_mu_s, c_mu_k, offset):
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
    n = x_pred.shape[0]
    now = motion_before + motion * t_end
    for i in prange(n):
        if only_lost and not lost[i]:
            continue  # the result of the previous pass stands
        if not only_lost:
            path[i] += sqrt((x_start[i, 0] - path_prev[i, 0]) ** 2 + (x_start[i, 1] - path_prev[i, 1]) ** 2
                            + (x_start[i, 2] - path_prev[i, 2]) ** 2)
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
            bound = clear[i] - sqrt((p0 - clear_pos[i, 0]) ** 2 + (p1 - clear_pos[i, 1]) ** 2
                                    + (p2 - clear_pos[i, 2]) ** 2) - (now - clear_mark[i])
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
            dev = point_segment_distance(p0, p1, p2, seg_a[i, 0], seg_a[i, 1], seg_a[i, 2], seg_b[i, 0], seg_b[i, 1],
                                         seg_b[i, 2]) + base_shift[i] + motion * t_end
            outside = r_built[i] - dev  # every triangle not in the list is at least this far
        best_t = -1
        d2 = 1e300
        lower = 1e300
        u = v = w = 0.0
        cached = False
        seed = -1
        limit = 2.0 * radius + travel + path[i] + motion * t_end + 1e-9
        if near_t[i] >= 0 and (standing or stop[i] > first[i]):
            other = near_other[i] - sqrt((p0 - near_pos[i, 0]) ** 2 + (p1 - near_pos[i, 1]) ** 2
                                         + (p2 - near_pos[i, 2]) ** 2) - (now - near_mark[i])
            t = near_t[i]
            a0, a1, a2 = _interp(v0, v1, tris[t, 0], t_end)
            b0, b1, b2 = _interp(v0, v1, tris[t, 1], t_end)
            c0, c1, c2 = _interp(v0, v1, tris[t, 2], t_end)
            u, v, w, d2 = closest_on_triangle_d2(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2)  # as the scan does
            if standing:
                t, u, v, w, d2, certified[i] = certified_walk(p0, p1, p2, t, u, v, w, d2, tris, v0, tnorm, cert, nbr,
                                                              CERTIFIED_WALK_STEPS)
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
            best_t, u, v, w, d2, lower = _mesh_closest_within(p0, p1, p2, cell_first, cell_stop, cell_cand, cell_d0,
                                                              cell, tris, v0, t_end, v1, dev, limit, center, rad,
                                                              motion, seed, u, v, w, d2)
        elif not answered and (stop[i] > first[i] or seed >= 0):
            best_t, u, v, w, d2, lower = _mesh_closest_within(p0, p1, p2, first, stop, cand, d0, i, tris, v0, t_end,
                                                              v1, dev, limit, center, rad, motion, seed, u, v, w, d2)
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
            us, vs, ws = closest_on_triangle(x_start[i, 0], x_start[i, 1], x_start[i, 2], sa0, sa1, sa2, sb0, sb1, sb2,
                                             sc0, sc1, sc2)
            sn0, sn1, sn2 = triangle_normal(sa0, sa1, sa2, sb0, sb1, sb2, sc0, sc1, sc2)
            s = 1.0 if (sn0 * (x_start[i, 0] - (us * sa0 + vs * sb0 + ws * sc0))
                        + sn1 * (x_start[i, 1] - (us * sa1 + vs * sb1 + ws * sc1))
                        + sn2 * (x_start[i, 2] - (us * sa2 + vs * sb2 + ws * sc2))) >= 0.0 else -1.0
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
        if C > travel + radius:
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
        count = emit_contact(count, i, res[i, 0], res[i, 1], res[i, 2], res[i, 3], res[i, 4], res[i, 5], radius,
                             res[i, 6], res[i, 7], res[i, 8], mu_s, mu_k, c_vertex, c_normal, c_point, c_radius,
                             c_disp, c_mu_s, c_mu_k)
    return count, n_lost, n_skipped, n_cached, n_certified, n_cell


@njit(**_JIT)
def mesh_closest_points(points, radius, tris, verts, cell, table_size, bucket_start, items):
    """For each point, the closest triangle of a mesh within ``radius`` (hash grid of the triangle
    boxes grown by ``radius``, built with :func:`hash_grid.hash_boxes`): (triangle (P,) or -1,
    barycentrics (P, 3), distance (P,), side (P,) +1 in front of the face normal, -1 behind)."""
    n = points.shape[0]
    best_t = np.full(n, -1, dtype=np.int64)
    bary = np.zeros((n, 3))
    dist = np.full(n, np.inf)
    side = np.ones(n)
    inv = 1.0 / cell
    for q in range(n):
        p0, p1, p2 = points[q, 0], points[q, 1], points[q, 2]
        if not (abs(p0) < 1e6 and abs(p1) < 1e6 and abs(p2) < 1e6):
            continue
        ci = int(math.floor(p0 * inv))
        cj = int(math.floor(p1 * inv))
        ck = int(math.floor(p2 * inv))
        h = cell_hash(ci, cj, ck, table_size)
        best = radius * radius
        for s in range(bucket_start[h], bucket_start[h + 1]):
            t = items[s]
            ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
            u, v, w = closest_on_triangle(p0, p1, p2, verts[ia, 0], verts[ia, 1], verts[ia, 2], verts[ib, 0],
                                          verts[ib, 1], verts[ib, 2], verts[ic, 0], verts[ic, 1], verts[ic, 2])
            e0 = p0 - (u * verts[ia, 0] + v * verts[ib, 0] + w * verts[ic, 0])
            e1 = p1 - (u * verts[ia, 1] + v * verts[ib, 1] + w * verts[ic, 1])
            e2 = p2 - (u * verts[ia, 2] + v * verts[ib, 2] + w * verts[ic, 2])
            d2 = e0 * e0 + e1 * e1 + e2 * e2
            if d2 <= best and (best_t[q] < 0 or d2 < best or t < best_t[q]):
                best = d2
                best_t[q] = t
                bary[q, 0], bary[q, 1], bary[q, 2] = u, v, w
                n0, n1, n2 = triangle_normal(verts[ia, 0], verts[ia, 1], verts[ia, 2], verts[ib, 0], verts[ib, 1],
                                             verts[ib, 2], verts[ic, 0], verts[ic, 1], verts[ic, 2])
                side[q] = 1.0 if n0 * e0 + n1 * e1 + n2 * e2 >= 0.0 else -1.0
        if best_t[q] >= 0:
            dist[q] = sqrt(best)
    return best_t, bary, dist, side
