"""The body under the layers (issue 21): a cloth contact does not push a vertex that lies on a
body into it, so the pair's other side takes the push the body would only hand back through
the layer above (solver/collisions/cloth_contacts.py, ``_body_share``;
docs/design/cloth_contacts.md, "The body under the layers").

Checked on four vertices (a vertex under a triangle, an edge under an edge) against the plane
geometry they are set up in, and on a sheet draped on a sphere against the sphere's own distance.
"""

import math

import numpy as np
from kernel_calls import edge_edge_pair, vertex_triangle_pair

from selvedge.solver import Cloth, SolverSettings, grid_mesh
from selvedge.solver.collisions import Colliders, Sphere
from selvedge.solver.collisions.colliders import TOUCHING_REACH
from selvedge.solver.collisions.world import ClothCollision, CollisionWorld

D = 0.004  # contact distance: both layers 4 mm thick
TRIANGLE = np.array([[-0.02, -0.02, 0.002], [0.02, -0.02, 0.002], [0.0, 0.04, 0.002]])  # centroid (0, 0)


def _press(body_normal_of_vertex):
    """Vertex 3 at the origin under a triangle 2 mm above it (the pair wants 4 mm: C = -2 mm), all
    four of unit inverse mass; one pass of the vertex-triangle solve. Returns the positions."""
    x = np.vstack([TRIANGLE, [[0.0, 0.0, 0.0]]])
    body_normal = np.zeros((4, 3))
    body_normal[3] = body_normal_of_vertex
    below = np.array([-1.0])  # the vertex belongs under the triangle
    vertex_triangle_pair(x, x.copy(), np.ones(4), below, np.array([False]), np.zeros(1), D, body_normal=body_normal)
    return x


def test_a_vertex_on_the_body_stays_and_the_layer_above_takes_the_whole_push():
    # free: the 2 mm are shared by inverse mass, K = 1 + 3 (1/3)^2 = 4/3: the vertex goes down
    # 1.5 mm, the triangle up 0.5 mm
    free = _press((0.0, 0.0, 0.0))
    assert math.isclose(free[3, 2], -0.0015, abs_tol=1e-12)
    assert np.allclose(free[:3, 2], 0.0025, atol=1e-12)
    # on a body whose outward normal is +z (any length: several contacts add up): the vertex does
    # not move, the triangle rises the whole 2 mm, to the contact distance
    held = _press((0.0, 0.0, 2.0))
    assert np.array_equal(held[3], [0.0, 0.0, 0.0])
    assert np.allclose(held[:3, 2], 0.002 + 0.002, atol=1e-12)
    assert np.allclose(held[:3, :2], TRIANGLE[:, :2], atol=0.0)


def test_a_body_tilted_from_the_push_holds_the_vertex_by_the_square_of_the_cosine():
    # body normal 60 degrees from the push: the vertex keeps 1 - cos^2 = 3/4 of its mobility, so
    # K = 3/4 + 1/3 and the vertex goes down 2 mm * (3/4) / K, the triangle up 2 mm * (1/3) / K
    tilt = math.radians(60.0)
    x = _press((math.sin(tilt), 0.0, math.cos(tilt)))
    k = 0.75 + 1.0 / 3.0
    assert math.isclose(x[3, 2], -0.002 * 0.75 / k, abs_tol=1e-12)
    assert np.allclose(x[:3, 2], 0.002 + 0.002 / 3.0 / k, atol=1e-12)
    # a body whose normal points along the push (the vertex pushed away from it) does not hold it
    assert np.array_equal(_press((0.0, 0.0, -1.0)), _press((0.0, 0.0, 0.0)))


def test_the_world_reads_the_vertices_that_lie_on_the_sphere():
    """After a 24 x 24 sheet has draped on a sphere of 0.3 m (contact distance r = 4 mm), the world's
    ``body_normal`` is nonzero exactly where a vertex lies within ``TOUCHING_REACH r`` of touching
    the sphere (its distance from the centre at most 0.3 + 1.05 r, checked against the sphere itself,
    not the contact rows), and points outward along the radius."""
    pos, faces, _ = grid_mesh(24, 24, 0.8, 0.8, origin=(-0.4, -0.4, 0.31))
    cloth = Cloth(
        pos,
        np.asarray(faces),
        settings=SolverSettings(substeps=10),
        contact_handler=Colliders([Sphere(0.3, position=(0, 0, 0))], cloth_thickness=D),
    )
    world = CollisionWorld([cloth], [ClothCollision(thickness_m=D)])
    for _ in range(12):
        world.step()
    world._read_body_normals()
    radius = np.linalg.norm(world.x, axis=1)
    held = np.linalg.norm(world.body_normal, axis=1) > 0.0
    touching = radius <= 0.3 + (1.0 + TOUCHING_REACH) * D + 1e-9
    assert held.sum() > 100  # the sheet lies on the sphere's cap
    assert np.array_equal(held, touching & held)  # nothing held that is off the sphere
    # and every vertex well within reach was read (the narrow phase lists the contacts within reach)
    assert np.all(held[radius <= 0.3 + D])
    unit = world.body_normal[held] / np.linalg.norm(world.body_normal[held], axis=1)[:, None]
    radial = world.x[held] / radius[held, None]
    assert np.all(np.einsum("ij,ij->i", unit, radial) > 0.999)


def _press_edges(body_normal_of_a):
    """Edge 0-1 along x at the origin, edge 2-3 along y 2 mm above it (the pair wants 4 mm: C = -2 mm,
    closest points at both midpoints, so each end carries half), all four of unit inverse mass; one
    pass of the edge-edge solve. Returns the positions."""
    x = np.array([[-0.01, 0.0, 0.0], [0.01, 0.0, 0.0], [0.0, -0.01, 0.002], [0.0, 0.01, 0.002]])
    body_normal = np.zeros((4, 3))
    body_normal[0] = body_normal[1] = body_normal_of_a
    below = np.array([[0.0, 0.0, -1.0]])  # edge 0-1 belongs under edge 2-3
    edge_edge_pair(x, x.copy(), np.ones(4), below, np.array([False]), np.zeros(1), D, body_normal=body_normal)
    return x


def test_an_edge_on_the_body_stays_and_the_edge_above_takes_the_whole_push():
    # free: K = 4 x (1/2)^2 = 1, each edge's midpoint moves 1 mm: the lower edge to -1 mm, the upper to 3 mm
    free = _press_edges((0.0, 0.0, 0.0))
    assert np.allclose(free[:2, 2], -0.001, atol=1e-12) and np.allclose(free[2:, 2], 0.003, atol=1e-12)
    # the lower edge on a body with outward normal +z: it stays, the upper one rises the whole 2 mm
    held = _press_edges((0.0, 0.0, 1.0))
    assert np.array_equal(held[:2], [[-0.01, 0.0, 0.0], [0.01, 0.0, 0.0]])
    assert np.allclose(held[2:, 2], 0.004, atol=1e-12)
