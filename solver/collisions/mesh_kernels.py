"""Triangle-mesh collider, broad phase: each cloth vertex's travel segment over the frame
(capsule reach), the candidate triangles near it (hash grid of the triangle boxes, parallel over
vertices), kept, merged and re-queried lists; and the closest points the learned network's world
edges take. The per-substep narrow phase is :mod:`.mesh_narrow_phase`.

Per-vertex loops run in ``prange``: every vertex writes only its own slots, the compaction into
CSR lists is a serial prefix sum afterwards, so the result does not depend on the thread count
(no atomics, no shared scratch).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT, _JIT_PARALLEL
from .chunks import active_chunks, concatenate_chunks, fill_in_chunks
from .geometry import (
    closest_on_triangle,
    point_segment_distance,
    point_triangle_distance,
    segment_plane_gap,
    triangle_normal,
)
from .hash_grid import boxes_overlapping, cell_hash, finite_box


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


@njit(**_JIT)
def vertex_travel_segments(x, v, v_prev, inv_mass, frame_dt, max_acceleration, margin, deflection, seg_b, pad, active):
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
        dev = max(
            point_segment_distance(
                x[i, 0], x[i, 1], x[i, 2], seg_a[i, 0], seg_a[i, 1], seg_a[i, 2], seg_b[i, 0], seg_b[i, 1], seg_b[i, 2]
            ),
            point_segment_distance(
                seg_b_new[i, 0],
                seg_b_new[i, 1],
                seg_b_new[i, 2],
                seg_a[i, 0],
                seg_a[i, 1],
                seg_a[i, 2],
                seg_b[i, 0],
                seg_b[i, 1],
                seg_b[i, 2],
            ),
        )
        old_len = sqrt(
            (seg_b[i, 0] - seg_a[i, 0]) ** 2 + (seg_b[i, 1] - seg_a[i, 1]) ** 2 + (seg_b[i, 2] - seg_a[i, 2]) ** 2
        )
        new_len = sqrt(
            (seg_b_new[i, 0] - x[i, 0]) ** 2 + (seg_b_new[i, 1] - x[i, 1]) ** 2 + (seg_b_new[i, 2] - x[i, 2]) ** 2
        )
        keep[i] = (
            dev + need[i] + moved_since[i] <= r_built[i]
            and r_built[i] <= 1.5 * need[i] + slack
            and old_len <= 1.5 * new_len + need[i]
        )


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
def _fill_candidates(
    seg_a,
    seg_b,
    pad,
    radius,
    active,
    tlo,
    thi,
    inv,
    table_size,
    bucket_start,
    items,
    max_cells,
    tris,
    v0,
    center,
    rad,
    stamp,
    offsets,
    cand,
    d0,
    q_first,
    q_last,
    count,
):
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
                half = 0.5 * sqrt(
                    (seg_b[q, 0] - seg_a[q, 0]) ** 2
                    + (seg_b[q, 1] - seg_a[q, 1]) ** 2
                    + (seg_b[q, 2] - seg_a[q, 2]) ** 2
                )
                start = count
                for e in range(
                    boxes_overlapping(
                        ql, qh, inv, max_cells, table_size, bucket_start, items, tlo, thi, stamp, q, found
                    )
                ):
                    b = found[e]
                    # bounding spheres first: no point of the segment is nearer the midpoint
                    # than half its length, no point of the triangle farther from its centre
                    # than rad (a lower bound of the distance, a few flops)
                    if (
                        sqrt((m0 - center[b, 0]) ** 2 + (m1 - center[b, 1]) ** 2 + (m2 - center[b, 2]) ** 2)
                        - rad[b]
                        - half
                        > limit
                    ):
                        continue
                    ia, ib, ic = tris[b, 0], tris[b, 1], tris[b, 2]
                    if half > 0.5 * limit:
                        # long segment: the larger of two lower bounds of the segment-triangle
                        # distance, the triangle's bounding sphere against the segment and the
                        # segment's gap to the triangle's plane (d0 is only used as a bound)
                        dist = (
                            point_segment_distance(
                                center[b, 0],
                                center[b, 1],
                                center[b, 2],
                                seg_a[q, 0],
                                seg_a[q, 1],
                                seg_a[q, 2],
                                seg_b[q, 0],
                                seg_b[q, 1],
                                seg_b[q, 2],
                            )
                            - rad[b]
                        )
                        if dist > limit:
                            continue
                        dist = max(
                            dist,
                            segment_plane_gap(
                                seg_a[q, 0],
                                seg_a[q, 1],
                                seg_a[q, 2],
                                seg_b[q, 0],
                                seg_b[q, 1],
                                seg_b[q, 2],
                                v0[ia, 0],
                                v0[ia, 1],
                                v0[ia, 2],
                                v0[ib, 0],
                                v0[ib, 1],
                                v0[ib, 2],
                                v0[ic, 0],
                                v0[ic, 1],
                                v0[ic, 2],
                            ),
                        )
                    else:
                        # short segment: the midpoint's distance minus the half length bounds
                        # the segment's from below (d0 is only used as a bound)
                        dist = (
                            point_triangle_distance(
                                m0,
                                m1,
                                m2,
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
                            - half
                        )
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
def _fill_chunks(
    seg_a,
    seg_b,
    pad,
    radius,
    active,
    tlo,
    thi,
    inv,
    table_size,
    bucket_start,
    items,
    max_cells,
    tris,
    v0,
    center,
    rad,
    offsets,
    bounds,
    resume,
    counts,
    stamps,
    cands,
    d0s,
):
    """One :func:`_fill_candidates` per vertex chunk, in parallel, each into its own buffers;
    ``resume[c]`` is where chunk c goes on from (its end when it is done)."""
    for c in prange(bounds.shape[0] - 1):
        if resume[c] < bounds[c + 1]:
            q, count = _fill_candidates(
                seg_a,
                seg_b,
                pad,
                radius,
                active,
                tlo,
                thi,
                inv,
                table_size,
                bucket_start,
                items,
                max_cells,
                tris,
                v0,
                center,
                rad,
                stamps[c],
                offsets,
                cands[c],
                d0s[c],
                resume[c],
                bounds[c + 1],
                counts[c],
            )
            resume[c] = q
            counts[c] = count


@njit(**_JIT)
def query_on_this_thread(
    seg_a,
    seg_b,
    pad,
    radius,
    active,
    tlo,
    thi,
    inv,
    table_size,
    bucket_start,
    items,
    max_cells,
    tris,
    v0,
    center,
    rad,
    n_active,
):
    """:func:`mesh_query_candidates` in one chunk, without a parallel region (for a few vertices:
    starting the parallel kernel, the chunk bookkeeping and buffers grown from 8 entries a vertex
    cost more than their queries). Returns the same (offsets, cand, d0)."""
    stamp = np.full(tlo.shape[0], -1, dtype=np.int64)
    offsets = np.zeros(seg_a.shape[0] + 1, dtype=np.int64)
    cand = np.empty(max(64, 64 * n_active), dtype=np.int64)
    d0 = np.empty(cand.shape[0])
    q, count = _fill_candidates(
        seg_a,
        seg_b,
        pad,
        radius,
        active,
        tlo,
        thi,
        inv,
        table_size,
        bucket_start,
        items,
        max_cells,
        tris,
        v0,
        center,
        rad,
        stamp,
        offsets,
        cand,
        d0,
        0,
        seg_a.shape[0],
        0,
    )
    while q < seg_a.shape[0]:  # full: grow and go on from the vertex that did not fit
        grown = np.empty(3 * cand.shape[0], dtype=np.int64)
        grown[:count] = cand[:count]
        cand = grown
        grown_d0 = np.empty(cand.shape[0])
        grown_d0[:count] = d0[:count]
        d0 = grown_d0
        stamp[:] = -1
        q, count = _fill_candidates(
            seg_a,
            seg_b,
            pad,
            radius,
            active,
            tlo,
            thi,
            inv,
            table_size,
            bucket_start,
            items,
            max_cells,
            tris,
            v0,
            center,
            rad,
            stamp,
            offsets,
            cand,
            d0,
            q,
            seg_a.shape[0],
            count,
        )
    return offsets, cand[:count], d0[:count]


@njit(**_JIT)
def requery_lost(
    lost, x_start, x_pred, remaining, h, margin, deflection, grid, max_cells, body, lists, used, mark, cum_motion
):
    """The narrow phase's re-query of its ``lost`` vertices in one call: their capsules
    (:func:`requery_capsules`), their lists (:func:`query_on_this_thread`), appended to the list
    storage (:func:`mesh_append_lists`) and the capsule recorded for each.

    A landing frame of bench_collisions re-queries up to 20 times (median 16 vertices); done as
    a dozen NumPy and Numba calls from Python it took 0.4 ms a call (6 ms a frame), several times
    the queries themselves. Returns (new ``used``, or -1 when the storage is full: the caller
    compacts and appends ``idx`` / ``offsets`` / ``new_cand`` / ``new_d0`` itself; idx, offsets,
    new_cand, new_d0). ``grid``: the body's hash grid (``mesh_body.TriangleGrid``), ``body`` a
    ``mesh_narrow_phase.BodyFrame``, ``lists`` the cloth's ``mesh_narrow_phase.CandidateLists``
    (appended to, their segments and reaches updated in place)."""
    tlo, thi, cell, table_size, bucket_start, items, radius, _ = grid
    inv = 1.0 / cell
    tris, v0, _, center, rad, _, _, _ = body
    first, stop, cand, d0, seg_a_all, seg_b_all, r_built, base_shift = lists
    idx, seg_a, seg_b, pad = requery_capsules(lost, x_start, x_pred, remaining, h, margin, deflection)
    active = np.ones(idx.shape[0], dtype=np.bool_)
    offsets, new_cand, new_d0 = query_on_this_thread(
        seg_a,
        seg_b,
        pad,
        radius,
        active,
        tlo,
        thi,
        inv,
        table_size,
        bucket_start,
        items,
        max_cells,
        tris,
        v0,
        center,
        rad,
        idx.shape[0],
    )
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


def mesh_query_candidates(
    seg_a,
    seg_b,
    pad,
    radius,
    active,
    tlo,
    thi,
    cell,
    table_size,
    bucket_start,
    items,
    max_cells,
    tris,
    v0,
    center,
    rad,
    chunks,
):
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
        return query_on_this_thread(
            seg_a,
            seg_b,
            pad,
            radius,
            active,
            tlo,
            thi,
            1.0 / cell,
            table_size,
            bucket_start,
            items,
            max_cells,
            tris,
            v0,
            center,
            rad,
            n_active,
        )
    cap = max(16, (8 * n_active) // chunks)  # allocate for the vertices asked for, not for all
    stamps = np.full((chunks, tlo.shape[0]), -1, dtype=np.int64)
    offsets = np.zeros(seg_a.shape[0] + 1, dtype=np.int64)
    inputs = (
        seg_a,
        seg_b,
        pad,
        radius,
        active,
        tlo,
        thi,
        1.0 / cell,
        table_size,
        bucket_start,
        items,
        max_cells,
        tris,
        v0,
        center,
        rad,
        offsets,
    )
    buffers, counts = fill_in_chunks(
        _fill_chunks, inputs, bounds, [np.empty((chunks, cap), dtype=np.int64), np.empty((chunks, cap))], stamps
    )
    base = np.concatenate([[0], np.cumsum(counts)])
    for c in range(chunks):  # chunk c's offsets count from its own start
        offsets[bounds[c] + 1 : bounds[c + 1] + 1] += base[c]
    cand, d0 = concatenate_chunks(buffers, counts)
    return offsets, cand, d0


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
            u, v, w = closest_on_triangle(
                p0,
                p1,
                p2,
                verts[ia, 0],
                verts[ia, 1],
                verts[ia, 2],
                verts[ib, 0],
                verts[ib, 1],
                verts[ib, 2],
                verts[ic, 0],
                verts[ic, 1],
                verts[ic, 2],
            )
            e0 = p0 - (u * verts[ia, 0] + v * verts[ib, 0] + w * verts[ic, 0])
            e1 = p1 - (u * verts[ia, 1] + v * verts[ib, 1] + w * verts[ic, 1])
            e2 = p2 - (u * verts[ia, 2] + v * verts[ib, 2] + w * verts[ic, 2])
            d2 = e0 * e0 + e1 * e1 + e2 * e2
            if d2 <= best and (best_t[q] < 0 or d2 < best or t < best_t[q]):
                best = d2
                best_t[q] = t
                bary[q, 0], bary[q, 1], bary[q, 2] = u, v, w
                n0, n1, n2 = triangle_normal(
                    verts[ia, 0],
                    verts[ia, 1],
                    verts[ia, 2],
                    verts[ib, 0],
                    verts[ib, 1],
                    verts[ib, 2],
                    verts[ic, 0],
                    verts[ic, 1],
                    verts[ic, 2],
                )
                side[q] = 1.0 if n0 * e0 + n1 * e1 + n2 * e2 >= 0.0 else -1.0
        if best_t[q] >= 0:
            dist[q] = sqrt(best)
    return best_t, bary, dist, side
