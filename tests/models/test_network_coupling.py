"""Learned network inside the solver: mode B (acceleration hook) and residual mode, per-frame
diagnostics, pins held exactly, and the anomaly guard falling back to pure XPBD."""

from __future__ import annotations

import numpy as np
import pytest

from selvedge.models.coupling import LearnedCoupling, substep_schedule
from selvedge.models.runtime import LearnedModel
from selvedge.solver import Cloth, SolverSettings, grid_mesh


def make_cloth(substeps=8, nx=8, ny=6):
    pos, faces, uv = grid_mesh(nx, ny, 0.7, 0.5, plane="xz")
    pins = np.zeros(len(pos))
    top = np.flatnonzero(pos[:, 2] == pos[:, 2].max())
    pins[top] = 1.0
    cloth = Cloth(
        pos,
        faces,
        uvs=uv,
        pin_weights=pins,
        settings=SolverSettings(substeps=substeps),
        initial_velocities=np.tile([0.0, 0.6, 0.0], (len(pos), 1)),
    )
    return cloth, top


def pin_targets(cloth, frame):
    t = cloth.rest_positions.copy()
    t[:, 0] += 0.05 * np.sin(frame / 5.0)
    return t


@pytest.fixture(scope="module")
def model():
    return LearnedModel()


@pytest.mark.parametrize("mode", ["B", "residual"])
def test_network_modes_bake_with_diagnostics_and_exact_pins(model, mode):
    cloth, top = make_cloth()
    coupling = LearnedCoupling(cloth, model, mode)
    for f in range(1, 13):
        coupling.step(pin_targets(cloth, f))
        assert np.allclose(cloth.x[top], pin_targets(cloth, f)[top], atol=1e-12)
    assert coupling.active, coupling.events
    assert len(coupling.history) == 12 and all(r.network_active for r in coupling.history)
    assert all(r.network_ms > 0 and r.solver_ms > 0 and np.isfinite(r.r_proj) for r in coupling.history)
    assert np.isfinite(cloth.x).all() and max(r.strain_max for r in coupling.history) < 0.2
    assert "runs on the" in coupling.events[0]
    print(
        mode,
        "r_proj",
        [round(r.r_proj, 3) for r in coupling.history[:5]],
        "net ms",
        round(np.mean([r.network_ms for r in coupling.history]), 3),
    )


def test_network_changes_the_result_but_off_mode_is_pure_xpbd(model):
    pure, _ = make_cloth()
    off, _ = make_cloth()
    net, _ = make_cloth()
    c_off = LearnedCoupling(off, None, "off")
    c_net = LearnedCoupling(net, model, "B")
    for f in range(1, 6):
        pure.step(pin_targets(pure, f))
        c_off.step(pin_targets(off, f))
        c_net.step(pin_targets(net, f))
    assert np.array_equal(pure.x, off.x)
    assert not np.allclose(pure.x, net.x)
    assert c_off.history[-1].network_ms == 0 and np.isfinite(c_off.history[-1].r_proj)


@pytest.mark.parametrize("mode", ["B", "residual"])
def test_nan_output_switches_to_pure_xpbd_and_bake_finishes(model, mode):
    pure, _ = make_cloth()
    cloth, _ = make_cloth()
    coupling = LearnedCoupling(cloth, model, mode)
    coupling.fault_injection = lambda r: np.full_like(r, np.nan)
    for f in range(1, 9):
        pure.step(pin_targets(pure, f))
        coupling.step(pin_targets(cloth, f))
    assert not coupling.active
    assert any("non-finite" in e and "pure XPBD" in e for e in coupling.events), coupling.events
    assert any("pure XPBD" in w for w in cloth.warnings)
    assert not any(r.network_active for r in coupling.history)
    assert len(coupling.history) == 8 and np.isfinite(cloth.x).all()
    # the NaN never reached the state: the whole bake is exactly pure XPBD
    assert np.array_equal(cloth.x, pure.x)


def test_exploding_output_rolls_back_and_reruns_frame_on_pure_xpbd(model):
    cloth, _ = make_cloth()
    cloth.settings.max_strain = 0.2  # the solver itself rejects (rolls back) frames stretched beyond 20 %
    coupling = LearnedCoupling(cloth, model, "B")
    coupling.fault_injection = lambda r: r * 0.0 + 1e9  # finite but absurd: XPBD tethers still hold the cloth
    for f in range(1, 5):
        coupling.step(pin_targets(cloth, f))
    assert not coupling.active and len(coupling.history) == 4
    assert any("the frame failed with the network on" in e and "rolled back" in e for e in coupling.events), (
        coupling.events
    )
    assert np.isfinite(cloth.x).all() and max(r.strain_max for r in coupling.history) < 0.2


def test_absurd_output_is_held_by_xpbd_and_trips_the_strain_guard(model):
    cloth, top = make_cloth()
    coupling = LearnedCoupling(cloth, model, "B")
    coupling.fault_injection = lambda r: r * 0.0 + 1e9
    rec = coupling.step(pin_targets(cloth, 1))
    # XPBD is the safety layer: pins exact, tethers keep the cloth within reach, nothing explodes
    assert np.allclose(cloth.x[top], pin_targets(cloth, 1)[top]) and np.isfinite(cloth.x).all()
    assert rec.r_proj > 0.99  # the projection undid (almost) the whole proposal
    assert not coupling.active and any("strain" in e for e in coupling.events), coupling.events


def test_large_strain_trips_the_guard(model):
    cloth, _ = make_cloth()
    coupling = LearnedCoupling(cloth, model, "residual")
    coupling.fault_injection = lambda r: (
        np.where(np.arange(r.shape[0])[:, None] % 2 == 0, 1.0, -1.0) * 3e3 * np.ones_like(r)
    )
    rec = coupling.step(pin_targets(cloth, 1))
    assert not coupling.active
    assert any("strain" in e or "energy" in e for e in coupling.events), coupling.events
    # residual mode: the frame that tripped the guard keeps the cheap XPBD result
    pure, _ = make_cloth()
    pure.step(pin_targets(pure, 1))
    assert np.array_equal(cloth.x, pure.x) and not rec.network_active


@pytest.mark.parametrize("substeps", [1, 2, 7, 64])
def test_substep_schedule_integrates_to_the_predicted_residuals(substeps):
    """Semi-implicit Euler over the frame with the schedule's accelerations gives dx = r_x dt^2, dv = r_v dt."""
    rng = np.random.default_rng(substeps)
    r_x, r_v = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    alpha, beta = substep_schedule(r_x, r_v, substeps)
    dt = 1 / 24
    h = dt / substeps
    x, v = np.zeros((5, 3)), np.zeros((5, 3))
    for k in range(substeps):
        v = v + h * (alpha + beta * (k - 0.5 * (substeps - 1)))
        x = x + h * v
    assert np.allclose(x, r_x * dt * dt, rtol=1e-9, atol=1e-15)
    if substeps > 1:
        assert np.allclose(v, r_v * dt, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("mode,proxy", [("B", "sphere"), ("residual", "sphere"), ("B", "mesh")])
def test_network_sees_the_colliders_of_the_contact_handler(model, mode, proxy):
    """A cloth swinging into a ball (an analytic sphere, or a triangle-mesh sphere): the coupling queries the
    cloth's contact handler, the network gets world edges on the frames near the ball, and XPBD keeps every
    vertex outside it."""
    from selvedge.solver.collisions import Colliders, Sphere, TriangleMesh
    from selvedge.solver.mesh import uv_ellipsoid_mesh

    radius, centre = 0.15, np.array([0.35, -0.25, 0.2])  # 10 cm behind the hanging sheet (y = 0, z in 0..0.5)
    if proxy == "sphere":
        col = Colliders([Sphere(radius, name="ball", position=centre)], cloth_thickness=0.004)
    else:
        ball_v, ball_t = uv_ellipsoid_mesh(radius, 24, 12, centre)
        col = Colliders([TriangleMesh(ball_v, ball_t, name="ball")], cloth_thickness=0.004)
    pos, faces, uv = grid_mesh(8, 6, 0.7, 0.5, plane="xz")
    pins = np.zeros(len(pos))
    top = np.flatnonzero(pos[:, 2] == pos[:, 2].max())
    pins[top] = 1.0
    cloth = Cloth(
        pos,
        faces,
        uvs=uv,
        pin_weights=pins,
        settings=SolverSettings(substeps=8),
        initial_velocities=np.tile([0.0, -1.2, 0.0], (len(pos), 1)),
        contact_handler=col,
    )
    coupling = LearnedCoupling(cloth, model, mode)
    seen = []
    for f in range(1, 25):
        if proxy == "sphere":
            col.set_transform("ball", centre + [0.0, 0.002 * f, 0.0])
        else:
            col.set_mesh_positions("ball", ball_v + [0.0, 0.002 * f, 0.0])
        rec = coupling.step()
        seen.append(rec.world_edges)
        # the mesh ball's flat faces lie inside the sphere by up to r (1 - cos(pi / 12)) = 5 mm
        sag = 0.0 if proxy == "sphere" else radius * (1.0 - np.cos(np.pi / 12))
        assert np.linalg.norm(cloth.x - (centre + [0.0, 0.002 * f, 0.0]), axis=1).min() > radius + 0.004 - 2e-3 - sag
    assert coupling.active, coupling.events
    assert max(seen) > 3 and min(seen) == 0, seen


def test_coupling_keeps_the_scripts_hook_and_other_observers(model):
    """The coupling is one observer among others: a script's acceleration hook and a second observer keep
    running; in mode "off" the result is exactly the hooked cloth without the coupling."""
    from selvedge.solver.hooks import StepObserver

    class Count(StepObserver):
        substeps = 0

        def end_substep(self, state):
            self.substeps += 1

    def push(x, v, h, t):
        return np.tile([0.3, 0.0, 0.0], (x.shape[0], 1))

    plain, _ = make_cloth()
    plain.acceleration_hook = push
    hooked, _ = make_cloth()
    hooked.acceleration_hook = push
    counter = Count()
    hooked.add_observer(counter)
    coupling = LearnedCoupling(hooked, None, "off")
    assert hooked.acceleration_hook is push and hooked.observers == (counter, coupling)
    for f in range(1, 4):
        plain.step(pin_targets(plain, f))
        coupling.step(pin_targets(hooked, f))
    assert np.array_equal(hooked.x, plain.x) and counter.substeps == 3 * hooked.settings.substeps
    net, _ = make_cloth()
    net_coupling = LearnedCoupling(net, model, "B")
    net_coupling.detach()
    assert net.observers == ()
