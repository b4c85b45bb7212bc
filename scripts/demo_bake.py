"""Headless demo bake: a cotton cloth pinned at two corners, one corner moving; writes PC2 + JSON.

Run through ``./scripts/demo.sh`` (sets up .venv) or ``.venv/bin/python scripts/demo_bake.py``.
The cache holds the start pose at frame 1 and one sample per simulated frame after it, so it
plays in Blender's Mesh Cache modifier (format PC2, frame start 1) on a grid with the same
vertex order (``grid_mesh(resolution, resolution)``: x fastest, then y).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "devtools"))
from selvedge_import import import_selvedge

import_selvedge()
import numpy as np

from selvedge.solver import Cloth, ClothOptions, SimulationError, SolverSettings, grid_mesh, preset
from selvedge.solver.io_pc2 import PC2Writer, write_sidecar
from selvedge.solver.settings import SOLVE_MODES


def smoothstep(t: float) -> float:
    t = min(1.0, max(0.0, t))
    return t * t * (3.0 - 2.0 * t)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=48, help="simulated frames (default 48)")
    parser.add_argument("--resolution", type=int, default=64, help="vertices per side (default 64)")
    parser.add_argument("--fps", type=float, default=24.0)
    parser.add_argument("--size", type=float, default=1.0, help="cloth side length in metres (default 1)")
    parser.add_argument("--preset", default="cotton")
    parser.add_argument("--substeps", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--mode", default="auto", choices=SOLVE_MODES)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "demo", help="output folder (default out/demo)")
    args = parser.parse_args(argv)
    if args.frames < 1 or args.resolution < 2:
        parser.error("--frames must be >= 1 and --resolution >= 2")

    n = args.resolution
    # A horizontal sheet 1 m above the ground; the two corners of its far edge (y = size) are pinned.
    positions, faces, uvs = grid_mesh(n, n, args.size, args.size, origin=(0.0, 0.0, 1.0))
    fixed_corner, moving_corner = (n - 1) * n, n * n - 1
    pins = np.zeros(n * n)
    pins[[fixed_corner, moving_corner]] = 1.0
    material = preset(args.preset)
    settings = SolverSettings(substeps=args.substeps, iterations=args.iterations, solve_mode=args.mode, fps=args.fps)
    options = ClothOptions()
    t_build = time.perf_counter()
    cloth = Cloth(positions, faces, material=material, options=options, settings=settings, pin_weights=pins, uvs=uvs)
    build_s = time.perf_counter() - t_build

    # The moving corner slides 40 % of the way towards the fixed one and lifts 0.2 m (eased), then holds.
    start = positions[[fixed_corner, moving_corner]].copy()  # same order as cloth.pinned_vertices

    def targets(frame: int) -> np.ndarray:
        s = smoothstep(frame / max(1, int(0.75 * args.frames)))
        t = start.copy()
        t[1] += s * np.array([-0.4 * args.size, 0.0, 0.2 * args.size])
        return t

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    pc2_path, json_path = out / "cloth.pc2", out / "cloth.json"
    diagnostics, wall_ms = [], []
    try:
        with PC2Writer(pc2_path, num_points=n * n, start_frame=1.0) as cache:
            cache.write_frame(cloth.positions)
            for frame in range(1, args.frames + 1):
                t0 = time.perf_counter()
                diag = cloth.step(pin_targets=targets(frame))
                wall_ms.append(1e3 * (time.perf_counter() - t0))
                diagnostics.append(diag)
                cache.write_frame(cloth.positions)
    except SimulationError as error:
        print(f"bake failed, no cache written: {error}", file=sys.stderr)
        return 1

    strain_max = max(d.strain_max for d in diagnostics)
    worst_frame = max(diagnostics, key=lambda d: d.strain_max).frame
    solve_ms = [d.timings_ms["total"] for d in diagnostics]
    settings_doc = {
        "scene": "grid pinned at two corners, one corner moving",
        "resolution": n,
        "size_m": args.size,
        "frames": args.frames,
        "fps": args.fps,
        "pinned_vertices": cloth.pinned_vertices.tolist(),
        "moving_pin": moving_corner,
        "material": dataclasses.asdict(material),
        "options": dataclasses.asdict(options),
        "solver": dataclasses.asdict(settings),
        "constraints": {c.name: c.count for c in cloth.constraint_sets},
        "bending_model": cloth.bending_model,
        "warnings": cloth.warnings,
        "pc2_start_frame": 1,
        "pc2_samples": args.frames + 1,
    }
    write_sidecar(json_path, settings_doc, diagnostics, extra={"cache": pc2_path.name})

    drop = float(positions[:, 2].mean() - cloth.positions[:, 2].mean())
    print(
        f"Selvedge demo: {n}x{n} {material.name} cloth ({n * n} vertices, {cloth.constraint_count} constraints), "
        f"{args.frames} frames at {args.fps:g} fps, {settings.substeps} substeps x {settings.iterations} iteration(s), "
        f"{settings.solve_mode} solve"
    )
    print(
        f"  build {1e3 * build_s:.0f} ms; first frame {wall_ms[0]:.0f} ms (includes any JIT compile); "
        f"then {np.mean(wall_ms[1:] or wall_ms):.1f} ms/frame ({np.mean(solve_ms[1:] or solve_ms):.1f} ms solve "
        f"+ diagnostics)"
    )
    print(
        f"  max edge strain {100 * strain_max:.1f} % (frame {worst_frame}); P95 strain at the end "
        f"{100 * diagnostics[-1].strain_p95:.2f} %; mean height fell {drop:.3f} m"
    )
    for w in cloth.warnings:
        print(f"  warning: {w}")
    print(f"  wrote {pc2_path} and {json_path}")
    summary = {
        "frames": args.frames,
        "vertices": n * n,
        "constraints": cloth.constraint_count,
        "ms_per_frame": round(float(np.mean(wall_ms)), 3),
        "ms_per_frame_after_first": round(float(np.mean(wall_ms[1:] or wall_ms)), 3),
        "first_frame_ms": round(wall_ms[0], 3),
        "max_strain": strain_max,
        "final_strain_p95": diagnostics[-1].strain_p95,
        "pc2": str(pc2_path),
        "sidecar": str(json_path),
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
