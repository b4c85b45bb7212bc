"""Solver benchmark: frame time and constraint projections per second, plus JIT start-up.

Scene (the demo's): a horizontal square cotton sheet, 1 m, pinned at the two corners of one edge,
one pin corner sliding and lifting; default options (stretch, shear, dihedral bending,
geodesic tethers), 10 substeps x 1 iteration at 24 fps.

For every grid size and mode it prints one JSON line::

    vertices, constraints, substeps, iterations, mode, threads, frames, ms_per_frame (total solve,
    no diagnostics), constraint_ms_per_frame, projections_per_s (constraint count x substeps x
    iterations x frames / time spent in the constraint phases, from FrameDiagnostics.timings_ms),
    projections_per_s_total (same over the whole frame), strain_max, strain_p95, ...

then one ``"case": "jit"`` line: a fresh interpreter with an empty temporary SELVEDGE_CACHE_DIR
(everything compiles) and a second one reusing that folder (everything loads from the cache),
each timed from process start to the end of its first simulated frame.

    .venv/bin/python bench/bench_solver.py            # 32, 64, 128, 256, 317 (~100k vertices)
    .venv/bin/python bench/bench_solver.py --quick    # 32 and 64, few frames
    .venv/bin/python bench/bench_solver.py --sizes 64 256 --modes serial colored2
    .venv/bin/python bench/bench_solver.py --repeat 3 --no-jit   # medians of 3 interleaved runs
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "devtools"))

#: mode label -> (solve_mode, numba threads)
MODES = {"serial": ("serial", 1), "colored1": ("colored", 1), "colored2": ("colored", 2), "auto": ("auto", None)}
CONSTRAINT_PHASES = ("stretch", "shear", "bend", "tether", "soft_pin")
TARGET_SERIAL_PROJECTIONS = 40e6
TARGET_COLORED2_SPEEDUP = 1.6
TARGET_CACHED_START_S = 2.0


def _threading_layer(numba) -> str:
    """Numba's parallel back end (omp, tbb or workqueue), known once a parallel kernel has run."""
    from numba import njit, prange

    @njit(parallel=True)
    def touch(a):
        for i in prange(a.shape[0]):
            a[i] = i

    touch(__import__("numpy").zeros(4))
    return numba.threading_layer()


def source_fingerprint() -> str:
    """Short hash of the solver sources, so a result line says which code it measured."""
    h = hashlib.sha1()
    for path in sorted((ROOT / "solver").glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:10]


def build_scene(solver, n: int, mode: str, threads: int, substeps: int, iterations: int, bending_model: str = "auto"):
    import numpy as np

    positions, faces, uvs = solver.grid_mesh(n, n, 1.0, 1.0, origin=(0.0, 0.0, 1.0))
    fixed, moving = (n - 1) * n, n * n - 1
    pins = np.zeros(n * n)
    pins[[fixed, moving]] = 1.0
    settings = solver.SolverSettings(substeps=substeps, iterations=iterations, solve_mode=mode, threads=threads)
    cloth = solver.Cloth(
        positions,
        faces,
        material=solver.preset("cotton"),
        settings=settings,
        pin_weights=pins,
        uvs=uvs,
        options=solver.ClothOptions(bending_model=bending_model),
    )
    start = positions[[fixed, moving]].copy()

    def targets(frame: int, ramp_frames: int = 36) -> np.ndarray:
        t = min(1.0, frame / ramp_frames)
        s = t * t * (3.0 - 2.0 * t)
        out = start.copy()
        out[1] += s * np.array([-0.4, 0.0, 0.2])
        return out

    return cloth, targets


def run_case(solver, n: int, label: str, args) -> dict:
    import numba
    import numpy as np

    mode, threads = MODES[label]
    t0 = time.perf_counter()
    cloth, targets = build_scene(solver, n, mode, threads, args.substeps, args.iterations, args.bending)
    build_s = time.perf_counter() - t0
    line = {
        "case": "solve",
        "grid": f"{n}x{n}",
        "vertices": n * n,
        "constraints": cloth.constraint_count,
        "per_set": {c.name: c.count for c in cloth._sets_serial},
        "substeps": args.substeps,
        "iterations": args.iterations,
        "bending": args.bending,
        "bending_resolved": cloth.bending_model,
        "mode": mode,
        "threads": threads,
        "build_s": round(build_s, 3),
    }
    frame = 0
    try:
        t0 = time.perf_counter()
        for _ in range(args.warmup):  # JIT or cache load, colouring, first-touch of the arrays
            frame += 1
            cloth.step(pin_targets=targets(frame))
        line["warmup_s"] = round(time.perf_counter() - t0, 3)
        if mode == "colored":
            line["blocks"] = {c.name: np.diff(c.block_offsets).tolist() for c in cloth.constraint_sets}
            line["numba_threads"] = numba.get_num_threads()
            line["one_region_per_frame"] = cloth._fused is not None  # solver/fused.py
        diags = []
        t_start = time.perf_counter()
        cpu_start = time.process_time()
        while len(diags) < args.min_frames or (
            len(diags) < args.max_frames and time.perf_counter() - t_start < args.budget_s
        ):
            frame += 1
            diags.append(cloth.step(pin_targets=targets(frame)))
    except solver.SimulationError as error:
        line["error"] = str(error)
        return line
    wall_s = time.perf_counter() - t_start
    cpu_s = time.process_time() - cpu_start
    phases = [k for k in CONSTRAINT_PHASES if k in diags[0].timings_ms]
    constraint_ms = sum(d.timings_ms[k] for d in diags for k in phases)
    total_ms = sum(d.timings_ms["total"] for d in diags)
    diag_ms = sum(d.timings_ms["diagnostics"] for d in diags)
    projections = cloth.constraint_count * args.substeps * args.iterations * len(diags)
    line.update(
        frames=len(diags),
        ms_per_frame=round(total_ms / len(diags), 3),
        constraint_ms_per_frame=round(constraint_ms / len(diags), 3),
        diagnostics_ms_per_frame=round(diag_ms / len(diags), 3),
        phase_ms_per_frame={
            k: round(sum(d.timings_ms.get(k, 0.0) for d in diags) / len(diags), 3)
            for k in diags[0].timings_ms
            if k not in ("total", "diagnostics")
        },
        projections_per_s=round(projections / (constraint_ms * 1e-3)),
        projections_per_s_total=round(projections / (total_ms * 1e-3)),
        # Process CPU time over the same frames (all threads, diagnostics included): on a shared
        # machine wall time includes waiting for a core; for one thread, projections per CPU
        # second is a load-independent lower bound on the throughput.
        step_wall_ms_per_frame=round(1e3 * wall_s / len(diags), 3),
        cpu_ms_per_frame=round(1e3 * cpu_s / len(diags), 3),
        projections_per_cpu_s=round(projections / cpu_s) if cpu_s > 0 else None,
        strain_max=max(d.strain_max for d in diags),
        strain_p95=diags[-1].strain_p95,
    )
    return line


# ----------------------------------------------------------------------------------------------
# JIT / cache start-up, each in a fresh interpreter.
# ----------------------------------------------------------------------------------------------
CHILD = r"""
import json, sys, time
t_spawn = float(sys.argv[1])
t_main = time.time()
sys.path.insert(0, sys.argv[2])
from selvedge_import import import_selvedge
import_selvedge()
from selvedge import solver
sys.path.insert(0, sys.argv[3])
from bench_solver import build_scene
t_import = time.time()
cloth, targets = build_scene(solver, 32, "serial", 1, 10, 1)
t_build = time.time()
cloth.step(pin_targets=targets(1))
t_frame = time.time()
cloth.settings.solve_mode = "colored"
t0 = time.time()
cloth.step(pin_targets=targets(2))
t_colored = time.time()
print(json.dumps({
    "interpreter_s": t_main - t_spawn, "import_s": t_import - t_main, "build_s": t_build - t_import,
    "first_frame_s": t_frame - t_build, "to_first_frame_s": t_frame - t_spawn,
    "first_colored_frame_s": t_colored - t0, "cache_dir": solver._numba_setup.CACHE_DIR}))
"""


def run_child(cache_dir: str) -> dict:
    env = dict(os.environ, SELVEDGE_CACHE_DIR=cache_dir)
    env.pop("NUMBA_CACHE_DIR", None)
    t_spawn = time.time()
    result = subprocess.run(
        [sys.executable, "-c", CHILD, repr(t_spawn), str(ROOT / "devtools"), str(Path(__file__).resolve().parent)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if result.returncode != 0:
        return {"error": result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed"}
    return {
        k: (round(v, 3) if isinstance(v, float) else v)
        for k, v in json.loads(result.stdout.strip().splitlines()[-1]).items()
    }


def jit_line() -> dict:
    with tempfile.TemporaryDirectory(prefix="selvedge-jit-") as cache_dir:
        cold = run_child(cache_dir)
        files = sum(len(f) for _, _, f in os.walk(cache_dir))
        warm = run_child(cache_dir)
    line = {
        "case": "jit",
        "grid": "32x32",
        "cold": cold,
        "cached": warm,
        "cache_files": files,
        "jit_s": cold.get("to_first_frame_s"),
        "cached_start_s": warm.get("to_first_frame_s"),
        "target_cached_start_s": TARGET_CACHED_START_S,
    }
    if warm.get("to_first_frame_s") is not None:
        line["cached_start_ok"] = warm["to_first_frame_s"] < TARGET_CACHED_START_S
    return line


def targets_line(n: int, results: list[dict]) -> dict:
    """How the targets fare on one grid: medians over the repeats (each repeat's colored / serial
    ratio is taken within the repeat, whose runs were close in time), with every run's figure."""

    def runs(mode, threads):
        return {r["repeat"]: r for r in results if (r["mode"], r["threads"]) == (mode, threads)}

    serial, colored2 = runs("serial", 1), runs("colored", 2)
    summary = {"case": "targets", "grid": f"{n}x{n}", "repeats": len(serial) or len(colored2)}
    if serial:
        per_s = [r["projections_per_s"] for r in serial.values()]
        summary["serial_projections_per_s"] = round(statistics.median(per_s))
        summary["serial_runs"] = per_s
        summary["serial_ok"] = summary["serial_projections_per_s"] >= TARGET_SERIAL_PROJECTIONS
        summary["serial_projections_per_cpu_s"] = round(
            statistics.median(r["projections_per_cpu_s"] for r in serial.values())
        )
    if colored2:
        per_s = [r["projections_per_s"] for r in colored2.values()]
        summary["colored2_projections_per_s"] = round(statistics.median(per_s))
        summary["colored2_runs"] = per_s
        # the target: 1.6x the serial target (40 M/s), i.e. 64 M/s
        summary["colored2_ok"] = (
            summary["colored2_projections_per_s"] >= TARGET_COLORED2_SPEEDUP * TARGET_SERIAL_PROJECTIONS
        )
    paired = [colored2[k]["projections_per_s"] / serial[k]["projections_per_s"] for k in serial if k in colored2]
    if paired:
        summary["colored2_speedup_vs_serial"] = round(statistics.median(paired), 2)
        summary["colored2_speedup_runs"] = [round(v, 2) for v in paired]
    return summary


def write_docs_table(results, argv) -> None:
    """This run's rows as the ``bench_solver`` section of docs/benchmarks.md (bench/_docs_table.py)."""
    from _docs_table import markdown_table, write_section

    header = ["vertices", "mode", "threads", "substeps x it", "ms/frame", "M projections/s", "P95 strain", "max strain"]
    rows = [
        [
            r["vertices"],
            r["mode"],
            r.get("threads", ""),
            f"{r['substeps']} x {r['iterations']}",
            round(r["ms_per_frame"], 2),
            round(r["projections_per_s"] / 1e6, 1),
            f"{100 * r['strain_p95']:.2f} %",
            f"{100 * r['strain_max']:.1f} %",
        ]
        for r in results
        if "error" not in r
    ]
    args = " ".join(sys.argv[1:] if argv is None else argv)
    write_section(
        "bench_solver", f".venv/bin/python bench/bench_solver.py {args}".strip(), markdown_table(header, rows)
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="sizes 32 and 64 only, few frames")
    parser.add_argument("--sizes", type=int, nargs="+", help="grid sizes (vertices per side)")
    parser.add_argument("--modes", nargs="+", choices=sorted(MODES), default=["serial", "colored1", "colored2"])
    parser.add_argument("--substeps", type=int, default=10, help="substeps per frame (default 10, the solver's)")
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument(
        "--bending",
        default="auto",
        choices=("auto", "dihedral", "isometric", "cross_edge"),
        help="bending model (default auto: isometric on this flat sheet)",
    )
    parser.add_argument("--warmup", type=int, default=2, help="frames run before timing (default 2)")
    parser.add_argument("--min-frames", type=int, default=3)
    parser.add_argument("--max-frames", type=int, default=24)
    parser.add_argument("--budget-s", type=float, default=4.0, help="time per case after --min-frames")
    parser.add_argument("--no-jit", action="store_true", help="skip the JIT / cache start-up line")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every grid and mode this many times, interleaved; the targets line then "
        "reports medians (runs on a shared 2-core machine vary by 10-20 %%)",
    )
    parser.add_argument(
        "--write-docs", action="store_true", help="write this run's table into docs/benchmarks.md (bench_solver)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.max_frames, args.budget_s = min(args.max_frames, 8), min(args.budget_s, 1.0)
    sizes = args.sizes or ([32, 64] if args.quick else [32, 64, 128, 256, 317])

    from selvedge_import import import_selvedge

    import_selvedge()
    import numba

    from selvedge import solver

    print(
        json.dumps(
            {
                "case": "env",
                "python": platform.python_version(),
                "numpy": __import__("numpy").__version__,
                "numba": numba.__version__,
                "cpus": os.cpu_count(),
                "numba_max_threads": numba.config.NUMBA_NUM_THREADS,
                "machine": platform.machine(),
                "solver_sha": source_fingerprint(),
                "threading_layer": _threading_layer(numba),
                "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                "gomp_spincount": os.environ.get("GOMP_SPINCOUNT"),
                "loadavg_1m": round(os.getloadavg()[0], 2),
            }
        ),
        flush=True,
    )
    results = []
    for repeat in range(1, args.repeat + 1):
        for n in sizes:
            for label in args.modes:
                line = run_case(solver, n, label, args)
                line["repeat"] = repeat
                results.append(line)
                print(json.dumps(line), flush=True)
    for n in sizes:
        summary = targets_line(n, [r for r in results if r["vertices"] == n * n and "error" not in r])
        if summary["repeats"]:  # some serial or colored2 run of this grid finished
            print(json.dumps(summary), flush=True)
    if not args.no_jit:
        print(json.dumps(jit_line()), flush=True)
    if args.write_docs:
        write_docs_table(results, argv)
    print(json.dumps({"case": "end", "loadavg_1m": round(os.getloadavg()[0], 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
