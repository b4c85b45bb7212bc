"""Simulate (preview), with the real bpy module, against independent references.

* Reference: a PC2 cache bake of the same scene (serial solve mode, so runs are bit-identical),
  read back from the file. The preview's result is read back the way Blender plays it: the
  evaluated mesh (shape keys mixed by Blender) at each frame.
* The modal path is driven with plain events (headless Blender has no window): the viewport
  must show each simulated frame while it runs, Esc must keep exactly the frames done so far,
  or leave the mesh data byte-identical to before.

The cloth is a 5x5-vertex grid, moved by keyframes, pinned at two corners; frames 1-6, 4 substeps.
"""

import hashlib
import json
from types import SimpleNamespace

import bpy
import numpy as np
import pytest
from blender_scenes import evaluated_co, fresh_blender, grid_cloth

from selvedge.solver.io_pc2 import read_pc2

FIRST, LAST = 1, 6
ATOL = 1e-6


blender = pytest.fixture(autouse=True, name="blender")(fresh_blender)


def make_cloth(name="Cloth"):
    # current=3: not the first frame: the preview must put it back
    return grid_cloth(FIRST, LAST, name=name, current=3)[0]


def reference_bake(obj, tmp_path):
    """Positions (F,N,3) per frame from a PC2 cache bake of the same scene, then the bake is freed."""
    scene = bpy.context.scene
    scene.selvedge.cache_folder = str(tmp_path / "reference")
    frame = scene.frame_current
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    positions, header = read_pc2(tmp_path / "reference" / f"{obj.name}.pc2")
    sidecar = json.loads((tmp_path / "reference" / f"{obj.name}.json").read_text())
    assert header.start_frame == FIRST and len(positions) == LAST - FIRST + 1
    assert bpy.ops.selvedge.free_bake() == {"FINISHED"}
    assert scene.frame_current == frame
    return positions, sidecar


def mesh_fingerprint(obj):
    """Every byte of mesh data a preview could touch, plus the shape-key and animation bookkeeping."""
    mesh = obj.data
    h = hashlib.sha256()
    for collection, attribute, dtype, width in (
        (mesh.vertices, "co", np.float32, 3),
        (mesh.edges, "vertices", np.int32, 2),
        (mesh.loops, "vertex_index", np.int32, 1),
        (mesh.polygons, "loop_start", np.int32, 1),
    ):
        a = np.empty(width * len(collection), dtype=dtype)
        collection.foreach_get(attribute, a)
        h.update(a.tobytes())
    for layer in mesh.uv_layers:
        a = np.empty(2 * len(mesh.loops), dtype=np.float32)
        layer.data.foreach_get("uv", a)
        h.update(layer.name.encode() + a.tobytes())
    blocks = []
    key = mesh.shape_keys
    if key is not None:
        for block in key.key_blocks:
            a = np.empty(3 * len(mesh.vertices), dtype=np.float32)
            block.data.foreach_get("co", a)
            h.update(a.tobytes())
            blocks.append((block.name, block.mute, block.value, block.relative_key.name))
    groups = [
        (g.name, [(v.index, e.weight) for v in mesh.vertices for e in v.groups if e.group == g.index])
        for g in obj.vertex_groups
    ]
    anim = key.animation_data if key is not None else None
    fcurves = []
    if anim is not None and anim.action is not None:
        from selvedge.operators.bake import _fcurves

        fcurves = sorted((fc.data_path, tuple(tuple(p.co) for p in fc.keyframe_points)) for fc in _fcurves(key) or ())
    return {
        "bytes": h.hexdigest(),
        "blocks": blocks,
        "groups": groups,
        "fcurves": fcurves,
        "shape_keys": sorted(k.name for k in bpy.data.shape_keys),
        "actions": sorted(a.name for a in bpy.data.actions),
        "settings": {
            k: getattr(obj.selvedge, k)
            for k in ("bake_shape_keys", "bake_created_basis", "bake_shape_key_animation", "bake_cache_file")
        },
        "active_key": obj.active_shape_key_index,
        "frame": bpy.context.scene.frame_current,
    }


def test_execute_runs_every_frame_and_plays_back_the_bake(tmp_path):
    """The synchronous path (scripts, ``blender -b``; ``INVOKE_DEFAULT`` falls back to it headless)."""
    obj = make_cloth()
    reference, _ = reference_bake(obj, tmp_path)
    assert bpy.ops.selvedge.simulate_preview("INVOKE_DEFAULT") == {"FINISHED"}
    names = json.loads(obj.selvedge.bake_shape_keys)
    assert names == [f"Selvedge.{f:04d}" for f in range(FIRST, LAST + 1)]
    assert "Selvedge Preview" not in obj.data.shape_keys.key_blocks  # the temporary key is gone
    assert bpy.context.scene.frame_current == 3
    for frame in range(FIRST, LAST + 1):
        np.testing.assert_allclose(evaluated_co(obj, frame), reference[frame - FIRST], rtol=0, atol=ATOL)
    # Free Bake removes it like a shape-key bake, back to a mesh without shape keys.
    assert bpy.ops.selvedge.free_bake() == {"FINISHED"}
    assert obj.data.shape_keys is None


def fake_event(kind, value="NOTHING"):
    return SimpleNamespace(type=kind, value=value)


def start_modal(on_cancel):
    from selvedge.operators.preview_ops import PreviewModal, PreviewRun

    reports = []
    modal = PreviewModal(PreviewRun(bpy.context, on_cancel), lambda level, text: reports.append((level, text)))
    modal.start(bpy.context, operator=None)
    return modal, reports


def test_modal_shows_each_frame_and_esc_keeps_the_frames_done(tmp_path):
    obj = make_cloth()
    reference, _ = reference_bake(obj, tmp_path)
    modal, reports = start_modal("KEEP")
    # View navigation goes on to Blender; edits (undo, delete) wait until the preview ends.
    for kind in ("MOUSEMOVE", "MIDDLEMOUSE", "WHEELUPMOUSE", "NUMPAD_1", "TIMER_REPORT"):
        assert modal.modal(bpy.context, fake_event(kind)) == {"PASS_THROUGH"}, kind
    for kind in ("Z", "X", "DEL", "LEFTMOUSE"):
        assert modal.modal(bpy.context, fake_event(kind, "PRESS")) == {"RUNNING_MODAL"}, kind
    assert modal.run.sim.done == 0  # none of them stepped the simulation
    for k in (1, 2, 3):
        assert modal.modal(bpy.context, fake_event("TIMER")) == {"RUNNING_MODAL"}
        # The viewport shows frame FIRST + k as simulated, at that frame.
        assert bpy.context.scene.frame_current == FIRST + k
        np.testing.assert_allclose(evaluated_co(obj), reference[k], rtol=0, atol=ATOL)
        assert f"frame {FIRST + k} of {LAST}" in modal.run.status_text()
    assert modal.modal(bpy.context, fake_event("ESC", "PRESS")) == {"FINISHED"}
    assert reports == [({"WARNING"}, "Selvedge preview stopped; kept 4 frame(s) as shape keys")]
    assert json.loads(obj.selvedge.bake_shape_keys) == [f"Selvedge.{f:04d}" for f in range(FIRST, FIRST + 4)]
    assert bpy.context.scene.frame_current == 3
    for frame in range(FIRST, FIRST + 4):
        np.testing.assert_allclose(evaluated_co(obj, frame), reference[frame - FIRST], rtol=0, atol=ATOL)
    # After the last kept frame the cloth holds that frame's shape.
    np.testing.assert_allclose(evaluated_co(obj, LAST), reference[3], rtol=0, atol=ATOL)


@pytest.mark.parametrize("previous", ["none", "user keys and a shape-key bake"])
def test_esc_with_revert_leaves_the_mesh_data_byte_identical(tmp_path, previous):
    obj = make_cloth()
    reference, _ = reference_bake(obj, tmp_path)
    if previous != "none":
        obj.shape_key_add(name="Basis", from_mix=False)
        smile = obj.shape_key_add(name="Smile", from_mix=False)
        smile.data[0].co.z += 0.1
        smile.value = 0.25
        bpy.context.scene.frame_end = 3
        bpy.context.scene.selvedge.substeps = 1  # a different earlier result, to tell them apart
        assert bpy.ops.selvedge.bake_shape_keys() == {"FINISHED"}
        bpy.context.scene.frame_end = LAST
        bpy.context.scene.selvedge.substeps = 4
        obj.active_shape_key_index = 1
    shown_before = evaluated_co(obj, FIRST + 2)
    bpy.context.scene.frame_set(3)
    before = mesh_fingerprint(obj)
    modal, reports = start_modal("REVERT")
    for _ in range(2):
        assert modal.modal(bpy.context, fake_event("TIMER")) == {"RUNNING_MODAL"}
    shown = evaluated_co(obj)
    assert np.abs(shown - shown_before).max() > 0.01  # the preview is on screen...
    if previous == "none":
        np.testing.assert_allclose(shown, reference[2], rtol=0, atol=ATOL)
    assert modal.modal(bpy.context, fake_event("ESC", "PRESS")) == {"CANCELLED"}
    assert reports == [({"WARNING"}, "Selvedge preview cancelled; the scene is as it was")]
    assert mesh_fingerprint(obj) == before  # ...and gone without a trace
    np.testing.assert_array_equal(evaluated_co(obj, FIRST + 2), shown_before)
    from selvedge.operators import overlay

    assert overlay.preview_stats(obj) is None


def test_running_to_the_end_finishes_like_execute_and_fills_the_panel(tmp_path):
    from selvedge.panels.sidebar import SELVEDGE_PT_diagnostics

    obj = make_cloth()
    reference, sidecar = reference_bake(obj, tmp_path)
    modal, reports = start_modal("REVERT")
    results = [modal.modal(bpy.context, fake_event("TIMER")) for _ in range(LAST - FIRST)]
    assert results == [{"RUNNING_MODAL"}] * (LAST - FIRST - 1) + [{"FINISHED"}]
    assert reports == [({"INFO"}, f"Selvedge preview: {LAST - FIRST + 1} frame(s) on 1 object(s)")]
    for frame in (FIRST, 4, LAST):
        np.testing.assert_allclose(evaluated_co(obj, frame), reference[frame - FIRST], rtol=0, atol=ATOL)
    # The panel shows the last preview frame's solver statistics: those the bake's sidecar recorded.
    last = sidecar["frames"][-1]
    labels = []
    layout = SimpleNamespace(
        label=lambda text="", icon="NONE": labels.append(text),
        column=lambda **k: layout,
        operator=lambda *a, **k: SimpleNamespace(),
    )
    SELVEDGE_PT_diagnostics.draw(SimpleNamespace(layout=layout), SimpleNamespace(object=obj, scene=bpy.context.scene))
    assert labels[0] == (
        f"Preview frame {LAST}: max strain {100 * last['strain_max']:.2f}%, P95 {100 * last['strain_p95']:.2f}%"
    )
    assert labels[1].startswith("Preview: ") and labels[1].endswith(" ms/frame")
    assert labels[2:] == ["Baked to shape keys", "No bake statistics yet"]


def test_the_operator_modal_delegates_and_esc_before_any_frame_keeps_nothing(tmp_path):
    from selvedge.operators.preview_ops import PreviewModal, PreviewRun, SELVEDGE_OT_simulate_preview

    obj = make_cloth()
    before = mesh_fingerprint(obj)
    reports = []
    operator = SimpleNamespace(report=lambda level, text: reports.append((level, text)))
    operator._modal = PreviewModal(PreviewRun(bpy.context, "KEEP"), operator.report)
    assert SELVEDGE_OT_simulate_preview.modal(operator, bpy.context, fake_event("ESC", "PRESS")) == {"CANCELLED"}
    assert reports == [({"WARNING"}, "Selvedge preview cancelled before the first frame; nothing kept")]
    assert mesh_fingerprint(obj) == before


def test_bad_input_is_reported_and_changes_nothing():
    obj = make_cloth()
    obj.selvedge.pin_group = "missing"
    before = mesh_fingerprint(obj)
    with pytest.raises(RuntimeError, match="vertex group 'missing' does not exist"):
        bpy.ops.selvedge.simulate_preview()
    assert mesh_fingerprint(obj) == before
    obj.selvedge.role = "NONE"
    assert not bpy.ops.selvedge.simulate_preview.poll()


def test_the_shown_frame_never_feeds_back_into_the_simulation(tmp_path):
    """Pins driven by an animated shape key move in object space: if the temporary key that shows
    the last frame were read as the next frame's pin targets, the pins would be offset twice."""
    obj = make_cloth()
    group = obj.vertex_groups["pins"].index
    pinned = [v.index for v in obj.data.vertices if any(g.group == group for g in v.groups)]
    obj.shape_key_add(name="Basis", from_mix=False)
    lift = obj.shape_key_add(name="Lift", from_mix=False)
    for i in pinned:
        lift.data[i].co.z += 0.2
    for frame, value in ((FIRST, 0.0), (LAST, 1.0)):
        lift.value = value
        lift.keyframe_insert("value", frame=frame)
    reference, _ = reference_bake(obj, tmp_path)
    assert np.abs(reference[-1][pinned] - reference[0][pinned]).max() > 0.19
    assert bpy.ops.selvedge.simulate_preview() == {"FINISHED"}
    blocks = obj.data.shape_keys.key_blocks
    for frame in range(FIRST, LAST + 1):
        baked = np.empty(3 * len(obj.data.vertices), dtype=np.float32)
        blocks[f"Selvedge.{frame:04d}"].data.foreach_get("co", baked)
        np.testing.assert_array_equal(baked.reshape(-1, 3), reference[frame - FIRST])
