"""The contact rules the Blender side used to hold, checked in the solver against independent references.

* Friction of a cloth-collider pair: the geometric mean of both sides' coefficients (Box2D's
  ``b2MixFriction``), kinetic clamped to static.
* A closed mesh collider is wound outwards and one-sided; an open one is left as given, two-sided.
  Reference: SciPy's convex hull (Qhull's outward facet normals) for random convex bodies.
"""

import math

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from selvedge.solver.collisions import combined_friction, orient_closed_mesh


@pytest.mark.parametrize(
    "collider, static, kinetic", [(0.8, 0.5, 0.3), (0.0, 0.9, 0.6), (0.4, 0.4, 0.4), (1.2, 0.1, 0.5)]
)
def test_friction_of_a_pair_is_the_geometric_mean_with_kinetic_at_most_static(collider, static, kinetic):
    mu_s, mu_k = combined_friction(collider, static, kinetic)
    assert mu_s == pytest.approx(math.sqrt(collider * static), rel=1e-15)
    assert mu_k == pytest.approx(min(math.sqrt(collider * kinetic), math.sqrt(collider * static)), rel=1e-15)
    assert mu_k <= mu_s
    if collider == 0.0:
        assert (mu_s, mu_k) == (0.0, 0.0)  # either side frictionless: the contact is
    if collider == static == kinetic:
        assert (mu_s, mu_k) == pytest.approx((collider, collider), rel=1e-15)  # equal sides keep their value


def _hull_outward(points):
    """Triangles of the convex hull of ``points``, each wound so its normal is Qhull's outward one."""
    hull = ConvexHull(points)
    tris = hull.simplices.copy()
    a, b, c = (points[tris[:, k]] for k in range(3))
    flip = np.einsum("ij,ij->i", np.cross(b - a, c - a), hull.equations[:, :3]) < 0
    tris[flip] = tris[flip][:, [0, 2, 1]]
    return tris


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_closed_mesh_is_wound_outwards_and_one_sided(seed):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(60, 3)) * (1.0, 0.5, 2.0) + rng.normal(size=3) * 5.0  # off the origin
    outward = _hull_outward(points)
    inward = outward[:, [0, 2, 1]]
    for given in (outward, inward):
        tris, one_sided = orient_closed_mesh(points, given)
        assert one_sided
        np.testing.assert_array_equal(tris, outward)


def test_an_open_mesh_is_left_as_given_and_two_sided():
    rng = np.random.default_rng(3)
    points = rng.normal(size=(40, 3))
    inward = _hull_outward(points)[:, [0, 2, 1]][1:]  # one facet removed: a hole, no inside
    tris, one_sided = orient_closed_mesh(points, inward)
    assert not one_sided
    np.testing.assert_array_equal(tris, inward)
