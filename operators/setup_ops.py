"""Scene setup operators: mark objects as cloth or collider, make a pin group from selected vertices."""
import bpy
from bpy.props import EnumProperty, StringProperty
from bpy.types import Operator

from .properties import ROLE_ITEMS

PIN_GROUP_NAME = "Selvedge Pins"


class SELVEDGE_OT_set_role(Operator):
    """Mark the selected meshes as Selvedge cloth, collider, or neither"""

    bl_idname = "selvedge.set_role"
    bl_label = "Set Selvedge Role"
    bl_options = {"REGISTER", "UNDO"}

    role: EnumProperty(name="Role", description="Role given to the selected meshes", items=ROLE_ITEMS,
                       default="CLOTH")

    @classmethod
    def poll(cls, context):
        if not context.selected_objects:
            cls.poll_message_set("Select one or more mesh objects")
            return False
        return True

    def execute(self, context):
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

    def execute(self, context):
        import numpy as np

        obj = context.object
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


CLASSES = (SELVEDGE_OT_set_role, SELVEDGE_OT_pin_group_from_selection)
