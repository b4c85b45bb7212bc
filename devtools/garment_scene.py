"""The garment scene of ``bench/bench_vs_blender_cloth.py`` without Blender (issue 21), and a
per-phase crossing trace of it.

A ``size`` m sheet of ``grid`` x ``grid`` vertices dropped from ``GARMENT_GAP`` above a static
body (a capped cylinder torso and a UV-sphere head, as the bench builds them with bmesh), with
what a bake gives a cloth with Self Collision on and every other setting at its default: the
cotton sliders (``operators.scene_to_solver.material_from_settings``), 10 substeps, 1
iteration, 24 fps, the body a one-sided ``TriangleMesh`` (thickness 5 mm, friction 0.5 combined
with the cloth's), and one ``CollisionWorld`` counting the crossings at every frame end.

``python devtools/garment_scene.py [--grid 48] [--frames 48] [--trace FRAME]`` prints one JSON
line per frame (the world's and the independent reference's crossing counts, lowest vertex) and,
with ``--trace``, the crossing count after every phase of each substep of that frame (``s``
substep start, ``p`` prediction, ``c`` cloth contacts, ``b`` body contacts of each round).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "devtools"))
sys.path.insert(0, str(ROOT / "tests"))
from selvedge_import import import_selvedge  # noqa: E402

import_selvedge()
from selvedge.operators.scene_to_solver import (  # noqa: E402
    cloth_collision_from_settings,
    material_from_settings,
    options_from_settings,
)
from selvedge.solver import Cloth, SolverSettings, grid_mesh  # noqa: E402
from selvedge.solver.collisions import Colliders, TriangleMesh, combined_friction, orient_closed_mesh  # noqa: E402
from selvedge.solver.collisions.world import CollisionWorld  # noqa: E402
from selvedge.solver.mesh import triangulate, uv_ellipsoid_mesh  # noqa: E402

# bench/bench_vs_blender_cloth.py's body and drop height
TORSO_RADIUS, TORSO_Z0, TORSO_Z1 = 0.2, 0.7, 1.3
HEAD_RADIUS, HEAD_Z = 0.12, 1.45
GARMENT_GAP = 0.08

#: the per-object defaults of operators/properties.py that feed the solver, Self Collision on
DEFAULTS = SimpleNamespace(
    material_preset="cotton",
    stretch_stiffness=0.2831617,
    bend_stiffness=0.2831617,
    density_kg_m2=0.15,
    damping_s=1e-4,
    air_drag_per_s=0.3,
    friction=0.6,
    thickness_m=0.0015,
    bending_model="auto",
    use_tethers=True,
    stretch_projection_steps=0,
    use_compression_limit=False,
    settle_at_rest="AUTO",
    tether_scale=1.05,
    use_self_collision=True,
    use_cloth_collision=False,
    collision_layer=0,
)


def cylinder(radius, z0, z1, segments=32):
    """A closed cylinder, its caps fanned to their centres (bmesh ``create_cone(cap_tris=True)``)."""
    phi = 2 * np.pi * np.arange(segments) / segments
    ring = np.stack([radius * np.cos(phi), radius * np.sin(phi)], 1)
    v = np.concatenate([np.c_[ring, np.full(segments, z0)], np.c_[ring, np.full(segments, z1)]])
    v = np.concatenate([v, [[0.0, 0.0, z0], [0.0, 0.0, z1]]])
    i = np.arange(segments)
    j = (i + 1) % segments
    s = segments
    side = np.concatenate([np.stack([i, j, j + s], 1), np.stack([i, j + s, i + s], 1)])
    caps = np.concatenate([np.stack([np.full(s, 2 * s), j, i], 1), np.stack([np.full(s, 2 * s + 1), i + s, j + s], 1)])
    return v, np.concatenate([side, caps]).astype(np.int64)


def body_mesh():
    """Torso and head as one triangle mesh (two closed parts), wound outwards."""
    vc, tc = cylinder(TORSO_RADIUS, TORSO_Z0, TORSO_Z1)
    vs, ts = uv_ellipsoid_mesh(HEAD_RADIUS, segments=32, rings=16, center=(0.0, 0.0, HEAD_Z))
    v, t = np.concatenate([vc, vs]), np.concatenate([tc, ts + len(vc)])
    t, one_sided = orient_closed_mesh(v, t)
    return v, t, one_sided


def tube_mesh(around, rows, rx, ry, z0, z1, centre=(0.0, 0.0)):
    """A closed tube (elliptic section rx, ry) from z0 (bottom) to z1 (top): ``around * rows`` vertices."""
    a = np.linspace(0.0, 2.0 * np.pi, around, endpoint=False)
    z = np.linspace(z0, z1, rows)
    pos = np.array([[centre[0] + rx * np.cos(t), centre[1] + ry * np.sin(t), h] for h in z for t in a])
    faces = []
    for j in range(rows - 1):
        for i in range(around):
            a0, a1 = j * around + i, j * around + (i + 1) % around
            b0, b1 = a0 + around, a1 + around
            faces += [(a0, a1, b1), (a0, b1, b0)] if (i + j) % 2 else [(a0, a1, b0), (a1, b1, b0)]
    return pos, np.array(faces, dtype=np.int64)


def garment_world(
    grid: int = 48,
    size: float = 1.0,
    substeps: int = 10,
    iterations: int = 1,
    stretch_projection_steps: int = 0,
    **world_kw,
):
    """(world, cloth) of the scene; ``stretch_projection_steps``: the object setting of that name;
    ``world_kw`` go to the ``CollisionWorld``."""
    settings = SimpleNamespace(**{**vars(DEFAULTS), "stretch_projection_steps": stretch_projection_steps})
    z = HEAD_Z + HEAD_RADIUS + GARMENT_GAP
    pos, faces, uvs = grid_mesh(grid, grid, size, size, origin=(-size / 2, -size / 2, z), quads=True)
    material = material_from_settings(DEFAULTS)
    bv, bt, one_sided = body_mesh()
    mu_s, mu_k = combined_friction(0.5, material.friction_static, material.friction_kinetic)
    body = TriangleMesh(
        bv, bt, name="Body", one_sided=one_sided, thickness=0.005, friction_static=mu_s, friction_kinetic=mu_k
    )
    cloth = Cloth(
        pos,
        triangulate(faces),
        material=material,
        options=options_from_settings(settings),
        settings=SolverSettings(substeps=substeps, iterations=iterations, fps=24.0),
        uvs=uvs,
        contact_handler=Colliders([body], cloth_thickness=material.thickness_m),
    )
    world_kw.setdefault("count_intersections", True)
    world = CollisionWorld(
        [cloth], [cloth_collision_from_settings(DEFAULTS, material)], layer_mass_scale=4.0, **world_kw
    )
    return world, cloth


def trace_frame(world, cloth):
    """Step one frame, counting the crossings after every phase; one string per substep."""
    from selvedge.solver.collisions.intersections import count_intersections

    m = world.mesh
    count = lambda x: int(count_intersections(np.ascontiguousarray(x), m.tris))
    log = []
    handler = cloth.contact_handler
    predicted, solve, project = world._predicted, world._solve, handler.project

    def traced_predicted():
        log.append([f"s{count(world.x_start)}", f"p{count(world.x)}"])
        predicted()

    def traced_solve():
        solve()
        log[-1].append(f"c{count(world.x)}")

    def traced_project(*args):
        project(*args)
        log[-1].append(f"b{count(world.x)}")

    world._predicted, world._solve, handler.project = traced_predicted, traced_solve, traced_project
    try:
        world.step()
    finally:
        del world._predicted, world._solve, handler.project
    return [" ".join(s) for s in log]


def main(argv=None) -> int:
    from intersection_reference import crossing_count

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grid", type=int, default=48)
    parser.add_argument("--frames", type=int, default=48, help="frames, the first being the rest state")
    parser.add_argument("--trace", type=int, help="trace the phases of this frame")
    args = parser.parse_args(argv)
    world, cloth = garment_world(args.grid)
    for frame in range(2, args.frames + 1):
        t0 = time.perf_counter()
        phases = trace_frame(world, cloth) if frame == args.trace else None
        if phases is None:
            world.step()
        line = {
            "frame": frame,
            "crossings": world.last_stats["intersections"],
            "crossings_reference": crossing_count(world.x, world.mesh.tris),
            "z_min_m": round(float(world.x[:, 2].min()), 4),
            "ms": round(1e3 * (time.perf_counter() - t0), 1),
        }
        if phases is not None:
            line["phases"] = phases
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
