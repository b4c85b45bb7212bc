"""The candidate lists kept across substeps (whole and partial re-detections, paths relative to
the common motion) miss no pair: at every substep, every pair that a whole detection of that
substep's state finds in contact is in the world's lists.

Two scenes: a sheet dropped on a sheet resting on a sphere (contacts between and within the
sheets, many of them active), and the fine tube hanging from a pinned ring around a swaying body
(bench/bench_collisions.py's garment, the body swaying 5 cm each way three times a second and the
ring turning 1.5 rad: the tube swings, rotates against any one translation and folds onto itself,
and its lists are renewed whole and in part).
"""

import numpy as np
import pytest
from garment_scene import tube_mesh
from intersection_reference import point_triangle_distances, segment_distances

from selvedge.solver import Cloth, SolverSettings, grid_mesh
from selvedge.solver.collisions import Colliders, Sphere, TriangleMesh
from selvedge.solver.collisions import cloth_contacts as cc
from selvedge.solver.collisions.candidate_lists import CandidateLists
from selvedge.solver.collisions.world import ClothCollision, CollisionWorld
from selvedge.solver.mesh import uv_ellipsoid_mesh


def _touching(x_start, x_pred, mesh, cand, vt, ee):
    """Of the narrow phase's active pairs (rows vt, ee of cand), the keys of those closer than
    their contact distance at the substep start or at its predicted end (distances by
    tests/intersection_reference.py, apart from the solver). That is what the lists promise: no
    pair left out comes into contact. The narrow phase's "active" is wider (a pair within the
    contact distance plus both primitives' whole travel over the substep, the common motion
    included: neighbours 10 mm apart on a tube swinging 3 mm a substep)."""
    t, e, th = mesh.tris, mesh.edges, mesh.thickness
    v, tri = cand.vt_vertex[vt], t[cand.vt_triangle[vt]]
    ea, eb = e[cand.ee_a[ee]], e[cand.ee_b[ee]]
    d_vt = 0.5 * (th[v] + th[tri[:, 0]])
    d_ee = 0.5 * (th[ea[:, 0]] + th[eb[:, 0]])
    vt_close = np.zeros(v.shape[0], dtype=bool)
    ee_close = np.zeros(ea.shape[0], dtype=bool)
    for x in (x_start, x_pred):
        vt_close |= point_triangle_distances(x[v], x[tri[:, 0]], x[tri[:, 1]], x[tri[:, 2]]) < d_vt
        ee_close |= segment_distances(x[ea[:, 0]], x[ea[:, 1]], x[eb[:, 0]], x[eb[:, 1]]) < d_ee
    return vt[vt_close], ee[ee_close]


def _watch(world):
    """Wrap the world's list update: after it, a whole detection of the same state (fresh lists,
    this substep's predicted steps) and its narrow phase; every active pair in contact at the
    substep start or predicted end (:func:`_touching`) must be listed. Returns the per-substep
    counts [(pairs in contact in the whole detection, renewals so far this frame)]."""
    lists = world.lists
    update = lists.update
    seen = []

    def checked(x_start, x_pred, inv_mass, stats):
        update(x_start, x_pred, inv_mass, stats)
        fresh = CandidateLists(lists.mesh, lists.margin_m, lists.edge_length, lists.edge_edge, False)
        fresh.detect(x_start, x_pred - x_start, inv_mass, {"detections": 0})
        cand = fresh.cand
        vt = cc.vertex_triangle_narrow(x_start, x_pred, lists.mesh, cand)
        ee = cc.edge_edge_narrow(x_start, x_pred, lists.mesh, cand)
        vt, ee = _touching(x_start, x_pred, lists.mesh, cand, vt, ee)
        vt_missing = np.setdiff1d(fresh._vt_keys[vt], lists._vt_keys)
        ee_missing = np.setdiff1d(fresh._ee_keys[ee], lists._ee_keys)
        assert vt_missing.size == 0 and ee_missing.size == 0, (
            f"substep {len(seen)}: {vt_missing.size} vertex-triangle and {ee_missing.size} edge-edge "
            f"pairs in contact in a whole detection are not in the lists"
        )
        seen.append((vt.shape[0] + ee.shape[0], stats["detections"] + stats["partial_detections"]))

    lists.update = checked
    return seen


def _sphere_cloth(z, rot, size=0.9, n=20):
    pos, faces, _ = grid_mesh(n, n, size, size, origin=(-size / 2, -size / 2, z))
    c, s = np.cos(rot), np.sin(rot)
    pos[:, :2] = pos[:, :2] @ np.array([[c, -s], [s, c]]).T
    handler = Colliders([Sphere(0.3, position=(0, 0, 0))], cloth_thickness=0.004)
    return Cloth(pos, np.asarray(faces), settings=SolverSettings(substeps=20), contact_handler=handler)


#: the lists' own margin: the default (here the thickness, 4 mm), and twice it, which lists more
#: pairs and lets the vertices stray further from their paths than the solve's margin
DETECTION_MARGINS = pytest.mark.parametrize("detection_margin_m", [None, 0.008])


@DETECTION_MARGINS
def test_lists_hold_every_active_pair_of_a_sheet_landing_on_a_sheet(detection_margin_m):
    world = CollisionWorld(
        [_sphere_cloth(0.31, 0.0), _sphere_cloth(0.45, 0.3)],
        [ClothCollision(layer=0), ClothCollision(layer=1)],
        detection_margin_m=detection_margin_m,
    )
    seen = _watch(world)
    for _ in range(14):
        world.step()
    assert len(seen) >= 14 * 20
    assert max(a for a, _ in seen) > 100  # the sheets are in contact, between and within them
    assert world.last_stats["partial_detections"] + world.last_stats["detections"] >= 1


@DETECTION_MARGINS
def test_lists_hold_every_pair_in_contact_of_a_twisted_pinned_tube(detection_margin_m):
    body_v, body_t = uv_ellipsoid_mesh(np.array([0.18, 0.12, 0.35]), 50, 51, np.array([0.0, 0.0, 1.0]))
    pos, faces = tube_mesh(84, 60, 0.192, 0.132, 0.85, 1.25)
    pins = (pos[:, 2] > 1.25 - 1e-9).astype(float)
    handler = Colliders([TriangleMesh(body_v, body_t, name="body")], cloth_thickness=0.004)
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=20), pin_weights=pins, contact_handler=handler)
    world = CollisionWorld([cloth], [ClothCollision()], detection_margin_m=detection_margin_m)
    seen = _watch(world)
    pinned = cloth.rest_positions[cloth.pinned_vertices]
    renewals = {"detections": 0, "partial_detections": 0, "redetected_vertices": 0, "affine_substeps": 0}
    for f in range(6):
        turn = 1.8 * (f + 1) / 6.0  # the pinned ring turns 1.8 rad about the body's axis
        c, s = np.cos(turn), np.sin(turn)
        shift = np.array([0.05 * np.sin(2.0 * np.pi * (f + 1) / 8.0), 0.0, 0.0])
        handler.set_mesh_positions("body", body_v + shift)
        world.step([pinned @ np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]).T + shift])
        for key in renewals:
            renewals[key] += world.last_stats[key]
    assert len(seen) >= 6 * 20
    # the twist folds the tube onto itself (measured: up to 41 pairs in contact, at 43 of 120
    # substeps; at 1.5 rad, since the cloth contacts stopped pushing the layer on the body into it,
    # only 27 substeps), and the lists were renewed whole and in part, with the paths' common
    # motion an affine map (measured: 52 whole and 68 partial passes)
    assert max(a for a, _ in seen) >= 20 and sum(a > 0 for a, _ in seen) >= 30
    assert renewals["detections"] >= 2 and renewals["partial_detections"] >= 2, renewals
    assert renewals["redetected_vertices"] >= 1000, renewals
    assert renewals["affine_substeps"] >= 20, renewals
