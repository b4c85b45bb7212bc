"""Learned-network runtime (no PyTorch): graph features, the shipped ONNX model, onnxruntime session,
clear errors for missing/mismatched model files. Runs in CI with requirements/test.txt."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from selvedge.models.graph import (
    EDGE_FEATURES,
    NODE_FEATURES,
    edge_features,
    graph_from_cloth,
    incidence_table,
    model_inputs,
    node_features,
)
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


@pytest.mark.parametrize(
    "old,new,expect",
    [
        (b"selvedge-gnn-3", b"selvedge-gnn-0", "format"),
        (b"free_mask", b"free_masq", "input 'free_mask' missing"),
    ],
)
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
    col = Colliders(
        [Sphere(radius, name="ball", position=np.asarray(centre) + off, thickness=0.001)], cloth_thickness=0.004
    )
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
    """graph.py imports the solver only to query colliders, so it repeats the kind numbers: they must agree."""
    from selvedge.models import graph
    from selvedge.solver.collisions import analytic

    assert (graph.PLANE, graph.SPHERE, graph.CAPSULE, graph.BOX) == (
        analytic.PLANE,
        analytic.SPHERE,
        analytic.CAPSULE,
        analytic.BOX,
    )


def test_world_edges_to_a_moving_mesh_collider_match_brute_force_closest_points():
    """A triangle-mesh collider (a UV sphere mesh sliding along x) gives one world edge per free
    vertex within the radius, to the closest point over every triangle (brute force here, dense
    barycentric sampling + exact vertex/edge projections are not needed: the same Ericson routine
    is checked against dense sampling in test_collisions_mesh), with the sign of the side of that
    face and the material point's velocity."""
    from selvedge.models.graph import WORLD_RADIUS_M, collider_state, world_edges
    from selvedge.solver import Cloth, grid_mesh
    from selvedge.solver.collisions import Colliders, TriangleMesh
    from selvedge.solver.mesh import uv_ellipsoid_mesh

    body_v, body_t = uv_ellipsoid_mesh(0.2, 16, 10, np.array([0.0, 0.0, 0.0]))
    col = Colliders([TriangleMesh(body_v, body_t, name="ball", thickness=0.002)], cloth_thickness=0.004)
    col.set_mesh_positions("ball", body_v + [0.03, 0.0, 0.0])  # frame end: 3 cm along x
    pos, faces, _ = grid_mesh(12, 12, 0.6, 0.6, origin=(-0.3, -0.3, 0.0))
    _cloth = Cloth(pos, faces, contact_handler=col)  # binds the handler to the cloth's mesh
    rng = np.random.default_rng(5)
    x = rng.uniform(-0.3, 0.3, size=(len(pos), 3))
    v = rng.normal(0.0, 0.2, size=x.shape)
    dt = 1 / 24
    rcv, feat = world_edges(collider_state(col), x, v, dt)

    def closest(p):  # brute force over all triangles with the point-in-plane projection and edge clamps
        best = (np.inf, None, None)
        for t in body_t:
            a, b, c = body_v[t]
            n = np.cross(b - a, c - a)
            n /= np.linalg.norm(n)
            cand = [p - np.dot(p - a, n) * n]
            m = np.array([b - a, c - a]).T
            uv = np.linalg.lstsq(m, cand[0] - a, rcond=None)[0]
            if uv.min() < 0 or uv.sum() > 1:
                cand = []
            for s0, s1 in ((a, b), (b, c), (c, a)):
                e = s1 - s0
                cand.append(s0 + np.clip(np.dot(p - s0, e) / np.dot(e, e), 0, 1) * e)
            for q in cand:
                d = np.linalg.norm(p - q)
                if d < best[0]:
                    best = (d, q, np.sign(np.dot(p - q, n)) or 1.0)
        return best

    expected = []
    for i in range(len(x)):
        d, q, side = closest(x[i])
        if d <= WORLD_RADIUS_M:
            expected.append(i)
            row = np.flatnonzero(rcv == i)
            assert row.size == 1, f"vertex {i} at {d:.4f} m has {row.size} world edges"
            f = feat[row[0]]
            assert np.allclose(f[0:3], q - x[i], atol=1e-6) and abs(f[3] - d) < 1e-6
            assert abs(f[4] - side * d) < 1e-6 and abs(f[5] - 0.006) < 1e-7
            assert np.allclose(f[6:9], np.array([0.03, 0.0, 0.0]) / dt - v[i], atol=1e-4)
    assert len(expected) > 5 and np.array_equal(np.sort(rcv), np.array(expected))


def test_world_edges_to_a_signed_distance_grid_match_the_sphere_it_was_built_from():
    """An SDFGrid built from a sphere mesh, moved and turned over the frame: world edges point to the
    sphere's surface (within the grid's and the tessellation's error, 2 mm) with the rigid motion's
    surface velocity."""
    from selvedge.models.graph import WORLD_RADIUS_M, collider_state, world_edges
    from selvedge.solver import Cloth, grid_mesh
    from selvedge.solver.collisions import Colliders, SDFGrid, quaternion_axis_angle
    from selvedge.solver.mesh import uv_ellipsoid_mesh

    radius, centre = 0.2, np.array([0.1, 0.0, 0.0])
    ball_v, ball_t = uv_ellipsoid_mesh(radius, 48, 24, np.zeros(3))
    col = Colliders([SDFGrid(ball_v, ball_t, 0.01, name="ball", position=centre)], cloth_thickness=0.004)
    col.set_transform("ball", centre + [0.0, 0.024, 0.0], quaternion_axis_angle((0.0, 0.0, 1.0), 0.1))
    pos, faces, _ = grid_mesh(10, 10, 0.5, 0.5)
    _cloth = Cloth(pos, faces, contact_handler=col)  # binds the handler to the cloth's mesh
    rng = np.random.default_rng(6)
    dirs = rng.normal(size=(len(pos), 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    dist = rng.uniform(-0.03, 0.1, size=len(pos))
    x = centre + dirs * (radius + dist)[:, None]
    v = np.zeros_like(x)
    dt = 1 / 24
    rcv, feat = world_edges(collider_state(col), x, v, dt)
    near = np.flatnonzero(dist <= WORLD_RADIUS_M - 0.003)
    assert len(near) > 10 and set(near) <= set(rcv.tolist())
    assert np.all(dist[rcv] <= WORLD_RADIUS_M + 0.003)
    q = centre + radius * dirs[rcv]
    assert np.abs(feat[:, 0:3] - (q - x[rcv])).max() < 2e-3
    assert np.abs(feat[:, 4] - dist[rcv]).max() < 2e-3
    # surface velocity of a point at q: translation 24 mm + rotation 0.1 rad about z through the centre, per frame
    rot = quaternion_axis_angle((0.0, 0.0, 1.0), 0.1)
    w, u = rot[0], np.asarray(rot[1:])
    r = x[rcv] + feat[:, 0:3].astype(np.float64) - centre
    t = 2.0 * np.cross(u, r)
    moved = r + w * t + np.cross(u, t)
    expected = (moved - r + [0.0, 0.024, 0.0]) / dt
    assert np.abs(feat[:, 6:9] - expected).max() < 1e-3
