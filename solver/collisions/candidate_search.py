"""Candidate search of the cloth contacts: the vertex-triangle and edge-edge pairs of a
:class:`~.cloth_contacts.ContactMesh` that can come within reach while every vertex follows its
straight path (the detection that :class:`~.candidate_lists.CandidateLists` runs when its lists
expire; the pairs' narrow phase and solve are in :mod:`.cloth_contacts`).

A hash grid of the primitives' boxes swept along the paths, each box entered once, at its
centre (:func:`.hash_grid.hash_box_centres`); one query per row (a vertex, an edge, or for a
partial re-detection a triangle), each thread writing its own rows, every pair met once. The
pair rules (:func:`_vt_pair_ok`, :func:`_ee_pair_ok`) are the same from either side, so a
query from the few primitives a partial re-detection renews finds the same pairs as one from
the many it keeps.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT, _JIT_PARALLEL
from .cloth_contacts import ContactMesh, _closest_offset, _pair_allowed
from .geometry import closest_on_triangle
from .hash_grid import cell_hash, centre_query_cells, hash_box_centres


@njit(**_JIT)
def primitive_boxes(x, prims, lo, hi):
    """Axis-aligned boxes of triangles (P, 3) or edges (P, 2) at x."""
    k = prims.shape[1]
    for p in range(prims.shape[0]):
        for d in range(3):
            a = x[prims[p, 0], d]
            b = a
            for c in range(1, k):
                v = x[prims[p, c], d]
                a = min(a, v)
                b = max(b, v)
            lo[p, d] = a
            hi[p, d] = b


@njit(**_JIT)
def swept_boxes(x, path, prims, lo, hi):
    """Axis-aligned boxes of triangles (P, 3) or edges (P, 2) over their vertices' straight
    paths from ``x`` to ``x + path``."""
    k = prims.shape[1]
    for p in range(prims.shape[0]):
        for d in range(3):
            a = 1e300
            b = -1e300
            for c in range(k):
                v = x[prims[p, c], d]
                w = v + path[prims[p, c], d]
                a = min(a, min(v, w))
                b = max(b, max(v, w))
            lo[p, d] = a
            hi[p, d] = b


@njit(inline="always", **_JIT)
def _path_gap(path, i, j):
    """|path_i - path_j|: how much closer vertices i and j can come along their paths."""
    return sqrt((path[i, 0] - path[j, 0]) ** 2 + (path[i, 1] - path[j, 1]) ** 2 + (path[i, 2] - path[j, 2]) ** 2)


@njit(inline="always", **_JIT)
def _beyond_sphere(x, i, ia, ib, ic, reach):
    """Vertex i is farther than ``reach`` from the sphere around triangle (ia, ib, ic) (centre
    at the centroid, radius to its farthest corner): a cheap test before the exact distance."""
    c0 = (x[ia, 0] + x[ib, 0] + x[ic, 0]) / 3.0
    c1 = (x[ia, 1] + x[ib, 1] + x[ic, 1]) / 3.0
    c2 = (x[ia, 2] + x[ib, 2] + x[ic, 2]) / 3.0
    r2 = 0.0
    for k in (ia, ib, ic):
        r2 = max(r2, (x[k, 0] - c0) ** 2 + (x[k, 1] - c1) ** 2 + (x[k, 2] - c2) ** 2)
    limit = sqrt(r2) + reach
    return (x[i, 0] - c0) ** 2 + (x[i, 1] - c1) ** 2 + (x[i, 2] - c2) ** 2 > limit * limit


@njit(inline="always", **_JIT)
def _listed(excluded, row, value):
    """``value`` is in row ``row`` of the sorted lists ``excluded`` = (row starts, items)."""
    start, items = excluded
    for s in range(start[row], start[row + 1]):
        if items[s] >= value:
            return items[s] == value
    return False


@njit(inline="always", **_JIT)
def _vt_pair_ok(x, inv_mass, mesh_tris, thickness, cloth, self_ok, cross_ok, excluded, margin, path, i, t):
    """The pair rule of :func:`vertex_triangle_candidates` for vertex i and triangle t whose
    boxes along the paths overlap within reach: not a topological neighbour, allowed by the
    cloths' switches, not all pinned, not closer than 2 d in the rest shape (``excluded``: the
    sorted lists of :func:`rest_exclusions`, one lookup instead of two exact distances for each
    of a query's in-plane neighbours), within reach less the paths' closing."""
    ia, ib, ic = mesh_tris[t, 0], mesh_tris[t, 1], mesh_tris[t, 2]
    if ia == i or ib == i or ic == i or not _pair_allowed(i, ia, cloth, self_ok, cross_ok):
        return False
    if inv_mass[i] == 0.0 and inv_mass[ia] == 0.0 and inv_mass[ib] == 0.0 and inv_mass[ic] == 0.0:
        return False
    if cloth[i] == cloth[ia] and _listed(excluded, i, t):
        return False  # closer than the gap in the rest shape: the rest shape wins
    d_pair = 0.5 * (thickness[i] + thickness[ia])
    closing = max(_path_gap(path, i, ia), max(_path_gap(path, i, ib), _path_gap(path, i, ic)))
    if _beyond_sphere(x, i, ia, ib, ic, d_pair + margin + closing):
        return False
    return _point_triangle_distance(x, i, ia, ib, ic) - closing <= d_pair + margin


@njit(inline="always", **_JIT)
def _point_triangle_distance(x, i, ia, ib, ic):
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
    return sqrt(
        (x[i, 0] - u * x[ia, 0] - v * x[ib, 0] - w * x[ic, 0]) ** 2
        + (x[i, 1] - u * x[ia, 1] - v * x[ib, 1] - w * x[ic, 1]) ** 2
        + (x[i, 2] - u * x[ia, 2] - v * x[ib, 2] - w * x[ic, 2]) ** 2
    )


@njit(inline="always", **_JIT)
def _sane_box(ql, qh):
    """A query box with no non-finite or absurd (> 1e6 m) coordinate."""
    for d in range(3):
        if not (abs(ql[d]) < 1e6 and abs(qh[d]) < 1e6):
            return False
    return True


@njit(**_JIT_PARALLEL)
def _vt_fill(
    x,
    inv_mass,
    mesh_tris,
    thickness,
    t_max,
    cloth,
    self_ok,
    cross_ok,
    excluded,
    margin,
    path,
    lo,
    hi,
    inv,
    table_size,
    bucket_start,
    items,
    item_cell,
    extent,
    rows,
    out_t,
    out_n,
):
    """Per vertex row: the triangles of the grid (boxes lo/hi) that pass :func:`_vt_pair_ok`."""
    cap = out_t.shape[1]
    for r in prange(rows.shape[0]):
        i = rows[r]
        ql = np.empty(3)
        qh = np.empty(3)
        reach = 0.5 * (thickness[i] + t_max) + margin  # >= the pair's contact distance + margin
        for d in range(3):
            ql[d] = min(x[i, d], x[i, d] + path[i, d]) - reach
            qh[d] = max(x[i, d], x[i, d] + path[i, d]) + reach
        count = 0
        if not _sane_box(ql, qh):
            out_n[r] = 0
            continue
        i0, i1, j0, j1, k0, k1 = centre_query_cells(ql, qh, extent, inv, 64)
        for ci in range(i0, i1 + 1):
            for cj in range(j0, j1 + 1):
                for ck in range(k0, k1 + 1):
                    h = cell_hash(ci, cj, ck, table_size)
                    for s in range(bucket_start[h], bucket_start[h + 1]):
                        if item_cell[s, 0] != ci or item_cell[s, 1] != cj or item_cell[s, 2] != ck:
                            continue  # another cell's entry in the same bucket
                        t = items[s]
                        if (
                            lo[t, 0] > qh[0]
                            or hi[t, 0] < ql[0]
                            or lo[t, 1] > qh[1]
                            or hi[t, 1] < ql[1]
                            or lo[t, 2] > qh[2]
                            or hi[t, 2] < ql[2]
                        ):
                            continue
                        if not _vt_pair_ok(
                            x, inv_mass, mesh_tris, thickness, cloth, self_ok, cross_ok, excluded, margin, path, i, t
                        ):
                            continue
                        if count < cap:
                            out_t[r, count] = t
                        count += 1
        out_n[r] = count


@njit(**_JIT_PARALLEL)
def _tv_fill(
    x,
    inv_mass,
    mesh_tris,
    thickness,
    t_max,
    cloth,
    self_ok,
    cross_ok,
    excluded,
    margin,
    path,
    lo,
    hi,
    inv,
    table_size,
    bucket_start,
    items,
    item_cell,
    extent,
    tri_lo,
    tri_hi,
    rows,
    out_v,
    out_n,
):
    """Per triangle row: the vertices of the grid (swept point boxes lo/hi) that pass the same
    box test as :func:`_vt_fill` (the vertex's box grown by its reach against the triangle's)
    and :func:`_vt_pair_ok`: the pairs of a few triangles with many vertices."""
    cap = out_v.shape[1]
    for r in prange(rows.shape[0]):
        t = rows[r]
        ql = np.empty(3)
        qh = np.empty(3)
        for d in range(3):
            ql[d] = tri_lo[t, d] - (t_max + margin)  # the largest reach of any vertex
            qh[d] = tri_hi[t, d] + (t_max + margin)
        count = 0
        if not _sane_box(ql, qh):
            out_n[r] = 0
            continue
        i0, i1, j0, j1, k0, k1 = centre_query_cells(ql, qh, extent, inv, 64)
        for ci in range(i0, i1 + 1):
            for cj in range(j0, j1 + 1):
                for ck in range(k0, k1 + 1):
                    h = cell_hash(ci, cj, ck, table_size)
                    for s in range(bucket_start[h], bucket_start[h + 1]):
                        if item_cell[s, 0] != ci or item_cell[s, 1] != cj or item_cell[s, 2] != ck:
                            continue
                        i = items[s]
                        reach = 0.5 * (thickness[i] + t_max) + margin
                        if (
                            tri_lo[t, 0] > hi[i, 0] + reach
                            or tri_hi[t, 0] < lo[i, 0] - reach
                            or tri_lo[t, 1] > hi[i, 1] + reach
                            or tri_hi[t, 1] < lo[i, 1] - reach
                            or tri_lo[t, 2] > hi[i, 2] + reach
                            or tri_hi[t, 2] < lo[i, 2] - reach
                        ):
                            continue
                        if not _vt_pair_ok(
                            x, inv_mass, mesh_tris, thickness, cloth, self_ok, cross_ok, excluded, margin, path, i, t
                        ):
                            continue
                        if count < cap:
                            out_v[r, count] = i
                        count += 1
        out_n[r] = count


@njit(**_JIT_PARALLEL)
def _ee_fill(
    x,
    inv_mass,
    edges,
    thickness,
    t_max,
    cloth,
    self_ok,
    cross_ok,
    excluded,
    margin,
    path,
    lo,
    hi,
    inv,
    table_size,
    bucket_start,
    items,
    item_cell,
    extent,
    row_mask,
    rows,
    out_e,
    out_n,
):
    """Per edge row e: the edges f of the grid, f != e, with f > e when f is a row too (each
    pair once), whose boxes overlap within reach and that pass the pair rule of
    :func:`edge_edge_candidates`."""
    cap = out_e.shape[1]
    for r in prange(rows.shape[0]):
        e = rows[r]
        ql = np.empty(3)
        qh = np.empty(3)
        for d in range(3):
            ql[d] = lo[e, d] - (t_max + margin)  # the largest reach of any pair
            qh[d] = hi[e, d] + (t_max + margin)
        count = 0
        if not _sane_box(ql, qh):
            out_n[r] = 0
            continue
        i0, i1, j0, j1, k0, k1 = centre_query_cells(ql, qh, extent, inv, 64)
        for ci in range(i0, i1 + 1):
            for cj in range(j0, j1 + 1):
                for ck in range(k0, k1 + 1):
                    h = cell_hash(ci, cj, ck, table_size)
                    for s in range(bucket_start[h], bucket_start[h + 1]):
                        f = items[s]
                        if f == e or (row_mask[f] and f < e):
                            continue
                        if item_cell[s, 0] != ci or item_cell[s, 1] != cj or item_cell[s, 2] != ck:
                            continue
                        # the rule as the lower edge of the pair sees it (same answer from either row)
                        p, q = min(e, f), max(e, f)
                        reach = 0.5 * (thickness[edges[p, 0]] + t_max) + margin
                        if (
                            lo[q, 0] > hi[p, 0] + reach
                            or hi[q, 0] < lo[p, 0] - reach
                            or lo[q, 1] > hi[p, 1] + reach
                            or hi[q, 1] < lo[p, 1] - reach
                            or lo[q, 2] > hi[p, 2] + reach
                            or hi[q, 2] < lo[p, 2] - reach
                        ):
                            continue
                        if not _ee_pair_ok(
                            x, inv_mass, edges, thickness, cloth, self_ok, cross_ok, excluded, margin, path, p, q
                        ):
                            continue
                        if count < cap:
                            out_e[r, count] = f
                        count += 1
        out_n[r] = count


@njit(inline="always", **_JIT)
def _ee_pair_ok(x, inv_mass, edges, thickness, cloth, self_ok, cross_ok, excluded, margin, path, p, q):
    """The pair rule of :func:`edge_edge_candidates` for edges p < q whose boxes overlap within
    reach: no shared vertex, allowed, not all pinned, not closer than 2 d in the rest shape
    (``excluded``, as for :func:`_vt_pair_ok`), within reach less the paths' closing."""
    a, b = edges[p, 0], edges[p, 1]
    c, dd = edges[q, 0], edges[q, 1]
    if c == a or c == b or dd == a or dd == b or not _pair_allowed(a, c, cloth, self_ok, cross_ok):
        return False
    if inv_mass[a] == 0.0 and inv_mass[b] == 0.0 and inv_mass[c] == 0.0 and inv_mass[dd] == 0.0:
        return False
    if cloth[a] == cloth[c] and _listed(excluded, p, q):
        return False
    d_pair = 0.5 * (thickness[a] + thickness[c])
    _, _, g0, g1, g2 = _closest_offset(x, a, b, c, dd)  # (the distance alone: no common normal)
    closing = _path_gap(path, a, b) + max(_path_gap(path, a, c), _path_gap(path, a, dd))
    return sqrt(g0 * g0 + g1 * g1 + g2 * g2) - closing <= d_pair + margin


#: table size of a grid: a bucket per this many boxes. A cell two edges wide holds ~4 vertices,
#: ~8 triangles or ~12 edges of a sheet, so this still leaves more buckets than filled cells; a
#: table of two buckets per box (used before) spilled out of the cache: hashing 30k edges took
#: 2.8-3.5 ms with 32-64k buckets, 1.05 ms with 8k (the draped 48 x 48 garment, whose detections
#: are mostly whole: 138 ms a frame with two buckets a box, 134-140 with this, 152-159 with 1/16)
BOXES_PER_BUCKET = 4


def _next_pow2(value: int) -> int:
    return 1 << max(4, int(value - 1).bit_length())


def _hash(lo, hi, cell, subset=None):
    """Hash grid of the box centres (of the primitives ``subset`` only, if given): (table size,
    bucket starts, items = primitive numbers, each entry's cell, the largest half-extent)."""
    boxes = np.arange(lo.shape[0], dtype=np.int64) if subset is None else np.ascontiguousarray(subset, dtype=np.int64)
    table = _next_pow2(max(1, boxes.shape[0] // BOXES_PER_BUCKET))
    bucket, items, item_cell, extent = hash_box_centres(lo, hi, boxes, cell, table)
    return table, bucket, items, item_cell, extent


def _gather(fill, args, rows, cap):
    """Run a per-row fill kernel over ``rows`` (vertex or edge numbers) with ``cap`` slots a row,
    then again over the rows that found more, with room for the most; returns (row, found) of
    all pairs, in the order of ``rows`` (independent of the thread count)."""
    out = np.empty((rows.shape[0], cap), dtype=np.int64)
    counts = np.empty(rows.shape[0], dtype=np.int64)
    fill(*args, rows, out, counts)
    worst = int(counts.max()) if rows.shape[0] else 0
    if worst > cap:
        over = np.flatnonzero(counts > cap)
        wide = np.empty((rows.shape[0], worst), dtype=np.int64)
        wide[:, :cap] = out
        again = np.empty((over.shape[0], worst), dtype=np.int64)
        fill(*args, np.ascontiguousarray(rows[over]), again, counts[over])
        wide[over] = again
        out, cap = wide, worst
    mask = np.arange(cap)[None, :] < counts[:, None]
    return np.repeat(rows, counts), out[mask]


def _no_path(x, path):
    return np.zeros_like(x) if path is None else np.ascontiguousarray(path, dtype=np.float64)


def _grid_args(x, inv_mass, prims, excluded, mesh: ContactMesh, margin, cell, path, lo, hi, subset=None):
    """The shared arguments of the fill kernels: the mesh's pair data (``excluded``: the
    rest-shape exclusions of these pairs, ``mesh.vt_excluded`` or ``mesh.ee_excluded``) and a hash
    grid of the boxes lo/hi (those of ``subset`` only, if given)."""
    if excluded is None:
        raise ValueError("ContactMesh without rest exclusions: build it with rest_exclusions()")
    table, bucket, items, item_cell, extent = _hash(lo, hi, cell, subset)
    return (
        x,
        inv_mass,
        prims,
        mesh.thickness,
        float(mesh.thickness.max()),
        mesh.cloth,
        mesh.self_ok,
        mesh.cross_ok,
        excluded,
        float(margin),
        path,
        lo,
        hi,
        1.0 / cell,
        table,
        bucket,
        items,
        item_cell,
        extent,
    )


def _swept(x, path, prims):
    lo = np.empty((prims.shape[0], 3))
    hi = np.empty((prims.shape[0], 3))
    swept_boxes(x, path, prims, lo, hi)
    return lo, hi


def _all(rows, count):
    return np.arange(count, dtype=np.int64) if rows is None else np.ascontiguousarray(rows, dtype=np.int64)


def swept_triangle_boxes(x, path, mesh: ContactMesh):
    """The triangles' boxes along the paths, for ``tri_boxes`` of the two vertex-triangle queries
    of one state (a partial re-detection runs both)."""
    return _swept(x, _no_path(x, path), mesh.tris)


def vertex_triangle_candidates(
    x, inv_mass, mesh: ContactMesh, margin, cell, path=None, rows=None, triangles=None, tri_boxes=None
):
    """(vertex, triangle) pairs that come closer than ``d + margin`` (d the pair's contact
    distance) while every vertex moves along its straight ``path`` from x (None: stays at x),
    not topological neighbours, not closer than ``2 d`` in the rest shape, allowed by the cloths'
    switches, not all four vertices pinned; in vertex order. Conservative: a pair is kept when
    its distance at x minus the largest relative path of its four vertices is below the reach
    (the point-triangle distance changes by at most that much). ``rows``: only these vertices'
    pairs (None: all); ``triangles``: only pairs with these triangles (None: all); ``tri_boxes``:
    :func:`swept_triangle_boxes` of this state, if already made."""
    path = _no_path(x, path)
    lo, hi = _swept(x, path, mesh.tris) if tri_boxes is None else tri_boxes
    args = _grid_args(x, inv_mass, mesh.tris, mesh.vt_excluded, mesh, margin, cell, path, lo, hi, triangles)
    return _gather(_vt_fill, args, _all(rows, x.shape[0]), 24)


def triangle_vertex_candidates(x, inv_mass, mesh: ContactMesh, margin, cell, path, triangles, vertices, tri_boxes=None):
    """The pairs of :func:`vertex_triangle_candidates` between ``vertices`` and ``triangles``,
    as (vertex, triangle), found from the triangles' side: a hash grid of the vertices' swept
    points, one query per triangle. For a few triangles against many vertices (a partial
    re-detection), where a query per vertex would visit the whole grid for a handful of pairs.
    ``tri_boxes``: as for :func:`vertex_triangle_candidates`."""
    path = _no_path(x, path)
    points = np.arange(x.shape[0], dtype=np.int64)[:, None]
    lo, hi = _swept(x, path, points)
    tri_lo, tri_hi = _swept(x, path, mesh.tris) if tri_boxes is None else tri_boxes
    args = _grid_args(x, inv_mass, mesh.tris, mesh.vt_excluded, mesh, margin, cell, path, lo, hi, vertices)
    tris, verts = _gather(_tv_fill, args + (tri_lo, tri_hi), _all(triangles, mesh.tris.shape[0]), 24)
    return verts, tris


def edge_edge_candidates(x, inv_mass, mesh: ContactMesh, margin, cell, path=None, rows=None):
    """(edge, edge > it) pairs that come closer than ``d + margin`` along the vertices' paths
    (as :func:`vertex_triangle_candidates`), sharing no vertex, not closer than ``2 d`` in the
    rest shape, allowed, not all pinned. ``rows``: only the pairs with at least one of these
    edges (None: all), each once."""
    path = _no_path(x, path)
    lo, hi = _swept(x, path, mesh.edges)
    args = _grid_args(x, inv_mass, mesh.edges, mesh.ee_excluded, mesh, margin, cell, path, lo, hi)
    n = mesh.edges.shape[0]
    row_mask = np.zeros(n, dtype=np.bool_)
    row_mask[_all(rows, n)] = True
    a, b = _gather(_ee_fill, args + (row_mask,), _all(rows, n), 24)
    return np.minimum(a, b), np.maximum(a, b)


@njit(**_JIT)
def _vt_rest_close(rest, tris, thickness, cv, ct):
    """Per pair (cv[k], ct[k]): closer than 2 d in the rest shape (the rule's former last test)."""
    out = np.empty(cv.shape[0], dtype=np.bool_)
    for k in range(cv.shape[0]):
        i, t = cv[k], ct[k]
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        out[k] = _point_triangle_distance(rest, i, ia, ib, ic) < thickness[i] + thickness[ia]
    return out


@njit(**_JIT)
def _ee_rest_close(rest, edges, thickness, ea, eb):
    """Per pair (ea[k] < eb[k]): closer than 2 d in the rest shape."""
    out = np.empty(ea.shape[0], dtype=np.bool_)
    for k in range(ea.shape[0]):
        a, b = edges[ea[k], 0], edges[ea[k], 1]
        c, dd = edges[eb[k], 0], edges[eb[k], 1]
        _, _, g0, g1, g2 = _closest_offset(rest, a, b, c, dd)
        out[k] = sqrt(g0 * g0 + g1 * g1 + g2 * g2) < thickness[a] + thickness[c]
    return out


def _sorted_rows(rows, items, count):
    """(row starts (count + 1,), items sorted within each row) of the pairs (rows[k], items[k])."""
    order = np.lexsort((items, rows))
    start = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=count), out=start[1:])
    return start, np.ascontiguousarray(items[order], dtype=np.int64)


def rest_exclusions(mesh: ContactMesh) -> ContactMesh:
    """``mesh`` with its rest-shape exclusions: the pairs of one cloth closer than 2 d in the rest
    shape (d the pair's contact distance), which never collide (the rest shape wins). Found once,
    by the candidate search itself at the rest positions with nothing excluded and a margin that
    reaches 2 d, then each pair's rest distance. A query then skips its in-plane neighbours in one
    lookup: they were most of the pairs whose boxes overlap, each rejected after two exact
    distances (now and at rest)."""
    n, m = mesh.rest.shape[0], mesh.edges.shape[0]
    t_max = float(mesh.thickness.max()) if n else 0.0
    probe = mesh._replace(
        self_ok=np.ones_like(mesh.self_ok),
        cross_ok=np.zeros_like(mesh.cross_ok),
        vt_excluded=(np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)),
        ee_excluded=(np.zeros(m + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)),
    )
    rest = np.ascontiguousarray(mesh.rest, dtype=np.float64)
    free = np.ones(n)
    lengths = np.linalg.norm(rest[mesh.edges[:, 1]] - rest[mesh.edges[:, 0]], axis=1) if m else np.zeros(1)
    cell = max(2.0 * float(lengths.mean()), 4.0 * t_max, 1e-6)
    cv, ct = vertex_triangle_candidates(rest, free, probe, t_max, cell)  # within d + t_max >= 2 d
    close = _vt_rest_close(rest, mesh.tris, mesh.thickness, cv, ct)
    ea, eb = edge_edge_candidates(rest, free, probe, t_max, cell)
    close_e = _ee_rest_close(rest, mesh.edges, mesh.thickness, ea, eb)
    ea, eb = ea[close_e], eb[close_e]
    return mesh._replace(
        vt_excluded=_sorted_rows(cv[close], ct[close], n),
        ee_excluded=_sorted_rows(np.concatenate([ea, eb]), np.concatenate([eb, ea]), m),
    )
