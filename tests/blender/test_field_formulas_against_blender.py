"""Selvedge's force fields against Blender's own effector evaluation, with the real bpy module.

Blender's Python API has no call that evaluates a field at a point, but its particle system
applies the same effector code (``BKE_effectors_apply``) to 1 kg particles. A point cloud emits
one particle per vertex at frame 1, all with the same start velocity v0 (Object Align), no
gravity, Euler integration; one step to frame 2 changes each velocity by a(x0, v0) dt, dt =
the particles' Timestep (0.04 s), so Blender's acceleration at x0 is (v(2) - v0) / dt. The same
scene's field is read through the bake's reader (operators/bake/fields.py) and evaluated by
``solver.forces.evaluate_fields`` at the same points and velocity. Blender computes in float32:
the tolerance is 2e-4 of the largest acceleration (measured differences: about 1e-6 of it).

Turbulence and the strength noise are random fields: Blender's noise table and its RNG stream
are its own, so their statistics are compared (RMS, mean, correlation length), not values.
"""

import blender_scenes
import bpy
import numpy as np
import pytest
from blender_scenes import fresh_blender

from selvedge.operators.bake.fields import read_force_fields
from selvedge.solver.forces import evaluate_fields

blender = pytest.fixture(autouse=True, name="blender")(fresh_blender)
assert blender_scenes  # the module's helpers are shared with the other bpy tests

V0 = (0.6, -0.4, 0.3)  # m/s, every particle's start velocity (the velocity-dependent terms act on it)


def _points(n=48, seed=0, half=1.6):
    return np.random.default_rng(seed).uniform(-half, half, (n, 3)) + (0.3, -0.2, 0.1)


def _field_object(kind, location=(0.0, 0.0, 0.0), rotation=(0.0, 0.0, 0.0), on_mesh=False, **settings):
    """A field object (an Empty; a cube mesh when ``on_mesh``: Surface and Every Point need one)."""
    if on_mesh:
        bpy.ops.mesh.primitive_cube_add(size=0.5, location=location, rotation=rotation)
        bpy.ops.object.forcefield_toggle()
    else:
        bpy.ops.object.effector_add(type=kind, location=location, rotation=rotation)
    obj = bpy.context.active_object
    obj.field.type = kind
    for name, value in settings.items():
        setattr(obj.field, name, value)
    return obj


def blender_accelerations(points, v0=V0, charge=0.0):
    """Blender's acceleration (m/s^2) of a 1 kg particle at each point moving at ``v0``; the
    particles carry ``charge`` (their own Charge field's strength) when it is not 0."""
    scene = bpy.context.scene
    scene.use_gravity = False
    mesh = bpy.data.meshes.new("Emitter")
    mesh.from_pydata([tuple(p) for p in points], [], [])
    emitter = bpy.data.objects.new("Emitter", mesh)
    scene.collection.objects.link(emitter)
    psys = emitter.modifiers.new("Particles", "PARTICLE_SYSTEM").particle_system
    part = psys.settings
    part.count = len(points)
    part.frame_start = part.frame_end = 1
    part.lifetime = 50
    part.emit_from = "VERT"
    part.use_emit_random = False
    part.normal_factor = 0.0
    part.factor_random = 0.0
    part.object_align_factor = v0
    part.integrator = "EULER"
    part.effector_weights.gravity = 0.0
    if charge:
        part.force_field_1.type = "CHARGE"
        part.force_field_1.strength = charge
    dt = part.timestep
    velocities = []
    for frame in (1, 2):
        scene.frame_set(frame)
        particles = emitter.evaluated_get(bpy.context.evaluated_depsgraph_get()).particle_systems[0].particles
        velocities.append(np.array([p.velocity[:] for p in particles], dtype=np.float64))
        if frame == 1:  # the test's premise: every particle born at its vertex with velocity v0
            x0 = np.array([p.location[:] for p in particles], dtype=np.float64)
            np.testing.assert_allclose(x0, points, atol=1e-6)
            np.testing.assert_allclose(velocities[0], np.broadcast_to(v0, x0.shape), atol=1e-6)
    bpy.data.objects.remove(emitter)
    return (velocities[1] - velocities[0]) / dt


def selvedge_accelerations(points, v0=V0, unit=1.0):
    """The scene's fields as the bake reads them for a cloth (operators/bake/fields.py), evaluated
    by the solver's kernel at ``points`` moving at ``v0`` (metres, m/s; ``unit`` metres per
    Blender unit); and the reader's warnings."""
    scene = bpy.context.scene
    mesh = bpy.data.meshes.new("Cloth")
    mesh.from_pydata([(5.0, 5.0, 5.0), (5.1, 5.0, 5.0), (5.0, 5.1, 5.0)], [], [(0, 1, 2)])
    cloth = bpy.data.objects.new("Cloth", mesh)
    scene.collection.objects.link(cloth)
    cloth.selvedge.role = "CLOTH"
    scene.frame_set(1)
    fields, warnings = read_force_fields(scene, bpy.context.evaluated_depsgraph_get(), cloth, unit)
    bpy.data.objects.remove(cloth)
    velocities = np.broadcast_to(np.asarray(v0, dtype=np.float64), points.shape)
    return evaluate_fields(fields, points, velocities), fields, warnings


CASES = {
    "wind_plane_sphere_min_max_flow": dict(
        kind="WIND",
        rotation=(0.4, -0.3, 0.0),
        shape="PLANE",
        strength=3.0,
        flow=0.8,
        falloff_power=2.0,
        use_min_distance=True,
        distance_min=0.3,
        use_max_distance=True,
        distance_max=1.4,
    ),
    "wind_plane_tube": dict(
        kind="WIND",
        location=(0.2, 0.0, 0.3),
        shape="PLANE",
        strength=2.0,
        falloff_type="TUBE",
        falloff_power=1.0,
        radial_falloff=2.0,
        use_radial_max=True,
        radial_max=1.5,
    ),
    "force_point_tube_positive_z": dict(
        kind="FORCE",
        location=(0.1, 0.2, -0.1),
        rotation=(0.0, 0.5, 0.2),
        strength=-4.0,
        falloff_type="TUBE",
        falloff_power=1.5,
        radial_falloff=1.0,
        use_radial_min=True,
        radial_min=0.4,
        z_direction="POSITIVE",
        flow=0.3,
    ),
    "force_line_cone_gravitation": dict(
        kind="FORCE",
        location=(0.3, 0.0, 0.0),
        rotation=(0.7, 0.0, 0.3),
        shape="LINE",
        strength=2.5,
        use_gravity_falloff=True,
        falloff_type="CONE",
        falloff_power=0.5,
        radial_falloff=1.0,
        use_radial_max=True,
        radial_max=75.0,
    ),
    "wind_line_sphere_power": dict(
        kind="WIND", rotation=(0.0, 0.6, 0.0), shape="LINE", strength=2.0, falloff_power=1.5, flow=0.4
    ),
    "harmonic_line": dict(kind="HARMONIC", shape="LINE", strength=1.5, harmonic_damping=0.5, rest_length=0.3),
    "force_point_power_max": dict(
        kind="FORCE", strength=3.0, falloff_power=2.0, use_max_distance=True, distance_max=1.8
    ),
    "vortex_point": dict(kind="VORTEX", rotation=(0.3, 0.2, 0.0), shape="POINT", strength=1.7, falloff_power=1.0),
    "vortex_plane_inflow": dict(kind="VORTEX", rotation=(0.0, 0.4, 0.0), shape="PLANE", strength=1.2, flow=0.5),
    "vortex_plane_negative_z": dict(
        kind="VORTEX", shape="PLANE", strength=-0.9, z_direction="NEGATIVE", falloff_power=1.0
    ),
    "harmonic_rest_length": dict(
        kind="HARMONIC", location=(0.2, 0.1, 0.0), strength=3.0, harmonic_damping=0.4, rest_length=0.6
    ),
    "harmonic_plane_falloff": dict(
        kind="HARMONIC", shape="PLANE", strength=2.0, harmonic_damping=1.0, falloff_power=1.0
    ),
    "drag": dict(kind="DRAG", strength=0.7, harmonic_damping=0.4, falloff_power=1.0),
    "drag_capped": dict(kind="DRAG", strength=3.0, harmonic_damping=2.6),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_field_accelerates_as_blenders_particles_feel_it(case):
    settings = dict(CASES[case])
    _field_object(
        settings.pop("kind"), settings.pop("location", (0, 0, 0)), settings.pop("rotation", (0, 0, 0)), **settings
    )
    points = _points()
    expected = blender_accelerations(points)
    got, fields, warnings = selvedge_accelerations(points)
    assert len(fields) == 1 and warnings == []
    scale = np.abs(expected).max()
    assert scale > 0.2, "the field must act"
    assert (np.abs(expected).sum(axis=1) > 1e-3 * scale).sum() >= 8, "at least a few points inside the falloff"
    np.testing.assert_allclose(got, expected, atol=2e-4 * scale, rtol=0)


UNIT_CASES = [
    "wind_plane_sphere_min_max_flow",
    "wind_plane_tube",
    "force_point_tube_positive_z",
    "force_line_cone_gravitation",
    "vortex_plane_inflow",
    "harmonic_rest_length",
    "drag",
]


@pytest.mark.parametrize("case", UNIT_CASES)
def test_a_field_in_a_scene_of_another_unit_scale_accelerates_the_same_in_metres(case):
    """Unit Scale 2 (a Blender unit is 2 m): Blender's particle in Blender units, scaled to
    metres, against Selvedge's reader with the bake's unit: lengths and strengths converted, and
    the falloff taken in Blender units as Blender does (``1 + d`` is not scale-free)."""
    unit = 2.0
    settings = dict(CASES[case])
    _field_object(
        settings.pop("kind"), settings.pop("location", (0, 0, 0)), settings.pop("rotation", (0, 0, 0)), **settings
    )
    points = _points(seed=7)
    expected = unit * blender_accelerations(points)
    got, _, _ = selvedge_accelerations(unit * points, v0=unit * np.asarray(V0), unit=unit)
    scale = np.abs(expected).max()
    assert scale > 0.2
    np.testing.assert_allclose(got, expected, atol=2e-4 * scale, rtol=0)


EVERY_POINT_CASES = {
    "force_tube": dict(kind="FORCE", strength=2.0, falloff_power=1.0, falloff_type="TUBE", radial_falloff=1.0),
    "wind_positive_z": dict(kind="WIND", strength=1.5, falloff_power=2.0, z_direction="POSITIVE", flow=0.5),
    "harmonic_one_vertex_each": dict(kind="HARMONIC", strength=2.0, harmonic_damping=0.3, rest_length=0.2),
    "vortex": dict(kind="VORTEX", strength=0.8, falloff_power=1.0),
    "charge": dict(kind="CHARGE", strength=1.2, falloff_power=2.0),
}


@pytest.mark.parametrize("case", list(EVERY_POINT_CASES))
def test_an_every_point_field_acts_from_each_vertex_as_in_blender(case):
    """Shape Every Point on a rotated cube: a field at each of its 8 vertices along the vertex
    normal, Blender's mix of vertex and object frames included (see solver/forces.py)."""
    settings = dict(EVERY_POINT_CASES[case])
    kind = settings.pop("kind")
    obj = _field_object(kind, (0.2, -0.1, 0.3), (0.3, 0.5, 0.1), on_mesh=True, shape="POINTS", **settings)
    assert obj.field.shape == "POINTS"
    points = _points(seed=5)
    expected = blender_accelerations(points, charge=1.0 if kind == "CHARGE" else 0.0)
    got, fields, warnings = selvedge_accelerations(points)
    assert len(fields) == 8 and warnings == []
    scale = np.abs(expected).max()
    assert scale > 0.2
    np.testing.assert_allclose(got, expected, atol=2e-4 * scale, rtol=0)


def test_charge_acts_on_unit_charge_as_on_a_particle_of_charge_one():
    """Blender's Charge field pushes a particle by its own charge (the particle system's Charge
    field strength) times s F r; Selvedge's cloth carries charge +1."""
    _field_object("CHARGE", location=(0.1, 0.0, 0.2), strength=-2.0, falloff_power=2.0)
    points = _points(seed=3)
    expected = blender_accelerations(points, charge=1.0)
    got, _, _ = selvedge_accelerations(points)
    scale = np.abs(expected).max()
    assert scale > 0.2
    np.testing.assert_allclose(got, expected, atol=2e-4 * scale, rtol=0)
    # and a charge-free particle feels nothing, as Blender's own cloth (no charge) does
    assert np.abs(blender_accelerations(points)).max() == 0.0


def test_turbulence_has_blenders_strength_and_size_statistics():
    """Same construction (depth-2 improved Perlin turbulence), another noise table: over many
    points the RMS per axis and the correlation at a fraction of the Size match Blender's."""
    size = 0.4
    _field_object("TURBULENCE", strength=2.0, size=size, seed=5)
    points = np.random.default_rng(11).uniform(-8.0, 8.0, (1500, 3))
    shifted = points + (0.25 * size, 0.0, 0.0)
    both = np.concatenate([points, shifted])
    expected = blender_accelerations(both, v0=(0.0, 0.0, 0.0))
    got, _, _ = selvedge_accelerations(both, v0=(0.0, 0.0, 0.0))
    for a in (expected, got):
        assert np.abs(a).max() <= 2.0 + 1e-4
    rms_b, rms_s = np.sqrt((expected**2).mean()), np.sqrt((got**2).mean())
    assert rms_s == pytest.approx(rms_b, rel=0.1)
    assert np.abs(got.mean(axis=0)).max() < 0.15 * rms_s and np.abs(expected.mean(axis=0)).max() < 0.15 * rms_b
    n = len(points)

    def lag_correlation(a):
        return np.mean([np.corrcoef(a[:n, k], a[n:, k])[0, 1] for k in range(3)])

    assert lag_correlation(got) == pytest.approx(lag_correlation(expected), abs=0.08)


def test_strength_noise_has_blenders_spread():
    """Noise adds Blender's wind_func draw to the strength at each evaluation: a Wind of strength
    0 with Noise 2 gives accelerations along Z with Blender's mean and spread."""
    _field_object("WIND", shape="POINT", strength=0.0, noise=2.0, seed=9)
    points = np.random.default_rng(2).uniform(-1.0, 1.0, (2000, 3))
    expected = blender_accelerations(points, v0=(0.0, 0.0, 0.0))[:, 2]
    got = selvedge_accelerations(points, v0=(0.0, 0.0, 0.0))[0][:, 2]
    assert expected.std() > 0.3
    assert got.std() == pytest.approx(expected.std(), rel=0.06)
    assert got.mean() == pytest.approx(expected.mean(), abs=0.06)
    assert np.abs(got).max() <= 2.0 and np.abs(expected).max() <= 2.0 + 1e-4


@pytest.mark.parametrize(
    ("kind", "settings", "message"),
    [
        ("MAGNET", {}, "field type 'MAGNET' is not simulated"),
        ("TEXTURE", {}, "field type 'TEXTURE' is not simulated"),
        ("LENNARDJ", {}, "field type 'LENNARDJ' is not simulated"),
        ("WIND", {"shape": "SURFACE", "on_mesh": True}, "shape Surface"),
        ("WIND", {"use_absorption": True}, "Absorption"),
    ],
)
def test_what_selvedge_does_not_simulate_is_named_in_the_warnings(kind, settings, message):
    obj = _field_object(kind, **settings)
    if settings.get("shape") in ("SURFACE", "POINTS"):
        assert obj.field.shape == settings["shape"]
    _, fields, warnings = selvedge_accelerations(_points(4))
    assert len(warnings) == 1 and warnings[0].startswith(obj.name + ": ") and message in warnings[0]
    assert len(fields) == (1 if "use_absorption" in settings else 0)


def test_a_field_not_applied_to_location_moves_nothing_in_either():
    _field_object("FORCE", strength=5.0, apply_to_location=False)
    points = _points(8)
    assert np.abs(blender_accelerations(points)).max() == 0.0
    got, fields, warnings = selvedge_accelerations(points)
    assert fields == [] and warnings == [] and np.abs(got).max() == 0.0
