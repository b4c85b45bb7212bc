"""Training-side checks that need PyTorch (installed by requirements/test.txt, never by the runtime).

The training command also repeats the ONNX-vs-PyTorch agreement check on the model it ships
(models/metrics.json, "onnx_vs_pytorch").
"""

from __future__ import annotations

import numpy as np
import torch

from selvedge.models.graph import graph_from_cloth, model_inputs
from selvedge.models.runtime import DEFAULT_THREADS, LearnedModel
from selvedge.models.training.network import GraphNet, export_onnx, torch_feed
from selvedge.solver import Cloth, grid_mesh


def _cloth(nx, ny):
    pos, faces, uv = grid_mesh(nx, ny, 1.0, 0.7, plane="xz")
    pins = (pos[:, 2] == pos[:, 2].max()).astype(float)
    return Cloth(pos, faces, uvs=uv, pin_weights=pins)


def test_onnx_matches_pytorch_on_sizes_unlike_the_export(tmp_path):
    torch.manual_seed(0)
    net = GraphNet(latent=8, steps=2).eval()
    rng = np.random.default_rng(0)
    for p in net.parameters():  # non-trivial weights
        p.data.normal_(0, 0.3)
    c = _cloth(6, 5)
    export_onnx(
        net,
        model_inputs(graph_from_cloth(c), c.x, np.zeros_like(c.x), 1 / 24),
        tmp_path / "m.onnx",
        {"protocol": {"teacher_substeps": 2, "cheap_substeps": 1}},
    )
    rt = LearnedModel(tmp_path / "m.onnx", threads=DEFAULT_THREADS, prefer_gpu=False)
    for nx, ny in ((4, 3), (31, 19)):
        c = _cloth(nx, ny)
        feed = model_inputs(
            graph_from_cloth(c), c.x + rng.normal(0, 0.01, c.x.shape), rng.normal(0, 1.0, c.x.shape), 1 / 24
        )
        with torch.no_grad():
            ref = net(*torch_feed(feed)).numpy()
        outs = [rt.run(feed) for _ in range(3)]
        assert all(np.array_equal(outs[0], o) for o in outs), "onnxruntime not deterministic"
        assert np.abs(outs[0] - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max()), np.abs(outs[0] - ref).max()
        assert np.count_nonzero(outs[0][c.kinematic_index]) == 0


def test_no_scatter_ops_in_exported_graph(tmp_path):
    import onnx

    net = GraphNet(latent=4, steps=1).eval()
    c = _cloth(4, 4)
    export_onnx(net, model_inputs(graph_from_cloth(c), c.x, np.zeros_like(c.x), 1 / 24), tmp_path / "m.onnx", {})
    ops = {n.op_type for n in onnx.load(str(tmp_path / "m.onnx")).graph.node}
    assert "Gather" in ops and "ReduceSum" in ops
    assert not ops & {"ScatterND", "ScatterElements", "Scatter"}, ops
    assert onnx.load(str(tmp_path / "m.onnx")).opset_import[0].version == 18


def test_pytorch_projection_matches_the_numba_jacobi_kernels():
    import kernel_calls as kc

    from selvedge.models.coupling import RESIDUAL_ITERATIONS, RESIDUAL_OMEGA
    from selvedge.models.training.projection import project_stretch
    from selvedge.solver import kernels as kn

    c = _cloth(7, 6)
    st = c.stretch
    p = st.params
    rng = np.random.default_rng(4)
    x = c.x + rng.normal(0, 0.02, c.x.shape)
    h = 1 / 24 / 8
    for omega, iterations in ((RESIDUAL_OMEGA, RESIDUAL_ITERATIONS), (1.5, 4)):
        ref = x.copy()
        lam = np.zeros(st.count)
        dx, hits = np.zeros_like(ref), np.zeros(len(ref))
        for _ in range(iterations):
            kc.distance_jacobi(
                ref,
                x.copy(),
                c.inv_mass,
                st.vertices,
                p["rest_length"],
                p["compliance"],
                np.zeros(st.count),
                False,
                h,
                lam,
                dx,
                hits,
            )
            kn.apply_jacobi(ref, dx, hits, omega)
        got = project_stretch(
            torch.as_tensor(x),
            torch.as_tensor(st.vertices.astype(np.int64)),
            torch.as_tensor(p["rest_length"]),
            torch.as_tensor(p["compliance"]),
            torch.as_tensor(c.inv_mass),
            h,
            iterations,
            omega,
        ).numpy()
        assert np.abs(got - ref).max() < 1e-12, np.abs(got - ref).max()
        assert np.abs(ref - x).max() > 1e-4  # the projection did move something
        assert np.array_equal(got[c.kinematic_index], x[c.kinematic_index])


def test_shipped_model_carries_its_normalisation_statistics_and_their_hash():
    import onnx

    from selvedge.models.runtime import DEFAULT_MODEL_PATH
    from selvedge.models.training.network import onnx_stats_sha256

    proto = onnx.load(str(DEFAULT_MODEL_PATH))
    meta = {p.key: p.value for p in proto.metadata_props}
    assert onnx_stats_sha256(proto) == meta["stats_sha256"]
    assert meta["output"].startswith("residual[N,6]")


def test_onnx_matches_pytorch_with_world_edges_and_without(tmp_path):
    """World edges from two colliders (so a vertex can have 2 world edges) and from none: ONNX equals PyTorch."""
    from selvedge.models.graph import collider_state
    from selvedge.solver.collisions import Box, Colliders, Sphere

    torch.manual_seed(1)
    net = GraphNet(latent=8, steps=2).eval()
    for p in net.parameters():
        p.data.normal_(0, 0.3)
    net.world_std.fill_(0.05)  # world features are cm-sized: make them matter
    export_onnx(
        net,
        model_inputs(graph_from_cloth(_cloth(5, 4)), _cloth(5, 4).x, np.zeros((20, 3)), 1 / 24),
        tmp_path / "w.onnx",
        {},
    )
    rt = LearnedModel(tmp_path / "w.onnx", threads=DEFAULT_THREADS, prefer_gpu=False)
    c = _cloth(17, 12)
    col = Colliders(
        [
            Sphere(0.25, name="s", position=(0.5, 0.12, 0.35)),
            Box((0.2, 0.08, 0.2), name="b", position=(0.45, -0.05, 0.3)),
        ]
    )
    col.set_transform("b", (0.45, 0.0, 0.3))
    rng = np.random.default_rng(2)
    x, v = c.x + rng.normal(0, 0.01, c.x.shape), rng.normal(0, 1.0, c.x.shape)
    results = []
    for cs in (collider_state(col), None):
        feed = model_inputs(graph_from_cloth(c), x, v, 1 / 24, cs)
        with torch.no_grad():
            ref = net(*torch_feed(feed)).numpy()
        outs = [rt.run(feed) for _ in range(3)]
        assert all(np.array_equal(outs[0], o) for o in outs), "onnxruntime not deterministic"
        assert np.abs(outs[0] - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max()), np.abs(outs[0] - ref).max()
        results.append((feed["world_edge_features"].shape[0], feed["world_incidence"].shape[1], outs[0]))
    (w, kw, with_w), (w0, _, without) = results
    assert w > 20 and kw == 2 and w0 == 0
    assert np.abs(with_w - without).max() > 1e-3


def test_unrolled_loss_feeds_each_projected_state_into_the_next_step(tmp_path):
    """With a network that outputs zero, unrolled residual mode is cheap XPBD + projection frame after frame:
    step k's loss must equal the error of that rollout (run here by hand) against teacher frame f + k + 1."""
    from selvedge.models.training import teacher
    from selvedge.models.training.projection import project_stretch
    from selvedge.models.training.train import Trajectory, unrolled_loss

    seed = 4  # a cape with a moving box
    path = tmp_path / "traj.npz"
    np.savez_compressed(path, **teacher.generate_trajectory(seed, 5))
    traj = Trajectory(path, teacher.PROTOCOL["fps"])
    assert traj.collider != "none"
    net = GraphNet(latent=4, steps=1).eval()
    net.decode[-1].weight.data.zero_()
    net.decode[-1].bias.data.zero_()
    dt, h = traj.dt, traj.dt / teacher.PROTOCOL["cheap_substeps"]
    f0 = 1
    rng = np.random.default_rng(0)
    losses = []
    for steps in (1, 3):
        *_, in_loop, size = unrolled_loss(net, [traj], [(0, f0)], rng, steps)
        losses.append(float(in_loop.detach()))
    # by hand
    edges, rest, comp = (torch.as_tensor(a) for a in traj.stretch)
    w = torch.as_tensor(traj.inv_mass)
    sx = float(net.out_std[0]) * dt * dt
    sv = float(net.out_std[3]) * dt
    free = traj.graph.free
    x, v = traj.x_cheap[f0], traj.v_cheap[f0]
    expect = 0.0
    for k in range(3):
        if k > 0:
            x, v = traj.cheap_step(f0 + k, x, v)
        xp = project_stretch(torch.as_tensor(x), edges, rest, comp, w, h).numpy()
        vp = v + (xp - x) / dt
        expect += (((xp - traj.x[f0 + k + 1]) / sx) ** 2)[free].mean() + (((vp - traj.v[f0 + k + 1]) / sv) ** 2)[
            free
        ].mean()
        if k == 0:
            assert np.isclose(losses[0], expect, rtol=1e-9)
        x, v = xp, vp
    assert np.isclose(losses[1], expect, rtol=1e-9)
    assert losses[1] > losses[0]
