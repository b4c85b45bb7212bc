"""Force fields, sewing and pressure through the bake operators, with the real bpy module.

* A Wind field and two flat panels joined by loose edges (Blender's sewing convention): the
  bake's cache, played back through Blender's Mesh Cache modifier, has every seam shut and the
  cloth's centre of mass carried downwind as a constant acceleration s under linear air drag k
  gives, x(t) = (s / k) (t - (1 - exp(-k t)) / k) (sewing forces are internal: they cannot move it);
  a Magnetic field beside it (not simulated) is named in the sidecar's warnings.
* Pressure on an open mesh: a clear error, nothing written.
"""

import json
import math

import blender_scenes
import bpy
import numpy as np
import pytest
from blender_scenes import fresh_blender, mesh_co

from selvedge import solver

FIRST, LAST = 1, 13

blender = pytest.fixture(autouse=True, name="blender")(fresh_blender)
cache_dir = pytest.fixture(name="cache_dir")(blender_scenes.cache_dir)


def sewn_panels(n=4, width=0.3, gap=0.1):
    """Two n x n panels side by side, the facing columns joined by loose edges; returns (object, pairs)."""
    verts, faces = [], []
    for offset in (0.0, width + gap):
        base = len(verts)
        for j in range(n):
            for i in range(n):
                verts.append((offset + width * i / (n - 1), width * j / (n - 1), 1.0))
        for j in range(n - 1):
            for i in range(n - 1):
                a = base + j * n + i
                faces.append((a, a + 1, a + n + 1, a + n))
    pairs = [(j * n + n - 1, n * n + j * n) for j in range(n)]
    mesh = bpy.data.meshes.new("Panels")
    mesh.from_pydata(verts, pairs, faces)
    mesh.update(calc_edges=True)
    obj = bpy.data.objects.new("Panels", mesh)
    bpy.context.collection.objects.link(obj)
    obj.selvedge.role = "CLOTH"
    obj.selvedge.material_preset = "silk"
    return obj, np.array(pairs)


def cached_world(obj, frame):
    bpy.context.scene.frame_set(frame)
    obj_eval = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    assert [m.type for m in obj.modifiers] == ["MESH_CACHE"]
    mesh = obj_eval.to_mesh()
    try:
        local = mesh_co(mesh).astype(np.float64)
    finally:
        obj_eval.to_mesh_clear()
    m = np.array(obj_eval.matrix_world, dtype=np.float64)
    return local @ m[:3, :3].T + m[:3, 3]


def test_wind_field_and_sewn_panels_bake_and_play_back(cache_dir):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FIRST, LAST
    scene.selvedge.substeps = 5
    scene.use_gravity = False
    cloth, pairs = sewn_panels()
    s = cloth.selvedge
    s.use_tethers = False
    s.use_sewing_springs = True
    s.sewing_closing_time = 0.25
    bpy.ops.object.effector_add(type="WIND", location=(0.0, -2.0, 1.0), rotation=(-math.pi / 2, 0.0, 0.0))
    wind = bpy.context.object
    wind.field.strength = 2.0  # along the field's local Z: world +y
    wind.field.flow = 0.0  # Blender's Wind default is 1 (a drag toward strength / flow)
    bpy.ops.object.effector_add(type="MAGNET", location=(0.0, 0.0, 3.0))  # not simulated: named, not silent
    magnet = bpy.context.object
    rest = mesh_co(cloth.data).astype(np.float64)
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    sidecar = json.loads((cache_dir / "Panels.json").read_text())
    assert [w for w in sidecar["warnings"] if "field type" in w] == [
        f"{magnet.name}: field type 'MAGNET' is not simulated (a Magnetic field acts on moving charges; cloth carries "
        "none); simulated: Wind, Force, Vortex, Turbulence, Harmonic, Charge, Drag"
    ]

    end = cached_world(cloth, LAST)
    assert np.linalg.norm(end[pairs[:, 0]] - end[pairs[:, 1]], axis=1).max() < 2e-3
    mass = solver.Cloth(rest, [tuple(p.vertices) for p in cloth.data.polygons]).mass
    k = solver.preset("silk").air_drag_per_s
    t = (LAST - FIRST) / (scene.render.fps / scene.render.fps_base)
    expected = 2.0 / k * (t - (1 - math.exp(-k * t)) / k)
    moved = np.average(end - rest, axis=0, weights=mass)
    assert moved[1] == pytest.approx(expected, rel=0.03)
    assert abs(moved[2]) < 1e-3  # no gravity, a field along y only
    assert moved[0] == pytest.approx(0.0, abs=2e-3)  # the seams pull both panels in, symmetrically


def test_pressure_on_an_open_mesh_is_a_clear_error_and_nothing_is_written(cache_dir):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FIRST, 3
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=4, y_subdivisions=4, size=1.0)
    cloth = bpy.context.object
    cloth.selvedge.role = "CLOTH"
    cloth.selvedge.use_pressure = True
    with pytest.raises(RuntimeError, match="pressure needs a closed mesh"):
        bpy.ops.selvedge.bake_cache()
    assert not cache_dir.exists() or not any(cache_dir.iterdir())
    assert len(cloth.modifiers) == 0 and not cloth.selvedge.bake_cache_file


def test_shape_and_pressure_properties_map_to_the_solver_with_blenders_meaning():
    from selvedge.operators import scene_to_solver as s2s

    bpy.ops.mesh.primitive_grid_add(x_subdivisions=4, y_subdivisions=4, size=1.0)
    s = bpy.context.object.selvedge
    assert s2s.pressure_from_settings(s) is None and s2s.sewing_from_settings(s, np.array([[0, 1]])) is None
    s.shrink_min, s.shrink_max = 0.1, 0.4
    shrink = s2s.shrink_from_settings(s, np.array([0.0, 1.0]))
    assert shrink.vertex_scale(2).tolist() == pytest.approx([0.9, 0.6])  # 1 - min + (min - max) w
    s.use_pressure, s.uniform_pressure_force, s.pressure_factor = True, 0.5, 300.0
    s.use_pressure_volume, s.target_volume = True, 2.0
    p = s2s.pressure_from_settings(s)
    assert (p.uniform_pressure_force, p.pressure_factor, p.use_pressure_volume, p.target_volume) == (
        0.5,
        300.0,
        True,
        2.0,
    )
    s.use_sewing_springs, s.sewing_force_max, s.sewing_closing_time, s.seam_mode = True, 2.5, 0.5, "STIFF"
    sewing = s2s.sewing_from_settings(s, np.array([[0, 5]]))
    assert (sewing.sewing_force_max, sewing.closing_time_s, sewing.seam, sewing.seam_bending) == (
        2.5,
        0.5,
        "stiff",
        True,
    )
    s.use_seam_bending = False
    assert s2s.sewing_from_settings(s, np.array([[0, 5]])).seam_bending is False
    s.drag_coefficient, s.lift_coefficient = 0.8, 0.3
    aero = s2s.aerodynamics_from_settings(s)
    assert (aero.drag_coefficient, aero.lift_coefficient, aero.air_density_kg_m3) == pytest.approx((0.8, 0.3, 1.225))
    s.air_density = 1000.0  # under water
    assert s2s.aerodynamics_from_settings(s).air_density_kg_m3 == 1000.0
    s.field_weight_all, s.field_weight_vortex, s.field_weight_harmonic = 0.5, 0.4, 0.25
    weights = s2s.effector_weights(s)
    assert weights["vortex"] == pytest.approx(0.4) and weights["all"] == 0.5 and weights["harmonic"] == 0.25
    assert weights["charge"] == weights["drag"] == 1.0  # Blender's Field Weights default
    scene = bpy.context.scene.selvedge
    assert s2s.solver_settings_from_scene(scene, 24.0).force_updates_per_frame == 1
    scene.force_updates_per_frame = 4
    assert s2s.solver_settings_from_scene(scene, 24.0).force_updates_per_frame == 4
