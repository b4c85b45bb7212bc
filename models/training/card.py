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
        "`r_x dt^2 = x_teacher(t+1) - x_cheap(t+1)` and `r_v dt = v_teacher(t+1) - v_cheap(t+1)`, both stepped from the same teacher state (output `residual[N,6]` = r_x, r_v). It is used by "
        "`models/coupling.py` in mode B (added to gravity in every substep, then XPBD projects) or residual mode "
        "(added after the cheap XPBD frame, then a cheap stretch/pin/contact projection). XPBD keeps pins, "
        "stretch limits (tethers) and contacts in both modes.",
        "",
        "Written by `python -m models.training.train` (`scripts/train_network.sh`), then completed by "
        "`python -m models.training.measure_latency` and `python bench/bench_network.py --update-card` (training "
        "rewrites metrics.json from scratch, so run the other two after it); do not edit by hand.",
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
        "`free_mask[N,1]`. Output `residual[N,6]`: bounded by `bound * tanh(a / bound)`, kinematic rows zero.",
        "- ONNX opset 18, dynamic N, E, K (dynamo exporter). Only relative quantities: the features are "
        "translation invariant (tested).",
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
        f"and initial velocity. {p['frames']} frames per trajectory.",
        f"- Split by trajectory (scene seed), never by frame: train seeds {p['train_seeds'][0]}..{p['train_seeds'][1]}, "
        f"test seeds {p['test_seeds'][0]}..{p['test_seeds'][1]}, bench seeds 2000..2003.",
        "- Storage: one compressed `.npz` per trajectory (float32 x, v, x_cheap) under "
        "`out/network_data/<protocol hash>/` with `protocol.json` (regenerated deterministically when absent).",
        "",
        "## Training",
        "",
        f"- Loss: one-step supervision of both residuals in normalised output units (MSE over free vertices) "
        f"+ {p.get('projection_weight', 0)} x the residual-mode result through the XPBD projection in the loop "
        "(cheap step + correction, then the runtime's Jacobi stretch projection written in PyTorch, "
        "`models/training/projection.py`, equal to the Numba kernels to 1e-12 in tests; position and velocity "
        f"error vs the teacher) + {p.get('projection_size_weight', 0)} x the projection-size penalty "
        "|x_projected - x_proposal|^2 (002 sec. 5). Adam, lr 1e-3 decaying to 5e-5, batch of 8 frames, input "
        f"noise injection (positions sigma {p['noise_x_m']} m, velocities {p['noise_v_m_s']} m/s, targets not "
        "corrected).",
        f"- {tr['iterations']} iterations in {tr['seconds']} s on this 2-core CPU (shared); teacher data "
        f"{tr['data_seconds']} s{' (' + tr['data_note'] + ')' if tr.get('data_note') else ''}; whole command "
        f"{metrics['total_seconds']} s. The training loop got only ~1,150 steps (the 2 cores were shared with other "
        "jobs): the model is probably under-trained.",
        "",
        "## Metrics (held-out trajectories)",
        "",
        f"- One-step position error of the cheap budget vs teacher: {ho['one_step_rms_mm_cheap']:.2f} mm RMS; "
        f"cheap + network correction: {ho['one_step_rms_mm_cheap_plus_network']:.2f} mm; fraction of the residual "
        f"explained: {ho['one_step_residual_explained']:.3f} (training trajectories: "
        f"{fit.get('one_step_residual_explained', float('nan')):.3f}); one-step velocity error "
        f"{ho.get('one_step_velocity_rms_mm_s_cheap', float('nan')):.0f} mm/s (cheap) vs "
        f"{ho.get('one_step_velocity_rms_mm_s_cheap_plus_network', float('nan')):.0f} mm/s (cheap + network).",
        "- ONNX (onnxruntime, 2 threads, CPU) vs PyTorch on meshes unlike the export's: "
        + "; ".join(f"{k}: max |diff| {v['max_abs_diff']:.2e} (outputs up to {v['max_abs_output']:.2f}), "
                    f"deterministic {v['run_to_run_identical']}, {v['onnx_ms']:.2f} ms" for k, v in agree.items()) + ".",
    ]
    lat = metrics.get("latency_sweep")
    if lat:
        lines += [f"- onnxruntime CPU latency on a {lat['vertices']}-vertex grid, {lat['threads']} threads "
                  "(`python -m models.training.measure_latency`, random weights): "
                  + ", ".join(f"{k.replace('latent', 'latent ').replace('_steps', ' / steps ')}: {v} ms"
                              for k, v in lat["median_ms"].items()) + f" ({lat.get('note', '')})."]
    if bench:
        lines += ["", "## Evaluation bench (bench/bench_network.py)", ""]
        lines += [f"- {k}: {v}" for k, v in bench.items()]
    else:
        lines += ["", "## Evaluation bench", "", "- not run yet: `python bench/bench_network.py --update-card`."]
    lines += [
        "",
        "## Known limits",
        "",
        "- **On this CPU the network does not pay** (bench above): with it, every tested budget ends up with a "
        "larger position error against the teacher than the same budget without it, and it adds ~1.5 ms/frame. "
        "One-step corrections are better than nothing (held-out one-step error falls), but over a rollout the "
        "corrections drift (trained one-step, not on its own rollouts). GPU rows were not measured (no GPU here).",
        "- The velocity residual r_v is trained and exported, but on held-out rollouts it multiplied the error by "
        "3-4 (rows with vg=1), so `LearnedCoupling(velocity_gain=0.0)` is the default: only r_x is applied.",
        "- No world edges and no colliders in the training data: contacts, self-collision and moving colliders "
        "are unseen; the network neither sees nor predicts them (XPBD's contact handler still runs).",
        "- Trained against one cheap budget (8 x 1) at 24 fps; other budgets in the bench are out of "
        "distribution (dt is an input, but no other dt was in the data).",
        "- The projection in the loop covers one frame of residual mode (stretch constraints only, no contacts); "
        "there is no multi-frame unrolled rollout loss, and mode B is trained only through the one-step "
        "targets (its in-frame XPBD solve is not in the training graph).",
        "- Mesh sizes in training are ~50-450 vertices; larger meshes run (dynamic sizes) but are untested for "
        "accuracy. Message passing reaches 3 hops; the nearest-pin offset feature supplies the only longer-range "
        "context.",
        "- The anomaly guard falls back to pure XPBD for the rest of the bake on non-finite output, a failed "
        "frame, strain > 25 %, a kinetic-energy jump or r_proj > 50 for 3 frames.",
    ]
    text = "\n".join(lines) + "\n"
    (path or MODELS_DIR / "README.md").write_text(text)
    return text


if __name__ == "__main__":
    write_card()
