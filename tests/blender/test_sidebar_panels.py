"""Sidebar panels and setup operators, with the real bpy module.

Panels are drawn into a recording layout (headless Blender has no window to draw in): every
``prop`` must name a real RNA property of the data it is given, every ``operator`` a
registered operator, and the misconfiguration messages must say what is wrong.
"""

from types import SimpleNamespace

import bpy
import numpy as np
import pytest
from blender_scenes import fresh_blender

blender = pytest.fixture(autouse=True, name="blender")(fresh_blender)


class Layout:
    """Records what a panel draws and checks that it refers to things that exist."""

    def __init__(self, log):
        self.log = log
        self.use_property_split = False
        self.active = True
        self.enabled = True

    def _child(self, *args, **kwargs):
        return Layout(self.log)

    row = column = box = split = _child

    def prop(self, data, name, **kwargs):
        assert name in data.bl_rna.properties.keys(), f"{type(data).__name__} has no property {name!r}"
        self.log.append(("prop", name))

    def prop_search(self, data, name, search_data, search_name, **kwargs):
        assert name in data.bl_rna.properties.keys()
        assert search_name in search_data.bl_rna.properties.keys()
        self.log.append(("prop_search", name))

    def label(self, text="", icon="NONE"):
        self.log.append(("label", text, icon))

    def operator(self, idname, **kwargs):
        module, name = idname.split(".")
        assert name in dir(getattr(bpy.ops, module)), f"no operator {idname}"
        self.log.append(("operator", idname))
        return SimpleNamespace()


def draw(panel_cls, obj):
    context = SimpleNamespace(object=obj, scene=bpy.context.scene)
    log = []
    if hasattr(panel_cls, "poll") and not panel_cls.poll(context):
        return None
    panel_cls.draw(SimpleNamespace(layout=Layout(log)), context)
    return log


def grid(name="Cloth"):
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=3, y_subdivisions=3, size=1.0)
    obj = bpy.context.object
    obj.name = name
    return obj


@pytest.mark.parametrize("role", ["NONE", "CLOTH", "COLLIDER"])
def test_every_panel_draws_for_each_role(role):
    from selvedge import panels

    obj = grid()
    obj.selvedge.role = role
    drawn = {cls.__name__: draw(cls, obj) for cls in panels.CLASSES}
    assert drawn["SELVEDGE_PT_object"][0] == ("prop", "role")
    assert (drawn["SELVEDGE_PT_cloth"] is not None) == (role == "CLOTH")
    assert (drawn["SELVEDGE_PT_collider"] is not None) == (role == "COLLIDER")
    if role == "CLOTH":
        props = [entry[1] for entry in drawn["SELVEDGE_PT_cloth"] if entry[0].startswith("prop")]
        assert {
            "material_preset",
            "stretch_stiffness",
            "bend_stiffness",
            "pin_group",
            "uv_map",
            "use_tethers",
            "tether_scale",
            "use_self_collision",
            "use_cloth_collision",
            "collision_layer",
            "bending_model",
        } <= set(props)
    ops = [e[1] for e in drawn["SELVEDGE_PT_scene"] if e[0] == "operator"]
    assert ops == ["selvedge.bake_cache", "selvedge.bake_shape_keys", "selvedge.free_bake"]
    assert draw(panels.CLASSES[0], None) == [("label", "No active object", "NONE")]


def messages(obj):
    from selvedge import panels

    return [e[1] for e in draw(panels.CLASSES[0], obj) if e[0] == "label"]


def test_misconfiguration_messages_name_the_problem():
    obj = grid()
    obj.selvedge.role = "CLOTH"
    assert messages(obj) == ["No pin group: the whole cloth falls freely"]
    obj.selvedge.pin_group = "pins"
    obj.selvedge.uv_map = "Nope"
    assert messages(obj) == ["UV map 'Nope' does not exist", "Pin group 'pins' does not exist"]
    obj.selvedge.uv_map = ""
    obj.vertex_groups.new(name="pins")
    obj.data.uv_layers.remove(obj.data.uv_layers[0])
    obj.modifiers.new("Subdivision", "SUBSURF")
    assert messages(obj) == [
        "No UV map: the fabric is treated as isotropic",
        "Pin group 'pins' has no weighted vertices",
        "Modifiers change the vertex count: Subdivision",
    ]
    # Non-manifold: a third face on an existing edge (vertices 0 and 1 of the grid).
    mesh = bpy.data.meshes.new("fan")
    mesh.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1)], [], [(0, 1, 2), (0, 3, 1), (0, 1, 4)])
    fan = bpy.data.objects.new("Fan", mesh)
    bpy.context.scene.collection.objects.link(fan)
    fan.selvedge.role = "CLOTH"
    assert "Non-manifold: 1 edges have more than two faces" in messages(fan)


def test_set_role_marks_selected_meshes_and_skips_others():
    a, b = grid("A"), grid("B")
    empty = bpy.data.objects.new("Empty", None)
    bpy.context.scene.collection.objects.link(empty)
    for o in (a, b, empty):
        o.select_set(True)
    assert bpy.ops.selvedge.set_role(role="COLLIDER") == {"FINISHED"}
    assert [o.selvedge.role for o in (a, b, empty)] == ["COLLIDER", "COLLIDER", "NONE"]
    for o in (a, b):
        o.select_set(False)
    with pytest.raises(RuntimeError, match="No mesh selected"):
        bpy.ops.selvedge.set_role(role="CLOTH")


def test_pin_group_from_selected_vertices_in_edit_mode():
    obj = grid()
    co = np.empty(3 * len(obj.data.vertices))
    obj.data.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    wanted = np.flatnonzero(co[:, 1] > 0.49)  # the top row
    select = np.zeros(len(co), dtype=bool)
    select[wanted] = True
    obj.data.vertices.foreach_set("select", select)
    obj.data.edges.foreach_set("select", np.zeros(len(obj.data.edges), dtype=bool))  # else edit mode
    obj.data.polygons.foreach_set("select", np.zeros(len(obj.data.polygons), dtype=bool))  # re-flushes them
    bpy.ops.object.mode_set(mode="EDIT")
    assert bpy.ops.selvedge.pin_group_from_selection() == {"FINISHED"}
    assert obj.mode == "EDIT"
    bpy.ops.object.mode_set(mode="OBJECT")
    group = obj.vertex_groups[obj.selvedge.pin_group]
    assert group.name == "Selvedge Pins"
    members = sorted(v.index for v in obj.data.vertices for g in v.groups if g.group == group.index and g.weight == 1)
    assert members == wanted.tolist() and len(members) == 4
    # Running it again with a different selection replaces the members.
    select[:] = False
    select[0] = True
    obj.data.vertices.foreach_set("select", select)
    assert bpy.ops.selvedge.pin_group_from_selection() == {"FINISHED"}
    members = sorted(v.index for v in obj.data.vertices for g in v.groups if g.group == group.index)
    assert members == [0]
    select[:] = False
    obj.data.vertices.foreach_set("select", select)
    with pytest.raises(RuntimeError, match="No vertices selected"):
        bpy.ops.selvedge.pin_group_from_selection()


def test_diagnostics_panel_shows_the_last_baked_frame(tmp_path):
    import json

    from selvedge.panels.sidebar import SELVEDGE_PT_diagnostics

    obj = grid()
    obj.selvedge.role = "CLOTH"
    obj.vertex_groups.new(name="pins").add([0], 1.0, "REPLACE")
    obj.selvedge.pin_group = "pins"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 3
    scene.selvedge.substeps = 2
    scene.selvedge.cache_folder = str(tmp_path)
    assert draw(SELVEDGE_PT_diagnostics, obj)[-1] == ("label", "No bake statistics yet", "NONE")
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    last = json.loads((tmp_path / "Cloth.json").read_text())["frames"][-1]
    texts = [e[1] for e in draw(SELVEDGE_PT_diagnostics, obj) if e[0] == "label"]
    assert texts == [
        "Cache: Cloth.pc2",
        "Frames 1-3 (2 simulated)",
        f"Last frame: max strain {100 * last['strain_max']:.2f}%, P95 {100 * last['strain_p95']:.2f}%",
        f"Last frame: {last['timings_ms']['total']:.1f} ms",
    ]
    assert last["strain_max"] > 0
