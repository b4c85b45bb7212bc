"""Write models/README.md (the model card) from models/metrics.json. No torch needed."""

from __future__ import annotations

import json
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parents[1]


def write_card(metrics: dict | None = None, path: Path | None = None) -> str:
    metrics = metrics or json.loads((MODELS_DIR / "metrics.json").read_text())
    p, m, tr = metrics["protocol"], metrics["model"], metrics["train"]
    ho, fit = metrics["held_out"], metrics.get("train_fit", {})
    agree = metrics["onnx_vs_pytorch"]
    bench = metrics.get("bench")
    lines = [
        "# Selvedge learned network: model card",
        "",
        "`selvedge_gnn.onnx` is a small encode-process-decode graph network (MeshGraphNets style) that predicts, "
        "from a cloth's frame-start state, the residual accelerations `r_x`, `r_v` (m/s^2) between the project's own XPBD "
        f"solver at a cheap budget ({p['cheap_substeps']} substeps x {p['cheap_iterations']} iteration) and at a "
        f"teacher budget ({p['teacher_substeps']} substeps x {p['teacher_iterations']} iteration): "
        "`r_x dt^2 = x_teacher(t+1) - x_cheap(t+1)` and `r_v dt = v_teacher(t+1) - v_cheap(t+1)`, both stepped from the same teacher state (output `residual[N,6]` = r_x, r_v). "
        f"Besides the mesh edges it sees colliders through world edges (closest points on analytic collider surfaces "
        f"within {p.get('world_radius_m', 0.05) * 100:.0f} cm of a vertex). It is used by "
        "`models/coupling.py` in mode B (added to gravity in every substep, then XPBD projects) or residual mode "
        "(added after the cheap XPBD frame, then a cheap stretch/pin/contact projection). XPBD keeps pins, "
        "stretch limits (tethers) and contacts in both modes.",
        "",
        "Written by `python -m models.training.train` (`scripts/train_network.sh`), then completed by "
        "`python -m models.training.measure_latency`, `python bench/bench_network.py --update-card` and "
        "`python -m models.training.size_sweep` (training rewrites metrics.json from scratch, so run the others after "
        "it; `python -m models.training.card` rewrites this file from metrics.json); do not edit by hand.",
        "",
        "## Network",
        "",
        f"- latent width {m['latent']}, {m['steps']} message-passing steps, {m['parameters']} parameters, "
        f"{m['bytes']} bytes, sha256 `{m['sha256'][:16]}...`.",
        "- inputs (raw physical units; normalisation mean/std are constants inside the ONNX graph, their hash is "
        "in the metadata `stats_sha256`): `node_features[N,17]` (velocity, speed, node type one-hot "
        "free/kinematic/soft-pin, scaled inverse mass, log10 stretch/bend compliance and density, frame dt, "
        "gravity z, offset from and rest geodesic distance to the nearest hard pin), `edge_features[E,9]` "
        "(rest-space and world-space relative displacement and lengths, strain), `senders[E]`, `receivers[E]`, "
        "`incidence[N,K]` (padded table of incoming edges; message passing is Gather + ReduceSum, no scatter), "
        "`free_mask[N,1]`, and world edges `world_edge_features[W,9]` (vector from the vertex to the closest "
        "collider surface point and its length, signed distance to the shape, contact gap = cloth thickness + "
        "collider skin, surface velocity relative to the vertex velocity; one edge per vertex and analytic "
        f"collider (plane/sphere/capsule/box) or triangle-mesh collider (closest triangle) or signed distance grid (p - phi grad phi) whose surface is within `WORLD_RADIUS_M` = {p.get('world_radius_m', 0.05)} m, "
        "taken at the frame-start pose; the surface velocity is that surface point's motion to the frame-end pose "
        "/ dt), `world_receivers[W]`, `world_incidence[N,KW]` (padded table, pad id W). World edges have their own "
        "encoder and per-step update MLP (edge latent + receiver latent); their messages are summed onto the "
        "receiving vertex with the same Gather + ReduceSum and enter the node update next to the mesh messages. "
        "Zero world edges (no colliders near) are a valid input: "
        "W = 0 and a table of pad ids. `models/coupling.py` queries the cloth's contact handler (`Colliders`) "
        "at the start of every frame. Output `residual[N,6]`: bounded by `bound * tanh(a / bound)`, kinematic rows zero.",
        "- ONNX opset 18, dynamic N, E, K, W, KW (dynamo exporter; W = 0 tested). Only relative quantities: the features "
        "(world edges included) are translation invariant (tested).",
        "",
        "## Data",
        "",
        f"- Teacher: Selvedge XPBD, {p['fps']} fps, {p['teacher_substeps']} substeps x {p['teacher_iterations']} "
        f"iteration, solve mode `{p['solve_mode']}` (deterministic), order: {p['solve_order']}, bending "
        f"`{p['bending_model']}`. Strain is still falling at 64 substeps (P95 0.0019 vs 0.0008 at 128 on a "
        "leather cape); 64 was chosen for generation time, so the teacher is 'expensive XPBD', not converged.",
        f"- Scenes (`models/training/scenes.py`, one integer seed each): grids of several resolutions and aspect "
        "ratios, jittered irregular triangulations, capes pinned along an edge, skirt-like open cylinders pinned "
        "at the waist; pins at corners/edge/one corner, moving sinusoidally in ~60 % of scenes; material presets "
        "with stretch compliance x10^U(-0.5,0.5), bending x10^U(-1,1), density x10^U(-0.3,0.3); random tilt "
        "and initial velocity. Colliders (own random stream per seed): none (~25 %), a static sphere, a static "
        "capsule, or a box moving sinusoidally (0.1-0.3 m, 0.3-0.6 Hz) into the cloth's swing plane and back; "
        "sheets get them on the far side of the plane they swing through, skirts get a ball or leg-like capsule "
        "inside or a box coming in from the side; never overlapping the cloth at the start, so contact comes from "
        "the motion. Both budgets run them in a `Colliders` contact handler (cloth thickness 4 mm) posed every "
        f"frame by `Scene.place_colliders` (same protocol). {p['frames']} frames per trajectory."
        + (
            f" Training trajectories per collider kind: {metrics['held_out_by_colliders']['collider_kinds_train']}."
            if metrics.get("held_out_by_colliders")
            else ""
        ),
        f"- Split by trajectory (scene seed), never by frame: train seeds {p['train_seeds'][0]}..{p['train_seeds'][1]}, "
        f"test seeds {p['test_seeds'][0]}..{p['test_seeds'][1]}, bench seeds 2000..2003.",
        "- Storage: one compressed `.npz` per trajectory (float32 x, v, x_cheap, v_cheap; colliders are rebuilt from the seed) under "
        "`out/network_data/<protocol hash>/` with `protocol.json` (regenerated deterministically when absent).",
        "",
        "## Training",
        "",
        f"- Loss: one-step supervision of both residuals in normalised output units (MSE over free vertices) "
        f"+ {p.get('projection_weight', 0)} x residual mode unrolled over {p.get('unroll_frames', 1)} consecutive "
        "frames with the XPBD projection in the loop, summed over the frames: each frame runs the cheap XPBD "
        "budget (the Numba solver with the scene's pins and colliders; the stored cheap step for the first frame), "
        "adds the network's r_x dt^2, projects with the runtime's Jacobi stretch projection written in PyTorch "
        "(`models/training/projection.py`, equal to the Numba kernels to 1e-12 in tests), sets v = v_cheap + "
        "(x_projected - x_proposal) / dt (the runtime default velocity_gain = 0) and is compared with the teacher "
        "frame (position and velocity); its projected state becomes the next frame's input, **detached** "
        "(features rebuilt in NumPy), so each frame's loss trains the network on states it produced itself but "
        "does not back-propagate into earlier frames; "
        f"+ {p.get('projection_size_weight', 0)} x the projection-size penalty "
        "|x_projected - x_proposal|^2 summed over the unrolled frames (002 sec. 5). Adam, lr 1e-3 decaying to 5e-5, batch of 8 frames, input "
        f"noise injection (positions sigma {p['noise_x_m']} m, velocities {p['noise_v_m_s']} m/s, targets not "
        "corrected).",
        f"- {tr['iterations']} iterations in {tr['seconds']} s on this 2-core CPU (shared); teacher data "
        f"{tr['data_seconds']} s{' (' + tr['data_note'] + ')' if tr.get('data_note') else ''}; whole command "
        f"{metrics['total_seconds']} s. The training loop got only ~{tr['iterations']:,} steps ({tr['iterations'] * 8:,} "
        "sampled frames, each unrolled; the 2 cores were shared with other jobs): the model is probably under-trained.",
        "",
        "## Metrics (held-out trajectories)",
        "",
        f"- One-step position error of the cheap budget vs teacher: {ho['one_step_rms_mm_cheap']:.2f} mm RMS; "
        f"cheap + network correction: {ho['one_step_rms_mm_cheap_plus_network']:.2f} mm; fraction of the residual "
        f"explained: {ho['one_step_residual_explained']:.3f} (training trajectories: "
        f"{fit.get('one_step_residual_explained', float('nan')):.3f}); one-step velocity error "
        f"{ho.get('one_step_velocity_rms_mm_s_cheap', float('nan')):.0f} mm/s (cheap) vs "
        f"{ho.get('one_step_velocity_rms_mm_s_cheap_plus_network', float('nan')):.0f} mm/s (cheap + network).",
    ]
    byc = metrics.get("held_out_by_colliders")
    if byc:
        for key, label in (("with_colliders", "with colliders"), ("without_colliders", "without colliders")):
            e = byc[key]
            if e.get("trajectories"):
                lines.append(
                    f"- Held-out {label} ({e['trajectories']} trajectories): cheap "
                    f"{e['one_step_rms_mm_cheap']:.2f} mm, cheap + network "
                    f"{e['one_step_rms_mm_cheap_plus_network']:.2f} mm, residual explained "
                    f"{e['one_step_residual_explained']:.3f}."
                )
    lines += [
        "- ONNX (onnxruntime, 2 threads, CPU) vs PyTorch on meshes unlike the export's (keys: mesh, collider, world edges): "
        + "; ".join(
            f"{k}: max |diff| {v['max_abs_diff']:.2e} (outputs up to {v['max_abs_output']:.2f}), "
            f"deterministic {v['run_to_run_identical']}, {v['onnx_ms']:.2f} ms"
            for k, v in agree.items()
        )
        + ".",
    ]
    lat = metrics.get("latency_sweep")
    if lat:
        lines += [
            f"- onnxruntime CPU latency on a {lat['vertices']}-vertex grid, {lat['threads']} threads "
            "(`python -m models.training.measure_latency`, random weights): "
            + ", ".join(
                f"{k.replace('latent', 'latent ').replace('_steps', ' / steps ')}: {v} ms"
                for k, v in lat["median_ms"].items()
            )
            + (
                f" ({lat['note']})."
                if lat.get("note")
                else " (zero world edges; the 2 cores were shared, absolute times are inflated)."
            )
        ]
    sweep = metrics.get("size_sweep")
    if sweep is None and (MODELS_DIR / "size_sweep.json").is_file():  # training rewrites metrics.json from scratch
        sweep = json.loads((MODELS_DIR / "size_sweep.json").read_text())
    if sweep:
        lines += [
            "",
            "## Accuracy vs size (models/size_sweep.json)",
            "",
            f"{sweep.get('note', '')}",
            "",
            "| latent | steps | parameters | iterations | held-out one-step mm (cheap -> net) | residual explained | "
            f"onnxruntime ms ({sweep.get('vertices', 4225)}-vertex grid, {sweep.get('threads', 2)} threads) |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in sweep["rows"]:
            lines.append(
                f"| {r['latent']} | {r['steps']} | {r['parameters']} | {r['iterations']} | "
                f"{r['one_step_rms_mm_cheap']:.2f} -> {r['one_step_rms_mm_cheap_plus_network']:.2f} | "
                f"{r['one_step_residual_explained']:.3f} | {r['onnx_ms_4k']:.1f} |"
            )
        best = min(sweep["rows"], key=lambda r: r["one_step_rms_mm_cheap_plus_network"])
        lines += [
            "",
            f"The shipped {m['latent']} / {m['steps']} model ({tr['iterations']} iterations) reaches "
            f"{ho['one_step_rms_mm_cheap_plus_network']:.2f} mm on the same held-out set; the best short run above "
            f"({best['latent']} / {best['steps']}, {best['iterations']} iterations) reaches "
            f"{best['one_step_rms_mm_cheap_plus_network']:.2f} mm. The rows are single short runs (noisy, and "
            "the larger networks got fewer iterations in the same time), so they do not show a clear accuracy "
            "gain from size; the shipped size was kept from before the sweep, not chosen by it, and a smaller "
            "network would cost less per frame.",
        ]
    if bench:
        lines += ["", "## Evaluation bench (bench/bench_network.py)", ""]
        lines += [f"- {k}: {v}" for k, v in bench.items()]
    else:
        lines += ["", "## Evaluation bench", "", "- not run yet: `python bench/bench_network.py --update-card`."]
    lines += gpu_section(metrics.get("gpu"))
    lines += [
        "",
        "## Known limits",
        "",
    ]
    if bench:
        pays = str(bench.get("headline_first_50_frames_cpu", "")).startswith("YES")
        lines.append(
            f"- **On this CPU the network {'pays' if pays else 'does not pay'} at equal error** (bench above, "
            f"`{bench.get('command', '')}`): first 50 frames: {bench.get('headline_first_50_frames_cpu', '')} "
            f"Whole rollout: {bench.get('headline_whole_rollout_cpu', '')} At a fixed solver budget it often "
            "lowers the error (`same_budget_comparison` above), but the ~1-2 ms/frame it costs, spent on more "
            "substeps instead, buys more accuracy. The bench has only a few short scenes whose contacts make "
            "rollouts diverge quickly, and picks the best of several network variants per budget: noisy. "
            "The GPU rows are not measured yet (section GPU)."
        )
    else:
        lines.append(
            "- The rollout bench has not been run for this model: nothing is claimed about speed at equal error."
        )
    byc = metrics.get("held_out_by_colliders") or {}
    wo = byc.get("without_colliders", {})
    if wo.get("trajectories") and wo.get("one_step_residual_explained", 1.0) < 0:
        lines.append(
            f"- On the held-out trajectories without colliders (only {wo['trajectories']}) the network makes the "
            f"one-step error worse ({wo['one_step_rms_mm_cheap']:.2f} -> "
            f"{wo['one_step_rms_mm_cheap_plus_network']:.2f} mm, residual explained "
            f"{wo['one_step_residual_explained']:.2f}); the gain comes from scenes with colliders, which are "
            f"~3/4 of the training data. The previous, collider-free model explained 0.19 of the residual on "
            "its own (collider-free) held-out set."
        )
    lines += [
        "- The velocity residual r_v is trained only by the one-step term (the unrolled loss applies r_x with the "
        "runtime's default velocity_gain = 0); in the bench, rows with vg=1 have clearly larger errors than the same "
        "rows with vg=0, so `LearnedCoupling(velocity_gain=0.0)` stays the default: only r_x is applied.",
        "- World edges cover every collider proxy (analytic, triangle mesh, signed distance grid); self-collision and "
        "cloth-cloth world edges (non-adjacent cloth vertices) are not queried; the training colliders are one "
        "sphere, capsule or box per scene (mesh colliders, e.g. a body in a Blender bake, are seen at run time "
        "only: same features, but outside the training distribution; no planes, no rotation during the motion). The "
        "world-edge query is one pass per collider at the frame start; a collider arriving within the frame "
        "from farther than the radius is only seen the next frame (XPBD's contacts still handle it).",
        "- The PyTorch projection in the training loop is stretch-only: the runtime's residual-mode projection also "
        "runs the contact handler, which training does not (contacts enter the unrolled loss only through the "
        "Numba cheap step of the following frame).",
        "- Trained against one cheap budget (8 x 1) at 24 fps; other budgets in the bench are out of "
        "distribution (dt is an input, but no other dt was in the data).",
        "- Trained with dihedral bending in both budgets. A cloth whose `bending_model` is `auto` (the "
        "default) and whose rest shape is flat gets isometric bending instead: the same energy for small "
        "folds (tested), but the cheap step the residual was learnt against differs at large folds.",
        "- Unrolling is short (a few frames) and detached between frames; mode B is trained only through the "
        "one-step targets (its in-frame XPBD solve is not in the training graph).",
        "- Mesh sizes in training are ~50-450 vertices; larger meshes run (dynamic sizes) but are untested for "
        f"accuracy. Message passing reaches {m['steps']} hops; the nearest-pin offset feature supplies the only "
        "longer-range context.",
        "- The anomaly guard falls back to pure XPBD for the rest of the bake on non-finite output, a failed "
        "frame, strain > 25 %, a kinetic-energy jump or r_proj > 50 for 3 frames.",
    ]
    text = "\n".join(lines) + "\n"
    (path or MODELS_DIR / "README.md").write_text(text)
    return text


GPU_COMMAND = "python bench/bench_network_gpu.py --torch-standin"


def gpu_section(gpu: dict | None) -> list[str]:
    """The card's GPU rows: bench/bench_network_gpu.py's results once a CUDA machine ran it
    (metrics.json "gpu": "latency_table", "headline", "provider"), else what is still to measure."""
    lines = ["", "## GPU", ""]
    if gpu:
        lines += [
            f"Measured with `{gpu.get('command', GPU_COMMAND)}` on {gpu.get('host', 'a CUDA machine')}; "
            f"network on {gpu.get('provider', '?')}, solver on the CPU.",
            "",
            gpu.get("latency_table", ""),
            "",
        ]
        lines += [f"- headline ({metric}, GPU): {line}" for metric, line in gpu.get("headline", {}).items()]
    else:
        lines += [
            "| rows | status |",
            "|---|---|",
            f"| ms/inference on the CUDA provider at 4k / 16k / 64k / 256k vertices (with and without world "
            f"edges), CPU provider beside it | not measured yet: run `{GPU_COMMAND}` on a device |",
            f"| evaluation matrix with the network on the GPU, solver on the CPU (equal-error headline) | not "
            f"measured yet: run `{GPU_COMMAND}` on a device |",
        ]
    lines += [
        "",
        "For the CUDA path a Blender user needs onnxruntime-gpu and its CUDA and cuDNN libraries (the "
        "nvidia-* wheels of its `cuda` and `cudnn` extras) installed into Blender's own Python, in the same "
        "site-packages folder; `models/runtime.py` preloads them (`onnxruntime.preload_dlls()`) and otherwise "
        "runs on the CPU and says why (docs/design/network.md, section GPU).",
    ]
    return lines


if __name__ == "__main__":
    write_card()
