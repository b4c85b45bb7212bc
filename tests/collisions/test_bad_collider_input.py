"""Bad collision input: a clear ClothInputError, or documented safe handling that still simulates right."""

import math

import numpy as np
import pytest

from selvedge.solver import Cloth, ClothInputError, SolverSettings, grid_mesh
from selvedge.solver.collisions import (
    Box,
    Capsule,
    Colliders,
    Plane,
    SelfCollision,
    Sphere,
    TriangleMesh,
    quaternion_axis_angle,
)


def floor_mesh(extra_degenerate=0):
    v = [[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [1.0, 1.0, 0.0], [-1.0, 1.0, 0.0]]
    t = [[0, 1, 2], [0, 2, 3]]
    for k in range(extra_degenerate):
        v += [[0.1 * k, 0.0, 0.0], [0.1 * k, 0.0, 0.0], [0.1 * k + 0.05, 0.0, 0.0]]  # zero area (collinear)
        t.append([4 + 3 * k, 5 + 3 * k, 6 + 3 * k])
    return np.array(v), np.array(t)


def test_degenerate_collider_triangles_are_dropped_and_the_rest_still_collides():
    v, t = floor_mesh(extra_degenerate=3)
    mesh = TriangleMesh(v, t, name="floor")
    assert mesh.triangles.shape[0] == 2
    contacts = Colliders([mesh], cloth_thickness=0.005)
    assert any("dropped 3 degenerate" in w for w in contacts.warnings)
    pos, faces, _ = grid_mesh(5, 5, 0.2, 0.2, origin=(-0.1, -0.1, 0.1))
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=8), contact_handler=contacts)
    for _ in range(24):
        cloth.step()
    np.testing.assert_allclose(cloth.positions[:, 2], 0.005, atol=1e-6)  # resting at the thickness


def test_only_degenerate_triangles_or_no_triangles_is_an_error():
    v = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    with pytest.raises(ClothInputError, match="degenerate"):
        TriangleMesh(v, [[0, 1, 2]], name="line")
    with pytest.raises(ClothInputError, match="no triangles"):
        TriangleMesh(v, np.zeros((0, 3), dtype=int), name="empty")
    with pytest.raises(ClothInputError, match="indices"):
        TriangleMesh(v, [[0, 1, 3]], name="out of range")
    with pytest.raises(ClothInputError, match="NaN"):
        TriangleMesh(np.full((3, 3), np.nan), [[0, 1, 2]], name="nan")


def test_nan_transforms_are_rejected_and_leave_the_previous_pose():
    contacts = Colliders([Sphere(0.3, name="ball", position=(0.0, 0.0, 0.0))], cloth_thickness=0.005)
    with pytest.raises(ClothInputError, match="position"):
        contacts.set_transform("ball", (np.nan, 0.0, 0.0))
    with pytest.raises(ClothInputError, match="rotation"):
        contacts.set_transform("ball", (0.0, 0.0, 0.0), (1.0, np.nan, 0.0, 0.0))
    with pytest.raises(ClothInputError, match="non-zero quaternion"):
        contacts.set_transform("ball", (0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0))
    with pytest.raises(ClothInputError, match="no analytic collider named"):
        contacts.set_transform("head", (0.0, 0.0, 0.0))
    with pytest.raises(ClothInputError, match="position"):
        Box((0.1, 0.1, 0.1), position=(0.0, math.inf, 0.0))
    np.testing.assert_array_equal(contacts.pos1, [[0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(contacts.rot1, [[1.0, 0.0, 0.0, 0.0]])
    # a non-unit quaternion is normalised, not rejected
    contacts.set_transform("ball", (0.0, 0.0, 0.0), 3.0 * quaternion_axis_angle((0, 0, 1), 0.3))
    assert np.linalg.norm(contacts.rot1[0]) == pytest.approx(1.0)
    mesh = TriangleMesh(*floor_mesh(), name="floor")
    contacts = Colliders([mesh])
    with pytest.raises(ClothInputError, match="NaN"):
        contacts.set_mesh_positions("floor", np.full((4, 3), np.nan))
    with pytest.raises(ClothInputError, match="shape"):
        contacts.set_mesh_positions("floor", np.zeros((5, 3)))


def test_zero_or_bad_thickness_and_sizes_are_errors():
    with pytest.raises(ClothInputError, match="cloth_thickness"):
        Colliders([Plane()], cloth_thickness=0.0)
    with pytest.raises(ClothInputError, match="cloth_thickness"):
        Colliders([Plane()], cloth_thickness=float("nan"))
    with pytest.raises(ClothInputError, match="thickness"):
        Sphere(0.2, thickness=-0.01)
    with pytest.raises(ClothInputError, match="radius"):
        Sphere(0.0)
    with pytest.raises(ClothInputError, match="radius"):
        Capsule(-0.1, 0.2)
    with pytest.raises(ClothInputError, match="half_extents"):
        Box((0.1, 0.0, 0.1))
    with pytest.raises(ClothInputError, match="friction"):
        Plane(friction_static=-0.1)
    with pytest.raises(ClothInputError, match="self-collision thickness"):
        Colliders([], self_collision=SelfCollision(thickness=0.0), cloth_triangles=[[0, 1, 2]])
    with pytest.raises(ClothInputError, match="cloth_triangles"):
        Colliders([], self_collision=SelfCollision())
    with pytest.raises(ClothInputError, match="not a collider"):
        Colliders(["ground"])
    with pytest.raises(ClothInputError, match="two colliders are named"):
        Colliders([Plane(name="a"), Sphere(0.1, name="a")])


def test_zero_collider_thickness_is_safe_the_cloth_thickness_keeps_the_gap():
    """A collider skin of 0 is allowed (documented): the cloth thickness alone is the gap."""
    contacts = Colliders([Box((1.0, 1.0, 0.1), position=(0.0, 0.0, -0.1), thickness=0.0)], cloth_thickness=0.003)
    pos, faces, _ = grid_mesh(5, 5, 0.2, 0.2, origin=(-0.1, -0.1, 0.05))
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=8), contact_handler=contacts)
    for _ in range(24):
        cloth.step()
    np.testing.assert_allclose(cloth.positions[:, 2], 0.003, atol=1e-6)


def test_colliders_without_any_proxy_change_nothing():
    pos, faces, _ = grid_mesh(5, 5, 0.2, 0.2)
    a = Cloth(pos, faces, contact_handler=Colliders([]))
    b = Cloth(pos, faces)
    for _ in range(5):
        a.step()
        b.step()
    np.testing.assert_array_equal(a.positions, b.positions)
