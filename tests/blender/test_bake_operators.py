"""Bake operators against independent references, with the real bpy module.

* PC2 bake: positions read back through Blender's own Mesh Cache modifier (evaluated mesh via
  the depsgraph) must equal a direct solver run of the same inputs, to float32 precision.
* Shape-key bake: Blender's shape-key playback must give the same positions.
* Bad input: a clear error and no file, no modifier; a failed re-bake keeps the old cache
  byte-identical.

The cloth is a 5x5-vertex grid whose object is moved and rotated, with location keyframes, so
the pins (two corners, vertex group) must follow the animated object and the world/object
transforms are exercised. Frames 1-6, 4 substeps: small on purpose.
"""

import json

import blender_scenes
import bpy
import numpy as np
import pytest
from blender_scenes import evaluated_co, fresh_blender, grid_cloth, mesh_co

import selvedge
from selvedge import solver
from selvedge.solver.io_pc2 import read_pc2

FIRST, LAST = 1, 6
#: float32 positions of about 1 m carry ~1.2e-7 m rounding; allow a few ulps for Blender's own
#: arithmetic in the Mesh Cache modifier and shape-key mixing.
ATOL = 1e-6


blender = pytest.fixture(autouse=True, name="blender")(fresh_blender)


cache_dir = pytest.fixture(name="cache_dir")(blender_scenes.cache_dir)


def make_cloth(name="Cloth"):
    return grid_cloth(FIRST, LAST, name=name)  # moves 13 cm over 5 frames: the pins must follow


def reference_run(obj, pinned, weight_maps=None, hooked=None, unit=1.0):
    """The solver run by hand on the same inputs; returns object-space float32 positions per frame.

    ``hooked``: ``(vertex, empty)`` for a vertex moved by a Hook modifier bound at the first
    frame; its target is computed from the empty's matrices, E(f) E(first)^-1 x_rest.
    """
    return blender_scenes.reference_run(obj, pinned, FIRST, LAST, weight_maps=weight_maps, hooked=hooked, unit=unit)


def test_pc2_bake_plays_back_through_blenders_mesh_cache_modifier(cache_dir):
    obj, pinned = make_cloth()
    scene = bpy.context.scene
    scene.frame_set(3)
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    assert scene.frame_current == 3  # the user's frame is restored
    mods = [(m.name, m.type) for m in obj.modifiers]
    assert mods == [("Selvedge Cache", "MESH_CACHE")]
    mod = obj.modifiers["Selvedge Cache"]
    assert (mod.cache_format, mod.frame_start, bpy.path.abspath(mod.filepath)) == (
        "PC2",
        FIRST,
        str(cache_dir / "Cloth.pc2"),
    )
    assert sorted(p.name for p in cache_dir.iterdir()) == ["Cloth.json", "Cloth.pc2"]

    expected, expected_world, pin_world, cloth = reference_run(obj, pinned)
    errors = {}
    for f in (FIRST, 2, 4, LAST):
        got = evaluated_co(obj, f)
        errors[f] = float(np.abs(got - expected[f]).max())
    print("max |Mesh Cache - direct solver| per frame (m):", errors)
    assert max(errors.values()) <= ATOL
    # Not a vacuous comparison: the free corner fell, the pins moved with the animated object.
    drop = pin_world[LAST][:, 2] - expected_world[LAST][:, 2]
    assert drop.max() > 0.05
    assert np.abs(expected_world[LAST][pinned] - pin_world[LAST][pinned]).max() < 1e-9
    assert np.linalg.norm(pin_world[LAST][pinned[0]] - pin_world[FIRST][pinned[0]]) > 0.12

    frames, header = read_pc2(cache_dir / "Cloth.pc2")
    assert (header.start_frame, header.num_samples, header.num_points) == (FIRST, LAST - FIRST + 1, 25)
    sidecar = json.loads((cache_dir / "Cloth.json").read_text())
    assert sidecar["object"] == "Cloth" and sidecar["solver_version"] == solver.__version__
    # Settle at Rest is Auto and the cloth is pinned: its coarse links are measured at their members
    assert sidecar["settings"]["object"]["settle_at_rest"] == "AUTO" and not cloth.links_between_aggregates
    assert sidecar["coarse_links"] == "members"
    assert sidecar["settings"]["scene"]["substeps"] == 4
    assert sidecar["settings"]["object"]["material_preset"] == "silk"
    strain = [f["strain_max"] for f in sidecar["frames"]]
    assert strain == pytest.approx([d.strain_max for d in cloth.history], rel=1e-12)


def test_bake_twice_gives_identical_files_and_one_modifier(cache_dir):
    obj, _ = make_cloth()
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    first = (cache_dir / "Cloth.pc2").read_bytes()
    # The second bake must not read the first bake's modifier output as its input.
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    assert (cache_dir / "Cloth.pc2").read_bytes() == first
    assert [m.type for m in obj.modifiers] == ["MESH_CACHE"]
    assert obj.modifiers[0].show_viewport


def test_no_cloth_object_is_a_clear_error_and_writes_nothing(cache_dir):
    bpy.ops.mesh.primitive_grid_add()
    with pytest.raises(RuntimeError, match="No object has the Selvedge role 'Cloth'"):
        bpy.ops.selvedge.bake_cache()
    assert not cache_dir.exists()
    assert len(bpy.context.object.modifiers) == 0


def test_unwritable_cache_folder_is_a_clear_error_and_writes_nothing(tmp_path):
    obj, _ = make_cloth()
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    bpy.context.scene.selvedge.cache_folder = str(blocker / "cache")
    with pytest.raises(RuntimeError, match="cannot write to the cache folder"):
        bpy.ops.selvedge.bake_cache()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not_a_folder"]
    assert len(obj.modifiers) == 0 and obj.selvedge.bake_cache_file == ""


def test_relative_cache_folder_in_an_unsaved_file_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_cloth()
    assert bpy.context.scene.selvedge.cache_folder == "//selvedge_cache"
    with pytest.raises(RuntimeError, match="not saved"):
        bpy.ops.selvedge.bake_cache()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "breakage, message",
    [
        ("missing_group", "vertex group 'pins' does not exist"),
        ("missing_uv", "UV map 'Nope' does not exist"),
        ("subdivision", "change the vertex count"),
        ("reversed_range", "reversed"),
        ("not_a_mesh", "not a mesh"),
    ],
)
def test_bad_input_is_reported_and_nothing_is_written(cache_dir, breakage, message):
    obj, _ = make_cloth()
    if breakage == "missing_group":
        obj.vertex_groups.remove(obj.vertex_groups["pins"])
    elif breakage == "missing_uv":
        obj.selvedge.uv_map = "Nope"
    elif breakage == "subdivision":
        obj.modifiers.new("Subdivision", "SUBSURF")
    elif breakage == "reversed_range":
        settings = bpy.context.scene.selvedge  # Blender itself keeps the scene's own range ordered
        settings.use_scene_frame_range, settings.frame_start, settings.frame_end = False, 5, 2
    else:
        empty = bpy.data.objects.new("Empty", None)
        bpy.context.scene.collection.objects.link(empty)
        empty.selvedge.role = "CLOTH"
    with pytest.raises(RuntimeError, match=message):
        bpy.ops.selvedge.bake_cache()
    assert not cache_dir.exists() or list(cache_dir.iterdir()) == []
    assert [m.type for m in obj.modifiers] == (["SUBSURF"] if breakage == "subdivision" else [])


def test_a_failing_rebake_keeps_the_previous_cache(cache_dir):
    obj, _ = make_cloth()
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    before = {p.name: p.read_bytes() for p in cache_dir.iterdir()}
    filepath = obj.modifiers[0].filepath
    # Teleport the object (and its pins) 1 km in one frame: the solver refuses the pin jump at frame 4.
    obj.location = (1000.0, 0.0, 0.0)
    obj.keyframe_insert("location", frame=4)
    with pytest.raises(RuntimeError, match=r"Cloth, frame \d: pin target .* jumps"):
        bpy.ops.selvedge.bake_cache()
    assert {p.name: p.read_bytes() for p in cache_dir.iterdir()} == before
    assert obj.modifiers[0].filepath == filepath and obj.modifiers[0].show_viewport


def test_shape_key_bake_plays_back_the_solver_and_keeps_existing_keys(cache_dir):
    obj, pinned = make_cloth()
    obj.shape_key_add(name="Basis", from_mix=False)
    existing = obj.shape_key_add(name="Existing", from_mix=False)
    bumped = mesh_co(obj.data) + np.array([0.0, 0.0, 0.2], dtype=np.float32)
    existing.data.foreach_set("co", bumped.ravel())
    existing.value = 0.0

    assert bpy.ops.selvedge.bake_shape_keys() == {"FINISHED"}
    names = [k.name for k in obj.data.shape_keys.key_blocks]
    assert names[:2] == ["Basis", "Existing"]
    assert names[2:] == [f"Selvedge.{f:04d}" for f in range(FIRST, LAST + 1)]
    kept = np.empty(3 * len(obj.data.vertices), dtype=np.float32)
    obj.data.shape_keys.key_blocks["Existing"].data.foreach_get("co", kept)
    assert np.array_equal(kept.reshape(-1, 3), bumped)
    assert not cache_dir.exists()  # shape keys only, no cache files

    expected, _, _, _ = reference_run(obj, pinned)
    errors = {f: float(np.abs(evaluated_co(obj, f) - expected[f]).max()) for f in (FIRST, 3, LAST)}
    print("max |shape-key playback - direct solver| per frame (m):", errors)
    assert max(errors.values()) <= ATOL

    # Free removes the bake's keys and their animation, and nothing else.
    assert bpy.ops.selvedge.free_bake() == {"FINISHED"}
    assert [k.name for k in obj.data.shape_keys.key_blocks] == ["Basis", "Existing"]
    anim = obj.data.shape_keys.animation_data
    assert anim is None or anim.action is None
    assert np.abs(evaluated_co(obj, 4) - mesh_co(obj.data)).max() == 0.0


def test_shape_key_bake_on_a_mesh_without_keys_and_free_restores_it(cache_dir):
    obj, _ = make_cloth()
    actions_before = [a.name for a in bpy.data.actions]
    slots_before = [s.identifier for s in getattr(obj.animation_data.action, "slots", ())]
    bpy.context.scene.frame_set(FIRST)
    assert bpy.ops.selvedge.bake_shape_keys() == {"FINISHED"}
    assert len(obj.data.shape_keys.key_blocks) == 1 + LAST - FIRST + 1
    assert bpy.ops.selvedge.free_bake() == {"FINISHED"}
    assert obj.data.shape_keys is None
    # Blender 4.4+ may put the keys' F-curves in a new slot of the object's action: the slot goes,
    # the object's own action and its location keys stay.
    assert [a.name for a in bpy.data.actions] == actions_before
    action = obj.animation_data.action
    assert [s.identifier for s in getattr(action, "slots", ())] == slots_before
    np.testing.assert_allclose(np.array(obj.matrix_world.translation), (0.5, -0.25, 1.0), atol=1e-6)


def test_free_bake_removes_the_cache_and_nothing_else(cache_dir):
    obj, _ = make_cloth()
    user_mod = obj.modifiers.new("UserDisplace", "DISPLACE")
    user_mod.strength = 0.0
    cache_dir.mkdir()
    (cache_dir / "notes.txt").write_text("keep me")
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    assert sorted(p.name for p in cache_dir.iterdir()) == ["Cloth.json", "Cloth.pc2", "notes.txt"]
    assert bpy.ops.selvedge.free_bake() == {"FINISHED"}
    assert sorted(p.name for p in cache_dir.iterdir()) == ["notes.txt"]
    assert [m.name for m in obj.modifiers] == ["UserDisplace"]
    assert not bpy.ops.selvedge.free_bake.poll()
    np.testing.assert_array_equal(evaluated_co(obj, LAST), mesh_co(obj.data))


def test_two_cloths_weight_map_and_a_hooked_pin_through_the_python_api(cache_dir):
    """Pins follow the evaluated (deformed) mesh: one corner of the second cloth hangs on a Hook
    modifier driven by an animated empty. The first cloth has a bend weight map."""
    from selvedge.operators import bake

    a, a_pins = make_cloth("A")
    co = mesh_co(a.data)
    soft = np.flatnonzero(co[:, 0] > 0.2)  # the +x side bends 1000x more easily
    bend = a.vertex_groups.new(name="bend")
    bend.add(list(range(len(co))), 1.0, "REPLACE")
    bend.add(soft.tolist(), 0.0, "REPLACE")
    a.selvedge.weight_map_bend = "bend"
    bend_weights = np.ones(len(co))
    bend_weights[soft] = 0.0

    bpy.ops.mesh.primitive_grid_add(x_subdivisions=4, y_subdivisions=4, size=1.0, calc_uvs=True)
    b = bpy.context.object
    b.name = "B"
    b_pins = [int(np.argmin(co[:, 0] + co[:, 1])), int(np.argmin(-co[:, 0] + co[:, 1]))]
    b.vertex_groups.new(name="pins").add(b_pins, 1.0, "REPLACE")
    b.selvedge.role, b.selvedge.pin_group = "CLOTH", "pins"
    empty = bpy.data.objects.new("Handle", None)
    bpy.context.scene.collection.objects.link(empty)
    empty.location = (0.5, -0.5, 0.0)
    empty.keyframe_insert("location", frame=FIRST)
    empty.location = (0.6, -0.45, 0.08)
    empty.keyframe_insert("location", frame=LAST)
    bpy.context.scene.frame_set(FIRST)
    hook = b.modifiers.new("Hook", "HOOK")
    hook.object = empty
    hook.vertex_indices_set([b_pins[1]])
    hook.matrix_inverse = empty.matrix_world.inverted()

    written = bake.bake_cache(bpy.context)
    assert sorted(written) == ["A", "B"]
    assert [m.type for m in b.modifiers] == ["HOOK", "MESH_CACHE"]

    errors = {}
    for obj, pins, maps, hooked in ((a, a_pins, {"bend": bend_weights}, None), (b, b_pins, None, (b_pins[1], empty))):
        # both cloths collide with each other: one collision world (they never touch here)
        expected, expected_world, targets, _ = reference_run(obj, pins, maps, hooked)
        errors[obj.name] = max(float(np.abs(evaluated_co(obj, f) - expected[f]).max()) for f in (2, 4, LAST))
        if hooked:
            travel = np.linalg.norm(targets[LAST][pins[1]] - targets[FIRST][pins[1]])
            cached = read_pc2(cache_dir / "B.pc2")[0]
            hooked_error = float(np.abs(cached[-1, pins[1]] - targets[LAST][pins[1]]).max())
    print("max |Mesh Cache - direct solver| (m):", errors, "hooked pin error (m):", hooked_error)
    assert max(errors.values()) <= ATOL
    assert travel > 0.13 and hooked_error <= ATOL
    # The weight map reaches the solver: without it the first cloth ends elsewhere (~2e-5 m after 5 frames
    # of a limp silk sheet, 20x the comparison tolerance).
    plain, _, _, _ = reference_run(a, a_pins)
    assert np.abs(plain[LAST] - evaluated_co(a, LAST)).max() > 10 * ATOL


def test_saved_file_relative_cache_plays_back_without_the_add_on(tmp_path):
    """The default '//selvedge_cache' folder next to a saved .blend; after unregistering Selvedge and
    reopening the file, Blender alone plays the cache and the shape keys back."""
    blend = tmp_path / "scene.blend"
    obj, _ = make_cloth()
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    assert obj.modifiers[0].filepath == "//selvedge_cache/Cloth.pc2"
    cached, _ = read_pc2(tmp_path / "selvedge_cache" / "Cloth.pc2")
    bpy.ops.wm.save_mainfile()

    selvedge.unregister()
    try:
        bpy.ops.wm.open_mainfile(filepath=str(blend))
        obj = bpy.data.objects["Cloth"]
        errors = [float(np.abs(evaluated_co(obj, f) - cached[f - FIRST]).max()) for f in (FIRST, 3, LAST)]
    finally:
        selvedge.register()
    print("max |reopened file without add-on - PC2| (m):", errors)
    assert max(errors) == 0.0
    assert np.abs(cached[-1] - cached[0]).max() > 0.05


@pytest.mark.parametrize("kind", ["cache", "shape_keys"])
def test_cancelling_a_bake_midway_leaves_everything_as_it_was(cache_dir, kind):
    """The job behind the modal (Esc) path: cancel after two frames; no file, no modifier, no key,
    the previous cache byte-identical, the user's frame and our disabled modifier restored."""
    from selvedge.operators import bake

    obj, _ = make_cloth()
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    before = {p.name: p.read_bytes() for p in cache_dir.iterdir()}
    bpy.context.scene.frame_set(2)
    job = (bake.CacheBake if kind == "cache" else bake.ShapeKeyBake)(bpy.context, log=lambda *_: None)
    assert not obj.modifiers[0].show_viewport  # the old result must not feed the new simulation
    assert job.step() and job.step()
    assert job.sim.done == 2 and bpy.context.scene.frame_current == FIRST + 2
    job.cancel()
    assert {p.name: p.read_bytes() for p in cache_dir.iterdir()} == before  # no temporary files either
    assert bpy.context.scene.frame_current == 2
    assert [m.type for m in obj.modifiers] == ["MESH_CACHE"] and obj.modifiers[0].show_viewport
    assert obj.data.shape_keys is None
    cached, _ = read_pc2(cache_dir / "Cloth.pc2")
    assert np.abs(evaluated_co(obj, 4) - cached[4 - FIRST]).max() == 0.0


def test_scene_unit_scale_gives_the_solver_metres(cache_dir):
    """With 1 Blender unit = 0.25 m the 1-unit grid is a 25 cm square: it must drape like one."""
    obj, pinned = make_cloth()
    bpy.context.scene.unit_settings.scale_length = 0.25
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    expected, _, _, _ = reference_run(obj, pinned, unit=0.25)
    metre_scene, _, _, _ = reference_run(obj, pinned)
    error = max(float(np.abs(evaluated_co(obj, f) - expected[f]).max()) for f in (3, LAST))
    print("max |Mesh Cache - direct solver in metres| (BU):", error)
    assert error <= ATOL / 0.25
    assert np.abs(metre_scene[LAST] - expected[LAST]).max() > 0.01  # the unit really changes the result
