"""Numba kernels of the XPBD solver: one ``solve_<constraint>`` body per constraint type.

Every body follows the same five steps (000 sec. 3, XPBD eq. 18 and the damped eq. 26):
C and its gradients; K = sum_j w_j |grad_j C|^2; the inverse denominator
1 / ((1 + gamma) K + alpha~) (:func:`inverse_denominator`, 0 for a degenerate constraint); one
shared multiplier update :func:`xpbd_delta_lambda`; apply ``w_j grad_j C dlambda``.

alpha~ = alpha / h^2 and gamma = damping / h come in per constraint, computed once per substep
length (``constraints.step_coefficients``). Where K does not depend on the positions
(distance constraints: |grad| = 1; isometric bending: constant stencil; soft pins) the inverse
denominator is precomputed with them: the division it saves sits on every projection's
critical path (measured 24 -> 20 ns per stretch projection).

Each body reads positions from ``x_read`` and adds its correction to ``x_write``. Gauss-Seidel
passes the same array twice (later constraints see the new positions at once); Jacobi passes
the frozen positions and an accumulator, plus a per-vertex hit count for constraint averaging.
Each constraint type then has three small drivers: serial (fixed order, bit-reproducible),
coloured (``prange`` over the blocks of ``coloring.block_schedule``, which share no writable
vertex and are each swept in serial order, then the constraints crossing a cut), and Jacobi.

Arguments come in a fixed order: state arrays, constraint inputs, parameters, then outputs.
``reset_lambda`` (True in a substep's first iteration) zeroes each multiplier just before its
projection: the thread that owns a constraint writes it, where a separate ``lam.fill(0)`` on the
main thread would make every other core fetch the zeroed lines from it (measured on 128x128,
two blocks: 19 -> 13 ns per stretch projection). ``keep_lambda`` False: the multipliers of this
pass are read by no one (the substep's last iteration, not the frame's last substep: the next
substep starts from 0 and the diagnostics read the frame's last), so they are not stored and a
reset pass does not read them either: one stream less per projection (256 x 256 at 20 x 1,
serial, interleaved A/B: 35.6-38.1 -> 38.5-42.9 M projections/s).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from numba import njit, prange
from numba.core.errors import NumbaPerformanceWarning

from . import _numba_setup  # noqa: F401  (cache directory before any compilation)
from ._intrinsics import sqrt

_JIT = dict(cache=True, fastmath={"contract"}, nogil=True, error_model="numpy")
_JIT_PARALLEL = dict(_JIT, parallel=True)
#: Serial drivers loop with plain ``range`` (fixed order, deterministic) but are compiled through
#: Numba's parallel pipeline too: measured 4x more projections/s on the same body (its array
#: analysis hoists index arithmetic out of the loop). No loop is parallelised, so Numba warns.
_JIT_SERIAL = _JIT_PARALLEL
warnings.filterwarnings(
    "ignore", message="(?s).*no transformation for parallel execution was possible", category=NumbaPerformanceWarning
)

#: Below this (1 + gamma) K + alpha~ a constraint has no usable direction and is skipped.
DEGENERATE_DENOMINATOR = 1e-20


@njit(inline="always", **_JIT)
def inverse_denominator(weighted_grad_sq, alpha_tilde, gamma):
    """1 / ((1 + gamma) K + alpha~) of the XPBD update (eq. 26); 0 marks a constraint to skip:
    no vertex can move (K = 0) or no usable direction (a degenerate denominator)."""
    denominator = (1.0 + gamma) * weighted_grad_sq + alpha_tilde
    if not (weighted_grad_sq > 0.0 and denominator >= DEGENERATE_DENOMINATOR):
        return 0.0
    return 1.0 / denominator


@njit(**_JIT)
def inverse_denominators(weighted_grad_sq, alpha_tilde, gamma):
    """:func:`inverse_denominator` of every constraint (for the per-substep-length precompute)."""
    out = np.empty(weighted_grad_sq.shape[0])
    for k in range(out.shape[0]):
        out[k] = inverse_denominator(weighted_grad_sq[k], alpha_tilde[k], gamma[k])
    return out


@njit(inline="always", **_JIT)
def xpbd_delta_lambda(C, alpha_tilde, gamma, grad_dot_displacement, lam, inv_denominator):
    """Shared XPBD multiplier update with constraint damping (XPBD eq. 26).

    ``dlambda = (-C - alpha~ lambda - gamma grad C . (x - x_n)) / ((1 + gamma) K + alpha~)``
    with ``gamma = damping_s / h``; the denominator comes in inverted.
    """
    return (-C - alpha_tilde * lam - gamma * grad_dot_displacement) * inv_denominator


@njit(inline="always", **_JIT)
def clamp_unilateral(lam, dlam, sign):
    """Inequality constraints: keep the accumulated multiplier on one side (sign * lambda >= 0).

    A tether (C = d - L_max <= 0) has sign -1: it may only pull. A contact has sign +1: it may
    only push. Returns the clamped increment.
    """
    new_lam = lam + dlam
    if sign * new_lam < 0.0:
        new_lam = 0.0
    return new_lam - lam


# ----------------------------------------------------------------------------------------------
# Distance: stretch (warp/weft/bias), shear, cross-edge bending and tethers (unilateral).
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def solve_distance(
    k,
    x_read,
    x_substep_start,
    inv_mass,
    vertices,
    rows,
    unilateral,
    reset_lambda,
    keep_lambda,
    lam,
    x_write,
    hit_count,
    count_hits,
    skip_static_j=False,
):
    """C = |x_i - x_j| - L (Mueller 2006; XPBD); grad_i C = n, grad_j C = -n, so K = w_i + w_j.

    ``unilateral`` (tethers, Kim 2012 long range attachments): only C > 0 is corrected and the
    multiplier may only pull. K is constant, so the denominator comes in inverted (0: both
    ends kinematic); the body then divides once, for 1/|d|: a division costs as much as the
    rest of the projection on this CPU. ``skip_static_j`` (a constant in the drivers: True for
    tethers) leaves vertex j unwritten when its correction is zero, as for a tether's pin: every
    tether of a pin would otherwise store to the pin's row and the next one load it back, one
    projection after the other (256 x 256: 26 -> 19 ns a tether). ``rows[k]`` holds the
    constraint's rest length, alpha~, gamma and inverse denominator side by side
    (``StepCoefficients.distance_rows``): one stream instead of four (256 x 256: stretch 24 -> 22 ns).
    """
    if reset_lambda and keep_lambda:
        lam[k] = 0.0
    s_den = rows[k, 3]
    if s_den == 0.0:
        return
    i = vertices[k, 0]
    j = vertices[k, 1]
    dx = x_read[i, 0] - x_read[j, 0]
    dy = x_read[i, 1] - x_read[j, 1]
    dz = x_read[i, 2] - x_read[j, 2]
    length = sqrt(dx * dx + dy * dy + dz * dz)
    if length < 1e-12:
        return
    C = length - rows[k, 0]
    lam_k = 0.0 if reset_lambda else lam[k]
    if unilateral and C <= 0.0 and lam_k == 0.0:
        return
    inv_length = 1.0 / length
    g = rows[k, 2]
    rel = 0.0
    if g > 0.0:
        rel = inv_length * (
            dx * ((x_read[i, 0] - x_substep_start[i, 0]) - (x_read[j, 0] - x_substep_start[j, 0]))
            + dy * ((x_read[i, 1] - x_substep_start[i, 1]) - (x_read[j, 1] - x_substep_start[j, 1]))
            + dz * ((x_read[i, 2] - x_substep_start[i, 2]) - (x_read[j, 2] - x_substep_start[j, 2]))
        )
    dlam = xpbd_delta_lambda(C, rows[k, 1], g, rel, lam_k, s_den)
    if unilateral:
        dlam = clamp_unilateral(lam_k, dlam, -1.0)
    if keep_lambda:
        lam[k] = lam_k + dlam
    si = inv_mass[i] * dlam * inv_length
    sj = inv_mass[j] * dlam * inv_length
    x_write[i, 0] += si * dx
    x_write[i, 1] += si * dy
    x_write[i, 2] += si * dz
    if not (skip_static_j and sj == 0.0):
        x_write[j, 0] -= sj * dx
        x_write[j, 1] -= sj * dy
        x_write[j, 2] -= sj * dz
    if count_hits:
        hit_count[i] += 1.0
        hit_count[j] += 1.0


@njit(**_JIT_SERIAL)
def solve_distance_serial(x, x_substep_start, inv_mass, vertices, rows, unilateral, reset_lambda, keep_lambda, lam):
    sweep_distance(
        0, vertices.shape[0], x, x_substep_start, inv_mass, vertices, rows, unilateral, reset_lambda, keep_lambda, lam
    )


@njit(**_JIT_SERIAL)
def sweep_distance(
    first, stop, x, x_substep_start, inv_mass, vertices, rows, unilateral, reset_lambda, keep_lambda, lam
):
    """Gauss-Seidel over constraints ``first .. stop - 1``: one block of the coloured schedule.

    Like every ``sweep_*`` here it loops over views of its range from index 0: from a run-time
    start, Numba keeps its negative-index wrap-around on every access (isometric bending of
    64 x 64: 320 against 265 us a pass)."""
    dummy = np.empty(0)
    vertices, rows, lam = vertices[first:stop], rows[first:stop], lam[first:stop]
    if unilateral:  # tethers (constants in each loop: the other branch folds away)
        for k in range(stop - first):
            solve_distance(
                k,
                x,
                x_substep_start,
                inv_mass,
                vertices,
                rows,
                True,
                reset_lambda,
                keep_lambda,
                lam,
                x,
                dummy,
                False,
                True,
            )
    else:
        for k in range(stop - first):
            solve_distance(
                k,
                x,
                x_substep_start,
                inv_mass,
                vertices,
                rows,
                False,
                reset_lambda,
                keep_lambda,
                lam,
                x,
                dummy,
                False,
                False,
            )


@njit(**_JIT_PARALLEL)
def solve_distance_colored(
    x, x_substep_start, inv_mass, vertices, rows, unilateral, block_offsets, reset_lambda, keep_lambda, lam
):
    n_blocks = block_offsets.shape[0] - 2
    for b in prange(n_blocks):
        sweep_distance(
            block_offsets[b],
            block_offsets[b + 1],
            x,
            x_substep_start,
            inv_mass,
            vertices,
            rows,
            unilateral,
            reset_lambda,
            keep_lambda,
            lam,
        )
    sweep_distance(
        block_offsets[n_blocks],
        block_offsets[n_blocks + 1],
        x,
        x_substep_start,
        inv_mass,
        vertices,
        rows,
        unilateral,
        reset_lambda,
        keep_lambda,
        lam,
    )


@njit(**_JIT_SERIAL)
def solve_distance_jacobi(
    x, x_substep_start, inv_mass, vertices, rows, unilateral, reset_lambda, keep_lambda, lam, dx, hit_count
):
    for k in range(vertices.shape[0]):
        solve_distance(
            k,
            x,
            x_substep_start,
            inv_mass,
            vertices,
            rows,
            unilateral,
            reset_lambda,
            keep_lambda,
            lam,
            dx,
            hit_count,
            True,
        )


# ----------------------------------------------------------------------------------------------
# Soft pins: goal constraints C = |x_i - target_i| pulling a partially pinned vertex home.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def solve_soft_pin(
    k,
    x_read,
    inv_mass,
    vertex,
    target,
    alpha_tilde,
    inv_denominator,
    reset_lambda,
    keep_lambda,
    lam,
    x_write,
    hit_count,
    count_hits,
):
    """C = |x_i - g_i| (goal / attachment constraint); grad C = (x_i - g_i) / |x_i - g_i|, K = w_i."""
    if reset_lambda and keep_lambda:
        lam[k] = 0.0
    s_den = inv_denominator[k]
    i = vertex[k]
    dx = x_read[i, 0] - target[k, 0]
    dy = x_read[i, 1] - target[k, 1]
    dz = x_read[i, 2] - target[k, 2]
    length = sqrt(dx * dx + dy * dy + dz * dz)
    if length < 1e-12 or s_den == 0.0:
        return
    lam_k = 0.0 if reset_lambda else lam[k]
    dlam = xpbd_delta_lambda(length, alpha_tilde[k], 0.0, 0.0, lam_k, s_den)
    if keep_lambda:
        lam[k] = lam_k + dlam
    s = inv_mass[i] * dlam / length
    x_write[i, 0] += s * dx
    x_write[i, 1] += s * dy
    x_write[i, 2] += s * dz
    if count_hits:
        hit_count[i] += 1.0


@njit(**_JIT_SERIAL)
def solve_soft_pin_serial(x, inv_mass, vertex, target, alpha_tilde, inv_denominator, reset_lambda, keep_lambda, lam):
    sweep_soft_pin(
        0, vertex.shape[0], x, inv_mass, vertex, target, alpha_tilde, inv_denominator, reset_lambda, keep_lambda, lam
    )


@njit(**_JIT_SERIAL)
def sweep_soft_pin(
    first, stop, x, inv_mass, vertex, target, alpha_tilde, inv_denominator, reset_lambda, keep_lambda, lam
):
    """Goals ``first .. stop - 1`` (see :func:`sweep_distance`)."""
    dummy = np.empty(0)
    vertex, target, alpha_tilde = vertex[first:stop], target[first:stop], alpha_tilde[first:stop]
    inv_denominator, lam = inv_denominator[first:stop], lam[first:stop]
    for k in range(stop - first):
        solve_soft_pin(
            k,
            x,
            inv_mass,
            vertex,
            target,
            alpha_tilde,
            inv_denominator,
            reset_lambda,
            keep_lambda,
            lam,
            x,
            dummy,
            False,
        )


@njit(**_JIT_PARALLEL)
def solve_soft_pin_colored(x, inv_mass, vertex, target, alpha_tilde, inv_denominator, reset_lambda, keep_lambda, lam):
    dummy = np.empty(0)
    for k in prange(vertex.shape[0]):  # one goal per vertex: no two share a vertex
        solve_soft_pin(
            k,
            x,
            inv_mass,
            vertex,
            target,
            alpha_tilde,
            inv_denominator,
            reset_lambda,
            keep_lambda,
            lam,
            x,
            dummy,
            False,
        )


@njit(**_JIT_SERIAL)
def solve_soft_pin_jacobi(
    x, inv_mass, vertex, target, alpha_tilde, inv_denominator, reset_lambda, keep_lambda, lam, dx, hit_count
):
    for k in range(vertex.shape[0]):
        solve_soft_pin(
            k,
            x,
            inv_mass,
            vertex,
            target,
            alpha_tilde,
            inv_denominator,
            reset_lambda,
            keep_lambda,
            lam,
            dx,
            hit_count,
            True,
        )


# ----------------------------------------------------------------------------------------------
# Dihedral-angle bending.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def small_angle_atan2(y, x):
    """atan2(y, x), by its Taylor series when 0 <= |y| <= x / 4 (a cloth hinge near flat).

    atan t = t - t^3/3 + t^5/5 - ... ; 12 terms leave an error below t^25/25 = 4e-17 for
    |t| <= 1/4, so the result equals the library's to rounding. The series is evaluated in
    t^2 by Estrin's scheme (short dependency chains); other arguments go to ``math.atan2``.
    """
    if not (x > 0.0 and abs(y) <= 0.25 * x):
        return math.atan2(y, x)
    t = y / x
    z = t * t
    z2 = z * z
    z4 = z2 * z2
    z8 = z4 * z4
    p01 = 1.0 - z * (1.0 / 3.0)
    p23 = 1.0 / 5.0 - z * (1.0 / 7.0)
    p45 = 1.0 / 9.0 - z * (1.0 / 11.0)
    p67 = 1.0 / 13.0 - z * (1.0 / 15.0)
    p89 = 1.0 / 17.0 - z * (1.0 / 19.0)
    pab = 1.0 / 21.0 - z * (1.0 / 23.0)
    q0 = p01 + z2 * p23
    q1 = p45 + z2 * p67
    q2 = p89 + z2 * pab
    return t * (q0 + z4 * q1 + z8 * q2)


@njit(inline="always", **_JIT)
def dihedral_angle_and_gradient(x, i1, i2, i3, i4, rest_cos=1.0, rest_sin=0.0):
    """Signed dihedral angle of the hinge x3-x4 with wings x1, x2, and its 4-point gradient.

    theta = atan2((n1 x n2) . e, n1 . n2), n1 ~ (x1-x3) x (x1-x4), n2 ~ (x2-x4) x (x2-x3),
    e = x4 - x3. The gradient is the analytic stencil of Bridson et al. 2003 (equivalent to the
    PBD paper's appendix, without the 1/sqrt(1 - d^2) singularity of the acos form at flat
    hinges): grad_1 = -|e| N1/|N1|^2, grad_2 = -|e| N2/|N2|^2, and the edge vertices take the
    rest so the four sum to zero. Returns ``(theta, ok, g1, g2, g3, g4)``, each g a 3-tuple
    (tuples stay in registers; a scratch array would be stored and reloaded), ok False for
    degenerate wings or hinge. Given the rest angle's ``rest_cos`` / ``rest_sin``, theta is
    measured from it (theta - theta_0 in (-pi, pi], the bending constraint's C): the atan2
    arguments are rotated by -theta_0, so a hinge near its rest angle, curved or flat, takes the
    cheap branch of :func:`small_angle_atan2`.
    """
    x3x, x3y, x3z = x[i3, 0], x[i3, 1], x[i3, 2]
    x4x, x4y, x4z = x[i4, 0], x[i4, 1], x[i4, 2]
    ex, ey, ez = x4x - x3x, x4y - x3y, x4z - x3z
    e_sq = ex * ex + ey * ey + ez * ez
    a1x, a1y, a1z = x[i1, 0] - x3x, x[i1, 1] - x3y, x[i1, 2] - x3z
    b1x, b1y, b1z = x[i1, 0] - x4x, x[i1, 1] - x4y, x[i1, 2] - x4z
    a2x, a2y, a2z = x[i2, 0] - x4x, x[i2, 1] - x4y, x[i2, 2] - x4z
    b2x, b2y, b2z = x[i2, 0] - x3x, x[i2, 1] - x3y, x[i2, 2] - x3z
    n1x, n1y, n1z = a1y * b1z - a1z * b1y, a1z * b1x - a1x * b1z, a1x * b1y - a1y * b1x
    n2x, n2y, n2z = a2y * b2z - a2z * b2y, a2z * b2x - a2x * b2z, a2x * b2y - a2y * b2x
    n1_sq = n1x * n1x + n1y * n1y + n1z * n1z
    n2_sq = n2x * n2x + n2y * n2y + n2z * n2z
    zero = (0.0, 0.0, 0.0)
    if e_sq < 1e-24 or n1_sq < 1e-16 * e_sq * e_sq or n2_sq < 1e-16 * e_sq * e_sq:
        return 0.0, False, zero, zero, zero, zero
    e_len = sqrt(e_sq)
    inv_e_len = 1.0 / e_len
    cx, cy, cz = n1y * n2z - n1z * n2y, n1z * n2x - n1x * n2z, n1x * n2y - n1y * n2x
    # atan2 is scale free: both arguments carry the same factor |N1| |N2| (and |e| folded in).
    sin_part = cx * ex + cy * ey + cz * ez  # |N1| |N2| |e|^2 sin(theta)
    cos_part = (n1x * n2x + n1y * n2y + n1z * n2z) * e_len  # |N1| |N2| |e|^2 cos(theta)
    theta = small_angle_atan2(sin_part * rest_cos - cos_part * rest_sin, cos_part * rest_cos + sin_part * rest_sin)
    u1 = -1.0 / n1_sq
    u2 = -1.0 / n2_sq
    m1x, m1y, m1z = u1 * n1x, u1 * n1y, u1 * n1z  # -N1/|N1|^2
    m2x, m2y, m2z = u2 * n2x, u2 * n2y, u2 * n2z
    p1 = (b1x * ex + b1y * ey + b1z * ez) * inv_e_len  # (x1 - x4) . e / |e|
    p2 = (a2x * ex + a2y * ey + a2z * ez) * inv_e_len  # (x2 - x4) . e / |e|
    q1 = (a1x * ex + a1y * ey + a1z * ez) * inv_e_len  # (x1 - x3) . e / |e|
    q2 = (b2x * ex + b2y * ey + b2z * ez) * inv_e_len  # (x2 - x3) . e / |e|
    g1 = (e_len * m1x, e_len * m1y, e_len * m1z)
    g2 = (e_len * m2x, e_len * m2y, e_len * m2z)
    g3 = (p1 * m1x + p2 * m2x, p1 * m1y + p2 * m2y, p1 * m1z + p2 * m2z)
    g4 = (-(q1 * m1x + q2 * m2x), -(q1 * m1y + q2 * m2y), -(q1 * m1z + q2 * m2z))
    return theta, True, g1, g2, g3, g4


@njit(inline="always", **_JIT)
def wrap_angle(angle):
    """Map an angle difference into (-pi, pi] so a hinge folded past flat never jumps by 2 pi."""
    while angle > math.pi:
        angle -= 2.0 * math.pi
    while angle <= -math.pi:
        angle += 2.0 * math.pi
    return angle


@njit(inline="always", **_JIT)
def _moved_along(x_read, x_substep_start, v, g):
    """g . (x_v - x_v at the substep start): one vertex's share of grad C . (x - x_n)."""
    return (
        g[0] * (x_read[v, 0] - x_substep_start[v, 0])
        + g[1] * (x_read[v, 1] - x_substep_start[v, 1])
        + g[2] * (x_read[v, 2] - x_substep_start[v, 2])
    )


@njit(inline="always", **_JIT)
def _add_scaled(x_write, v, s, g):
    x_write[v, 0] += s * g[0]
    x_write[v, 1] += s * g[1]
    x_write[v, 2] += s * g[2]


@njit(inline="always", **_JIT)
def _norm_sq(g):
    return g[0] * g[0] + g[1] * g[1] + g[2] * g[2]


@njit(inline="always", **_JIT)
def solve_bend_dihedral(
    k,
    x_read,
    x_substep_start,
    inv_mass,
    vertices,
    rest_cos,
    rest_sin,
    alpha_tilde,
    gamma,
    reset_lambda,
    keep_lambda,
    lam,
    x_write,
    hit_count,
    count_hits,
):
    """C = theta - theta_0 (wrapped), theta the signed dihedral angle (PBD 2006 sec. 4.2, atan2 form).

    ``vertices[k] = (wing 1, wing 2, hinge a, hinge b)``; the rest angle theta_0 enters as its
    cosine and sine; compliance in 1/(N m) per hinge. K depends on the fold, so the
    denominator is formed here.
    """
    if reset_lambda and keep_lambda:
        lam[k] = 0.0
    v1, v2, v3, v4 = vertices[k, 0], vertices[k, 1], vertices[k, 2], vertices[k, 3]
    C, ok, g1, g2, g3, g4 = dihedral_angle_and_gradient(x_read, v1, v2, v3, v4, rest_cos[k], rest_sin[k])
    if not ok:
        return
    w1, w2, w3, w4 = inv_mass[v1], inv_mass[v2], inv_mass[v3], inv_mass[v4]
    weighted = w1 * _norm_sq(g1) + w2 * _norm_sq(g2) + w3 * _norm_sq(g3) + w4 * _norm_sq(g4)
    g = gamma[k]
    rel = 0.0
    if g > 0.0:
        rel = (
            _moved_along(x_read, x_substep_start, v1, g1)
            + _moved_along(x_read, x_substep_start, v2, g2)
            + _moved_along(x_read, x_substep_start, v3, g3)
            + _moved_along(x_read, x_substep_start, v4, g4)
        )
    at = alpha_tilde[k]
    lam_k = 0.0 if reset_lambda else lam[k]
    dlam = xpbd_delta_lambda(C, at, g, rel, lam_k, inverse_denominator(weighted, at, g))
    if keep_lambda:
        lam[k] = lam_k + dlam
    _add_scaled(x_write, v1, w1 * dlam, g1)
    _add_scaled(x_write, v2, w2 * dlam, g2)
    _add_scaled(x_write, v3, w3 * dlam, g3)
    _add_scaled(x_write, v4, w4 * dlam, g4)
    if count_hits:
        hit_count[v1] += 1.0
        hit_count[v2] += 1.0
        hit_count[v3] += 1.0
        hit_count[v4] += 1.0


@njit(**_JIT_SERIAL)
def solve_bend_dihedral_serial(
    x, x_substep_start, inv_mass, vertices, rest_cos, rest_sin, alpha_tilde, gamma, reset_lambda, keep_lambda, lam
):
    sweep_bend_dihedral(
        0,
        vertices.shape[0],
        x,
        x_substep_start,
        inv_mass,
        vertices,
        rest_cos,
        rest_sin,
        alpha_tilde,
        gamma,
        reset_lambda,
        keep_lambda,
        lam,
    )


@njit(**_JIT_SERIAL)
def sweep_bend_dihedral(
    first,
    stop,
    x,
    x_substep_start,
    inv_mass,
    vertices,
    rest_cos,
    rest_sin,
    alpha_tilde,
    gamma,
    reset_lambda,
    keep_lambda,
    lam,
):
    """Hinges ``first .. stop - 1`` (see :func:`sweep_distance`)."""
    dummy = np.empty(0)
    vertices, rest_cos, rest_sin = vertices[first:stop], rest_cos[first:stop], rest_sin[first:stop]
    alpha_tilde, gamma, lam = alpha_tilde[first:stop], gamma[first:stop], lam[first:stop]
    for k in range(stop - first):
        solve_bend_dihedral(
            k,
            x,
            x_substep_start,
            inv_mass,
            vertices,
            rest_cos,
            rest_sin,
            alpha_tilde,
            gamma,
            reset_lambda,
            keep_lambda,
            lam,
            x,
            dummy,
            False,
        )


@njit(**_JIT_PARALLEL)
def solve_bend_dihedral_colored(
    x,
    x_substep_start,
    inv_mass,
    vertices,
    rest_cos,
    rest_sin,
    alpha_tilde,
    gamma,
    block_offsets,
    reset_lambda,
    keep_lambda,
    lam,
):
    n_blocks = block_offsets.shape[0] - 2
    for b in prange(n_blocks):
        sweep_bend_dihedral(
            block_offsets[b],
            block_offsets[b + 1],
            x,
            x_substep_start,
            inv_mass,
            vertices,
            rest_cos,
            rest_sin,
            alpha_tilde,
            gamma,
            reset_lambda,
            keep_lambda,
            lam,
        )
    sweep_bend_dihedral(
        block_offsets[n_blocks],
        block_offsets[n_blocks + 1],
        x,
        x_substep_start,
        inv_mass,
        vertices,
        rest_cos,
        rest_sin,
        alpha_tilde,
        gamma,
        reset_lambda,
        keep_lambda,
        lam,
    )


@njit(**_JIT_SERIAL)
def solve_bend_dihedral_jacobi(
    x,
    x_substep_start,
    inv_mass,
    vertices,
    rest_cos,
    rest_sin,
    alpha_tilde,
    gamma,
    reset_lambda,
    keep_lambda,
    lam,
    dx,
    hit_count,
):
    for k in range(vertices.shape[0]):
        solve_bend_dihedral(
            k,
            x,
            x_substep_start,
            inv_mass,
            vertices,
            rest_cos,
            rest_sin,
            alpha_tilde,
            gamma,
            reset_lambda,
            keep_lambda,
            lam,
            dx,
            hit_count,
            True,
        )


# ----------------------------------------------------------------------------------------------
# Isometric (quadratic) bending, Bergou et al. 2006.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def solve_bend_isometric(
    k,
    x_read,
    x_substep_start,
    inv_mass,
    vertices,
    stencil,
    alpha_tilde,
    gamma,
    inv_denominator,
    reset_lambda,
    keep_lambda,
    lam,
    x_write,
    hit_count,
    count_hits,
):
    """Vector constraint C = sum_i s_i x_i (3 components), s = sqrt(6/(A0+A1)) K (Bergou 2006).

    Because Q = s s^T (a rank-one 4x4 matrix precomputed from the rest state), the energy
    1/2 C.C / alpha equals 1/2 x^T Q x / alpha: quadratic, with constant gradients s_i per
    component. All three components share the constant K = sum_i w_i s_i^2, so the inverted
    denominator comes in and one vector dlambda does it. ``lam`` has shape (m, 3).
    """
    if reset_lambda and keep_lambda:
        lam[k, 0] = 0.0
        lam[k, 1] = 0.0
        lam[k, 2] = 0.0
    s_den = inv_denominator[k]
    if s_den == 0.0:
        return
    cx = 0.0
    cy = 0.0
    cz = 0.0
    rx = 0.0
    ry = 0.0
    rz = 0.0
    for a in range(4):
        v = vertices[k, a]
        s = stencil[k, a]
        cx += s * x_read[v, 0]
        cy += s * x_read[v, 1]
        cz += s * x_read[v, 2]
        rx += s * (x_read[v, 0] - x_substep_start[v, 0])
        ry += s * (x_read[v, 1] - x_substep_start[v, 1])
        rz += s * (x_read[v, 2] - x_substep_start[v, 2])
    g = gamma[k]
    if reset_lambda and not keep_lambda:  # lambda = 0: alpha~ lambda = 0, alpha~ not even read
        dlx = xpbd_delta_lambda(cx, 0.0, g, rx, 0.0, s_den)
        dly = xpbd_delta_lambda(cy, 0.0, g, ry, 0.0, s_den)
        dlz = xpbd_delta_lambda(cz, 0.0, g, rz, 0.0, s_den)
    else:
        at = alpha_tilde[k]
        dlx = xpbd_delta_lambda(cx, at, g, rx, lam[k, 0], s_den)
        dly = xpbd_delta_lambda(cy, at, g, ry, lam[k, 1], s_den)
        dlz = xpbd_delta_lambda(cz, at, g, rz, lam[k, 2], s_den)
    if keep_lambda:
        lam[k, 0] += dlx
        lam[k, 1] += dly
        lam[k, 2] += dlz
    for a in range(4):
        v = vertices[k, a]
        s = inv_mass[v] * stencil[k, a]
        x_write[v, 0] += s * dlx
        x_write[v, 1] += s * dly
        x_write[v, 2] += s * dlz
        if count_hits:
            hit_count[v] += 1.0


@njit(inline="always", **_JIT)
def _sweep_bend_isometric(
    first,
    stop,
    x,
    x_substep_start,
    inv_mass,
    vertices,
    stencil,
    alpha_tilde,
    gamma,
    inv_denominator,
    reset_lambda,
    keep_lambda,
    lam,
):
    """Gauss-Seidel over hinges ``first .. stop - 1``, with the multiplier flags constant in each
    loop: read at run time, both of them cost a hinge 35 ns instead of 29 (256 x 256)."""
    dummy = np.empty(0)
    if reset_lambda and not keep_lambda:
        for k in range(first, stop):
            solve_bend_isometric(
                k,
                x,
                x_substep_start,
                inv_mass,
                vertices,
                stencil,
                alpha_tilde,
                gamma,
                inv_denominator,
                True,
                False,
                lam,
                x,
                dummy,
                False,
            )
    else:  # stored even when not asked to keep: harmless
        for k in range(first, stop):
            solve_bend_isometric(
                k,
                x,
                x_substep_start,
                inv_mass,
                vertices,
                stencil,
                alpha_tilde,
                gamma,
                inv_denominator,
                reset_lambda,
                True,
                lam,
                x,
                dummy,
                False,
            )


@njit(**_JIT_SERIAL)
def solve_bend_isometric_serial(
    x, x_substep_start, inv_mass, vertices, stencil, alpha_tilde, gamma, inv_denominator, reset_lambda, keep_lambda, lam
):
    _sweep_bend_isometric(
        0,
        vertices.shape[0],
        x,
        x_substep_start,
        inv_mass,
        vertices,
        stencil,
        alpha_tilde,
        gamma,
        inv_denominator,
        reset_lambda,
        keep_lambda,
        lam,
    )


@njit(**_JIT_SERIAL)
def sweep_bend_isometric(
    first,
    stop,
    x,
    x_substep_start,
    inv_mass,
    vertices,
    stencil,
    alpha_tilde,
    gamma,
    inv_denominator,
    reset_lambda,
    keep_lambda,
    lam,
):
    """Hinges ``first .. stop - 1`` (see :func:`sweep_distance`)."""
    _sweep_bend_isometric(
        0,
        stop - first,
        x,
        x_substep_start,
        inv_mass,
        vertices[first:stop],
        stencil[first:stop],
        alpha_tilde[first:stop],
        gamma[first:stop],
        inv_denominator[first:stop],
        reset_lambda,
        keep_lambda,
        lam[first:stop],
    )


@njit(**_JIT_PARALLEL)
def solve_bend_isometric_colored(
    x,
    x_substep_start,
    inv_mass,
    vertices,
    stencil,
    alpha_tilde,
    gamma,
    inv_denominator,
    block_offsets,
    reset_lambda,
    keep_lambda,
    lam,
):
    n_blocks = block_offsets.shape[0] - 2
    for b in prange(n_blocks):
        sweep_bend_isometric(
            block_offsets[b],
            block_offsets[b + 1],
            x,
            x_substep_start,
            inv_mass,
            vertices,
            stencil,
            alpha_tilde,
            gamma,
            inv_denominator,
            reset_lambda,
            keep_lambda,
            lam,
        )
    sweep_bend_isometric(
        block_offsets[n_blocks],
        block_offsets[n_blocks + 1],
        x,
        x_substep_start,
        inv_mass,
        vertices,
        stencil,
        alpha_tilde,
        gamma,
        inv_denominator,
        reset_lambda,
        keep_lambda,
        lam,
    )


@njit(**_JIT_SERIAL)
def solve_bend_isometric_jacobi(
    x,
    x_substep_start,
    inv_mass,
    vertices,
    stencil,
    alpha_tilde,
    gamma,
    inv_denominator,
    reset_lambda,
    keep_lambda,
    lam,
    dx,
    hit_count,
):
    for k in range(vertices.shape[0]):
        solve_bend_isometric(
            k,
            x,
            x_substep_start,
            inv_mass,
            vertices,
            stencil,
            alpha_tilde,
            gamma,
            inv_denominator,
            reset_lambda,
            keep_lambda,
            lam,
            dx,
            hit_count,
            True,
        )


# ----------------------------------------------------------------------------------------------
# Integration, Jacobi averaging and state checks.
# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def _predict_vertex(i, x, v, inv_mass, gravity, extra_acceleration, has_extra, decay, wind, h, x_substep_start):
    for d in range(3):
        x_substep_start[i, d] = x[i, d]
    if inv_mass[i] > 0.0:
        for d in range(3):
            a = gravity[d]
            if has_extra:
                a += extra_acceleration[i, d]
            # Decay the incoming relative velocity, then add h a: a vertex at rest gets exactly
            # h a, so drag (zero at rest) cannot weaken gravity in a static drape by exp(-rate h).
            vel = wind[d] + (v[i, d] - wind[d]) * decay + h * a
            v[i, d] = vel
            x[i, d] += h * vel


@njit(inline="always", **_JIT)
def _place_kinematic(x, kinematic_index, kinematic_start, kinematic_end, t_end):
    for k in range(kinematic_index.shape[0]):
        i = kinematic_index[k]
        for d in range(3):
            x[i, d] = kinematic_start[k, d] + t_end * (kinematic_end[k, d] - kinematic_start[k, d])


@njit(**_JIT)
def predict_positions(
    x,
    v,
    inv_mass,
    gravity,
    extra_acceleration,
    air_drag_per_s,
    wind,
    kinematic_index,
    kinematic_start,
    kinematic_end,
    t_end,
    h,
    x_substep_start,
):
    """Semi-implicit Euler prediction (000 sec. 1) plus kinematic targets at the substep end.

    Air drag decays the velocity relative to the wind exactly, ``exp(-rate h)``, so the
    result does not depend on the substep count. ``extra_acceleration`` (n,3) is the learned
    acceleration hook (or an empty (0,3) array). Kinematic vertices move to the linear
    interpolation of their start/end targets at ``t_end`` (fraction of the frame).
    """
    decay = math.exp(-air_drag_per_s * h)
    has_extra = extra_acceleration.shape[0] == x.shape[0]
    for i in range(x.shape[0]):
        _predict_vertex(i, x, v, inv_mass, gravity, extra_acceleration, has_extra, decay, wind, h, x_substep_start)
    _place_kinematic(x, kinematic_index, kinematic_start, kinematic_end, t_end)


@njit(**_JIT_PARALLEL)
def predict_positions_blocks(
    x,
    v,
    inv_mass,
    gravity,
    extra_acceleration,
    air_drag_per_s,
    wind,
    kinematic_index,
    kinematic_start,
    kinematic_end,
    t_end,
    h,
    x_substep_start,
    vertex_order,
    vertex_offsets,
):
    """:func:`predict_positions` for the coloured mode: each block's thread predicts the vertices
    of its part (``vertex_order[vertex_offsets[b]:vertex_offsets[b + 1]]``), so they stay in the
    cache of the core that projects their constraints next (the serial prediction on the main
    thread pulled every other block's vertices across: 64x64, 2 blocks, 0.5 -> 1.0-2.5 ms a frame).
    Per vertex the same arithmetic as the serial one, so the same bits."""
    decay = math.exp(-air_drag_per_s * h)
    has_extra = extra_acceleration.shape[0] == x.shape[0]
    for b in prange(vertex_offsets.shape[0] - 1):
        predict_vertex_range(
            vertex_offsets[b],
            vertex_offsets[b + 1],
            vertex_order,
            x,
            v,
            inv_mass,
            gravity,
            extra_acceleration,
            has_extra,
            decay,
            wind,
            h,
            x_substep_start,
        )
    _place_kinematic(x, kinematic_index, kinematic_start, kinematic_end, t_end)


@njit(**_JIT_SERIAL)
def predict_vertex_range(
    first, stop, vertex_order, x, v, inv_mass, gravity, extra_acceleration, has_extra, decay, wind, h, x_substep_start
):
    """The prediction of vertices ``vertex_order[first:stop]`` (one block)."""
    order = vertex_order[first:stop]
    for k in range(stop - first):
        _predict_vertex(
            order[k], x, v, inv_mass, gravity, extra_acceleration, has_extra, decay, wind, h, x_substep_start
        )


@njit(**_JIT)
def interpolate_targets(start, end, slot, t, out):
    """Goal k at fraction t of the frame: ``out[k] = lerp(start[slot[k]], end[slot[k]], t)``
    (the goals are in solve order, the targets in the caller's order)."""
    for k in range(slot.shape[0]):
        s = slot[k]
        for d in range(3):
            out[k, d] = start[s, d] + t * (end[s, d] - start[s, d])


@njit(**_JIT)
def apply_jacobi(x, dx, hit_count, omega):
    """x += omega * dx / hits: constraint averaging with over-relaxation (Macklin 2014); clears buffers."""
    for i in range(x.shape[0]):
        if hit_count[i] > 0.0:
            s = omega / hit_count[i]
            for d in range(3):
                x[i, d] += s * dx[i, d]
                dx[i, d] = 0.0
            hit_count[i] = 0.0


@njit(**_JIT)
def update_velocities(x, x_substep_start, h, v):
    """v = (x - x_n) / h after projection (000 sec. 1): corrections become velocity changes."""
    inv_h = 1.0 / h
    for i in range(x.shape[0]):
        for d in range(3):
            v[i, d] = (x[i, d] - x_substep_start[i, d]) * inv_h


@njit(**_JIT_PARALLEL)
def update_velocities_blocks(x, x_substep_start, h, v, vertex_order, vertex_offsets):
    """:func:`update_velocities` with each block's vertices on the thread that owns them (see
    :func:`predict_positions_blocks`)."""
    for b in prange(vertex_offsets.shape[0] - 1):
        velocity_range(vertex_offsets[b], vertex_offsets[b + 1], vertex_order, x, x_substep_start, h, v)


@njit(**_JIT_SERIAL)
def velocity_range(first, stop, vertex_order, x, x_substep_start, h, v):
    """:func:`update_velocities` for vertices ``vertex_order[first:stop]`` (one block)."""
    inv_h = 1.0 / h
    order = vertex_order[first:stop]
    for k in range(stop - first):
        i = order[k]
        for d in range(3):
            v[i, d] = (x[i, d] - x_substep_start[i, d]) * inv_h


@njit(**_JIT)
def first_bad_vertex(x, v, max_speed):
    """Index of the first vertex with a non-finite position/velocity or a speed above the limit; -1 if none."""
    limit_sq = max_speed * max_speed
    for i in range(x.shape[0]):
        s = 0.0
        for d in range(3):
            if not (math.isfinite(x[i, d]) and math.isfinite(v[i, d])):
                return i
            s += v[i, d] * v[i, d]
        if s > limit_sq:
            return i
    return -1
