"""Analytic proxies (plane, sphere, capsule, box): rigid transforms, closest points, broad and narrow phase.

Proxies are rows of ``kind`` / ``dims`` / transform arrays; quaternions are (w, x, y, z) and rotate
local to world; the transform is interpolated inside the frame (lerp position, slerp rotation).
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
    return (vx + qw * tx + (qy * tz - qz * ty), vy + qw * ty + (qz * tx - qx * tz), vz + qw * tz + (qx * ty - qy * tx))


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
    norm = sqrt(w * w + x * x + y * y + z * z)
    return w / norm, x / norm, y / norm, z / norm


@njit(inline="always", **_JIT)
def transform_at(k, t, pos0, rot0, pos1, rot1):
    """(px, py, pz, qw, qx, qy, qz) of proxy k at frame fraction t."""
    px = pos0[k, 0] + t * (pos1[k, 0] - pos0[k, 0])
    py = pos0[k, 1] + t * (pos1[k, 1] - pos0[k, 1])
    pz = pos0[k, 2] + t * (pos1[k, 2] - pos0[k, 2])
    qw, qx, qy, qz = slerp(rot0[k], rot1[k], t)
    return px, py, pz, qw, qx, qy, qz


@njit(inline="always", **_JIT)
def poses_at(t, pos0, rot0, pos1, rot1):
    """(K, 7) array of every proxy's :func:`transform_at` at frame fraction t."""
    out = np.empty((pos0.shape[0], 7))
    for k in range(pos0.shape[0]):
        out[k, 0], out[k, 1], out[k, 2], out[k, 3], out[k, 4], out[k, 5], out[k, 6] = transform_at(
            k, t, pos0, rot0, pos1, rot1
        )
    return out


@njit(inline="always", **_JIT)
def stage_rigid_contact(m, i, x_start, x_pred, pe, ps, nl0, nl1, nl2, ql0, ql1, ql2, radius, res):
    """The contact of vertex i with a rigid proxy from its local closest point ``ql`` and normal
    ``nl``: world normal, surface point at the substep end (pose ``pe``, a :func:`poses_at` row)
    and that point's displacement since the substep start (pose ``ps``), into ``res[m]``. False
    (nothing written) when the vertex stays out of reach (C > travel + radius)."""
    n0, n1, n2 = quat_rotate(pe[3], pe[4], pe[5], pe[6], nl0, nl1, nl2)
    q0, q1, q2 = _local_to_world(pe[0], pe[1], pe[2], pe[3], pe[4], pe[5], pe[6], ql0, ql1, ql2)
    C = n0 * (x_pred[i, 0] - q0) + n1 * (x_pred[i, 1] - q1) + n2 * (x_pred[i, 2] - q2) - radius
    travel = sqrt(
        (x_pred[i, 0] - x_start[i, 0]) ** 2 + (x_pred[i, 1] - x_start[i, 1]) ** 2 + (x_pred[i, 2] - x_start[i, 2]) ** 2
    )
    if travel + radius < C:
        return False
    b0, b1, b2 = _local_to_world(ps[0], ps[1], ps[2], ps[3], ps[4], ps[5], ps[6], ql0, ql1, ql2)
    res[m, 0], res[m, 1], res[m, 2] = n0, n1, n2
    res[m, 3], res[m, 4], res[m, 5] = q0, q1, q2
    res[m, 6], res[m, 7], res[m, 8] = q0 - b0, q1 - b1, q2 - b2
    return True


@njit(inline="always", **_JIT)
def emit_staged_contacts(
    hit,
    res,
    cand_vertex,
    cand_proxy,
    n_cand,
    cloth_thickness,
    skin,
    mu_s,
    mu_k,
    c_vertex,
    c_normal,
    c_point,
    c_radius,
    c_disp,
    c_mu_s,
    c_mu_k,
    offset,
):
    """The rows staged by :func:`stage_rigid_contact` (``hit[m]``), in candidate order from row
    ``offset``, with their proxy's radius and friction. Returns the new row count."""
    count = offset
    for m in range(n_cand):
        if hit[m]:
            k = cand_proxy[m]
            count = emit_contact(
                count,
                cand_vertex[m],
                res[m, 0],
                res[m, 1],
                res[m, 2],
                res[m, 3],
                res[m, 4],
                res[m, 5],
                cloth_thickness + skin[k],
                res[m, 6],
                res[m, 7],
                res[m, 8],
                mu_s[k],
                mu_k[k],
                c_vertex,
                c_normal,
                c_point,
                c_radius,
                c_disp,
                c_mu_s,
                c_mu_k,
            )
    return count


# ----------------------------------------------------------------------------------------------
# Analytic shapes in local coordinates: signed distance, outward normal, closest surface point.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def _round_shape(dx, dy, dz, cx, cy, cz, radius):
    """Sphere of ``radius`` around the core point c: (phi, n, q) for the point c + d."""
    d = sqrt(dx * dx + dy * dy + dz * dz)
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
        d = sqrt(d2)
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


@njit(**_JIT)
def local_closest_points(kind, dims, points, phi, closest):
    """:func:`local_closest` of one shape at local points (P,3): fills phi (P,) and closest (P,3)."""
    for i in range(points.shape[0]):
        d, _, _, _, qx, qy, qz = local_closest(
            kind, dims[0], dims[1], dims[2], points[i, 0], points[i, 1], points[i, 2]
        )
        phi[i] = d
        closest[i, 0] = qx
        closest[i, 1] = qy
        closest[i, 2] = qz


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
class ProxySweep(NamedTuple):
    """The analytic proxies over one frame, for the candidate searches: each proxy's kind and
    dimensions, its pose at the frame's start and end (``pos0``/``rot0``, ``pos1``/``rot1``), its
    skin (the collider's thickness, m) and its bounding radius (m)."""

    kind: np.ndarray
    dims: np.ndarray
    pos0: np.ndarray
    rot0: np.ndarray
    pos1: np.ndarray
    rot1: np.ndarray
    skin: np.ndarray
    bound_radius: np.ndarray


class CandidatePairs(NamedTuple):
    """The frame's vertex-proxy candidate rows (``vertex``, ``proxy``), and per vertex the sphere its
    pairs were listed for (``origin``, radius ``budget``, m) and which proxies are listed
    (``listed[i, k]``)."""

    vertex: np.ndarray
    proxy: np.ndarray
    origin: np.ndarray
    budget: np.ndarray
    listed: np.ndarray


@njit(inline="always", **_JIT)
def _may_touch(x, i, travel, k, proxies, poses, cloth_thickness):
    """Whether vertex i, moving at most ``travel`` from ``x[i]`` this frame, may come within
    contact reach of proxy k: a finite proxy sweeps its bounding sphere along the segment of its
    centre, an infinite plane is tested by its signed distance at the frame start, middle and end
    (``poses``)."""
    reach = travel + cloth_thickness + proxies.skin[k]
    if proxies.kind[k] == PLANE:
        for step in range(3):
            p = poses[step]
            lz = _world_to_local(
                p[k, 0], p[k, 1], p[k, 2], p[k, 3], p[k, 4], p[k, 5], p[k, 6], x[i, 0], x[i, 1], x[i, 2]
            )[2]
            if lz < reach:
                return True
        return False
    pos0, pos1 = proxies.pos0, proxies.pos1
    ax, ay, az = pos0[k, 0], pos0[k, 1], pos0[k, 2]
    bx, by, bz = pos1[k, 0] - ax, pos1[k, 1] - ay, pos1[k, 2] - az
    dx, dy, dz = x[i, 0] - ax, x[i, 1] - ay, x[i, 2] - az
    len2 = bx * bx + by * by + bz * bz
    s = 0.0
    if len2 > 0.0:
        s = min(max((dx * bx + dy * by + dz * bz) / len2, 0.0), 1.0)
    ex, ey, ez = dx - s * bx, dy - s * by, dz - s * bz
    r = proxies.bound_radius[k] + reach
    return ex * ex + ey * ey + ez * ez <= r * r


@njit(inline="always", **_JIT)
def _frame_poses(proxies):
    pos0, rot0, pos1, rot1 = proxies.pos0, proxies.rot0, proxies.pos1, proxies.rot1
    return (
        poses_at(0.0, pos0, rot0, pos1, rot1),
        poses_at(0.5, pos0, rot0, pos1, rot1),
        poses_at(1.0, pos0, rot0, pos1, rot1),
    )


@njit(inline="always", **_JIT)
def _list_pairs(x, i, pairs, proxies, poses, cloth_thickness, count):
    """Append vertex i's pairs with the proxies its budget sphere may touch that it has not listed."""
    for k in range(proxies.kind.shape[0]):
        if not pairs.listed[i, k] and _may_touch(x, i, pairs.budget[i], k, proxies, poses, cloth_thickness):
            pairs.vertex[count] = i
            pairs.proxy[count] = k
            pairs.listed[i, k] = True
            count += 1
    return count


@njit(**_JIT)
def analytic_broad_phase(x, v, inv_mass, frame_dt, extra_margin, cloth_thickness, proxies, pairs):
    """Vertex-proxy pairs that may touch this frame, into ``pairs`` (a :class:`CandidatePairs`);
    returns their count.

    A vertex may travel ``|v| frame_dt + extra_margin`` (a sphere around it: its ``origin`` and
    ``budget``; see :func:`_may_touch`). A vertex the solve carries farther than its budget is
    tested again on the spot (:func:`analytic_requery`).
    """
    count = 0
    poses = _frame_poses(proxies)
    for i in range(x.shape[0]):
        pairs.listed[i, :] = False
        pairs.origin[i, 0], pairs.origin[i, 1], pairs.origin[i, 2] = x[i, 0], x[i, 1], x[i, 2]
        pairs.budget[i] = np.inf
        if inv_mass[i] == 0.0:
            continue
        pairs.budget[i] = sqrt(v[i, 0] ** 2 + v[i, 1] ** 2 + v[i, 2] ** 2) * frame_dt + extra_margin
        count = _list_pairs(x, i, pairs, proxies, poses, cloth_thickness, count)
    return count


@njit(**_JIT)
def analytic_requery(x_start, x_pred, inv_mass, h, time_left, extra_margin, cloth_thickness, proxies, pairs, count):
    """The pairs of the vertices whose prediction left their budget sphere (the broad phase's, or
    an earlier substep's requery), appended to ``pairs`` from row ``count``; returns (new count,
    vertices requeried).

    The broad phase bounds each vertex's path by its velocity at the frame start; the solve can
    carry it farther (a sheet wrapping a ball whips its edges round: a vertex 75 mm from the
    ball at 34 mm a frame was pulled 89 mm into it). Such a vertex gets a new sphere at its
    prediction, its substep speed over the rest of the frame (``time_left`` s) plus
    ``extra_margin``, and the pairs that sphere may touch that it did not list yet. So the
    velocity bound is a speed choice, never a correctness assumption.
    """
    poses = _frame_poses(proxies)
    origin, budget = pairs.origin, pairs.budget
    requeried = 0
    for i in range(x_pred.shape[0]):
        if inv_mass[i] == 0.0:
            continue
        dx = x_pred[i, 0] - origin[i, 0]
        dy = x_pred[i, 1] - origin[i, 1]
        dz = x_pred[i, 2] - origin[i, 2]
        if dx * dx + dy * dy + dz * dz <= budget[i] * budget[i]:
            continue
        requeried += 1
        step = sqrt(
            (x_pred[i, 0] - x_start[i, 0]) ** 2
            + (x_pred[i, 1] - x_start[i, 1]) ** 2
            + (x_pred[i, 2] - x_start[i, 2]) ** 2
        )
        origin[i, 0], origin[i, 1], origin[i, 2] = x_pred[i, 0], x_pred[i, 1], x_pred[i, 2]
        budget[i] = step / h * time_left + extra_margin
        count = _list_pairs(x_pred, i, pairs, proxies, poses, cloth_thickness, count)
    return count, requeried


@njit(**_JIT_PARALLEL)
def analytic_narrow_phase(
    x_start,
    x_pred,
    inv_mass,
    cand_vertex,
    cand_proxy,
    n_cand,
    t_start,
    t_end,
    kind,
    dims,
    pos0,
    rot0,
    pos1,
    rot1,
    skin,
    mu_s,
    mu_k,
    cloth_thickness,
    hit,
    res,
    c_vertex,
    c_normal,
    c_point,
    c_radius,
    c_disp,
    c_mu_s,
    c_mu_k,
    offset,
):
    """Contacts of this substep from the broad-phase candidates, written from row ``offset``.

    The collider is placed at ``t_end`` (the substep end, where the prediction is). A vertex
    predicted inside the solid that started the substep outside keeps the feature it was
    nearest to at the start (no tunnelling out through the far side of a thin collider).
    Candidates in parallel into the per-candidate scratch ``hit`` / ``res`` (at least
    ``n_cand`` rows), then the rows in candidate order (the same rows as one serial pass).
    Returns the new row count.
    """
    if hit.shape[0] < n_cand or res.shape[0] < n_cand:
        raise ValueError("narrow-phase scratch smaller than the candidate count")
    end_pose = poses_at(t_end, pos0, rot0, pos1, rot1)  # each proxy's pose once, not per candidate
    start_pose = poses_at(t_start, pos0, rot0, pos1, rot1)
    for m in prange(n_cand):
        hit[m] = False
        i = cand_vertex[m]
        k = cand_proxy[m]
        if inv_mass[i] == 0.0 or kind[k] == SDF:  # signed distance grids: sdf_narrow_phase
            continue
        pe, ps = end_pose[k], start_pose[k]
        l0, l1, l2 = _world_to_local(
            pe[0], pe[1], pe[2], pe[3], pe[4], pe[5], pe[6], x_pred[i, 0], x_pred[i, 1], x_pred[i, 2]
        )
        phi, nl0, nl1, nl2, ql0, ql1, ql2 = local_closest(kind[k], dims[k, 0], dims[k, 1], dims[k, 2], l0, l1, l2)
        if phi < 0.0:
            s0, s1, s2 = _world_to_local(
                ps[0], ps[1], ps[2], ps[3], ps[4], ps[5], ps[6], x_start[i, 0], x_start[i, 1], x_start[i, 2]
            )
            phi_s, mn0, mn1, mn2, mq0, mq1, mq2 = local_closest(kind[k], dims[k, 0], dims[k, 1], dims[k, 2], s0, s1, s2)
            if phi_s >= 0.0:
                nl0, nl1, nl2, ql0, ql1, ql2 = mn0, mn1, mn2, mq0, mq1, mq2
        hit[m] = stage_rigid_contact(
            m, i, x_start, x_pred, pe, ps, nl0, nl1, nl2, ql0, ql1, ql2, cloth_thickness + skin[k], res
        )
    return emit_staged_contacts(
        hit,
        res,
        cand_vertex,
        cand_proxy,
        n_cand,
        cloth_thickness,
        skin,
        mu_s,
        mu_k,
        c_vertex,
        c_normal,
        c_point,
        c_radius,
        c_disp,
        c_mu_s,
        c_mu_k,
        offset,
    )


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
