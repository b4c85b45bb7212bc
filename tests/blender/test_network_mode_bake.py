"""The scene's learned-network mode drives the shipped ONNX model through a real bake (bpy module).

The reference is the Python API run by hand on the same arrays (solver.Cloth + models.coupling.attach):
the bake must give the same positions, keep pins exact, and record the network's per-frame
diagnostics and its execution provider in the sidecar.
"""

import json

import bpy
import numpy as np
import pytest
from blender_scenes import fresh_blender

from selvedge import solver
from selvedge.models.coupling import attach
from selvedge.operators import scene_to_solver as s2s
from selvedge.operators.bake.scene_read import cloth_options
from selvedge.solver.io_pc2 import read_pc2

FIRST, LAST = 1, 7
PINNED = [0, 7]


blender = pytest.fixture(autouse=True, name="blender")(fresh_blender)


def grid_cloth(cache_dir):
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=8, y_subdivisions=8, size=1.0, location=(0.0, 0.0, 1.0))
    obj = bpy.context.active_object
    obj.name = "Net"
    obj.selvedge.role = "CLOTH"
    group = obj.vertex_groups.new(name="pins")
    group.add(PINNED, 1.0, "REPLACE")
    obj.selvedge.pin_group = "pins"
    scene = bpy.context.scene
    scene.selvedge.cache_folder = str(cache_dir)
    scene.selvedge.use_scene_frame_range = False
    scene.selvedge.frame_start, scene.selvedge.frame_end = FIRST, LAST
    return obj


def direct_run(obj, mode):
    """Object-space positions per frame from the solver + coupling API on the bake's inputs."""
    scene = bpy.context.scene
    mesh = obj.data
    mesh.calc_loop_triangles()
    tris = np.array([tuple(t.vertices) for t in mesh.loop_triangles], dtype=np.int32)
    uv = mesh.uv_layers.active.data
    uvs = np.array([[tuple(uv[i].uv) for i in t.loops] for t in mesh.loop_triangles], dtype=np.float64)
    local = np.array([tuple(v.co) for v in mesh.vertices], dtype=np.float64)
    world = local + np.array(obj.location)
    pins = np.zeros(len(local))
    pins[PINNED] = 1.0
    cloth = solver.Cloth(
        world,
        tris,
        material=s2s.material_from_settings(obj.selvedge),
        options=cloth_options(obj),
        settings=s2s.solver_settings_from_scene(scene.selvedge, scene.render.fps / scene.render.fps_base),
        pin_weights=pins,
        uvs=uvs,
    )
    coupling = attach(cloth, mode=mode) if mode != "off" else None
    out = [local]
    for _ in range(FIRST + 1, LAST + 1):
        (coupling or cloth).step(pin_targets=world)
        out.append(cloth.positions - np.array(obj.location))
    return np.array(out), coupling


@pytest.mark.parametrize("scene_mode, api_mode", [("ACCELERATION", "B"), ("RESIDUAL", "residual")])
def test_network_bake_equals_the_api_keeps_pins_and_records_the_network(tmp_path, scene_mode, api_mode):
    obj = grid_cloth(tmp_path / "cache")
    bpy.context.scene.selvedge.network_mode = "OFF"
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    pure, _ = read_pc2(tmp_path / "cache" / "Net.pc2")
    bpy.context.scene.selvedge.network_mode = scene_mode
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    baked, header = read_pc2(tmp_path / "cache" / "Net.pc2")
    assert header.num_samples == LAST - FIRST + 1

    expected, coupling = direct_run(obj, api_mode)
    error = float(np.abs(baked - expected).max())
    print(
        f"{scene_mode}: max |bake - API| = {error:.3g} m, max |network - pure XPBD| = "
        f"{float(np.abs(baked - pure).max()):.3g} m"
    )
    assert error <= 1e-6  # float32 cache of the same float64 computation
    assert np.abs(baked[:, PINNED] - expected[0, PINNED]).max() <= 1e-6  # pins stay exactly on their targets
    assert np.abs(baked - pure).max() > 1e-5  # the network really changed the motion

    sidecar = json.loads((tmp_path / "cache" / "Net.json").read_text())
    network = sidecar["network"]
    assert network["mode"] == api_mode
    assert "ExecutionProvider" in network["events"][0]
    assert len(network["frames"]) == LAST - FIRST
    r_proj = [f["r_proj"] for f in network["frames"]]
    assert r_proj == pytest.approx([r.r_proj for r in coupling.history], rel=1e-9)
    assert all(np.isfinite(r_proj)) and all(f["network_active"] for f in network["frames"])
