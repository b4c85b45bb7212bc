"""Blender's own Cloth modifier and Selvedge on the same scene, in one process (the ``bpy`` module).

Scene: a horizontal square sheet (``--size`` m, default 1), ``--grid`` x ``--grid`` vertices
(default 64 x 64), pinned at the two corners of one edge through a vertex group ("pins"), falling
under gravity for ``--frames`` frames (default 100) at 24 fps.

* Blender Cloth: a Cloth modifier with its defaults (the Cotton-like preset: 0.3 kg vertex mass,
  quality 5, tension/compression 15, shear 5, bending 0.5), pin group = "pins", point cache over the
  frame range; simulated by stepping ``scene.frame_set`` frame by frame from the first frame, each
  step timed (the cloth is solved inside the depsgraph evaluation that ``frame_set`` triggers).
* Selvedge: role Cloth, pin group "pins", its default cotton preset and the scene defaults
  (substeps, iterations, serial solve), baked with the cancellable PC2 bake job
  (:class:`operators.bake.CacheBake`) one frame per ``step()``, each step timed, after a 3-frame
  warm-up bake of the same scene so JIT compilation is not counted.

Strain is measured the same way for both, here, not by either solver: after the run, the
scene is stepped again and each frame's evaluated mesh (the Cloth modifier's point cache, or the
Mesh Cache modifier playing Selvedge's PC2) is read in world space; every mesh edge's engineering
strain (L - L0) / L0 is taken against the edge lengths of the undeformed sheet.

One JSON line per solver::

    {"solver", "scene", "vertices", "edges", "frames", "ms_per_frame" (mean of timed steps),
     "ms_per_frame_median", "strain_max" (all edges, all frames), "strain_p95" (worst frame's P95),
     "strain_max_last", "strain_p95_last" (last frame), "compression_max", "compression_p95" (worst frame's
     P95 of -strain), "strain_max_outside_pin_rings" (edges with both ends over two edges from a pin),
     "settings", "blender", ...}

then one ``"case": "summary"`` line per scene run by both: Selvedge's ms/frame as a fraction of
Blender's in this run, and both solvers' strain figures side by side. ``--write-docs`` writes the
table into docs/benchmarks.md (section ``bench_vs_blender_cloth``).

Garment-on-body scene (``--scene garment``; both scenes run by default): a static body made of
primitives in one closed mesh object "Body" (a capped cylinder torso, radius 0.2 m, 0.7-1.3 m,
and a UV-sphere head, radius 0.12 m, centred at 1.45 m) and a horizontal square sheet
(``--garment-size`` m, default 1; ``--garment-grid`` vertices a side, default 48) centred 0.08 m
above the head, unpinned, draping over head and shoulders for the same frames.

* Blender Cloth: the body gets a Collision modifier (its defaults: outer thickness 0.02 m,
  friction 5); the sheet a Cloth modifier with its defaults (collisions on, distance 0.015 m).
* Selvedge: the body has the role Collider with the Mesh proxy (its evaluated mesh, read each
  frame) and the default collider thickness/friction; the sheet role Cloth with the defaults.

Contact is measured the same way for both, here: each frame, every cloth vertex of the evaluated
mesh (world space) is queried against a ``mathutils.bvhtree.BVHTree`` of the body's evaluated
world-space mesh; the signed distance is the distance to the closest surface point, negative when
the vertex is behind the surface (inside the body: the offset to the closest point points against
that face's outward normal). The garment lines add ``penetrating_max`` (most vertices inside the
body in any frame), ``penetrating_last``, ``penetrating_frames`` (frames with any), ``min_distance_m``
(all frames), ``min_distance_last_m``, ``contact_last`` (vertices within 0.05 m of the body at the last
frame, to show the cloth rests on it; Blender keeps its 0.015 + 0.02 m collision gap) and
``lowest_z_last_m``.

Self-collision (``--self-collision``): each scene is run by each solver twice, self-collision off
then on (scene ``<scene>_self``: Blender's ``use_self_collision`` with its default distance and
quality, Selvedge's Self Collision, which steps the cloth in a ``CollisionWorld``), and every line
adds the crossing triangle pairs of each frame's evaluated mesh (``devtools/cloth_checks.py``:
``BVHTree.overlap``, pairs sharing a vertex left out): ``crossings_max``, ``crossings_last``,
``frames_with_crossings``, ``crossings_per_frame``. The summary lines and the docs section are in
``bench/_vs_blender_self_collision.py``.

    .venv/bin/python bench/bench_vs_blender_cloth.py                  # 64x64 grid and the garment, 100 frames
    .venv/bin/python bench/bench_vs_blender_cloth.py --self-collision --scene garment --frames 48
    .venv/bin/python bench/bench_vs_blender_cloth.py --scene garment --garment-grid 32 --frames 40
    .venv/bin/python bench/bench_vs_blender_cloth.py --grid 16 --frames 10
    .venv/bin/python bench/bench_vs_blender_cloth.py --only selvedge --substeps 40
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "devtools"))
sys.path.insert(0, str(ROOT / "bench"))

import bpy
import numpy as np
from _vs_blender_self_collision import self_collision_summaries, write_self_collision_docs
from cloth_checks import crossing_pairs
from garment_scene import GARMENT_GAP, HEAD_RADIUS, HEAD_Z, TORSO_RADIUS, TORSO_Z0, TORSO_Z1
from selvedge_import import import_selvedge

selvedge = import_selvedge()
from selvedge.solver.settings import SOLVE_MODES

# ----------------------------------------------------------------------------------------------
# Scene and measurement (shared by both solvers)
_registered = [False]


def reset():
    if _registered[0]:
        selvedge.unregister()
        _registered[0] = False
    bpy.ops.wm.read_factory_settings(use_empty=True)


def new_scene(grid: int, size: float, frames: int):
    """Empty factory scene with the pinned sheet; returns the object."""
    reset()
    selvedge.register()
    _registered[0] = True
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.frame_set(1)
    bpy.ops.mesh.primitive_grid_add(
        x_subdivisions=grid - 1, y_subdivisions=grid - 1, size=size, calc_uvs=True, location=(0.0, 0.0, 1.0)
    )
    obj = bpy.context.object
    obj.name = "Sheet"
    co = local_positions(obj.data)
    corners = [int(np.argmin(co[:, 0] - co[:, 1])), int(np.argmax(co[:, 0] + co[:, 1]))]  # (-x,+y), (+x,+y)
    obj.vertex_groups.new(name="pins").add(corners, 1.0, "REPLACE")
    return obj


def local_positions(mesh) -> np.ndarray:
    co = np.empty(3 * len(mesh.vertices), dtype=np.float32)
    mesh.vertices.foreach_get("co", co)
    return co.reshape(-1, 3).astype(np.float64)


def mesh_edges(mesh) -> np.ndarray:
    e = np.empty(2 * len(mesh.edges), dtype=np.int32)
    mesh.edges.foreach_get("vertices", e)
    return e.reshape(-1, 2)


def evaluated_world(obj) -> np.ndarray:
    depsgraph = bpy.context.evaluated_depsgraph_get()
    obj_eval = obj.evaluated_get(depsgraph)
    mesh = obj_eval.to_mesh()
    try:
        local = local_positions(mesh)
    finally:
        obj_eval.to_mesh_clear()
    m = np.array(obj_eval.matrix_world, dtype=np.float64)
    return local @ m[:3, :3].T + m[:3, 3]


def edge_strain(world: np.ndarray, edges: np.ndarray, rest: np.ndarray) -> np.ndarray:
    return np.linalg.norm(world[edges[:, 1]] - world[edges[:, 0]], axis=1) / rest - 1.0


def pin_ring_edges(obj, edges: np.ndarray) -> np.ndarray:
    """Edges with an end at most two edges from a vertex of the "pins" group (its 2-ring): a point
    pin's strain is singular on any mesh, so the max is also reported without them."""
    group = obj.vertex_groups.get("pins")
    near = np.zeros(len(obj.data.vertices), dtype=bool)
    if group is not None:
        for v in obj.data.vertices:
            if any(g.group == group.index and g.weight > 0 for g in v.groups):
                near[v.index] = True
    for _ in range(2):
        grown = near.copy()
        grown[edges[near[edges[:, 0]], 1]] = True
        grown[edges[near[edges[:, 1]], 0]] = True
        near = grown
    return near[edges[:, 0]] | near[edges[:, 1]]


def measure(obj, frames: int, rest_world: np.ndarray, body=None, crossings: bool = False) -> dict:
    """Strain statistics of the evaluated mesh over frames 2..frames (frame 1 is the rest state),
    plus, with ``body``, penetration and distance of the cloth's vertices to the body's surface, and
    with ``crossings`` the crossing triangle pairs of each frame (``cloth_checks.crossing_pairs``)."""
    edges = mesh_edges(obj.data)
    rest = np.linalg.norm(rest_world[edges[:, 1]] - rest_world[edges[:, 0]], axis=1)
    ring = pin_ring_edges(obj, edges)
    per_frame = []
    worst_compression = 0.0
    compression_p95 = 0.0
    outside_max = 0.0
    contact = []
    crossed = []
    for frame in range(2, frames + 1):
        bpy.context.scene.frame_set(frame)
        world = evaluated_world(obj)
        if crossings:
            crossed.append(crossing_pairs([obj], bpy.context.evaluated_depsgraph_get()))
        s = edge_strain(world, edges, rest)
        per_frame.append((float(s.max()), float(np.percentile(s, 95))))
        worst_compression = max(worst_compression, float(-s.min()))
        compression_p95 = max(compression_p95, float(np.percentile(-s, 95)))
        outside_max = max(outside_max, float(s[~ring].max()))
        if body is not None:
            contact.append(signed_distance(world, body_bvh(body)))
    out = {
        "edges": int(len(edges)),
        "strain_max": max(m for m, _ in per_frame),
        "strain_p95": max(p for _, p in per_frame),
        "strain_max_last": per_frame[-1][0],
        "strain_p95_last": per_frame[-1][1],
        "compression_max": worst_compression,
        "compression_p95": compression_p95,
        "strain_max_outside_pin_rings": outside_max,
    }
    if crossings:
        out.update(
            crossings_max=max(crossed),
            crossings_last=crossed[-1],
            frames_with_crossings=sum(1 for n in crossed if n),
            crossings_per_frame=crossed,
        )
    if body is not None:
        inside = [int((d < 0.0).sum()) for d in contact]
        out.update(
            {
                "penetrating_max": max(inside),
                "penetrating_last": inside[-1],
                "penetrating_frames": sum(1 for n in inside if n),
                "min_distance_m": min(float(d.min()) for d in contact),
                "min_distance_last_m": float(contact[-1].min()),
                "contact_last": int((contact[-1] < CONTACT_BAND_M).sum()),
                "lowest_z_last_m": float(evaluated_world(obj)[:, 2].min()),
            }
        )
    return out


#: A vertex this close to the body (metres) counts as resting on it (``contact_last``).
CONTACT_BAND_M = 0.05


def body_bvh(body):
    """BVH tree of the body's evaluated mesh in world space (rebuilt each frame: it may be animated)."""
    from mathutils.bvhtree import BVHTree

    world = evaluated_world(body)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    body_eval = body.evaluated_get(depsgraph)
    mesh = body_eval.to_mesh()
    try:
        mesh.calc_loop_triangles()
        tris = np.empty(3 * len(mesh.loop_triangles), dtype=np.int32)
        mesh.loop_triangles.foreach_get("vertices", tris)
    finally:
        body_eval.to_mesh_clear()
    return BVHTree.FromPolygons(world.tolist(), tris.reshape(-1, 3).tolist())


#: Three fixed directions off every axis and diagonal, for the inside test (ray parity).
_RAYS = tuple(
    tuple(float(c) for c in np.array(r) / np.linalg.norm(r))
    for r in ([0.2873, 0.1947, 0.9378], [-0.8123, 0.4711, 0.1736], [0.3371, -0.9088, -0.2457])
)


def signed_distance(points: np.ndarray, bvh) -> np.ndarray:
    """Distance of each point to the closest point of the body's surface, negative inside the body.

    The side comes from the closest face's outward normal when the closest point lies inside that
    face (the offset is along the normal); when it lies on an edge or a vertex (a rim, a pole) the
    face normal cannot tell, and the side comes from the parity of a ray's crossings of the closed
    body mesh instead.
    """
    out = np.empty(len(points))
    for i, p in enumerate(points.tolist()):
        location, normal, _, distance = bvh.find_nearest(p)
        if distance <= 0.0:
            out[i] = 0.0
            continue
        along = (
            (p[0] - location[0]) * normal[0] + (p[1] - location[1]) * normal[1] + (p[2] - location[2]) * normal[2]
        ) / distance
        inside = along < 0.0 if abs(along) > 0.999 else _inside(p, bvh)
        out[i] = -distance if inside else distance
    return out


def _inside(p, bvh) -> bool:
    """Ray parity, by majority over three directions: one ray that grazes an edge or a vertex of the
    body counts that crossing twice or not at all (seen: a vertex 2 cm outside the torso reported
    2 cm inside for one frame)."""
    from mathutils import Vector

    votes = 0
    for ray in _RAYS:
        origin, direction, crossings = Vector(p), Vector(ray), 0
        for _ in range(256):  # the body has far fewer layers; the cap only guards against a stuck ray
            hit, _, _, _ = bvh.ray_cast(origin, direction)
            if hit is None:
                break
            crossings += 1
            origin = hit + 1e-5 * direction  # past the face (BVH trees work in single precision)
        votes += crossings % 2
    return votes >= 2


def timing(ms: list[float]) -> dict:
    return {
        "ms_per_frame": statistics.fmean(ms),
        "ms_per_frame_median": statistics.median(ms),
        "ms_per_frame_max": max(ms),  # one slow frame (a kernel compiled for a larger size) moves the mean
        "ms_total": sum(ms),
    }


# ----------------------------------------------------------------------------------------------
# Blender Cloth
def play_blender_cloth(mod, frames: int) -> tuple[list, dict]:
    """Play the Cloth modifier's point cache frame by frame: (ms per frame, the settings used)."""
    mod.point_cache.frame_start, mod.point_cache.frame_end = 1, frames
    scene = bpy.context.scene
    scene.frame_set(1)
    bpy.context.evaluated_depsgraph_get()
    ms = []
    for frame in range(2, frames + 1):
        t0 = time.perf_counter()
        scene.frame_set(frame)
        bpy.context.evaluated_depsgraph_get()
        ms.append(1e3 * (time.perf_counter() - t0))
    s = mod.settings
    settings = {
        "quality": s.quality,
        "mass_kg_per_vertex": s.mass,
        "tension": s.tension_stiffness,
        "compression": s.compression_stiffness,
        "shear": s.shear_stiffness,
        "bending": s.bending_stiffness,
        "air_damping": s.air_damping,
        "point_cache": mod.point_cache.info,
    }
    return ms, settings


def blender_self_collision(mod, on: bool) -> dict:
    """Switch the Cloth modifier's self-collision (its distance and friction left at their defaults);
    returns the self-collision settings for the JSON line."""
    c = mod.collision_settings
    c.use_self_collision = on
    if not on:
        return {"self_collision": False}
    return {
        "self_collision": True,
        "self_distance_min_m": c.self_distance_min,
        "self_friction": c.self_friction,
        "self_impulse_clamp": c.self_impulse_clamp,
        "collision_quality": c.collision_quality,
    }


def run_blender_cloth(grid: int, size: float, frames: int, self_collision: bool = False, crossings: bool = False):
    obj = new_scene(grid, size, frames)
    rest_world = evaluated_world(obj)
    mod = obj.modifiers.new("Cloth", "CLOTH")
    mod.settings.vertex_group_mass = "pins"
    own = blender_self_collision(mod, self_collision)
    ms, settings = play_blender_cloth(mod, frames)
    settings.update(own)
    return {
        "solver": "blender_cloth",
        **timing(ms),
        **measure(obj, frames, rest_world, crossings=crossings),
        "settings": settings,
    }


def run_blender_cloth_garment(
    grid: int, size: float, frames: int, self_collision: bool = False, crossings: bool = False
) -> dict:
    obj, body = garment_scene(grid, size, frames)
    rest_world = evaluated_world(obj)
    collision = body.modifiers.new("Collision", "COLLISION")
    assert collision.type == "COLLISION"
    mod = obj.modifiers.new("Cloth", "CLOTH")
    own = blender_self_collision(mod, self_collision)
    ms, settings = play_blender_cloth(mod, frames)
    settings.update(own)
    c, b = mod.collision_settings, body.collision
    settings.update(
        collision_quality=c.collision_quality,
        collision_distance_m=c.distance_min,
        body_thickness_outer_m=b.thickness_outer,
        body_friction=b.cloth_friction,
    )
    return {
        "solver": "blender_cloth",
        **timing(ms),
        **measure(obj, frames, rest_world, body, crossings),
        "settings": settings,
    }


# ----------------------------------------------------------------------------------------------
# Garment on a body (shared scene; the body's sizes are devtools/garment_scene.py's, which builds it without Blender)


def garment_scene(grid: int, size: float, frames: int):
    """Empty factory scene with the body and the sheet above it; returns (sheet, body)."""
    import bmesh
    from mathutils import Matrix

    reset()
    selvedge.register()
    _registered[0] = True
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.frame_set(1)
    bm = bmesh.new()
    depth = TORSO_Z1 - TORSO_Z0
    bmesh.ops.create_cone(
        bm,
        cap_ends=True,
        cap_tris=True,
        segments=32,
        radius1=TORSO_RADIUS,
        radius2=TORSO_RADIUS,
        depth=depth,
        matrix=Matrix.Translation((0.0, 0.0, TORSO_Z0 + depth / 2)),
    )
    bmesh.ops.create_uvsphere(
        bm, u_segments=32, v_segments=16, radius=HEAD_RADIUS, matrix=Matrix.Translation((0.0, 0.0, HEAD_Z))
    )
    bmesh.ops.recalc_face_normals(bm, faces=bm.faces)
    mesh = bpy.data.meshes.new("Body")
    bm.to_mesh(mesh)
    bm.free()
    body = bpy.data.objects.new("Body", mesh)
    scene.collection.objects.link(body)
    bpy.ops.mesh.primitive_grid_add(
        x_subdivisions=grid - 1,
        y_subdivisions=grid - 1,
        size=size,
        calc_uvs=True,
        location=(0.0, 0.0, HEAD_Z + HEAD_RADIUS + GARMENT_GAP),
    )
    obj = bpy.context.object
    obj.name = "Sheet"
    bpy.context.view_layer.update()
    return obj, body


#: per-object Selvedge settings the command line changes from their defaults (``--stretch-projection``)
SELVEDGE_OBJECT_SETTINGS: dict = {}
#: per-scene Selvedge settings the command line changes from their defaults (``--stretch-refinements``)
SELVEDGE_SCENE_SETTINGS: dict = {}


def selvedge_garment_scene(
    grid: int, size: float, frames: int, folder: Path, solve_mode: str, substeps: int | None, self_collision=False
):
    obj, body = garment_scene(grid, size, frames)
    obj.selvedge.role = "CLOTH"
    for name, value in SELVEDGE_OBJECT_SETTINGS.items():
        setattr(obj.selvedge, name, value)
    obj.selvedge.use_self_collision = self_collision  # a self-colliding cloth is stepped in a CollisionWorld
    body.selvedge.role = "COLLIDER"
    body.selvedge.collider_proxy = "MESH"
    scene = bpy.context.scene
    scene.selvedge.cache_folder = str(folder)
    scene.selvedge.solve_mode = solve_mode
    if substeps:
        scene.selvedge.substeps = substeps
    for name, value in SELVEDGE_SCENE_SETTINGS.items():
        setattr(scene.selvedge, name, value)
    return obj, body


# ----------------------------------------------------------------------------------------------
# Selvedge
def selvedge_scene(
    grid: int, size: float, frames: int, folder: Path, solve_mode: str, substeps: int | None, self_collision=False
):
    obj = new_scene(grid, size, frames)
    obj.selvedge.role = "CLOTH"
    for name, value in SELVEDGE_OBJECT_SETTINGS.items():
        setattr(obj.selvedge, name, value)
    obj.selvedge.use_self_collision = self_collision
    obj.selvedge.pin_group = "pins"
    scene = bpy.context.scene
    scene.selvedge.cache_folder = str(folder)
    scene.selvedge.solve_mode = solve_mode
    if substeps:
        scene.selvedge.substeps = substeps
    for name, value in SELVEDGE_SCENE_SETTINGS.items():
        setattr(scene.selvedge, name, value)
    return obj


def run_selvedge(
    grid: int,
    size: float,
    frames: int,
    solve_mode: str,
    substeps: int | None = None,
    garment: bool = False,
    self_collision: bool = False,
    crossings: bool = False,
) -> dict:
    from selvedge.operators.bake import CacheBake

    quiet = lambda *a, **k: None
    with tempfile.TemporaryDirectory() as tmp:
        # Warm-up: compile (or load from the JIT cache) every kernel, on the same scene for 3 frames
        # (a tiny sheet, used before, has no level of the stretch limit and runs serial where the
        # real one is coloured: those kernels then compiled inside the timed frames).
        scene = selvedge_garment_scene if garment else selvedge_scene
        scene(grid, size, 3, Path(tmp) / "warmup", solve_mode, substeps, self_collision)
        job = CacheBake(bpy.context, log=quiet)
        while job.step():
            pass
        job.finish()

        made = scene(grid, size, frames, Path(tmp) / "cache", solve_mode, substeps, self_collision)
        obj, body = made if garment else (made, None)
        rest_world = evaluated_world(obj)
        job = CacheBake(bpy.context, log=quiet)
        ms, solver_crossings, scales, untangled = [], [], [], []
        while True:
            t0 = time.perf_counter()
            more = job.step()
            ms.append(1e3 * (time.perf_counter() - t0))
            if job.sim.world is not None:
                solver_crossings.append(job.sim.world.world.last_stats.get("intersections", 0))
                scales.append(job.sim.world.world.last_stats.get("substep_scale", 1))
                untangled.append(job.sim.world.world.last_stats.get("untangled_pairs", 0))
            if not more:
                break
        job.finish()
        solver_strain = [d.strain_max for d in job.sim.runs[0].cloth.history]
        result = {
            "solver": "selvedge",
            **timing(ms),
            **measure(obj, frames, rest_world, body, crossings),
        }
        s, sc = obj.selvedge, bpy.context.scene.selvedge
        result["settings"] = {
            "preset": s.material_preset,
            "substeps": sc.substeps,
            "iterations": sc.iterations,
            "solve_mode": sc.solve_mode,
            "bending_model": s.bending_model,
            "tethers": s.use_tethers,
            "density_kg_m2": s.density_kg_m2,
            "cloth_thickness_m": s.thickness_m,
            "friction": s.friction,
            "self_collision": s.use_self_collision,
            "stretch_projection_steps": s.stretch_projection_steps,
            "compression_limit": s.use_compression_limit,
            "stretch_refinements": sc.stretch_refinements,
        }
        history = job.sim.runs[0].cloth.history
        result["frames_refined"] = sum(d.substep_scale > 1 for d in history)
        result["substeps_mean"] = statistics.fmean(d.substeps for d in history)
        if garment:
            b = body.selvedge
            result["settings"]["collider"] = {
                "proxy": b.collider_proxy,
                "thickness_m": b.collider_thickness_m,
                "friction": b.collider_friction,
            }
        # Cross-check of the measurement: the solver's own worst edge strain (its mesh edges).
        result["solver_reported_strain_max"] = max(solver_strain)
        if solver_crossings:  # the collision world's own count, on the solver's triangles
            result["solver_reported_crossings_max"] = max(solver_crossings)
            # frames the world ran again with more substeps because they crossed (their time is in ms)
            result["frames_run_again"] = sum(k > 1 for k in scales)
            # frames whose crossings the world untangled (crossed pairs undone: see untangle.py)
            result["frames_untangled"] = sum(k > 0 for k in untangled)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scene", default="both", choices=("both", "grid", "garment"))
    parser.add_argument("--grid", type=int, default=64, help="vertices per side (default 64)")
    parser.add_argument("--size", type=float, default=1.0, help="sheet side in metres (default 1)")
    parser.add_argument("--garment-grid", type=int, default=48, help="garment vertices per side (default 48)")
    parser.add_argument("--garment-size", type=float, default=1.0, help="garment side in metres (default 1)")
    parser.add_argument("--frames", type=int, default=100, help="frames, the first being the rest state")
    parser.add_argument("--solve-mode", default="auto", choices=SOLVE_MODES)
    parser.add_argument("--substeps", type=int, help="Selvedge substeps (default: the scene default)")
    parser.add_argument("--only", choices=("blender", "selvedge"), help="run one solver only")
    parser.add_argument(
        "--self-collision",
        action="store_true",
        help="run each scene with self-collision off and on in both solvers, counting crossings per frame",
    )
    parser.add_argument(
        "--stretch-projection", type=int, default=0, help="Selvedge's Stretch Projection steps (default 0: off)"
    )
    parser.add_argument(
        "--limit-compression", action="store_true", help="with --stretch-projection: Selvedge's Limit Compression"
    )
    parser.add_argument(
        "--stretch-refinements",
        type=int,
        default=0,
        help="Selvedge's Stretch Refinements: a stretched frame run again with 2x, 4x... the substeps (default 0: off)",
    )
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args(argv)
    if args.stretch_refinements:
        SELVEDGE_SCENE_SETTINGS["stretch_refinements"] = args.stretch_refinements
    if args.stretch_projection:
        SELVEDGE_OBJECT_SETTINGS["stretch_projection_steps"] = args.stretch_projection
        SELVEDGE_OBJECT_SETTINGS["use_compression_limit"] = args.limit_compression
    base = {
        "frames": args.frames,
        "blender": bpy.app.version_string,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    runs = []
    # With --self-collision each scene runs twice per solver, off then on ("<scene>_self"): the
    # self-collision overhead of each solver is its own ms on over off, in the same run.
    cases = (False, True) if args.self_collision else (False,)
    crossings = args.self_collision
    for sc in cases:
        suffix = "_self" if sc else ""
        if args.scene in ("both", "grid"):
            n, size = args.grid, args.size
            common = {"scene": f"grid{n}_pinned2{suffix}", "vertices": n * n, "size_m": size, **base}
            if args.only in (None, "blender"):
                runs.append((common, lambda n=n, sc=sc: run_blender_cloth(n, args.size, args.frames, sc, crossings)))
            if args.only in (None, "selvedge"):
                runs.append(
                    (
                        common,
                        lambda n=n, sc=sc: run_selvedge(
                            n, args.size, args.frames, args.solve_mode, args.substeps, False, sc, crossings
                        ),
                    )
                )
        if args.scene in ("both", "garment"):
            g, size = args.garment_grid, args.garment_size
            common = {"scene": f"garment{g}_on_body{suffix}", "vertices": g * g, "size_m": size, **base}
            if args.only in (None, "blender"):
                runs.append((common, lambda sc=sc: run_blender_cloth_garment(g, size, args.frames, sc, crossings)))
            if args.only in (None, "selvedge"):
                runs.append(
                    (
                        common,
                        lambda sc=sc: run_selvedge(
                            g, size, args.frames, args.solve_mode, args.substeps, True, sc, crossings
                        ),
                    )
                )
    lines = []
    for common, run in runs:
        result = run()
        lines.append({**common, **result})
        print(json.dumps(lines[-1]), flush=True)
    reset()
    summaries = summary_lines(lines)
    self_summaries = self_collision_summaries(lines) if args.self_collision else []
    for line in summaries + self_summaries:
        print(json.dumps(line), flush=True)
    if args.write_docs:
        command = argv if argv is not None else sys.argv[1:]
        if args.self_collision:  # its own section: the plain comparison's table stays as it was
            write_self_collision_docs(lines, self_summaries, command)
        else:
            write_docs(lines, summaries, command)
    return 0


def summary_lines(lines: list[dict]) -> list[dict]:
    """Per scene run by both solvers: Selvedge against Blender's Cloth in this run (ratios travel
    between machines, milliseconds do not)."""
    out = []
    for scene in dict.fromkeys(line["scene"] for line in lines):
        by = {line["solver"]: line for line in lines if line["scene"] == scene}
        if set(by) != {"blender_cloth", "selvedge"}:
            continue
        b, s = by["blender_cloth"], by["selvedge"]
        line = {
            "case": "summary",
            "scene": scene,
            "vertices": s["vertices"],
            "frames": s["frames"],
            "selvedge_ms_fraction_of_blender": s["ms_per_frame"] / b["ms_per_frame"],
            "blender_ms_over_selvedge_ms": b["ms_per_frame"] / s["ms_per_frame"],
        }
        for key in ("strain_p95", "strain_max_outside_pin_rings", "strain_max", "compression_p95", "penetrating_max"):
            if key in s:
                line[f"selvedge_{key}"] = s[key]
                line[f"blender_{key}"] = b[key]
        line["selvedge_settings"] = s.get("settings")
        out.append(line)
    return out


def write_docs(lines: list[dict], summaries: list[dict], argv) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _docs_table import markdown_table, write_section

    rows = []
    for line in lines:
        settings = line.get("settings") or {}
        budget = (
            f"{settings['substeps']} x {settings['iterations']} {settings['solve_mode']}"
            + (
                f", stretch projection {settings['stretch_projection_steps']}"
                if settings.get("stretch_projection_steps")
                else ""
            )
            + (
                f", stretch refinements {settings['stretch_refinements']} ({line['frames_refined']} frames run again)"
                if settings.get("stretch_refinements")
                else ""
            )
            if line["solver"] == "selvedge"
            else "its defaults"
        )
        rows.append(
            [
                line["scene"],
                "Selvedge" if line["solver"] == "selvedge" else "Blender Cloth",
                budget,
                f"{line['ms_per_frame']:.1f}",
                f"{100 * line['strain_p95']:.2f} %",
                f"{100 * line['strain_max_outside_pin_rings']:.1f} %",
                f"{100 * line['strain_max']:.1f} %",
                f"{100 * line['compression_p95']:.2f} %",
                str(line.get("penetrating_max", "-")),
            ]
        )
    body = markdown_table(
        [
            "scene",
            "solver",
            "budget",
            "ms/frame",
            "P95 strain (worst frame)",
            "max outside pin 2-rings",
            "max (raw)",
            "compression P95",
            "vertices inside body",
        ],
        rows,
    )
    for s in summaries:
        body += (
            f"\n\n{s['scene']}: Selvedge takes {s['selvedge_ms_fraction_of_blender']:.3f} of Blender Cloth's "
            f"ms/frame (1/{s['blender_ms_over_selvedge_ms']:.1f}) in the same run."
        )
    write_section("bench_vs_blender_cloth", "bench/bench_vs_blender_cloth.py " + " ".join(argv), body)


if __name__ == "__main__":
    # The 4.x bpy modules crash (4.2) or hang (4.5) in their own teardown at exit once Selvedge's
    # classes were registered: every script leaves through module_exit (see module_exit.py).
    from importlib import import_module

    import_module(selvedge.__name__ + ".module_exit").exit_process(main())
