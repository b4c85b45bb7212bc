"""Blender scenes and the reference solver run shared by the bpy tests.

Plain functions, no fixtures. ``bpy`` and ``selvedge`` are imported inside the functions:
``tests/blender/test_extension_package.py`` imports this module in a child process (``python -S``) where
nothing but the standard library and NumPy may be needed at import time, and where ``selvedge``
is the installed extension.
"""

import contextlib
import math

import numpy as np


def fresh_blender():
    """Body of the autouse ``blender`` fixtures: factory settings and the add-on registered."""
    import bpy

    import selvedge

    bpy.ops.wm.read_factory_settings(use_empty=True)
    selvedge.register()
    yield
    selvedge.unregister()
    bpy.ops.wm.read_factory_settings(use_empty=True)


def cache_dir(tmp_path):
    """Body of the ``cache_dir`` fixtures: the scene's cache folder set to ``tmp_path / "cache"``."""
    import bpy

    folder = tmp_path / "cache"
    bpy.context.scene.selvedge.cache_folder = str(folder)
    return folder


@contextlib.contextmanager
def factory_scene():
    """Factory settings with the add-on registered; yields the scene, then factory settings again."""
    import bpy

    import selvedge

    bpy.ops.wm.read_factory_settings(use_empty=True)
    selvedge.register()
    try:
        yield bpy.context.scene
    finally:
        selvedge.unregister()
        bpy.ops.wm.read_factory_settings(use_empty=True)


def save_shot(path, first):
    """Save the open scene as a shot .blend whose file says other settings than a job asks for
    (10 substeps, frames up to 20), so the job's own settings must win; current frame ``first``."""
    import bpy

    scene = bpy.context.scene
    scene.selvedge.substeps = 10
    scene.frame_end = 20
    scene.frame_set(first)
    bpy.ops.wm.save_as_mainfile(filepath=str(path))


def mesh_co(mesh):
    co = np.empty(3 * len(mesh.vertices), dtype=np.float32)
    mesh.vertices.foreach_get("co", co)
    return co.reshape(-1, 3)


def evaluated_co(obj, frame=None):
    """Object-space vertex positions of the evaluated object at ``frame`` (Blender's own result);
    at the current frame when ``frame`` is None."""
    import bpy

    if frame is not None:
        bpy.context.scene.frame_set(frame)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    obj_eval = obj.evaluated_get(depsgraph)
    mesh = obj_eval.to_mesh()
    try:
        return mesh_co(mesh).copy()
    finally:
        obj_eval.to_mesh_clear()


def world_matrix(obj, frame):
    import bpy

    bpy.context.scene.frame_set(frame)
    return np.array(obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).matrix_world, dtype=np.float64)


def pin_two_corners(obj, preset="silk"):
    """Pin the (-x,-y) and (+x,-y) corners through a "pins" vertex group; make ``obj`` a cloth."""
    co = mesh_co(obj.data)
    corners = [int(np.argmin(co[:, 0] + co[:, 1])), int(np.argmin(-co[:, 0] + co[:, 1]))]  # (-x,-y) and (+x,-y)
    obj.vertex_groups.new(name="pins").add(corners, 1.0, "REPLACE")
    obj.selvedge.role = "CLOTH"
    obj.selvedge.pin_group = "pins"
    obj.selvedge.material_preset = preset
    return corners


def grid_cloth(
    first,
    last,
    *,
    name="Cloth",
    current=None,
    substeps=4,
    angle=30.0,
    start=(0.5, -0.25, 1.0),
    end=(0.62, -0.25, 1.05),
    preset="silk",
):
    """The pinned grid cloth: 5x5 vertices rotated by ``angle`` degrees about z, its location keyed
    at ``start`` on ``first`` and (unless ``end`` is None) at ``end`` on ``last``; two pinned corners.

    Sets the scene's frame range and substeps, and the current frame (``first`` unless ``current``).
    Returns ``(obj, corners)``.
    """
    import bpy

    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = first, last
    scene.frame_set(first if current is None else current)
    scene.selvedge.substeps = substeps
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=4, y_subdivisions=4, size=1.0, calc_uvs=True)
    obj = bpy.context.object
    obj.name = name
    obj.rotation_euler = (0.0, 0.0, math.radians(angle))
    obj.location = start
    obj.keyframe_insert("location", frame=first)
    if end is not None:
        obj.location = end
        obj.keyframe_insert("location", frame=last)
    return obj, pin_two_corners(obj, preset)


def reference_run(obj, pinned, first, last, weight_maps=None, hooked=None, unit=1.0):
    """The solver run by hand on the same inputs, frames ``first``..``last``.

    Returns ``(out, world_out, world, cloth)``: object-space float32 positions per frame, the
    solver's world positions per frame, the pin targets (world) per frame and the solver.
    ``hooked``: ``(vertex, empty)`` for a vertex moved by a Hook modifier bound at the first
    frame; its target is computed from the empty's matrices, E(f) E(first)^-1 x_rest.
    """
    import bpy

    from selvedge import solver
    from selvedge.operators import scene_to_solver as s2s
    from selvedge.operators.bake.scene_read import cloth_options

    scene = bpy.context.scene
    mesh = obj.data
    mesh.calc_loop_triangles()
    tris = np.array([tuple(t.vertices) for t in mesh.loop_triangles], dtype=np.int32)
    uv = mesh.uv_layers.active.data
    uvs = np.array([[tuple(uv[l].uv) for l in t.loops] for t in mesh.loop_triangles], dtype=np.float64)
    pins = np.zeros(len(mesh.vertices))
    pins[pinned] = 1.0
    local = mesh_co(mesh).astype(np.float64)
    homogeneous = np.c_[local, np.ones(len(local))]
    matrices = {f: world_matrix(obj, f) for f in range(first, last + 1)}
    world = {f: (homogeneous @ m.T)[:, :3] for f, m in matrices.items()}
    if hooked is not None:
        vertex, empty = hooked
        hook = {f: world_matrix(empty, f) for f in range(first, last + 1)}
        for f in range(first, last + 1):
            world[f] = world[f].copy()
            moved = hook[f] @ np.linalg.inv(hook[first]) @ np.r_[world[first][vertex], 1.0]
            world[f][vertex] = moved[:3]
    cloth = solver.Cloth(
        world[first] * unit,
        tris,
        material=s2s.material_from_settings(obj.selvedge),
        options=cloth_options(obj),
        settings=s2s.solver_settings_from_scene(scene.selvedge, scene.render.fps / scene.render.fps_base),
        pin_weights=pins,
        uvs=uvs,
        weight_maps=weight_maps,
    )
    out = {first: local.astype(np.float32)}
    world_out = {first: world[first]}
    for f in range(first + 1, last + 1):
        cloth.step(pin_targets=world[f] * unit)
        x = np.c_[cloth.positions / unit, np.ones(len(local))] @ np.linalg.inv(matrices[f]).T
        out[f] = x[:, :3].astype(np.float32)
        world_out[f] = cloth.positions / unit
    return out, world_out, world, cloth


def stacked_reference_run(obj, pinned, first, last):
    """``reference_run`` as a (F, N, 3) array of object-space float32 positions, and the pin targets."""
    out, _, world, _ = reference_run(obj, pinned, first, last)
    return np.stack([out[f] for f in range(first, last + 1)]), world
