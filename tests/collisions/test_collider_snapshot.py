"""The colliders' public snapshot (``Colliders.snapshot()``): what code outside the collision layer
(the learned network's world edges) reads, as read-only copies of the poses given."""

import numpy as np
import pytest

from selvedge.solver.collisions import Colliders, Plane, SDFGrid, Sphere, TriangleMesh
from selvedge.solver.mesh import uv_ellipsoid_mesh


def test_snapshot_holds_the_poses_given_and_cannot_be_written():
    body_v, body_t = uv_ellipsoid_mesh(0.25, 12, 6, np.array([0.0, 0.0, 0.0]))
    handler = Colliders(
        [
            Plane(name="floor", thickness=0.001),
            Sphere(0.1, name="head", position=(0, 0, 1.6)),
            SDFGrid(body_v, body_t, 0.05, name="rigid"),
            TriangleMesh(body_v, body_t, name="body"),
        ],
        cloth_thickness=0.004,
    )
    handler.set_transform("head", (0.0, 0.1, 1.7), (0.0, 1.0, 0.0, 0.0))
    moved = body_v + [0.0, 0.0, 0.02]
    handler.set_mesh_positions("body", moved)
    s = handler.snapshot()
    assert s.names == ("floor", "head") and list(s.kind) == [0, 1]
    assert np.array_equal(s.pos0[1], [0, 0, 1.6]) and np.array_equal(s.pos1[1], [0, 0.1, 1.7])
    assert np.array_equal(s.rot1[1], [0, 1, 0, 0])
    assert s.gap == pytest.approx([0.005, 0.004])
    (g,) = s.grids
    assert g.name == "rigid" and g.grid is handler.colliders[2] and g.gap == pytest.approx(0.004)
    (m,) = s.meshes
    assert np.array_equal(m.vertices_start, body_v) and np.array_equal(m.vertices_end, moved)
    assert np.array_equal(m.triangles, body_t) and m.gap == pytest.approx(0.004)
    with pytest.raises(ValueError):
        m.vertices_end[0, 0] = 1.0
    with pytest.raises(ValueError):
        s.pos1[1, 0] = 1.0
    handler.end_frame()  # the snapshot stays what it was
    assert np.array_equal(s.pos0[1], [0, 0, 1.6]) and np.array_equal(m.vertices_start, body_v)
    assert np.array_equal(handler.snapshot().meshes[0].vertices_start, moved)
