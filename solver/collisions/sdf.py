"""Signed distance grid proxy (rigid body): build from a closed mesh, trilinear queries, narrow phase."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from .._intrinsics import sqrt
from ._jit import _JIT, _JIT_PARALLEL
from .analytic import _world_to_local, emit_staged_contacts, poses_at, stage_rigid_contact
from .geometry import point_triangle_distance

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
                    d = point_triangle_distance(
                        px,
                        py,
                        pz,
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
                                    cand = dist[a, b, c] + spacing * sqrt(di * di + dj * dj + dk * dk)
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
    gx = (
        (1 - fy) * (1 - fz) * (c100 - c000)
        + fy * (1 - fz) * (c110 - c010)
        + (1 - fy) * fz * (c101 - c001)
        + fy * fz * (c111 - c011)
    ) / spacing
    e2 = extra0 * extra0 + extra1 * extra1 + extra2 * extra2
    if e2 > 0.0:
        e = sqrt(e2)
        value = max(value, 0.0) + e
        gx, gy, gz = extra0 / e, extra1 / e, extra2 / e
    g = sqrt(gx * gx + gy * gy + gz * gz)
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


@njit(**_JIT_PARALLEL)
def sdf_narrow_phase(
    x_start,
    x_pred,
    inv_mass,
    cand_vertex,
    cand_proxy,
    n_cand,
    k,
    t_start,
    t_end,
    pos0,
    rot0,
    pos1,
    rot1,
    phi,
    origin,
    spacing,
    cloth_thickness,
    skin,
    mu_s,
    mu_k,
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
    """Contacts with the signed distance grid proxy k (rows from ``offset``), like the analytic ones.

    At the substep end the vertex's local position gives phi and the normal (normalised
    trilinear gradient); the surface point is ``p - phi n``. A vertex predicted inside that
    started the substep outside keeps the normal and surface point of its start position (no
    tunnelling out through the far side of a thin part). Candidates in parallel into the scratch
    ``hit`` / ``res``, then the rows in candidate order. Returns the new row count.
    """
    if hit.shape[0] < n_cand or res.shape[0] < n_cand:
        raise ValueError("narrow-phase scratch smaller than the candidate count")
    # the grid's pose at both ends of the substep, once (a slerp each: it was per vertex)
    pe = poses_at(t_end, pos0, rot0, pos1, rot1)[k]
    ps = poses_at(t_start, pos0, rot0, pos1, rot1)[k]
    for m in prange(n_cand):
        hit[m] = False
        if cand_proxy[m] != k:
            continue
        i = cand_vertex[m]
        if inv_mass[i] == 0.0:
            continue
        l0, l1, l2 = _world_to_local(
            pe[0], pe[1], pe[2], pe[3], pe[4], pe[5], pe[6], x_pred[i, 0], x_pred[i, 1], x_pred[i, 2]
        )
        d, nl0, nl1, nl2 = sdf_sample(phi, origin, spacing, l0, l1, l2)
        ql0, ql1, ql2 = l0 - d * nl0, l1 - d * nl1, l2 - d * nl2
        if d < 0.0:
            s0, s1, s2 = _world_to_local(
                ps[0], ps[1], ps[2], ps[3], ps[4], ps[5], ps[6], x_start[i, 0], x_start[i, 1], x_start[i, 2]
            )
            ds, m0, m1, m2 = sdf_sample(phi, origin, spacing, s0, s1, s2)
            if ds >= 0.0:
                nl0, nl1, nl2 = m0, m1, m2
                ql0, ql1, ql2 = s0 - ds * m0, s1 - ds * m1, s2 - ds * m2
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
