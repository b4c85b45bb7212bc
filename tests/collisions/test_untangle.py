"""Untangling crossed cloth (solver/collisions/untangle.py, issue 21): intersection contour
minimization measured against an independent contour length and crossing count.

- The move it computes shortens the intersection contour, measured by brute force here (each
  crossing triangle pair's segment between the points where an edge of one pierces the other).
- Random crossing triangle pairs, and a sheet dented through another, end uncrossed (the brute
  force count of ``tests/intersection_reference.py``); pinned vertices do not move, and no vertex
  moves more than a round's step times the rounds.
- In a collision world: a sheet placed through another is uncrossed at the end of its first frame
  and stays so; the bench's garment at 44 x 44, which kept a crossed pair from frame 18 on when
  crossings were only answered by running frames again, ends every frame uncrossed.
"""

from __future__ import annotations

import numpy as np
from garment_scene import garment_world
from intersection_reference import crossing_count, crossing_pairs

from selvedge.solver import Cloth, SolverSettings, grid_mesh
from selvedge.solver.collisions.intersections import one_group
from selvedge.solver.collisions.untangle import contour_moves, untangle
from selvedge.solver.collisions.world import ClothCollision, CollisionWorld
from selvedge.solver.mesh import triangulate


def _pierce(p, q, a, b, c):
    """Where segment pq passes through triangle abc (None if it does not), brute force."""
    n = np.cross(b - a, c - a)
    dp, dq = np.dot(p - a, n), np.dot(q - a, n)
    if dp * dq >= 0.0:
        return None
    point = p + (q - p) * dp / (dp - dq)
    for u, v in ((a, b), (b, c), (c, a)):
        if np.dot(np.cross(v - u, point - u), n) < 0.0:
            return None
    return point


def contour_length(x, tris) -> float:
    """Total length of the curves along which the triangles (sharing no vertex) intersect."""
    total = 0.0
    for s, t in crossing_pairs(x, tris):
        points = []
        for h, f in ((s, t), (t, s)):
            for e in range(3):
                point = _pierce(x[tris[h, e]], x[tris[h, (e + 1) % 3]], *x[tris[f]])
                if point is not None:
                    points.append(point)
        assert len(points) == 2, "a generic crossing has two piercing points"
        total += float(np.linalg.norm(points[0] - points[1]))
    return total


def _crossing_pair(rng):
    tris = np.array([[0, 1, 2], [3, 4, 5]])
    while True:
        x = rng.normal(size=(6, 3))
        if crossing_count(x, tris):
            return x, tris


def test_the_move_shortens_the_intersection_contour():
    rng = np.random.default_rng(7)
    shorter = 0
    for _ in range(200):
        x, tris = _crossing_pair(rng)
        move = np.zeros_like(x)
        contour_moves(x, tris, np.ones(6), np.array([[0, 1]]), move)  # h0 large: no limit
        length = contour_length(x, tris)
        step = 1e-4 / np.abs(move).max()
        moved = contour_length(x + step * move, tris)
        assert moved < length
        # first order: the length falls by about the move's own size, not by rounding
        assert (length - moved) / step > 1e-3 * np.linalg.norm(move)
        shorter += 1
    assert shorter == 200


def test_crossing_pairs_and_a_dented_sheet_end_uncrossed():
    rng = np.random.default_rng(11)
    for _ in range(100):
        x, tris = _crossing_pair(rng)
        inv_mass = np.ones(6)
        inv_mass[rng.integers(6)] = 0.0  # one vertex pinned
        pinned = x[inv_mass == 0.0].copy()
        start = x.copy()
        before, after, rounds, moved, _ = untangle(x, tris, inv_mass, one_group(2), 0.05, 200)
        assert before == 1 and after == 0
        assert crossing_count(x, tris) == 0
        np.testing.assert_array_equal(x[inv_mass == 0.0], pinned)
        assert np.linalg.norm(x - start, axis=1).max() <= 0.05 * rounds * (1 + 1e-12)
        assert np.array_equal(moved, np.linalg.norm(x - start, axis=1) > 0.0)

    # a 12 x 12 sheet 1 cm over another, a Gaussian dent of it pushed 4 cm through the lower one
    lower, faces, _ = grid_mesh(12, 12, 1.0, 1.0, origin=(-0.5, -0.5, 0.0), quads=True)
    upper = lower + (0.0, 0.0, 0.01)
    upper[:, 2] -= 0.05 * np.exp(-(upper[:, 0] ** 2 + upper[:, 1] ** 2) / 0.02)
    tri = triangulate(faces)
    x = np.concatenate([lower, upper])
    tris = np.concatenate([tri, tri + lower.shape[0]])
    crossed = crossing_count(x, tris)
    assert crossed > 50
    before, after, rounds, _, _ = untangle(x, tris, np.ones(x.shape[0]), one_group(tris.shape[0]), 0.002, 100)
    assert (before, after) == (crossed, 0)
    assert crossing_count(x, tris) == 0
    assert rounds < 100


def _sheet_through_sheet():
    """Two 16 x 16 sheets 2 cm apart, hanging from their top rows; the upper's middle pushed 3 cm
    down through the lower one."""
    settings = SolverSettings(substeps=10, iterations=1, fps=24.0)
    cloths = []
    for k in range(2):
        pos, faces, uvs = grid_mesh(16, 16, 0.6, 0.6, origin=(-0.3, -0.3, 0.02 * k), quads=True)
        if k == 1:
            pos[:, 2] -= 0.05 * np.exp(-(pos[:, 0] ** 2 + pos[:, 1] ** 2) / 0.005)
        pins = np.zeros(pos.shape[0])
        pins[pos[:, 1] > 0.29] = 1.0
        cloths.append(Cloth(pos, triangulate(faces), uvs=uvs, settings=settings, pin_weights=pins))
    return cloths


def test_a_world_untangles_a_sheet_placed_through_another():
    cloths = _sheet_through_sheet()
    world = CollisionWorld(cloths, [ClothCollision(thickness_m=0.004, layer=k) for k in range(2)])
    tris = world.mesh.tris
    crossed = crossing_count(world.x, tris)
    assert crossed > 20
    counts = []
    for _ in range(6):
        world.step()
        counts.append(crossing_count(world.x, tris))
    # each vertex moves at most the smallest contact distance a round (16 rounds): the 5 cm dent
    # is out by the second frame's end, and stays out
    assert counts[0] < crossed and counts[1:] == [0] * 5, (crossed, counts)
    assert world.last_stats["intersections"] == 0

    # without untangling the crossing stays: the contacts alone do not undo it
    cloths = _sheet_through_sheet()
    world = CollisionWorld(cloths, [ClothCollision(thickness_m=0.004, layer=k) for k in range(2)], untangle_rounds=0)
    for _ in range(6):
        world.step()
    assert crossing_count(world.x, tris) > 0


def test_the_garment_at_44_ends_every_frame_uncrossed():
    world, _ = garment_world(44)
    counts = []
    for _ in range(2, 26):
        world.step()
        counts.append(crossing_count(world.x, world.mesh.tris))
    assert counts == [0] * len(counts), counts
