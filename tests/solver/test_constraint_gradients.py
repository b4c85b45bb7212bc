"""Constraint gradients against central finite differences, and the geometry of one projection.

The kernels never return their gradients except for the dihedral angle, so for the others the
gradient is read back from one projection with alpha = 0 and no damping: the XPBD update moves
vertex j by w_j grad_j C dlambda, hence grad_j C = dx_j / (w_j dlambda). That gradient is
compared with central differences of C written out independently here, and dlambda with
-C / sum_j w_j |grad_j C|^2 (XPBD eq. 18 with alpha~ = 0) built from the finite differences.
"""

import math

import kernel_calls as kc
import numpy as np
import pytest

from selvedge.solver import Cloth, ClothOptions, grid_mesh
from selvedge.solver import constraints as cs
from selvedge.solver import kernels as kn

SEEDS = (0, 1, 2, 3, 4)
EPS = 1e-6  # central difference step, m: truncation ~EPS^2 = 1e-12, round-off ~1e-16/EPS = 1e-10
FD_TOL = 1e-6  # absolute tolerance on O(1) gradients: far above both error sources
H = 1.0 / 240.0


def central_difference(f, x: np.ndarray) -> np.ndarray:
    """d f / d x for scalar f of an (n,3) array, by central differences."""
    grad = np.zeros_like(x)
    for i in range(x.shape[0]):
        for d in range(3):
            xp, xm = x.copy(), x.copy()
            xp[i, d] += EPS
            xm[i, d] -= EPS
            grad[i, d] = (f(xp) - f(xm)) / (2.0 * EPS)
    return grad


def implied_gradient(x_before, x_after, inv_mass, verts, dlam):
    """grad_j C = (x_after - x_before)_j / (w_j dlambda) for the constraint's vertices."""
    return np.stack([(x_after[v] - x_before[v]) / (inv_mass[v] * dlam) for v in verts])


# ----------------------------------------------------------------------------------------------
# Distance constraints: stretch, shear, cross-edge bending, tethers (all the same kernel)
# ----------------------------------------------------------------------------------------------
def _cloth_with_every_distance_set():
    pos, faces, uv = grid_mesh(5, 5, 1.0, 1.0)
    pins = np.zeros(25)
    pins[[20, 24]] = 1.0
    cloth = Cloth(
        pos, faces, uvs=uv, pin_weights=pins, options=ClothOptions(bending_model="cross_edge", tethers=True, shear=True)
    )
    sets = {c.name: c for c in cloth.constraint_sets}
    assert {"stretch", "shear", "bend", "tether"} <= set(sets)
    assert all(sets[k].kind == "distance" and sets[k].count > 0 for k in ("stretch", "shear", "bend", "tether"))
    return cloth, sets


@pytest.mark.parametrize("seed", SEEDS)
def test_distance_constraint_gradients_match_finite_differences(seed):
    rng = np.random.default_rng(seed)
    cloth, sets = _cloth_with_every_distance_set()
    n = cloth.rest_positions.shape[0]
    for name in ("stretch", "shear", "bend", "tether"):
        c = sets[name]
        for k in rng.choice(c.count, size=min(4, c.count), replace=False):
            i, j = (int(v) for v in c.vertices[k])
            rest = float(c.params["rest_length"][k])
            x = cloth.rest_positions + rng.normal(scale=0.15, size=(n, 3))
            if name == "tether":  # a tether acts only when stretched beyond its length: make it so
                x[i] = x[j] + (x[i] - x[j]) / np.linalg.norm(x[i] - x[j]) * rest * rng.uniform(1.1, 1.5)
            w = rng.uniform(0.5, 2.0, size=n)

            def C(y):
                return np.linalg.norm(y[i] - y[j]) - rest

            fd = central_difference(C, x)
            after, lam = x.copy(), np.zeros(1)
            kc.distance_serial(
                after,
                x.copy(),
                w,
                c.vertices[k : k + 1].copy(),
                c.params["rest_length"][k : k + 1].copy(),
                np.zeros(1),
                np.zeros(1),
                c.unilateral,
                H,
                lam,
            )
            g = implied_gradient(x, after, w, (i, j), lam[0])
            np.testing.assert_allclose(g, fd[[i, j]], atol=FD_TOL)
            others = np.setdiff1d(np.arange(n), [i, j])
            assert np.abs(fd[others]).max() == 0.0 and np.all(after[others] == x[others])
            np.testing.assert_allclose(g.sum(axis=0), 0.0, atol=1e-12)  # translation invariance
            K = np.sum(w[:, None] * fd**2)
            assert lam[0] == pytest.approx(-C(x) / K, rel=1e-6)
            assert abs(C(after)) < 1e-12 * max(1.0, rest)  # alpha = 0: one projection is exact


def test_tether_is_unilateral():
    """A slack tether (C < 0) moves nothing; a taut one pulls the ends together, never pushes."""
    x = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0]])
    w = np.array([1.0, 0.0])
    verts = np.array([[0, 1]], np.int32)
    for length, moves in ((1.0, False), (0.4, True)):
        y, lam = x.copy(), np.zeros(1)
        kc.distance_serial(y, x.copy(), w, verts, np.array([length]), np.zeros(1), np.zeros(1), True, H, lam)
        if moves:
            assert y[0, 0] == pytest.approx(0.1, abs=1e-15) and lam[0] < 0.0  # pulled to 0.4 m, pull sign
        else:
            assert np.all(y == x) and lam[0] == 0.0


# ----------------------------------------------------------------------------------------------
# Dihedral angle
# ----------------------------------------------------------------------------------------------
dihedral = kc.dihedral


def unsigned_fold_angle(p: np.ndarray) -> float:
    """Independent reference: pi minus the angle between the two wings seen along the hinge."""
    x1, x2, x3, x4 = p
    e = (x4 - x3) / np.linalg.norm(x4 - x3)
    u1 = (x1 - x3) - np.dot(x1 - x3, e) * e
    u2 = (x2 - x3) - np.dot(x2 - x3, e) * e
    cos = np.dot(u1, u2) / (np.linalg.norm(u1) * np.linalg.norm(u2))
    return math.pi - math.acos(max(-1.0, min(1.0, cos)))


def random_hinge(rng, max_fold=2.5):
    """A random non-degenerate hinge: wings at least 0.3 from the hinge line, |fold| < max_fold."""
    while True:
        p = rng.normal(size=(4, 3))
        e = p[3] - p[2]
        if np.linalg.norm(e) < 0.5:
            continue
        heights = [np.linalg.norm(np.cross(p[k] - p[2], e)) / np.linalg.norm(e) for k in (0, 1)]
        if min(heights) > 0.3 and unsigned_fold_angle(p) < max_fold:
            return p


@pytest.mark.parametrize("seed", SEEDS)
def test_dihedral_angle_and_gradient_match_finite_differences(seed):
    rng = np.random.default_rng(seed)
    for _ in range(6):
        p = random_hinge(rng)
        theta, ok, grad = dihedral(p)
        assert ok
        assert abs(theta) == pytest.approx(unsigned_fold_angle(p), abs=1e-12)
        fd = central_difference(lambda y: dihedral(y)[0], p)
        np.testing.assert_allclose(grad, fd, atol=FD_TOL * max(1.0, np.abs(fd).max()))
        np.testing.assert_allclose(grad.sum(axis=0), 0.0, atol=1e-12)  # translation invariance
        # Rotation invariance (the other rigid mode): sum_j x_j x grad_j = 0.
        np.testing.assert_allclose(np.cross(p, grad).sum(axis=0), 0.0, atol=1e-12)


def test_dihedral_projection_uses_the_dihedral_gradient():
    """solve_bend_dihedral moves the vertices along w_j grad_j theta with dlambda = -C / K."""
    rng = np.random.default_rng(7)
    for _ in range(5):
        p = random_hinge(rng, max_fold=1.5)
        theta, _, grad = dihedral(p)
        rest_angle = theta + rng.uniform(-0.3, 0.3)
        w = rng.uniform(0.5, 2.0, size=4)
        y, lam = p.copy(), np.zeros(1)
        kc.dihedral_serial(
            y,
            p.copy(),
            w,
            np.array([[0, 1, 2, 3]], np.int32),
            np.cos([rest_angle]),
            np.sin([rest_angle]),
            np.zeros(1),
            np.zeros(1),
            H,
            lam,
        )
        K = np.sum(w[:, None] * grad**2)
        assert lam[0] == pytest.approx(-(theta - rest_angle) / K, rel=1e-12)
        np.testing.assert_allclose(implied_gradient(p, y, w, range(4), lam[0]), grad, atol=1e-9)
        # Linear momentum is conserved by the correction: sum_j m_j dx_j = 0.
        np.testing.assert_allclose(((y - p) / w[:, None]).sum(axis=0), 0.0, atol=1e-12)
        # One Gauss-Newton step on a smooth C: the error shrinks quadratically, |C'| <= c |C|^2 with
        # c set by the curvature of theta (measured c <= 0.54 over 100 random hinges; 1.5 allowed).
        assert abs(dihedral(y)[0] - rest_angle) < 1.5 * abs(theta - rest_angle) ** 2 + 1e-12


def test_dihedral_is_robust_at_flat_and_rejects_degenerate_wings():
    flat = np.array([[0.3, 1.0, 0.0], [0.6, -1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    theta, ok, grad = dihedral(flat)
    assert ok and theta == 0.0 and np.isfinite(grad).all()
    # Exactly flat: the signed angle is smooth there, so central differences across it agree.
    fd = central_difference(lambda y: dihedral(y)[0], flat)
    np.testing.assert_allclose(grad, fd, atol=FD_TOL)
    # The wing gradients are the known |e| / h_k normals (Bridson 2003): h = 1, |e| = 1.
    np.testing.assert_allclose(np.abs(grad[:2, 2]), [1.0, 1.0], atol=1e-12)
    for tiny in (1e-6, 1e-9, 1e-12):  # nearly flat: theta is the small fold, no cancellation blow-up
        p = flat.copy()
        p[1, 2] = tiny
        theta, ok, grad = dihedral(p)
        assert ok and np.isfinite(grad).all()
        assert abs(theta) == pytest.approx(math.atan2(tiny, 1.0), rel=1e-6)
    # Degenerate wings (a wing vertex on the hinge line, or on its extension) and a zero hinge.
    for bad in ([0.5, 0.0, 0.0], [2.0, 0.0, 0.0]):
        p = flat.copy()
        p[0] = bad
        theta, ok, grad = dihedral(p)
        assert not ok and theta == 0.0
        y = p.copy()
        kc.dihedral_serial(
            y,
            p.copy(),
            np.ones(4),
            np.array([[0, 1, 2, 3]], np.int32),
            np.cos([0.5]),
            np.sin([0.5]),
            np.zeros(1),
            np.zeros(1),
            H,
            np.zeros(1),
        )
        assert np.all(y == p)  # skipped, no NaN written
    p = flat.copy()
    p[3] = p[2]
    assert not dihedral(p)[1]


# ----------------------------------------------------------------------------------------------
# Isometric bending (Bergou et al. 2006)
# ----------------------------------------------------------------------------------------------
def random_flat_hinge(rng):
    """(hinge a, hinge b, wing c, wing d) in a random plane, wings on opposite sides, non-degenerate."""
    a, b = np.zeros(2), np.array([rng.uniform(0.5, 1.5), 0.0])
    c = np.array([rng.uniform(-0.3, 1.8), rng.uniform(0.3, 1.2)])  # heights >= 0.3: no sliver wings
    d = np.array([rng.uniform(-0.3, 1.8), -rng.uniform(0.3, 1.2)])
    frame, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return np.column_stack([np.stack([a, b, c, d]), np.zeros(4)]) @ frame.T + rng.normal(size=3)


def stencil_of(rest):
    return cs.isometric_stencil(rest, np.array([[0, 1, 2, 3]]))[0]


@pytest.mark.parametrize("seed", SEEDS)
def test_isometric_stencil_annihilates_flat_and_affine_configurations(seed):
    rng = np.random.default_rng(seed)
    rest = random_flat_hinge(rng)
    s = stencil_of(rest)
    scale = np.abs(s).max() * np.abs(rest).max()
    assert abs(s.sum()) < 1e-12 * np.abs(s).max()  # translation invariance: sum_i s_i = 0
    np.testing.assert_allclose(s @ rest, 0.0, atol=1e-12 * scale)  # flat rest: C = 0
    for _ in range(5):
        rot, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        moved = rest @ rot.T + rng.normal(size=3) * 10.0  # rigid motion
        np.testing.assert_allclose(s @ moved, 0.0, atol=1e-11 * scale * 10.0)
        A = rng.normal(size=(3, 3))  # any affine image of the flat hinge (in-plane shear, stretch...)
        np.testing.assert_allclose(s @ (rest @ A.T + rng.normal(size=3)), 0.0, atol=1e-11 * scale * 10.0)


def _fold(rest, theta):
    """Rotate wing d about the hinge a-b by theta (an isometric fold)."""
    a, b = rest[0], rest[1]
    e = (b - a) / np.linalg.norm(b - a)
    r = rest[3] - a
    r_rot = r * math.cos(theta) + np.cross(e, r) * math.sin(theta) + e * np.dot(e, r) * (1 - math.cos(theta))
    out = rest.copy()
    out[3] = a + r_rot
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_isometric_energy_matches_dihedral_energy_for_small_folds(seed):
    rng = np.random.default_rng(seed)
    rest = random_flat_hinge(rng)
    s = stencil_of(rest)
    Q = cs.isometric_q(s)
    e_sq = np.sum((rest[1] - rest[0]) ** 2)
    area0 = 0.5 * np.linalg.norm(np.cross(rest[1] - rest[0], rest[2] - rest[0]))
    area1 = 0.5 * np.linalg.norm(np.cross(rest[1] - rest[0], rest[3] - rest[0]))
    for theta in (1e-3, 1e-2, 5e-2, 0.2):
        x = _fold(rest, theta)
        assert unsigned_fold_angle(x[[2, 3, 0, 1]]) == pytest.approx(theta, rel=1e-6)
        energy = 0.5 * np.einsum("id,ij,jd->", x, Q, x)  # 1/2 x^T Q x summed over the 3 coordinates
        dihedral_energy = 3.0 * e_sq * theta**2 / (area0 + area1)
        # For an isometric fold the stencil gives |e| 2 sin(theta/2) exactly, so the ratio is
        # (sin(theta/2) / (theta/2))^2 = 1 - theta^2/12 + ...: within theta^2/10 of 1.
        assert energy / dihedral_energy == pytest.approx(1.0, abs=theta**2 / 10.0 + 1e-9)
        assert energy == pytest.approx(3.0 * e_sq * (2 * math.sin(theta / 2)) ** 2 / (area0 + area1), rel=1e-8)


def test_isometric_projection_gradient_is_the_stencil():
    """C = sum_i s_i x_i (per coordinate): grad is s_i I; the kernel moves x_i by w_i s_i dlambda."""
    rng = np.random.default_rng(11)
    for _ in range(5):
        rest = random_flat_hinge(rng)
        s = stencil_of(rest)
        x = rest + rng.normal(scale=0.1, size=(4, 3))
        w = rng.uniform(0.5, 2.0, size=4)
        for d in range(3):  # finite differences of each component of C
            fd = central_difference(lambda y: float(s @ y[:, d]), x)
            expected = np.zeros((4, 3))
            expected[:, d] = s
            np.testing.assert_allclose(fd, expected, atol=FD_TOL * np.abs(s).max())
        y, lam = x.copy(), np.zeros((1, 3))
        kc.isometric_serial(
            y, x.copy(), w, np.array([[0, 1, 2, 3]], np.int32), s[None, :].copy(), np.zeros(1), np.zeros(1), H, lam
        )
        C = s @ x
        np.testing.assert_allclose(lam[0], -C / np.sum(w * s * s), rtol=1e-12)
        np.testing.assert_allclose(y - x, np.outer(w * s, lam[0]), atol=1e-14)
        np.testing.assert_allclose(s @ y, 0.0, atol=1e-12)  # linear constraint, alpha = 0: exact
        np.testing.assert_allclose(((y - x) / w[:, None]).sum(axis=0), 0.0, atol=1e-12)  # momentum


# ----------------------------------------------------------------------------------------------
# Soft pins (goal constraints)
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_soft_pin_gradient_and_projection(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, 3))
    target = rng.normal(size=(1, 3))
    w = rng.uniform(0.5, 2.0, size=3)

    def C(y):
        return np.linalg.norm(y[1] - target[0])

    fd = central_difference(C, x)
    y, lam = x.copy(), np.zeros(1)
    kc.soft_pin_serial(y, w, np.array([1], np.int32), target, np.zeros(1), H, lam)
    g = (y[1] - x[1]) / (w[1] * lam[0])
    np.testing.assert_allclose(g, fd[1], atol=FD_TOL)
    assert lam[0] == pytest.approx(-C(x) / (w[1] * np.sum(fd[1] ** 2)), rel=1e-6)
    np.testing.assert_allclose(y[1], target[0], atol=1e-12)  # alpha = 0: pulled onto the goal
    assert np.all(y[[0, 2]] == x[[0, 2]])
    # With compliance the goal acts like a spring: dlambda = -C / (w + alpha/h^2).
    alpha = 1e-5
    y, lam = x.copy(), np.zeros(1)
    kc.soft_pin_serial(y, w, np.array([1], np.int32), target, np.array([alpha]), H, lam)
    assert lam[0] == pytest.approx(-C(x) / (w[1] + alpha / H**2), rel=1e-12)


# ----------------------------------------------------------------------------------------------
# One XPBD distance projection
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_single_distance_projection_is_mass_weighted_along_the_edge(seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, 3))
    x_start = x - rng.normal(scale=0.01, size=(2, 3))  # positions at the substep start
    m = rng.uniform(0.2, 5.0, size=2)
    w = 1.0 / m
    length = np.linalg.norm(x[0] - x[1])
    rest = length * rng.uniform(0.7, 1.3)
    n = (x[0] - x[1]) / length
    C = length - rest
    verts = np.array([[0, 1]], np.int32)
    for alpha, beta in ((0.0, 0.0), (1e-4, 0.0), (1e-4, 2e-3)):
        y, lam = x.copy(), np.zeros(1)
        kc.distance_serial(y, x_start, w, verts, np.array([rest]), np.array([alpha]), np.array([beta]), False, H, lam)
        alpha_tilde, gamma = alpha / H**2, beta / H
        rel = np.dot(n, (x[0] - x_start[0]) - (x[1] - x_start[1]))
        # XPBD eq. 18 / damped eq. 26 with lambda = 0 at the start, written out by hand.
        dlam = (-C - gamma * rel) / ((1.0 + gamma) * (w[0] + w[1]) + alpha_tilde)
        assert lam[0] == pytest.approx(dlam, rel=1e-12)
        d0, d1 = y[0] - x[0], y[1] - x[1]
        np.testing.assert_allclose(d0, w[0] * dlam * n, atol=1e-15)
        np.testing.assert_allclose(d1, -w[1] * dlam * n, atol=1e-15)
        # Along the edge, split in proportion to inverse mass, linear momentum unchanged.
        assert np.linalg.norm(np.cross(d0, n)) < 1e-15 and np.linalg.norm(np.cross(d1, n)) < 1e-15
        assert np.linalg.norm(d0) / np.linalg.norm(d1) == pytest.approx(m[1] / m[0], rel=1e-10)
        np.testing.assert_allclose(m[0] * d0 + m[1] * d1, 0.0, atol=1e-14)
        if alpha == 0.0:
            assert np.linalg.norm(y[0] - y[1]) == pytest.approx(rest, rel=1e-13)
        else:  # a compliant constraint closes only the fraction K / (K + alpha~) of the gap
            new_c = np.linalg.norm(y[0] - y[1]) - rest
            if beta == 0.0:
                assert new_c == pytest.approx(C * alpha_tilde / (w[0] + w[1] + alpha_tilde), rel=1e-9)


def test_small_angle_atan2_equals_the_library_atan2():
    """The dihedral kernels' atan2 (Taylor series near flat hinges, library call elsewhere) agrees with
    math.atan2 to a few units in the last place over both branches, signs and scales."""
    rng = np.random.default_rng(11)
    x = rng.uniform(-2.0, 2.0, 20000) * 10.0 ** rng.uniform(-8, 3, 20000)
    y = x * rng.uniform(-0.3, 0.3, 20000)  # mostly inside |y| <= x / 4 when x > 0
    y[:2000] = rng.normal(size=2000)  # and arbitrary angles
    inside = (x > 0) & (np.abs(y) <= 0.25 * x)
    assert inside.sum() > 5000 and (~inside).sum() > 5000
    for a, b in zip(y, x):
        got, want = kn.small_angle_atan2(a, b), math.atan2(a, b)
        assert abs(got - want) <= 4 * np.spacing(abs(want)) + 1e-300, (a, b, got, want)


def test_dihedral_angle_measured_from_the_rest_angle_equals_the_wrapped_difference():
    """The kernels get the rest angle as (cos, sin) and rotate the atan2 arguments: the result must be
    theta - theta_0 wrapped into (-pi, pi], also for folds past flat and rest angles near +-pi."""
    rng = np.random.default_rng(12)
    for _ in range(300):
        p = np.ascontiguousarray(random_hinge(rng, max_fold=3.0))
        theta, ok = kn.dihedral_angle_and_gradient(p, 0, 1, 2, 3)[:2]
        assert ok
        rest = rng.uniform(-math.pi, math.pi) if rng.random() < 0.5 else theta + rng.uniform(-0.2, 0.2)
        got, ok = kn.dihedral_angle_and_gradient(p, 0, 1, 2, 3, math.cos(rest), math.sin(rest))[:2]
        want = math.remainder(theta - rest, 2 * math.pi)
        assert abs(got - want) < 1e-12 or abs(abs(got - want) - 2 * math.pi) < 1e-12


def test_isometric_diagnostics_match_a_direct_evaluation():
    # |C| = |sum_a Q_a x_a| per hinge and the residual |C + alpha / h^2 lambda|, evaluated here
    # with NumPy from the stencil and a random folded state, against diagnostics.isometric_errors.
    from selvedge.solver.diagnostics import isometric_errors

    rng = np.random.default_rng(7)
    pos, faces, _ = grid_mesh(6, 6, 0.5, 0.5)
    cloth = Cloth(pos, faces, options=ClothOptions(bending_model="isometric"))
    bend = next(c for c in cloth.constraint_sets if c.kind == "isometric")
    x = pos + rng.normal(scale=0.02, size=pos.shape)
    lam = rng.normal(scale=1e-3, size=(bend.count, 3))
    h = 1.0 / 240.0
    c_abs, residual = np.zeros(bend.count), np.zeros(bend.count)
    isometric_errors(x, bend.vertices, bend.params["stencil"], bend.params["compliance"], h, lam, c_abs, residual)
    c_vec = np.einsum("ka,kad->kd", bend.params["stencil"], x[bend.vertices])
    alpha_tilde = bend.params["compliance"][:, None] / h**2
    assert np.allclose(c_abs, np.linalg.norm(c_vec, axis=1), rtol=1e-12, atol=1e-15)
    assert np.allclose(residual, np.linalg.norm(c_vec + alpha_tilde * lam, axis=1), rtol=1e-12, atol=1e-15)
    assert c_abs.max() > 1e-3  # a folded state: the check is not about zeros
