"""Selvedge's Blender settings: registration, property defaults and their mapping to the solver.

Numbers are checked against the solver's own presets and the documented slider formula
alpha = 10^(log10(soft) + s (log10(stiff) - log10(soft))) (solver/materials.py).
"""

import math

import bpy
import pytest

import selvedge
from selvedge import solver
from selvedge.operators import scene_to_solver as s2s
from selvedge.solver.materials import BEND_COMPLIANCE_RANGE, STRETCH_COMPLIANCE_RANGE

MATERIAL_FIELDS = (
    "stretch_compliance_warp",
    "stretch_compliance_weft",
    "stretch_compliance_bias",
    "shear_compliance",
    "bend_compliance",
    "density_kg_m2",
    "thickness_m",
    "stretch_damping_s",
    "bend_damping_s",
    "air_drag_per_s",
    "friction_static",
    "friction_kinetic",
)


@pytest.fixture(autouse=True)
def blender():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    selvedge.register()
    yield
    if hasattr(bpy.types.Object, "selvedge"):
        selvedge.unregister()
    bpy.ops.wm.read_factory_settings(use_empty=True)


def new_mesh_object(name="Cloth"):
    obj = bpy.data.objects.new(name, bpy.data.meshes.new(name))
    bpy.context.scene.collection.objects.link(obj)
    return obj


def assert_material_close(actual, expected, rel=2e-6):
    for key in MATERIAL_FIELDS:
        a, e = getattr(actual, key), getattr(expected, key)
        assert a == pytest.approx(e, rel=rel), f"{key}: {a} != {e}"


def test_enum_literals_match_the_solver():
    assert tuple(solver.PRESETS) == s2s.PRESET_NAMES
    assert s2s.BENDING_MODELS == solver.BENDING_MODELS
    assert s2s.SOLVE_MODES == solver.SOLVE_MODES
    obj = new_mesh_object()
    items = obj.selvedge.bl_rna.properties["material_preset"].enum_items.keys()
    assert tuple(items) == tuple(solver.PRESETS)


def test_defaults_reproduce_the_cotton_preset():
    obj = new_mesh_object()
    settings = obj.selvedge
    assert settings.role == "NONE" and settings.material_preset == "cotton"
    assert_material_close(s2s.material_from_settings(settings), solver.preset("cotton"))


@pytest.mark.parametrize("name", sorted(solver.PRESETS))
def test_picking_a_preset_sets_sliders_that_reproduce_it(name):
    obj = new_mesh_object()
    obj.selvedge.material_preset = "silk" if name != "silk" else "denim"  # make sure the update fires
    obj.selvedge.material_preset = name
    # Blender stores the sliders as float32: the log-scale round trip is good to a few 1e-6.
    assert_material_close(s2s.material_from_settings(obj.selvedge), solver.preset(name), rel=2e-5)


@pytest.mark.parametrize("s", [0.0, 0.25, 1.0])
def test_stiffness_sliders_follow_the_log_formula(s):
    obj = new_mesh_object()
    obj.selvedge.stretch_stiffness = s
    obj.selvedge.bend_stiffness = s
    material = s2s.material_from_settings(obj.selvedge)
    cotton = solver.preset("cotton")

    def log_map(rng):
        return 10.0 ** (math.log10(rng[0]) + s * (math.log10(rng[1]) - math.log10(rng[0])))

    assert material.stretch_compliance_warp == pytest.approx(log_map(STRETCH_COMPLIANCE_RANGE), rel=1e-6)
    assert material.bend_compliance == pytest.approx(log_map(BEND_COMPLIANCE_RANGE), rel=1e-6)
    # The preset's grain ratios are kept.
    assert material.stretch_compliance_weft / material.stretch_compliance_warp == pytest.approx(
        cotton.stretch_compliance_weft / cotton.stretch_compliance_warp, rel=1e-9
    )
    assert material.stretch_compliance_bias / material.stretch_compliance_warp == pytest.approx(
        cotton.stretch_compliance_bias / cotton.stretch_compliance_warp, rel=1e-9
    )


def test_object_and_scene_settings_reach_the_solver():
    obj = new_mesh_object()
    c = obj.selvedge
    c.bending_model, c.use_tethers, c.tether_scale = "isometric", False, 1.2
    # Settle at Rest: Auto by default, as in the solver (on for a cloth without pins); On and Off as set
    assert c.settle_at_rest == "AUTO" and s2s.options_from_settings(c).coarse_links_between_aggregates == "auto"
    assert solver.ClothOptions().coarse_links_between_aggregates == "auto"
    c.settle_at_rest = "OFF"
    assert s2s.options_from_settings(c).coarse_links_between_aggregates is False
    c.stretch_projection_steps, c.use_compression_limit, c.settle_at_rest = 3, True, "ON"
    c.damping_s, c.friction, c.density_kg_m2, c.thickness_m, c.air_drag_per_s = 0.002, 0.3, 0.4, 0.003, 1.5
    options = s2s.options_from_settings(c)
    assert (options.bending_model, options.tethers) == ("isometric", False)
    assert (options.fine_projection, options.fine_projection_compression) == (3, True)
    assert options.coarse_links_between_aggregates is True
    assert options.tether_scale == pytest.approx(1.2, rel=1e-7)
    m = s2s.material_from_settings(c)
    cotton = solver.preset("cotton")
    assert m.stretch_damping_s == pytest.approx(0.002, rel=1e-6)
    assert m.bend_damping_s == pytest.approx(0.002 * cotton.bend_damping_s / cotton.stretch_damping_s, rel=1e-6)
    assert m.friction_kinetic == pytest.approx(0.3 * cotton.friction_kinetic / cotton.friction_static, rel=1e-6)
    assert (m.density_kg_m2, m.thickness_m, m.air_drag_per_s) == pytest.approx((0.4, 0.003, 1.5), rel=1e-6)

    scene = bpy.context.scene
    # the scene's default solve mode is the solver's (auto: blocks fixed by the mesh, same bake anywhere)
    default = s2s.solver_settings_from_scene(scene.selvedge, 24.0)
    assert scene.selvedge.solve_mode == default.solve_mode == solver.SolverSettings().solve_mode == "auto"
    scene.selvedge.substeps, scene.selvedge.iterations, scene.selvedge.solve_mode = 7, 3, "jacobi"
    scene.render.fps, scene.render.fps_base = 30, 1.001
    settings = s2s.solver_settings_from_scene(scene.selvedge, scene.render.fps / scene.render.fps_base)
    assert (settings.substeps, settings.iterations, settings.solve_mode) == (7, 3, "jacobi")
    assert settings.fps == pytest.approx(30 / 1.001, rel=1e-7)
    # stretched frames run again: off by default, as in the solver; Refine Above is a percentage
    assert (default.stretch_refinements, default.refine_stretch_above) == (0, pytest.approx(0.05, rel=1e-6))
    assert solver.SolverSettings().stretch_refinements == 0
    assert solver.SolverSettings().refine_stretch_above == pytest.approx(0.05, rel=1e-6)
    scene.selvedge.stretch_refinements, scene.selvedge.refine_stretch_above = 3, 8.0
    settings = s2s.solver_settings_from_scene(scene.selvedge, 24.0)
    assert (settings.stretch_refinements, settings.refine_stretch_above) == (3, pytest.approx(0.08, rel=1e-6))
    assert scene.selvedge.cache_folder == "//selvedge_cache"


def test_frame_range_uses_the_scene_or_its_own_and_refuses_reversed():
    settings = bpy.context.scene.selvedge
    assert s2s.frame_range(settings, 3, 40) == (3, 40)
    settings.use_scene_frame_range = False
    settings.frame_start, settings.frame_end = 10, 12
    assert s2s.frame_range(settings, 3, 40) == (10, 12)
    settings.frame_end = 9
    with pytest.raises(ValueError, match="reversed"):
        s2s.frame_range(settings, 3, 40)


def test_settings_dict_is_plain_json():
    import json

    obj = new_mesh_object()
    d = s2s.settings_dict(obj.selvedge, s2s.CLOTH_KEYS)
    assert json.loads(json.dumps(d)) == d
    assert d["material_preset"] == "cotton" and d["use_tethers"] is True
    # every per-object setting that feeds options_from_settings is recorded
    assert (d["stretch_projection_steps"], d["use_compression_limit"], d["settle_at_rest"]) == (0, False, "AUTO")


def _traces():
    """Everything Selvedge registers with Blender."""
    from selvedge import operators, panels
    from selvedge.operators import properties

    classes = (*properties.CLASSES, *operators.CLASSES, *panels.CLASSES)
    found = [cls.__name__ for cls in classes if cls.is_registered]
    found += [n for n in ("SELVEDGE_OT_bake_cache", "SELVEDGE_PT_object") if hasattr(bpy.types, n)]
    found += [
        f"{t.__name__}.selvedge"
        for t in (bpy.types.Object, bpy.types.Scene)
        if "selvedge" in t.bl_rna.properties.keys()
    ]
    found += [f"ops.{op}" for op in dir(bpy.ops.selvedge)]
    return found


def test_register_unregister_register_leaves_no_trace():
    from selvedge import operators, panels
    from selvedge.operators import properties

    registered = _traces()
    classes = (*properties.CLASSES, *operators.CLASSES, *panels.CLASSES)
    operator_ids = sum(1 for cls in classes if "_OT_" in cls.__name__)
    # every class, 2 bpy.types look-ups, 2 pointers and one bpy.ops id per operator class.
    assert len(registered) == len(classes) + 2 + 2 + operator_ids, registered
    selvedge.unregister()
    assert _traces() == []
    selvedge.register()
    assert _traces() == registered
    obj = new_mesh_object()
    obj.selvedge.role = "CLOTH"
    assert bpy.ops.selvedge.bake_cache.poll()
