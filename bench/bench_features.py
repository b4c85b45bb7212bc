"""Cost of the force fields, aerodynamics, sewing, pressure and shrink on the 64 x 64 bench sheet.

Scene: bench_solver's sheet (1 m cotton, two pinned corners, one sliding), 20 substeps x 1
iteration at 24 fps; pressure on a closed pillow of about the same vertex count (the sheet has no
volume). Each case runs next to its baseline ("off") in the same repeat, interleaved, and prints
one JSON line: ms per frame, the feature's own phase (``forces``, ``sewing``, ``pressure``) in ms,
and ``feature_vs_elastic``: that phase over the constraint phases (stretch, shear, bend, tethers)
of the same run, the issue's budget being 0.15; ``total_vs_off``: the frame over the baseline's.

    .venv/bin/python bench/bench_features.py                 # serial, 3 repeats
    .venv/bin/python bench/bench_features.py --repeat 1 --frames 12 --write-docs
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "devtools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

ELASTIC = ("stretch", "shear", "bend", "tether", "soft_pin")
FEATURE_PHASE = {
    "off": None,
    "shrink": None,
    "wind_turbulence": "forces",
    "harmonic": "forces",
    "aerodynamics": "forces",
    "sewing": "sewing",
    "pressure_off": None,
    "pressure": "pressure",
}


def pillow(n: int, size: float = 1.0, puff: float = 0.05):
    """A closed pillow: two n x n sheets (top, bottom) sharing their boundary ring, ~2 n^2 vertices."""
    import numpy as np

    u = np.linspace(0, size, n)
    xx, yy = np.meshgrid(u, u)
    idx = np.arange(n * n).reshape(n, n)
    interior = np.zeros((n, n), bool)
    interior[1:-1, 1:-1] = True
    top = np.stack([xx.ravel(), yy.ravel(), np.where(interior.ravel(), puff, 0.0)], 1)
    bottom_index = idx.copy()
    bottom_index[interior] = n * n + np.arange(int(interior.sum()))
    bottom = top[interior.ravel()] * [1, 1, -1]
    pos = np.concatenate([top, bottom])
    a, b, c, d = idx[:-1, :-1], idx[:-1, 1:], idx[1:, 1:], idx[1:, :-1]
    faces_top = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)])
    a, b, c, d = (bottom_index[:-1, :-1], bottom_index[:-1, 1:], bottom_index[1:, 1:], bottom_index[1:, :-1])
    # the other diagonal: at the corners the top's diagonal joins two ring vertices
    faces_bottom = np.concatenate([np.stack([a, d, b], -1).reshape(-1, 3), np.stack([b, d, c], -1).reshape(-1, 3)])
    return pos, np.concatenate([faces_top, faces_bottom])


def build(solver, case: str, n: int, substeps: int):
    import numpy as np
    from bench_solver import build_scene

    from selvedge.solver.aerodynamics import Aerodynamics
    from selvedge.solver.forces import ForceField
    from selvedge.solver.sewing import Sewing
    from selvedge.solver.shrink import Shrink
    from selvedge.solver.volume import Pressure

    if case.startswith("pressure"):
        pos, faces = pillow(n // 2 + 14)  # ~ the sheet's vertex count
        settings = solver.SolverSettings(substeps=substeps, gravity_m_s2=(0.0, 0.0, -9.81))
        pressure = Pressure(pressure_factor=200.0, uniform_pressure_force=0.5) if case == "pressure" else None
        cloth = solver.Cloth(pos, faces, material=solver.preset("cotton"), settings=settings, pressure=pressure)
        return cloth, lambda frame: None
    cloth, targets = build_scene(solver, n, "serial", 1, substeps, 1)
    if case == "shrink":
        cloth.set_shrink(Shrink(shrink_min=0.05))
    elif case == "wind_turbulence":
        cloth.force_fields = [
            ForceField("wind", direction=(0.3, 1.0, 0.0), strength=2.0, flow=0.5, noise=0.5),
            ForceField("turbulence", location=(0.5, 0.5, 1.0), strength=1.0, size=0.3),
        ]
    elif case == "harmonic":  # a spring field: evaluated every substep, not once a frame
        cloth.force_fields = [
            ForceField("harmonic", location=(0.5, 0.5, 1.0), strength=2.0, damping=0.5, rest_length=0.3)
        ]
    elif case == "aerodynamics":
        cloth.aerodynamics = Aerodynamics(drag_coefficient=1.0, lift_coefficient=0.5)
        cloth.force_fields = [ForceField("wind", direction=(0.3, 1.0, 0.0), strength=3.0)]
    elif case == "sewing":
        idx = np.arange(n * n).reshape(n, n)
        pairs = np.stack([idx[1:-1, 0], idx[1:-1, -1]], 1)  # the side edges, a tube's seam
        cloth = solver.Cloth(
            cloth.rest_positions,
            cloth.topology.triangles,
            material=cloth.material,
            settings=cloth.settings,
            pin_weights=cloth.pin_weights,
            sewing=Sewing(pairs, closing_time_s=2.0, sewing_force_max=0.01),
        )
    return cloth, targets


def run(solver, case, args) -> dict:
    cloth, targets = build(solver, case, args.size, args.substeps)
    for frame in range(1, args.warmup + 1):
        cloth.step(pin_targets=targets(frame))
    diags = []
    t0 = time.perf_counter()
    for frame in range(args.warmup + 1, args.warmup + 1 + args.frames):
        diags.append(cloth.step(pin_targets=targets(frame)))
    wall = time.perf_counter() - t0

    def per_frame(key):
        return sum(d.timings_ms.get(key, 0.0) for d in diags) / len(diags)

    elastic = sum(per_frame(k) for k in ELASTIC)
    phase = FEATURE_PHASE[case]
    return {
        "case": case,
        "vertices": cloth.x.shape[0],
        "frames": len(diags),
        "substeps": args.substeps,
        "ms_per_frame": round(per_frame("total"), 3),
        "elastic_ms_per_frame": round(elastic, 3),
        "feature_ms_per_frame": round(per_frame(phase), 3) if phase else 0.0,
        "feature_vs_elastic": round(per_frame(phase) / elastic, 4) if phase else 0.0,
        "wall_s": round(wall, 2),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--substeps", type=int, default=20)
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", nargs="+", choices=list(FEATURE_PHASE), default=list(FEATURE_PHASE))
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args(argv)
    from selvedge_import import import_selvedge

    import_selvedge()
    from selvedge import solver

    results = []
    for repeat in range(args.repeat):
        for case in args.cases:
            line = run(solver, case, args)
            line["repeat"] = repeat + 1
            results.append(line)
            print(json.dumps(line), flush=True)
    rows = []
    for case in args.cases:
        mine = [r for r in results if r["case"] == case]
        base_case = "pressure_off" if case.startswith("pressure") else "off"
        ratios = [
            r["ms_per_frame"] / b["ms_per_frame"]
            for r in mine
            for b in results
            if b["case"] == base_case and b["repeat"] == r["repeat"]
        ] or [float("nan")]
        summary = {
            "case": f"{case}_summary",
            "feature_vs_elastic": statistics.median(r["feature_vs_elastic"] for r in mine),
            "total_vs_off": round(statistics.median(ratios), 3),
            "ms_per_frame": statistics.median(r["ms_per_frame"] for r in mine),
        }
        print(json.dumps(summary), flush=True)
        rows.append([case, summary["ms_per_frame"], summary["feature_vs_elastic"], summary["total_vs_off"]])
    if args.write_docs:
        from _docs_table import markdown_table, write_section

        command = "bench/bench_features.py " + " ".join(argv if argv is not None else sys.argv[1:])
        table = markdown_table(["case", "ms/frame (median)", "feature phase / elastic solve", "frame / off"], rows)
        write_section(
            "bench_features",
            command.strip(),
            f"{args.size}x{args.size}, serial, {args.substeps} substeps, "
            f"medians of {args.repeat} interleaved repeats. Budget: feature phase / elastic <= 0.15.\n\n" + table,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
