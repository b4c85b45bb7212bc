"""The deviations that decide when the candidate lists are renewed
(:func:`selvedge.solver.collisions.candidate_lists.path_deviations`), against the map that made
them: points on paths, moved by a known affine map plus a known per-vertex offset."""

import numpy as np

from selvedge.solver.collisions.candidate_lists import path_deviations


def _paths(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    x_det = rng.uniform(-0.4, 0.4, (n, 3)) * np.array([1.0, 1.0, 0.3]) + np.array([0.0, 0.0, 1.0])
    step = np.where(rng.random((n, 1)) < 0.2, rng.normal(0.0, 1e-3, (n, 3)), 0.0)  # a fifth move
    since = rng.integers(0, 30, n)
    return rng, x_det, step, since


def _rotation(angle, axis):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def test_an_affine_swing_leaves_only_the_vertices_own_offsets():
    rng, x_det, step, since = _paths()
    A = _rotation(0.02, (1.0, 0.3, 0.0)) @ np.diag([1.004, 0.998, 1.0])  # swing and a little shear
    b = np.array([0.01, -0.02, 0.005])
    offset = np.zeros_like(x_det)
    off = rng.random(x_det.shape[0]) < 0.01  # 1 % of the vertices 3 mm off on their own
    offset[off] = 0.003 * rng.normal(size=(off.sum(), 3)) / np.sqrt(3.0)
    p_a = x_det + since[:, None] * step
    x_a = p_a @ A.T + b + offset
    x_b = (p_a + step) @ A.T + b + 1e-4 + offset  # the map's translation moves 0.1 mm a step
    out = np.empty(x_det.shape[0])
    G, b_a, norm = path_deviations(x_det, step, since, x_a, x_b, True, out)
    assert np.abs(G - (A - np.eye(3))).max() < 2e-4
    assert abs(norm - np.linalg.norm(A - np.eye(3))) < 2e-4
    mapped = p_a @ (np.eye(3) + G).T + b_a  # b is tied to G (the paths sit ~1 m from the origin)
    assert np.abs(mapped - (p_a @ A.T + b)).max() < 1e-4
    expected = np.linalg.norm(offset, axis=1)
    assert np.abs(out - expected).max() < 1e-4  # each vertex's own offset, up to the fit's error
    # a translation leaves the swing: most vertices a few mm off (0.02 rad over ~0.3 m)
    G0, _, norm0 = path_deviations(x_det, step, since, x_a, x_b, False, out)
    assert norm0 == 0.0 and not G0.any()
    assert np.median(out) > 2e-3


def test_a_translation_is_taken_out_exactly_whatever_the_map():
    _, x_det, step, since = _paths(seed=1)
    shift = np.array([0.3, -0.1, 0.05])
    p_a = x_det + since[:, None] * step
    out = np.empty(x_det.shape[0])
    for affine in (False, True):
        path_deviations(x_det, step, since, p_a + shift, p_a + step + shift, affine, out)
        assert out.max() < 1e-9


def test_a_flat_sheet_keeps_its_normal_direction():
    """P without spread along z (a flat sheet): the fit is ridge-regularised, so G's z column stays
    zero instead of blowing up, and an in-plane rotation is taken out exactly."""
    rng = np.random.default_rng(2)
    n = 2000
    x_det = np.column_stack([rng.uniform(-0.5, 0.5, (n, 2)), np.full(n, 1.0)])
    step = np.zeros((n, 3))
    since = np.zeros(n, dtype=np.int64)
    A = _rotation(0.03, (0.0, 0.0, 1.0))
    x_a = x_det @ A.T
    out = np.empty(n)
    G, _, norm = path_deviations(x_det, step, since, x_a, x_a, True, out)
    assert np.isfinite(G).all() and norm < 0.05
    assert out.max() < 1e-6
