"""Self-collision: particle-particle (spatial hash, cell = 2 r) and vertex-triangle repulsion."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ..kernels import clamp_unilateral, inverse_denominator, xpbd_delta_lambda
from ._jit import _JIT, _JIT_PARALLEL
from .chunks import concatenate_chunks, equal_chunks, fill_in_chunks
from .geometry import closest_on_triangle, push_vertex_triangle, triangle_normal
from .hash_grid import boxes_overlapping, cell_hash, finite_box, hash_boxes
from .mesh_kernels import swept_triangle_boxes


# ----------------------------------------------------------------------------------------------
# Self-collision: particle-particle (spatial hash, cell = 2 r) and vertex-triangle repulsion.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def _two_hop_ring(i, degree, ring, mark, out, pos):
    """Visit the vertices one or two hops from i once each (``mark``); write them to ``out``
    from ``pos`` on unless ``pos < 0``. Returns how many there are."""
    mark[i] = i
    count = 0
    for s in range(degree[i], degree[i + 1]):
        j = ring[s]
        for r in range(degree[j] - 1, degree[j + 1]):
            k = j if r < degree[j] else ring[r]  # j itself, then its neighbours
            if mark[k] != i:
                mark[k] = i
                if pos >= 0:
                    out[pos + count] = k
                count += 1
    return count


@njit(**_JIT)
def two_hop_lists(n, edges):
    """CSR (offsets, sorted lists) of the vertices within two mesh hops of each vertex, itself
    excluded; ``edges`` (E, 2) unique undirected mesh edges."""
    degree = np.zeros(n + 1, dtype=np.int64)
    for e in range(edges.shape[0]):
        degree[edges[e, 0] + 1] += 1
        degree[edges[e, 1] + 1] += 1
    for i in range(n):
        degree[i + 1] += degree[i]
    ring = np.empty(degree[n], dtype=np.int64)
    fill = degree[:n].copy()
    for e in range(edges.shape[0]):
        a, b = edges[e, 0], edges[e, 1]
        ring[fill[a]] = b
        fill[a] += 1
        ring[fill[b]] = a
        fill[b] += 1
    mark = np.full(n, -1, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    counted = np.empty(0, dtype=np.int64)
    for i in range(n):  # count, then fill
        offsets[i + 1] = offsets[i] + _two_hop_ring(i, degree, ring, mark, counted, -1)
    flat = np.empty(offsets[n], dtype=np.int64)
    mark[:] = -1
    for i in range(n):
        _two_hop_ring(i, degree, ring, mark, flat, offsets[i])
        flat[offsets[i] : offsets[i + 1]].sort()
    return offsets, flat


@njit(inline="always", **_JIT)
def _is_excluded(i, j, excl_offsets, excl):
    for s in range(excl_offsets[i], excl_offsets[i + 1]):
        if excl[s] == j:
            return True
    return False


@njit(**_JIT)
def _particle_hash(x_start, x_pred, radius, table_size):
    """Counting-sort hash of the predicted positions: (travel, cell size, bucket starts, items)."""
    n = x_pred.shape[0]
    max_travel = 0.0
    travel = np.empty(n)
    for i in range(n):
        travel[i] = sqrt(
            (x_pred[i, 0] - x_start[i, 0]) ** 2
            + (x_pred[i, 1] - x_start[i, 1]) ** 2
            + (x_pred[i, 2] - x_start[i, 2]) ** 2
        )
        max_travel = max(max_travel, travel[i])
    reach = 2.0 * radius + 2.0 * max_travel
    cell = max(2.0 * radius, reach)
    inv = 1.0 / cell
    counts = np.zeros(table_size + 1, dtype=np.int64)
    keys = np.empty(n, dtype=np.int64)
    for i in range(n):
        keys[i] = cell_hash(
            int(math.floor(x_pred[i, 0] * inv)),
            int(math.floor(x_pred[i, 1] * inv)),
            int(math.floor(x_pred[i, 2] * inv)),
            table_size,
        )
        counts[keys[i] + 1] += 1
    for t in range(table_size):
        counts[t + 1] += counts[t]
    items = np.empty(n, dtype=np.int64)
    fill = counts[:table_size].copy()
    for i in range(n):
        items[fill[keys[i]]] = i
        fill[keys[i]] += 1
    return travel, cell, counts, items


@njit(**_JIT)
def _fill_particle_pairs(
    x_pred,
    inv_mass,
    radius,
    travel,
    inv,
    table_size,
    bucket_start,
    items,
    excl_offsets,
    excl,
    pi,
    pj,
    q_first,
    q_last,
    count,
):
    """The pairs (i, j > i) of vertices ``q_first .. q_last - 1`` into fixed buffers. Returns (next
    vertex, count): ``q_last`` when done, else the vertex whose pairs did not fit (dropped)."""
    for i in range(q_first, q_last):
        start = count
        ci = int(math.floor(x_pred[i, 0] * inv))
        cj = int(math.floor(x_pred[i, 1] * inv))
        ck = int(math.floor(x_pred[i, 2] * inv))
        for a in range(ci - 1, ci + 2):
            for b in range(cj - 1, cj + 2):
                for c in range(ck - 1, ck + 2):
                    t = cell_hash(a, b, c, table_size)
                    for s in range(bucket_start[t], bucket_start[t + 1]):
                        j = items[s]
                        if j <= i or (inv_mass[i] == 0.0 and inv_mass[j] == 0.0):
                            continue
                        d2 = (
                            (x_pred[i, 0] - x_pred[j, 0]) ** 2
                            + (x_pred[i, 1] - x_pred[j, 1]) ** 2
                            + (x_pred[i, 2] - x_pred[j, 2]) ** 2
                        )
                        pair_reach = 2.0 * radius + travel[i] + travel[j]
                        if d2 > pair_reach * pair_reach or _is_excluded(i, j, excl_offsets, excl):
                            continue
                        duplicate = False  # hash collisions can list one pair twice
                        for e in range(count - 1, start - 1, -1):
                            if pj[e] == j:
                                duplicate = True
                                break
                        if duplicate:
                            continue
                        if count == pi.shape[0]:
                            return i, start
                        pi[count] = i
                        pj[count] = j
                        count += 1
    return q_last, count


@njit(**_JIT_PARALLEL)
def _fill_particle_chunks(
    x_pred,
    inv_mass,
    radius,
    travel,
    inv,
    table_size,
    bucket_start,
    items,
    excl_offsets,
    excl,
    bounds,
    resume,
    used,
    pis,
    pjs,
):
    """One :func:`_fill_particle_pairs` per vertex chunk, in parallel, each into its own buffers."""
    for c in prange(bounds.shape[0] - 1):
        if resume[c] < bounds[c + 1]:
            q, count = _fill_particle_pairs(
                x_pred,
                inv_mass,
                radius,
                travel,
                inv,
                table_size,
                bucket_start,
                items,
                excl_offsets,
                excl,
                pis[c],
                pjs[c],
                resume[c],
                bounds[c + 1],
                used[c],
            )
            resume[c] = q
            used[c] = count


def self_particle_pairs(x_start, x_pred, inv_mass, radius, excl_offsets, excl, table_size, chunks=1):
    """Pairs (i < j) of vertices closer than 2 r + both substep travels, not within two mesh hops.

    Spatial hash of the predicted positions with cell 2 r + the largest substep travel; each
    vertex looks at the 27 cells around it. The vertices run in ``chunks`` consecutive ranges in
    parallel, concatenated in vertex order: the pairs do not depend on ``chunks`` (:mod:`.chunks`).
    """
    n = x_pred.shape[0]
    travel, cell, bucket_start, items = _particle_hash(x_start, x_pred, radius, table_size)
    bounds = equal_chunks(n, chunks)
    chunks = bounds.shape[0] - 1
    cap = max(64, (4 * n + 16) // chunks)
    inputs = (x_pred, inv_mass, radius, travel, 1.0 / cell, table_size, bucket_start, items, excl_offsets, excl)
    buffers, used = fill_in_chunks(
        _fill_particle_chunks,
        inputs,
        bounds,
        [np.empty((chunks, cap), dtype=np.int64), np.empty((chunks, cap), dtype=np.int64)],
    )
    return tuple(concatenate_chunks(buffers, used))


@njit(**_JIT)
def solve_self_particles(x, inv_mass, pi, pj, radius, lam):
    """C = |x_i - x_j| - 2 r >= 0, pushing only; corrections split by inverse mass."""
    target = 2.0 * radius
    for c in range(pi.shape[0]):
        i = pi[c]
        j = pj[c]
        wi = inv_mass[i]
        wj = inv_mass[j]
        d0 = x[i, 0] - x[j, 0]
        d1 = x[i, 1] - x[j, 1]
        d2 = x[i, 2] - x[j, 2]
        length = sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        if length < 1e-12:
            continue
        C = length - target
        if C >= 0.0 and lam[c] == 0.0:
            continue
        dlam = xpbd_delta_lambda(C, 0.0, 0.0, 0.0, lam[c], inverse_denominator(wi + wj, 0.0, 0.0))
        dlam = clamp_unilateral(lam[c], dlam, 1.0)
        lam[c] += dlam
        n0, n1, n2 = d0 / length, d1 / length, d2 / length
        x[i, 0] += wi * dlam * n0
        x[i, 1] += wi * dlam * n1
        x[i, 2] += wi * dlam * n2
        x[j, 0] -= wj * dlam * n0
        x[j, 1] -= wj * dlam * n1
        x[j, 2] -= wj * dlam * n2


@njit(inline="always", **_JIT)
def _projected_inside(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2, tolerance):
    """True when p projects onto the plane of abc inside the triangle grown by ``tolerance`` (barycentric)."""
    e0, e1, e2 = b0 - a0, b1 - a1, b2 - a2
    f0, f1, f2 = c0 - a0, c1 - a1, c2 - a2
    g0, g1, g2 = p0 - a0, p1 - a1, p2 - a2
    d00 = e0 * e0 + e1 * e1 + e2 * e2
    d01 = e0 * f0 + e1 * f1 + e2 * f2
    d11 = f0 * f0 + f1 * f1 + f2 * f2
    d20 = g0 * e0 + g1 * e1 + g2 * e2
    d21 = g0 * f0 + g1 * f1 + g2 * f2
    den = d00 * d11 - d01 * d01
    if den <= 0.0:
        return False
    v = (d11 * d20 - d01 * d21) / den
    w = (d00 * d21 - d01 * d20) / den
    return v >= -tolerance and w >= -tolerance and 1.0 - v - w >= -tolerance


@njit(inline="always", **_JIT)
def _vertex_triangle_side(i, t, x_start, x_pred, tris, thickness):
    """Side (+1 / -1) of a vertex-triangle pair to repel this substep, 0 when it is out of reach.

    Kept when the vertex is within ``2 thickness + travel`` of the triangle at the substep start
    or the prediction and projects onto the face (not beside it in its plane); the side is the
    side of the triangle's plane the vertex was on at the substep start.
    """
    ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
    travel = sqrt(
        (x_pred[i, 0] - x_start[i, 0]) ** 2 + (x_pred[i, 1] - x_start[i, 1]) ** 2 + (x_pred[i, 2] - x_start[i, 2]) ** 2
    )
    limit = 2.0 * thickness + travel
    # cheap rejection: the triangle's bounding sphere (at the prediction) is out of reach
    g0 = (x_pred[ia, 0] + x_pred[ib, 0] + x_pred[ic, 0]) / 3.0
    g1 = (x_pred[ia, 1] + x_pred[ib, 1] + x_pred[ic, 1]) / 3.0
    g2 = (x_pred[ia, 2] + x_pred[ib, 2] + x_pred[ic, 2]) / 3.0
    rad2 = max(
        (x_pred[ia, 0] - g0) ** 2 + (x_pred[ia, 1] - g1) ** 2 + (x_pred[ia, 2] - g2) ** 2,
        (x_pred[ib, 0] - g0) ** 2 + (x_pred[ib, 1] - g1) ** 2 + (x_pred[ib, 2] - g2) ** 2,
        (x_pred[ic, 0] - g0) ** 2 + (x_pred[ic, 1] - g1) ** 2 + (x_pred[ic, 2] - g2) ** 2,
    )
    dg = sqrt((x_pred[i, 0] - g0) ** 2 + (x_pred[i, 1] - g1) ** 2 + (x_pred[i, 2] - g2) ** 2)
    # the start position is within travel + the triangle's own travel of the prediction
    tri_travel = max(
        sqrt(
            (x_pred[ia, 0] - x_start[ia, 0]) ** 2
            + (x_pred[ia, 1] - x_start[ia, 1]) ** 2
            + (x_pred[ia, 2] - x_start[ia, 2]) ** 2
        ),
        sqrt(
            (x_pred[ib, 0] - x_start[ib, 0]) ** 2
            + (x_pred[ib, 1] - x_start[ib, 1]) ** 2
            + (x_pred[ib, 2] - x_start[ib, 2]) ** 2
        ),
        sqrt(
            (x_pred[ic, 0] - x_start[ic, 0]) ** 2
            + (x_pred[ic, 1] - x_start[ic, 1]) ** 2
            + (x_pred[ic, 2] - x_start[ic, 2]) ** 2
        ),
    )
    if dg - sqrt(rad2) > limit + travel + tri_travel:
        return 0.0
    u, v, w = closest_on_triangle(
        x_pred[i, 0],
        x_pred[i, 1],
        x_pred[i, 2],
        x_pred[ia, 0],
        x_pred[ia, 1],
        x_pred[ia, 2],
        x_pred[ib, 0],
        x_pred[ib, 1],
        x_pred[ib, 2],
        x_pred[ic, 0],
        x_pred[ic, 1],
        x_pred[ic, 2],
    )
    e0 = x_pred[i, 0] - (u * x_pred[ia, 0] + v * x_pred[ib, 0] + w * x_pred[ic, 0])
    e1 = x_pred[i, 1] - (u * x_pred[ia, 1] + v * x_pred[ib, 1] + w * x_pred[ic, 1])
    e2 = x_pred[i, 2] - (u * x_pred[ia, 2] + v * x_pred[ib, 2] + w * x_pred[ic, 2])
    dist_pred = sqrt(e0 * e0 + e1 * e1 + e2 * e2)
    # substep start: side and distance
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
    e0 = x_start[i, 0] - (u * x_start[ia, 0] + v * x_start[ib, 0] + w * x_start[ic, 0])
    e1 = x_start[i, 1] - (u * x_start[ia, 1] + v * x_start[ib, 1] + w * x_start[ic, 1])
    e2 = x_start[i, 2] - (u * x_start[ia, 2] + v * x_start[ib, 2] + w * x_start[ic, 2])
    dist_start = sqrt(e0 * e0 + e1 * e1 + e2 * e2)
    if min(dist_start, dist_pred) > limit:
        return 0.0
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
    if n0 == 0.0 and n1 == 0.0 and n2 == 0.0:
        return 0.0
    side = 1.0 if n0 * e0 + n1 * e1 + n2 * e2 >= 0.0 else -1.0
    # only a vertex over the face (not beside it in its plane) is pushed along the face normal
    if not (
        _projected_inside(
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
            0.1,
        )
        or _projected_inside(
            x_pred[i, 0],
            x_pred[i, 1],
            x_pred[i, 2],
            x_pred[ia, 0],
            x_pred[ia, 1],
            x_pred[ia, 2],
            x_pred[ib, 0],
            x_pred[ib, 1],
            x_pred[ib, 2],
            x_pred[ic, 0],
            x_pred[ic, 1],
            x_pred[ic, 2],
            0.1,
        )
    ):
        return 0.0
    return side


@njit(**_JIT)
def _fill_vertex_triangle_pairs(
    x_start,
    x_pred,
    inv_mass,
    tris,
    thickness,
    lo,
    hi,
    inv,
    table_size,
    bucket_start,
    items,
    excl_offsets,
    excl,
    stamp,
    cv,
    ct,
    cs,
    q_first,
    q_last,
    count,
):
    """The pairs of vertices ``q_first .. q_last - 1`` into fixed buffers (hash query and filter
    fused). Returns (next vertex, count): ``q_last`` when done, else the vertex whose pairs did not
    fit (dropped: resume from it with bigger buffers and a cleared ``stamp``)."""
    ql = np.empty((1, 3))
    qh = np.empty((1, 3))
    nt = lo.shape[0]
    found = np.empty(nt, dtype=np.int64)
    for i in range(q_first, q_last):
        for d in range(3):
            ql[0, d] = min(x_start[i, d], x_pred[i, d]) - thickness
            qh[0, d] = max(x_start[i, d], x_pred[i, d]) + thickness
        if not finite_box(ql, qh, 0):
            continue
        start = count
        wi = inv_mass[i]
        ring = nt + i  # stamp[nt + v] == i: v is i itself or within two hops of it
        stamp[ring] = i
        for s in range(excl_offsets[i], excl_offsets[i + 1]):
            stamp[nt + excl[s]] = i
        for e in range(boxes_overlapping(ql, qh, inv, 32, table_size, bucket_start, items, lo, hi, stamp, i, found)):
            t = found[e]
            ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
            if stamp[nt + ia] == i or stamp[nt + ib] == i or stamp[nt + ic] == i:
                continue  # i's own triangles and topological neighbours (two hops): touching at rest
            if wi == 0.0 and inv_mass[ia] == 0.0 and inv_mass[ib] == 0.0 and inv_mass[ic] == 0.0:
                continue
            side = _vertex_triangle_side(i, t, x_start, x_pred, tris, thickness)
            if side == 0.0:
                continue
            if count == cv.shape[0]:
                return i, start
            cv[count] = i
            ct[count] = t
            cs[count] = side
            count += 1
    return q_last, count


@njit(**_JIT_PARALLEL)
def _fill_pair_chunks(
    x_start,
    x_pred,
    inv_mass,
    tris,
    thickness,
    lo,
    hi,
    inv,
    table_size,
    bucket_start,
    items,
    excl_offsets,
    excl,
    bounds,
    resume,
    counts,
    stamps,
    cvs,
    cts,
    css,
):
    """One :func:`_fill_vertex_triangle_pairs` per vertex chunk, in parallel, each into its own buffers."""
    for c in prange(bounds.shape[0] - 1):
        if resume[c] < bounds[c + 1]:
            q, count = _fill_vertex_triangle_pairs(
                x_start,
                x_pred,
                inv_mass,
                tris,
                thickness,
                lo,
                hi,
                inv,
                table_size,
                bucket_start,
                items,
                excl_offsets,
                excl,
                stamps[c],
                cvs[c],
                cts[c],
                css[c],
                resume[c],
                bounds[c + 1],
                counts[c],
            )
            resume[c] = q
            counts[c] = count


def self_triangle_contacts(x_start, x_pred, inv_mass, tris, thickness, cell, table_size, excl_offsets, excl, chunks=1):
    """Vertex-triangle pairs for self-collision repulsion this substep.

    Triangles are hashed by their swept box (substep start and prediction, padded by the
    thickness); each vertex queries the cells of its own swept box. A pair is kept when the
    vertex is within ``2 thickness + travel`` of the triangle at the substep start or the
    prediction; its side is the side of the triangle's plane the vertex was on at the
    substep start. Returns (vertex, triangle, side), in vertex order.

    The vertices run in ``chunks`` consecutive ranges in parallel, each with its own buffers, then
    concatenated: the pairs do not depend on ``chunks`` (see :mod:`.chunks`; the query was 4.4 of
    6.7 ms a substep on a 64 x 64 sheet, serial).
    """
    nt = tris.shape[0]
    n = x_pred.shape[0]
    lo = np.empty((nt, 3))
    hi = np.empty((nt, 3))
    swept_triangle_boxes(x_start, x_pred, tris, thickness, lo, hi)
    bucket, items = hash_boxes(lo, hi, cell, table_size, 32)
    bounds = equal_chunks(n, chunks)
    chunks = bounds.shape[0] - 1
    cap = max(64, n // chunks)
    stamps = np.full((chunks, nt + n), -1, dtype=np.int64)  # per chunk: triangles seen, then vertex ring marks
    inputs = (
        x_start,
        x_pred,
        inv_mass,
        tris,
        thickness,
        lo,
        hi,
        1.0 / cell,
        table_size,
        bucket,
        items,
        excl_offsets,
        excl,
    )
    buffers, counts = fill_in_chunks(
        _fill_pair_chunks,
        inputs,
        bounds,
        [np.empty((chunks, cap), dtype=np.int64), np.empty((chunks, cap), dtype=np.int64), np.empty((chunks, cap))],
        stamps,
    )
    return tuple(concatenate_chunks(buffers, counts))


@njit(**_JIT)
def solve_self_triangles(x, inv_mass, cv, ct, cs, tris, thickness, lam):
    """C = side n . (x_p - sum_k b_k x_k) - thickness >= 0 (pushing only).

    b are the barycentrics of the point of the triangle closest to the vertex now; the
    gradient is side n for the vertex and -b_k side n for the triangle's vertices, so the
    correction is shared over the four vertices by inverse mass (001 sec. 6.4).
    """
    for c in range(cv.shape[0]):
        i = cv[c]
        t = ct[c]
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
        if n0 == 0.0 and n1 == 0.0 and n2 == 0.0:
            continue
        s = cs[c]
        n0, n1, n2 = s * n0, s * n1, s * n2
        q0 = u * x[ia, 0] + v * x[ib, 0] + w * x[ic, 0]
        q1 = u * x[ia, 1] + v * x[ib, 1] + w * x[ic, 1]
        q2 = u * x[ia, 2] + v * x[ib, 2] + w * x[ic, 2]
        C = n0 * (x[i, 0] - q0) + n1 * (x[i, 1] - q1) + n2 * (x[i, 2] - q2) - thickness
        if C >= 0.0 and lam[c] == 0.0:
            continue
        wi, wa, wb, wc = inv_mass[i], inv_mass[ia], inv_mass[ib], inv_mass[ic]
        K = wi + u * u * wa + v * v * wb + w * w * wc
        if 0.05 * max(max(wi, wa), max(wb, wc)) > K:
            # only a triangle corner of small barycentric weight can move: it would be thrown by C / b
            continue
        dlam = xpbd_delta_lambda(C, 0.0, 0.0, 0.0, lam[c], inverse_denominator(K, 0.0, 0.0))
        dlam = clamp_unilateral(lam[c], dlam, 1.0)
        lam[c] += dlam
        push_vertex_triangle(x, i, ia, ib, ic, u, v, w, wi, wa, wb, wc, dlam, n0, n1, n2)
