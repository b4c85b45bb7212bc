"""The narrow phase's reach on two flat sheets lying over each other, against their geometry.

Two 0.2 m sheets of 4 mm cloth (contact distance 4 mm), the upper one shifted by a third and a
fifth of a cell so that its vertices lie over the lower one's faces, at rest (no predicted travel). With a
reach slack of 0.5 mm (the world's floor when the last substep's solve pulled nothing,
``CollisionWorld(adaptive_slack=True)``), a pair between the sheets is active exactly when the gap
is within 4.5 mm and the vertex's foot lies on the face (vertex-triangle) or the closest points
of the two edges' lines lie inside both edges (edge-edge); at 4.8 mm none is. Sides and the
constraint values at the substep start (``C = side n . (p - q) - d``) are checked for every pair
between the sheets, also those the narrow phase drops by their distance from the plane (or
between the lines) without computing closest points: C must be the gap less 4 mm, each side the
one the upper sheet lies on.
"""

import numpy as np
import pytest

from selvedge.solver import Cloth, grid_mesh
from selvedge.solver.collisions import cloth_contacts as cc
from selvedge.solver.collisions.world import ClothCollision, CollisionWorld

D = 0.004
SLACK = 0.0005
TOLERANCE = cc.FACE_TOLERANCE


def _sheets(gap):
    lower, faces, _ = grid_mesh(13, 13, 0.2, 0.2, origin=(-0.1, -0.1, 0.0))
    cell = 0.2 / 12
    upper = lower + np.array([cell / 3.0, cell / 5.0, gap])  # (off the diagonals: no edge meets an end)
    cloths = [Cloth(lower, faces), Cloth(upper, faces)]
    world = CollisionWorld(cloths, [ClothCollision(thickness_m=D, layer=k) for k in range(2)])
    x = world.x.copy()
    world.lists.update(x, x, world.inv_mass, {"detections": 0, "partial_detections": 0, "redetected_vertices": 0})
    return world, x, lower.shape[0]


def _unit(v):
    return v / np.linalg.norm(v, axis=1)[:, None]


def _barycentrics(p, a, b, c):
    """Barycentrics of the foot of p on the plane of (a, b, c), unclamped (NumPy, per row)."""
    e, f, g = b - a, c - a, p - a
    d00, d01, d11 = (e * e).sum(1), (e * f).sum(1), (f * f).sum(1)
    d20, d21 = (g * e).sum(1), (g * f).sum(1)
    den = d00 * d11 - d01 * d01
    v = (d11 * d20 - d01 * d21) / den
    w = (d00 * d21 - d01 * d20) / den
    return np.stack([1.0 - v - w, v, w], axis=1)


@pytest.mark.parametrize("gap", [0.0042, 0.0048])
def test_pairs_between_two_sheets_are_active_within_the_contact_distance_plus_the_slack(gap):
    world, x, n_lower = _sheets(gap)
    mesh, cand = world.mesh, world.lists.cand
    slack = np.full(x.shape[0], SLACK)
    vt_rows = cc.vertex_triangle_narrow(x, x, mesh, cand, slack)
    ee_rows = cc.edge_edge_narrow(x, x, mesh, cand, slack)

    # vertex-triangle pairs between the sheets (the sheets are flat: no pair within one is near)
    i, t = cand.vt_vertex, cand.vt_triangle
    tri = mesh.tris[t]
    cross = mesh.cloth[i] != mesh.cloth[tri[:, 0]]
    assert cross.sum() > 200
    n = _unit(np.cross(x[tri[:, 1]] - x[tri[:, 0]], x[tri[:, 2]] - x[tri[:, 0]]))
    height = np.einsum("ij,ij->i", n, x[i] - x[tri[:, 0]])
    np.testing.assert_allclose(np.abs(height[cross]), gap, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(cand.vt_side[cross], np.sign(height[cross]))
    np.testing.assert_allclose(cand.vt_start[cross], gap - D, rtol=0, atol=1e-12)
    bary = _barycentrics(x[i], x[tri[:, 0]], x[tri[:, 1]], x[tri[:, 2]])
    over = (bary >= -TOLERANCE).all(axis=1)
    expected = np.flatnonzero(cross & over) if gap <= D + SLACK else np.zeros(0, dtype=np.int64)
    np.testing.assert_array_equal(np.sort(vt_rows), expected)
    if gap <= D + SLACK:
        assert expected.shape[0] >= n_lower  # every upper vertex over the lower sheet, and back

    # edge-edge pairs between the sheets: horizontal edges, so the lines are `gap` apart along z
    ea, eb = mesh.edges[cand.ee_a], mesh.edges[cand.ee_b]
    cross = mesh.cloth[ea[:, 0]] != mesh.cloth[eb[:, 0]]
    u, v = x[ea[:, 1]] - x[ea[:, 0]], x[eb[:, 1]] - x[eb[:, 0]]
    normal = np.cross(u, v)
    sin = np.linalg.norm(normal, axis=1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1))
    crossing = cross & (sin > 0.15)
    assert crossing.sum() > 200
    np.testing.assert_allclose(cand.ee_start[crossing], gap - D, rtol=0, atol=1e-12)
    upper_first = mesh.cloth[ea[:, 0]] == 1  # the side points from the second edge to the first
    np.testing.assert_allclose(cand.ee_side[crossing, 2], np.where(upper_first[crossing], 1.0, -1.0), atol=1e-12)
    # the closest points of the two lines, in the plane (z dropped): a + s u = c + t v
    r = x[eb[:, 0]] - x[ea[:, 0]]
    det = u[:, 0] * (-v[:, 1]) - u[:, 1] * (-v[:, 0])
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (r[:, 0] * (-v[:, 1]) - r[:, 1] * (-v[:, 0])) / det
        tt = (u[:, 0] * r[:, 1] - u[:, 1] * r[:, 0]) / det
    inside = (s > 0.0) & (s < 1.0) & (tt > 0.0) & (tt < 1.0)
    expected = np.flatnonzero(crossing & inside) if gap <= D + SLACK else np.zeros(0, dtype=np.int64)
    np.testing.assert_array_equal(np.sort(ee_rows), expected)
