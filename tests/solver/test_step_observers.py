"""The solver's public plug (solver/hooks.py): observers see read-only state and propose accelerations,
several coexist with each other and with the script hooks, and ``apply_correction`` applies a proposed
change, projects it and can take it back. References: analytic free fall, pure XPBD with gravity changed."""

from __future__ import annotations

import numpy as np
import pytest

from selvedge.solver import Cloth, ClothInputError, ClothOptions, Material, SolverSettings, grid_mesh
from selvedge.solver.hooks import StepObserver


def hanging(**settings):
    pos, faces, uv = grid_mesh(6, 5, 0.5, 0.4, plane="xz")
    pins = np.zeros(len(pos))
    top = np.flatnonzero(pos[:, 2] == pos[:, 2].max())
    pins[top] = 1.0
    return Cloth(pos, faces, uvs=uv, pin_weights=pins, settings=SolverSettings(substeps=6, **settings)), top


class Push(StepObserver):
    """A constant acceleration on every vertex, and a log of what the solver showed."""

    def __init__(self, a):
        self.a, self.calls = np.asarray(a, dtype=np.float64), []

    def begin_frame(self, state):
        self.calls.append(("begin_frame", state.frame))

    def substep_acceleration(self, state):
        self.calls.append(("acceleration", state.substep))
        return np.tile(self.a, (state.x.shape[0], 1))

    def end_substep(self, state):
        self.calls.append(("end_substep", state.substep))

    def end_frame(self, state):
        self.calls.append(("end_frame", state.frame))


def test_observer_accelerations_add_to_gravity_and_coexist_with_the_script_hook():
    g = np.array([0.0, 0.0, -9.81])
    a = np.array([0.7, 0.0, 2.0])
    reference, _ = hanging(gravity_m_s2=tuple(g + a))
    observed, _ = hanging(gravity_m_s2=tuple(g))
    # the same total acceleration from three sources: the script hook and two observers
    observed.acceleration_hook = lambda x, v, h, t: np.tile(0.5 * a, (x.shape[0], 1))
    first, second = Push(0.25 * a), Push(0.25 * a)
    observed.add_observer(first)
    observed.add_observer(second)
    for _ in range(4):
        reference.step()
        observed.step()
    assert np.allclose(observed.positions, reference.positions, rtol=0, atol=1e-12)
    assert np.abs(observed.positions - hanging()[0].positions).max() > 1e-4  # the push really moved it (0.4 mm)
    per_frame = (
        [("begin_frame", 0)] + [(k, s) for s in range(6) for k in ("acceleration", "end_substep")] + [("end_frame", 1)]
    )
    assert first.calls[: len(per_frame)] == per_frame and len(first.calls) == 4 * len(per_frame)
    assert second.calls == first.calls
    observed.remove_observer(first)
    assert observed.observers == (second,)


def test_observers_get_read_only_views_and_the_substep_proposal():
    """Free fall without drag: the constraints hold, so each substep's result equals its inertial
    prediction x_n + h (v_n + h g) exactly (semi-implicit Euler)."""
    pos, faces, uv = grid_mesh(4, 4, 0.3, 0.3)
    cloth = Cloth(
        pos,
        faces,
        uvs=uv,
        material=Material(air_drag_per_s=0.0),
        options=ClothOptions(tethers=False, stretch_limiting=False),
        settings=SolverSettings(substeps=4, iterations=3),
    )
    g = np.asarray(cloth.settings.gravity_m_s2)
    seen = []

    class Watch(StepObserver):
        def end_substep(self, state):
            with pytest.raises(ValueError):
                state.x[0, 0] = 1.0
            seen.append(
                (state.x_substep_start.copy(), state.x_proposal.copy(), state.x.copy(), state.v.copy(), state.h)
            )

    cloth.add_observer(Watch())
    cloth.step()
    v = np.zeros_like(pos)
    for x_start, x_prop, x, v_end, h in seen:
        v = v + h * g
        assert np.allclose(x_prop, x_start + h * v, rtol=0, atol=1e-14)
        assert np.allclose(x, x_prop, rtol=0, atol=1e-12)
        assert np.allclose(v_end, v, rtol=0, atol=1e-10)


def test_observer_acceleration_of_the_wrong_shape_is_refused():
    cloth, _ = hanging()

    class Bad(StepObserver):
        def substep_acceleration(self, state):
            return np.zeros((3, 3))

    cloth.add_observer(Bad())
    with pytest.raises(ClothInputError, match="observer Bad returned an acceleration of shape"):
        cloth.step()


def test_rigid_correction_is_kept_whole_and_can_be_reverted():
    """A uniform shift of the free vertices of an unpinned cloth stretches nothing: the projection moves
    nothing, so x gains dx and v gains dv exactly; revert gives back the frame's own state."""
    pos, faces, uv = grid_mesh(5, 5, 0.4, 0.4)
    cloth = Cloth(pos, faces, uvs=uv, settings=SolverSettings(substeps=4))
    cloth.step()
    x0, v0 = cloth.positions.copy(), cloth.velocities.copy()
    dx = np.tile([0.01, -0.02, 0.005], (len(pos), 1))
    dv = np.tile([0.1, 0.0, 0.3], (len(pos), 1))
    result = cloth.apply_correction(dx, dv, 1 / 24, iterations=2)
    assert result.applied
    assert np.allclose(cloth.positions, x0 + dx, rtol=0, atol=1e-12)
    assert np.allclose(cloth.velocities, v0 + dv, rtol=0, atol=1e-9)
    assert np.array_equal(result.proposal, x0 + dx)
    cloth.revert_correction()
    assert np.array_equal(cloth.positions, x0) and np.array_equal(cloth.velocities, v0)
    with pytest.raises(RuntimeError, match="no correction to revert"):
        cloth.revert_correction()


def test_stretching_correction_is_projected_and_pins_never_move():
    cloth, top = hanging()
    cloth.step()
    x0, v0 = cloth.positions.copy(), cloth.velocities.copy()
    rng = np.random.default_rng(3)
    dx = rng.normal(scale=0.02, size=x0.shape)
    dt = 1 / 24
    strain_proposed = np.abs(_strain(cloth, x0 + dx)).max()
    result = cloth.apply_correction(dx, np.zeros_like(dx), dt, iterations=4)
    assert result.applied
    assert np.array_equal(cloth.positions[top], x0[top]) and np.array_equal(cloth.velocities[top], v0[top])
    assert np.abs(cloth.edge_strain()).max() < 0.5 * strain_proposed  # the projection pulled it back
    free = cloth.inv_mass > 0
    # what the projection moved counts as velocity: v = v0 + (x - x_proposal) / dt
    expected_v = v0 + (cloth.positions - (x0 + dx)) / dt
    assert np.allclose(cloth.velocities[free], expected_v[free], rtol=0, atol=1e-9)


def test_non_finite_correction_is_not_applied():
    cloth, _ = hanging()
    cloth.step()
    x0, v0 = cloth.positions.copy(), cloth.velocities.copy()
    dx = np.zeros_like(x0)
    dx[5] = np.nan
    assert not cloth.apply_correction(dx, np.zeros_like(dx)).applied
    assert np.array_equal(cloth.positions, x0) and np.array_equal(cloth.velocities, v0)
    with pytest.raises(ClothInputError, match="correction dv must have shape"):
        cloth.apply_correction(np.zeros_like(x0), np.zeros((2, 3)))


def _strain(cloth, x):
    e = cloth.topology.edges
    return np.linalg.norm(x[e[:, 0]] - x[e[:, 1]], axis=1) / cloth.edge_rest_length - 1.0
