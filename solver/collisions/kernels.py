"""Numba kernels of the collision layer (001 ch. 6, appendix A M6/M8; 002 sec. 3).

Flat structure-of-arrays throughout. Analytic proxies are rows of ``kind`` / ``dims`` /
transform arrays; quaternions are (w, x, y, z) and rotate local to world. A contact is one
row of ``c_vertex`` / ``c_normal`` / ``c_point`` / ``c_radius`` / ``c_disp`` (the collider
surface's displacement at the contact point over the substep) / ``c_mu_s`` / ``c_mu_k``;
the solve treats it as the inequality ``C = n . (x - q) - r >= 0`` whose accumulated
multiplier may only push (:func:`clamp_unilateral` with sign +1), followed by the position
level Coulomb friction of 001 sec. 6.3 on the displacement relative to the collider surface.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from ..kernels import clamp_unilateral, xpbd_delta_lambda

_JIT = dict(cache=True, fastmath=False, nogil=True, error_model="numpy")
#: Per-vertex loops of the mesh broad and narrow phases run in ``prange``: every vertex writes only
#: its own slots, the compaction into contact rows / CSR lists is a serial prefix sum afterwards,
#: so the result does not depend on the thread count (no atomics, no shared scratch).
_JIT_PARALLEL = dict(_JIT, parallel=True)


@njit(inline="always", **_JIT)
def emit_contact(row, i, n0, n1, n2, q0, q1, q2, radius, d0, d1, d2, mu_s, mu_k, c_vertex, c_normal, c_point,
                 c_radius, c_disp, c_mu_s, c_mu_k):
    """Write one contact row: vertex, unit normal, surface point, radius, the surface point's
    displacement over the substep (for friction relative to the moving collider) and the
    friction coefficients. Returns the next row."""
    c_vertex[row] = i
    c_normal[row, 0] = n0
    c_normal[row, 1] = n1
    c_normal[row, 2] = n2
    c_point[row, 0] = q0
    c_point[row, 1] = q1
    c_point[row, 2] = q2
    c_radius[row] = radius
    c_disp[row, 0] = d0
    c_disp[row, 1] = d1
    c_disp[row, 2] = d2
    c_mu_s[row] = mu_s
    c_mu_k[row] = mu_k
    return row + 1

PLANE = 0
SPHERE = 1
CAPSULE = 2
BOX = 3
SDF = 4  # signed distance grid (SDFGrid): own kernels, see sdf_narrow_phase


# ----------------------------------------------------------------------------------------------
# Rigid transforms: lerp position, slerp rotation.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def quat_rotate(qw, qx, qy, qz, vx, vy, vz):
    """Rotate v by the unit quaternion q (v' = q v q*)."""
    tx = 2.0 * (qy * vz - qz * vy)
    ty = 2.0 * (qz * vx - qx * vz)
    tz = 2.0 * (qx * vy - qy * vx)
    return (vx + qw * tx + (qy * tz - qz * ty),
            vy + qw * ty + (qz * tx - qx * tz),
            vz + qw * tz + (qx * ty - qy * tx))


@njit(inline="always", **_JIT)
def slerp(a, b, t):
    """Shortest-arc spherical interpolation of unit quaternions a, b (rows of length 4)."""
    dot = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
    sign = 1.0
    if dot < 0.0:
        sign = -1.0
        dot = -dot
    if dot > 0.9995:
        s0 = 1.0 - t
        s1 = t * sign
    else:
        theta0 = math.acos(min(dot, 1.0))
        sin0 = math.sin(theta0)
        s0 = math.sin((1.0 - t) * theta0) / sin0
        s1 = sign * math.sin(t * theta0) / sin0
    w = s0 * a[0] + s1 * b[0]
    x = s0 * a[1] + s1 * b[1]
    y = s0 * a[2] + s1 * b[2]
    z = s0 * a[3] + s1 * b[3]
    norm = math.sqrt(w * w + x * x + y * y + z * z)
    return w / norm, x / norm, y / norm, z / norm


@njit(inline="always", **_JIT)
def transform_at(k, t, pos0, rot0, pos1, rot1):
    """(px, py, pz, qw, qx, qy, qz) of proxy k at frame fraction t."""
    px = pos0[k, 0] + t * (pos1[k, 0] - pos0[k, 0])
    py = pos0[k, 1] + t * (pos1[k, 1] - pos0[k, 1])
    pz = pos0[k, 2] + t * (pos1[k, 2] - pos0[k, 2])
    qw, qx, qy, qz = slerp(rot0[k], rot1[k], t)
    return px, py, pz, qw, qx, qy, qz


# ----------------------------------------------------------------------------------------------
# Analytic shapes in local coordinates: signed distance, outward normal, closest surface point.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def _round_shape(dx, dy, dz, cx, cy, cz, radius):
    """Sphere of ``radius`` around the core point c: (phi, n, q) for the point c + d."""
    d = math.sqrt(dx * dx + dy * dy + dz * dz)
    if d < 1e-12:
        nx, ny, nz = 0.0, 0.0, 1.0
    else:
        nx, ny, nz = dx / d, dy / d, dz / d
    return d - radius, nx, ny, nz, cx + radius * nx, cy + radius * ny, cz + radius * nz


@njit(inline="always", **_JIT)
def local_closest(kind, a, b, c, px, py, pz):
    """Shape ``kind`` with dimensions (a, b, c) at the local point p.

    plane: z = 0, normal +z. sphere: radius a. capsule: radius a, half length b along z.
    box: half extents (a, b, c). Returns (phi, nx, ny, nz, qx, qy, qz).
    """
    if kind == PLANE:
        return pz, 0.0, 0.0, 1.0, px, py, 0.0
    if kind == SPHERE:
        return _round_shape(px, py, pz, 0.0, 0.0, 0.0, a)
    if kind == CAPSULE:
        cz = min(max(pz, -b), b)
        return _round_shape(px, py, pz - cz, 0.0, 0.0, cz, a)
    # box
    qx = min(max(px, -a), a)
    qy = min(max(py, -b), b)
    qz = min(max(pz, -c), c)
    dx, dy, dz = px - qx, py - qy, pz - qz
    d2 = dx * dx + dy * dy + dz * dz
    if d2 > 0.0:
        d = math.sqrt(d2)
        return d, dx / d, dy / d, dz / d, qx, qy, qz
    # inside: the nearest face
    fx, fy, fz = a - abs(px), b - abs(py), c - abs(pz)
    if fx <= fy and fx <= fz:
        s = 1.0 if px >= 0.0 else -1.0
        return -fx, s, 0.0, 0.0, s * a, py, pz
    if fy <= fz:
        s = 1.0 if py >= 0.0 else -1.0
        return -fy, 0.0, s, 0.0, px, s * b, pz
    s = 1.0 if pz >= 0.0 else -1.0
    return -fz, 0.0, 0.0, s, px, py, s * c


@njit(inline="always", **_JIT)
def _world_to_local(px, py, pz, qw, qx, qy, qz, x0, x1, x2):
    return quat_rotate(qw, -qx, -qy, -qz, x0 - px, x1 - py, x2 - pz)


@njit(inline="always", **_JIT)
def _local_to_world(px, py, pz, qw, qx, qy, qz, l0, l1, l2):
    r0, r1, r2 = quat_rotate(qw, qx, qy, qz, l0, l1, l2)
    return px + r0, py + r1, pz + r2


# ----------------------------------------------------------------------------------------------
# Analytic broad phase (per frame) and narrow phase (per substep).
# ----------------------------------------------------------------------------------------------
@njit(**_JIT)
def analytic_broad_phase(x, v, inv_mass, frame_dt, extra_margin, cloth_thickness, kind, dims, pos0, rot0, pos1,
                         rot1, skin, bound_radius, out_vertex, out_proxy):
    """Vertex-proxy pairs that may touch this frame; returns their count.

    A vertex may travel ``|v| frame_dt + extra_margin`` (a sphere around it); a finite proxy
    sweeps its bounding sphere along the segment of its centre, an infinite plane is tested by
    its signed distance at the frame start, middle and end.
    """
    count = 0
    n = x.shape[0]
    for i in range(n):
        if inv_mass[i] == 0.0:
            continue
        speed = math.sqrt(v[i, 0] ** 2 + v[i, 1] ** 2 + v[i, 2] ** 2)
        travel = speed * frame_dt + extra_margin
        for k in range(kind.shape[0]):
            reach = travel + cloth_thickness + skin[k]
            hit = False
            if kind[k] == PLANE:
                for step in range(3):
                    px, py, pz, qw, qx, qy, qz = transform_at(k, 0.5 * step, pos0, rot0, pos1, rot1)
                    lz = _world_to_local(px, py, pz, qw, qx, qy, qz, x[i, 0], x[i, 1], x[i, 2])[2]
                    if lz < reach:
                        hit = True
            else:
                ax, ay, az = pos0[k, 0], pos0[k, 1], pos0[k, 2]
                bx, by, bz = pos1[k, 0] - ax, pos1[k, 1] - ay, pos1[k, 2] - az
                dx, dy, dz = x[i, 0] - ax, x[i, 1] - ay, x[i, 2] - az
                len2 = bx * bx + by * by + bz * bz
                s = 0.0
                if len2 > 0.0:
                    s = min(max((dx * bx + dy * by + dz * bz) / len2, 0.0), 1.0)
                ex, ey, ez = dx - s * bx, dy - s * by, dz - s * bz
                r = bound_radius[k] + reach
                hit = ex * ex + ey * ey + ez * ez <= r * r
            if hit:
                out_vertex[count] = i
                out_proxy[count] = k
                count += 1
    return count


@njit(**_JIT)
def analytic_narrow_phase(x_start, x_pred, inv_mass, cand_vertex, cand_proxy, n_cand, t_start, t_end, kind, dims,
                          pos0, rot0, pos1, rot1, skin, mu_s, mu_k, cloth_thickness, c_vertex, c_normal, c_point,
                          c_radius, c_disp, c_mu_s, c_mu_k, offset):
    """Contacts of this substep from the broad-phase candidates, written from row ``offset``.

    The collider is placed at ``t_end`` (the substep end, where the prediction is). A vertex
    predicted inside the solid that started the substep outside keeps the feature it was
    nearest to at the start (no tunnelling out through the far side of a thin collider).
    Returns the new row count.
    """
    count = offset
    for m in range(n_cand):
        i = cand_vertex[m]
        k = cand_proxy[m]
        if inv_mass[i] == 0.0 or kind[k] == SDF:  # signed distance grids: sdf_narrow_phase
            continue
        pe0, pe1, pe2, qe0, qe1, qe2, qe3 = transform_at(k, t_end, pos0, rot0, pos1, rot1)
        ps0, ps1, ps2, qs0, qs1, qs2, qs3 = transform_at(k, t_start, pos0, rot0, pos1, rot1)
        l0, l1, l2 = _world_to_local(pe0, pe1, pe2, qe0, qe1, qe2, qe3, x_pred[i, 0], x_pred[i, 1], x_pred[i, 2])
        phi, nl0, nl1, nl2, ql0, ql1, ql2 = local_closest(kind[k], dims[k, 0], dims[k, 1], dims[k, 2], l0, l1, l2)
        if phi < 0.0:
            s0, s1, s2 = _world_to_local(ps0, ps1, ps2, qs0, qs1, qs2, qs3, x_start[i, 0], x_start[i, 1],
                                         x_start[i, 2])
            phi_s, mn0, mn1, mn2, mq0, mq1, mq2 = local_closest(kind[k], dims[k, 0], dims[k, 1], dims[k, 2], s0, s1,
                                                                s2)
            if phi_s >= 0.0:
                nl0, nl1, nl2, ql0, ql1, ql2 = mn0, mn1, mn2, mq0, mq1, mq2
        n0, n1, n2 = quat_rotate(qe0, qe1, qe2, qe3, nl0, nl1, nl2)
        q0, q1, q2 = _local_to_world(pe0, pe1, pe2, qe0, qe1, qe2, qe3, ql0, ql1, ql2)
        r = cloth_thickness + skin[k]
        C = n0 * (x_pred[i, 0] - q0) + n1 * (x_pred[i, 1] - q1) + n2 * (x_pred[i, 2] - q2) - r
        travel = math.sqrt((x_pred[i, 0] - x_start[i, 0]) ** 2 + (x_pred[i, 1] - x_start[i, 1]) ** 2
                           + (x_pred[i, 2] - x_start[i, 2]) ** 2)
        if C > travel + r:
            continue
        b0, b1, b2 = _local_to_world(ps0, ps1, ps2, qs0, qs1, qs2, qs3, ql0, ql1, ql2)
        count = emit_contact(count, i, n0, n1, n2, q0, q1, q2, r, q0 - b0, q1 - b1, q2 - b2, mu_s[k], mu_k[k],
                             c_vertex, c_normal, c_point, c_radius, c_disp, c_mu_s, c_mu_k)
    return count


@njit(**_JIT)
def analytic_signed_distance(points, t, kind, dims, pos0, rot0, pos1, rot1, out):
    """Signed distance of every point to every proxy at frame fraction t: out (P, K)."""
    for i in range(points.shape[0]):
        for k in range(kind.shape[0]):
            if kind[k] == SDF:
                out[i, k] = np.nan  # filled by the caller from the grid
                continue
            px, py, pz, qw, qx, qy, qz = transform_at(k, t, pos0, rot0, pos1, rot1)
            l0, l1, l2 = _world_to_local(px, py, pz, qw, qx, qy, qz, points[i, 0], points[i, 1], points[i, 2])
            out[i, k] = local_closest(kind[k], dims[k, 0], dims[k, 1], dims[k, 2], l0, l1, l2)[0]


# ----------------------------------------------------------------------------------------------
# Contact solve: unilateral normal constraint, then position-level Coulomb friction.
# ----------------------------------------------------------------------------------------------
@njit(**_JIT)
def solve_contacts(x, x_substep_start, inv_mass, c_vertex, c_normal, c_point, c_radius, c_disp, c_mu_s, c_mu_k,
                   count, lam, friction_acc):
    """One Gauss-Seidel pass over the contacts (hard, alpha = 0).

    Normal: ``C = n . (x - q) - r``; ``dlambda`` from :func:`xpbd_delta_lambda`, clamped so
    the accumulated multiplier stays >= 0 (a contact never pulls, 002 sec. 3).
    Friction (001 sec. 6.3): ``d = w lambda`` is this substep's normal correction; the
    tangential displacement relative to the collider surface is cancelled when shorter than
    ``mu_s d``, else shortened by ``mu_k d``. ``friction_acc`` keeps the friction correction
    applied so far in this substep, so repeated iterations do not apply kinetic friction twice.
    """
    for c in range(count):
        i = c_vertex[c]
        w = inv_mass[i]
        if w == 0.0:
            continue
        n0, n1, n2 = c_normal[c, 0], c_normal[c, 1], c_normal[c, 2]
        C = (n0 * (x[i, 0] - c_point[c, 0]) + n1 * (x[i, 1] - c_point[c, 1]) + n2 * (x[i, 2] - c_point[c, 2])
             - c_radius[c])
        if C < 0.0 or lam[c] > 0.0:
            dlam = xpbd_delta_lambda(C, w, 0.0, 0.0, 0.0, lam[c])
            dlam = clamp_unilateral(lam[c], dlam, 1.0)
            lam[c] += dlam
            x[i, 0] += w * dlam * n0
            x[i, 1] += w * dlam * n1
            x[i, 2] += w * dlam * n2
        fa0, fa1, fa2 = friction_acc[c, 0], friction_acc[c, 1], friction_acc[c, 2]
        d = w * lam[c]
        if d <= 0.0 and fa0 == 0.0 and fa1 == 0.0 and fa2 == 0.0:
            continue
        # tangential displacement relative to the surface, with the friction applied so far undone
        r0 = x[i, 0] - x_substep_start[i, 0] - c_disp[c, 0]
        r1 = x[i, 1] - x_substep_start[i, 1] - c_disp[c, 1]
        r2 = x[i, 2] - x_substep_start[i, 2] - c_disp[c, 2]
        rn = r0 * n0 + r1 * n1 + r2 * n2
        t0 = r0 - rn * n0 + fa0
        t1 = r1 - rn * n1 + fa1
        t2 = r2 - rn * n2 + fa2
        length = math.sqrt(t0 * t0 + t1 * t1 + t2 * t2)
        f0 = f1 = f2 = 0.0
        if d > 0.0 and length > 0.0:
            if length < c_mu_s[c] * d:
                s = 1.0
            else:
                s = min(c_mu_k[c] * d / length, 1.0)
            f0, f1, f2 = s * t0, s * t1, s * t2
        x[i, 0] -= f0 - fa0
        x[i, 1] -= f1 - fa1
        x[i, 2] -= f2 - fa2
        friction_acc[c, 0] = f0
        friction_acc[c, 1] = f1
        friction_acc[c, 2] = f2


# ----------------------------------------------------------------------------------------------
# Uniform hash grid over axis-aligned boxes (triangles of a collider mesh or of the cloth).
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def cell_hash(ix, iy, iz, table_size):
    """Bucket of cell (ix, iy, iz) in a power-of-two table (Teschner 2003 primes, then a
    multiply-xorshift mix: the raw xor clusters badly on a 2D sheet in a 3D grid)."""
    h = (ix * 73856093) ^ (iy * 19349663) ^ (iz * 83492791)
    h ^= h >> 17
    h *= 1540483477
    h ^= h >> 15
    return h & (table_size - 1)


@njit(inline="always", **_JIT)
def _finite_box(lo, hi, b):
    """False for a box with a non-finite or absurd (> 1e6 m) coordinate: it is never hashed."""
    for d in range(3):
        if not (abs(lo[b, d]) < 1e6 and abs(hi[b, d]) < 1e6):
            return False
    return True


@njit(inline="always", **_JIT)
def _box_cells(lo, hi, b, inv_cell, max_cells_per_box):
    """Inclusive grid-cell range (i0, i1, j0, j1, k0, k1) of box b, clamped to max_cells_per_box per axis."""
    i0 = int(math.floor(lo[b, 0] * inv_cell))
    j0 = int(math.floor(lo[b, 1] * inv_cell))
    k0 = int(math.floor(lo[b, 2] * inv_cell))
    i1 = max(i0, min(int(math.floor(hi[b, 0] * inv_cell)), i0 + max_cells_per_box))
    j1 = max(j0, min(int(math.floor(hi[b, 1] * inv_cell)), j0 + max_cells_per_box))
    k1 = max(k0, min(int(math.floor(hi[b, 2] * inv_cell)), k0 + max_cells_per_box))
    return i0, i1, j0, j1, k0, k1


@njit(**_JIT)
def hash_boxes(lo, hi, cell, table_size, max_cells_per_box):
    """Counting-sort hash grid of boxes [lo, hi]: (bucket_start (table_size+1,), items).

    A box is entered in every bucket of the cells it overlaps (at most ``max_cells_per_box``
    cells per axis product; a larger box is entered in its clamped range, which only happens
    for an exploding state that the solver rolls back anyway).
    """
    nbox = lo.shape[0]
    counts = np.zeros(table_size + 1, dtype=np.int64)
    inv = 1.0 / cell
    for b in range(nbox):
        if not _finite_box(lo, hi, b):
            continue
        i0, i1, j0, j1, k0, k1 = _box_cells(lo, hi, b, inv, max_cells_per_box)
        for i in range(i0, i1 + 1):
            for j in range(j0, j1 + 1):
                for k in range(k0, k1 + 1):
                    counts[cell_hash(i, j, k, table_size) + 1] += 1
    for t in range(table_size):
        counts[t + 1] += counts[t]
    items = np.empty(counts[table_size], dtype=np.int64)
    fill = counts[:table_size].copy()
    for b in range(nbox):
        if not _finite_box(lo, hi, b):
            continue
        i0, i1, j0, j1, k0, k1 = _box_cells(lo, hi, b, inv, max_cells_per_box)
        for i in range(i0, i1 + 1):
            for j in range(j0, j1 + 1):
                for k in range(k0, k1 + 1):
                    t = cell_hash(i, j, k, table_size)
                    items[fill[t]] = b
                    fill[t] += 1
    return counts, items


@njit(**_JIT)
def query_boxes(qlo, qhi, active, lo, hi, cell, table_size, bucket_start, items, max_cells_per_box):
    """For each active query box, the hashed boxes that overlap it: CSR (offsets, hits)."""
    nq = qlo.shape[0]
    nbox = lo.shape[0]
    stamp = np.full(nbox, -1, dtype=np.int64)
    offsets = np.zeros(nq + 1, dtype=np.int64)
    cap = max(16, 8 * nq)
    hits = np.empty(cap, dtype=np.int64)
    count = 0
    inv = 1.0 / cell
    for q in range(nq):
        if active[q] and _finite_box(qlo, qhi, q):
            i0 = int(math.floor(qlo[q, 0] * inv))
            j0 = int(math.floor(qlo[q, 1] * inv))
            k0 = int(math.floor(qlo[q, 2] * inv))
            i1 = max(i0, min(int(math.floor(qhi[q, 0] * inv)), i0 + max_cells_per_box))
            j1 = max(j0, min(int(math.floor(qhi[q, 1] * inv)), j0 + max_cells_per_box))
            k1 = max(k0, min(int(math.floor(qhi[q, 2] * inv)), k0 + max_cells_per_box))
            for i in range(i0, i1 + 1):
                for j in range(j0, j1 + 1):
                    for k in range(k0, k1 + 1):
                        t = cell_hash(i, j, k, table_size)
                        for s in range(bucket_start[t], bucket_start[t + 1]):
                            b = items[s]
                            if stamp[b] == q:
                                continue
                            stamp[b] = q
                            if (lo[b, 0] > qhi[q, 0] or hi[b, 0] < qlo[q, 0] or lo[b, 1] > qhi[q, 1]
                                    or hi[b, 1] < qlo[q, 1] or lo[b, 2] > qhi[q, 2] or hi[b, 2] < qlo[q, 2]):
                                continue
                            if count == cap:
                                cap *= 2
                                grown = np.empty(cap, dtype=np.int64)
                                grown[:count] = hits[:count]
                                hits = grown
                            hits[count] = b
                            count += 1
        offsets[q + 1] = count
    return offsets, hits[:count].copy()


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
def triangle_normal(a0, a1, a2, b0, b1, b2, c0, c1, c2):
    """Unit normal of abc (right hand), or zeros when degenerate."""
    e0, e1, e2 = b0 - a0, b1 - a1, b2 - a2
    f0, f1, f2 = c0 - a0, c1 - a1, c2 - a2
    n0 = e1 * f2 - e2 * f1
    n1 = e2 * f0 - e0 * f2
    n2 = e0 * f1 - e1 * f0
    length = math.sqrt(n0 * n0 + n1 * n1 + n2 * n2)
    if length < 1e-300:
        return 0.0, 0.0, 0.0
    return n0 / length, n1 / length, n2 / length


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
def mesh_merge_candidates(keep, old_off, old_cand, old_d0, new_off, new_cand, new_d0):
    """Per vertex: the old candidate list where ``keep`` (still valid), else the new one."""
    n = keep.shape[0]
    off = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        if keep[i]:
            off[i + 1] = off[i] + old_off[i + 1] - old_off[i]
        else:
            off[i + 1] = off[i] + new_off[i + 1] - new_off[i]
    cand = np.empty(off[n], dtype=np.int64)
    d0 = np.empty(off[n])
    for i in range(n):
        if keep[i]:
            a, b, src_c, src_d = old_off[i], old_off[i + 1], old_cand, old_d0
        else:
            a, b, src_c, src_d = new_off[i], new_off[i + 1], new_cand, new_d0
        for s in range(a, b):
            cand[off[i] + s - a] = src_c[s]
            d0[off[i] + s - a] = src_d[s]
    return off, cand, d0


@njit(inline="always", **_JIT)
def _interp(verts, v1, idx, t_frac):
    return (verts[idx, 0] + t_frac * (v1[idx, 0] - verts[idx, 0]),
            verts[idx, 1] + t_frac * (v1[idx, 1] - verts[idx, 1]),
            verts[idx, 2] + t_frac * (v1[idx, 2] - verts[idx, 2]))


# ----------------------------------------------------------------------------------------------
# Self-collision: particle-particle (spatial hash, cell = 2 r) and vertex-triangle repulsion.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def _is_excluded(i, j, excl_offsets, excl):
    for s in range(excl_offsets[i], excl_offsets[i + 1]):
        if excl[s] == j:
            return True
    return False


@njit(**_JIT)
def self_particle_pairs(x_start, x_pred, inv_mass, radius, excl_offsets, excl, table_size):
    """Pairs (i < j) of vertices closer than 2 r + both substep travels, not within two mesh hops.

    Spatial hash of the predicted positions with cell 2 r + the largest substep travel; each
    vertex looks at the 27 cells around it.
    """
    n = x_pred.shape[0]
    max_travel = 0.0
    travel = np.empty(n)
    for i in range(n):
        travel[i] = math.sqrt((x_pred[i, 0] - x_start[i, 0]) ** 2 + (x_pred[i, 1] - x_start[i, 1]) ** 2
                              + (x_pred[i, 2] - x_start[i, 2]) ** 2)
        max_travel = max(max_travel, travel[i])
    reach = 2.0 * radius + 2.0 * max_travel
    cell = max(2.0 * radius, reach)
    inv = 1.0 / cell
    counts = np.zeros(table_size + 1, dtype=np.int64)
    keys = np.empty(n, dtype=np.int64)
    for i in range(n):
        keys[i] = cell_hash(int(math.floor(x_pred[i, 0] * inv)), int(math.floor(x_pred[i, 1] * inv)),
                            int(math.floor(x_pred[i, 2] * inv)), table_size)
        counts[keys[i] + 1] += 1
    for t in range(table_size):
        counts[t + 1] += counts[t]
    items = np.empty(n, dtype=np.int64)
    fill = counts[:table_size].copy()
    for i in range(n):
        items[fill[keys[i]]] = i
        fill[keys[i]] += 1
    cap = 4 * n + 16
    pi = np.empty(cap, dtype=np.int64)
    pj = np.empty(cap, dtype=np.int64)
    count = 0
    for i in range(n):
        ci = int(math.floor(x_pred[i, 0] * inv))
        cj = int(math.floor(x_pred[i, 1] * inv))
        ck = int(math.floor(x_pred[i, 2] * inv))
        for a in range(ci - 1, ci + 2):
            for b in range(cj - 1, cj + 2):
                for c in range(ck - 1, ck + 2):
                    t = cell_hash(a, b, c, table_size)
                    for s in range(counts[t], counts[t + 1]):
                        j = items[s]
                        if j <= i or (inv_mass[i] == 0.0 and inv_mass[j] == 0.0):
                            continue
                        d2 = ((x_pred[i, 0] - x_pred[j, 0]) ** 2 + (x_pred[i, 1] - x_pred[j, 1]) ** 2
                              + (x_pred[i, 2] - x_pred[j, 2]) ** 2)
                        pair_reach = 2.0 * radius + travel[i] + travel[j]
                        if d2 > pair_reach * pair_reach or _is_excluded(i, j, excl_offsets, excl):
                            continue
                        duplicate = False  # hash collisions can list one pair twice
                        for e in range(count - 1, -1, -1):
                            if pi[e] != i:
                                break
                            if pj[e] == j:
                                duplicate = True
                                break
                        if duplicate:
                            continue
                        if count == cap:
                            cap *= 2
                            gi = np.empty(cap, dtype=np.int64)
                            gj = np.empty(cap, dtype=np.int64)
                            gi[:count] = pi[:count]
                            gj[:count] = pj[:count]
                            pi, pj = gi, gj
                        pi[count] = i
                        pj[count] = j
                        count += 1
    return pi[:count].copy(), pj[:count].copy()


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
        length = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        if length < 1e-12:
            continue
        C = length - target
        if C >= 0.0 and lam[c] == 0.0:
            continue
        dlam = xpbd_delta_lambda(C, wi + wj, 0.0, 0.0, 0.0, lam[c])
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


@njit(**_JIT)
def self_triangle_contacts(x_start, x_pred, inv_mass, tris, thickness, cell, table_size, excl_offsets, excl):
    """Vertex-triangle pairs for self-collision repulsion this substep.

    Triangles are hashed by their swept box (substep start and prediction, padded by the
    thickness); each vertex queries the cells of its own swept box. A pair is kept when the
    vertex is within ``2 thickness + travel`` of the triangle at the substep start or the
    prediction; its side is the side of the triangle's plane the vertex was on at the
    substep start. Returns (vertex, triangle, side).
    """
    nt = tris.shape[0]
    n = x_pred.shape[0]
    lo = np.empty((nt, 3))
    hi = np.empty((nt, 3))
    swept_triangle_boxes(x_start, x_pred, tris, thickness, lo, hi)
    bucket, items = hash_boxes(lo, hi, cell, table_size, 32)
    qlo = np.empty((n, 3))
    qhi = np.empty((n, 3))
    active = np.empty(n, dtype=np.bool_)
    for i in range(n):
        for d in range(3):
            qlo[i, d] = min(x_start[i, d], x_pred[i, d]) - thickness
            qhi[i, d] = max(x_start[i, d], x_pred[i, d]) + thickness
        active[i] = True
    offsets, hits = query_boxes(qlo, qhi, active, lo, hi, cell, table_size, bucket, items, 32)
    cap = hits.shape[0] + 1
    cv = np.empty(cap, dtype=np.int64)
    ct = np.empty(cap, dtype=np.int64)
    cs = np.empty(cap)
    count = 0
    for i in range(n):
        wi = inv_mass[i]
        for s in range(offsets[i], offsets[i + 1]):
            t = hits[s]
            ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
            if ia == i or ib == i or ic == i:
                continue
            if wi == 0.0 and inv_mass[ia] == 0.0 and inv_mass[ib] == 0.0 and inv_mass[ic] == 0.0:
                continue
            travel = math.sqrt((x_pred[i, 0] - x_start[i, 0]) ** 2 + (x_pred[i, 1] - x_start[i, 1]) ** 2
                               + (x_pred[i, 2] - x_start[i, 2]) ** 2)
            limit = 2.0 * thickness + travel
            # cheap rejection: the triangle's bounding sphere (at the prediction) is out of reach
            g0 = (x_pred[ia, 0] + x_pred[ib, 0] + x_pred[ic, 0]) / 3.0
            g1 = (x_pred[ia, 1] + x_pred[ib, 1] + x_pred[ic, 1]) / 3.0
            g2 = (x_pred[ia, 2] + x_pred[ib, 2] + x_pred[ic, 2]) / 3.0
            rad2 = max((x_pred[ia, 0] - g0) ** 2 + (x_pred[ia, 1] - g1) ** 2 + (x_pred[ia, 2] - g2) ** 2,
                       (x_pred[ib, 0] - g0) ** 2 + (x_pred[ib, 1] - g1) ** 2 + (x_pred[ib, 2] - g2) ** 2,
                       (x_pred[ic, 0] - g0) ** 2 + (x_pred[ic, 1] - g1) ** 2 + (x_pred[ic, 2] - g2) ** 2)
            dg = math.sqrt((x_pred[i, 0] - g0) ** 2 + (x_pred[i, 1] - g1) ** 2 + (x_pred[i, 2] - g2) ** 2)
            # the start position is within travel + the triangle's own travel of the prediction
            tri_travel = max(math.sqrt((x_pred[ia, 0] - x_start[ia, 0]) ** 2 + (x_pred[ia, 1] - x_start[ia, 1]) ** 2
                                       + (x_pred[ia, 2] - x_start[ia, 2]) ** 2),
                             math.sqrt((x_pred[ib, 0] - x_start[ib, 0]) ** 2 + (x_pred[ib, 1] - x_start[ib, 1]) ** 2
                                       + (x_pred[ib, 2] - x_start[ib, 2]) ** 2),
                             math.sqrt((x_pred[ic, 0] - x_start[ic, 0]) ** 2 + (x_pred[ic, 1] - x_start[ic, 1]) ** 2
                                       + (x_pred[ic, 2] - x_start[ic, 2]) ** 2))
            if dg - math.sqrt(rad2) > limit + travel + tri_travel:
                continue
            if _is_excluded(i, ia, excl_offsets, excl) or _is_excluded(i, ib, excl_offsets, excl) or \
                    _is_excluded(i, ic, excl_offsets, excl):
                continue  # topological neighbours (two hops): touching at rest, not a collision
            u, v, w = closest_on_triangle(x_pred[i, 0], x_pred[i, 1], x_pred[i, 2], x_pred[ia, 0], x_pred[ia, 1],
                                          x_pred[ia, 2], x_pred[ib, 0], x_pred[ib, 1], x_pred[ib, 2],
                                          x_pred[ic, 0], x_pred[ic, 1], x_pred[ic, 2])
            e0 = x_pred[i, 0] - (u * x_pred[ia, 0] + v * x_pred[ib, 0] + w * x_pred[ic, 0])
            e1 = x_pred[i, 1] - (u * x_pred[ia, 1] + v * x_pred[ib, 1] + w * x_pred[ic, 1])
            e2 = x_pred[i, 2] - (u * x_pred[ia, 2] + v * x_pred[ib, 2] + w * x_pred[ic, 2])
            dist_pred = math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
            # substep start: side and distance
            u, v, w = closest_on_triangle(x_start[i, 0], x_start[i, 1], x_start[i, 2], x_start[ia, 0],
                                          x_start[ia, 1], x_start[ia, 2], x_start[ib, 0], x_start[ib, 1],
                                          x_start[ib, 2], x_start[ic, 0], x_start[ic, 1], x_start[ic, 2])
            e0 = x_start[i, 0] - (u * x_start[ia, 0] + v * x_start[ib, 0] + w * x_start[ic, 0])
            e1 = x_start[i, 1] - (u * x_start[ia, 1] + v * x_start[ib, 1] + w * x_start[ic, 1])
            e2 = x_start[i, 2] - (u * x_start[ia, 2] + v * x_start[ib, 2] + w * x_start[ic, 2])
            dist_start = math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
            if min(dist_start, dist_pred) > limit:
                continue
            n0, n1, n2 = triangle_normal(x_start[ia, 0], x_start[ia, 1], x_start[ia, 2], x_start[ib, 0],
                                         x_start[ib, 1], x_start[ib, 2], x_start[ic, 0], x_start[ic, 1],
                                         x_start[ic, 2])
            if n0 == 0.0 and n1 == 0.0 and n2 == 0.0:
                continue
            side = 1.0 if n0 * e0 + n1 * e1 + n2 * e2 >= 0.0 else -1.0
            # only a vertex over the face (not beside it in its plane) is pushed along the face normal
            if not (_projected_inside(x_start[i, 0], x_start[i, 1], x_start[i, 2], x_start[ia, 0], x_start[ia, 1],
                                      x_start[ia, 2], x_start[ib, 0], x_start[ib, 1], x_start[ib, 2],
                                      x_start[ic, 0], x_start[ic, 1], x_start[ic, 2], 0.1)
                    or _projected_inside(x_pred[i, 0], x_pred[i, 1], x_pred[i, 2], x_pred[ia, 0], x_pred[ia, 1],
                                         x_pred[ia, 2], x_pred[ib, 0], x_pred[ib, 1], x_pred[ib, 2], x_pred[ic, 0],
                                         x_pred[ic, 1], x_pred[ic, 2], 0.1)):
                continue
            cv[count] = i
            ct[count] = t
            cs[count] = side
            count += 1
    return cv[:count].copy(), ct[:count].copy(), cs[:count].copy()


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
        u, v, w = closest_on_triangle(x[i, 0], x[i, 1], x[i, 2], x[ia, 0], x[ia, 1], x[ia, 2], x[ib, 0], x[ib, 1],
                                      x[ib, 2], x[ic, 0], x[ic, 1], x[ic, 2])
        n0, n1, n2 = triangle_normal(x[ia, 0], x[ia, 1], x[ia, 2], x[ib, 0], x[ib, 1], x[ib, 2], x[ic, 0],
                                     x[ic, 1], x[ic, 2])
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
        if K < 0.05 * max(max(wi, wa), max(wb, wc)):
            # only a triangle corner of small barycentric weight can move: it would be thrown by C / b
            continue
        dlam = xpbd_delta_lambda(C, K, 0.0, 0.0, 0.0, lam[c])
        dlam = clamp_unilateral(lam[c], dlam, 1.0)
        lam[c] += dlam
        x[i, 0] += wi * dlam * n0
        x[i, 1] += wi * dlam * n1
        x[i, 2] += wi * dlam * n2
        x[ia, 0] -= wa * u * dlam * n0
        x[ia, 1] -= wa * u * dlam * n1
        x[ia, 2] -= wa * u * dlam * n2
        x[ib, 0] -= wb * v * dlam * n0
        x[ib, 1] -= wb * v * dlam * n1
        x[ib, 2] -= wb * v * dlam * n2
        x[ic, 0] -= wc * w * dlam * n0
        x[ic, 1] -= wc * w * dlam * n1
        x[ic, 2] -= wc * w * dlam * n2


# ----------------------------------------------------------------------------------------------
# Mesh broad phase along each vertex's travel segment (capsule reach), parallel over vertices.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def point_segment_distance(p0, p1, p2, a0, a1, a2, b0, b1, b2):
    """Distance of p to the segment [a, b] (a point when a == b)."""
    d0, d1, d2 = b0 - a0, b1 - a1, b2 - a2
    len2 = d0 * d0 + d1 * d1 + d2 * d2
    s = 0.0
    if len2 > 0.0:
        s = min(max(((p0 - a0) * d0 + (p1 - a1) * d1 + (p2 - a2) * d2) / len2, 0.0), 1.0)
    return math.sqrt((p0 - a0 - s * d0) ** 2 + (p1 - a1 - s * d1) ** 2 + (p2 - a2 - s * d2) ** 2)


@njit(inline="always", **_JIT)
def segment_segment_distance(p0, p1, p2, q0, q1, q2, r0, r1, r2, s0, s1, s2):
    """Distance between the segments [p, q] and [r, s] (Ericson 5.1.9)."""
    d10, d11, d12 = q0 - p0, q1 - p1, q2 - p2
    d20, d21, d22 = s0 - r0, s1 - r1, s2 - r2
    e0, e1, e2 = p0 - r0, p1 - r1, p2 - r2
    a = d10 * d10 + d11 * d11 + d12 * d12
    e = d20 * d20 + d21 * d21 + d22 * d22
    f = d20 * e0 + d21 * e1 + d22 * e2
    if a <= 1e-30 and e <= 1e-30:
        return math.sqrt(e0 * e0 + e1 * e1 + e2 * e2)
    if a <= 1e-30:
        sc = 0.0
        tc = min(max(f / e, 0.0), 1.0)
    else:
        c = d10 * e0 + d11 * e1 + d12 * e2
        if e <= 1e-30:
            tc = 0.0
            sc = min(max(-c / a, 0.0), 1.0)
        else:
            b = d10 * d20 + d11 * d21 + d12 * d22
            denom = a * e - b * b
            sc = 0.0
            if denom > 0.0:
                sc = min(max((b * f - c * e) / denom, 0.0), 1.0)
            tc = (b * sc + f) / e
            if tc < 0.0:
                tc = 0.0
                sc = min(max(-c / a, 0.0), 1.0)
            elif tc > 1.0:
                tc = 1.0
                sc = min(max((b - c) / a, 0.0), 1.0)
    x0 = p0 + sc * d10 - (r0 + tc * d20)
    x1 = p1 + sc * d11 - (r1 + tc * d21)
    x2 = p2 + sc * d12 - (r2 + tc * d22)
    return math.sqrt(x0 * x0 + x1 * x1 + x2 * x2)


@njit(inline="always", **_JIT)
def point_triangle_distance(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2):
    u, v, w = closest_on_triangle(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2)
    return math.sqrt((p0 - u * a0 - v * b0 - w * c0) ** 2 + (p1 - u * a1 - v * b1 - w * c1) ** 2
                     + (p2 - u * a2 - v * b2 - w * c2) ** 2)


@njit(inline="always", **_JIT)
def segment_triangle_distance(p0, p1, p2, q0, q1, q2, a0, a1, a2, b0, b1, b2, c0, c1, c2):
    """Distance between the segment [p, q] and the triangle abc.

    Both are convex: they intersect (the point where the segment crosses the triangle's plane
    lies in the triangle: distance 0), or a closest pair has a segment end point or a point of
    a triangle edge, so the minimum over those cases is exact.
    """
    d = point_triangle_distance(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2)
    if (q0 - p0) ** 2 + (q1 - p1) ** 2 + (q2 - p2) ** 2 <= 1e-30:
        return d
    d = min(d, point_triangle_distance(q0, q1, q2, a0, a1, a2, b0, b1, b2, c0, c1, c2))
    e0, e1, e2 = b0 - a0, b1 - a1, b2 - a2
    f0, f1, f2 = c0 - a0, c1 - a1, c2 - a2
    n0 = e1 * f2 - e2 * f1
    n1 = e2 * f0 - e0 * f2
    n2 = e0 * f1 - e1 * f0
    sp = n0 * (p0 - a0) + n1 * (p1 - a1) + n2 * (p2 - a2)
    sq = n0 * (q0 - a0) + n1 * (q1 - a1) + n2 * (q2 - a2)
    if sp * sq <= 0.0 and sp != sq:
        t = sp / (sp - sq)
        d = min(d, point_triangle_distance(p0 + t * (q0 - p0), p1 + t * (q1 - p1), p2 + t * (q2 - p2), a0, a1, a2,
                                           b0, b1, b2, c0, c1, c2))
    d = min(d, segment_segment_distance(p0, p1, p2, q0, q1, q2, a0, a1, a2, b0, b1, b2))
    d = min(d, segment_segment_distance(p0, p1, p2, q0, q1, q2, b0, b1, b2, c0, c1, c2))
    d = min(d, segment_segment_distance(p0, p1, p2, q0, q1, q2, c0, c1, c2, a0, a1, a2))
    return d


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
        acc = math.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
        if not acc <= max_acceleration:  # also NaN
            scale = max_acceleration / acc if acc > 0.0 and math.isfinite(acc) else 0.0
            a0, a1, a2, acc = a0 * scale, a1 * scale, a2 * scale, max_acceleration
        h2 = 0.5 * frame_dt * frame_dt
        seg_b[i, 0] = x[i, 0] + v[i, 0] * frame_dt + a0 * h2
        seg_b[i, 1] = x[i, 1] + v[i, 1] * frame_dt + a1 * h2
        seg_b[i, 2] = x[i, 2] + v[i, 2] * frame_dt + a2 * h2
        speed = math.sqrt(v[i, 0] ** 2 + v[i, 1] ** 2 + v[i, 2] ** 2)
        pad[i] = margin + 0.25 * acc * h2 + deflection * speed * frame_dt


@njit(**_JIT)
def mesh_keep_lists(x, seg_b_new, active, seg_a, seg_b, r_built, need, moved_since, keep):
    """A vertex's candidate list (triangles within ``r_built`` of the segment it was built on,
    collider at that frame's start) still covers this frame's capsule (segment [x, seg_b_new],
    radius ``need``) when both new end points lie within ``r_built - need - moved_since`` of
    the old segment (the capsule is convex). Lists much larger than needed are rebuilt."""
    for i in range(x.shape[0]):
        keep[i] = False
        if not active[i]:
            continue
        dev = max(point_segment_distance(x[i, 0], x[i, 1], x[i, 2], seg_a[i, 0], seg_a[i, 1], seg_a[i, 2],
                                         seg_b[i, 0], seg_b[i, 1], seg_b[i, 2]),
                  point_segment_distance(seg_b_new[i, 0], seg_b_new[i, 1], seg_b_new[i, 2], seg_a[i, 0],
                                         seg_a[i, 1], seg_a[i, 2], seg_b[i, 0], seg_b[i, 1], seg_b[i, 2]))
        old_len = math.sqrt((seg_b[i, 0] - seg_a[i, 0]) ** 2 + (seg_b[i, 1] - seg_a[i, 1]) ** 2
                            + (seg_b[i, 2] - seg_a[i, 2]) ** 2)
        new_len = math.sqrt((seg_b_new[i, 0] - x[i, 0]) ** 2 + (seg_b_new[i, 1] - x[i, 1]) ** 2
                            + (seg_b_new[i, 2] - x[i, 2]) ** 2)
        keep[i] = (dev + need[i] + moved_since[i] <= r_built[i] and r_built[i] <= 1.5 * need[i]
                   and old_len <= 1.5 * new_len + need[i])


@njit(**_JIT)
def mesh_query_candidates(seg_a, seg_b, pad, radius, active, tlo, thi, cell, table_size, bucket_start, items,
                          max_cells, tris, v0, center, rad):
    """Candidate triangles of every active vertex: CSR (offsets, cand, d0), each vertex's list
    sorted by d0 (nearest first).

    Vertex i travels along the segment [seg_a, seg_b] give or take ``pad[i]``; its query box
    is the segment's box grown by ``pad`` (triangle boxes already carry the contact radius),
    and a triangle is kept when its distance to the segment (collider at ``v0``), d0, is at
    most ``pad[i] + radius``. d0 is exact for a long segment; for a short one (half length
    under half the reach) it is the lower bound ``|midpoint - triangle| - half length``,
    which is all its users need (a superset is kept, and every list bound stays valid).
    ``center`` / ``rad``: the triangles' bounding spheres at ``v0`` (cheap rejection). One pass
    (hash query, exact filter and sort fused; measured faster than a two-pass parallel
    version on the 2-core bench machine).
    """
    n = seg_a.shape[0]
    nbox = tlo.shape[0]
    inv = 1.0 / cell
    stamp = np.full(nbox, -1, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    cap = max(16, 8 * n)
    cand = np.empty(cap, dtype=np.int64)
    d0 = np.empty(cap)
    count = 0
    ql = np.empty(3)
    qh = np.empty(3)
    for q in range(n):
        if active[q]:
            for d in range(3):
                ql[d] = min(seg_a[q, d], seg_b[q, d]) - pad[q]
                qh[d] = max(seg_a[q, d], seg_b[q, d]) + pad[q]
            ok = True
            for d in range(3):
                if not (abs(ql[d]) < 1e6 and abs(qh[d]) < 1e6):
                    ok = False
            if ok:
                limit = pad[q] + radius
                m0 = 0.5 * (seg_a[q, 0] + seg_b[q, 0])
                m1 = 0.5 * (seg_a[q, 1] + seg_b[q, 1])
                m2 = 0.5 * (seg_a[q, 2] + seg_b[q, 2])
                half = 0.5 * math.sqrt((seg_b[q, 0] - seg_a[q, 0]) ** 2 + (seg_b[q, 1] - seg_a[q, 1]) ** 2
                                       + (seg_b[q, 2] - seg_a[q, 2]) ** 2)
                i0 = int(math.floor(ql[0] * inv))
                j0 = int(math.floor(ql[1] * inv))
                k0 = int(math.floor(ql[2] * inv))
                i1 = max(i0, min(int(math.floor(qh[0] * inv)), i0 + max_cells))
                j1 = max(j0, min(int(math.floor(qh[1] * inv)), j0 + max_cells))
                k1 = max(k0, min(int(math.floor(qh[2] * inv)), k0 + max_cells))
                start = count
                for i in range(i0, i1 + 1):
                    for j in range(j0, j1 + 1):
                        for k in range(k0, k1 + 1):
                            t = cell_hash(i, j, k, table_size)
                            for s in range(bucket_start[t], bucket_start[t + 1]):
                                b = items[s]
                                if stamp[b] == q:
                                    continue
                                stamp[b] = q
                                if (tlo[b, 0] > qh[0] or thi[b, 0] < ql[0] or tlo[b, 1] > qh[1]
                                        or thi[b, 1] < ql[1] or tlo[b, 2] > qh[2] or thi[b, 2] < ql[2]):
                                    continue
                                ia, ib, ic = tris[b, 0], tris[b, 1], tris[b, 2]
                                # the midpoint's distance minus the half length bounds the segment's
                                # from below: enough for a short segment (d0 is only used as a bound)
                                dist = point_triangle_distance(m0, m1, m2, v0[ia, 0], v0[ia, 1], v0[ia, 2],
                                                               v0[ib, 0], v0[ib, 1], v0[ib, 2], v0[ic, 0],
                                                               v0[ic, 1], v0[ic, 2]) - half
                                if dist > limit:
                                    continue
                                if half > 0.5 * limit:
                                    # the triangle's bounding sphere against the segment first (cheap)
                                    if point_segment_distance(center[b, 0], center[b, 1], center[b, 2], seg_a[q, 0],
                                                              seg_a[q, 1], seg_a[q, 2], seg_b[q, 0], seg_b[q, 1],
                                                              seg_b[q, 2]) - rad[b] > limit:
                                        continue
                                    dist = segment_triangle_distance(
                                        seg_a[q, 0], seg_a[q, 1], seg_a[q, 2], seg_b[q, 0], seg_b[q, 1], seg_b[q, 2],
                                        v0[ia, 0], v0[ia, 1], v0[ia, 2], v0[ib, 0], v0[ib, 1], v0[ib, 2], v0[ic, 0],
                                        v0[ic, 1], v0[ic, 2])
                                    if dist > limit:
                                        continue
                                if count == cap:
                                    cap *= 2
                                    grown = np.empty(cap, dtype=np.int64)
                                    grown[:count] = cand[:count]
                                    cand = grown
                                    grown_d = np.empty(cap)
                                    grown_d[:count] = d0[:count]
                                    d0 = grown_d
                                cand[count] = b
                                d0[count] = max(dist, 0.0)
                                count += 1
                if count - start > 1:  # nearest first
                    order = np.argsort(d0[start:count])
                    seg_c = cand[start:count][order]
                    seg_d = d0[start:count][order]
                    cand[start:count] = seg_c
                    d0[start:count] = seg_d
        offsets[q + 1] = count
    return offsets, cand[:count].copy(), d0[:count].copy()


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
            r2 = max(r2, (v0[j, 0] - center[t, 0]) ** 2 + (v0[j, 1] - center[t, 1]) ** 2
                     + (v0[j, 2] - center[t, 2]) ** 2)
        rad[t] = math.sqrt(r2)


@njit(inline="always", **_JIT)
def _mesh_closest_within(p0, p1, p2, offsets, cand, d0, i, tris, verts, t_frac, v1, shift, limit, center, rad,
                         motion):
    """Closest candidate triangle of vertex i within ``limit`` (collider at t_frac), or t = -1.

    Each vertex's candidates are sorted by ``d0``, their distance when the list was built;
    ``shift`` bounds how much any distance can have shrunk since (vertex travel + collider
    motion). Once ``d0 - shift`` exceeds the best distance found, no later candidate can be
    closer and the scan stops: usually after one or two triangles (temporal coherence). A
    candidate is also skipped without the closest-point computation when its bounding sphere
    (centroid and radius at the frame start, grown by the collider's motion up to t_frac) is
    farther than both the best distance so far and ``limit`` (pass ``math.inf`` for none).
    """
    best = 1e300
    best_d = 1e300
    best_t = -1
    bu = bv = bw = 0.0
    grow = motion * t_frac
    for s in range(offsets[i], offsets[i + 1]):
        bound = min(best_d, limit)
        if d0[s] - shift > bound:
            break
        t = cand[s]
        g = math.sqrt((p0 - center[t, 0]) ** 2 + (p1 - center[t, 1]) ** 2 + (p2 - center[t, 2]) ** 2)
        if g - rad[t] - grow > bound:
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
        u, v, w = closest_on_triangle(p0, p1, p2, a0, a1, a2, b0, b1, b2, c0, c1, c2)
        q0 = u * a0 + v * b0 + w * c0
        q1 = u * a1 + v * b1 + w * c1
        q2 = u * a2 + v * b2 + w * c2
        d2 = (p0 - q0) ** 2 + (p1 - q1) ** 2 + (p2 - q2) ** 2
        if d2 < best and d2 <= limit * limit:
            best = d2
            best_d = math.sqrt(d2)
            best_t = t
            bu, bv, bw = u, v, w
    return best_t, bu, bv, bw, best


@njit(**_JIT_PARALLEL)
def mesh_frame_sides_segments(x, offsets, cand, d0, seg_a, seg_b, base_shift, tris, v0, v1, center, rad, one_sided,
                              side):
    """Which side (+1 front, -1 back of the closest face) each vertex is on at the frame start."""
    for i in prange(x.shape[0]):
        side[i] = 1.0
        if one_sided or offsets[i + 1] == offsets[i]:
            continue
        shift = point_segment_distance(x[i, 0], x[i, 1], x[i, 2], seg_a[i, 0], seg_a[i, 1], seg_a[i, 2],
                                       seg_b[i, 0], seg_b[i, 1], seg_b[i, 2]) + base_shift[i]
        t, u, v, w, d2 = _mesh_closest_within(x[i, 0], x[i, 1], x[i, 2], offsets, cand, d0, i, tris, v0, 0.0, v1,
                                              shift, math.inf, center, rad, 0.0)
        if t < 0:
            continue
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
def mesh_narrow_phase_segments(x_start, x_pred, seg_a, seg_b, r_built, base_shift, inv_mass, offsets, cand, d0, tris,
                               v0, v1, motion, side, t_start, t_end, radius, mu_s, mu_k, path, center, rad, lost,
                               only_lost, hit, res, c_vertex, c_normal, c_point, c_radius, c_disp, c_mu_s, c_mu_k,
                               offset):
    """One contact per vertex against its closest candidate triangle at the substep end.

    A vertex on its frame-start side gets the normal (x - q)/|x - q| (smooth over edges and
    corners); a vertex found on the other side is pushed back along the face normal toward
    its frame-start side.

    The candidates of vertex i were built around the segment [seg_a, seg_b] (sorted by their
    distance d0 to it, collider at a frame start); ``dev = |x - segment| + collider motion since``
    bounds how much any distance can have shrunk, so the scan stops once ``d0 - dev`` exceeds the
    best distance found. A triangle missing from the list is farther than ``r_built - dev``;
    when that bound could hide a closer triangle within contact reach, ``lost[i]`` is set and
    the vertex gets no row (the caller re-queries those vertices and runs this again with
    ``only_lost``, which recomputes just them; ``hit`` / ``res`` are per-vertex scratch).

    Far vertices are skipped: ``path[i]`` is the length of the vertex's path from the frame
    start to the substep start. A vertex farther than ``radius + travel + path + collider
    motion`` from every triangle cannot have touched the surface at any time of this frame, so
    it is still on its frame-start side and needs no contact; the scan only looks for a
    triangle within that distance (bounding-sphere rejection first).
    Per-vertex results in parallel, then a serial compaction: returns (new row count, lost count).
    """
    n = x_pred.shape[0]
    for i in prange(n):
        if only_lost and not lost[i]:
            continue  # the result of the previous pass stands
        lost[i] = False
        hit[i] = 0
        if inv_mass[i] == 0.0:
            continue
        p0, p1, p2 = x_pred[i, 0], x_pred[i, 1], x_pred[i, 2]
        dev = point_segment_distance(p0, p1, p2, seg_a[i, 0], seg_a[i, 1], seg_a[i, 2], seg_b[i, 0], seg_b[i, 1],
                                     seg_b[i, 2]) + base_shift[i] + motion * t_end
        travel = math.sqrt((p0 - x_start[i, 0]) ** 2 + (p1 - x_start[i, 1]) ** 2 + (p2 - x_start[i, 2]) ** 2)
        outside = r_built[i] - dev  # every triangle not in the list is at least this far
        best_t = -1
        d2 = 1e300
        u = v = w = 0.0
        if offsets[i + 1] > offsets[i]:
            limit = 2.0 * radius + travel + path[i] + motion * t_end + 1e-9
            best_t, u, v, w, d2 = _mesh_closest_within(p0, p1, p2, offsets, cand, d0, i, tris, v0, t_end, v1, dev,
                                                       limit, center, rad, motion)
        found = math.sqrt(d2) if best_t >= 0 else 1e300
        if outside < min(found, radius + travel):
            lost[i] = True
            continue
        if best_t < 0:
            continue
        t = best_t
        a0, a1, a2 = _interp(v0, v1, tris[t, 0], t_end)
        b0, b1, b2 = _interp(v0, v1, tris[t, 1], t_end)
        c0, c1, c2 = _interp(v0, v1, tris[t, 2], t_end)
        fn0, fn1, fn2 = triangle_normal(a0, a1, a2, b0, b1, b2, c0, c1, c2)
        if fn0 == 0.0 and fn1 == 0.0 and fn2 == 0.0:
            continue
        q0 = u * a0 + v * b0 + w * c0
        q1 = u * a1 + v * b1 + w * c1
        q2 = u * a2 + v * b2 + w * c2
        s = side[i]
        dist = found
        along = fn0 * (p0 - q0) + fn1 * (p1 - q1) + fn2 * (p2 - q2)
        if s * along >= 0.0 and dist > 1e-9:
            n0, n1, n2 = (p0 - q0) / dist, (p1 - q1) / dist, (p2 - q2) / dist
            C = dist - radius
        else:
            n0, n1, n2 = s * fn0, s * fn1, s * fn2
            C = s * along - radius
        if C > travel + radius:
            continue
        sa0, sa1, sa2 = _interp(v0, v1, tris[t, 0], t_start)
        sb0, sb1, sb2 = _interp(v0, v1, tris[t, 1], t_start)
        sc0, sc1, sc2 = _interp(v0, v1, tris[t, 2], t_start)
        hit[i] = 1
        res[i, 0] = n0
        res[i, 1] = n1
        res[i, 2] = n2
        res[i, 3] = q0
        res[i, 4] = q1
        res[i, 5] = q2
        res[i, 6] = q0 - (u * sa0 + v * sb0 + w * sc0)
        res[i, 7] = q1 - (u * sa1 + v * sb1 + w * sc1)
        res[i, 8] = q2 - (u * sa2 + v * sb2 + w * sc2)
    count = offset
    n_lost = 0
    for i in range(n):
        if lost[i]:
            n_lost += 1
        if hit[i] == 0:
            continue
        count = emit_contact(count, i, res[i, 0], res[i, 1], res[i, 2], res[i, 3], res[i, 4], res[i, 5], radius,
                             res[i, 6], res[i, 7], res[i, 8], mu_s, mu_k, c_vertex, c_normal, c_point, c_radius,
                             c_disp, c_mu_s, c_mu_k)
    return count, n_lost


@njit(**_JIT)
def accumulate_path(x_substep_start, prev, path):
    """path += |x_substep_start - prev| per vertex; prev = x_substep_start."""
    for i in range(path.shape[0]):
        path[i] += math.sqrt((x_substep_start[i, 0] - prev[i, 0]) ** 2 + (x_substep_start[i, 1] - prev[i, 1]) ** 2
                             + (x_substep_start[i, 2] - prev[i, 2]) ** 2)
        for d in range(3):
            prev[i, d] = x_substep_start[i, d]


# ----------------------------------------------------------------------------------------------
# Signed distance grid proxy (rigid body): build from a closed mesh, trilinear queries.
# ----------------------------------------------------------------------------------------------

@njit(**_JIT)
def sdf_build(verts, tris, origin, spacing, shape, band):
    """Signed distances at the nodes of a regular grid (node (i, j, k) at origin + spacing (i, j, k)).

    Unsigned distance: exact (closest triangle) at every node within ``band`` of the surface
    (each triangle visits the nodes of its box grown by the band); farther nodes get a 26-
    neighbour chamfer propagation (two forward/backward sweeps), an over-estimate that still
    grows away from the surface. Sign: parity of the crossings of a ray along +z through the
    node's (x, y) column (rays nudged off the grid lines so they miss edges and vertices of a
    mesh built on round numbers). Negative inside.
    """
    nx, ny, nz = shape[0], shape[1], shape[2]
    dist = np.full((nx, ny, nz), np.inf)
    for t in range(tris.shape[0]):
        ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
        lo = np.empty(3, dtype=np.int64)
        hi = np.empty(3, dtype=np.int64)
        for d in range(3):
            a = min(verts[ia, d], verts[ib, d], verts[ic, d]) - band
            b = max(verts[ia, d], verts[ib, d], verts[ic, d]) + band
            lo[d] = max(0, int(math.floor((a - origin[d]) / spacing)))
            hi[d] = min(shape[d] - 1, int(math.ceil((b - origin[d]) / spacing)))
        for i in range(lo[0], hi[0] + 1):
            px = origin[0] + i * spacing
            for j in range(lo[1], hi[1] + 1):
                py = origin[1] + j * spacing
                for k in range(lo[2], hi[2] + 1):
                    pz = origin[2] + k * spacing
                    d = point_triangle_distance(px, py, pz, verts[ia, 0], verts[ia, 1], verts[ia, 2], verts[ib, 0],
                                                verts[ib, 1], verts[ib, 2], verts[ic, 0], verts[ic, 1],
                                                verts[ic, 2])
                    if d < dist[i, j, k]:
                        dist[i, j, k] = d
    # chamfer propagation for the nodes beyond the band
    for sweep in range(2):
        for direction in range(2):
            for ii in range(nx):
                i = ii if direction == 0 else nx - 1 - ii
                for jj in range(ny):
                    j = jj if direction == 0 else ny - 1 - jj
                    for kk in range(nz):
                        k = kk if direction == 0 else nz - 1 - kk
                        best = dist[i, j, k]
                        for di in range(-1, 2):
                            for dj in range(-1, 2):
                                for dk in range(-1, 2):
                                    a, b, c = i + di, j + dj, k + dk
                                    if a < 0 or b < 0 or c < 0 or a >= nx or b >= ny or c >= nz:
                                        continue
                                    cand = dist[a, b, c] + spacing * math.sqrt(di * di + dj * dj + dk * dk)
                                    if cand < best:
                                        best = cand
                        dist[i, j, k] = best
    # sign: crossings of the +z ray through each column
    ox = 0.1234567 * spacing * 1e-3
    oy = 0.0765432 * spacing * 1e-3
    zs = np.empty(tris.shape[0])
    for i in range(nx):
        px = origin[0] + i * spacing + ox
        for j in range(ny):
            py = origin[1] + j * spacing + oy
            m = 0
            for t in range(tris.shape[0]):
                ia, ib, ic = tris[t, 0], tris[t, 1], tris[t, 2]
                ax, ay = verts[ia, 0] - px, verts[ia, 1] - py
                bx, by = verts[ib, 0] - px, verts[ib, 1] - py
                cx, cy = verts[ic, 0] - px, verts[ic, 1] - py
                if (ax > 0 and bx > 0 and cx > 0) or (ax < 0 and bx < 0 and cx < 0):
                    continue
                if (ay > 0 and by > 0 and cy > 0) or (ay < 0 and by < 0 and cy < 0):
                    continue
                # barycentrics of the column in the triangle's xy projection
                w0 = bx * cy - by * cx
                w1 = cx * ay - cy * ax
                w2 = ax * by - ay * bx
                if not ((w0 >= 0 and w1 >= 0 and w2 >= 0) or (w0 <= 0 and w1 <= 0 and w2 <= 0)):
                    continue
                s = w0 + w1 + w2
                if s == 0.0:
                    continue  # vertical triangle: the ray grazes it
                zs[m] = (w0 * verts[ia, 2] + w1 * verts[ib, 2] + w2 * verts[ic, 2]) / s
                m += 1
            if m == 0:
                continue
            z = np.sort(zs[:m])
            for k in range(nz):
                pz = origin[2] + k * spacing
                above = 0
                for q in range(m):
                    if z[q] > pz:
                        above += 1
                if above % 2 == 1:
                    dist[i, j, k] = -dist[i, j, k]
    return dist


@njit(inline="always", **_JIT)
def _sdf_axis(p, origin, spacing, n):
    """Cell index, fraction in the cell and signed distance beyond the grid along one axis."""
    u = (p - origin) / spacing
    hi = n - 1.0
    e = 0.0
    if u < 0.0:
        e = u * spacing
        u = 0.0
    elif u > hi:
        e = (u - hi) * spacing
        u = hi
    c = min(int(math.floor(u)), n - 2)
    return c, u - c, e


@njit(inline="always", **_JIT)
def sdf_sample(phi, origin, spacing, px, py, pz):
    """Trilinear signed distance and its gradient at the local point p.

    Outside the grid's box the point is clamped onto it and the distance to the box is added
    (an upper bound of the true distance, pointing back at the box)."""
    i, fx, extra0 = _sdf_axis(px, origin[0], spacing, phi.shape[0])
    j, fy, extra1 = _sdf_axis(py, origin[1], spacing, phi.shape[1])
    k, fz, extra2 = _sdf_axis(pz, origin[2], spacing, phi.shape[2])
    c000 = phi[i, j, k]
    c100 = phi[i + 1, j, k]
    c010 = phi[i, j + 1, k]
    c110 = phi[i + 1, j + 1, k]
    c001 = phi[i, j, k + 1]
    c101 = phi[i + 1, j, k + 1]
    c011 = phi[i, j + 1, k + 1]
    c111 = phi[i + 1, j + 1, k + 1]
    c00 = c000 + fx * (c100 - c000)
    c10 = c010 + fx * (c110 - c010)
    c01 = c001 + fx * (c101 - c001)
    c11 = c011 + fx * (c111 - c011)
    c0 = c00 + fy * (c10 - c00)
    c1 = c01 + fy * (c11 - c01)
    value = c0 + fz * (c1 - c0)
    gz = (c1 - c0) / spacing
    gy = ((1 - fz) * (c10 - c00) + fz * (c11 - c01)) / spacing
    gx = ((1 - fy) * (1 - fz) * (c100 - c000) + fy * (1 - fz) * (c110 - c010) + (1 - fy) * fz * (c101 - c001)
          + fy * fz * (c111 - c011)) / spacing
    e2 = extra0 * extra0 + extra1 * extra1 + extra2 * extra2
    if e2 > 0.0:
        e = math.sqrt(e2)
        value = max(value, 0.0) + e
        gx, gy, gz = extra0 / e, extra1 / e, extra2 / e
    g = math.sqrt(gx * gx + gy * gy + gz * gz)
    if g < 1e-12:
        return value, 0.0, 0.0, 1.0
    return value, gx / g, gy / g, gz / g


@njit(**_JIT)
def sdf_signed_distance(points, phi, origin, spacing, out, normals):
    """Trilinear signed distance (and unit gradient) of local points."""
    for i in range(points.shape[0]):
        v, n0, n1, n2 = sdf_sample(phi, origin, spacing, points[i, 0], points[i, 1], points[i, 2])
        out[i] = v
        normals[i, 0] = n0
        normals[i, 1] = n1
        normals[i, 2] = n2


@njit(**_JIT)
def sdf_narrow_phase(x_start, x_pred, inv_mass, cand_vertex, cand_proxy, n_cand, k, t_start, t_end, pos0, rot0, pos1,
                     rot1, phi, origin, spacing, radius, mu_s, mu_k, c_vertex, c_normal, c_point, c_radius, c_disp,
                     c_mu_s, c_mu_k, offset):
    """Contacts with the signed distance grid proxy k (rows from ``offset``), like the analytic ones.

    At the substep end the vertex's local position gives phi and the normal (normalised
    trilinear gradient); the surface point is ``p - phi n``. A vertex predicted inside that
    started the substep outside keeps the normal and surface point of its start position (no
    tunnelling out through the far side of a thin part). Returns the new row count.
    """
    count = offset
    for m in range(n_cand):
        if cand_proxy[m] != k:
            continue
        i = cand_vertex[m]
        if inv_mass[i] == 0.0:
            continue
        pe0, pe1, pe2, qe0, qe1, qe2, qe3 = transform_at(k, t_end, pos0, rot0, pos1, rot1)
        ps0, ps1, ps2, qs0, qs1, qs2, qs3 = transform_at(k, t_start, pos0, rot0, pos1, rot1)
        l0, l1, l2 = _world_to_local(pe0, pe1, pe2, qe0, qe1, qe2, qe3, x_pred[i, 0], x_pred[i, 1], x_pred[i, 2])
        d, nl0, nl1, nl2 = sdf_sample(phi, origin, spacing, l0, l1, l2)
        ql0, ql1, ql2 = l0 - d * nl0, l1 - d * nl1, l2 - d * nl2
        if d < 0.0:
            s0, s1, s2 = _world_to_local(ps0, ps1, ps2, qs0, qs1, qs2, qs3, x_start[i, 0], x_start[i, 1],
                                         x_start[i, 2])
            ds, m0, m1, m2 = sdf_sample(phi, origin, spacing, s0, s1, s2)
            if ds >= 0.0:
                nl0, nl1, nl2 = m0, m1, m2
                ql0, ql1, ql2 = s0 - ds * m0, s1 - ds * m1, s2 - ds * m2
        n0, n1, n2 = quat_rotate(qe0, qe1, qe2, qe3, nl0, nl1, nl2)
        q0, q1, q2 = _local_to_world(pe0, pe1, pe2, qe0, qe1, qe2, qe3, ql0, ql1, ql2)
        C = n0 * (x_pred[i, 0] - q0) + n1 * (x_pred[i, 1] - q1) + n2 * (x_pred[i, 2] - q2) - radius
        travel = math.sqrt((x_pred[i, 0] - x_start[i, 0]) ** 2 + (x_pred[i, 1] - x_start[i, 1]) ** 2
                           + (x_pred[i, 2] - x_start[i, 2]) ** 2)
        if C > travel + radius:
            continue
        b0, b1, b2 = _local_to_world(ps0, ps1, ps2, qs0, qs1, qs2, qs3, ql0, ql1, ql2)
        count = emit_contact(count, i, n0, n1, n2, q0, q1, q2, radius, q0 - b0, q1 - b1, q2 - b2, mu_s, mu_k,
                             c_vertex, c_normal, c_point, c_radius, c_disp, c_mu_s, c_mu_k)
    return count
