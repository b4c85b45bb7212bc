"""Train the learned network from scratch and ship it: ``python -m models.training.train``.

(Run from the repository root; ``scripts/train_network.sh`` does exactly that with .venv.)
Steps: teacher data (models/training/teacher.py, cached under out/network_data/<protocol hash>),
normalisation statistics, training with noise injection, ONNX export (opset 18, dynamic sizes),
ONNX-vs-PyTorch agreement at the shipped thread count on mesh sizes unlike the export's, held-out
evaluation, then models/selvedge_gnn.onnx, models/metrics.json and models/README.md.
Needs requirements/train.txt (torch, onnx, onnxscript). Bounded time: ``--minutes`` caps the
training loop (data generation and evaluation come on top, a few minutes on 2 CPU cores).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path

if __package__ in (None, "", "models.training"):  # run as `python -m models.training.train` from the repo root
    _root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(_root / "devtools"))
    from selvedge_import import import_selvedge  # noqa: E402

    import_selvedge()
    __package__ = "selvedge.models.training"  # noqa: A001

import numpy as np  # noqa: E402
import torch  # noqa: E402

from ..graph import build_mesh_graph, edge_features, incidence_table, model_inputs, node_features  # noqa: E402
from ..runtime import DEFAULT_THREADS, LearnedModel  # noqa: E402
from . import teacher  # noqa: E402
from .network import STAT_NAMES, GraphNet, export_onnx, onnx_stats_sha256, stats_sha256, torch_feed  # noqa: E402
from .projection import project_stretch  # noqa: E402
from .scenes import make_scene  # noqa: E402

MODELS_DIR = Path(__file__).resolve().parents[1]
OUTPUT_DESCRIPTION = ("residual[N,6] = r_x, r_v (m/s^2): r_x dt^2 = x_teacher - x_cheap, r_v dt = v_teacher - v_cheap "
                      "(frame t+1, both from the teacher state at t); bounded, kinematic rows zero")
REPO = MODELS_DIR.parent
TRAIN_SEEDS, TEST_SEEDS = teacher.TRAIN_SEEDS, teacher.TEST_SEEDS


class Trajectory:
    def __init__(self, path: Path, fps: float):
        d = np.load(path)
        self.seed = int(d["seed"])
        self.kind = str(d["kind"])
        self.x, self.v = d["x"].astype(np.float64), d["v"].astype(np.float64)
        self.x_cheap, self.v_cheap = d["x_cheap"].astype(np.float64), d["v_cheap"].astype(np.float64)
        scene = make_scene(self.seed)
        cloth = teacher.make_cloth(scene, 1)
        self.graph = build_mesh_graph(cloth.rest_positions, cloth.topology.edges, cloth.inv_mass, cloth.mass,
                                      scene.material)
        st = cloth.stretch
        self.stretch = (st.vertices.astype(np.int64), st.params["rest_length"], st.params["compliance"])
        self.inv_mass = cloth.inv_mass
        self.dt = 1.0 / fps
        self.target = np.concatenate([(self.x[1:] - self.x_cheap) / self.dt ** 2,
                                      (self.v[1:] - self.v_cheap) / self.dt], axis=2)  # (F, N, 6) m/s^2
        self.target[:, ~self.graph.free] = 0.0
        self.frames = self.x_cheap.shape[0]


def batch(trajs, picks, rng, noise_x=0.0, noise_v=0.0):
    """Concatenate samples (traj index, frame) into one graph; returns tensors."""
    nodes, edges, snd, rcv, free, tgt = [], [], [], [], [], []
    proj = {"x_cheap": [], "v_cheap": [], "x_next": [], "v_next": [], "edges": [], "rest": [], "compliance": [],
            "inv_mass": []}
    offset = 0
    for ti, f in picks:
        t = trajs[ti]
        x, v = t.x[f].copy(), t.v[f].copy()
        fr = t.graph.free
        if noise_x:
            x[fr] += rng.normal(0, noise_x, size=(int(fr.sum()), 3))
        if noise_v:
            v[fr] += rng.normal(0, noise_v, size=(int(fr.sum()), 3))
        nodes.append(node_features(t.graph, x, v, t.dt))
        edges.append(edge_features(t.graph, x))
        snd.append(t.graph.senders + offset)
        rcv.append(t.graph.receivers + offset)
        free.append(fr)
        tgt.append(t.target[f])
        proj["x_cheap"].append(t.x_cheap[f])
        proj["v_cheap"].append(t.v_cheap[f])
        proj["x_next"].append(t.x[f + 1])
        proj["v_next"].append(t.v[f + 1])
        proj["edges"].append(t.stretch[0] + offset)
        proj["rest"].append(t.stretch[1])
        proj["compliance"].append(t.stretch[2])
        proj["inv_mass"].append(t.inv_mass)
        offset += t.graph.n_nodes
    rcv = np.concatenate(rcv)
    feed = {"node_features": np.concatenate(nodes), "edge_features": np.concatenate(edges),
            "senders": np.concatenate(snd), "receivers": rcv, "incidence": incidence_table(rcv, offset),
            "free_mask": np.concatenate(free).astype(np.float32)[:, None]}
    batch.last_projection = {k: torch.as_tensor(np.concatenate(v)) for k, v in proj.items()}
    return feed, np.concatenate(tgt).astype(np.float32), np.concatenate(free)


def projection_loss(model, out_norm, free_mask, dt, h):
    """Residual mode in the loop (002 sec. 5 stage two): correct the cheap step, project it with the
    runtime's Jacobi stretch projection (PyTorch, differentiable), compare with the teacher;
    plus the projection-size penalty |x_projected - x_proposal|^2. Units: normalised by out_std."""
    pr = batch.last_projection
    r = model.denormalise(out_norm, free_mask).double()
    x_prop = pr["x_cheap"] + r[:, :3] * dt * dt
    x_proj = project_stretch(x_prop, pr["edges"], pr["rest"], pr["compliance"], pr["inv_mass"], h)
    v_fin = pr["v_cheap"] + r[:, 3:] * dt + (x_proj - x_prop) / dt
    sx = model.out_std[:3].double() * dt * dt
    sv = model.out_std[3:].double() * dt
    m = free_mask[:, 0] > 0
    pos = (((x_proj - pr["x_next"]) / sx) ** 2)[m].mean()
    vel = (((v_fin - pr["v_next"]) / sv) ** 2)[m].mean()
    size = (((x_proj - x_prop) / sx) ** 2)[m].mean()
    return pos + vel, size


def compute_stats(trajs):
    rng = np.random.default_rng(0)
    picks = [(i, f) for i, t in enumerate(trajs) for f in range(0, t.frames, 4)]
    feed, tgt, free = batch(trajs, picks, rng)
    def ms(a):
        m, s = a.mean(0), a.std(0)
        return m, np.where(s < 1e-8, 1.0, s)
    nm, ns = ms(feed["node_features"])
    em, es = ms(feed["edge_features"])
    om, os_ = ms(tgt[free])
    return nm, ns, em, es, om * 0.0, os_  # output mean kept at zero: "no correction" is the neutral output


def evaluate_one_step(model, trajs):
    """Held-out one-step error: position error after cheap step + correction, vs cheap step alone (mm)."""
    rng = np.random.default_rng(1)
    err_cheap, err_net, explained, err_v_cheap, err_v_net = [], [], [], [], []
    with torch.no_grad():
        for i, t in enumerate(trajs):
            picks = [(i, f) for f in range(t.frames)]
            feed, tgt, free = batch(trajs, picks, rng)
            pred = model(*torch_feed(feed)).numpy()
            d_true = tgt[free, :3] * t.dt ** 2
            d_pred = pred[free, :3] * t.dt ** 2
            dv_true, dv_pred = tgt[free, 3:] * t.dt, pred[free, 3:] * t.dt
            err_v_cheap.append(np.sqrt((dv_true ** 2).sum(1).mean()))
            err_v_net.append(np.sqrt(((dv_true - dv_pred) ** 2).sum(1).mean()))
            err_cheap.append(np.sqrt((d_true ** 2).sum(1).mean()))
            err_net.append(np.sqrt(((d_true - d_pred) ** 2).sum(1).mean()))
            explained.append(1.0 - ((tgt[free] - pred[free]) ** 2).sum() / max((tgt[free] ** 2).sum(), 1e-12))
    return {"one_step_rms_mm_cheap": 1e3 * float(np.mean(err_cheap)),
            "one_step_rms_mm_cheap_plus_network": 1e3 * float(np.mean(err_net)),
            "one_step_residual_explained": float(np.mean(explained)),
            "one_step_velocity_rms_mm_s_cheap": 1e3 * float(np.mean(err_v_cheap)),
            "one_step_velocity_rms_mm_s_cheap_plus_network": 1e3 * float(np.mean(err_v_net))}


def agreement(model, onnx_path, threads=DEFAULT_THREADS):
    """ONNX (onnxruntime, shipped threads) vs PyTorch on meshes of sizes unlike the export's."""
    rt = LearnedModel(onnx_path, threads=threads, prefer_gpu=False)
    out = {}
    rng = np.random.default_rng(7)
    for kind, seed in (("grid", 5001), ("skirt", 5002), ("irregular", 5003)):
        scene = make_scene(seed, kind, size_range=(20, 40))
        cloth = teacher.make_cloth(scene, 1)
        g = build_mesh_graph(cloth.rest_positions, cloth.topology.edges, cloth.inv_mass, cloth.mass, scene.material)
        x = cloth.x + rng.normal(0, 0.01, cloth.x.shape)
        feed = model_inputs(g, x, rng.normal(0, 0.5, cloth.x.shape), 1 / 24)
        with torch.no_grad():
            ref = model(*torch_feed(feed)).numpy()
        got = [rt.run(feed) for _ in range(3)]
        out[f"{kind}_{g.n_nodes}v"] = {"max_abs_diff": float(max(np.abs(o - ref).max() for o in got)),
                                      "max_abs_output": float(np.abs(ref).max()),
                                      "run_to_run_identical": bool(all(np.array_equal(got[0], o) for o in got)),
                                      "onnx_ms": rt.last_ms}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=8.0, help="wall-time cap of the training loop")
    ap.add_argument("--frames", type=int, default=40, help="frames per teacher trajectory")
    ap.add_argument("--train-trajectories", type=int, default=len(TRAIN_SEEDS))
    ap.add_argument("--test-trajectories", type=int, default=len(TEST_SEEDS))
    ap.add_argument("--latent", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--noise-x-m", type=float, default=1e-3)
    ap.add_argument("--noise-v-m-s", type=float, default=0.02)
    ap.add_argument("--projection-weight", type=float, default=0.5,
                    help="weight of the residual-mode loss through the XPBD projection (0: one-step only)")
    ap.add_argument("--projection-size-weight", type=float, default=0.1,
                    help="weight of the projection-size penalty |x_projected - x_proposal|^2 (002 sec. 5)")
    ap.add_argument("--out", type=Path, default=MODELS_DIR / "selvedge_gnn.onnx")
    ap.add_argument("--no-card", action="store_true", help="do not (re)write models/README.md and metrics.json")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    wall_start = time.time()
    torch.manual_seed(0)
    torch.set_num_threads(2)
    rng = np.random.default_rng(0)
    proto_hash = hashlib.sha256(json.dumps([teacher.PROTOCOL, args.frames], sort_keys=True).encode()).hexdigest()[:12]
    data_dir = REPO / "out" / "network_data" / proto_hash
    train_seeds = list(TRAIN_SEEDS)[: args.train_trajectories]
    test_seeds = list(TEST_SEEDS)[: args.test_trajectories]
    print(f"teacher data -> {data_dir} ({len(train_seeds)} train + {len(test_seeds)} test trajectories, split by trajectory)")
    t0 = time.perf_counter()
    paths = teacher.generate(data_dir, train_seeds + test_seeds, args.frames)
    data_s = time.perf_counter() - t0
    cached = sum(1 for p in paths if p.stat().st_mtime < wall_start - 1)
    fps = teacher.PROTOCOL["fps"]
    trajs = [Trajectory(p, fps) for p in paths]
    train, test = trajs[: len(train_seeds)], trajs[len(train_seeds):]
    print(f"data ready in {data_s:.0f} s; {sum(t.frames for t in train)} training frames")

    model = GraphNet(args.latent, args.steps)
    model.set_stats(*compute_stats(train))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    picks_all = [(i, f) for i, t in enumerate(train) for f in range(t.frames)]
    t0 = time.perf_counter()
    it, losses = 0, []
    deadline = args.minutes * 60.0
    while time.perf_counter() - t0 < deadline:
        frac = (time.perf_counter() - t0) / deadline
        for group in opt.param_groups:
            group["lr"] = 1e-3 * (0.05 ** frac)
        sel = rng.choice(len(picks_all), size=args.batch, replace=False)
        feed, tgt, free = batch(train, [picks_all[j] for j in sel], rng, args.noise_x_m, args.noise_v_m_s)
        out = model.forward_normalised(*torch_feed(feed)[:5])
        target = (torch.as_tensor(tgt) - model.out_mean) / model.out_std
        mask = torch.as_tensor(free)
        loss = ((out[mask] - target[mask]) ** 2).mean()
        if args.projection_weight > 0:
            dt = 1.0 / fps
            in_loop, size = projection_loss(model, out, torch.as_tensor(feed["free_mask"]), dt,
                                            dt / teacher.PROTOCOL["cheap_substeps"])
            loss = loss + args.projection_weight * in_loop.float() + args.projection_size_weight * size.float()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        it += 1
        if it % 500 == 0:
            print(f"  iter {it}: loss {np.mean(losses[-500:]):.4f} ({time.perf_counter() - t0:.0f} s)")
    train_s = time.perf_counter() - t0
    model.eval()
    metrics = {"train": {"iterations": it, "seconds": round(train_s, 1), "final_loss": float(np.mean(losses[-200:])),
                         "data_seconds": round(data_s, 1),
                         **({"data_note": f"{cached} of {len(paths)} trajectories came from the cache"} if cached else {})}}
    metrics["held_out"] = evaluate_one_step(model, test)
    metrics["train_fit"] = evaluate_one_step(model, train[:12])
    print("held-out one-step:", metrics["held_out"])

    example = batch(train, [(0, 0)], rng)[0]
    protocol = {**teacher.PROTOCOL, "frames": args.frames, "train_seeds": [train_seeds[0], train_seeds[-1]],
                "test_seeds": [test_seeds[0], test_seeds[-1]], "latent": args.latent, "steps": args.steps,
                "noise_x_m": args.noise_x_m, "noise_v_m_s": args.noise_v_m_s,
                "projection_weight": args.projection_weight, "projection_size_weight": args.projection_size_weight,
                "projection": "Jacobi stretch, models.coupling.RESIDUAL_ITERATIONS/RESIDUAL_OMEGA"}
    stats_hash = stats_sha256([getattr(model, n).numpy() for n in STAT_NAMES])
    export_onnx(model, example, args.out, {"protocol": protocol, "stats_sha256": stats_hash,
                                           "output": OUTPUT_DESCRIPTION})
    import onnx
    if onnx_stats_sha256(onnx.load(str(args.out))) != stats_hash:
        raise SystemExit("the normalisation statistics inside the exported ONNX file differ from the trained ones")
    metrics["onnx_vs_pytorch"] = agreement(model, args.out)
    worst = max(v["max_abs_diff"] / max(v["max_abs_output"], 1e-6) for v in metrics["onnx_vs_pytorch"].values())
    print("ONNX vs PyTorch:", metrics["onnx_vs_pytorch"])
    if worst > 1e-4 or not all(v["run_to_run_identical"] for v in metrics["onnx_vs_pytorch"].values()):
        raise SystemExit(f"ONNX export disagrees with PyTorch (relative {worst:.2e}); not shipping")
    metrics["protocol"] = protocol
    metrics["model"] = {"file": args.out.name, "bytes": args.out.stat().st_size, "latent": args.latent,
                        "steps": args.steps, "parameters": int(sum(p.numel() for p in model.parameters())),
                        "sha256": hashlib.sha256(args.out.read_bytes()).hexdigest()}
    metrics["machine"] = {"cpu_count": os.cpu_count(), "platform": platform.platform(), "torch": torch.__version__}
    metrics["total_seconds"] = round(time.perf_counter() - t_start, 1)
    if not args.no_card:
        (MODELS_DIR / "metrics.json").write_text(json.dumps(metrics, indent=1))
        from .card import write_card
        write_card(metrics)
    print(f"wrote {args.out} in {metrics['total_seconds']} s total")
    return metrics


if __name__ == "__main__":
    main()
