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
    from selvedge_import import import_selvedge

    import_selvedge()
    __package__ = "selvedge.models.training"

import numpy as np
import torch

from ..graph import (
    WORLD_RADIUS_M,
    build_mesh_graph,
    edge_features,
    incidence_table,
    model_inputs,
    node_features,
    world_edges,
)
from ..runtime import DEFAULT_THREADS, LearnedModel
from . import teacher
from .network import STAT_NAMES, GraphNet, export_onnx, onnx_stats_sha256, stats_sha256, torch_feed
from .projection import project_stretch
from .scenes import make_scene

MODELS_DIR = Path(__file__).resolve().parents[1]
OUTPUT_DESCRIPTION = (
    "residual[N,6] = r_x, r_v (m/s^2): r_x dt^2 = x_teacher - x_cheap, r_v dt = v_teacher - v_cheap "
    "(frame t+1, both from the teacher state at t); bounded, kinematic rows zero"
)
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
        self.scene = scene
        self.collider = scene.collider_kind
        cloth = teacher.make_cloth(scene, 1)
        self.graph = build_mesh_graph(
            cloth.rest_positions, cloth.topology.edges, cloth.inv_mass, cloth.mass, scene.material
        )
        st = cloth.stretch
        self.stretch = (st.vertices.astype(np.int64), st.params["rest_length"], st.params["compliance"])
        self.inv_mass = cloth.inv_mass
        self.dt = 1.0 / fps
        self.target = np.concatenate(
            [(self.x[1:] - self.x_cheap) / self.dt**2, (self.v[1:] - self.v_cheap) / self.dt], axis=2
        )  # (F, N, 6) m/s^2
        self.target[:, ~self.graph.free] = 0.0
        self.frames = self.x_cheap.shape[0]
        self.fps = fps
        self._cheap_cloth = None

    def colliders(self, f):
        """ColliderState for the step from frame f to f + 1 (None without colliders)."""
        return self.scene.collider_state(f, self.fps)

    def cheap_step(self, f, x, v):
        """The cheap XPBD budget stepped from (x, v) at frame f with the scene's pins and colliders (Numba,
        not differentiable); None when the solver refuses the frame."""
        from ...solver.errors import SimulationError

        if self._cheap_cloth is None:
            self._cheap_cloth = teacher.make_cloth(
                self.scene, teacher.PROTOCOL["cheap_substeps"], teacher.PROTOCOL["cheap_iterations"], self.fps
            )
        c = self._cheap_cloth
        c.set_positions(x, v)
        self.scene.place_colliders(c.contact_handler, f + 1, self.fps)
        try:
            c.step(self.scene.pin_targets(f + 1, self.fps))
        except SimulationError:
            return None
        return c.x.copy(), c.v.copy()


def batch(trajs, picks, rng, noise_x=0.0, noise_v=0.0, states=None):
    """Concatenate samples (traj index, frame) into one graph; returns tensors.

    ``states``: optional list of (x, v) per pick used instead of the teacher state (unrolled steps)."""
    nodes, edges, snd, rcv, free, tgt = [], [], [], [], [], []
    w_feat, w_rcv = [], []
    proj = {
        "x_cheap": [],
        "v_cheap": [],
        "x_next": [],
        "v_next": [],
        "edges": [],
        "rest": [],
        "compliance": [],
        "inv_mass": [],
    }
    offset = 0
    for pi, (ti, f) in enumerate(picks):
        t = trajs[ti]
        x, v = (t.x[f].copy(), t.v[f].copy()) if states is None else (states[pi][0].copy(), states[pi][1].copy())
        fr = t.graph.free
        if noise_x:
            x[fr] += rng.normal(0, noise_x, size=(int(fr.sum()), 3))
        if noise_v:
            v[fr] += rng.normal(0, noise_v, size=(int(fr.sum()), 3))
        nodes.append(node_features(t.graph, x, v, t.dt))
        edges.append(edge_features(t.graph, x))
        wr, wf = world_edges(t.colliders(f), x, v, t.dt, fr)
        w_rcv.append(wr + offset)
        w_feat.append(wf)
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
    feed = {
        "node_features": np.concatenate(nodes),
        "edge_features": np.concatenate(edges),
        "senders": np.concatenate(snd),
        "receivers": rcv,
        "incidence": incidence_table(rcv, offset),
        "free_mask": np.concatenate(free).astype(np.float32)[:, None],
        "world_edge_features": np.concatenate(w_feat),
        "world_receivers": np.concatenate(w_rcv),
    }
    feed["world_incidence"] = incidence_table(feed["world_receivers"], offset)
    batch.last_projection = {k: torch.as_tensor(np.concatenate(v)) for k, v in proj.items()}
    return feed, np.concatenate(tgt).astype(np.float32), np.concatenate(free)


def net_inputs(feed) -> tuple:
    """Tensors for GraphNet.forward_normalised (every input but free_mask)."""
    tf = torch_feed(feed)
    return tf[:5] + tf[6:]


def unrolled_loss(model, trajs, picks, rng, steps, noise_x=0.0, noise_v=0.0):
    """Residual mode unrolled for ``steps`` consecutive frames with the XPBD projection in the loop.

    Step k starts from the state step k-1 produced (step 0: the teacher state of frame f, with input
    noise): the cheap XPBD budget (the Numba solver with the scene's pins and colliders; for k = 0 the
    stored cheap step) is corrected by the network's r_x dt^2, projected with the runtime's Jacobi stretch
    projection in PyTorch (differentiable), and the velocity becomes v_cheap + (x_projected - x_proposal) / dt
    (the runtime's default velocity_gain = 0). The result is compared with teacher frame f + k + 1, and
    becomes the next step's input state *detached* (features are rebuilt in NumPy from it): each step's
    loss back-propagates through its own network evaluation and projection, not through earlier steps.
    Samples whose cheap step the solver refuses are dropped from later steps.

    Returns (step-0 normalised output, step-0 feed, step-0 targets, step-0 free mask, summed in-loop loss,
    summed projection-size penalty), losses in units normalised by out_std (position: out_std dt^2).
    """
    dt = trajs[picks[0][0]].dt
    h = dt / teacher.PROTOCOL["cheap_substeps"]
    active = list(range(len(picks)))
    states = {}
    in_loop = torch.zeros((), dtype=torch.float64)
    size_pen = torch.zeros((), dtype=torch.float64)
    first = None
    sx = model.out_std[:3].double() * dt * dt
    sv = model.out_std[3:].double() * dt
    for k in range(steps):
        cheap = {}
        if k > 0:
            for j in list(active):
                ti, f = picks[j]
                res = trajs[ti].cheap_step(f + k, *states[j])
                if res is None:
                    active.remove(j)
                else:
                    cheap[j] = res
            if not active:
                break
        cur = [(picks[j][0], picks[j][1] + k) for j in active]
        feed, tgt, free = batch(
            trajs,
            cur,
            rng,
            noise_x if k == 0 else 0.0,
            noise_v if k == 0 else 0.0,
            states=None if k == 0 else [states[j] for j in active],
        )
        pr = batch.last_projection
        if k > 0:
            pr["x_cheap"] = torch.as_tensor(np.concatenate([cheap[j][0] for j in active]))
            pr["v_cheap"] = torch.as_tensor(np.concatenate([cheap[j][1] for j in active]))
        free_mask = torch.as_tensor(feed["free_mask"])
        out = model.forward_normalised(*net_inputs(feed))
        if k == 0:
            first = (out, feed, tgt, free)
        r = model.denormalise(out, free_mask).double()
        x_prop = pr["x_cheap"] + r[:, :3] * dt * dt
        x_proj = project_stretch(x_prop, pr["edges"], pr["rest"], pr["compliance"], pr["inv_mass"], h)
        v_fin = pr["v_cheap"] + (x_proj - x_prop) / dt
        m = free_mask[:, 0] > 0
        in_loop = in_loop + (
            (((x_proj - pr["x_next"]) / sx) ** 2)[m].mean() + (((v_fin - pr["v_next"]) / sv) ** 2)[m].mean()
        )
        size_pen = size_pen + (((x_proj - x_prop) / sx) ** 2)[m].mean()
        if k + 1 < steps:
            xs, vs = x_proj.detach().numpy(), v_fin.detach().numpy()
            start = 0
            for j in active:
                n = trajs[picks[j][0]].graph.n_nodes
                states[j] = (xs[start : start + n], vs[start : start + n])
                start += n
    return first + (in_loop, size_pen)


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
    wf = feed["world_edge_features"]
    wm, ws = ms(wf) if wf.shape[0] > 1 else (np.zeros(wf.shape[1]), np.ones(wf.shape[1]))
    # output mean kept at zero: "no correction" is the neutral output
    return nm, ns, em, es, om * 0.0, os_, wm, ws


def evaluate_one_step(model, trajs):
    """Held-out one-step error: position error after cheap step + correction, vs cheap step alone (mm)."""
    rng = np.random.default_rng(1)
    err_cheap, err_net, explained, err_v_cheap, err_v_net = [], [], [], [], []
    with torch.no_grad():
        for i, t in enumerate(trajs):
            picks = [(i, f) for f in range(t.frames)]
            feed, tgt, free = batch(trajs, picks, rng)
            pred = model(*torch_feed(feed)).numpy()
            d_true = tgt[free, :3] * t.dt**2
            d_pred = pred[free, :3] * t.dt**2
            dv_true, dv_pred = tgt[free, 3:] * t.dt, pred[free, 3:] * t.dt
            err_v_cheap.append(np.sqrt((dv_true**2).sum(1).mean()))
            err_v_net.append(np.sqrt(((dv_true - dv_pred) ** 2).sum(1).mean()))
            err_cheap.append(np.sqrt((d_true**2).sum(1).mean()))
            err_net.append(np.sqrt(((d_true - d_pred) ** 2).sum(1).mean()))
            explained.append(1.0 - ((tgt[free] - pred[free]) ** 2).sum() / max((tgt[free] ** 2).sum(), 1e-12))
    return {
        "one_step_rms_mm_cheap": 1e3 * float(np.mean(err_cheap)),
        "one_step_rms_mm_cheap_plus_network": 1e3 * float(np.mean(err_net)),
        "one_step_residual_explained": float(np.mean(explained)),
        "one_step_velocity_rms_mm_s_cheap": 1e3 * float(np.mean(err_v_cheap)),
        "one_step_velocity_rms_mm_s_cheap_plus_network": 1e3 * float(np.mean(err_v_net)),
    }


def agreement(model, onnx_path, threads=DEFAULT_THREADS):
    """ONNX (onnxruntime, shipped threads) vs PyTorch on meshes of sizes unlike the export's."""
    rt = LearnedModel(onnx_path, threads=threads, prefer_gpu=False)
    out = {}
    rng = np.random.default_rng(7)
    for kind, seed, col in (
        ("grid", 5001, "sphere"),
        ("skirt", 5002, "capsule"),
        ("irregular", 5003, "none"),
        ("cape", 5004, "moving_box"),
    ):
        scene = make_scene(seed, kind, size_range=(20, 40), collider=col)
        cloth = teacher.make_cloth(scene, 1)
        g = build_mesh_graph(cloth.rest_positions, cloth.topology.edges, cloth.inv_mass, cloth.mass, scene.material)
        x = cloth.x + rng.normal(0, 0.01, cloth.x.shape)
        cs = scene.collider_state(0, 24.0)
        if cs is not None:  # pull the collider onto the cloth so that many vertices get world edges
            cs.pos0 = cs.pos0 + (x.mean(axis=0) - cs.pos0) * 0.7
            cs.pos1 = cs.pos0 + 0.01
        feed = model_inputs(g, x, rng.normal(0, 0.5, cloth.x.shape), 1 / 24, cs)
        with torch.no_grad():
            ref = model(*torch_feed(feed)).numpy()
        got = [rt.run(feed) for _ in range(3)]
        out[f"{kind}_{g.n_nodes}v_{col}_{feed['world_receivers'].shape[0]}w"] = {
            "max_abs_diff": float(max(np.abs(o - ref).max() for o in got)),
            "max_abs_output": float(np.abs(ref).max()),
            "run_to_run_identical": bool(all(np.array_equal(got[0], o) for o in got)),
            "onnx_ms": rt.last_ms,
        }
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--minutes", type=float, default=14.0, help="wall-time cap of the training loop (the shipped model: 14)"
    )
    ap.add_argument("--frames", type=int, default=40, help="frames per teacher trajectory")
    ap.add_argument("--train-trajectories", type=int, default=len(TRAIN_SEEDS))
    ap.add_argument("--test-trajectories", type=int, default=len(TEST_SEEDS))
    ap.add_argument("--latent", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--noise-x-m", type=float, default=1e-3)
    ap.add_argument("--noise-v-m-s", type=float, default=0.02)
    ap.add_argument(
        "--projection-weight",
        type=float,
        default=0.5,
        help="weight of the residual-mode loss through the XPBD projection (0: one-step only)",
    )
    ap.add_argument(
        "--projection-size-weight",
        type=float,
        default=0.1,
        help="weight of the projection-size penalty |x_projected - x_proposal|^2 (002 sec. 5)",
    )
    ap.add_argument(
        "--unroll",
        type=int,
        default=3,
        help="frames unrolled in residual mode with the projection in the loop (1: one frame)",
    )
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
    print(
        f"teacher data -> {data_dir} ({len(train_seeds)} train + {len(test_seeds)} test trajectories, split by trajectory)"
    )
    t0 = time.perf_counter()
    paths = teacher.generate(data_dir, train_seeds + test_seeds, args.frames)
    data_s = time.perf_counter() - t0
    cached = sum(1 for p in paths if p.stat().st_mtime < wall_start - 1)
    fps = teacher.PROTOCOL["fps"]
    trajs = [Trajectory(p, fps) for p in paths]
    train, test = trajs[: len(train_seeds)], trajs[len(train_seeds) :]
    print(f"data ready in {data_s:.0f} s; {sum(t.frames for t in train)} training frames")

    model = GraphNet(args.latent, args.steps)
    model.set_stats(*compute_stats(train))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    unroll = max(1, args.unroll)
    picks_all = [(i, f) for i, t in enumerate(train) for f in range(t.frames - unroll + 1)]
    t0 = time.perf_counter()
    it, losses = 0, []
    deadline = args.minutes * 60.0
    while time.perf_counter() - t0 < deadline:
        frac = (time.perf_counter() - t0) / deadline
        for group in opt.param_groups:
            group["lr"] = 1e-3 * (0.05**frac)
        sel = rng.choice(len(picks_all), size=args.batch, replace=False)
        picks = [picks_all[j] for j in sel]
        if args.projection_weight > 0:
            out, feed, tgt, free, in_loop, size = unrolled_loss(
                model, train, picks, rng, unroll, args.noise_x_m, args.noise_v_m_s
            )
        else:
            feed, tgt, free = batch(train, picks, rng, args.noise_x_m, args.noise_v_m_s)
            out = model.forward_normalised(*net_inputs(feed))
        target = (torch.as_tensor(tgt) - model.out_mean) / model.out_std
        mask = torch.as_tensor(free)
        loss = ((out[mask] - target[mask]) ** 2).mean()  # one-step supervision of both residuals
        if args.projection_weight > 0:
            loss = loss + args.projection_weight * in_loop.float() + args.projection_size_weight * size.float()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        it += 1
        if it % 100 == 0:
            print(f"  iter {it}: loss {np.mean(losses[-100:]):.4f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    train_s = time.perf_counter() - t0
    model.eval()
    metrics = {
        "train": {
            "iterations": it,
            "seconds": round(train_s, 1),
            "final_loss": float(np.mean(losses[-200:])),
            "data_seconds": round(data_s, 1),
            **({"data_note": f"{cached} of {len(paths)} trajectories came from the cache"} if cached else {}),
        }
    }
    metrics["held_out"] = evaluate_one_step(model, test)
    metrics["train_fit"] = evaluate_one_step(model, train[:12])
    with_c = [t for t in test if t.collider != "none"]
    without_c = [t for t in test if t.collider == "none"]
    metrics["held_out_by_colliders"] = {
        "with_colliders": {"trajectories": len(with_c), **(evaluate_one_step(model, with_c) if with_c else {})},
        "without_colliders": {
            "trajectories": len(without_c),
            **(evaluate_one_step(model, without_c) if without_c else {}),
        },
        "collider_kinds_test": sorted({t.collider for t in test}),
        "collider_kinds_train": {
            k: sum(1 for t in train if t.collider == k) for k in sorted({t.collider for t in train})
        },
    }
    print("held-out one-step:", metrics["held_out"])

    example = batch(train, [(0, 0)], rng)[0]
    protocol = {
        **teacher.PROTOCOL,
        "frames": args.frames,
        "train_seeds": [train_seeds[0], train_seeds[-1]],
        "test_seeds": [test_seeds[0], test_seeds[-1]],
        "latent": args.latent,
        "steps": args.steps,
        "noise_x_m": args.noise_x_m,
        "noise_v_m_s": args.noise_v_m_s,
        "projection_weight": args.projection_weight,
        "projection_size_weight": args.projection_size_weight,
        "unroll_frames": unroll,
        "world_radius_m": WORLD_RADIUS_M,
        "projection": "Jacobi stretch, models.coupling.RESIDUAL_ITERATIONS/RESIDUAL_OMEGA",
    }
    stats_hash = stats_sha256([getattr(model, n).numpy() for n in STAT_NAMES])
    export_onnx(
        model, example, args.out, {"protocol": protocol, "stats_sha256": stats_hash, "output": OUTPUT_DESCRIPTION}
    )
    import onnx

    if onnx_stats_sha256(onnx.load(str(args.out))) != stats_hash:
        raise SystemExit("the normalisation statistics inside the exported ONNX file differ from the trained ones")
    metrics["onnx_vs_pytorch"] = agreement(model, args.out)
    worst = max(v["max_abs_diff"] / max(v["max_abs_output"], 1e-6) for v in metrics["onnx_vs_pytorch"].values())
    print("ONNX vs PyTorch:", metrics["onnx_vs_pytorch"])
    if worst > 1e-4 or not all(v["run_to_run_identical"] for v in metrics["onnx_vs_pytorch"].values()):
        raise SystemExit(f"ONNX export disagrees with PyTorch (relative {worst:.2e}); not shipping")
    metrics["protocol"] = protocol
    metrics["model"] = {
        "file": args.out.name,
        "bytes": args.out.stat().st_size,
        "latent": args.latent,
        "steps": args.steps,
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "sha256": hashlib.sha256(args.out.read_bytes()).hexdigest(),
    }
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
