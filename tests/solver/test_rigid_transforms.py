"""solver.transforms (the one quaternion helper set) against SciPy's Rotation, an independent implementation."""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from selvedge.solver.transforms import (
    quaternion_axis_angle,
    quaternion_between,
    quaternion_conjugate,
    quaternion_multiply,
    rotate_rows,
)


def _scipy(q):
    """SciPy stores (x, y, z, w)."""
    return Rotation.from_quat([q[1], q[2], q[3], q[0]])


def _wxyz(r):
    x, y, z, w = r.as_quat()
    return np.array([w, x, y, z])


@pytest.mark.parametrize("seed", range(4))
def test_products_rotations_and_inverses_match_scipy(seed):
    rng = np.random.default_rng(seed)
    a, b = (_wxyz(Rotation.random(random_state=rng.integers(1 << 30))) for _ in range(2))
    v = rng.normal(size=(7, 3))
    np.testing.assert_allclose(rotate_rows(a, v), _scipy(a).apply(v), atol=1e-14)
    np.testing.assert_allclose(rotate_rows(quaternion_multiply(a, b), v), (_scipy(a) * _scipy(b)).apply(v), atol=1e-14)
    np.testing.assert_allclose(rotate_rows(quaternion_conjugate(a), rotate_rows(a, v)), v, atol=1e-14)
    axis, angle = rng.normal(size=3), rng.uniform(-np.pi, np.pi)
    np.testing.assert_allclose(
        rotate_rows(quaternion_axis_angle(axis, angle), v),
        Rotation.from_rotvec(axis / np.linalg.norm(axis) * angle).apply(v),
        atol=1e-14,
    )


@pytest.mark.parametrize(
    "a, b", [((0, 0, 1), (0.3, -0.2, 0.9)), ((1, 0, 0), (0, 1, 0)), ((0, 0, 1), (0, 0, -1)), ((1, 0, 0), (-1, 0, 0))]
)
def test_the_rotation_between_two_directions_takes_one_onto_the_other(a, b):
    q = quaternion_between(a, b)
    unit_b = np.asarray(b, float) / np.linalg.norm(b)
    np.testing.assert_allclose(rotate_rows(q, np.asarray([a], float) / np.linalg.norm(a))[0], unit_b, atol=1e-12)
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-15)
