"""The "Selvedge" tab of the 3D viewport sidebar (N panel). Drawing only; no physics here."""

from typing import TYPE_CHECKING, Literal

import bpy
from bpy.types import Panel

if TYPE_CHECKING:
    from bpy.types import UILayout

ICONS: dict[str, Literal["ERROR", "INFO"]] = {"ERROR": "ERROR", "WARNING": "INFO"}


class _SelvedgePanel(Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Selvedge"

    if TYPE_CHECKING:

        @property
        def layout(self) -> UILayout:  # fake-bpy-module says `| None`: never None while drawing
            ...


class SELVEDGE_PT_object(_SelvedgePanel, Panel):
    bl_label = "Object"

    def draw(self, context):
        layout = self.layout
        obj = context.object
        if obj is None:
            layout.label(text="No active object")
            return
        layout.prop(obj.selvedge, "role", expand=True)
        if obj.selvedge.role == "NONE":
            layout.operator("selvedge.set_role", text="Make Selected Cloth").role = "CLOTH"
            layout.operator("selvedge.set_role", text="Make Selected Collider").role = "COLLIDER"
        elif obj.selvedge.role == "CLOTH":
            from ..operators.bake import misconfiguration

            for level, message in misconfiguration(obj):
                layout.label(text=message, icon=ICONS[level])
        elif obj.selvedge.role == "COLLIDER":
            from ..operators.bake import collider_misconfiguration

            for level, message in collider_misconfiguration(obj):
                layout.label(text=message, icon=ICONS[level])


class SELVEDGE_PT_cloth(_SelvedgePanel, Panel):
    bl_label = "Cloth"
    bl_parent_id = "SELVEDGE_PT_object"

    @classmethod
    def poll(cls, context):
        return context.object is not None and context.object.selvedge.role == "CLOTH"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        obj = context.object
        if obj is None:  # poll() rules it out
            return
        s = obj.selvedge
        layout.prop(s, "material_preset")
        col = layout.column(align=True)
        for name in (
            "stretch_stiffness",
            "bend_stiffness",
            "density_kg_m2",
            "damping_s",
            "air_drag_per_s",
            "friction",
            "thickness_m",
        ):
            col.prop(s, name)
        layout.prop(s, "bending_model")
        if obj.type == "MESH":
            layout.prop_search(s, "pin_group", obj, "vertex_groups")
            layout.operator("selvedge.pin_group_from_selection")
            col = layout.column(align=True)
            for name in ("weight_map_warp", "weight_map_weft", "weight_map_bend"):
                col.prop_search(s, name, obj, "vertex_groups")
            if isinstance(obj.data, bpy.types.Mesh):
                layout.prop_search(s, "uv_map", obj.data, "uv_layers")
        row = layout.row(heading="Tethers")
        row.prop(s, "use_tethers", text="")
        sub = row.row()
        sub.active = s.use_tethers
        sub.prop(s, "tether_scale", text="Scale")
        row = layout.row(heading="Stretch Projection")
        row.prop(s, "stretch_projection_steps", text="Steps")
        sub = row.row()
        sub.active = s.stretch_projection_steps > 0
        sub.prop(s, "use_compression_limit", text="Compression")
        layout.prop(s, "settle_at_rest")
        col = layout.column(heading="Collisions")
        col.prop(s, "use_self_collision")
        col.prop(s, "use_cloth_collision")
        sub = col.row()
        sub.active = s.use_cloth_collision
        sub.prop(s, "collision_layer")


class _ClothSubpanel(_SelvedgePanel):
    bl_parent_id = "SELVEDGE_PT_cloth"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        return context.object is not None and context.object.selvedge.role == "CLOTH"


class SELVEDGE_PT_cloth_shape(_ClothSubpanel, Panel):
    """Blender Cloth's Shape panel names: Sewing, Max Sewing Force, Shrinking Factor, Max Shrinking."""

    bl_label = "Shape"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        obj = context.object
        if obj is None:  # poll() rules it out
            return
        s = obj.selvedge
        layout.prop(s, "use_sewing_springs")
        col = layout.column(align=True)
        col.active = s.use_sewing_springs
        for name in ("sewing_force_max", "sewing_closing_time", "seam_mode", "use_seam_bending"):
            col.prop(s, name)
        col = layout.column(align=True)
        col.prop(s, "shrink_min")
        col.prop(s, "shrink_max")
        if obj.type == "MESH":
            col.prop_search(s, "vertex_group_shrink", obj, "vertex_groups")


class SELVEDGE_PT_cloth_pressure(_ClothSubpanel, Panel):
    bl_label = "Pressure"

    def draw_header(self, context):
        if context.object is not None:  # poll() rules None out
            self.layout.prop(context.object.selvedge, "use_pressure", text="")

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        obj = context.object
        if obj is None:  # poll() rules it out
            return
        s = obj.selvedge
        layout.active = s.use_pressure
        layout.prop(s, "uniform_pressure_force")
        row = layout.row(heading="Custom Volume")
        row.prop(s, "use_pressure_volume", text="")
        sub = row.row()
        sub.active = s.use_pressure_volume
        sub.prop(s, "target_volume", text="")
        layout.prop(s, "pressure_factor")
        if obj.type == "MESH":
            layout.prop_search(s, "vertex_group_pressure", obj, "vertex_groups")


class SELVEDGE_PT_cloth_fields(_ClothSubpanel, Panel):
    """Blender Cloth's Field Weights (Effector Collection, Gravity, All, per type) and the aerodynamics."""

    bl_label = "Field Weights"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        if context.object is None:  # poll() rules it out
            return
        s = context.object.selvedge
        layout.prop(s, "effector_collection")
        col = layout.column(align=True)
        for name in (
            "field_weight_gravity",
            "field_weight_all",
            "field_weight_wind",
            "field_weight_force",
            "field_weight_vortex",
            "field_weight_turbulence",
            "field_weight_harmonic",
            "field_weight_charge",
            "field_weight_drag",
        ):
            col.prop(s, name)
        col = layout.column(align=True)
        col.prop(s, "drag_coefficient")
        col.prop(s, "lift_coefficient")
        col.prop(s, "air_density")


class SELVEDGE_PT_collider(_SelvedgePanel, Panel):
    bl_label = "Collider"
    bl_parent_id = "SELVEDGE_PT_object"

    @classmethod
    def poll(cls, context):
        return context.object is not None and context.object.selvedge.role == "COLLIDER"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        if context.object is None:  # poll() rules it out
            return
        s = context.object.selvedge
        for name in ("collider_proxy", "collider_thickness_m", "collider_friction", "fit_capsules_to_bones"):
            layout.prop(s, name)
        row = layout.row(align=True)
        for shape, text in (("SPHERE", "Sphere"), ("CAPSULE", "Capsule"), ("BOX", "Box")):
            row.operator("selvedge.fit_collider", text=f"Fit {text}").shape = shape
        layout.operator("selvedge.fit_capsules_to_bones", icon="BONE_DATA")


class SELVEDGE_PT_scene(_SelvedgePanel, Panel):
    bl_label = "Solver & Bake"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        if context.scene is None:
            return
        s = context.scene.selvedge
        col = layout.column(align=True)
        col.prop(s, "substeps")
        col.prop(s, "iterations")
        col.prop(s, "force_updates_per_frame")
        layout.prop(s, "solve_mode")
        col = layout.column(align=True)
        col.prop(s, "stretch_refinements")
        sub = col.row()
        sub.active = s.stretch_refinements > 0
        sub.prop(s, "refine_stretch_above")
        layout.prop(s, "use_scene_frame_range")
        if not s.use_scene_frame_range:
            col = layout.column(align=True)
            col.prop(s, "frame_start")
            col.prop(s, "frame_end")
        layout.prop(s, "cache_folder")
        col = layout.column(align=True)
        col.operator("selvedge.bake_cache", icon="FILE_CACHE")
        col.operator("selvedge.bake_shape_keys", icon="SHAPEKEY_DATA")
        col.operator("selvedge.free_bake", icon="TRASH")
        layout.prop(s, "layer_mass_scale")
        layout.prop(s, "network_mode")


class SELVEDGE_PT_preview(_SelvedgePanel, Panel):
    bl_label = "Preview"
    bl_parent_id = "SELVEDGE_PT_scene"

    def draw(self, context):
        from ..operators.overlay import is_enabled

        layout = self.layout
        wm = bpy.context.window_manager
        layout.operator("selvedge.simulate_preview", icon="PLAY")
        layout.prop(wm, "selvedge_preview_on_cancel", expand=True)
        on = is_enabled()
        row = layout.row(align=True)
        row.operator("selvedge.strain_overlay", icon="HIDE_OFF" if on else "HIDE_ON", depress=on)
        sub = row.row(align=True)
        sub.active = on
        sub.prop(wm, "selvedge_overlay_red_strain")


class SELVEDGE_PT_diagnostics(_SelvedgePanel, Panel):
    bl_label = "Diagnostics"
    bl_parent_id = "SELVEDGE_PT_scene"

    @classmethod
    def poll(cls, context):
        return context.object is not None and context.object.selvedge.role == "CLOTH"

    def draw(self, context):
        from ..operators.bake import last_bake_stats
        from ..operators.overlay import preview_stats

        layout = self.layout
        obj = context.object
        if obj is None:  # poll() rules it out
            return
        s = obj.selvedge
        stats = last_bake_stats(obj)
        preview = preview_stats(obj)
        if preview is not None:
            col = layout.column(align=True)
            col.label(
                text=f"Preview frame {preview['frame']}: max strain {100 * preview['strain_max']:.2f}%, "
                f"P95 {100 * preview['strain_p95']:.2f}%",
                icon="PLAY",
            )
            col.label(text=f"Preview: {preview['ms_per_frame']:.1f} ms/frame")
        if s.bake_cache_file:
            layout.label(text=f"Cache: {bpy.path.basename(s.bake_cache_file)}", icon="FILE_CACHE")
        if s.bake_shape_keys:
            layout.label(text="Baked to shape keys", icon="SHAPEKEY_DATA")
        if stats is None:
            layout.label(text="No bake statistics yet")
            return
        col = layout.column(align=True)
        col.label(text=f"Frames {stats['frame_start']}-{stats['frame_end']} ({stats['frames']} simulated)")
        col.label(text=f"Last frame: max strain {100 * stats['strain_max']:.2f}%, P95 {100 * stats['strain_p95']:.2f}%")
        col.label(text=f"Last frame: {stats['ms_per_frame']:.1f} ms")
        if "intersections" in stats:
            col.label(
                text=f"Last frame: {stats['cloth_cloth_contacts']} cloth-cloth, {stats['self_contacts']} self contacts"
            )
            col.label(
                text=f"Crossing triangle pairs: {stats['intersections']} (most in a frame {stats['intersections_max']})",
                icon="ERROR" if stats["intersections_max"] else "CHECKMARK",
            )
        if stats.get("frames_refined"):
            col.label(text=f"Frames run again with more substeps: {stats['frames_refined']}")


CLASSES = (
    SELVEDGE_PT_object,
    SELVEDGE_PT_cloth,
    SELVEDGE_PT_cloth_shape,
    SELVEDGE_PT_cloth_pressure,
    SELVEDGE_PT_cloth_fields,
    SELVEDGE_PT_collider,
    SELVEDGE_PT_scene,
    SELVEDGE_PT_preview,
    SELVEDGE_PT_diagnostics,
)
