"""Stiff fabric: edge strain against solver cost for the convergence methods, in one process.

Scene (the one of ``bench_vs_blender_cloth.py``, solver only): a horizontal 1 m cotton sheet,
``--grid`` vertices a side, pinned at the two corners of one edge, falling for ``--frames``
frames at 24 fps. Every variant runs the same scene; the variants run interleaved ``--repeat``
times and the line reports the median CPU time of the solve per frame (``time.thread_time``
around ``Cloth.step``: the machine is shared, so wall time says little; compare the ratios).
The variants run serial, the presets in the default (auto) mode; ``--modes`` runs each variant in several solve modes
(``serial``; ``colored2``: coloured on two threads; ``auto``: the default mode, coloured in blocks
fixed by the mesh; the calling thread's CPU time misses the other threads' work, so every line
also has the median wall time per frame); ``--grid`` takes several sizes (the resolution table: each size's cost
per vertex against the first size's, same mode, same process).

Strain is every mesh edge's (L - L0) / L0 after each frame: ``strain_p95`` is the worst frame's
95th percentile, ``strain_max_outside_pin_rings`` the largest strain of an edge with both ends
more than two edges away from a pin (a point pin's strain is singular on any mesh),
``strain_max`` the raw maximum, ``compression_p95`` the worst frame's 95th percentile of -strain.

One JSON line per variant, then one ``"case": "presets"`` line per preset at the defaults.

    .venv/bin/python bench/bench_stiff_fabric.py                     # 64 x 64, all variants
    .venv/bin/python bench/bench_stiff_fabric.py --grid 128 --frames 60 --variants defaults old_defaults
    .venv/bin/python bench/bench_stiff_fabric.py --write-docs        # and the table into docs/benchmarks.md
    .venv/bin/python bench/bench_stiff_fabric.py --grid 64 128 256 317 --frames 36 --variants defaults \
        --modes serial colored2 --no-presets                           # resolution x solve mode
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "devtools"))
from selvedge_import import import_selvedge

import_selvedge()
from selvedge import solver
from selvedge.solver import constraints

#: mode label -> (solve_mode, threads)
MODES = {"serial": ("serial", None), "colored2": ("colored", 2), "auto": ("auto", None)}

#: variant -> (what it is, ClothOptions overrides, SolverSettings overrides)
VARIANTS = {
    "defaults": ("Selvedge defaults (hierarchical stretch limit, tethers)", {}, {}),
    "old_defaults": (
        "previous defaults: 20 x 1, tethers, no stretch limit",
        dict(stretch_limiting=False),
        dict(substeps=20),
    ),
    "no_tethers": ("defaults without tethers", dict(tethers=False), {}),
    "limit_20x1": ("stretch limit at 20 x 1", {}, dict(substeps=20)),
    "aggregates": ("coarse links halfway to their aggregates' centres", dict(coarse_links_between_aggregates=True), {}),
    "plain_20x1": (
        "20 x 1, no tethers, no stretch limit",
        dict(stretch_limiting=False, tethers=False),
        dict(substeps=20),
    ),
    "plain_80x1": ("80 x 1, tethers, no stretch limit", dict(stretch_limiting=False), dict(substeps=80)),
    "plain_20x4": ("20 x 4, tethers, no stretch limit", dict(stretch_limiting=False), dict(substeps=20, iterations=4)),
    "no_levels_10x1": ("10 x 1 with 0 coarse levels (tethers, no stretch limit)", dict(stretch_limit_levels=0), {}),
}
#: the fine level's fast projection (ClothOptions.fine_projection; docs/design/stiff_fabric.md)
for _n in (1, 2, 3):
    VARIANTS[f"fine_projection{_n}"] = (
        f"defaults + fine projection, {_n} Newton steps x 5 CG",
        dict(fine_projection=_n),
        {},
    )
#: fewer CG iterations a Newton step (``fine_projection_cg_iterations``): more steps for the same time
for _n, _cg in ((1, 1), (1, 2), (2, 1), (2, 2), (3, 1)):
    VARIANTS[f"fine_projection{_n}_cg{_cg}"] = (
        f"defaults + fine projection, {_n} Newton steps x {_cg} CG",
        dict(fine_projection=_n, fine_projection_cg_iterations=_cg),
        {},
    )
VARIANTS["fine_projection2_compression"] = (
    "defaults + fine projection, 2 x 5, stretch and compression",
    dict(fine_projection=2, fine_projection_compression=True),
    {},
)


def sheet(n: int, size: float = 1.0):
    pos, faces, uv = solver.grid_mesh(n, n, size, size, origin=(-size / 2, -size / 2, 1.0))
    pins = np.zeros(len(pos))
    pins[[int(np.argmin(pos[:, 0] - pos[:, 1])), int(np.argmax(pos[:, 0] + pos[:, 1]))]] = 1.0
    return pos, faces, uv, pins


def run(n: int, frames: int, options: dict, settings: dict, material="cotton") -> dict:
    pos, faces, uv, pins = sheet(n)
    cloth = solver.Cloth(
        pos,
        faces,
        uvs=uv,
        pin_weights=pins,
        material=solver.preset(material),
        options=solver.ClothOptions(**options),
        # serial unless a --modes mode says otherwise: the variants' cost is the calling thread's CPU
        settings=solver.SolverSettings(**{"solve_mode": "serial", **settings}),
    )
    edges = cloth.topology.edges
    hops = constraints.hops_to_pins(len(pos), edges, cloth.kinematic_index)
    outside = np.minimum(hops[edges[:, 0]], hops[edges[:, 1]]) > 2
    cpu, wall, process = [], [], []
    p95 = raw_max = far_max = comp95 = 0.0
    for _ in range(frames - 1):
        t0, w0, p0 = time.thread_time(), time.perf_counter(), time.process_time()
        cloth.step()
        cpu.append(time.thread_time() - t0)
        wall.append(time.perf_counter() - w0)
        process.append(time.process_time() - p0)
        s = cloth.edge_strain()
        p95 = max(p95, float(np.percentile(s, 95)))
        comp95 = max(comp95, float(np.percentile(-s, 95)))
        raw_max = max(raw_max, float(s.max()))
        far_max = max(far_max, float(s[outside].max()))
    st = cloth.settings
    return {
        "vertices": len(pos),
        "substeps": st.substeps,
        "iterations": st.iterations,
        "cpu_ms_per_frame": 1e3 * statistics.median(cpu),
        "wall_ms_per_frame": 1e3 * statistics.median(wall),
        "process_cpu_ms_per_frame": 1e3 * statistics.median(process),  # all threads, spin-waits too
        "solve_mode": st.solve_mode,
        "threads": st.threads,
        "one_region_per_frame": cloth._fused is not None,
        "strain_p95": p95,
        "strain_max_outside_pin_rings": far_max,
        "strain_max": raw_max,
        "compression_p95": comp95,
        "stretch_limit": cloth.material.stretch_limit if cloth.hierarchy is not None else None,
    }


def _mode_settings(settings: dict, mode: str) -> dict:
    solve_mode, threads = MODES[mode]
    return dict(settings, solve_mode=solve_mode, threads=threads)


def resolution_table(args, argv) -> int:
    """Every variant at every grid size in every mode (interleaved ``--repeat`` times): one
    ``"case": "resolution"`` line each, with the wall time per vertex against the first grid's in
    the same mode and the wall time against the first mode's at the same grid."""
    results: dict[tuple, list[dict]] = {}
    for _ in range(args.repeat):
        for grid in args.grid:
            for name in args.variants:
                for mode in args.modes:
                    settings = _mode_settings(VARIANTS[name][2], mode)
                    results.setdefault((grid, name, mode), []).append(
                        run(grid, args.frames, VARIANTS[name][1], settings)
                    )
    wall = {k: statistics.median(r["wall_ms_per_frame"] for r in v) for k, v in results.items()}
    rows = []
    for (grid, name, mode), runs in results.items():
        r = dict(runs[-1], wall_ms_per_frame=wall[grid, name, mode])
        first = (args.grid[0], name, mode)
        per_vertex = (wall[grid, name, mode] / grid**2) / (wall[first] / args.grid[0] ** 2)
        vs_mode = wall[grid, name, mode] / wall[grid, name, args.modes[0]]
        line = {"case": "resolution", "variant": name, "grid": grid, "mode": mode, "frames": args.frames, **r}
        line.update(per_vertex_vs_first_grid=per_vertex, wall_vs_first_mode=vs_mode)
        print(json.dumps(line), flush=True)
        rows.append(
            [
                f"{grid} x {grid}",
                mode,
                f"{100 * r['strain_p95']:.2f} %",
                f"{100 * r['strain_max_outside_pin_rings']:.1f} %",
                f"{r['wall_ms_per_frame']:.1f}",
                f"{per_vertex:.2f}",
                f"{vs_mode:.2f}",
            ]
        )
    if args.write_docs:
        sys.path.insert(0, str(ROOT / "bench"))
        from _docs_table import markdown_table, write_section

        body = markdown_table(
            [
                "grid",
                "mode",
                "P95 strain (worst frame)",
                "max outside pin 2-rings",
                "wall ms/frame",
                f"per vertex vs {args.grid[0]}",
                f"vs {args.modes[0]}",
            ],
            rows,
        )
        command = "bench/bench_stiff_fabric.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_section(
            "bench_stiff_fabric_resolution",
            command.strip(),
            f"Defaults, {args.frames} frames, median of {args.repeat} interleaved run(s).\n\n" + body,
        )
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=int, nargs="+", default=[64])
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1, help="interleaved runs of every variant (median CPU time)")
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--modes", nargs="+", choices=sorted(MODES), default=["serial"])
    parser.add_argument("--no-presets", action="store_true", help="skip the per-preset lines")
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args(argv)

    for mode in args.modes:  # compile / load every kernel first
        run(8, 3, {}, _mode_settings({}, mode))
    if len(args.grid) > 1 or args.modes != ["serial"]:
        return resolution_table(args, argv)
    args.grid = args.grid[0]
    results: dict[str, list[dict]] = {v: [] for v in args.variants}
    for _ in range(args.repeat):
        for name in args.variants:
            results[name].append(run(args.grid, args.frames, VARIANTS[name][1], VARIANTS[name][2]))
    base = statistics.median(r["cpu_ms_per_frame"] for r in results.get("old_defaults", results[args.variants[0]]))
    rows = []
    for name in args.variants:
        r = dict(results[name][-1])
        r["cpu_ms_per_frame"] = statistics.median(x["cpu_ms_per_frame"] for x in results[name])
        line = {
            "case": "variant",
            "variant": name,
            "grid": args.grid,
            "frames": args.frames,
            **r,
            "cost_vs_first": r["cpu_ms_per_frame"] / base,
        }
        print(json.dumps(line), flush=True)
        rows.append(
            [
                VARIANTS[name][0],
                f"{r['substeps']} x {r['iterations']}",
                f"{line['cost_vs_first']:.2f}",
                f"{100 * r['strain_p95']:.2f} %",
                f"{100 * r['strain_max_outside_pin_rings']:.1f} %",
                f"{100 * r['strain_max']:.1f} %",
                f"{100 * r['compression_p95']:.2f} %",
            ]
        )
    preset_rows = []
    if not args.no_presets:
        for name in solver.PRESETS:
            r = run(args.grid, args.frames, {}, {"solve_mode": "auto"}, material=name)  # the default mode
            print(json.dumps({"case": "presets", "preset": name, "grid": args.grid, **r}), flush=True)
            preset_rows.append(
                [
                    name,
                    f"{100 * r['stretch_limit']:.1f} %",
                    f"{100 * r['strain_p95']:.2f} %",
                    f"{100 * r['strain_max_outside_pin_rings']:.1f} %",
                    f"{100 * r['compression_p95']:.2f} %",
                ]
            )
    if args.write_docs:
        sys.path.insert(0, str(ROOT / "bench"))
        from _docs_table import markdown_table, write_section

        reference = "old defaults" if "old_defaults" in args.variants else args.variants[0]
        body = markdown_table(
            [
                "variant",
                "substeps x iterations",
                f"CPU time vs {reference}",
                "P95 strain (worst frame)",
                "max outside pin 2-rings",
                "max (raw)",
                "compression P95",
            ],
            rows,
        )
        if preset_rows:
            body += "\n\nEvery preset at the defaults (same scene):\n\n" + markdown_table(
                ["preset", "stretch limit", "P95 strain", "max outside pin 2-rings", "compression P95"], preset_rows
            )
        command = "bench/bench_stiff_fabric.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_section(
            "bench_stiff_fabric",
            command.strip(),
            f"{args.grid} x {args.grid} sheet, {args.frames} frames, "
            f"median of {args.repeat} interleaved run(s).\n\n" + body,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
