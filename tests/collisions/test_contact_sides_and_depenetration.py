"""Two rules of the cloth-contact solve (solver/collisions/cloth_contacts.py), checked on four
vertices against the geometry they are set up in:

* an edge-edge pair keeps its physical side when its edges turn through parallel (the common
  normal d_a x d_b reverses there; a remembered sign pushed the edges through each other);
* a pair that starts a substep overlapping is pushed apart by at most the world's
  depenetration allowance a substep, while overlap made by the substep's own motion is undone in
  full (so an old overlap no longer leaves as a velocity of overlap / h).
"""

import math

import numpy as np
from kernel_calls import edge_edge_pair, vertex_triangle_pair

from selvedge.solver.collisions import cloth_contacts as cc

D = 0.004  # both "cloths" 4 mm thick: contact distance 4 mm


def _edge_pair(theta, gap):
    """Edge 0-1 along x at z = 0 (pinned); edge 2-3 above it at height ``gap``, turned by ``theta``
    about z, both centred on the z axis."""
    c, s = math.cos(theta), math.sin(theta)
    return np.array(
        [[-0.01, 0.0, 0.0], [0.01, 0.0, 0.0], [-0.01 * c, -0.01 * s, gap], [0.01 * c, 0.01 * s, gap]], dtype=np.float64
    )


def _solve_ee(x, x_start, side, held, start, depenetration=1.0):
    return edge_edge_pair(x, x_start, [0.0, 0.0, 1.0, 1.0], side, held, start, D, depenetration)


def _narrow_ee(x_start, x_pred, side, held, start):
    edges = np.array([[0, 1], [2, 3]], dtype=np.int64)
    active = np.empty(1, dtype=np.bool_)
    cc._ee_narrow_flags(
        x_start,
        x_pred,
        edges,
        np.full(4, D),
        np.array([0], dtype=np.int64),
        np.array([1], dtype=np.int64),
        side,
        held,
        start,
        np.zeros(1),  # the pair's clearance (the kernel_calls wrappers do not read it)
        active,
        np.zeros(4),  # no reach slack
        cc.vertex_travel(x_start, x_pred, np.empty(4)),
    )
    return bool(active[0])


def test_edge_pair_in_contact_keeps_its_side_through_parallel():
    # Detected separated with the upper edge turned +30 degrees: its side is "above".
    x0 = _edge_pair(math.radians(30.0), 0.006)
    side = np.zeros((1, 3))
    cc.initial_ee_sides(x0, np.array([[0, 1], [2, 3]], dtype=np.int64), np.array([0]), np.array([1]), side)
    assert side[0, 2] < 0.0  # the first (lower) edge belongs below: its side points down
    # Pressed into contact (3 mm < 4 mm) and held there, the upper edge turns through parallel to
    # -30 degrees over a few substeps; the contact stays held (it pushes every substep).
    held = np.array([True])
    start = np.zeros(1)
    for deg in (20.0, 10.0, 2.0, -2.0, -10.0, -30.0):
        x = _edge_pair(math.radians(deg), 0.003)
        x_start = x.copy()
        active = _narrow_ee(x_start, x, side, held, start)
        if abs(deg) < 3.0:  # within 3 degrees of parallel: no common normal, no edge-edge contact
            assert not active
            held[:] = True  # (the vertex-triangle contacts would hold such a pair)
            continue
        assert active
        _solve_ee(x, x_start, side, held, start)
        # the upper edge is pushed up to the contact distance, never down through the lower one
        assert abs(x[2, 2] - x[3, 2]) < 1e-12
        assert x[2, 2] > 0.0
        assert abs(x[2, 2] - D) < 1e-9, (deg, x[2, 2])


def test_overlap_from_the_substep_start_comes_out_at_the_depenetration_rate():
    # A pair that starts the substep 3 mm deep (1 mm apart for a 4 mm contact) and does not move:
    # pushed apart by the allowance (0.2 mm) only, not to 4 mm at once.
    theta = math.radians(60.0)
    x = _edge_pair(theta, 0.001)
    x_start = x.copy()
    side = np.zeros((1, 3))
    cc.initial_ee_sides(x, np.array([[0, 1], [2, 3]], dtype=np.int64), np.array([0]), np.array([1]), side)
    held = np.array([True])
    start = np.zeros(1)
    assert _narrow_ee(x_start, x, side, held, start)
    assert abs(start[0] - (0.001 - D)) < 1e-12  # C at the start: 3 mm of overlap
    _solve_ee(x, x_start, side, held, start, depenetration=0.0002)
    assert abs(x[2, 2] - 0.0012) < 1e-9
    # Overlap made by this substep's motion (separated at the start, 1 mm apart predicted): out in full.
    x_start = _edge_pair(theta, 0.006)
    x = _edge_pair(theta, 0.001)
    held = np.array([False])
    assert _narrow_ee(x_start, x, side, held, start)
    assert start[0] > 0.0
    _solve_ee(x, x_start, side, held, start, depenetration=0.0002)
    assert abs(x[2, 2] - D) < 1e-9


def test_vertex_over_a_face_overlapping_from_the_start_comes_out_at_the_depenetration_rate():
    tris = np.array([[0, 1, 2]], dtype=np.int64)
    face = np.array([[-0.02, -0.02, 0.0], [0.02, -0.02, 0.0], [0.0, 0.03, 0.0]])
    for start_height, expected in ((0.001, 0.0012), (0.006, D)):  # old overlap / this substep's
        x_start = np.vstack([face, [[0.0, 0.0, start_height]]])
        x = np.vstack([face, [[0.0, 0.0, 0.001]]])
        cv, ct = np.array([3], dtype=np.int64), np.array([0], dtype=np.int64)
        side = np.zeros(1)
        cc.initial_vt_sides(x_start, tris, cv, ct, side)
        held, start, active = np.array([False]), np.zeros(1), np.empty(1, dtype=np.bool_)
        cc._vt_narrow_flags(
            x_start,
            x,
            tris,
            np.full(4, D),
            cv,
            ct,
            side,
            held,
            start,
            np.zeros(1),
            active,
            np.zeros(4),
            cc.vertex_travel(x_start, x, np.empty(4)),
        )
        assert active[0]
        vertex_triangle_pair(x, x_start, [0.0, 0.0, 0.0, 1.0], side, held, start, D, 0.0002)
        assert abs(x[3, 2] - expected) < 1e-9, (start_height, x[3, 2])
