"""Triangle-mesh and capsule body colliders: a skirt on a turning body (001 ch. 6, issue 3).

The checks are exact geometry, computed here independently of the solver: the signed distance
of every skirt vertex to the body's polygonal cross-section (or to the capsule's axis
segment) in the body frame of that frame.
"""

import math

import numpy as np
import pytest

from selvedge.solver import Cloth, ClothOptions, SolverSettings, grid_mesh
from selvedge.solver.collisions import Capsule, Colliders, TriangleMesh, quaternion_axis_angle
from selvedge.solver.mesh import uv_ellipsoid_mesh

THICKNESS = 0.006


def elliptic_body(rx, ry, height, segments=24, rings=7):
    """Closed elliptic prism from z = 0 to height, outward-wound; returns (vertices, triangles, 2D polygon)."""
    ang = 2 * np.pi * np.arange(segments) / segments
    ring = np.stack([rx * np.cos(ang), ry * np.sin(ang)], axis=1)
    zs = np.linspace(0.0, height, rings)
    verts = [np.column_stack([ring, np.full(segments, z)]) for z in zs]
    verts.append([[0.0, 0.0, 0.0]])
    verts.append([[0.0, 0.0, height]])
    v = np.concatenate(verts)
    bottom, top = len(v) - 2, len(v) - 1
    tris = []
    for r in range(rings - 1):
        for i in range(segments):
            a, b = r * segments + i, r * segments + (i + 1) % segments
            c, d = a + segments, b + segments
            tris += [(a, b, d), (a, d, c)]
    for i in range(segments):
        tris.append((bottom, (i + 1) % segments, i))
        last = (rings - 1) * segments
        tris.append((top, last + i, last + (i + 1) % segments))
    return v, np.array(tris, dtype=np.int64), ring


def skirt(rx, ry, z_top, length, segments=24, rings=9):
    """Open elliptic tube hanging from z_top; ring 0 (the waist) first."""
    ang = 2 * np.pi * (np.arange(segments) + 0.5) / segments
    pos = []
    for r, z in enumerate(np.linspace(z_top, z_top - length, rings)):
        pos.append(np.column_stack([rx * np.cos(ang), ry * np.sin(ang), np.full(segments, z)]))
    pos = np.concatenate(pos)
    tris = []
    for r in range(rings - 1):
        for i in range(segments):
            a, b = r * segments + i, r * segments + (i + 1) % segments
            c, d = a + segments, b + segments
            tris += [(a, b, d), (a, d, c)]
    return pos, np.array(tris, dtype=np.int64), segments


def rot_z(points, angle):
    c, s = math.cos(angle), math.sin(angle)
    out = points.copy()
    out[..., 0] = c * points[..., 0] - s * points[..., 1]
    out[..., 1] = s * points[..., 0] + c * points[..., 1]
    return out


def polygon_signed_distance(p2, poly):
    """Exact signed distance of 2D points to a convex CCW polygon (negative inside)."""
    a = poly
    b = np.roll(poly, -1, axis=0)
    ab = b - a
    ap = p2[:, None, :] - a[None, :, :]
    t = np.clip((ap * ab).sum(-1) / (ab * ab).sum(-1), 0.0, 1.0)
    closest = a[None] + t[..., None] * ab[None]
    dist = np.linalg.norm(p2[:, None, :] - closest, axis=-1).min(axis=1)
    cross = ab[None, :, 0] * ap[..., 1] - ab[None, :, 1] * ap[..., 0]
    inside = (cross > 0).all(axis=1)
    return np.where(inside, -dist, dist)


def test_skirt_pinned_at_waist_stays_outside_a_rotating_body_mesh_for_200_frames():
    rx, ry, height = 0.2, 0.12, 1.2
    body_v, body_t, poly = elliptic_body(rx, ry, height)
    pos, faces, seg = skirt(rx + 0.02, ry + 0.02, 1.0, 0.45)
    pins = np.zeros(len(pos))
    pins[:seg] = 1.0
    body = TriangleMesh(body_v, body_t, name="body", friction_static=0.3, friction_kinetic=0.2)
    contacts = Colliders([body], cloth_thickness=THICKNESS)
    cloth = Cloth(
        pos,
        faces,
        pin_weights=pins,
        settings=SolverSettings(substeps=8),
        options=ClothOptions(tether_scale=1.02),
        contact_handler=contacts,
    )
    omega = math.pi  # half a turn per second, 200 frames = 4 turns
    worst = math.inf
    touching = 0
    for f in range(200):
        angle = omega * (f + 1) / 24.0
        contacts.set_mesh_positions("body", rot_z(body_v, angle))
        cloth.step(pin_targets=rot_z(pos[:seg], angle))
        local = rot_z(cloth.positions, -angle)
        d = polygon_signed_distance(local[:, :2], poly)
        worst = min(worst, float(d.min()))
        touching = max(touching, int((d < THICKNESS + 1e-3).sum()))
    # every vertex stays outside the body by the cloth thickness (0.5 mm tolerance: the solver's
    # contact plane at a facet edge is the tangent plane, the exact distance is never smaller)
    assert worst >= THICKNESS - 5e-4, f"a skirt vertex came to {worst:.4f} m of the body (thickness {THICKNESS})"
    assert touching >= 20, "the turning body must actually push the skirt for the test to mean anything"


def test_skirt_stays_outside_a_swinging_capsule_for_200_frames():
    """A leg capsule hanging from a hip pivot swings 25 degrees about a horizontal axis that turns
    around z (a circling leg), inside a skirt pinned at the waist."""
    radius, half = 0.14, 0.4
    pivot = np.array([0.0, 0.0, 1.0])
    pos, faces, seg = skirt(radius + 0.05, radius + 0.05, 0.95, 0.5, segments=20, rings=9)
    pins = np.zeros(len(pos))
    pins[:seg] = 1.0
    contacts = Colliders(
        [
            Capsule(
                radius,
                half,
                name="leg",
                position=pivot - (0.0, 0.0, half + 0.05),
                friction_static=0.3,
                friction_kinetic=0.2,
            )
        ],
        cloth_thickness=THICKNESS,
    )
    cloth = Cloth(
        pos,
        faces,
        pin_weights=pins,
        settings=SolverSettings(substeps=8),
        options=ClothOptions(tether_scale=1.02),
        contact_handler=contacts,
    )
    worst = math.inf
    touching = 0
    for f in range(200):
        t = (f + 1) / 24.0
        phi = 1.5 * math.pi * t
        q = quaternion_axis_angle((math.cos(phi), math.sin(phi), 0.0), math.radians(25.0) * min(t, 1.0))
        axis = np.array(
            [2 * (q[1] * q[3] + q[0] * q[2]), 2 * (q[2] * q[3] - q[0] * q[1]), 1 - 2 * (q[1] ** 2 + q[2] ** 2)]
        )  # the rotated local z
        center = pivot - (half + 0.05) * axis
        contacts.set_transform("leg", center, q)
        cloth.step()
        rel = cloth.positions - center
        s = np.clip(rel @ axis, -half, half)
        d = np.linalg.norm(rel - s[:, None] * axis, axis=1) - radius
        worst = min(worst, float(d.min()))
        touching = max(touching, int((d < THICKNESS + 1e-3).sum()))
    assert worst >= THICKNESS - 1e-4, f"a skirt vertex came to {worst:.4f} m of the capsule"
    assert touching >= 10, "the swinging leg must actually push the skirt for the test to mean anything"


def test_open_mesh_keeps_each_vertex_on_its_frame_start_side():
    """An open two-triangle sheet: cloth below it pushed up and cloth above it falling stay on their sides."""
    sheet_v = np.array([[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [1.0, 1.0, 0.0], [-1.0, 1.0, 0.0]])
    sheet_t = np.array([[0, 1, 2], [0, 2, 3]])
    contacts = Colliders([TriangleMesh(sheet_v, sheet_t, name="sheet")], cloth_thickness=THICKNESS)
    from selvedge.solver import grid_mesh

    below, faces, _ = grid_mesh(5, 5, 0.2, 0.2, origin=(-0.1, -0.1, -0.05))
    above, _, _ = grid_mesh(5, 5, 0.2, 0.2, origin=(-0.1, -0.1, 0.05))
    pos = np.concatenate([below, above])
    tri = np.concatenate([faces, faces + len(below)])
    v0 = np.zeros_like(pos)
    v0[: len(below), 2] = 4.0  # thrown up into the sheet from below
    cloth = Cloth(pos, tri, initial_velocities=v0, settings=SolverSettings(substeps=10), contact_handler=contacts)
    for _ in range(24):
        cloth.step()
        z = cloth.positions[:, 2]
        assert z[: len(below)].max() <= -THICKNESS + 1e-6
        assert z[len(below) :].min() >= THICKNESS - 1e-6
    # the upper patch rests on the sheet
    np.testing.assert_allclose(cloth.positions[len(below) :, 2], THICKNESS, atol=1e-6)


def test_closest_point_on_triangle_matches_dense_sampling():
    """The point-triangle query (all seven Voronoi regions) against a dense barycentric sampling."""
    from selvedge.solver.collisions import geometry

    rng = np.random.default_rng(7)
    k = 120
    a, b = np.meshgrid(np.linspace(0, 1, k), np.linspace(0, 1, k))
    keep = a + b <= 1.0
    bary = np.stack([1 - a[keep] - b[keep], a[keep], b[keep]], axis=1)
    for _ in range(40):
        tri = rng.normal(size=(3, 3))
        p = rng.normal(size=3) * 2.0
        u, v, w = geometry.closest_on_triangle(*p, *tri[0], *tri[1], *tri[2])
        assert min(u, v, w) >= -1e-12 and abs(u + v + w - 1.0) < 1e-12
        exact = np.linalg.norm(p - (u * tri[0] + v * tri[1] + w * tri[2]))
        sampled = np.linalg.norm(p - bary @ tri, axis=1).min()
        spacing = np.linalg.norm(tri[1] - tri[0]) + np.linalg.norm(tri[2] - tri[0])
        assert exact <= sampled + 1e-12
        assert exact >= sampled - spacing / k


def _segment_triangle_distances(p, q, a, b, c, iterations=80):
    """Reference distance of the segment [p, q] (or of row k of p, q) to every triangle (a, b, c
    rows): the distance of a point to a triangle is convex along the segment (the distance to a
    convex set), so a ternary search over the segment parameter, one per triangle, finds its
    minimum (80 steps: the parameter to 1e-14)."""
    lo, hi = np.zeros(len(a)), np.ones(len(a))

    def at(s):
        return _distances_to_triangles(p + s[:, None] * (q - p), a, b, c)

    for _ in range(iterations):
        m1, m2 = lo + (hi - lo) / 3.0, hi - (hi - lo) / 3.0
        left = at(m1) <= at(m2)
        hi = np.where(left, m2, hi)
        lo = np.where(left, lo, m1)
    return np.minimum.reduce([at(0.5 * (lo + hi)), at(np.zeros(len(a))), at(np.ones(len(a)))])


def test_segment_plane_gap_against_a_search_along_the_segment():
    """The cheap lower bound the broad phase lists with (the nearer end's distance to the
    triangle's plane when the segment does not cross it) against a ternary search of the
    point-triangle distance along the segment, over random segments, segments crossing the face
    (0) and segments above it (where the bound is the distance itself)."""
    from selvedge.solver.collisions import geometry

    rng = np.random.default_rng(11)
    tris, ends, kinds = [], [], []
    for k in range(300):
        tri = rng.normal(size=(3, 3))
        if k % 3 == 0:  # above the face, parallel-ish to it: the gap is the distance
            normal = np.cross(tri[1] - tri[0], tri[2] - tri[0])
            normal /= np.linalg.norm(normal)
            inside = np.array([0.2, 0.3, 0.5]) @ tri, np.array([0.4, 0.4, 0.2]) @ tri
            h = rng.uniform(0.01, 0.5)
            p, q = inside[0] + h * normal, inside[1] + (h + rng.uniform(0, 0.1)) * normal
        elif k % 3 == 1:  # crossing the face
            c = np.array([0.3, 0.3, 0.4]) @ tri
            d = rng.normal(size=3)
            p, q = c - d, c + d
        else:
            p, q = rng.normal(size=3) * 2.0, rng.normal(size=3) * 2.0
        tris.append(tri)
        ends.append((p, q))
        kinds.append(k % 3)
    tris, ends, kinds = np.array(tris), np.array(ends), np.array(kinds)
    reference = _segment_triangle_distances(ends[:, 0], ends[:, 1], tris[:, 0], tris[:, 1], tris[:, 2])
    gap = np.array([geometry.segment_plane_gap(*e[0], *e[1], *t[0], *t[1], *t[2]) for e, t in zip(ends, tris)])
    assert np.all(gap <= reference + 1e-12)
    np.testing.assert_allclose(gap[kinds == 0], reference[kinds == 0], rtol=0, atol=1e-9)
    assert np.all(gap[kinds == 1] == 0.0) and np.all(reference[kinds == 1] < 1e-9)
    assert np.all(reference[kinds == 0] > 0.009)  # the above-the-face cases are not trivially 0


def test_slerp_is_constant_speed_and_matches_axis_angle():
    """Inside the frame a rotation from 0 to 120 degrees about z is at 120 t degrees at fraction t."""
    from selvedge.solver.collisions import Box, Colliders

    c = Colliders([Box((1.0, 0.2, 0.2), name="bar")])
    c.set_transform("bar", (0.0, 0.0, 0.0), quaternion_axis_angle((0, 0, 1), math.radians(120.0)))
    for t in (0.0, 0.25, 0.5, 0.9, 1.0):
        angle = math.radians(120.0) * t
        # the bar's far end (1, 0, 0) rotated: a point just outside it along the bar axis is 1 cm away
        probe = np.array([[1.01 * math.cos(angle), 1.01 * math.sin(angle), 0.0]])
        assert c.analytic_signed_distance(probe, t)[0, 0] == pytest.approx(0.01, abs=1e-9)


def _closest_distance(p, a, b, c):
    """Exact distance of point p to the nearest of the triangles (a, b, c rows), brute force."""
    return float(_distances_to_triangles(p, a, b, c).min())


def _distances_to_triangles(p, a, b, c):
    """Exact distance of point p (or of row k of p to triangle k) to every triangle (a, b, c rows)."""
    ab, ac = b - a, c - a
    n = np.cross(ab, ac)
    n /= np.linalg.norm(n, axis=1)[:, None]
    q = p - ((p - a) * n).sum(1)[:, None] * n
    inside = (
        ((np.cross(b - a, q - a) * n).sum(1) >= 0)
        & ((np.cross(c - b, q - b) * n).sum(1) >= 0)
        & ((np.cross(a - c, q - c) * n).sum(1) >= 0)
    )
    d = np.where(inside, np.linalg.norm(p - q, axis=1), np.inf)
    for e0, e1 in ((a, b), (b, c), (c, a)):
        e = e1 - e0
        s = np.clip(((p - e0) * e).sum(1) / (e * e).sum(1), 0.0, 1.0)
        d = np.minimum(d, np.linalg.norm(p - (e0 + s[:, None] * e), axis=1))
    return d


@pytest.mark.parametrize("spare", ["default", "none"])
def test_mesh_narrow_phase_finds_the_true_closest_triangle_of_every_vertex_near_the_body(spare):
    """The capsule broad phase and the list reuse never miss a triangle: at every substep of a cloth
    dropped onto a moving mesh ball, every free vertex within 2 x contact radius + 1 mm of the body
    (brute force over all triangles, body at the substep end) has a contact row whose surface
    point is at exactly that distance (1e-9 m), deflected vertices included (re-queried). With no
    spare room kept after a merge, every re-queried list overflows the arrays and is appended after
    a compaction instead: the same must hold."""
    thickness = 0.004
    body_v, body_t = uv_ellipsoid_mesh(0.25, 24, 12, np.array([0.0, 0.0, 0.0]))
    pos, faces, _ = grid_mesh(16, 16, 0.8, 0.8, origin=(-0.4, -0.4, 0.25 + 0.3))
    checked = []
    requeried = []

    class Checked(Colliders):
        if spare == "none":

            @staticmethod
            def _spare(new):
                return 0

        def begin_substep(self, x_start, x_pred, t_start, t_end, h):
            super().begin_substep(x_start, x_pred, t_start, t_end, h)
            m = self.meshes[0]
            verts = m.v0 + t_end * (m.v1 - m.v0)
            a, b, c = verts[body_t[:, 0]], verts[body_t[:, 1]], verts[body_t[:, 2]]
            centre = verts.mean(axis=0)
            rows = {int(i): r for r, i in enumerate(self.c_vertex[: self._n_contacts])}
            for i in np.nonzero(np.linalg.norm(x_pred - centre, axis=1) < 0.25 + 0.02)[0]:
                d = _closest_distance(x_pred[i], a, b, c)
                if d > 2 * thickness + 1e-3:
                    continue
                assert int(i) in rows, f"vertex {i} at {d:.4g} m from the body got no contact"
                r = rows[int(i)]
                got = float(np.linalg.norm(x_pred[i] - self.c_point[r]))
                assert got == pytest.approx(d, abs=1e-9), f"vertex {i}: contact at {got} m, closest {d} m"
                checked.append(d)
            requeried.append(self._stats.get("mesh_lists_requeried", 0))

    contacts = Checked([TriangleMesh(body_v, body_t, name="ball")], cloth_thickness=thickness)
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=10), contact_handler=contacts)
    for f in range(30):
        # the ball slides sideways (5 cm/frame for 10 frames, then stops): collider motion + deflection
        shift = np.array([0.05 * min(f + 1, 10), 0.0, 0.0])
        contacts.set_mesh_positions("ball", body_v + shift)
        cloth.step()
    assert len(checked) > 500, "the test must see many vertices in contact range"
    assert sum(requeried) > 0, "the test must see re-queried (appended) candidate lists"


def test_mesh_contacts_do_not_depend_on_the_thread_count():
    """The mesh narrow phase runs per vertex in parallel and compacts in vertex order: one and two
    Numba threads give bit-identical trajectories, with the ball moving (frames 0-5) and standing
    (frames 6-13: the standing shortcuts certify scans)."""
    from thread_counts import on_thread_counts

    body_v, body_t = uv_ellipsoid_mesh(0.25, 24, 12, np.array([0.0, 0.0, 0.0]))

    def run():
        pos, faces, _ = grid_mesh(12, 12, 0.6, 0.6, origin=(-0.3, -0.3, 0.3))
        contacts = Colliders([TriangleMesh(body_v, body_t, name="ball")], cloth_thickness=0.004)
        cloth = Cloth(pos, faces, settings=SolverSettings(substeps=8), contact_handler=contacts)
        certified = 0
        for f in range(14):
            contacts.set_mesh_positions("ball", body_v + [0.01 * min(f + 1, 6), 0.0, 0.0])
            cloth.step()
            certified += contacts.diagnostics()["mesh_scans_certified"]
        return cloth.positions.copy(), certified

    results = on_thread_counts(run)
    assert np.array_equal(results[0][0], results[1][0])
    assert results[0][1] == results[1][1] > 100


def test_narrow_phase_caches_skip_work_without_changing_the_contacts():
    """The narrow phase skips a vertex while a bound of its distance to the mesh keeps it out of
    contact reach (clearance cache), and measures only the last closest triangle while a bound on
    all the others proves it still the closest (nearest-triangle cache). Dropped onto a sliding
    ball, the cloth must follow the same trajectory as with every candidate of every vertex
    measured every substep, while a good part of the scans is skipped (measured 19 % of all scans
    of the 30 frames with the capsules' 0.05 deflection allowance, 46 % with 0.25: a shorter list
    reach bounds the clearance of an unlisted triangle less far out). The nearest-triangle cache
    is used here too, but this cloth slides off the ball: see the resting test below."""
    body_v, body_t = uv_ellipsoid_mesh(0.25, 24, 12, np.array([0.0, 0.0, 0.0]))
    runs, skipped, scanned, cached = [], [], [], []
    for cache in (True, False):
        pos, faces, _ = grid_mesh(16, 16, 0.8, 0.8, origin=(-0.4, -0.4, 0.25 + 0.3))
        contacts = Colliders([TriangleMesh(body_v, body_t, name="ball")], cloth_thickness=0.004)
        contacts.use_clearance_cache = cache
        cloth = Cloth(pos, faces, settings=SolverSettings(substeps=10), contact_handler=contacts)
        skips = hits = 0
        for f in range(30):
            contacts.set_mesh_positions("ball", body_v + [0.02 * min(f + 1, 10), 0.0, 0.0])
            cloth.step()
            skips += contacts.diagnostics()["mesh_scans_skipped"]
            hits += contacts.diagnostics()["mesh_scans_cached"]
        runs.append(cloth.positions.copy())
        skipped.append(skips)
        cached.append(hits)
        scanned.append(30 * 10 * len(pos))
    print(
        f"\n[narrow-phase caches] scans skipped {skipped[0]} of {scanned[0]}, answered from the nearest-triangle "
        f"cache {cached[0]}; max difference {np.abs(runs[0] - runs[1]).max():.3g} m"
    )
    assert skipped[1] == 0 and cached[1] == 0
    assert skipped[0] > 0.15 * scanned[0]
    assert np.abs(runs[0] - runs[1]).max() < 1e-9


def test_narrow_phase_bounds_outlive_a_frame_but_not_a_retried_one():
    """The clearance and nearest-triangle bounds are about the whole mesh, with the collider's
    motion counted since they were taken, so a finished frame hands them to the next (a resting
    cloth is not scanned afresh every frame); a frame begun again before it ended (the Cloth
    retries a failed frame from its start) must not use bounds taken later in the failed attempt:
    every vertex is scanned again."""
    body_v, body_t = uv_ellipsoid_mesh(0.25, 24, 12, np.array([0.0, 0.0, 0.0]))
    pos, faces, _ = grid_mesh(16, 16, 0.8, 0.8, origin=(-0.4, -0.4, 0.25 + 0.03))
    contacts = Colliders([TriangleMesh(body_v, body_t, name="ball")], cloth_thickness=0.004)
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=10), contact_handler=contacts)
    for _ in range(3):
        cloth.step()
    m = contacts.meshes[0]
    kept = (m.clear >= 0.0).sum(), (m.near_t >= 0).sum()
    contacts.begin_frame(cloth.x, cloth.v, cloth.inv_mass, 1.0 / 24.0)  # the next frame: bounds kept
    assert kept[0] > 100 and kept[1] > 20
    assert (m.clear >= 0.0).sum() == kept[0] and (m.near_t >= 0).sum() == kept[1]
    contacts.begin_frame(cloth.x, cloth.v, cloth.inv_mass, 1.0 / 24.0)  # begun again: a retry
    assert (m.clear < 0.0).all() and (m.near_t < 0).all()


def test_hash_grid_is_kept_while_the_collider_stands_still_and_rebuilt_when_it_moves(monkeypatch):
    """The triangle grid of a mesh collider is built again only when its vertices change: a ball that
    stands still for 12 frames, slides for 12 and stands again builds it once per moving frame plus
    twice, and the cloth lands exactly as with a grid rebuilt every frame (1e-12 m: another cell
    size may list equally distant triangles in another order)."""
    from selvedge.solver.collisions import hash_grid

    builds = []
    real = hash_grid.hash_boxes
    monkeypatch.setattr(hash_grid, "hash_boxes", lambda *a: builds.append(1) or real(*a))
    body_v, body_t = uv_ellipsoid_mesh(0.25, 24, 12, np.array([0.0, 0.0, 0.0]))
    runs, counts = [], []
    for keep in (True, False):
        builds.clear()
        pos, faces, _ = grid_mesh(12, 12, 0.6, 0.6, origin=(-0.3, -0.3, 0.3))
        contacts = Colliders([TriangleMesh(body_v, body_t, name="ball")], cloth_thickness=0.004)
        contacts.use_standing_shortcuts = False  # (with them a standing ball needs no candidate lists, nor a grid)
        cloth = Cloth(pos, faces, settings=SolverSettings(substeps=8), contact_handler=contacts)
        per_phase = []
        for phase in range(3):
            before = len(builds)
            for f in range(12):
                shift = 0.01 * (min(max(12 * phase + f - 11, 0), 12))  # moves in frames 12-23 only
                contacts.set_mesh_positions("ball", body_v + [shift, 0.0, 0.0])
                cloth.step()
                if not keep:
                    contacts.meshes[0].forget_grid()  # forget it: the next frame builds a new one
            per_phase.append(len(builds) - before)
        runs.append(cloth.positions.copy())
        counts.append(per_phase)
    print(
        f"\n[grid builds] kept {counts[0]}, rebuilt every frame {counts[1]}; "
        f"max difference {np.abs(runs[0] - runs[1]).max():.3g} m"
    )
    assert counts[0][0] == 1 and counts[0][2] <= 1  # standing: built once (and once after the last move)
    assert counts[0][1] >= 11  # moving: a new grid every frame (the first moving frame starts from rest)
    assert sum(counts[1]) >= 30
    assert np.abs(runs[0] - runs[1]).max() < 1e-12
    assert np.abs(runs[0] - pos).max() > 0.05  # the cloth fell onto the ball


def test_nearest_triangle_cache_answers_most_scans_of_a_resting_cloth_with_the_same_contacts():
    """A 20 cm cloth lying still on top of a 0.25 m mesh ball (after 20 frames to settle): with
    the narrow-phase caches on, most scans of the next 20 frames measure only the cached closest
    triangle (measured 80 % of all scans; at most 90 %: the first substep of a frame scans all),
    and the cloth ends where it ends with every candidate measured (ties of two triangles at the
    same distance may round differently: 1e-12 m)."""
    body_v, body_t = uv_ellipsoid_mesh(0.25, 48, 24, np.array([0.0, 0.0, 0.0]))
    runs, cached = [], []
    for cache in (True, False):
        pos, faces, _ = grid_mesh(10, 10, 0.2, 0.2, origin=(-0.1, -0.1, 0.26))
        contacts = Colliders(
            [TriangleMesh(body_v, body_t, name="ball", friction_static=0.8, friction_kinetic=0.6)],
            cloth_thickness=0.004,
        )
        contacts.use_clearance_cache = cache
        contacts.use_standing_shortcuts = False  # the cache alone (the ball stands still)
        cloth = Cloth(pos, faces, settings=SolverSettings(substeps=10), contact_handler=contacts)
        hits = 0
        for f in range(40):
            cloth.step()
            if f >= 20:
                hits += contacts.diagnostics()["mesh_scans_cached"]
        runs.append(cloth.positions.copy())
        cached.append(hits)
        assert np.abs(cloth.velocities).max() < 1e-6  # at rest
    scans = 20 * 10 * len(runs[0])
    print(
        f"\n[nearest-triangle cache] {cached[0]} of {scans} scans; "
        f"max difference {np.abs(runs[0] - runs[1]).max():.3g} m"
    )
    assert cached[1] == 0
    assert cached[0] > 0.7 * scans
    assert np.abs(runs[0] - runs[1]).max() < 1e-12


def test_candidate_query_grows_its_buffers_without_losing_or_repeating_a_triangle():
    """The broad-phase query allocates for 8 candidates per queried vertex and grows its buffers
    from the vertex that overflowed. One vertex with a 25 cm reach over a 2,500-triangle ellipsoid
    overflows them several times; against a brute-force pass over every triangle, its list must hold
    each triangle within reach (exact segment distance) exactly once, with d0 the midpoint bound of
    a short travel segment, nearest first; the vertices not asked for keep empty lists."""
    from selvedge.solver.collisions import geometry, hash_grid
    from selvedge.solver.collisions import mesh_kernels as mk
    from selvedge.solver.collisions.geometry import point_triangle_distance

    verts, tris = uv_ellipsoid_mesh(np.array([0.18, 0.12, 0.35]), 50, 26, np.array([0.0, 0.0, 1.0]))
    radius = 0.004
    seg_a = np.array([[0.0, 0.0, 0.0], [0.1, 0.25, 1.3], [0.0, 0.0, 3.0]])
    seg_b = seg_a + np.array([0.0, 0.0, -0.01])
    pad = np.full(3, 0.25)
    limit = pad[1] + radius
    active = np.array([False, True, False])
    tlo, thi = np.empty((len(tris), 3)), np.empty((len(tris), 3))
    mk.swept_triangle_boxes(verts, verts, tris, radius, tlo, thi)
    center, rad = np.empty((len(tris), 3)), np.empty(len(tris))
    geometry.triangle_spheres(verts, tris, center, rad)
    cell, table = 0.05, 4096
    bucket, items = hash_grid.hash_boxes(tlo, thi, cell, table, 32)
    offsets, cand, d0 = mk.mesh_query_candidates(
        seg_a, seg_b, pad, radius, active, tlo, thi, cell, table, bucket, items, 32, tris, verts, center, rad, 2
    )
    assert list(offsets) == [0, 0, len(cand), len(cand)]
    assert len(cand) > 100  # far more than the 16 first allocated
    assert len(set(cand.tolist())) == len(cand)  # no triangle twice
    mid = 0.5 * (seg_a[1] + seg_b[1])
    half = 0.5 * np.linalg.norm(seg_b[1] - seg_a[1])
    exact = _segment_triangle_distances(seg_a[1], seg_b[1], verts[tris[:, 0]], verts[tris[:, 1]], verts[tris[:, 2]])
    bound = np.array(
        [max(point_triangle_distance(*mid, *verts[a], *verts[b], *verts[c]) - half, 0.0) for a, b, c in tris]
    )
    assert set(np.flatnonzero(exact <= limit).tolist()) <= set(cand.tolist())  # nothing within reach lost
    assert np.all(bound[cand] <= limit)  # nothing listed that the bound rules out
    np.testing.assert_allclose(d0, bound[cand], rtol=1e-12, atol=1e-15)
    assert np.all(np.diff(d0) >= 0.0)


def test_candidate_query_in_parallel_chunks_gives_the_serial_lists():
    """The query runs in chunks of vertices, each with its own buffers, concatenated afterwards.
    Over 400 vertices falling or sliding past a 2,500-triangle ellipsoid (some lists overflow
    their chunk's first buffers), 2, 3 and 7 chunks must give exactly the one-chunk CSR lists,
    and every list must hold each triangle within reach of its segment (brute force, exact
    segment-triangle distance)."""
    from selvedge.solver.collisions import geometry, hash_grid
    from selvedge.solver.collisions import mesh_kernels as mk

    verts, tris = uv_ellipsoid_mesh(np.array([0.18, 0.12, 0.35]), 50, 26, np.array([0.0, 0.0, 1.0]))
    rng = np.random.default_rng(7)
    n = 400
    seg_a = np.column_stack([rng.uniform(-0.25, 0.25, n), rng.uniform(-0.2, 0.2, n), rng.uniform(0.6, 1.45, n)])
    seg_b = seg_a + rng.normal(0.0, 0.06, (n, 3))
    pad = rng.uniform(0.005, 0.05, n)
    pad[::50] = 0.2  # a few long lists
    active = rng.random(n) < 0.8
    radius = 0.004
    tlo, thi = np.empty((len(tris), 3)), np.empty((len(tris), 3))
    mk.swept_triangle_boxes(verts, verts, tris, radius, tlo, thi)
    center, rad = np.empty((len(tris), 3)), np.empty(len(tris))
    geometry.triangle_spheres(verts, tris, center, rad)
    bucket, items = hash_grid.hash_boxes(tlo, thi, 0.04, 4096, 32)
    runs = [
        mk.mesh_query_candidates(
            seg_a, seg_b, pad, radius, active, tlo, thi, 0.04, 4096, bucket, items, 32, tris, verts, center, rad, chunks
        )
        for chunks in (1, 2, 3, 7)
    ]
    offsets, cand, d0 = runs[0]
    assert len(cand) > 8 * active.sum()  # more than the first buffers hold
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert np.array_equal(a, b)
    for i in np.flatnonzero(active)[::7]:
        listed = cand[offsets[i] : offsets[i + 1]]
        exact = _segment_triangle_distances(seg_a[i], seg_b[i], verts[tris[:, 0]], verts[tris[:, 1]], verts[tris[:, 2]])
        assert set(np.flatnonzero(exact <= pad[i] + radius).tolist()) <= set(listed.tolist())
        # d0 is a lower bound of each listed triangle's distance to the segment (the scans stop on it)
        assert np.all(d0[offsets[i] : offsets[i + 1]] <= exact[listed] + 1e-12)
    assert all(offsets[i] == offsets[i + 1] for i in np.flatnonzero(~active))
