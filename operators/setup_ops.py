"""Scene setup operators: mark objects as cloth or collider, make a pin group from selected vertices,
fit collider proxies (sphere/capsule/box from bounds, capsules from armature bones) and show them.

How fitted proxies are shown (what a Blender artist knows from rigid-body shapes):

* ``selvedge.fit_collider`` turns on the object's own bounds display (Object Properties >
  Viewport Display > Bounds) with the proxy's shape; the solver's proxy is exactly that shape:
  a sphere of the largest half extent, a capsule along local Z with radius max(half x, half y),
  or the box, centred on the bounds, with the object's scale folded in. Nothing is created;
  the proxy follows the object and is refitted from its bounds at every bake.
* ``selvedge.fit_capsules_to_bones`` creates one small display-only object per capsule, drawn
  as capsule bounds, parented to its bone (so it follows the pose in the viewport), hidden in
  renders and ignored by bakes; re-running the operator replaces them.
"""

from typing import TYPE_CHECKING

import bpy
from bpy.props import EnumProperty, StringProperty
from bpy.types import Operator

from .property_items import ROLE_ITEMS

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import OperatorReturnItems

PIN_GROUP_NAME = "Selvedge Pins"


class SELVEDGE_OT_set_role(Operator):
    """Mark the selected meshes as Selvedge cloth, collider, or neither"""

    bl_idname = "selvedge.set_role"
    bl_label = "Set Selvedge Role"
    bl_options = {"REGISTER", "UNDO"}

    role: EnumProperty(name="Role", description="Role given to the selected meshes", items=ROLE_ITEMS, default="CLOTH")

    @classmethod
    def poll(cls, context):
        if not context.selected_objects:
            cls.poll_message_set("Select one or more mesh objects")
            return False
        return True

    def execute(self, context) -> "set[OperatorReturnItems]":
        meshes = [o for o in context.selected_objects if o.type == "MESH"]
        skipped = [o.name for o in context.selected_objects if o.type != "MESH"]
        if not meshes:
            self.report({"ERROR"}, f"No mesh selected (skipped {', '.join(skipped)}); only meshes can take a role")
            return {"CANCELLED"}
        for obj in meshes:
            obj.selvedge.role = self.role
        if skipped:
            self.report({"WARNING"}, f"Skipped non-mesh objects: {', '.join(skipped)}")
        self.report({"INFO"}, f"{len(meshes)} object(s) set to {self.role.lower()}")
        return {"FINISHED"}


class SELVEDGE_OT_pin_group_from_selection(Operator):
    """Create (or replace) the pin vertex group from the selected vertices and use it for pinning"""

    bl_idname = "selvedge.pin_group_from_selection"
    bl_label = "Pin Selected Vertices"
    bl_options = {"REGISTER", "UNDO"}

    group_name: StringProperty(name="Group", description="Name of the pin vertex group", default=PIN_GROUP_NAME)

    @classmethod
    def poll(cls, context):
        obj = context.object
        if obj is None or obj.type != "MESH":
            cls.poll_message_set("The active object must be a mesh")
            return False
        return True

    def execute(self, context) -> "set[OperatorReturnItems]":
        import numpy as np

        obj = context.object
        if obj is None or not isinstance(obj.data, bpy.types.Mesh):  # poll() rules it out
            return {"CANCELLED"}
        if obj.mode == "EDIT":
            obj.update_from_editmode()
        mesh = obj.data
        selected = np.zeros(len(mesh.vertices), dtype=bool)
        mesh.vertices.foreach_get("select", selected)
        indices = np.flatnonzero(selected).tolist()
        if not indices:
            self.report({"ERROR"}, "No vertices selected; select the vertices to pin in Edit Mode")
            return {"CANCELLED"}
        mode = obj.mode
        if mode == "EDIT":  # vertex groups can only be filled in Object Mode
            bpy.ops.object.mode_set(mode="OBJECT")
        try:
            group = obj.vertex_groups.get(self.group_name)
            if group is None:
                group = obj.vertex_groups.new(name=self.group_name)
            else:
                group.remove(list(range(len(mesh.vertices))))
            group.add(indices, 1.0, "REPLACE")
        finally:
            if mode == "EDIT":
                bpy.ops.object.mode_set(mode="EDIT")
        obj.selvedge.pin_group = group.name
        self.report({"INFO"}, f"Pinned {len(indices)} vertices with group {group.name!r}")
        return {"FINISHED"}


FIT_ITEMS = (
    ("SPHERE", "Sphere", "Sphere around the bounds (radius: largest half extent)"),
    ("CAPSULE", "Capsule", "Capsule along local Z (radius: the larger of the X and Y half extents)"),
    ("BOX", "Box", "The bounds as an oriented box"),
)
#: Custom property naming the collider a capsule display object belongs to.
CAPSULE_OWNER = "selvedge_capsule_of"


class SELVEDGE_OT_fit_collider(Operator):
    """Make the selected objects colliders with a sphere, capsule or box proxy fitted to their bounds,
    shown as the object's bounds display"""

    bl_idname = "selvedge.fit_collider"
    bl_label = "Fit Collider Proxy"
    bl_options = {"REGISTER", "UNDO"}

    shape: EnumProperty(
        name="Shape", description="Proxy shape fitted to the bounds", items=FIT_ITEMS, default="CAPSULE"
    )

    @classmethod
    def poll(cls, context):
        if not context.selected_objects and context.object is None:
            cls.poll_message_set("Select one or more objects")
            return False
        return True

    def execute(self, context) -> "set[OperatorReturnItems]":
        from .bake import BakeError, fit_bounds

        objects = list(context.selected_objects) or ([context.object] if context.object is not None else [])
        depsgraph = context.evaluated_depsgraph_get()
        fitted, failed = [], []
        for obj in objects:
            try:
                fit = fit_bounds(self.shape, obj.evaluated_get(depsgraph))
            except BakeError as error:
                failed.append(str(error))
                continue
            s = obj.selvedge
            s.role = "COLLIDER"
            s.collider_proxy = self.shape
            s.fit_capsules_to_bones = False
            obj.show_bounds = True
            obj.display_bounds_type = self.shape
            size = {
                "SPHERE": lambda: f"radius {fit['radius']:.4g}",
                "CAPSULE": lambda: f"radius {fit['radius']:.4g}, half length {fit['half_length']:.4g}",
                "BOX": lambda: "half extents " + ", ".join(f"{h:.4g}" for h in fit["half_extents"]),
            }[self.shape]()
            fitted.append(f"{obj.name} ({size})")
        if not fitted:
            self.report({"ERROR"}, "; ".join(failed))
            return {"CANCELLED"}
        for message in failed:
            self.report({"WARNING"}, message)
        self.report({"INFO"}, f"{self.shape.title()} proxy: {'; '.join(fitted)}")
        return {"FINISHED"}


def capsule_display_objects(obj) -> list:
    return [o for o in bpy.data.objects if o.get(CAPSULE_OWNER) == obj.name]


def remove_capsule_display(obj) -> int:
    """Delete the capsule display objects made for ``obj`` (and their meshes); returns how many."""
    found = capsule_display_objects(obj)
    for o in found:
        mesh = o.data
        bpy.data.objects.remove(o)
        if mesh is not None and mesh.users == 0:
            bpy.data.meshes.remove(mesh)
    return len(found)


class SELVEDGE_OT_fit_capsules_to_bones(Operator):
    """One capsule collider per deform bone of the rig deforming the active mesh (radius from the vertices
    weighted to that bone); capsules follow the posed bones in bakes and are shown parented to the bones"""

    bl_idname = "selvedge.fit_capsules_to_bones"
    bl_label = "Fit Capsules to Bones"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        from .bake import armature_of

        obj = context.object
        if obj is None or obj.type != "MESH" or armature_of(obj) is None:
            cls.poll_message_set("The active object must be a mesh deformed by an armature")
            return False
        return True

    def execute(self, context) -> "set[OperatorReturnItems]":
        from mathutils import Matrix

        from .bake import BakeError, bone_capsules

        obj = context.object
        if obj is None or context.scene is None:  # poll() rules it out
            return {"CANCELLED"}
        try:
            armature, capsules, warnings = bone_capsules(obj)
        except BakeError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        remove_capsule_display(obj)
        collections = list(obj.users_collection) or [context.scene.collection]
        for c in capsules:
            r, half = c["radius"], 0.5 * c["length"]
            mesh = bpy.data.meshes.new(f"{obj.name} Capsule {c['bone']}")
            mesh.from_pydata([(-r, -r, -half - r), (r, r, half + r)], [], [])
            shown = bpy.data.objects.new(mesh.name, mesh)
            for collection in collections:
                collection.objects.link(shown)
            shown[CAPSULE_OWNER] = obj.name
            shown.display_type = "BOUNDS"
            shown.display_bounds_type = "CAPSULE"
            shown.hide_render = True
            shown.parent = armature
            shown.parent_type = "BONE"
            shown.parent_bone = c["bone"]
            shown.matrix_parent_inverse = Matrix.Identity(4)
            # A bone child sits at the bone's tail; the capsule's centre is mid-bone, its Z along the bone's Y.
            shown.matrix_basis = Matrix.Translation((0.0, -half, 0.0)) @ Matrix.Rotation(
                -0.5 * 3.141592653589793, 4, "X"
            )
        s = obj.selvedge
        s.role = "COLLIDER"
        s.fit_capsules_to_bones = True
        obj.show_bounds = False
        for message in warnings:
            self.report({"WARNING"}, message)
        self.report(
            {"INFO"},
            f"{len(capsules)} capsules on {armature.name}: "
            + ", ".join(f"{c['bone']} r={c['radius']:.3g}" for c in capsules),
        )
        return {"FINISHED"}


CLASSES = (
    SELVEDGE_OT_set_role,
    SELVEDGE_OT_pin_group_from_selection,
    SELVEDGE_OT_fit_collider,
    SELVEDGE_OT_fit_capsules_to_bones,
)
