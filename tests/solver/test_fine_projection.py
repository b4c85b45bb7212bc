"""The fine level's fast projection (solver/fine_projection.py, ``ClothOptions.fine_projection``).

References are computed here independently of the kernel: the constraint gradient by central
finite differences of ``C(x) = |x_i - x_j| - L_max``, the Newton step by a dense NumPy solve of
``J W J^T dlambda = C`` with ``W_i = w_i (I - n_i n_i^T)``."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from selvedge.solver import Cloth, ClothInputError, ClothOptions, SolverSettings, grid_mesh, preset
from selvedge.solver.collisions import Colliders
from selvedge.solver.collisions.proxies import Sphere
from selvedge.solver.constraints import BIAS
from selvedge.solver.fine_projection import fast_projection, fine_edges, thread_lines, workspace

N = 10


def _grid_case(seed=3, contacts=True):
    """A free 10 x 10 grid's warp/weft edges, stretched 3 % along x, squeezed 2 % along y, with
    noise; vertex 0 pinned; two vertices held by contact normals."""
    pos, faces, uv = grid_mesh(N, N, 0.45, 0.45)
    cloth = Cloth(pos, faces, uvs=uv, material=preset("cotton"))
    keep = cloth.edge_grain != BIAS
    edges = np.ascontiguousarray(cloth.topology.edges[keep], dtype=np.int64)
    grain = cloth.edge_grain[keep]
    rest = cloth.edge_rest_length[keep]
    limit = (1.0 + 0.001) * rest
    rng = np.random.default_rng(seed)
    x = pos * [1.03, 0.98, 1.0] + rng.normal(0.0, 2e-4, pos.shape)
    inv_mass = np.ones(len(pos))
    inv_mass[0] = 0.0
    normal = np.zeros_like(x)
    if contacts:
        for v, n in ((44, (0.0, 0.3, 1.0)), (57, (0.2, 0.0, 1.0))):
            normal[v] = np.array(n) / np.linalg.norm(n)
    return x, inv_mass, edges, grain, limit, normal


def _constraint(x, edges, limit):
    return np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1) - limit


def _project(x, inv_mass, edges, grain, limit, normal, steps, cg, *, lines=True, damping=0.0, tol=1e-12):
    x = x.copy()
    lam = np.zeros(len(edges))
    e = len(edges)
    problem = fine_edges(edges, np.arange(e), np.ones(e), np.zeros(e), grain if lines else None)
    stats = fast_projection(x, inv_mass, normal, lam, limit, problem, steps, cg, tol, damping, workspace(len(x), e))
    return x, stats


def _reference_newton_step(x, inv_mass, edges, limit, normal):
    """One Newton step over the violated edges, the gradient by finite differences, dense solve."""
    c = _constraint(x, edges, limit)
    active = np.flatnonzero(c > 0.0)
    n = len(x)
    jac = np.zeros((len(active), 3 * n))
    eps = 1e-7
    for row, k in enumerate(active):
        for v in edges[k]:
            for d in range(3):
                xp, xm = x.copy(), x.copy()
                xp[v, d] += eps
                xm[v, d] -= eps
                jac[row, 3 * v + d] = (
                    _constraint(xp, edges[k : k + 1], limit[k : k + 1])[0]
                    - _constraint(xm, edges[k : k + 1], limit[k : k + 1])[0]
                ) / (2 * eps)
    w = np.zeros((3 * n, 3 * n))
    for v in range(n):
        w[3 * v : 3 * v + 3, 3 * v : 3 * v + 3] = inv_mass[v] * (np.eye(3) - np.outer(normal[v], normal[v]))
    dl = np.linalg.solve(jac @ w @ jac.T, c[active])
    return x - (w @ jac.T @ dl).reshape(n, 3)


@pytest.mark.parametrize("lines", [True, False])
def test_one_newton_step_matches_a_dense_solve_with_finite_difference_gradients(lines):
    x, inv_mass, edges, grain, limit, normal = _grid_case()
    expected = _reference_newton_step(x, inv_mass, edges, limit, normal)
    got, (active, iterations) = _project(x, inv_mass, edges, grain, limit, normal, 1, 2000, lines=lines)
    assert active == np.count_nonzero(_constraint(x, edges, limit) > 0.0)
    # the finite-difference Jacobian is good to ~1e-9; the step moves vertices ~1e-3 m
    assert np.abs(got - expected).max() < 1e-7
    assert iterations > 0


def test_line_preconditioner_needs_fewer_iterations_than_jacobi():
    x, inv_mass, edges, grain, limit, normal = _grid_case()
    _, (_, with_lines) = _project(x, inv_mass, edges, grain, limit, normal, 1, 2000, lines=True, tol=1e-10)
    _, (_, jacobi) = _project(x, inv_mass, edges, grain, limit, normal, 1, 2000, lines=False, tol=1e-10)
    assert with_lines < 0.5 * jacobi


def test_converged_projection_meets_every_limit_and_leaves_slack_edges_slack():
    x, inv_mass, edges, grain, limit, normal = _grid_case()
    c0 = _constraint(x, edges, limit)
    got, _ = _project(x, inv_mass, edges, grain, limit, normal, 12, 2000)
    c = _constraint(got, edges, limit)
    assert (c0 > 0).sum() > 50 and (c0 < 0).sum() > 50  # both kinds present
    assert (c / limit).max() < 1e-6  # every edge within its limit, to 1e-6 relative
    # compression stays free: an edge that started 1-2 % short is not pulled out to its rest length
    squeezed = c0 < -0.01 * limit
    rest = limit / 1.001
    assert squeezed.sum() > 50 and (c[squeezed] + limit[squeezed] < rest[squeezed]).all()


def test_pinned_vertices_exact_and_contacts_never_move_along_their_normal():
    x, inv_mass, edges, grain, limit, normal = _grid_case()
    got, _ = _project(x, inv_mass, edges, grain, limit, normal, 4, 50, damping=0.03)
    assert np.array_equal(got[0], x[0])
    for v in (44, 57):
        moved = got[v] - x[v]
        assert np.linalg.norm(moved) > 1e-5  # it slides
        assert abs(moved @ normal[v]) < 1e-15 + 1e-12 * np.linalg.norm(moved)


def test_damping_bounds_the_step_where_the_limits_cannot_be_met():
    """A straight row between two pins, its ends 1 % too far apart: infeasible; undamped Newton
    steps grow without bound (the row must bow sideways to shorten), damped ones stay small."""
    m = 9
    x = np.zeros((m, 3))
    x[:, 0] = np.linspace(0.0, 1.01, m)
    x[1:-1, 2] = 1e-6 * np.sin(np.arange(1, m - 1))  # not exactly straight
    inv_mass = np.ones(m)
    inv_mass[[0, -1]] = 0.0
    edges = np.stack([np.arange(m - 1), np.arange(1, m)], 1).astype(np.int64)
    grain = np.zeros(m - 1, np.int64)
    limit = np.full(m - 1, 1.0 / (m - 1) * 1.001)
    normal = np.zeros_like(x)
    damped, _ = _project(x, inv_mass, edges, grain, limit, normal, 3, 50, damping=0.03)
    assert np.abs(damped - x).max() < 0.05
    assert np.isfinite(damped).all()


def _dropped_on_sphere(options: ClothOptions, frames=8):
    pos, faces, uv = grid_mesh(14, 14, 0.6, 0.6, origin=(-0.3, -0.3, 0.28), quads=True)
    material = preset("cotton")
    cloth = Cloth(
        pos,
        faces,
        uvs=uv,
        material=material,
        options=options,
        settings=SolverSettings(substeps=10),
        contact_handler=Colliders([Sphere(0.2, thickness=0.005)], cloth_thickness=material.thickness_m),
    )
    for _ in range(frames):
        cloth.step()
    return cloth


def test_cloth_runs_bit_identical_outside_the_sphere_and_stretches_less():
    on = ClothOptions(fine_projection=2)
    a = _dropped_on_sphere(on)
    b = _dropped_on_sphere(on)
    assert np.array_equal(a.positions, b.positions) and np.array_equal(a.velocities, b.velocities)
    assert np.linalg.norm(a.positions, axis=1).min() > 0.2  # nothing inside the sphere
    active, _ = a.fine_projection_stats
    assert active > 0
    off = _dropped_on_sphere(ClothOptions())
    warp_weft = a.edge_grain != BIAS
    assert np.percentile(a.edge_strain()[warp_weft], 95) < np.percentile(off.edge_strain()[warp_weft], 95)


def test_default_is_off_and_bad_values_are_refused():
    assert ClothOptions().fine_projection == 0
    for bad in (dict(fine_projection=-1), dict(fine_projection=1.5), dict(fine_projection_cg_iterations=0)):
        with pytest.raises(ClothInputError):
            dataclasses.replace(ClothOptions(), **bad).validate()
    with pytest.raises(ClothInputError):
        dataclasses.replace(ClothOptions(), fine_projection_damping=-0.1).validate()


def _tube_case(m=8, rings=3):
    """A tube: ``rings`` closed weft lines of ``m`` vertices (radius 0.1 m) joined by warp edges,
    stretched 3 % round its circumference, some noise; a closed line is where the line
    preconditioner cuts a chain."""
    a = 2.0 * np.pi * np.arange(m) / m
    x = np.concatenate(
        [np.column_stack([0.1 * np.cos(a), 0.1 * np.sin(a), np.full(m, 0.05 * r)]) for r in range(rings)]
    )
    ring = [(r * m + i, r * m + (i + 1) % m) for r in range(rings) for i in range(m)]
    warp = [(r * m + i, (r + 1) * m + i) for r in range(rings - 1) for i in range(m)]
    edges = np.array(ring + warp, np.int64)
    grain = np.array([1] * len(ring) + [0] * len(warp), np.int64)
    rest = np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1)
    rng = np.random.default_rng(5)
    x = x * [1.03, 1.03, 1.0] + rng.normal(0.0, 2e-4, x.shape)
    return x, np.ones(len(x)), edges, grain, 1.001 * rest, np.zeros_like(x)


def test_thread_lines_visit_every_edge_once_and_chain_only_line_neighbours():
    _, _, edges, grain, _, _ = _tube_case()
    sweep, link = thread_lines(edges, grain)
    assert np.array_equal(np.sort(sweep), np.arange(len(edges)))
    for s in range(len(sweep)):
        if link[s] >= 0:
            k, kp = sweep[s], sweep[s - 1]
            assert grain[k] == grain[kp] and link[s] in edges[k] and link[s] in edges[kp]
    # eight open warp lines of two edges first, then the three rings (closed: each cut once)
    assert np.count_nonzero(link[:16] < 0) == 8 and np.count_nonzero(link[16:] < 0) == 3
    assert (grain[sweep[16:]] == 1).all()


@pytest.mark.parametrize("case", ["tube", "tube_partly_slack"])
def test_newton_step_on_closed_lines_matches_a_dense_solve(case):
    x, inv_mass, edges, grain, limit, normal = _tube_case()
    if case == "tube_partly_slack":
        limit[[1, 2, 13]] *= 1.1  # runs that wrap round a ring's start
    expected = _reference_newton_step(x, inv_mass, edges, limit, normal)
    got, (_, iterations) = _project(x, inv_mass, edges, grain, limit, normal, 1, 2000)
    assert np.abs(got - expected).max() < 1e-7
    assert iterations > 0
