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
  (:class:`operators.bake.CacheBake`) one frame per ``step()``, each step timed, after a small
  warm-up bake so JIT compilation is not counted.

Strain is measured the same way for both, here, not by either solver: after the run, the
scene is stepped again and each frame's evaluated mesh (the Cloth modifier's point cache, or the
Mesh Cache modifier playing Selvedge's PC2) is read in world space; every mesh edge's engineering
strain (L - L0) / L0 is taken against the edge lengths of the undeformed sheet.

One JSON line per solver::

    {"solver", "scene", "vertices", "edges", "frames", "ms_per_frame" (mean of timed steps),
     "ms_per_frame_median", "strain_max" (all edges, all frames), "strain_p95" (worst frame's P95),
     "strain_max_last", "strain_p95_last" (last frame), "compression_max", "settings", "blender", ...}

The garment-on-body scene of the issue needs colliders; ``operators/bake.py`` does not pass
collider objects to the solver yet, so only the grid runs, and a line says so.

    .venv/bin/python bench/bench_vs_blender_cloth.py                  # 64x64, 100 frames
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

import bpy  # noqa: E402
import numpy as np  # noqa: E402

from selvedge_import import import_selvedge  # noqa: E402

selvedge = import_selvedge()


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
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=grid - 1, y_subdivisions=grid - 1, size=size, calc_uvs=True,
                                    location=(0.0, 0.0, 1.0))
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


def measure(obj, frames: int, rest_world: np.ndarray) -> dict:
    """Strain statistics of the evaluated mesh over frames 2..frames (frame 1 is the rest state)."""
    edges = mesh_edges(obj.data)
    rest = np.linalg.norm(rest_world[edges[:, 1]] - rest_world[edges[:, 0]], axis=1)
    per_frame = []
    worst_compression = 0.0
    for frame in range(2, frames + 1):
        bpy.context.scene.frame_set(frame)
        s = edge_strain(evaluated_world(obj), edges, rest)
        per_frame.append((float(s.max()), float(np.percentile(s, 95))))
        worst_compression = max(worst_compression, float(-s.min()))
    return {"edges": int(len(edges)), "strain_max": max(m for m, _ in per_frame),
            "strain_p95": max(p for _, p in per_frame), "strain_max_last": per_frame[-1][0],
            "strain_p95_last": per_frame[-1][1], "compression_max": worst_compression}


def timing(ms: list[float]) -> dict:
    return {"ms_per_frame": statistics.fmean(ms), "ms_per_frame_median": statistics.median(ms),
            "ms_total": sum(ms)}


# ----------------------------------------------------------------------------------------------
# Blender Cloth
def run_blender_cloth(grid: int, size: float, frames: int) -> dict:
    obj = new_scene(grid, size, frames)
    rest_world = evaluated_world(obj)
    mod = obj.modifiers.new("Cloth", "CLOTH")
    mod.settings.vertex_group_mass = "pins"
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
    baked = mod.point_cache.info
    result = {"solver": "blender_cloth", **timing(ms), **measure(obj, frames, rest_world)}
    s = mod.settings
    result["settings"] = {"quality": s.quality, "mass_kg_per_vertex": s.mass, "tension": s.tension_stiffness,
                          "compression": s.compression_stiffness, "shear": s.shear_stiffness,
                          "bending": s.bending_stiffness, "air_damping": s.air_damping,
                          "point_cache": baked}
    return result


# ----------------------------------------------------------------------------------------------
# Selvedge
def selvedge_scene(grid: int, size: float, frames: int, folder: Path, solve_mode: str, substeps: int | None):
    obj = new_scene(grid, size, frames)
    obj.selvedge.role = "CLOTH"
    obj.selvedge.pin_group = "pins"
    scene = bpy.context.scene
    scene.selvedge.cache_folder = str(folder)
    scene.selvedge.solve_mode = solve_mode
    if substeps:
        scene.selvedge.substeps = substeps
    return obj


def run_selvedge(grid: int, size: float, frames: int, solve_mode: str, substeps: int | None = None) -> dict:
    from selvedge.operators.bake import CacheBake

    quiet = lambda *a, **k: None  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        # Warm-up: compile (or load from the JIT cache) every kernel on a tiny sheet.
        selvedge_scene(4, size, 3, Path(tmp) / "warmup", solve_mode, substeps)
        job = CacheBake(bpy.context, log=quiet)
        while job.step():
            pass
        job.finish()

        obj = selvedge_scene(grid, size, frames, Path(tmp) / "cache", solve_mode, substeps)
        rest_world = evaluated_world(obj)
        job = CacheBake(bpy.context, log=quiet)
        ms = []
        while True:
            t0 = time.perf_counter()
            more = job.step()
            ms.append(1e3 * (time.perf_counter() - t0))
            if not more:
                break
        job.finish()
        solver_strain = [d.strain_max for d in job.sim.runs[0].cloth.history]
        result = {"solver": "selvedge", **timing(ms), **measure(obj, frames, rest_world)}
        s, sc = obj.selvedge, bpy.context.scene.selvedge
        result["settings"] = {"preset": s.material_preset, "substeps": sc.substeps, "iterations": sc.iterations,
                              "solve_mode": sc.solve_mode, "bending_model": s.bending_model,
                              "tethers": s.use_tethers, "density_kg_m2": s.density_kg_m2}
        # Cross-check of the measurement: the solver's own worst edge strain (its mesh edges).
        result["solver_reported_strain_max"] = max(solver_strain)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grid", type=int, default=64, help="vertices per side (default 64)")
    parser.add_argument("--size", type=float, default=1.0, help="sheet side in metres (default 1)")
    parser.add_argument("--frames", type=int, default=100, help="frames, the first being the rest state")
    parser.add_argument("--solve-mode", default="serial", choices=("serial", "colored", "jacobi"))
    parser.add_argument("--substeps", type=int, help="Selvedge substeps (default: the scene default)")
    parser.add_argument("--only", choices=("blender", "selvedge"), help="run one solver only")
    args = parser.parse_args(argv)
    common = {"scene": f"grid{args.grid}_pinned2", "vertices": args.grid * args.grid, "frames": args.frames,
              "size_m": args.size, "blender": bpy.app.version_string, "python": platform.python_version(),
              "cpus": os.cpu_count()}
    runs = []
    if args.only in (None, "blender"):
        runs.append(lambda: run_blender_cloth(args.grid, args.size, args.frames))
    if args.only in (None, "selvedge"):
        runs.append(lambda: run_selvedge(args.grid, args.size, args.frames, args.solve_mode, args.substeps))
    for run in runs:
        result = run()
        print(json.dumps({**common, **result}), flush=True)
    print(json.dumps({"scene": "garment_on_body", "status": "not run",
                      "reason": "operators/bake.py does not pass Selvedge collider objects to the solver yet"}),
          flush=True)
    reset()
    return 0


if __name__ == "__main__":
    sys.exit(main())
