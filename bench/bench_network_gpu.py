"""The learned network on the GPU (issue 25): where its nodes run, ms/inference by mesh size on the
CUDA and CPU providers side by side, then the evaluation matrix with the network on the GPU.

Every result is a JSON line with ``"bench": "network_gpu"``:

1. ``environment``: the onnxruntime build and its providers, PyTorch and its CUDA device. Where
   onnxruntime has no CUDA provider it says so; ``--torch-standin`` then times the same network
   (the weights read from the ONNX file into models/training/network.py's GraphNet) in PyTorch on
   CUDA, every such row labelled ``stand-in``.
2. ``placement``: ``session.get_providers()`` and, from onnxruntime's profile, which provider ran
   each node (node count and kernel time per provider).
3. ``latency``: square grids of 4k, 16k, 64k and 256k vertices (64^2 ... 512^2), without world
   edges and with a sphere under the middle (about 14 % of the vertices get one), each size on
   ``cpu`` (onnxruntime's CPU provider, the shipped thread count: a user without a GPU),
   ``cuda`` (CUDA provider, ``session.run`` with NumPy inputs: every input copied every call),
   ``cuda-iobinding`` (``LearnedModel``'s I/O binding: mesh inputs on the GPU once, features up
   and residuals down every frame, which a solver on the CPU needs), ``cuda-resident`` (every
   input on the GPU and the output left there: the floor a GPU solver could reach), and the
   stand-in's ``torch-cuda`` / ``torch-cuda-resident``. Median ms/inference, and the largest
   difference of each output from the CPU provider's (the same network: ~1e-5 m/s^2).
4. ``headline``: bench/bench_network.py's evaluation (by default its ``--quick`` matrix) with the
   network on the GPU (CUDA provider with I/O binding, else the stand-in) and the solver on the
   CPU: its headline line is the GPU case.

    python bench/bench_network_gpu.py --torch-standin      # CUDA machine: ~4-6 min (docs/design/network.md, GPU)
    python bench/bench_network_gpu.py --dry-run --torch-standin   # anywhere, CPU: small sizes, 4-frame matrix
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "devtools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from selvedge_import import import_selvedge

import_selvedge()
from selvedge.models import runtime
from selvedge.models.graph import SPHERE, ColliderState, build_mesh_graph, model_inputs, world_edges
from selvedge.models.runtime import (
    CPU_PROVIDER,
    CUDA_PROVIDER,
    DEFAULT_MODEL_PATH,
    DEFAULT_THREADS,
    OUTPUT_NAME,
    STATIC_INPUTS,
    LearnedModel,
)
from selvedge.solver.materials import Material
from selvedge.solver.mesh import grid_mesh

INPUT_NAMES = [
    "node_features",
    "edge_features",
    "senders",
    "receivers",
    "incidence",
    "free_mask",
    "world_edge_features",
    "world_receivers",
    "world_incidence",
]
FULL_SIDES = (64, 128, 256, 512)  # 4k, 16k, 64k, 256k vertices
DRY_SIDES = (16, 32)
FRAME_DT = 1.0 / 24.0


def emit(case: str, **fields) -> dict:
    line = {"bench": "network_gpu", "case": case, **fields}
    print(json.dumps(line, default=str), flush=True)
    return line


# -- inputs ---------------------------------------------------------------------------------------
def grid_feeds(side: int, seed: int = 0) -> dict[str, dict]:
    """Input feeds of a side x side grid (1 m square, in the xy plane) in a perturbed moving state:
    ``{"no_world": feed, "world": feed}``, the second with a sphere (r 0.3 m) 2 cm into the middle of
    the sheet, so every vertex within 5 cm of its surface gets a world edge. Latency does not depend
    on the values; the graph has no pins (the nearest-pin features are zero)."""
    pos, faces, _ = grid_mesh(side, side, 1.0, 1.0)
    tris = np.asarray(faces, dtype=np.int64)
    pairs = np.sort(np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]), axis=1)
    edges = np.unique(pairs, axis=0)
    n = len(pos)
    graph = build_mesh_graph(pos, edges, np.ones(n), np.full(n, 1e-3), Material())
    rng = np.random.default_rng(seed)
    x = pos + rng.normal(0.0, 1e-3, pos.shape)
    v = rng.normal(0.0, 0.3, pos.shape)
    centre = np.array([[0.5, 0.5, -0.28]])
    sphere = ColliderState(
        np.array([SPHERE]),
        np.array([[0.3, 0.0, 0.0]]),
        centre,
        np.array([[1.0, 0, 0, 0]]),
        centre + [0.0, 0.0, 0.01],
        np.array([[1.0, 0, 0, 0]]),
        np.array([0.004]),
    )
    world = world_edges(sphere, x, v, FRAME_DT, graph.free)
    return {"no_world": model_inputs(graph, x, v, FRAME_DT), "world": model_inputs(graph, x, v, FRAME_DT, world=world)}


def median_ms(fn, repeats: int | None = None, warmup: int = 2, budget_s: float = 3.0) -> float:
    """Median wall time of ``fn`` in ms after ``warmup`` calls; ``repeats`` None: as many calls as fit
    in ``budget_s`` judged by the last warm-up call (3 to 50), so a 256k-vertex CPU row stays short."""
    t = 0.0
    for _ in range(warmup):
        t0 = time.perf_counter()
        fn()
        t = time.perf_counter() - t0
    if repeats is None:
        repeats = int(np.clip(budget_s / max(t, 1e-6), 3, 50))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - t0))
    return float(np.median(times))


# -- the PyTorch stand-in -------------------------------------------------------------------------
class TorchStandIn:
    """The shipped network (its ONNX weights) in PyTorch on ``device``, with LearnedModel's interface:
    ``run(feed)`` -> (N,6) float64, ``provider``, ``provider_message``; the mesh inputs stay on the
    device between calls, as with I/O binding. A labelled stand-in for onnxruntime's CUDA provider."""

    def __init__(self, path=DEFAULT_MODEL_PATH, device: str = "cuda"):
        import onnx
        import torch
        from onnx import numpy_helper

        from selvedge.models.training.network import GraphNet

        proto = onnx.load(str(path))
        meta = {p.key: p.value for p in proto.metadata_props}
        net = GraphNet(int(meta["latent"]), int(meta["steps"]), float(meta["accel_bound_m_s2"]))
        weights = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
        net.load_state_dict({name: torch.as_tensor(weights[name].copy()) for name in net.state_dict()})
        self.torch, self.device = torch, torch.device(device)
        self.net = net.eval().to(self.device)
        where = "GPU" if self.device.type == "cuda" else "CPU"
        self.provider = f"torch-{self.device.type}"
        self.device_label = f"{where} (PyTorch stand-in)"
        name = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else platform.machine()
        self.provider_message = (
            f"learned network runs in PyTorch {torch.__version__} on {device} ({name}): a "
            "stand-in for onnxruntime's CUDA provider, which is not installed here"
        )
        self._static: dict[str, tuple] = {}
        self.last_ms = 0.0

    def tensors(self, feed) -> list:
        out = []
        for name in INPUT_NAMES:
            value = feed[name]
            if name in STATIC_INPUTS:
                held = self._static.get(name)
                if held is None or held[0] is not value:
                    held = (value, self.torch.from_numpy(np.ascontiguousarray(value)).to(self.device))
                    self._static[name] = held
                out.append(held[1])
            else:
                out.append(self.torch.from_numpy(np.ascontiguousarray(value)).to(self.device))
        return out

    def forward(self, args):
        with self.torch.inference_mode():
            return self.net(*args)

    def run(self, feed) -> np.ndarray:
        t0 = time.perf_counter()
        out = self.forward(self.tensors(feed)).double().cpu().numpy()  # .cpu() waits for the device
        self.last_ms = 1e3 * (time.perf_counter() - t0)
        return out

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)


# -- parts ----------------------------------------------------------------------------------------
def environment(ort) -> dict:
    torch_info = {"torch": None}
    try:
        import torch

        torch_info = {
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "torch_cuda_device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        }
    except ImportError:
        pass
    available = list(ort.get_available_providers())
    note = (
        "onnxruntime's CUDA provider is available"
        if CUDA_PROVIDER in available
        else f"NO CUDA PROVIDER: {runtime.cuda_build(ort)} has only {available}; GPU rows need onnxruntime-gpu "
        "(docs/design/network.md, section GPU) or --torch-standin (PyTorch on CUDA, labelled stand-in)"
    )
    return emit(
        "environment",
        python=platform.python_version(),
        onnxruntime=ort.__version__,
        build=runtime.cuda_build(ort),
        available_providers=available,
        cpu_count=os.cpu_count(),
        loadavg_1m=round(os.getloadavg()[0], 2),
        note=note,
        **torch_info,
    )


def placement(model: LearnedModel, feed) -> dict:
    """Which provider ran each node: onnxruntime's profile of two inferences (node events name their provider)."""
    for _ in range(2):
        model.run(feed)
    profile = Path(model.session.end_profiling())
    try:
        events = json.loads(profile.read_text())
    finally:
        profile.unlink(missing_ok=True)
    nodes, micros = defaultdict(set), defaultdict(float)
    for e in events:
        args = e.get("args", {})
        if e.get("cat") == "Node" and "provider" in args and e.get("name", "").endswith("_kernel_time"):
            nodes[args["provider"]].add(e["name"][: -len("_kernel_time")])
            micros[args["provider"]] += float(e.get("dur", 0.0)) / 2.0
    return emit(
        "placement",
        session_providers=model.session.get_providers(),
        provider=model.provider,
        nodes_per_provider={k: len(v) for k, v in nodes.items()},
        kernel_ms_per_inference={k: round(v / 1e3, 4) for k, v in micros.items()},
        cpu_nodes=sorted(nodes.get(CPU_PROVIDER, ())) if model.provider == CUDA_PROVIDER else [],
    )


def resident_runner(model: LearnedModel, feed):
    """Every input as an OrtValue in the session's device memory and the output bound there: only
    the network's own time. Returns (run, output) with ``output()`` the residuals copied back."""
    ort, device = model._ort, model.device
    binding = model.session.io_binding()
    held = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(feed[name]), device, 0) for name in INPUT_NAMES]
    for name, value in zip(INPUT_NAMES, held):
        binding.bind_ortvalue_input(name, value)
    n = feed["node_features"].shape[0]
    out = ort.OrtValue.ortvalue_from_shape_and_type((n, runtime.N_OUT), np.float32, device, 0)
    binding.bind_ortvalue_output(OUTPUT_NAME, out)

    def run():
        model.session.run_with_iobinding(binding)
        binding.synchronize_outputs()

    def output():
        return binding.copy_outputs_to_cpu()[0]

    run.inputs = held  # the device copies live as long as the runner
    return run, output


def ort_rows(model: LearnedModel, feed, reference, reps, common, bound_modes: bool) -> list[dict]:
    """session.run with NumPy inputs; with ``bound_modes`` also I/O binding and all-resident."""
    tag = "cuda" if model.provider == CUDA_PROVIDER else "cpu"
    extra = {"threads": model.threads} if tag == "cpu" else {}
    plain = lambda: model.session.run([OUTPUT_NAME], feed)[0]
    rows = [
        emit(
            "latency",
            mode=tag,
            provider=model.provider,
            ms=median_ms(plain, reps),
            max_abs_diff_vs_cpu=float(np.abs(plain() - reference).max()),
            **extra,
            **common,
        )
    ]
    if bound_modes:
        bound = lambda: model._run_bound(feed)
        rows.append(
            emit(
                "latency",
                mode=f"{tag}-iobinding",
                provider=model.provider,
                ms=median_ms(bound, reps),
                max_abs_diff_vs_cpu=float(np.abs(bound() - reference).max()),
                **extra,
                **common,
            )
        )
        run, output = resident_runner(model, feed)
        ms = median_ms(run, reps)
        rows.append(
            emit(
                "latency",
                mode=f"{tag}-resident",
                provider=model.provider,
                ms=ms,
                max_abs_diff_vs_cpu=float(np.abs(output() - reference).max()),
                **extra,
                **common,
            )
        )
    return rows


def standin_rows(standin: TorchStandIn, feed, reference, reps, common) -> list[dict]:
    """The stand-in with NumPy inputs and outputs (as the solver needs), and with everything resident."""
    kind = standin.device.type
    rows = [
        emit(
            "latency",
            mode=f"torch-{kind}",
            provider=standin.provider,
            stand_in=True,
            ms=median_ms(lambda: standin.run(feed), reps),
            max_abs_diff_vs_cpu=float(np.abs(standin.run(feed) - reference).max()),
            **common,
        )
    ]
    args = standin.tensors(feed)

    def resident():
        standin.forward(args)
        standin.synchronize()

    rows.append(
        emit(
            "latency",
            mode=f"torch-{kind}-resident",
            provider=standin.provider,
            stand_in=True,
            ms=median_ms(resident, reps),
            **common,
        )
    )
    return rows


def latency(sides, cpu_model, cuda_model, standin, dry_run: bool, repeats: int | None = None):
    rows = []
    for side in sides:
        feeds = grid_feeds(side)
        for world, feed in feeds.items():
            n, e, w = feed["node_features"].shape[0], feed["edge_features"].shape[0], feed["world_receivers"].shape[0]
            reps = repeats
            reference = cpu_model.session.run([OUTPUT_NAME], feed)[0]
            common = {"vertices": n, "edges": e, "world_edges": w, "world": world == "world"}
            # the CPU's binding modes only where they stand in for the GPU's (to test them without one)
            rows += ort_rows(cpu_model, feed, reference, reps, common, bound_modes=dry_run and cuda_model is None)
            if cuda_model is not None:
                rows += ort_rows(cuda_model, feed, reference, reps, common, bound_modes=True)
            if standin is not None:
                rows += standin_rows(standin, feed, reference, reps, common)
        del feeds
    return rows


def latency_table(rows) -> str:
    """Markdown: one row per (vertices, world edges), one column per mode."""
    from _docs_table import markdown_table

    modes = list(dict.fromkeys(r["mode"] for r in rows))
    keys = list(dict.fromkeys((r["vertices"], r["world_edges"]) for r in rows))
    cells = {(r["vertices"], r["world_edges"], r["mode"]): r["ms"] for r in rows}
    header = ["vertices", "world edges"] + [f"{m} ms" + (" (stand-in)" if m.startswith("torch") else "") for m in modes]
    body = [[n, w] + [f"{cells[(n, w, m)]:.2f}" if (n, w, m) in cells else "-" for m in modes] for n, w in keys]
    return markdown_table(header, body)


def docs_body(result) -> str:
    env = result["environment"]
    lines = [
        f"onnxruntime {env['onnxruntime']} ({env['build']}), providers {env['available_providers']}; torch "
        f"{env.get('torch')} (CUDA {env.get('torch_cuda')}, {env.get('torch_cuda_device')}). Median ms/inference; "
        "`stand-in` columns are PyTorch, not onnxruntime.",
        "",
        result["latency_table"],
    ]
    matrix = result.get("matrix")
    if matrix:
        lines += [
            "",
            f"Evaluation matrix (`bench/bench_network.py {' '.join(matrix['args'])}`), network on "
            f"{matrix['provider']} ({matrix['device']}), solver on the CPU:",
            "",
        ]
        lines += [f"- **{metric}:** {h['line']}" for metric, h in matrix["headline"].items()]
    return "\n".join(lines)


def publish(result, args) -> None:
    """--write-docs / --update-card with ``result`` (this run's, or a device run's latency.json)."""
    if args.write_docs:
        from _docs_table import write_section

        write_section("bench_network_gpu", result["command"], docs_body(result))
    if args.update_card:
        update_card(result, result["command"])


def update_card(result, command) -> None:
    from _docs_table import host_line

    from selvedge.models.training.card import MODELS_DIR, write_card

    metrics_path = MODELS_DIR / "metrics.json"
    metrics = json.loads(metrics_path.read_text())
    matrix = result.get("matrix") or {}
    env = result["environment"]
    metrics["gpu"] = {
        "command": command,
        "host": f"{host_line()}; {env.get('torch_cuda_device')}",
        "provider": matrix.get("provider", "-"),
        "latency_table": result["latency_table"],
        "headline": {m: h["line"] for m, h in matrix.get("headline", {}).items()},
    }
    metrics_path.write_text(json.dumps(metrics, indent=1))
    write_card(metrics)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help=f"small grids {DRY_SIDES} and a 4-frame, one-scene matrix: tests the script on any machine",
    )
    ap.add_argument(
        "--torch-standin",
        action="store_true",
        help="where onnxruntime has no CUDA provider, time the same network in PyTorch (CUDA if torch "
        "has it, else the CPU in --dry-run), labelled stand-in",
    )
    ap.add_argument("--sides", type=int, nargs="+", default=None, help=f"grid sides (default {FULL_SIDES})")
    ap.add_argument("--cpu-threads", type=int, default=DEFAULT_THREADS)
    ap.add_argument("--repeats", type=int, default=None, help="timed calls per row (default: ~3 s worth, 3-50)")
    ap.add_argument("--skip-matrix", action="store_true")
    ap.add_argument(
        "--matrix-args",
        default=None,
        help="arguments for bench/bench_network.py (default --quick; --dry-run: 4 frames, 1 scene)",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench_network_gpu")
    ap.add_argument("--write-docs", action="store_true", help="replace this bench's table in docs/benchmarks.md")
    ap.add_argument(
        "--update-card",
        action="store_true",
        help='store the GPU rows in models/metrics.json ("gpu") and rewrite the model card',
    )
    ap.add_argument(
        "--from-json",
        type=Path,
        default=None,
        help="measure nothing: take the results from a latency.json a device run wrote (for "
        "--write-docs / --update-card here, after the device run)",
    )
    args = ap.parse_args(argv)
    given = list(sys.argv[1:] if argv is None else argv)
    if "--out" in given:  # where the files went is no part of the command to rerun
        del given[given.index("--out") : given.index("--out") + 2]
    command = " ".join(["python bench/bench_network_gpu.py", *given])
    if args.from_json is not None:
        result = json.loads(args.from_json.read_text())
        publish(result, args)
        return result
    args.out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    with contextlib.suppress(ImportError):
        import torch  # loads its CUDA libraries first, which onnxruntime-gpu can then reuse
    ort = runtime._onnxruntime()
    env = environment(ort)
    cpu_model = LearnedModel(threads=args.cpu_threads, prefer_gpu=False)
    cuda_model = None
    if CUDA_PROVIDER in env["available_providers"]:
        cuda_model = LearnedModel(prefer_gpu=True, enable_profiling=True)
        print(cuda_model.provider_message, flush=True)
        placement(cuda_model, grid_feeds(64 if not args.dry_run else 16)["world"])
        if cuda_model.provider != CUDA_PROVIDER:
            cuda_model = None
    else:
        emit(
            "placement",
            session_providers=cpu_model.session.get_providers(),
            provider=cpu_model.provider,
            note="no CUDA provider: every node runs on the CPU provider",
        )
    standin = None
    if cuda_model is None and args.torch_standin:
        import torch

        device = "cuda" if torch.cuda.is_available() else ("cpu" if args.dry_run else None)
        if device is None:
            emit("standin", note="PyTorch has no CUDA device either: no GPU rows")
        else:
            standin = TorchStandIn(device=device)
            print(standin.provider_message, flush=True)
    elif cuda_model is None:
        print(
            "no GPU rows: onnxruntime has no working CUDA provider; pass --torch-standin to time the same network "
            "in PyTorch on CUDA (labelled stand-in)",
            flush=True,
        )
    sides = args.sides or (DRY_SIDES if args.dry_run else FULL_SIDES)
    rows = latency(sides, cpu_model, cuda_model, standin, args.dry_run, args.repeats)
    table = latency_table(rows)
    print(table, flush=True)
    result = {"command": command, "environment": env, "latency": rows, "latency_table": table}
    gpu_model = cuda_model or standin or (cpu_model if args.dry_run else None)
    if not args.skip_matrix and gpu_model is not None:
        import bench_network

        matrix_args = (
            args.matrix_args.split()
            if args.matrix_args is not None
            else ["--frames", "4", "--scenes", "1", "--substeps", "4", "--iterations", "1", "--variants", "1:0"]
            if args.dry_run
            else ["--quick"]
        )
        matrix = bench_network.main(matrix_args + ["--out", str(args.out / "matrix")], model=gpu_model)
        result["matrix"] = {
            "args": matrix_args,
            "device": matrix["device"],
            "provider": matrix["provider"],
            "headline": matrix["headline"],
        }
    elif gpu_model is None:
        print("matrix not run: no GPU network (no CUDA provider, no --torch-standin)", flush=True)
    result["seconds"] = round(time.perf_counter() - t_start, 1)
    (args.out / "latency.json").write_text(json.dumps(result, indent=1, default=str))
    publish(result, args)
    emit("end", seconds=result["seconds"], loadavg_1m=round(os.getloadavg()[0], 2))
    return result


if __name__ == "__main__":
    main()
