"""Selvedge's per-object data, ``Object.selvedge`` (cloth and collider settings), and the registration
of both PropertyGroups (the per-scene ``Scene.selvedge`` is declared in :mod:`.scene_properties`).

Property paths for scripts: ``obj.selvedge.role``, ``obj.selvedge.material_preset``,
``obj.selvedge.stretch_stiffness``, ... and ``scene.selvedge.substeps``, ``scene.selvedge.cache_folder``, ...
Settings are turned into solver objects by :mod:`.scene_to_solver` (no Blender there).
"""

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, PointerProperty, StringProperty
from bpy.types import PropertyGroup

from .property_items import BENDING_ITEMS, PRESET_ITEMS, PROXY_ITEMS, ROLE_ITEMS, SETTLE_ITEMS
from .scene_properties import SelvedgeSceneSettings


def _apply_preset(self, context):
    """Picking a preset sets the sliders to its values. The preset table (``solver.materials``) is
    plain Python: it applies without numba, so the panel works where the solver's packages do not
    load, and the bake or preview reports that (:mod:`..dependencies`)."""
    from .scene_to_solver import preset_slider_values

    for key, value in preset_slider_values(self.material_preset).items():
        setattr(self, key, value)


class SelvedgeObjectSettings(PropertyGroup):
    role: EnumProperty(name="Role", description="What Selvedge does with this object", items=ROLE_ITEMS, default="NONE")

    # Cloth: material. Defaults are the 'cotton' preset's values (a test checks they agree).
    material_preset: EnumProperty(
        name="Material",
        description="Fabric preset; picking one sets the sliders",
        items=PRESET_ITEMS,
        default="cotton",
        update=_apply_preset,
    )
    stretch_stiffness: FloatProperty(
        name="Stretch Stiffness",
        description="Resistance to stretching along warp, weft and bias (0 soft, 1 stiff, "
        "log scale); the preset's grain ratios are kept",
        default=0.2831617,
        min=0.0,
        max=1.0,
        precision=3,
    )
    bend_stiffness: FloatProperty(
        name="Bend Stiffness",
        description="Resistance to bending (0 limp, 1 stiff, log scale)",
        default=0.2831617,
        min=0.0,
        max=1.0,
        precision=3,
    )
    density_kg_m2: FloatProperty(
        name="Density",
        description="Areal density, kg per square metre",
        default=0.15,
        min=1e-4,
        soft_max=2.0,
        precision=3,
    )
    damping_s: FloatProperty(
        name="Damping",
        description="Constraint damping along stretch (and, scaled as in the preset, bend) directions, in seconds",
        default=1e-4,
        min=0.0,
        soft_max=0.1,
        precision=5,
    )
    air_drag_per_s: FloatProperty(
        name="Air Drag", description="Linear air drag rate, 1/s", default=0.3, min=0.0, soft_max=10.0
    )
    friction: FloatProperty(
        name="Friction",
        description="Static friction coefficient against colliders and other cloth (kinetic friction keeps "
        "the preset's ratio)",
        default=0.6,
        min=0.0,
        soft_max=2.0,
    )
    thickness_m: FloatProperty(
        name="Thickness",
        description="Cloth thickness for collisions (to colliders, other cloth and itself), metres",
        default=0.0015,
        min=1e-5,
        soft_max=0.05,
        precision=4,
        unit="LENGTH",
    )
    bending_model: EnumProperty(
        name="Bending Model", description="How bending is constrained", items=BENDING_ITEMS, default="auto"
    )
    pin_group: StringProperty(
        name="Pin Group",
        description="Vertex group of pinned vertices: weight 1 follows the "
        "animated mesh exactly, weights between 0 and 1 pull softly",
        default="",
    )
    weight_map_warp: StringProperty(
        name="Warp Map",
        description="Optional vertex group scaling warp stretch stiffness (weight 1: as set, 0: 1000x softer)",
        default="",
    )
    weight_map_weft: StringProperty(
        name="Weft Map",
        description="Optional vertex group scaling weft stretch stiffness (weight 1: as set, 0: 1000x softer)",
        default="",
    )
    weight_map_bend: StringProperty(
        name="Bend Map",
        description="Optional vertex group scaling bending stiffness (weight 1: as set, 0: 1000x softer)",
        default="",
    )
    uv_map: StringProperty(
        name="UV Map",
        description="UV map giving the fabric's warp (U) and weft (V) directions; "
        "empty: the active UV map (none: isotropic)",
        default="",
    )
    use_tethers: BoolProperty(
        name="Tethers", description="Long-range attachments to the pins stop sagging", default=True
    )
    tether_scale: FloatProperty(
        name="Tether Scale",
        description="Slack of the tethers (1: no stretch allowed)",
        default=1.05,
        min=1.0,
        soft_max=1.5,
    )
    stretch_projection_steps: IntProperty(
        name="Stretch Projection",
        description="Newton steps of a global projection of the warp and weft edges onto their stretch limit "
        "in every substep (0: off). A garment landing on a body: P95 strain 14 % -> 3.3 % at 2 steps for "
        "about 1.8 times the time, 2.3 % at 3 steps. For impacts: a cloth at rest on a collider keeps "
        "drifting with it (cm/s)",
        default=0,
        min=0,
        max=8,
        soft_max=4,
    )
    use_compression_limit: BoolProperty(
        name="Limit Compression",
        description="With Stretch Projection, also push warp and weft edges shorter than their limit back out "
        "(a garment's compression P95 17 % -> 2 %, at about 1.4 times the projection's time)",
        default=False,
    )
    settle_at_rest: EnumProperty(
        name="Settle at Rest",
        description="How the stretch limit's coarse links are measured: a cloth at rest on a collider settles "
        "instead of fluttering at its folds when they are measured toward the centres of what they move",
        items=SETTLE_ITEMS,
        default="AUTO",
    )
    use_self_collision: BoolProperty(
        name="Self Collision",
        description="Cloth collides with itself (vertex-triangle and edge-edge contacts, kept Thickness apart; "
        "a frame whose fast folds cross is untangled, or run again with 2, 4 or 8 times the Substeps)",
        default=False,
    )
    use_cloth_collision: BoolProperty(
        name="Collide with Cloth",
        description="Collides two-way with the other cloth objects of the bake (those with this on too)",
        default=True,
    )
    collision_layer: IntProperty(
        name="Layer",
        description="Garment layer, inner = lower (a shirt 0, a jacket over it 1): in a contact of two "
        "layers the inner one acts Layer Mass Scale times heavier",
        default=0,
        min=0,
        soft_max=10,
    )

    # Cloth: field weights and aerodynamics (Blender Cloth > Field Weights; Chaos Cloth's drag/lift).
    effector_collection: PointerProperty(
        name="Effector Collection",
        type=bpy.types.Collection,
        description="Only the force fields in this collection act (empty: all)",
    )
    field_weight_gravity: FloatProperty(
        name="Gravity", description="Scale of the scene's gravity", default=1.0, min=0.0, soft_max=1.0
    )
    field_weight_all: FloatProperty(
        name="All", description="Scale of every force field", default=1.0, min=0.0, soft_max=1.0
    )
    field_weight_wind: FloatProperty(
        name="Wind", default=1.0, min=0.0, soft_max=1.0, description="Scale of Wind fields"
    )
    field_weight_force: FloatProperty(
        name="Force", default=1.0, min=0.0, soft_max=1.0, description="Scale of Force fields"
    )
    field_weight_vortex: FloatProperty(
        name="Vortex", default=1.0, min=0.0, soft_max=1.0, description="Scale of Vortex fields"
    )
    field_weight_turbulence: FloatProperty(
        name="Turbulence", default=1.0, min=0.0, soft_max=1.0, description="Scale of Turbulence fields"
    )
    field_weight_harmonic: FloatProperty(
        name="Harmonic", default=1.0, min=0.0, soft_max=1.0, description="Scale of Harmonic fields"
    )
    field_weight_charge: FloatProperty(
        name="Charge", default=1.0, min=0.0, soft_max=1.0, description="Scale of Charge fields"
    )
    field_weight_drag: FloatProperty(
        name="Drag", default=1.0, min=0.0, soft_max=1.0, description="Scale of Drag fields"
    )
    drag_coefficient: FloatProperty(
        name="Drag Coefficient",
        description="Per-triangle aerodynamic drag against the air (wind fields are air, m/s); 0: off",
        default=0.0,
        min=0.0,
        soft_max=2.0,
    )
    lift_coefficient: FloatProperty(
        name="Lift Coefficient",
        description="Per-triangle aerodynamic lift across the air; 0: off",
        default=0.0,
        min=0.0,
        soft_max=2.0,
    )
    air_density: FloatProperty(
        name="Air Density",
        description="Density of the air the drag and lift act in, kg/m^3 (water: 1000)",
        default=1.225,
        min=0.0,
        soft_max=1000.0,
    )

    # Cloth: shape (Blender Cloth > Shape: Sewing, Shrinking) and pressure (Blender Cloth > Pressure).
    use_sewing_springs: BoolProperty(
        name="Sewing",
        description="Loose edges (in no face) pull the vertices they join together and stay as seams",
        default=False,
    )
    sewing_force_max: FloatProperty(
        name="Max Sewing Force", description="Cap on each seam's pull, N (0: none)", default=0.0, min=0.0, soft_max=10.0
    )
    sewing_closing_time: FloatProperty(
        name="Closing Time",
        description="Seconds over which the seams close",
        default=1.0,
        min=0.0,
        soft_max=5.0,
        unit="TIME_ABSOLUTE",
    )
    use_seam_bending: BoolProperty(
        name="Bend Across Seams",
        description="Closed seams resist bending like the cloth (off: a seam is a free hinge)",
        default=True,
    )
    seam_mode: EnumProperty(
        name="Seams",
        description="What a closed seam becomes",
        default="WELD",
        items=(
            ("WELD", "Weld", "Held exactly together"),
            ("STIFF", "Stiff", "A stiff spring (seam compliance 1e-7 m/N)"),
        ),
    )
    shrink_min: FloatProperty(
        name="Shrinking Factor",
        description="Shrink every edge by this fraction (negative: grow)",
        default=0.0,
        soft_min=-1.0,
        max=0.95,
    )
    shrink_max: FloatProperty(
        name="Max Shrinking",
        description="Shrinking at weight 1 of the Shrinking Group",
        default=0.0,
        soft_min=-1.0,
        max=0.95,
    )
    vertex_group_shrink: StringProperty(
        name="Shrinking Group",
        description="Vertex group blending Shrinking Factor (weight 0) to Max Shrinking (weight 1)",
        default="",
    )
    use_pressure: BoolProperty(
        name="Pressure", description="A closed mesh keeps an inner pressure (balloons, pillows)", default=False
    )
    uniform_pressure_force: FloatProperty(
        name="Pressure",
        description="Uniform overpressure, in units of Pressure Scale",
        default=0.0,
        soft_min=-10.0,
        soft_max=10.0,
    )
    use_pressure_volume: BoolProperty(
        name="Custom Volume", description="Target Volume instead of the rest volume", default=False
    )
    target_volume: FloatProperty(
        name="Target Volume",
        description="Volume the gas fills at zero overpressure, cubic metres",
        default=0.0,
        min=0.0,
        soft_max=10.0,
    )
    pressure_factor: FloatProperty(
        name="Pressure Scale",
        description="The gas's pressure at the target volume, Pa",
        default=1.0,
        min=0.0,
        soft_max=5000.0,
    )
    vertex_group_pressure: StringProperty(
        name="Pressure Group", description="Vertex group scaling the pressure's push per vertex", default=""
    )

    # Collider.
    collider_proxy: EnumProperty(
        name="Proxy", description="Shape used for collisions", items=PROXY_ITEMS, default="AUTO"
    )
    collider_thickness_m: FloatProperty(
        name="Thickness",
        description="Collision margin, metres",
        default=0.005,
        min=0.0,
        soft_max=0.1,
        precision=4,
        unit="LENGTH",
    )
    collider_friction: FloatProperty(
        name="Friction", description="Friction coefficient", default=0.5, min=0.0, soft_max=2.0
    )
    fit_capsules_to_bones: BoolProperty(
        name="Fit Capsules to Bones", description="For rigged bodies: one capsule per deforming bone", default=False
    )

    # Bookkeeping of what a bake created (read by Free Bake; not shown in the UI).
    bake_cache_file: StringProperty(
        name="Baked Cache", description="PC2 file the last cache bake wrote", default="", options={"HIDDEN"}
    )
    bake_sidecar_file: StringProperty(
        name="Baked Sidecar", description="JSON sidecar the last cache bake wrote", default="", options={"HIDDEN"}
    )
    bake_modifier: StringProperty(
        name="Baked Modifier", description="Mesh Cache modifier the bake added", default="", options={"HIDDEN"}
    )
    bake_shape_keys: StringProperty(
        name="Baked Shape Keys", description="Shape keys the bake added (JSON list)", default="", options={"HIDDEN"}
    )
    bake_created_basis: BoolProperty(default=False, options={"HIDDEN"})
    bake_shape_key_animation: StringProperty(
        default="", options={"HIDDEN"}, description="What the shape-key bake added to the animation (JSON)"
    )


CLASSES = (SelvedgeObjectSettings, SelvedgeSceneSettings)


def register():
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    # Registration assigns a property definition on the class; instances then read the group (what the
    # type-check stubs declare, scripts/typecheck_stubs.py), hence the ignores.
    bpy.types.Object.selvedge = PointerProperty(type=SelvedgeObjectSettings)  # pyright: ignore
    bpy.types.Scene.selvedge = PointerProperty(type=SelvedgeSceneSettings)  # pyright: ignore


def unregister():
    del bpy.types.Scene.selvedge
    del bpy.types.Object.selvedge
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
