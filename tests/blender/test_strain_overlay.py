"""Strain overlay: colour mapping, the data it draws, and its draw handler, with the real bpy module.

Headless Blender has no GPU context, so the batches are not drawn; what they would be given
(world-space line endpoints and colours) is checked against Blender's own evaluation: the
evaluated mesh played back by the Mesh Cache modifier, measured edge by edge with ``mathutils``.
"""

import json
import math

import bpy
import numpy as np
import pytest
from blender_scenes import fresh_blender

import selvedge
from selvedge.operators import overlay

FIRST, LAST = 1, 5


blender = pytest.fixture(autouse=True, name="blender")(fresh_blender)


def make_cloth(tmp_path):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FIRST, LAST
    scene.frame_set(FIRST)
    scene.selvedge.substeps = 2
    scene.selvedge.cache_folder = str(tmp_path / "cache")
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=4, y_subdivisions=4, size=1.0, calc_uvs=True)
    obj = bpy.context.object
    obj.name = "Cloth"
    obj.rotation_euler = (math.radians(20), 0.0, math.radians(30))
    obj.location = (0.5, -0.25, 1.0)
    obj.scale = (1.5, 1.5, 1.5)
    obj.vertex_groups.new(name="pins").add([0, 4], 1.0, "REPLACE")
    obj.selvedge.role = "CLOTH"
    obj.selvedge.pin_group = "pins"
    obj.selvedge.material_preset = "jersey_knit"  # stretchy: some edges pass the red strain
    return obj


def evaluated_world(obj, frame):
    """World-space positions of Blender's evaluated mesh at ``frame``, vertex by vertex with mathutils."""
    bpy.context.scene.frame_set(frame)
    obj_eval = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = obj_eval.to_mesh()
    try:
        return [obj_eval.matrix_world @ v.co for v in mesh.vertices]
    finally:
        obj_eval.to_mesh_clear()


def reference_strain(obj, frame):
    """Per-edge strain measured on the evaluated mesh against the first frame's edge lengths."""
    rest = evaluated_world(obj, FIRST)
    now = evaluated_world(obj, frame)
    edges = [tuple(e.vertices) for e in obj.data.edges]
    return np.array([(now[b] - now[a]).length / (rest[b] - rest[a]).length - 1.0 for a, b in edges]), now, edges


def test_strain_colours_follow_the_documented_ramp():
    red = 0.04
    strain = np.array([-0.5, 0.0, 0.25 * red, 0.5 * red, 0.75 * red, red, 3 * red, 0.125 * red])
    rgba = overlay.strain_colors(strain, red)
    assert rgba.dtype == np.float32 and rgba.shape == (8, 4)
    blue, cyan, green, yellow, redc = (
        [0.10, 0.30, 1.00],
        [0.00, 0.85, 0.90],
        [0.10, 0.85, 0.15],
        [0.95, 0.85, 0.05],
        [1.00, 0.10, 0.05],
    )
    expected = [blue, blue, cyan, green, yellow, redc, redc, [(b + c) / 2 for b, c in zip(blue, cyan)]]
    np.testing.assert_allclose(rgba[:, :3], expected, atol=1e-6)
    assert (rgba[:, 3] == 1).all()


def test_overlay_data_after_a_cache_bake_matches_blenders_evaluated_mesh(tmp_path):
    obj = make_cloth(tmp_path)
    assert overlay.overlay_geometry(obj, LAST) is None  # nothing baked yet: nothing to draw
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    record = overlay.record_for(obj)
    assert record.source == "cache" and record.first == FIRST and record.count == LAST - FIRST + 1
    for frame in (FIRST, 3, LAST):
        strain, world, edges = reference_strain(obj, frame)
        np.testing.assert_allclose(record.strain[frame - FIRST], strain, atol=2e-5)
        bpy.context.scene.frame_set(frame)
        coords, colors = overlay.overlay_geometry(obj, frame, red_strain=0.02)
        expected = np.array([world[i] for edge in edges for i in edge])
        np.testing.assert_allclose(coords, expected, atol=2e-6)
        np.testing.assert_allclose(colors, np.repeat(overlay.strain_colors(strain, 0.02), 2, axis=0), atol=1e-4)
    last_strain = reference_strain(obj, LAST)[0]
    assert last_strain.max() > 0.02  # the last frame has red edges, and the sidecar agrees on the worst one
    sidecar = json.loads((tmp_path / "cache" / "Cloth.json").read_text())
    assert abs(sidecar["frames"][-1]["strain_max"] - last_strain.max()) < 1e-4
    # Outside the baked range the overlay holds the first / last frame, like the cache playback.
    np.testing.assert_array_equal(overlay.overlay_geometry(obj, LAST + 10)[1], overlay.overlay_geometry(obj, LAST)[1])

    # A new bake replaces the file: the overlay reloads it.
    bpy.context.scene.selvedge.substeps = 8
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    reloaded = overlay.record_for(obj)
    assert reloaded is not record
    np.testing.assert_allclose(reloaded.strain[-1], reference_strain(obj, LAST)[0], atol=2e-5)
    assert np.abs(reloaded.strain[-1] - record.strain[-1]).max() > 1e-4


def test_a_preview_feeds_the_overlay_and_a_revert_restores_the_bakes_data(tmp_path):
    from types import SimpleNamespace

    from selvedge.operators.preview_ops import PreviewModal, PreviewRun

    obj = make_cloth(tmp_path)
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    cached = overlay.record_for(obj)
    bpy.context.scene.selvedge.substeps = 3  # the preview differs from the bake
    modal = PreviewModal(PreviewRun(bpy.context, "REVERT"), lambda *a: None)
    for k in (1, 2):
        assert modal.modal(bpy.context, SimpleNamespace(type="TIMER", value="NOTHING")) == {"RUNNING_MODAL"}
        record = overlay.record_for(obj)
        assert record.source == "preview" and record.count == k + 1
        # What the overlay draws at the current frame is what the viewport shows (the live preview key).
        assert bpy.context.scene.frame_current == FIRST + k
        shown = evaluated_world(obj, FIRST + k)
        coords, _ = overlay.overlay_geometry(obj, FIRST + k)
        np.testing.assert_allclose(coords, [shown[i] for e in obj.data.edges for i in e.vertices], atol=2e-6)
    assert np.abs(record.strain[2] - cached.strain[2]).max() > 1e-5
    assert modal.modal(bpy.context, SimpleNamespace(type="ESC", value="PRESS")) == {"CANCELLED"}
    assert overlay.record_for(obj) is cached
    # A finished preview is newer than the cache: it wins until the next bake.
    assert bpy.ops.selvedge.simulate_preview() == {"FINISHED"}
    assert overlay.record_for(obj).source == "preview"
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    assert overlay.record_for(obj).source == "cache"


def test_the_toggle_adds_and_removes_the_draw_handler_and_unregister_removes_it():
    assert overlay._HANDLE is None and not overlay.is_enabled()
    assert bpy.ops.selvedge.strain_overlay() == {"FINISHED"}
    handle = overlay._HANDLE
    assert handle is not None and overlay.is_enabled()
    assert bpy.ops.selvedge.strain_overlay(action="ON") == {"FINISHED"}
    assert overlay._HANDLE is handle  # idempotent: one handler, never two
    assert bpy.ops.selvedge.strain_overlay() == {"FINISHED"}
    assert overlay._HANDLE is None
    assert bpy.ops.selvedge.strain_overlay(action="ON") == {"FINISHED"}
    assert overlay._HANDLE is not None
    # Headless: the callback returns before touching the GPU module (no context to draw in).
    assert bpy.app.background and overlay._draw() is None and not overlay._BATCHES
    selvedge.unregister()
    try:
        assert overlay._HANDLE is None and not overlay._RECORDS
        assert not hasattr(bpy.types.WindowManager, "selvedge_overlay_red_strain")
    finally:
        selvedge.register()
    assert overlay._HANDLE is None  # registering again does not switch it on by itself
