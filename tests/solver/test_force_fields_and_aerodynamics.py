"""Force fields (Blender's Wind, Force, Vortex, Turbulence, Harmonic, Charge, Drag) and per-triangle drag and lift.

References: Blender's effector formulas (solver/forces.py writes them down; transcribed again
here in NumPy, on points and settings the kernel never saw), the analytic velocity of a body
under a constant force with linear drag (Flow), and the terminal velocity of a plate falling
flat, m g = rho C_D A v^2 / 2, against free fall edge-on.
"""

import numpy as np
import pytest

from selvedge.solver import Cloth, ClothInputError, ClothOptions, Material, SolverSettings, grid_mesh
from selvedge.solver.aerodynamics import Aerodynamics
from selvedge.solver.forces import ForceField, evaluate_fields, field_accelerations, pack_fields

OFF = ClothOptions(bending=False, shear=False, tethers=False)


def _triangle(**kw):
    pos = np.array([[0.0, 0.0, 0.0], [0.01, 0.0, 0.0], [0.0, 0.01, 0.0]])
    settings = SolverSettings(substeps=10, gravity_m_s2=(0.0, 0.0, 0.0), force_updates_per_frame=10)
    return Cloth(pos, [[0, 1, 2]], material=Material(air_drag_per_s=0.0), settings=settings, options=OFF, **kw)


def _blender_falloff(x, use_min, x_min, use_max, x_max, power):
    if use_max and x > x_max:
        return 0.0
    if use_min and x < x_min:
        return 1.0
    return (1.0 + x - (x_min if use_min else 0.0)) ** (-power)


def _reference_acceleration(f: ForceField, p, v):
    """Blender's get_effector_data / effector_falloff / do_physical_effector for one point (a
    1 kg particle, velocities per second), written out again from effect.cc."""
    z = np.asarray(f.direction, float) / np.linalg.norm(f.direction)
    q = p - np.asarray(f.location, float)  # vec_to_point2
    c = np.dot(z, q)
    if f.shape == "point":
        r = q
    elif f.shape == "plane" and f.kind != "vortex":
        r = c * z
    else:
        r = q - c * z
    d = np.linalg.norm(r)
    if f.kind == "harmonic" and f.rest_length:
        r = r * (d - f.rest_length) / d
    if (f.z_direction == "positive" and c < 0) or (f.z_direction == "negative" and c > 0):
        return np.zeros(3)
    mins = (f.use_min_distance, f.distance_min, f.use_max_distance, f.distance_max, f.falloff_power)
    rads = (f.use_radial_min, f.radial_min, f.use_radial_max, f.radial_max, f.radial_falloff)
    if f.falloff_type == "sphere":
        fall = _blender_falloff(d, *mins)
    elif f.falloff_type == "tube":
        fall = _blender_falloff(abs(c), *mins) * _blender_falloff(np.linalg.norm(q - c * z), *rads)
    else:
        angle = np.degrees(np.arccos(np.clip(c / np.linalg.norm(q), -1, 1)))
        fall = _blender_falloff(abs(c), *mins) * _blender_falloff(angle, *rads)
    fall *= f.weight
    if fall == 0:
        return np.zeros(3)
    s, b = f.strength, f.damping
    if f.kind == "wind":
        out = s * fall * z
    elif f.kind == "force":
        if f.use_gravity_falloff:
            s = s / d**2
        out = s * fall * r / d
    elif f.kind == "vortex" and f.shape == "point":
        t = np.cross(z, r)
        out = s * fall * d * t / np.linalg.norm(t)
    elif f.kind == "vortex":
        t = s * fall * np.cross(z, q)
        out = s * fall * np.cross(z, t) + t - v
    elif f.kind == "harmonic":
        return -s * fall * r - b * 2 * np.sqrt(abs(s)) * v
    elif f.kind == "charge":
        out = s * fall * r
    elif f.kind == "drag":
        return -fall * v * (min(s, 2.0) * np.linalg.norm(v) + min(b, 2.0))
    return out - f.flow * fall * v


CASES = [
    ForceField(
        "force", location=(0.3, -0.2, 0.1), strength=-4.0, falloff_power=2.0, use_max_distance=True, distance_max=1.5
    ),
    ForceField("force", strength=3.0, falloff_power=1.5, use_min_distance=True, distance_min=0.4, weight=0.5),
    ForceField(
        "wind",
        direction=(1.0, 1.0, 0.0),
        strength=2.0,
        shape="plane",
        falloff_type="tube",
        falloff_power=1.0,
        radial_falloff=2.0,
        use_radial_max=True,
        radial_max=1.2,
    ),
    ForceField(
        "wind",
        direction=(0.0, 0.0, 1.0),
        strength=5.0,
        falloff_type="cone",
        falloff_power=0.5,
        radial_falloff=0.05,
        use_radial_max=True,
        radial_max=60.0,
        z_direction="positive",
    ),
    ForceField("vortex", location=(0.0, 0.0, -0.5), direction=(0.0, 1.0, 1.0), strength=1.5, falloff_power=1.0),
    ForceField(
        "wind",
        location=(0.2, 0.0, 0.0),
        direction=(0.0, 0.0, 1.0),
        strength=2.0,
        shape="plane",
        falloff_type="cone",
        falloff_power=1.0,
        radial_falloff=1.0,
        use_radial_max=True,
        radial_max=70.0,
        flow=0.7,
    ),
    ForceField("force", shape="line", direction=(1.0, 0.0, 1.0), strength=2.0, falloff_power=2.0, flow=0.3),
    ForceField("force", location=(0.1, 0.2, 0.3), strength=1.5, use_gravity_falloff=True),
    ForceField("vortex", shape="plane", direction=(0.0, 1.0, 1.0), strength=1.5, falloff_power=1.0, flow=0.4),
    ForceField("vortex", shape="line", strength=-0.8, use_max_distance=True, distance_max=1.6),
    ForceField("harmonic", location=(0.2, 0.1, 0.0), strength=3.0, damping=0.4, rest_length=0.5, falloff_power=1.0),
    ForceField("harmonic", shape="plane", strength=2.0, damping=1.0, flow=0.5),
    ForceField("harmonic", location=(0.1, 0.0, 0.2), strength=2.5, damping=0.3, rest_length=0.4, weight=0.7),
    ForceField("harmonic", strength=1.5, damping=0.0),
    ForceField("charge", location=(0.0, 0.3, 0.0), strength=-2.0, falloff_power=2.0),
    ForceField("drag", strength=0.7, damping=0.4, falloff_type="tube", use_radial_max=True, radial_max=1.0),
    ForceField("drag", strength=3.0, damping=2.5),
]


@pytest.mark.parametrize("index", range(len(CASES)))
def test_field_falloff_and_force_match_blenders_formulas(index):
    f = CASES[index]
    rng = np.random.default_rng(index)
    points = rng.uniform(-1.5, 1.5, (400, 3))
    velocities = rng.normal(0.0, 1.0, (400, 3))
    acc = evaluate_fields([f], points, velocities)
    expected = np.array([_reference_acceleration(f, p, v) for p, v in zip(points, velocities)])
    assert np.abs(expected).max() > 0.1 and (np.abs(expected).sum(axis=1) == 0).sum() < 400
    np.testing.assert_allclose(acc, expected, rtol=1e-9, atol=1e-12)


def test_wind_with_flow_drives_a_free_body_to_strength_over_flow():
    """Blender's Flow: F = s z - flow v, so v(t) = (s / flow)(1 - exp(-flow t)) along the wind."""
    s, flow = 2.0, 0.5
    cloth = _triangle(force_fields=[ForceField("wind", direction=(0.0, 1.0, 0.0), strength=s, flow=flow)])
    fps = cloth.settings.fps
    for frame in range(1, 10 * 24 + 1):
        cloth.step()
        if frame == 24:
            assert cloth.velocities[:, 1] == pytest.approx(s / flow * (1 - np.exp(-flow * 1.0)), rel=2e-3)
    assert cloth.velocities[:, 1] == pytest.approx(s / flow * (1 - np.exp(-flow * 240 / fps)), rel=2e-3)
    assert np.abs(cloth.velocities[:, [0, 2]]).max() < 1e-9


def test_turbulence_is_reproducible_bounded_and_centred():
    f = ForceField("turbulence", strength=3.0, size=0.2, seed=7)
    points = np.random.default_rng(1).uniform(-2, 2, (4000, 3))
    table, perms = pack_fields([f])
    acc = np.zeros_like(points)
    field_accelerations(points, np.zeros_like(points), np.ones(4000), table, perms, 0, False, acc, np.zeros_like(acc))
    again = np.zeros_like(points)
    field_accelerations(points, np.zeros_like(points), np.ones(4000), table, perms, 5, False, again, np.zeros_like(acc))
    assert np.array_equal(acc, again)  # a field of space, not of time
    assert np.abs(acc).max() <= 3.0
    assert np.abs(acc.mean(axis=0)).max() < 0.1 and acc.std() > 0.2
    # correlated within a fraction of the size, not across many sizes
    near = points + 0.004
    acc_near = np.zeros_like(points)
    field_accelerations(
        near, np.zeros_like(points), np.ones(4000), table, perms, 0, False, acc_near, np.zeros_like(acc)
    )
    assert np.corrcoef(acc[:, 0], acc_near[:, 0])[0, 1] > 0.95
    other = np.zeros_like(points)
    field_accelerations(
        points,
        np.zeros_like(points),
        np.ones(4000),
        *pack_fields([ForceField("turbulence", strength=3.0, size=0.2, seed=8)]),
        0,
        False,
        other,
        np.zeros_like(acc),
    )
    assert abs(np.corrcoef(acc[:, 0], other[:, 0])[0, 1]) < 0.2


def test_strength_noise_has_blenders_distribution():
    """wind_func: sign * r / (128 g) * noise, r in 0..127, g in [1, 2): |noise| bound, mean ~ 0."""
    f = ForceField("wind", direction=(1.0, 0.0, 0.0), strength=0.0, noise=2.0)
    points = np.zeros((20000, 3))
    table, perms = pack_fields([f])
    acc = np.zeros_like(points)
    field_accelerations(points, np.zeros_like(points), np.ones(20000), table, perms, 3, False, acc, np.zeros_like(acc))
    r = np.arange(128)
    g = np.linspace(1, 2, 2001)[:-1]
    ref = (np.where(r > 64, 1.0, -1.0)[:, None] * r[:, None] / (128 * g[None, :]) * 2.0).ravel()
    assert np.abs(acc[:, 0]).max() <= 2.0
    assert acc[:, 0].mean() == pytest.approx(ref.mean(), abs=0.02)
    assert acc[:, 0].std() == pytest.approx(ref.std(), rel=0.03)


def _falling_sheet(plane, drag, updates=10):
    pos, faces, uv = grid_mesh(5, 5, 0.2, 0.2, origin=(0.0, 0.0, 0.0), plane=plane)
    settings = SolverSettings(substeps=10, force_updates_per_frame=updates)
    return Cloth(
        pos,
        faces,
        material=Material(density_kg_m2=0.15, air_drag_per_s=0.0),
        settings=settings,
        options=ClothOptions(bending=False, tethers=False),
        aerodynamics=Aerodynamics(drag_coefficient=drag),
    )


def test_a_sheet_falling_flat_reaches_its_terminal_velocity_and_edge_on_falls_freely():
    cd, rho, g, density = 1.2, 1.225, 9.81, 0.15
    flat, edge_on = _falling_sheet("xy", cd), _falling_sheet("xz", cd)
    for _ in range(48):
        flat.step()
        edge_on.step()
    terminal = np.sqrt(2 * density * g / (rho * cd))  # m g = rho C_D A v^2 / 2, m = density A
    assert flat.velocities[:, 2].mean() == pytest.approx(-terminal, rel=0.01)
    assert edge_on.velocities[:, 2].mean() == pytest.approx(-g * 2.0, rel=0.01)
    fallen_flat = -flat.positions[:, 2].mean()
    fallen_edge = -(edge_on.positions[:, 2].mean() - 0.1)
    assert fallen_edge == pytest.approx(0.5 * g * 4.0, rel=0.01)
    assert fallen_flat < 0.25 * fallen_edge


def test_forces_held_over_the_frame_reach_the_same_terminal_velocity():
    """The default evaluates fields and aerodynamics once a frame (cost); the steady state is the same."""
    once, every = _falling_sheet("xy", 1.2, updates=1), _falling_sheet("xy", 1.2, updates=10)
    for _ in range(48):
        once.step()
        every.step()
    assert once.velocities[:, 2].mean() == pytest.approx(every.velocities[:, 2].mean(), rel=0.005)


def test_lift_turns_a_tilted_plate_across_the_wind():
    """At 45 deg, F_D = q A C_D / sqrt(2) along the wind, F_L = q A C_L / 2 across it."""
    from selvedge.solver.aerodynamics import add_aerodynamic_accelerations

    x = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 1.0]])  # normal (1, 0, -1)/sqrt(2)
    tri = np.array([[0, 1, 2]], dtype=np.int64)
    air = np.tile([10.0, 0.0, 0.0], (3, 1))
    acc = np.zeros((3, 3))
    add_aerodynamic_accelerations(x, np.zeros((3, 3)), tri, np.ones(3), air, 0.8, 0.6, 1.2, 1e-6, acc)
    force = acc.sum(axis=0)
    q_area = 0.5 * 1.2 * 100.0 * (np.sqrt(2.0) / 2.0)
    assert force[0] == pytest.approx(q_area * 0.8 / np.sqrt(2.0))
    assert force[2] == pytest.approx(-q_area * 0.6 / 2.0)
    assert force[1] == pytest.approx(0.0, abs=1e-12)


def test_wind_field_sets_the_air_for_aerodynamics():
    """With aerodynamics on, a Wind field of strength s is air at s m/s: a free sheet facing it
    catches up as du/dt = -k u^2 (u = s - v, k = rho C_D / (2 areal density)): u = s / (1 + k s t)."""
    pos, faces, _ = grid_mesh(4, 4, 0.1, 0.1, plane="xz")
    cloth = Cloth(
        pos,
        faces,
        material=Material(density_kg_m2=0.15, air_drag_per_s=0.0),
        options=OFF,
        settings=SolverSettings(substeps=10, gravity_m_s2=(0.0, 0.0, 0.0), force_updates_per_frame=10),
        aerodynamics=Aerodynamics(drag_coefficient=1.0),
        force_fields=[ForceField("wind", direction=(0.0, 1.0, 0.0), strength=3.0)],
    )
    for _ in range(72):
        cloth.step()
    k = 1.225 * 1.0 / (2 * 0.15)
    assert 3.0 - cloth.velocities[:, 1].mean() == pytest.approx(3.0 / (1 + k * 3.0 * 3.0), rel=0.02)


def test_bad_field_settings_are_refused():
    with pytest.raises(ClothInputError, match="force field kind must be one of"):
        _triangle(force_fields=[ForceField("magnet")])
    with pytest.raises(ClothInputError, match="turbulence size must be positive"):
        _triangle(force_fields=[ForceField("turbulence", size=0.0)])
    with pytest.raises(ClothInputError, match="aerodynamics drag_coefficient"):
        _triangle(aerodynamics=Aerodynamics(drag_coefficient=-1.0))


def test_blender_field_settings_translate_by_name():
    from selvedge.solver.blender_fields import field_from_blender

    m = np.eye(4)
    m[:3, 3] = (1.0, 2.0, 3.0)
    m[:3, 2] = (0.0, 2.0, 0.0)  # local Z scaled: the direction is normalised
    settings = {
        "type": "WIND",
        "shape": "PLANE",
        "strength": 4.0,
        "flow": 0.5,
        "noise": 0.1,
        "seed": 3,
        "falloff_type": "TUBE",
        "falloff_power": 2.0,
        "use_max_distance": True,
        "distance_max": 5.0,
        "z_direction": "POSITIVE",
        "size": 1.0,
        "use_global_coords": False,
    }
    field, reason = field_from_blender(settings, m, {"all": 0.5, "wind": 0.8})
    assert reason == ""
    assert (field.kind, field.shape, field.falloff_type, field.z_direction) == ("wind", "plane", "tube", "positive")
    assert field.location == (1.0, 2.0, 3.0) and field.weight == pytest.approx(0.4)
    assert field.use_max_distance is True and field.seed == 3 and field.distance_max == 5.0
    table, _ = pack_fields([field])
    assert table[0, 7:10].tolist() == [0.0, 1.0, 0.0]
    skipped, why = field_from_blender({"type": "MAGNET"}, m)
    assert skipped is None and "MAGNET" in why
    skipped, why = field_from_blender({"type": "FORCE", "shape": "SURFACE"}, m)
    assert skipped is None and "SURFACE" in why


def test_the_three_turbulence_axes_are_blenders_three_samples():
    """The kernel computes the three axes together (shared lattice cell); each must equal the
    octave sum at Blender's permuted sample points (y, z, x) and (z, x, y)."""
    from numba import njit

    from selvedge.solver.field_noise import turbulence, turbulence_axes

    @njit
    def both(p, size, pts):
        out = np.empty((pts.shape[0], 6))
        for i in range(pts.shape[0]):
            x, y, z = pts[i, 0], pts[i, 1], pts[i, 2]
            out[i, 0], out[i, 1], out[i, 2] = turbulence_axes(p, size, x, y, z)
            out[i, 3] = turbulence(p, size, x, y, z)
            out[i, 4] = turbulence(p, size, y, z, x)
            out[i, 5] = turbulence(p, size, z, x, y)
        return out

    _, perms = pack_fields([ForceField("turbulence", seed=4)])
    out = both(perms[0], 0.3, np.random.default_rng(5).uniform(-3, 3, (2000, 3)))
    assert out[:, :3].std() > 0.05
    np.testing.assert_allclose(out[:, :3], out[:, 3:], atol=1e-12)


@pytest.mark.parametrize(("damping", "analytic"), [(0.0, "cos"), (1.0, "critical")])
def test_a_harmonic_field_is_a_spring_of_rate_sqrt_strength(damping, analytic):
    """Harmonic, strength s, damping b: x'' = -s x - 2 b sqrt(s) x'. b = 0: x0 cos(w t); b = 1
    (critical): x0 (1 + w t) exp(-w t), w = sqrt(s). At the default one field update a frame: the
    spring is evaluated every substep (held over a frame it doubles its energy in 10 s)."""
    s, x0 = 4.0, 0.3
    w = np.sqrt(s)
    pos = np.array([[0.0, 0.0, 0.0], [0.01, 0.0, 0.0], [0.0, 0.01, 0.0]])
    pos += [x0, 0.0, 0.0] - pos.mean(axis=0)
    settings = SolverSettings(substeps=10, gravity_m_s2=(0.0, 0.0, 0.0))
    assert settings.force_updates_per_frame == 1
    cloth = Cloth(
        pos,
        [[0, 1, 2]],
        material=Material(air_drag_per_s=0.0),
        settings=settings,
        options=OFF,
        force_fields=[ForceField("harmonic", strength=s, damping=damping)],
    )
    fps = cloth.settings.fps
    errors = []
    for frame in range(1, 10 * 24 + 1):
        cloth.step()
        t = frame / fps
        expected = x0 * np.cos(w * t) if analytic == "cos" else x0 * (1 + w * t) * np.exp(-w * t)
        errors.append(abs(cloth.positions[:, 0].mean() - expected))
    assert max(errors) < 0.02 * x0


def test_every_point_is_one_field_per_vertex_and_a_large_mesh_is_named():
    from selvedge.solver.blender_fields import EVERY_POINT_WARN_VERTICES, fields_from_blender

    m = np.eye(4)
    m[:3, 3] = (0.0, 0.0, 1.0)
    n = EVERY_POINT_WARN_VERTICES + 44
    rng = np.random.default_rng(3)
    positions, normals = rng.uniform(-1, 1, (n, 3)), rng.normal(size=(n, 3))
    settings = {"type": "HARMONIC", "shape": "POINTS", "strength": 2.0}
    fields, why = fields_from_blender(settings, m, None, (positions, normals))
    assert len(fields) == n and f"Every Point with {n} vertices" in why
    assert [f.point_index for f in fields] == list(range(n)) and {f.point_count for f in fields} == {n}
    np.testing.assert_allclose(fields[5].location, positions[5] + (0.0, 0.0, 1.0))
    np.testing.assert_allclose(fields[5].direction, normals[5] / np.linalg.norm(normals[5]))
    assert fields[5].origin == (0.0, 0.0, 1.0) and fields[5].axis == (0.0, 0.0, 1.0)
    few, why = fields_from_blender(dict(settings, type="WIND"), m, None, (positions[:8], normals[:8]))
    assert len(few) == 8 and why == "" and {f.point_count for f in few} == {0}
    none, why = fields_from_blender(settings, m, None, None)
    assert none == [] and "without vertices" in why
