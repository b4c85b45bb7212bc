"""Collision layer timings: a 64x64 cloth on a ~5k-triangle body mesh, then the same with self-collision.

A third case puts a signed distance grid of the same body (5 mm spacing, the proxy for a rigid
body) in place of the mesh; a fourth sways the body mesh (2 cm to each side, 2 s a cycle, as an
animated character's torso would move), so that it never stands still and gets none of the
standing collider's shortcuts; a fifth sways a capsule of about the body's size instead (radius
15 cm, 70 cm long: the analytic proxy a rig's bones get, see the Blender helper that fits them).
The standing-shortcut cases (docs/design/collisions.md) run the body, a 1.2 m terrain block (a
wavy height field of 20k faces closed into a solid) and that height field alone (an open sheet,
which no SDF can hold) as a mesh with and without ``use_standing_shortcuts``, and the body and
terrain as 5 mm SDF grids; ``--cases`` picks cases by name.

Prints one JSON line per case and phase with milliseconds per frame: ``drop`` (the cloth lands
on the body; the first 6 frames, in the air, are untimed; every kernel is compiled or loaded
before, by a small untimed landing) and ``draped`` (after ``--settle`` more untimed frames on
the body). Timings: ``contacts_broad_phase``, ``contacts_narrow_phase`` and ``contacts_solve``
separately (as the Cloth times them), the elastic solve (stretch + shear + bending + tethers)
for comparison, and the frame total.

    python bench/bench_collisions.py [--frames 24] [--settle 24] [--substeps 20] [--grid 64] [--repeat 3]
        [--cases body_mesh_5k,body_sdf_5mm,...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "devtools"))
from selvedge_import import import_selvedge

import_selvedge()
from garment_scene import tube_mesh

from selvedge.solver import Cloth, SolverSettings, grid_mesh
from selvedge.solver.collisions import Capsule, Colliders, SDFGrid, SelfCollision, TriangleMesh
from selvedge.solver.collisions.world import ClothCollision, CollisionWorld
from selvedge.solver.mesh import uv_ellipsoid_mesh

CONTACT_KEYS = ("contacts_broad_phase", "contacts_narrow_phase", "contacts_solve")
NOT_ELASTIC = set(CONTACT_KEYS) | {"total", "diagnostics", "predict", "velocity", "learned"}


def _row(name, phase, pos, body_t, substeps, sums, wall, frames, diag, self_collision):
    mean = {k: v / frames for k, v in sums.items()}
    elastic = sum(v for k, v in mean.items() if k not in NOT_ELASTIC)
    row = {
        "case": name,
        "phase": phase,
        "cloth_vertices": int(pos.shape[0]),
        "body_triangles": int(body_t.shape[0]),
        "substeps": substeps,
        "frames": frames,
        "self_collision": self_collision,
    }
    row.update({f"{k}_ms": round(mean.get(k, 0.0), 3) for k in CONTACT_KEYS})
    row["contacts_total_ms"] = round(sum(mean.get(k, 0.0) for k in CONTACT_KEYS), 3)
    row["elastic_solve_ms"] = round(elastic, 3)
    row["frame_total_ms"] = round(mean.get("total", 0.0), 3)
    row["wall_ms_per_frame"] = round(1e3 * wall / frames, 3)
    for key in (
        "contacts_active_last_substep",
        "candidates_mesh",
        "mesh_lists_requeried",
        "mesh_scans_skipped",
        "mesh_scans_cached",
        "mesh_scans_certified",
        "mesh_scans_cell_lists",
        "self_pairs_max",
        "self_triangle_pairs_max",
    ):
        if key in diag.contacts and (self_collision or not key.startswith("self")):
            row[key] = diag.contacts[key]
    print(json.dumps(row), flush=True)
    return row


def wavy_surface(n=101, size=1.2, amplitude=0.03, waves=2.0, z=1.0):
    """An open height field z + a sin(2 pi k x / L) cos(2 pi k y / L), (n-1)^2 x 2 triangles facing up."""
    v, t, _ = grid_mesh(n, n, size, size, origin=(-size / 2, -size / 2, z))
    k = 2.0 * np.pi * waves / size
    v[:, 2] += amplitude * np.sin(k * v[:, 0]) * np.cos(k * v[:, 1])
    return v, np.ascontiguousarray(t, dtype=np.int64)


def terrain_block(depth=0.1, **surface):
    """The wavy surface closed into a solid block ``depth`` deep (a flat bottom, four walls): a
    rigid terrain that an SDF can hold (an open surface has no inside)."""
    top, tt = wavy_surface(**surface)
    n = len(top)
    bottom = top.copy()
    bottom[:, 2] = top[:, 2].min() - depth
    directed = np.concatenate([tt[:, [0, 1]], tt[:, [1, 2]], tt[:, [2, 0]]])
    inner = set(map(tuple, directed))
    rim = np.array([(a, b) for a, b in directed if (b, a) not in inner])  # boundary edges as the top uses them
    walls = np.concatenate(
        [
            np.stack([rim[:, 1], rim[:, 0], rim[:, 0] + n], axis=1),
            np.stack([rim[:, 1], rim[:, 0] + n, rim[:, 1] + n], axis=1),
        ]
    )
    return np.concatenate([top, bottom]), np.concatenate([tt, tt[:, ::-1] + n, walls]).astype(np.int64)


def scene_body(scene):
    """(vertices, triangles, cloth origin) of the scene's body: the 5k-face torso, the closed terrain
    block (20k faces on top) or the open wavy sheet alone."""
    if scene == "terrain":
        v, t = terrain_block()
        return v, t, (-0.5, -0.5, 1.1)
    if scene == "sheet":
        v, t = wavy_surface()
        return v, t, (-0.5, -0.5, 1.1)
    v, t = uv_ellipsoid_mesh(np.array([0.18, 0.12, 0.35]), 50, 51, np.array([0.0, 0.0, 1.0]))
    return v, t, (-0.5, -0.5, 1.45)


def run_case(
    name,
    grid,
    frames,
    settle,
    substeps,
    self_collision,
    warmup=6,
    sdf_spacing=None,
    sway=False,
    capsule=False,
    scene="body",
    shortcuts=True,
):
    """One case; ``sdf_spacing`` (m) replaces the body mesh by a signed distance grid of it (the
    proxy for a rigid body), ``capsule`` by a capsule; ``sway`` moves the body every frame;
    ``scene`` picks the body (:func:`scene_body`); ``shortcuts=False`` turns the standing mesh
    collider's shortcuts off (``Colliders.use_standing_shortcuts``)."""
    body_v, body_t, origin = scene_body(scene)
    pos, faces, _ = grid_mesh(grid, grid, 1.0, 1.0, origin=origin)
    if capsule:
        body = Capsule(0.15, 0.2, name="body", position=(0.0, 0.0, 1.0))
    elif sdf_spacing is None:
        body = TriangleMesh(body_v, body_t, name="body")
    else:
        body = SDFGrid(body_v, body_t, sdf_spacing, name="body")
    contacts = Colliders(
        [body], cloth_thickness=0.004, self_collision=SelfCollision() if self_collision else None, cloth_triangles=faces
    )
    contacts.use_standing_shortcuts = shortcuts
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=substeps), contact_handler=contacts)
    rows = []
    for phase, skip, count in (("drop", warmup, frames), ("draped", settle, frames)):
        sums: dict[str, float] = {}
        wall = 0.0
        for f in range(skip + count):
            if sway:
                frame = f + (0 if phase == "drop" else warmup + frames)
                shift = np.array([0.02 * np.sin(2.0 * np.pi * (frame + 1) / 48.0), 0.0, 0.0])
                if capsule:
                    contacts.set_transform("body", shift + [0.0, 0.0, 1.0])
                else:
                    contacts.set_mesh_positions("body", body_v + shift)
            t0 = time.perf_counter()
            diag = cloth.step()
            if f >= skip:
                wall += time.perf_counter() - t0
                for k, v in diag.timings_ms.items():
                    sums[k] = sums.get(k, 0.0) + v
        rows.append(
            _row(name, phase, pos, body_t[:0] if capsule else body_t, substeps, sums, wall, count, diag, self_collision)
        )
    return rows


#: Case name -> run_case options. The ``*_no_shortcuts`` and ``*_sdf_5mm`` cases measure the
#: standing mesh collider's shortcuts against an SDF built once (docs/design/collisions.md); the
#: open sheet has no SDF (an SDF grid needs a closed mesh: SDFGrid refuses an open one).
CASES = {
    "body_mesh_5k": dict(self_collision=False),
    "body_mesh_5k_self_collision": dict(self_collision=True),
    "body_sdf_5mm": dict(self_collision=False, sdf_spacing=0.005),
    "body_mesh_5k_moving": dict(self_collision=False, sway=True),
    "body_capsule_moving": dict(self_collision=False, sway=True, capsule=True),
    "body_mesh_5k_no_shortcuts": dict(self_collision=False, shortcuts=False),
    "terrain_mesh_20k": dict(self_collision=False, scene="terrain"),
    "terrain_mesh_20k_no_shortcuts": dict(self_collision=False, scene="terrain", shortcuts=False),
    "terrain_sdf_5mm": dict(self_collision=False, scene="terrain", sdf_spacing=0.005),
    "open_sheet_mesh_20k": dict(self_collision=False, scene="sheet"),
    "open_sheet_mesh_20k_no_shortcuts": dict(self_collision=False, scene="sheet", shortcuts=False),
}

CANDIDATE_STATS = (
    "vertex_triangle_candidates",
    "edge_edge_candidates",
    "vertex_triangle_active_max",
    "edge_edge_active_max",
)
WORLD_KEYS = ("cloth_contacts_detection", "cloth_contacts_narrow_phase", "cloth_contacts_solve")


def run_world_case(name, grid, frames, settle, substeps, warmup=6, partial=True):
    """The body-mesh case with self-collision through a :class:`CollisionWorld` (vertex-triangle
    and edge-edge contacts, candidates reused across substeps): the cloth-contact time against
    the elastic solve of the same frames."""
    body_v, body_t = uv_ellipsoid_mesh(np.array([0.18, 0.12, 0.35]), 50, 51, np.array([0.0, 0.0, 1.0]))
    pos, faces, _ = grid_mesh(grid, grid, 1.0, 1.0, origin=(-0.5, -0.5, 1.45))
    contacts = Colliders([TriangleMesh(body_v, body_t, name="body")], cloth_thickness=0.004)
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=substeps), contact_handler=contacts)
    world = CollisionWorld([cloth])
    world.partial_detection = partial
    rows = []
    for phase, skip, count in (("drop", warmup, frames), ("draped", settle, frames)):
        sums: dict[str, float] = {}
        for f in range(skip + count):
            diag = world.step()[0]
            if f >= skip:
                for k, v in list(diag.timings_ms.items()) + list(world.last_timings_ms.items()):
                    sums[k] = sums.get(k, 0.0) + v
                for k in ("detections", "partial_detections"):
                    sums[k] = sums.get(k, 0.0) + world.last_stats[k]
        mean = {k: v / count for k, v in sums.items()}
        elastic = sum(
            v
            for k, v in mean.items()
            if k not in NOT_ELASTIC
            and k not in WORLD_KEYS
            and k not in ("world_total", "intersection_count", "detections", "partial_detections")
            and not k.startswith("world_")  # the world's phases, copied into each cloth's timings
        )
        row = {
            "case": name,
            "phase": phase,
            "cloth_vertices": int(pos.shape[0]),
            "substeps": substeps,
            "frames": count,
            "self_collision": "world",
            "partial_detection": partial,
        }
        row.update({f"{k}_ms": round(mean.get(k, 0.0), 3) for k in CONTACT_KEYS + WORLD_KEYS})
        row["cloth_contacts_total_ms"] = round(sum(mean.get(k, 0.0) for k in WORLD_KEYS), 3)
        row["elastic_solve_ms"] = round(elastic, 3)
        row["cloth_contacts_over_elastic"] = round(row["cloth_contacts_total_ms"] / elastic, 3)
        row["frame_total_ms"] = round(mean.get("world_total", 0.0), 3)
        row["detections_per_frame"] = round(mean.get("detections", 0.0), 2)
        row["partial_detections_per_frame"] = round(mean.get("partial_detections", 0.0), 2)
        row.update({k: world.last_stats[k] for k in CANDIDATE_STATS})
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def run_layers_case(frames, substeps, layers, warmup=4, partial=True, solve_mode="auto", layer_gap_m=0.012):
    """Garments (~5k-vertex tubes around the body, pinned at their top ring) on the body mesh
    swaying 2 cm each side: ``layers = 1`` is one garment without self-collision (plain Cloth, in
    ``solve_mode``: the default auto runs it coloured, 4 blocks), 2 two layered garments in one
    CollisionWorld (self and cloth-cloth contacts; auto runs them serial). Frame ms.

    ``layer_gap_m``: how far apart the layers' tubes hang (radially). The inner tube hangs 12 mm
    off the body; at 12 mm apart the body's 2 cm sway never pushes the inner one within the
    candidate lists' reach of the outer (no candidate pairs: the world's overhead alone); at 6 mm
    every vertex has candidates on the other layer, 2 mm beyond the 4 mm contact distance
    (``_gap6mm`` in the case name); at 4.5 mm they lie within the narrow phase's reach of touching,
    as a shirt under a jacket (``_gap4.5mm``)."""
    body_v, body_t = uv_ellipsoid_mesh(np.array([0.18, 0.12, 0.35]), 50, 51, np.array([0.0, 0.0, 1.0]))
    cloths, handlers = [], []
    for k in range(layers):
        pos, faces = tube_mesh(84, 60, 0.192 + layer_gap_m * k, 0.132 + layer_gap_m * k, 0.85, 1.25)
        pins = (pos[:, 2] > 1.25 - 1e-9).astype(float)
        handler = Colliders([TriangleMesh(body_v, body_t, name="body")], cloth_thickness=0.004)
        cloths.append(
            Cloth(
                pos,
                faces,
                settings=SolverSettings(substeps=substeps, solve_mode=solve_mode),
                pin_weights=pins,
                contact_handler=handler,
            )
        )
        handlers.append(handler)
    world = CollisionWorld(cloths, [ClothCollision(layer=k) for k in range(layers)]) if layers > 1 else None
    if world is not None:
        world.partial_detection = partial
    pinned = [c.rest_positions[c.pinned_vertices] for c in cloths]
    wall = 0.0
    phases: dict[str, float] = {}
    active_max = {"vertex_triangle_active_max": 0, "edge_edge_active_max": 0}  # over the timed frames
    for f in range(warmup + frames):
        shift = np.array([0.02 * np.sin(2.0 * np.pi * (f + 1) / 48.0), 0.0, 0.0])
        for h in handlers:
            h.set_mesh_positions("body", body_v + shift)
        targets = [p + shift for p in pinned]
        t0 = time.perf_counter()
        if world is None:
            cloths[0].step(targets[0])
        else:
            world.step(targets)
        if f >= warmup:
            wall += time.perf_counter() - t0
            if world is not None:
                for k in WORLD_KEYS:
                    phases[k] = phases.get(k, 0.0) + world.last_timings_ms.get(k, 0.0)
                for k in ("detections", "partial_detections"):
                    phases[k] = phases.get(k, 0.0) + world.last_stats[k]
                for k in ("vertex_triangle_active_max", "edge_edge_active_max"):
                    active_max[k] = max(active_max[k], world.last_stats[k])
    gap = "" if layers == 1 or layer_gap_m == 0.012 else f"_gap{layer_gap_m * 1e3:g}mm"
    row = {
        "case": f"garments_{layers}_layer{'s' if layers > 1 else ''}_moving_body{gap}",
        "solve_mode": cloths[0].solve_mode,
        "cloth_vertices": int(sum(c.x.shape[0] for c in cloths)),
        "substeps": substeps,
        "frames": frames,
        "wall_ms_per_frame": round(1e3 * wall / frames, 3),
    }
    if world is not None:
        row["partial_detection"] = partial
        row.update(
            {(f"{k}_per_frame" if "detections" in k else f"{k}_ms"): round(v / frames, 3) for k, v in phases.items()}
        )
        row.update({k: world.last_stats[k] for k in CANDIDATE_STATS})
        row.update(active_max)
        row["layer_gap_m"] = layer_gap_m
    print(json.dumps(row), flush=True)
    return row


def warm_up():
    """Compile (or load) every contact kernel before anything is timed: a small sheet lands on the
    body with self-collision on, which also re-queries lost vertices (kernels first called late, in
    the landing, would otherwise put their compile time in the timed drop frames of a cold cache)."""
    body_v, body_t = uv_ellipsoid_mesh(np.array([0.18, 0.12, 0.35]), 50, 51, np.array([0.0, 0.0, 1.0]))
    pos, faces, _ = grid_mesh(24, 24, 0.5, 0.5, origin=(-0.25, -0.25, 1.45))
    contacts = Colliders(
        [TriangleMesh(body_v, body_t), SDFGrid(body_v, body_t, 0.01)],
        cloth_thickness=0.004,
        self_collision=SelfCollision(),
        cloth_triangles=faces,
    )
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=20), contact_handler=contacts)
    for _ in range(14):
        cloth.step()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=24, help="timed frames per phase")
    parser.add_argument("--settle", type=int, default=24, help="untimed frames between the phases")
    parser.add_argument(
        "--substeps", type=int, default=20, help="solver substeps (default 20; the solver's own default is 10)"
    )
    parser.add_argument("--grid", type=int, default=64)
    parser.add_argument(
        "--world",
        action="store_true",
        help="only the collision-world cases: self-collision through the world next to the "
        "old self-collision on the body mesh, and two layered garments against one",
    )
    parser.add_argument(
        "--no-old", action="store_true", help="with --world: skip the old self-collision (Colliders + SelfCollision)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the cases this many times, interleaved, then print one 'summary' line per case "
        "and phase with medians (runs on a shared 2-core machine vary by 10-30 %%)",
    )
    parser.add_argument(
        "--cases", default=",".join(CASES), help="comma-separated case names (default: all): " + ", ".join(CASES)
    )
    parser.add_argument(
        "--write-docs", action="store_true", help="write the cases' table into docs/benchmarks.md (bench_collisions)"
    )
    args = parser.parse_args(argv)
    cases = args.cases.split(",")
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    warm_up()
    if args.world:
        return world_cases(args)
    rows = []
    for repeat in range(1, args.repeat + 1):
        for name in cases:
            for r in run_case(name, args.grid, args.frames, args.settle, args.substeps, **CASES[name]):
                r["repeat"] = repeat
                rows.append(r)
    if args.repeat > 1:
        for key in dict.fromkeys((r["case"], r["phase"]) for r in rows):
            print(json.dumps(summary_line(key, [r for r in rows if (r["case"], r["phase"]) == key])), flush=True)
    if args.write_docs:
        write_docs_table(rows, argv)


def write_docs_table(rows, argv) -> None:
    """Medians per case and phase as the ``bench_collisions`` section of docs/benchmarks.md."""
    from _docs_table import markdown_table, write_section

    header = ["case", "phase", "contacts ms/frame", "elastic solve ms/frame", "contacts / elastic (median)"]
    table = []
    for key in dict.fromkeys((r["case"], r["phase"]) for r in rows):
        line = summary_line(key, [r for r in rows if (r["case"], r["phase"]) == key])
        table.append([*key, line["contacts_total_ms"], line["elastic_solve_ms"], line["contacts_over_elastic"]])
    args = " ".join(sys.argv[1:] if argv is None else argv)
    command = f".venv/bin/python bench/bench_collisions.py {args}".strip()
    write_section("bench_collisions", command, markdown_table(header, table))


def world_cases(args):
    """Interleaved repeats of: the old self-collision (Colliders + SelfCollision; skipped with
    ``--no-old``), the world's self-collision with whole-list and with partial re-detection, one
    garment alone, two layered garments (both detections; hanging 6 mm apart, which the body's
    sway brings within the margin of their 4 mm contact distance; and 4.5 mm apart, within the
    narrow phase's reach of it everywhere); one summary line per comparison."""
    run_world_case("warm", 16, 2, 1, args.substeps, warmup=1)
    run_layers_case(1, args.substeps, 2, warmup=1)
    ratios, layer_ratios = [], []
    for repeat in range(args.repeat):
        old = (
            []
            if args.no_old
            else run_case(
                "body_mesh_5k_self_collision", args.grid, args.frames, args.settle, args.substeps, self_collision=True
            )
        )
        new = {
            partial: run_world_case(
                "body_mesh_5k_world_self_collision", args.grid, args.frames, args.settle, args.substeps, partial=partial
            )
            for partial in (False, True)
        }
        for k, (whole, part) in enumerate(zip(new[False], new[True])):
            line = {
                "phase": part["phase"],
                "whole_list_cloth_contacts_over_elastic": whole["cloth_contacts_over_elastic"],
                "partial_cloth_contacts_over_elastic": part["cloth_contacts_over_elastic"],
                "partial_over_whole_cloth_contacts": round(
                    part["cloth_contacts_total_ms"] / whole["cloth_contacts_total_ms"], 3
                ),
            }
            if old:
                line["old_contacts_over_elastic"] = round(old[k]["contacts_total_ms"] / old[k]["elastic_solve_ms"], 2)
            ratios.append(line)
        one = run_layers_case(args.frames, args.substeps, 1)
        one_serial = run_layers_case(args.frames, args.substeps, 1, solve_mode="serial")
        two = {partial: run_layers_case(args.frames, args.substeps, 2, partial=partial) for partial in (False, True)}
        near = run_layers_case(args.frames, args.substeps, 2, layer_gap_m=0.006)
        touching = run_layers_case(args.frames, args.substeps, 2, layer_gap_m=0.0045)
        layer_ratios.append(
            {
                **{str(p): round(two[p]["wall_ms_per_frame"] / one["wall_ms_per_frame"], 2) for p in two},
                "True_over_serial_one": round(two[True]["wall_ms_per_frame"] / one_serial["wall_ms_per_frame"], 2),
                "gap6mm": round(near["wall_ms_per_frame"] / one["wall_ms_per_frame"], 2),
                "gap4.5mm": round(touching["wall_ms_per_frame"] / one["wall_ms_per_frame"], 2),
            }
        )
    print(
        json.dumps(
            {
                "summary": True,
                "self_collision_ratios": ratios,
                "two_layers_over_one_garment_partial_false_true": layer_ratios,
            }
        ),
        flush=True,
    )


def summary_line(key, rows):
    """Medians over the repeats of one case and phase; the contacts / elastic ratio is taken within
    each repeat (its two figures come from the same frames)."""
    line = {"case": key[0], "phase": key[1], "summary": True, "repeats": len(rows)}
    for name in ("contacts_total_ms", "elastic_solve_ms", *(f"{k}_ms" for k in CONTACT_KEYS)):
        line[name] = round(statistics.median(r[name] for r in rows), 3)
    ratios = [r["contacts_total_ms"] / r["elastic_solve_ms"] for r in rows]
    line["contacts_over_elastic"] = round(statistics.median(ratios), 2)
    line["contacts_over_elastic_runs"] = [round(v, 2) for v in ratios]
    line["contacts_cheaper_than_elastic"] = line["contacts_over_elastic"] < 1.0
    return line


if __name__ == "__main__":
    main()
