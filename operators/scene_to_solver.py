"""Map Selvedge's Blender settings to solver objects. Imports no Blender module.

The functions take anything with the named attributes (a Blender PropertyGroup, a
``types.SimpleNamespace`` or a dict through :func:`as_namespace`), so they are unit-tested
without Blender and the operators stay thin. The solver (and with it Numba) is imported
lazily, inside the functions, so enabling the add-on stays fast.
"""

from __future__ import annotations

from types import SimpleNamespace

#: Material presets offered in the UI; a test checks this equals ``solver.materials.PRESETS``.
#: Kept as a literal so that building the enum does not import the solver (and Numba).
PRESET_NAMES = ("cotton", "silk", "denim", "leather", "jersey_knit", "rubber")
#: Same for ``solver.BENDING_MODELS`` and ``solver.SOLVE_MODES``.
BENDING_MODELS = ("cross_edge", "dihedral", "isometric", "auto")
SOLVE_MODES = ("auto", "serial", "colored", "jacobi")

#: Per-object cloth settings that feed the solver, in the order they are documented.
CLOTH_KEYS = (
    "material_preset",
    "stretch_stiffness",
    "bend_stiffness",
    "density_kg_m2",
    "damping_s",
    "air_drag_per_s",
    "friction",
    "thickness_m",
    "bending_model",
    "pin_group",
    "weight_map_warp",
    "weight_map_weft",
    "weight_map_bend",
    "uv_map",
    "use_tethers",
    "tether_scale",
    "stretch_projection_steps",
    "use_compression_limit",
    "settle_at_rest",
    "use_self_collision",
    "use_cloth_collision",
    "collision_layer",
    "field_weight_gravity",
    "field_weight_all",
    "field_weight_wind",
    "field_weight_force",
    "field_weight_vortex",
    "field_weight_turbulence",
    "field_weight_harmonic",
    "field_weight_charge",
    "field_weight_drag",
    "drag_coefficient",
    "lift_coefficient",
    "air_density",
    "use_sewing_springs",
    "sewing_force_max",
    "sewing_closing_time",
    "use_seam_bending",
    "seam_mode",
    "shrink_min",
    "shrink_max",
    "vertex_group_shrink",
    "use_pressure",
    "uniform_pressure_force",
    "use_pressure_volume",
    "target_volume",
    "pressure_factor",
    "vertex_group_pressure",
)
#: Solver weight-map key -> the per-object setting naming its vertex group.
WEIGHT_MAP_KEYS = {"warp": "weight_map_warp", "weft": "weight_map_weft", "bend": "weight_map_bend"}
#: Per-scene settings that feed the solver.
SCENE_KEYS = (
    "substeps",
    "iterations",
    "force_updates_per_frame",
    "solve_mode",
    "stretch_refinements",
    "refine_stretch_above",
    "network_mode",
    "layer_mass_scale",
    "use_scene_frame_range",
    "frame_start",
    "frame_end",
    "cache_folder",
)


def as_namespace(values: dict) -> SimpleNamespace:
    return SimpleNamespace(**values)


def settings_dict(settings, keys) -> dict:
    """Plain ``{key: value}`` of the named settings (JSON-safe: enums are strings)."""
    return {k: _plain(getattr(settings, k)) for k in keys}


def _plain(value):
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    try:
        return [_plain(v) for v in value]
    except TypeError:
        return str(value)


def preset_slider_values(name: str) -> dict:
    """The slider values that reproduce preset ``name`` (what the UI shows after picking it)."""
    from ..solver.materials import BEND_COMPLIANCE_RANGE, STRETCH_COMPLIANCE_RANGE, preset, slider_from_compliance

    m = preset(name)
    return {
        "stretch_stiffness": slider_from_compliance(m.stretch_compliance_warp, STRETCH_COMPLIANCE_RANGE),
        "bend_stiffness": slider_from_compliance(m.bend_compliance, BEND_COMPLIANCE_RANGE),
        "density_kg_m2": m.density_kg_m2,
        "damping_s": m.stretch_damping_s,
        "air_drag_per_s": m.air_drag_per_s,
        "friction": m.friction_static,
        "thickness_m": m.thickness_m,
    }


def material_from_settings(cloth):
    """A solver ``Material``: the preset, with the sliders and physical values applied on top.

    Stretch stiffness moves warp, weft, bias and shear together (their ratios stay the
    preset's); damping moves stretch and bend damping together; friction moves static and
    kinetic friction together.
    """
    from dataclasses import replace

    from ..solver.materials import preset

    base = preset(cloth.material_preset)
    m = base.with_stiffness(stretch_01=float(cloth.stretch_stiffness), bend_01=float(cloth.bend_stiffness))
    damping = float(cloth.damping_s)
    friction = float(cloth.friction)
    return replace(
        m,
        name=f"{base.name} (custom)",
        density_kg_m2=float(cloth.density_kg_m2),
        thickness_m=float(cloth.thickness_m),
        stretch_damping_s=damping,
        bend_damping_s=damping * (base.bend_damping_s / base.stretch_damping_s if base.stretch_damping_s else 10.0),
        air_drag_per_s=float(cloth.air_drag_per_s),
        friction_static=friction,
        friction_kinetic=friction * (base.friction_kinetic / base.friction_static if base.friction_static else 1.0),
    )


def options_from_settings(cloth):
    """Solver ``ClothOptions`` from the per-object settings. The stretch limit's level graph keeps
    its default: Blender's loop triangles cut every quad of a grid the same way, and the solver
    chooses each quad's diagonal for the levels so that they alternate (a 64 x 64 quad grid hanging
    from two corners: P95 strain 1.2 %; with both diagonals in the graph, as bakes had before,
    1.6 %; Blender's Cloth 2.6 %)."""
    from ..solver.settings import ClothOptions

    return ClothOptions(
        bending_model=str(cloth.bending_model),
        tethers=bool(cloth.use_tethers),
        tether_scale=float(cloth.tether_scale),
        fine_projection=int(cloth.stretch_projection_steps),
        fine_projection_compression=bool(cloth.use_compression_limit),
        coarse_links_between_aggregates={"AUTO": "auto", "ON": True, "OFF": False}[str(cloth.settle_at_rest)],
    )


def effector_weights(cloth) -> dict:
    """The cloth's Field Weights as ``solver.blender_fields.field_from_blender`` takes them."""
    return {
        "all": float(cloth.field_weight_all),
        "wind": float(cloth.field_weight_wind),
        "force": float(cloth.field_weight_force),
        "vortex": float(cloth.field_weight_vortex),
        "turbulence": float(cloth.field_weight_turbulence),
        "harmonic": float(cloth.field_weight_harmonic),
        "charge": float(cloth.field_weight_charge),
        "drag": float(cloth.field_weight_drag),
    }


def aerodynamics_from_settings(cloth):
    from ..solver.aerodynamics import Aerodynamics

    return Aerodynamics(
        drag_coefficient=float(cloth.drag_coefficient),
        lift_coefficient=float(cloth.lift_coefficient),
        air_density_kg_m3=float(cloth.air_density),
    )


def shrink_from_settings(cloth, group_weights=None):
    """Blender's Shrinking: Shrinking Factor, Max Shrinking (with a Shrinking Group's weights)."""
    from ..solver.shrink import Shrink

    return Shrink(shrink_min=float(cloth.shrink_min), shrink_max=float(cloth.shrink_max), weights=group_weights)


def pressure_from_settings(cloth, group_weights=None):
    """Blender's Pressure panel; None while Pressure is off."""
    if not cloth.use_pressure:
        return None
    from ..solver.volume import Pressure

    return Pressure(
        uniform_pressure_force=float(cloth.uniform_pressure_force),
        use_pressure_volume=bool(cloth.use_pressure_volume),
        target_volume=float(cloth.target_volume),
        pressure_factor=float(cloth.pressure_factor),
        weights=group_weights,
    )


def sewing_from_settings(cloth, loose_edge_pairs):
    """Blender's Sewing: the mesh's loose edges become seams; None while Sewing is off or there are none."""
    if not cloth.use_sewing_springs or len(loose_edge_pairs) == 0:
        return None
    from ..solver.sewing import Sewing

    return Sewing(
        loose_edge_pairs,
        closing_time_s=float(cloth.sewing_closing_time),
        sewing_force_max=float(cloth.sewing_force_max),
        seam=str(cloth.seam_mode).lower(),
        seam_bending=bool(cloth.use_seam_bending),
    )


def cloth_collision_from_settings(cloth, material):
    """The cloth's part in the bake's collision world (``solver.collisions.world.ClothCollision``).

    Thickness and friction are the material's (``material_from_settings``: the Thickness and
    Friction sliders), so one cloth keeps the same gap and friction against colliders, other
    cloth and itself; ``collision_layer`` is the garment layer (inner = lower).
    """
    from ..solver.collisions.world import ClothCollision

    return ClothCollision(
        thickness_m=float(material.thickness_m),
        layer=int(cloth.collision_layer),
        self_collision=bool(cloth.use_self_collision),
        collide_with_cloths=bool(cloth.use_cloth_collision),
        friction=float(material.friction_static),
    )


def solver_settings_from_scene(scene_settings, fps: float):
    """Solver ``SolverSettings`` from the per-scene settings and the scene's frame rate."""
    from ..solver.settings import SolverSettings

    return SolverSettings(
        substeps=int(scene_settings.substeps),
        iterations=int(scene_settings.iterations),
        force_updates_per_frame=int(scene_settings.force_updates_per_frame),
        solve_mode=str(scene_settings.solve_mode),
        stretch_refinements=int(scene_settings.stretch_refinements),
        refine_stretch_above=0.01 * float(scene_settings.refine_stretch_above),  # the property is in %
        fps=float(fps),
    )


def frame_range(scene_settings, scene_frame_start: int, scene_frame_end: int) -> tuple[int, int]:
    """The bake's (first, last) frame; raises :class:`~.errors.SceneSettingsError` when reversed."""
    if scene_settings.use_scene_frame_range:
        first, last = int(scene_frame_start), int(scene_frame_end)
    else:
        first, last = int(scene_settings.frame_start), int(scene_settings.frame_end)
    if last < first:
        from .errors import SceneSettingsError

        raise SceneSettingsError(
            f"the frame range is reversed ({first} to {last}); the end frame must not precede the start"
        )
    return first, last


def cache_file_stem(object_name: str) -> str:
    """A file-system-safe stem for an object's cache files."""
    safe = "".join(c if (c.isalnum() or c in "-_.") else "_" for c in object_name).strip(".")
    return safe or "object"
