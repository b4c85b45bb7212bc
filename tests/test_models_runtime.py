"""Learned-network runtime (no PyTorch): graph features, the shipped ONNX model, onnxruntime session,
clear errors for missing/mismatched model files. Runs in CI with requirements/test.txt."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from selvedge.models.graph import (EDGE_FEATURES, NODE_FEATURES, edge_features, graph_from_cloth, incidence_table,
                                   model_inputs, node_features)
from selvedge.models.runtime import DEFAULT_MODEL_PATH, LearnedModel, ModelError
from selvedge.solver import Cloth, grid_mesh


def hanging_cloth(nx=9, ny=7, offset=(0.0, 0.0, 0.0)):
    pos, faces, uv = grid_mesh(nx, ny, 0.8, 0.6, plane="xz")
    pos = pos + np.asarray(offset)
    pins = np.zeros(len(pos))
    pins[np.argsort(-pos[:, 2])[:nx]] = 1.0  # top row
    return Cloth(pos, faces, uvs=uv, pin_weights=pins)


def random_state(cloth, seed=0):
    rng = np.random.default_rng(seed)
    return cloth.x + rng.normal(0, 0.01, cloth.x.shape), rng.normal(0, 0.5, cloth.x.shape)


@pytest.fixture(scope="module")
def model():
    return LearnedModel()


def test_incidence_table_gather_sum_equals_scatter_add():
    rng = np.random.default_rng(3)
    receivers = rng.integers(0, 20, size=90)
    table = incidence_table(receivers, 25)  # nodes 20..24 receive nothing
    values = rng.normal(size=(90, 4))
    padded = np.concatenate([values, np.zeros((1, 4))])
    expected = np.zeros((25, 4))
    np.add.at(expected, receivers, values)
    assert np.allclose(padded[table].sum(axis=1), expected)
    assert table.shape[1] == np.bincount(receivers).max()


def test_features_are_translation_invariant():
    a, b = hanging_cloth(), hanging_cloth(offset=(1000.0, -250.0, 40.0))
    x, v = random_state(a)
    ga, gb = graph_from_cloth(a), graph_from_cloth(b)
    shift = b.x - a.x
    na, nb = node_features(ga, x, v, 1 / 24), node_features(gb, x + shift, v, 1 / 24)
    assert np.allclose(na, nb, atol=1e-6) and np.array_equal(na[:, :13], nb[:, :13])
    fa, fb = edge_features(ga, x), edge_features(gb, x + shift)
    assert fa.shape == (ga.n_edges, len(EDGE_FEATURES))
    assert np.allclose(fa, fb, atol=1e-6), np.abs(fa - fb).max()
    assert na.shape == (9 * 7, len(NODE_FEATURES))


def test_graph_has_every_mesh_edge_in_both_directions():
    c = hanging_cloth()
    g = graph_from_cloth(c)
    pairs = set(zip(g.senders.tolist(), g.receivers.tolist()))
    for a, b in c.topology.edges:
        assert (a, b) in pairs and (b, a) in pairs
    assert g.n_edges == 2 * len(c.topology.edges)


def test_shipped_model_loads_runs_and_says_where(model):
    assert model.provider in ("CPUExecutionProvider", "CUDAExecutionProvider")
    assert "runs on the" in model.provider_message and model.provider.split("Execution")[0] in model.provider_message
    assert model.protocol["teacher_substeps"] > model.protocol["cheap_substeps"]
    for nx, ny in ((5, 4), (23, 17)):  # sizes unlike the export's example
        c = hanging_cloth(nx, ny)
        x, v = random_state(c)
        out = model.run(model_inputs(graph_from_cloth(c), x, v, 1 / 24))
        assert out.shape == (nx * ny, 6) and np.isfinite(out).all()
        assert np.abs(out).max() <= model.accel_bound
        print(f"{nx}x{ny}: |a| max {np.abs(out).max():.3g} m/s^2, {model.last_ms:.2f} ms on {model.provider}")


def test_pinned_outputs_are_zero_and_ignored(model):
    c = hanging_cloth()
    x, v = random_state(c, 1)
    g = graph_from_cloth(c)
    feed = model_inputs(g, x, v, 1 / 24)
    out = model.run(feed)
    assert np.count_nonzero(out[c.kinematic_index]) == 0
    assert np.abs(out[c.inv_mass > 0]).max() > 0
    # whatever the pinned vertices' velocities say, only free outputs exist and they stay finite
    v2 = v.copy()
    v2[c.kinematic_index] = 1e3
    out2 = model.run(model_inputs(g, x, v2, 1 / 24))
    assert np.count_nonzero(out2[c.kinematic_index]) == 0 and np.isfinite(out2).all()


def test_model_output_is_translation_invariant(model):
    a, b = hanging_cloth(), hanging_cloth(offset=(500.0, 20.0, -3.0))
    x, v = random_state(a, 2)
    oa = model.run(model_inputs(graph_from_cloth(a), x, v, 1 / 24))
    ob = model.run(model_inputs(graph_from_cloth(b), x + (b.x - a.x), v, 1 / 24))
    assert np.allclose(oa, ob, atol=1e-3 * max(1.0, np.abs(oa).max()))


def test_missing_model_file_names_expected_inputs(tmp_path):
    with pytest.raises(ModelError) as err:
        LearnedModel(tmp_path / "nope.onnx")
    msg = str(err.value)
    assert "not found" in msg and "node_features" in msg and "incidence" in msg and "free_mask" in msg
    assert "world_edge_features" in msg and "world_incidence" in msg


def test_garbage_model_file_is_refused_clearly(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"this is not an onnx file")
    with pytest.raises(ModelError) as err:
        LearnedModel(bad)
    assert "cannot load" in str(err.value) and "node_features" in str(err.value)


@pytest.mark.parametrize("old,new,expect", [
    (b"selvedge-gnn-3", b"selvedge-gnn-0", "format"),
    (b"free_mask", b"free_masq", "input 'free_mask' missing"),
])
def test_mismatched_model_file_names_expected_inputs(tmp_path, old, new, expect):
    data = DEFAULT_MODEL_PATH.read_bytes()
    assert old in data
    bad = tmp_path / "mismatch.onnx"
    bad.write_bytes(data.replace(old, new))
    with pytest.raises(ModelError) as err:
        LearnedModel(bad)
    msg = str(err.value)
    assert expect in msg and "Expected inputs node_features float32[N,17]" in msg, msg


def test_model_copied_elsewhere_still_loads(tmp_path):
    target = tmp_path / "copy.onnx"
    shutil.copy(DEFAULT_MODEL_PATH, target)
    assert LearnedModel(target, threads=1).provider


# -- world edges (collider surface -> cloth vertex) ---------------------------------------------------
def _sphere_cloth(offset=(0.0, 0.0, 0.0), radius=0.2, centre=(0.4, 0.1, 0.25), end_shift=(0.0, 0.024, 0.0)):
    from selvedge.solver.collisions import Colliders, Sphere
    off = np.asarray(offset, dtype=float)
    col = Colliders([Sphere(radius, name="ball", position=np.asarray(centre) + off, thickness=0.001)],
                    cloth_thickness=0.004)
    col.set_transform("ball", np.asarray(centre) + off + np.asarray(end_shift))  # frame-end pose
    pos, faces, uv = grid_mesh(9, 7, 0.8, 0.6, plane="xz")
    pos = pos + off
    pins = np.zeros(len(pos))
    pins[np.argsort(-pos[:, 2])[:9]] = 1.0
    return Cloth(pos, faces, uvs=uv, pin_weights=pins, contact_handler=col), col


def test_world_edges_near_a_sphere_match_the_analytic_closest_point():
    from selvedge.models.graph import WORLD_EDGE_FEATURES, WORLD_RADIUS_M, collider_state, world_edges
    radius, centre, dt = 0.2, np.array([0.4, 0.1, 0.25]), 1 / 24
    cloth, col = _sphere_cloth(radius=radius, centre=centre)
    rng = np.random.default_rng(4)
    n = cloth.x.shape[0]
    # vertices at chosen signed distances from the sphere, in random directions
    dirs = rng.normal(size=(n, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    dist = rng.uniform(-0.05, 0.1, size=n)
    x = centre + dirs * (radius + dist)[:, None]
    v = rng.normal(0, 0.3, size=(n, 3))
    rcv, feat = world_edges(collider_state(col), x, v, dt, cloth.inv_mass > 0)
    free = cloth.inv_mass > 0
    expect = np.flatnonzero(free & (dist <= WORLD_RADIUS_M))
    assert np.array_equal(np.sort(rcv), expect) and len(expect) > 5 and (dist > WORLD_RADIUS_M).any()
    assert feat.shape == (len(expect), len(WORLD_EDGE_FEATURES)) and feat.dtype == np.float32
    q = centre + radius * dirs[rcv]  # analytic closest surface point
    assert np.allclose(feat[:, 0:3], q - x[rcv], atol=1e-6)
    assert np.allclose(feat[:, 3], np.abs(dist[rcv]), atol=1e-6)
    assert np.allclose(feat[:, 4], dist[rcv], atol=1e-6)  # signed: negative inside
    assert (feat[:, 4] < 0).any()
    assert np.allclose(feat[:, 5], 0.004 + 0.001)  # cloth thickness + collider skin
    surface_velocity = np.array([0.0, 0.024, 0.0]) / dt  # the sphere translates 24 mm over the frame
    assert np.allclose(feat[:, 6:9], surface_velocity - v[rcv], atol=1e-5)


def test_world_edges_are_translation_invariant_and_empty_without_colliders():
    from selvedge.models.graph import collider_state
    a, col_a = _sphere_cloth()
    b, col_b = _sphere_cloth(offset=(300.0, -40.0, 12.0))
    rng = np.random.default_rng(5)
    x = a.x + rng.normal(0, 0.05, a.x.shape)
    x[:, 1] += 0.1  # into the sphere's radius
    v = rng.normal(0, 0.5, a.x.shape)
    fa = model_inputs(graph_from_cloth(a), x, v, 1 / 24, collider_state(col_a))
    fb = model_inputs(graph_from_cloth(b), x + (b.x - a.x), v, 1 / 24, collider_state(col_b))
    assert fa["world_edge_features"].shape[0] > 3
    assert np.array_equal(fa["world_receivers"], fb["world_receivers"])
    assert np.allclose(fa["world_edge_features"], fb["world_edge_features"], atol=1e-4)
    empty = model_inputs(graph_from_cloth(hanging_cloth()), x, v, 1 / 24)
    assert empty["world_edge_features"].shape == (0, fa["world_edge_features"].shape[1])
    assert empty["world_receivers"].shape == (0,) and (empty["world_incidence"] == 0).all()


def test_shipped_model_uses_world_edges_and_runs_without_them(model):
    from selvedge.models.graph import collider_state
    a, col_a = _sphere_cloth()
    b, col_b = _sphere_cloth(offset=(-70.0, 5.0, 300.0))
    x, v = random_state(a, 6)
    x[:, 1] += 0.1
    ga = graph_from_cloth(a)
    with_w = model.run(model_inputs(ga, x, v, 1 / 24, collider_state(col_a)))
    without = model.run(model_inputs(ga, x, v, 1 / 24))
    assert np.isfinite(with_w).all() and np.isfinite(without).all()
    assert np.abs(with_w - without).max() > 1e-4  # the collider changes the prediction
    shifted = model.run(model_inputs(graph_from_cloth(b), x + (b.x - a.x), v, 1 / 24, collider_state(col_b)))
    assert np.allclose(with_w, shifted, atol=1e-3 * max(1.0, np.abs(with_w).max()))


def test_world_edge_shape_kinds_are_the_solvers():
    """graph.py stays NumPy-only, so it repeats the solver's proxy kind numbers: they must agree."""
    from selvedge.models import graph
    from selvedge.solver.collisions import analytic

    assert (graph.PLANE, graph.SPHERE, graph.CAPSULE, graph.BOX) == (analytic.PLANE, analytic.SPHERE,
                                                                     analytic.CAPSULE, analytic.BOX)
