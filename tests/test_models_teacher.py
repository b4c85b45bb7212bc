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
