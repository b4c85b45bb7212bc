"""Honest evaluation of the learned network: does it buy quality per millisecond over pure XPBD?

Held-out scenes (``teacher.BENCH_SEEDS``, disjoint from training and test seeds) are rolled out
with the teacher protocol (64 substeps, the training data's budget) and then with every cell of
the matrix

    substeps x iterations x network mode (off / B / residual) x guidance strength (and the
    velocity-residual gain)

each from the same initial state and pin motion. Per cell (averaged over the scenes):
position error against the teacher (RMS over free vertices, mm; mean over the first 50 frames
and over the whole rollout), strain P95 (mean over frames) and max, penetrations (vertex-frames
more than 1 mm inside a collider at the frame end, summed over the scenes' rollouts; scenes carry
the randomised colliders of models/training/scenes.py, posed every frame exactly as in the
teacher data), projection ratio r_proj (mean), energy trend (J per second of
the total-energy slope, relative to the teacher's), ms/frame for the network and the solver
separately, and whether the anomaly guard switched the network off.

Outputs: ``out/bench_network/table.md``, ``results.json`` and ``error_vs_time.png`` (needs
matplotlib from requirements/train.txt), and the headline line: at equal error to the teacher,
is the best network configuration faster than the best pure-XPBD configuration, by what ratio,
with the network where ``--provider`` puts it (``auto``: on the GPU when onnxruntime has a CUDA
provider; the solver always runs on the CPU). The headline is also printed as a JSON line
(``"case": "headline"``). The GPU rows come from bench/bench_network_gpu.py on a CUDA machine.

    .venv/bin/python bench/bench_network.py                  # full matrix, 250 frames
    .venv/bin/python bench/bench_network.py --quick          # small matrix, 60 frames
    .venv/bin/python bench/bench_network.py --quick --write-docs   # and its table into docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "devtools"))
from selvedge_import import import_selvedge

import_selvedge()
from selvedge.models.coupling import LearnedCoupling
from selvedge.models.runtime import LearnedModel
from selvedge.models.training import teacher
from selvedge.models.training.scenes import KINDS, make_scene
from selvedge.solver.errors import SimulationError


def rollout(scene, substeps, iterations, frames, mode="off", model=None, strength=1.0, velocity_gain=0.0):
    cloth = teacher.make_cloth(scene, substeps, iterations, teacher.PROTOCOL["fps"])
    coupling = LearnedCoupling(
        cloth, model if mode != "off" else None, mode, strength=strength, velocity_gain=velocity_gain
    )
    xs, energy = [], []
    failed = None
    penetrations = 0
    handler = cloth.contact_handler
    for f in range(1, frames + 1):
        try:
            scene.place_colliders(handler, f, teacher.PROTOCOL["fps"])
            rec = coupling.step(scene.pin_targets(f, teacher.PROTOCOL["fps"]))
        except SimulationError as exc:
            failed = f"frame {f}: {exc}"
            break
        xs.append(cloth.x.copy())
        if handler is not None:
            free = cloth.inv_mass > 0
            penetrations += int((handler.analytic_signed_distance(cloth.x[free], 1.0) < -1e-3).sum())
        s = rec.solver
        energy.append(s.get("kinetic_energy_j", 0.0) + s.get("gravitational_energy_j", 0.0))
    hist = coupling.history
    return {
        "x": np.array(xs),
        "free": cloth.inv_mass > 0,
        "energy": np.array(energy),
        "failed": failed,
        "network_ms": float(np.median([r.network_ms for r in hist])) if hist else float("nan"),
        "solver_ms": float(np.median([r.solver_ms for r in hist])) if hist else float("nan"),
        "strain_p95": float(np.mean([r.strain_p95 for r in hist])) if hist else float("nan"),
        "strain_max": float(max(r.strain_max for r in hist)) if hist else float("nan"),
        "r_proj": float(np.mean([r.r_proj for r in hist if np.isfinite(r.r_proj)])) if hist else float("nan"),
        "guard_events": [e for e in coupling.events if "switched off" in e],
        "penetrations": penetrations,
        "world_edges": float(np.mean([r.world_edges for r in hist])) if hist else 0.0,
    }


def energy_slope(energy, fps):
    if len(energy) < 2:
        return float("nan")
    t = np.arange(len(energy)) / fps
    return float(np.polyfit(t, energy, 1)[0])


def device_label(model) -> str:
    """'CPU', 'GPU' or the stand-in's own label: where the network of this run ran."""
    label = getattr(model, "device_label", None)
    if label:
        return label
    return "GPU" if getattr(model, "provider", "") == "CUDAExecutionProvider" else "CPU"


def main(argv=None, model=None):
    """``model``: an object with ``run(feed)``, ``provider`` and ``provider_message`` (a
    :class:`LearnedModel`, or bench_network_gpu's labelled PyTorch stand-in) instead of loading one."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=250)
    ap.add_argument("--scenes", type=int, default=len(teacher.BENCH_SEEDS))
    ap.add_argument("--substeps", type=int, nargs="+", default=[4, 8, 16, 32])
    ap.add_argument("--iterations", type=int, nargs="+", default=[1, 2])
    ap.add_argument(
        "--variants",
        nargs="+",
        default=["1:1", "1:0", "0.5:0"],
        help="network variants STRENGTH:VELOCITY_GAIN (guidance strength; velocity residual gain)",
    )
    ap.add_argument("--quick", action="store_true", help="60 frames, 2 scenes, substeps 4 8 16, 1 iteration")
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument(
        "--provider",
        choices=("auto", "cpu"),
        default="auto",
        help="auto: the network on the GPU where onnxruntime has a CUDA provider; cpu: always on the CPU",
    )
    ap.add_argument("--write-docs", action="store_true", help="replace this bench's table in docs/benchmarks.md")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench_network")
    ap.add_argument(
        "--update-card",
        action="store_true",
        help="store the headline and matrix summary in models/metrics.json and rewrite models/README.md",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.frames, args.scenes, args.substeps, args.iterations, args.variants = 60, 2, [4, 8, 16], [1], ["1:0"]
    variants = [tuple(float(v) for v in item.split(":")) for item in args.variants]
    args.out.mkdir(parents=True, exist_ok=True)
    if model is None:
        model = LearnedModel(args.model, prefer_gpu=args.provider == "auto")
    device = device_label(model)
    print(model.provider_message)
    fps = teacher.PROTOCOL["fps"]
    scenes = [make_scene(s, KINDS[k % len(KINDS)]) for k, s in enumerate(list(teacher.BENCH_SEEDS)[: args.scenes])]
    t0 = time.perf_counter()
    refs = []
    for sc in scenes:
        ref = rollout(sc, teacher.PROTOCOL["teacher_substeps"], teacher.PROTOCOL["teacher_iterations"], args.frames)
        refs.append(ref)
        print(
            f"teacher: scene {sc.seed} ({sc.kind}, {len(sc.rest)} vertices, collider {sc.collider_kind}) "
            f"{ref['solver_ms']:.1f} ms/frame"
        )
    cells = []
    configs = [(s, i, "off", 0.0, 0.0) for s in args.substeps for i in args.iterations]
    configs += [
        (s, i, m, g, vg)
        for s in args.substeps
        for i in args.iterations
        for m in ("B", "residual")
        for g, vg in variants
    ]
    for s, i, mode, g, vg in configs:
        per = []
        for sc, ref in zip(scenes, refs):
            r = rollout(sc, s, i, args.frames, mode, model, g, vg)
            n = len(r["x"])
            d = np.linalg.norm(r["x"][:, r["free"]] - ref["x"][:n, r["free"]], axis=2) if n else np.zeros((1, 1))
            rms = np.sqrt((d**2).mean(axis=1)) if n else np.array([np.inf])
            per.append(
                {
                    "err_50_mm": 1e3 * float(rms[:50].mean()),
                    "err_all_mm": 1e3 * float(rms.mean()),
                    "err_last_mm": 1e3 * float(rms[-1]),
                    "frames_done": n,
                    "failed": r["failed"],
                    "network_ms": r["network_ms"],
                    "solver_ms": r["solver_ms"],
                    "strain_p95": r["strain_p95"],
                    "strain_max": r["strain_max"],
                    "r_proj": r["r_proj"],
                    "energy_slope_rel_j_s": energy_slope(r["energy"], fps) - energy_slope(ref["energy"][:n], fps),
                    "guard_events": r["guard_events"],
                    "penetrations": r["penetrations"],
                    "world_edges": r["world_edges"],
                }
            )
        cell = {"substeps": s, "iterations": i, "mode": mode, "strength": g, "velocity_gain": vg}
        for key in (
            "err_50_mm",
            "err_all_mm",
            "err_last_mm",
            "network_ms",
            "solver_ms",
            "strain_p95",
            "r_proj",
            "energy_slope_rel_j_s",
        ):
            cell[key] = float(np.mean([p[key] for p in per]))
        cell["strain_max"] = float(max(p["strain_max"] for p in per))
        cell["total_ms"] = cell["solver_ms"] + (cell["network_ms"] if mode != "off" else 0.0)
        cell["failed_scenes"] = sum(1 for p in per if p["failed"])
        cell["guard_off_scenes"] = sum(1 for p in per if p["guard_events"])
        cell["penetrations"] = int(sum(p["penetrations"] for p in per))
        cell["per_scene"] = per
        cells.append(cell)
        print(
            f"{s:3d} sub x {i} it  {mode:8s} g={g:.1f} vg={vg:.0f}: err50 {cell['err_50_mm']:7.2f} mm  err250 "
            f"{cell['err_all_mm']:7.2f} mm  strainP95 {cell['strain_p95']:.4f}  r_proj {cell['r_proj']:.3f}  "
            f"net {cell['network_ms']:.2f} ms  solver {cell['solver_ms']:.2f} ms  guard-off {cell['guard_off_scenes']}"
        )
    # the teacher is itself a pure-XPBD configuration (error 0 by definition): every network config has a rival
    teacher_cell = {
        "substeps": teacher.PROTOCOL["teacher_substeps"],
        "iterations": teacher.PROTOCOL["teacher_iterations"],
        "mode": "off",
        "strength": 0.0,
        "velocity_gain": 0.0,
        "err_50_mm": 0.0,
        "err_all_mm": 0.0,
        "err_last_mm": 0.0,
        "network_ms": 0.0,
        "solver_ms": float(np.mean([r["solver_ms"] for r in refs])),
        "strain_p95": float(np.mean([r["strain_p95"] for r in refs])),
        "strain_max": float(max(r["strain_max"] for r in refs)),
        "r_proj": float(np.mean([r["r_proj"] for r in refs])),
        "energy_slope_rel_j_s": 0.0,
        "failed_scenes": 0,
        "guard_off_scenes": 0,
        "penetrations": int(sum(r["penetrations"] for r in refs)),
        "per_scene": [],
        "teacher": True,
    }
    teacher_cell["total_ms"] = teacher_cell["solver_ms"]
    cells.insert(0, teacher_cell)
    headline = {}
    for metric in ("err_50_mm", "err_all_mm"):
        headline[metric] = equal_error_comparison(cells, metric)
    gpu_line = (
        "GPU: not measured yet: run `python bench/bench_network_gpu.py` on a CUDA machine "
        "(docs/design/network.md, section GPU)"
        if device == "CPU"
        else f"{device}: the rows above"
    )
    result = {
        "device": device,
        "frames": args.frames,
        "scenes": [
            {"seed": sc.seed, "kind": sc.kind, "vertices": len(sc.rest), "collider": sc.collider_kind} for sc in scenes
        ],
        "teacher_ms_per_frame": float(np.mean([r["solver_ms"] for r in refs])),
        "provider": model.provider,
        "cells": cells,
        "headline": headline,
        "gpu": gpu_line,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    (args.out / "results.json").write_text(json.dumps(result, indent=1, default=str))
    write_table(result, args.out / "table.md")
    plot(cells, args.out / "error_vs_time.png")
    for metric, h in headline.items():
        print(f"HEADLINE ({metric}, {device}): {h['line']}")
        print(
            json.dumps(
                {
                    "bench": "network",
                    "case": "headline",
                    "device": device,
                    "provider": model.provider,
                    "metric": metric,
                    "frames": args.frames,
                    "faster": h["faster"],
                    "ratio": h.get("ratio"),
                    "line": h["line"],
                }
            ),
            flush=True,
        )
    print(gpu_line)
    if args.update_card:
        update_card(result, args)
    if args.write_docs:
        write_docs(result, argv)
    return result


def write_docs(result, argv, path=None):
    """This bench's section of docs/benchmarks.md (or ``path``): the headline and one row per cell."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _docs_table import markdown_table, write_section

    command = " ".join(["python bench/bench_network.py", *(sys.argv[1:] if argv is None else argv)])
    header = [
        "substeps",
        "it",
        "mode",
        "g",
        "vg",
        "err 50 f (mm)",
        "err all (mm)",
        "strain P95",
        "r_proj",
        "net ms",
        "solver ms",
        "total ms",
        "guard off",
        "failed",
        "penetrations",
    ]
    rows = [
        [
            c["substeps"],
            c["iterations"],
            c["mode"] + (" (teacher)" if c.get("teacher") else ""),
            f"{c['strength']:.1f}",
            f"{c['velocity_gain']:.0f}",
            f"{c['err_50_mm']:.2f}",
            f"{c['err_all_mm']:.2f}",
            f"{c['strain_p95']:.4f}",
            f"{c['r_proj']:.3f}",
            f"{c['network_ms']:.2f}",
            f"{c['solver_ms']:.2f}",
            f"{c['total_ms']:.2f}",
            c["guard_off_scenes"],
            c["failed_scenes"],
            c["penetrations"],
        ]
        for c in result["cells"]
    ]
    device = result["device"]
    body = [
        f"{result['frames']} frames on {len(result['scenes'])} held-out scenes; network on {result['provider']} "
        f"({device}), solver on the CPU.",
        "",
    ]
    body += [f"**Headline ({m}, {device}):** {h['line']}" for m, h in result["headline"].items()]
    body += ["", result["gpu"], "", markdown_table(header, rows)]
    write_section("bench_network", command, "\n".join(body), *([path] if path else []))


def update_card(result, args):
    from selvedge.models.training.card import MODELS_DIR, write_card

    metrics = json.loads((MODELS_DIR / "metrics.json").read_text())
    best_pure = min(
        (c for c in result["cells"] if c["mode"] == "off" and not c["failed_scenes"] and not c.get("teacher")),
        key=lambda c: c["err_50_mm"],
    )
    budgets = sorted({(c["substeps"], c["iterations"]) for c in result["cells"] if c["mode"] != "off"})
    wins = []
    for b in budgets:
        off = next(c for c in result["cells"] if c["mode"] == "off" and (c["substeps"], c["iterations"]) == b)
        net = min(
            (c for c in result["cells"] if c["mode"] != "off" and (c["substeps"], c["iterations"]) == b),
            key=lambda c: c["err_50_mm"],
        )
        wins.append((b, off, net))
    better = [w for w in wins if w[2]["err_50_mm"] < w[1]["err_50_mm"]]
    n_variants = len({(c["mode"], c["strength"], c["velocity_gain"]) for c in result["cells"] if c["mode"] != "off"})
    verdict = (
        f"at the same solver budget the best of {n_variants} network variants has a lower error (first 50 frames) "
        f"than the one pure-XPBD run in {len(better)} of {len(wins)} budgets (best-of-{n_variants} selection on "
        f"{len(result['scenes'])} scenes; a variant whose guard switched the network off on some scenes counts "
        "with those scenes run partly on pure XPBD); "
        + "; ".join(
            f"{b[0]}x{b[1]}: off {o['err_50_mm']:.1f} mm vs best network {n['err_50_mm']:.1f} mm "
            f"({n['mode']} g={n['strength']} vg={n['velocity_gain']:.0f}, +{n['network_ms']:.1f} ms"
            + (f", guard off in {n['guard_off_scenes']} scene(s)" if n["guard_off_scenes"] else "")
            + ")"
            for b, o, n in wins
        )
    )
    metrics["bench"] = {
        "command": "python bench/bench_network.py"
        + (" --quick" if args.quick else "")
        + (f" --frames {args.frames}" if not args.quick and args.frames != 250 else ""),
        "scenes": ", ".join(
            f"{s['kind']} {s['vertices']}v (seed {s['seed']}, collider {s.get('collider', 'none')})"
            for s in result["scenes"]
        ),
        "frames": result["frames"],
        "matrix": f"substeps {args.substeps} x iterations {args.iterations} x mode off/B/residual x "
        f"strength:velocity_gain {args.variants}",
        "teacher_ms_per_frame": round(result["teacher_ms_per_frame"], 2),
        "most_accurate_pure_xpbd_below_teacher": f"{best_pure['substeps']}x{best_pure['iterations']}: "
        f"{best_pure['err_50_mm']:.2f} mm (first 50 frames), {best_pure['total_ms']:.2f} ms/frame",
        "same_budget_comparison": verdict,
        "headline_first_50_frames_cpu": result["headline"]["err_50_mm"]["line"],
        "headline_whole_rollout_cpu": result["headline"]["err_all_mm"]["line"],
        "gpu": result["gpu"],
        "table": "models/bench_network_table.md and models/bench_error_vs_time.png (copies of out/bench_network/)",
    }
    import shutil

    shutil.copy(args.out / "table.md", MODELS_DIR / "bench_network_table.md")
    if (args.out / "error_vs_time.png").exists():
        shutil.copy(args.out / "error_vs_time.png", MODELS_DIR / "bench_error_vs_time.png")
    (MODELS_DIR / "metrics.json").write_text(json.dumps(metrics, indent=1))
    write_card(metrics)


def pure_time_at_error(pure, err):
    """ms/frame pure XPBD needs for error ``err``: on its measured error-vs-time Pareto frontier
    (teacher included, error 0), linearly interpolated between the neighbouring frontier points.
    None when even the cheapest pure configuration is more accurate (then pure XPBD wins outright)."""
    pts = sorted((c["total_ms"], c["err"]) for c in pure)
    frontier = []
    for t, e in pts:
        if not frontier or e < frontier[-1][1]:
            frontier.append((t, e))
    if err >= frontier[0][1]:
        return None
    for (t0, e0), (t1, e1) in zip(frontier, frontier[1:]):
        if e1 <= err <= e0:
            return t0 + (t1 - t0) * (e0 - err) / (e0 - e1)
    return frontier[-1][0]


def equal_error_comparison(cells, metric):
    """Is the best network config faster than pure XPBD at the same error? Pure XPBD's time at the
    network's error is interpolated on the pure-XPBD Pareto frontier (substeps x iterations + teacher)."""
    pure = [dict(c, err=c[metric]) for c in cells if c["mode"] == "off" and c["failed_scenes"] == 0]
    name = lambda c: (
        f"{c['substeps']} substeps x {c['iterations']} it"
        + (f", {c['mode']} g={c['strength']} vg={c['velocity_gain']}" if c["mode"] != "off" else ", pure XPBD")
    )
    best = None
    for c in cells:
        if c["mode"] == "off" or c["failed_scenes"] or c["guard_off_scenes"]:
            continue
        t_pure = pure_time_at_error(pure, c[metric])
        ratio = 0.0 if t_pure is None else t_pure / c["total_ms"]
        if best is None or ratio > best["ratio"]:
            best = {"ratio": ratio, "network": c, "t_pure": t_pure}
    if best is None:
        return {"faster": False, "line": "NO: every network configuration failed or was switched off by the guard."}
    n = best["network"]
    cheapest = min(pure, key=lambda c: c["total_ms"])
    faster = best["ratio"] > 1.0
    if best["t_pure"] is None:
        line = (
            f"NO: even the best network config ({name(n)}: {n[metric]:.2f} mm, {n['total_ms']:.2f} ms/frame = "
            f"{n['network_ms']:.2f} network + {n['solver_ms']:.2f} solver) is less accurate than the cheapest pure "
            f"XPBD config ({name(cheapest)}: {cheapest[metric]:.2f} mm in {cheapest['total_ms']:.2f} ms/frame)."
        )
    else:
        line = (
            f"{'YES' if faster else 'NO'}: best network config ({name(n)}) reaches {n[metric]:.2f} mm in "
            f"{n['total_ms']:.2f} ms/frame ({n['network_ms']:.2f} network + {n['solver_ms']:.2f} solver); pure "
            f"XPBD reaches the same error in {best['t_pure']:.2f} ms/frame (interpolated on its error-vs-time "
            f"frontier): the network is {best['ratio']:.2f}x {'faster' if faster else 'the speed, i.e. slower'}."
        )
    return {
        "faster": faster,
        "ratio": best["ratio"],
        "line": line,
        "pure_ms_at_equal_error": best["t_pure"],
        "network": {
            k: n[k]
            for k in (
                "substeps",
                "iterations",
                "mode",
                "strength",
                "velocity_gain",
                metric,
                "total_ms",
                "network_ms",
                "solver_ms",
            )
        },
    }


def write_table(result, path):
    rows = [
        "| substeps | it | mode | g | vg | err 50 f (mm) | err all (mm) | strain P95 | strain max | r_proj | "
        "energy slope vs teacher (J/s) | net ms | solver ms | guard off | failed | penetrations |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in result["cells"]:
        rows.append(
            f"| {c['substeps']} | {c['iterations']} | {c['mode']} | {c['strength']:.1f} | {c['velocity_gain']:.0f} | {c['err_50_mm']:.2f} | "
            f"{c['err_all_mm']:.2f} | {c['strain_p95']:.4f} | {c['strain_max']:.3f} | {c['r_proj']:.3f} | "
            f"{c['energy_slope_rel_j_s']:+.4f} | {c['network_ms']:.2f} | {c['solver_ms']:.2f} | "
            f"{c['guard_off_scenes']} | {c['failed_scenes']} | {c['penetrations']} |"
        )
    head = [
        f"Held-out scenes: {result['scenes']}; {result['frames']} frames; teacher "
        f"{result['teacher_ms_per_frame']:.1f} ms/frame; network on {result['provider']}.",
        "",
    ]
    head += [f"**Headline ({m}, {result['device']}):** {h['line']}" for m, h in result["headline"].items()]
    head += [result["gpu"], ""]
    path.write_text("\n".join(head + rows) + "\n")


def plot(cells, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no matplotlib (requirements/train.txt): error_vs_time.png not written")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for mode, marker in (("off", "o"), ("B", "s"), ("residual", "^")):
        cs = [c for c in cells if c["mode"] == mode]
        ax.scatter(
            [c["total_ms"] for c in cs],
            [c["err_50_mm"] for c in cs],
            marker=marker,
            label={"off": "pure XPBD", "B": "network mode B", "residual": "network residual"}[mode],
        )
        for c in cs:
            ax.annotate(f"{c['substeps']}x{c['iterations']}", (c["total_ms"], c["err_50_mm"]), fontsize=6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("ms per frame (network + solver)")
    ax.set_ylabel("position error vs teacher, mean of first 50 frames (mm)")
    ax.legend()
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
