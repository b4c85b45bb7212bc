"""Teacher data generation (no PyTorch): deterministic, randomised scenes, train/test split by trajectory."""

from __future__ import annotations

import numpy as np

from selvedge.models.training import teacher
from selvedge.models.training.scenes import KINDS, make_scene


def test_teacher_trajectory_is_deterministic_and_consistent():
    a = teacher.generate_trajectory(11, 3)
    b = teacher.generate_trajectory(11, 3)
    for key in ("x", "v", "x_cheap"):
        assert np.array_equal(a[key], b[key])
    assert a["x"].shape[0] == 4 and a["x_cheap"].shape[0] == 3 and a["x"].dtype == np.float32
    pinned = a["pins"] > 0
    # the cheap step starts from the teacher state: pins agree exactly, free vertices differ (the residual)
    assert np.allclose(a["x_cheap"][:, pinned], a["x"][1:, pinned], atol=1e-6)
    assert np.abs(a["x_cheap"][:, ~pinned] - a["x"][1:, ~pinned]).max() > 1e-5
    assert teacher.PROTOCOL["teacher_substeps"] >= 4 * teacher.PROTOCOL["cheap_substeps"]


def test_scenes_are_randomised_over_kinds_meshes_pins_and_materials():
    scenes = [make_scene(s) for s in range(24)]
    assert {s.kind for s in scenes} == set(KINDS)
    assert len({len(s.rest) for s in scenes}) > 10
    assert len({s.material.stretch_compliance_warp for s in scenes}) == 24
    assert all(s.pins.sum() >= 1 for s in scenes)
    assert any(np.abs(s.sway).sum() == 0 for s in scenes) and any(np.abs(s.sway).sum() > 0 for s in scenes)


def test_train_test_and_bench_split_by_trajectory():
    train, test, bench = set(teacher.TRAIN_SEEDS), set(teacher.TEST_SEEDS), set(teacher.BENCH_SEEDS)
    assert train and test and bench
    assert train.isdisjoint(test) and train.isdisjoint(bench) and test.isdisjoint(bench)


def test_scenes_have_randomised_colliders_clear_of_the_cloth_at_the_start():
    from selvedge.models.graph import collider_state, world_edges
    from selvedge.models.training.scenes import CLOTH_THICKNESS_M, COLLIDER_KINDS, _clearance

    scenes = [make_scene(s) for s in range(24)]
    assert {s.collider_kind for s in scenes} == set(COLLIDER_KINDS)
    for s in scenes:
        for c in s.colliders:
            assert _clearance(c, s.rest) > CLOTH_THICKNESS_M
        if s.collider_kind == "moving_box":
            assert np.linalg.norm(s.colliders[0].position_at(0.5) - s.colliders[0].position_at(0.0)) > 0.01
    # the handler and the training-side collider state agree on the world edges
    s = next(s for s in scenes if s.collider_kind == "moving_box")
    handler = s.make_colliders()
    s.place_colliders(handler, 3, 24.0)
    c = s.colliders[0]
    rng = np.random.default_rng(0)
    x = c.position_at(2 / 24.0) + rng.uniform(-1, 1, size=(200, 3)) * (max(c.dims) + 0.05)  # around the box
    v = rng.normal(0, 0.3, size=x.shape)
    a = world_edges(collider_state(handler), x, v, 1 / 24)
    b = world_edges(s.collider_state(2, 24.0), x, v, 1 / 24)
    assert len(a[0]) > 0 and np.array_equal(a[0], b[0]) and np.allclose(a[1], b[1], atol=1e-6)


def test_teacher_with_a_collider_makes_contact_at_both_budgets_and_stays_outside():
    from selvedge.models.graph import world_edges

    seed = next(s for s in range(40) if make_scene(s).collider_kind == "sphere" and make_scene(s).kind != "skirt")
    scene = make_scene(seed)
    d = teacher.generate_trajectory(seed, 24)
    free = scene.pins == 0
    touched = 0
    for f in range(24):
        cs = scene.collider_state(f, 24.0)
        for x in (d["x"][f + 1], d["x_cheap"][f]):  # teacher and cheap, both at the end of frame f
            cs_end = type(cs)(cs.kind, cs.dims, cs.pos1, cs.rot1, cs.pos1, cs.rot1, cs.gap)
            rcv, feat = world_edges(cs_end, x, np.zeros_like(x), 1 / 24, free, radius=0.01)
            if len(rcv):
                touched += 1
                assert feat[:, 4].min() > -1e-3  # no vertex more than 1 mm inside the sphere
    assert touched > 4
