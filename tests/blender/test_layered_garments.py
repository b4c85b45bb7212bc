"""Layered garments baked through the operators, with the real bpy module: cloth objects collide
with each other in one collision world, measured with Blender's own geometry.

Two cloth objects (an inner 20 x 20 sheet, layer 0, and an outer one over it, layer 1, turned
by 30 degrees so that their triangles cannot line up) drop onto a moving body (a UV-sphere mesh
collider sliding sideways). The baked caches are read back through Blender's Mesh Cache
modifier, and at every baked frame ``mathutils.bvhtree.BVHTree.overlap`` (Blender's
triangle-triangle test, not Selvedge's contact code) counts the polygons of one cloth crossing
the other's:

* both colliding (and self-colliding): 0 at every frame, between the layers and within each;
  the outer layer rests on the inner one (its vertices keep the pair's gap, half the sum of the
  thicknesses, from the inner mesh and touch it; over the body's top it lies that gap farther
  out); the sidecars record cloth-cloth and self contacts and 0 crossings per frame;
* the outer one modelled through the inner one (a dent): untangled at the end of the first
  simulated frame, uncrossed from then on;
* the outer one opting out (Collide with Cloth off): it falls through the inner one onto the
  body (hundreds of crossing pairs), and the world's own count in the sidecar equals Blender's.

The body's data is built once for both cloths (as many triangle-grid builds as for one).
"""

import json

import blender_scenes
import bpy
import numpy as np
import pytest
from blender_scenes import fresh_blender, mesh_co
from mathutils import Vector
from mathutils.bvhtree import BVHTree

from selvedge.operators.bake import last_bake_stats

FIRST, LAST = 1, 24
RADIUS = 0.3
INNER_T, OUTER_T = 0.002, 0.003
#: the gap the world keeps between the two mid-surfaces: half the sum of the thicknesses
PAIR_GAP = 0.5 * (INNER_T + OUTER_T)

blender = pytest.fixture(autouse=True, name="blender")(fresh_blender)
cache_dir = pytest.fixture(name="cache_dir")(blender_scenes.cache_dir)


def layered_scene():
    """A sphere body sliding 6 cm along x over the bake, an inner and an outer sheet above it."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FIRST, LAST
    scene.frame_set(FIRST)
    scene.selvedge.substeps = 10
    bpy.ops.mesh.primitive_uv_sphere_add(segments=32, ring_count=16, radius=RADIUS, location=(0.0, 0.0, 0.0))
    body = bpy.context.object
    body.name = "Body"
    body.selvedge.role = "COLLIDER"
    body.selvedge.collider_proxy = "MESH"
    body.keyframe_insert("location", frame=FIRST)
    body.location = (0.06, 0.0, 0.0)
    body.keyframe_insert("location", frame=LAST)
    cloths = []
    for name, z, angle, layer, thickness in (
        ("Inner", RADIUS + 0.02, 0.0, 0, INNER_T),
        ("Outer", RADIUS + 0.05, 0.5236, 1, OUTER_T),
    ):
        bpy.ops.mesh.primitive_grid_add(
            x_subdivisions=19, y_subdivisions=19, size=0.9, calc_uvs=True, location=(0.0, 0.0, z)
        )
        obj = bpy.context.object
        obj.name = name
        obj.rotation_euler = (0.0, 0.0, angle)
        s = obj.selvedge
        s.role = "CLOTH"
        s.material_preset = "cotton"
        s.thickness_m = thickness
        s.collision_layer = layer
        cloths.append(obj)
    return body, cloths


def baked_world(obj, frame):
    """World positions of the cloth at ``frame`` as Blender's Mesh Cache modifier plays the PC2 back."""
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


def triangles(obj):
    """The mesh's loop triangles: Blender's triangulation, which the solver simulates (a bent quad
    split along its other diagonal would be another surface, off by up to its bend)."""
    obj.data.calc_loop_triangles()
    return [tuple(t.vertices) for t in obj.data.loop_triangles]


def tree(obj, world):
    return BVHTree.FromPolygons([tuple(p) for p in world], triangles(obj), all_triangles=True)


def self_crossings(obj, t):
    """Pairs of the cloth's triangles that overlap and share no vertex (BVHTree.overlap of the tree with itself)."""
    tris = triangles(obj)
    return sum(1 for i, j in t.overlap(t) if i < j and not set(tris[i]) & set(tris[j]))


def layer_measures(inner, outer):
    """Per baked frame: crossing polygon pairs (BVHTree.overlap), and the outer vertices' distances to
    the inner mesh (BVHTree.find_nearest)."""
    crossings, own, distances = [], [], []
    for f in range(FIRST, LAST + 1):
        a, b = baked_world(inner, f), baked_world(outer, f)
        ta, tb = tree(inner, a), tree(outer, b)
        crossings.append(len(ta.overlap(tb)))
        own.append(self_crossings(inner, ta) + self_crossings(outer, tb))
        distances.append(np.array([ta.find_nearest(Vector(p))[3] for p in b]))
    return np.array(crossings), np.array(own), distances


def sidecar(obj):
    with open(bpy.path.abspath(obj.selvedge.bake_sidecar_file), encoding="utf-8") as f:
        return json.load(f)


def test_layered_garments_collide_through_one_world_and_never_cross(cache_dir):
    body, (inner, outer) = layered_scene()
    inner.selvedge.use_self_collision = outer.selvedge.use_self_collision = True
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    crossings, own, distances = layer_measures(inner, outer)
    frames = LAST - FIRST + 1
    assert crossings.tolist() == [0] * frames  # no triangle of one layer through the other's
    assert own.tolist() == [0] * frames  # nor through its own layer
    # the outer layer rests on the inner one: it keeps the pair's gap (float32 cache: 0.1 mm slack)
    # and, once landed, touches it (its closest vertex within 1 mm of that gap)
    closest = np.array([d.min() for d in distances])
    assert closest.min() >= PAIR_GAP - 1e-4, closest
    assert closest[-8:].max() <= PAIR_GAP + 1e-3, closest
    # over the body's top the outer layer lies on the inner one, not on the body
    dr = radial_gap_over_top(body, inner, outer)
    assert dr >= PAIR_GAP - 2e-4, dr
    # the sidecars: one world of both objects, contacts once landed, 0 crossings at every frame
    pushing_self = 0
    for obj, layer, thickness in ((inner, 0, INNER_T), (outer, 1, OUTER_T)):
        doc = sidecar(obj)
        assert doc["settings"]["collision_world"]["objects"] == ["Inner", "Outer"]
        assert doc["settings"]["cloth_collision"]["layer"] == layer
        assert doc["settings"]["cloth_collision"]["thickness_m"] == pytest.approx(thickness)
        assert len(doc["frames"]) == frames - 1  # the first frame is the rest pose
        assert [f["contacts"]["cloth_intersections"] for f in doc["frames"]] == [0] * (frames - 1)
        pushing = [f["contacts"]["cloth_cloth_pushing_pairs_max"] for f in doc["frames"]]
        assert min(pushing[-8:]) > 20, pushing
        pushing_self += sum(f["contacts"]["self_pushing_pairs_max"] for f in doc["frames"])
        stats = last_bake_stats(obj)  # what the Diagnostics panel shows
        assert stats is not None and stats["intersections_max"] == 0
        assert stats["cloth_cloth_contacts"] == pushing[-1] > 20
    assert pushing_self > 0


def test_a_layer_modelled_through_the_other_is_pulled_out_in_its_first_frame(cache_dir):
    """The outer sheet modelled 8 mm over the inner one with a 2.2 cm dent through it (a
    modelling slip a TD meets on a dressed character): the world untangles the crossing at the end
    of the first simulated frame, and no frame after the rest pose crosses (Blender's
    BVHTree.overlap on the baked caches); the sidecar records the untangled pairs."""
    body, (inner, outer) = layered_scene()
    inner.selvedge.use_self_collision = outer.selvedge.use_self_collision = True
    outer.rotation_euler = (0.0, 0.0, 0.0)
    outer.location.z = inner.location.z + 0.008
    for v in outer.data.vertices:
        v.co.z -= 0.022 * float(np.exp(-(v.co.x**2 + v.co.y**2) / 0.004))
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    crossings, own, _ = layer_measures(inner, outer)
    assert crossings[0] > 10, crossings  # the rest pose, as modelled
    assert crossings[1:].tolist() == [0] * (LAST - FIRST), crossings
    assert own.tolist() == [0] * (LAST - FIRST + 1), own
    frames = sidecar(outer)["frames"]
    assert frames[0]["contacts"]["cloth_untangled_pairs"] >= crossings[0] // 2, frames[0]["contacts"]
    assert [f["contacts"]["cloth_intersections"] for f in frames] == [0] * (LAST - FIRST)


def radial_gap_over_top(body, inner, outer):
    """Mean distance from the body's centre of the outer layer less the inner one's, over the body's
    top (within 10 cm of its vertical axis), at the last frame."""
    a, b = baked_world(inner, LAST), baked_world(outer, LAST)
    centre = np.array(body.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world.translation)
    radial = [np.linalg.norm(p - centre, axis=1)[np.linalg.norm((p - centre)[:, :2], axis=1) < 0.1] for p in (a, b)]
    return float(radial[1].mean() - radial[0].mean())


def body_distances_over_top(body, obj):
    """Distances of the cloth's vertices over the body's top (within 10 cm of its vertical axis) to
    the body's evaluated mesh (BVHTree.find_nearest), at the last frame."""
    p = baked_world(obj, LAST)
    body_eval = body.evaluated_get(bpy.context.evaluated_depsgraph_get())
    m = np.array(body_eval.matrix_world, dtype=np.float64)
    local = (p - m[:3, 3]) @ np.linalg.inv(m[:3, :3]).T
    top = local[np.linalg.norm(local[:, :2], axis=1) < 0.1]
    body_tree = BVHTree.FromObject(body_eval, bpy.context.evaluated_depsgraph_get())
    return np.array([body_tree.find_nearest(Vector(q))[3] for q in top])


def test_a_cloth_opting_out_of_cloth_collisions_passes_through_the_other(cache_dir):
    """Both self-collide (so both are in the world), the outer one opts out of cloth-cloth: it falls
    through the inner layer onto the body. The world's own crossing count, in the sidecar, is the
    count BVHTree.overlap finds in the baked caches."""
    body, (inner, outer) = layered_scene()
    inner.selvedge.use_self_collision = outer.selvedge.use_self_collision = True
    outer.selvedge.use_cloth_collision = False
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    crossings, own, distances = layer_measures(inner, outer)
    assert crossings[-1] > 100, crossings
    assert own.tolist() == [0] * (LAST - FIRST + 1)  # each still keeps clear of itself
    # it lies on the body, not on the inner layer: its lowest vertices over the body's top keep its
    # own gap to the body (cloth + collider thickness, 8 mm), not the inner's gap plus the pair's
    # (9.5 mm), where a colliding outer layer rests; the rest of it may lie in wrinkles
    gap = OUTER_T + body.selvedge.collider_thickness_m
    lowest = np.sort(body_distances_over_top(body, outer))[:3]
    assert gap - 1e-4 <= lowest.min() and lowest.max() <= gap + 0.5e-3, (lowest, gap)
    doc = sidecar(outer)
    assert doc["settings"]["collision_world"]["objects"] == ["Inner", "Outer"]
    assert doc["settings"]["cloth_collision"]["collide_with_cloths"] is False
    assert [f["contacts"]["cloth_intersections"] for f in doc["frames"]] == (crossings + own)[1:].tolist()
    assert all(f["contacts"]["cloth_cloth_pushing_pairs_max"] == 0 for f in doc["frames"])
    stats = last_bake_stats(outer)
    assert stats is not None and stats["intersections_max"] == int((crossings + own).max())


def test_the_body_data_is_built_once_for_both_cloths(cache_dir):
    """The moving body mesh's triangle grids are built per pose, once for both cloths: as many
    builds as a bake of one cloth alone makes (the solver's ``MeshBody.builds``). The grids hold
    the triangle boxes grown by the contact radius (cloth thickness + the body's skin), so both
    cloths have the same thickness here: two thicknesses build two grids per pose."""
    from selvedge.operators import bake

    def grid_builds(cloths_on):
        _, cloths = layered_scene()
        for obj, on in zip(cloths, cloths_on):
            obj.selvedge.role = "CLOTH" if on else "NONE"
            obj.selvedge.thickness_m = INNER_T
        job = bake.CacheBake(bpy.context, log=lambda line: None)
        for _ in range(6):
            job.step()
        bodies = {id(run.contacts.meshes[0].mesh.body): run.contacts.meshes[0].mesh.body for run in job.sim.runs}
        job.cancel()
        for obj in list(bpy.data.objects):
            bpy.data.objects.remove(obj)
        assert len(bodies) == 1  # one body, shared
        return next(iter(bodies.values())).builds["triangle_grids"]

    alone, both = grid_builds((True, False)), grid_builds((True, True))
    assert alone >= 6 and both == alone, (alone, both)


def test_which_cloths_share_the_world():
    """A cloth joins the world when it collides with itself, or with other cloths while another one
    does too; a learned-network bake steps every cloth alone and says which would have collided."""
    from types import SimpleNamespace

    from selvedge.operators.bake.cloth_world import world_members

    def cloth(name, cross=True, own=False):
        return SimpleNamespace(name=name, selvedge=SimpleNamespace(use_cloth_collision=cross, use_self_collision=own))

    assert world_members([cloth("A")], "OFF") == ([], [])  # alone, no self-collision: as before
    assert world_members([cloth("A", own=True)], "OFF") == ([0], [])
    assert world_members([cloth("A"), cloth("B")], "OFF") == ([0, 1], [])
    assert world_members([cloth("A"), cloth("B", cross=False), cloth("C")], "OFF") == ([0, 2], [])
    assert world_members([cloth("A"), cloth("B", cross=False)], "OFF") == ([], [])
    assert world_members([cloth("A", cross=False, own=True), cloth("B")], "OFF") == ([0], [])
    members, warnings = world_members([cloth("A"), cloth("B")], "ACCELERATION")
    assert members == [] and len(warnings) == 1 and "A, B do not collide with each other" in warnings[0]
