"""Analytic collision proxies, contacts and friction (001 ch. 6 / M6, 002 sec. 3).

Every test measures a physical quantity: distances to the collider surface, the slope's
critical angle tan(theta) = mu_s (001 sec. 6.3) and the kinetic sliding distance
g (sin theta - mu_k cos theta) t^2 / 2, the displacement a cloth gets from a moving box
through static friction, a 10 m/s vertex against a 2 cm plate, and trajectories with and
without a surface once the cloth has left it (a contact never pulls).
"""

import math

import numpy as np
import pytest

from selvedge.solver import Cloth, ClothOptions, Material, SolverSettings, grid_mesh, preset
from selvedge.solver.collisions import Box, Capsule, Colliders, Plane, Sphere, quaternion_axis_angle

G = 9.81


def patch(n, size, center=(0.0, 0.0, 0.0)):
    pos, faces, uv = grid_mesh(n, n, size, size, origin=(center[0] - size / 2, center[1] - size / 2, center[2]))
    return pos, faces


def test_cloth_dropped_on_sphere_rests_outside_radius_plus_thickness():
    """001 M6: dropped 1 m onto a sphere, the cloth comes to rest with no vertex inside R + thickness.

    Tolerance: 1e-6 m on the distance (contacts are the last projection of each iteration, so the
    state satisfies them up to round-off); at rest: kinetic energy below 1e-6 of its peak, fastest vertex below 3 cm/s.
    """
    radius, thickness = 0.3, 0.005
    pos, faces = patch(21, 1.0, center=(0.0, 0.0, radius + 1.0))
    contacts = Colliders(
        [Sphere(radius, name="ball", friction_static=0.6, friction_kinetic=0.5)], cloth_thickness=thickness
    )
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=10), contact_handler=contacts)
    worst = math.inf
    peak_energy = 0.0
    # 12 s: with the stretch limit the sheet no longer stretches (and damps) like rubber, so its corners
    # ring longer after the landing (fastest vertex 3.6 cm/s at 8 s, 1.3 cm/s at 12 s, 0.3 cm/s at 16 s)
    for _ in range(288):
        diag = cloth.step()
        peak_energy = max(peak_energy, diag.kinetic_energy_j)
        worst = min(worst, float(np.linalg.norm(cloth.positions, axis=1).min()) - radius)
    assert worst >= thickness - 1e-6, f"a vertex came {thickness - worst:.3g} m inside R + thickness"
    # it touched (the centre vertex sits on the top of the sphere at exactly R + thickness)
    assert float(np.linalg.norm(cloth.positions, axis=1).min()) - radius == pytest.approx(thickness, abs=1e-5)
    # at rest: the 1 m fall gave ~1 J of kinetic energy; a millionth of it is left, no vertex above 3 cm/s
    assert peak_energy > 0.5
    assert diag.kinetic_energy_j < 1e-6 * peak_energy
    assert float(np.linalg.norm(cloth.velocities, axis=1).max()) < 0.03
    assert cloth.last_diagnostics.contacts["contacts_active_last_substep"] > 50


@pytest.mark.parametrize(
    ("drop_m", "shift_m", "turn_deg"), [(0.9, 0.0, 0), (1.2, 0.0, 0), (0.6, 0.0, 0), (0.7, 0.0, 0), (0.6035, 0.021, 36)]
)
def test_links_between_aggregates_bring_a_sheet_dropped_on_a_sphere_to_rest_however_it_lands(drop_m, shift_m, turn_deg):
    """Drops that keep moving for good with the coarse links measured at their members: a link's
    correction moves the members' whole aggregates, so it applies the members' fine-scale motion to
    them and pumps energy into the folds (at 24 s the fastest vertex is at 24 / 14 / 13 / 11 / 24
    cm/s; without the levels every drop is still; 25 of 42 drops, docs/design/stiff_fabric.md,
    "Halfway, on every level"). At the defaults (nothing pinned: the links measured halfway to the
    aggregates' centres) each drop settles to under 1 mm/s; the links at the members are kept here
    as the measured contrast. The last drop lands off centre and turned: it kept moving (12 cm/s at
    24 s) under the option's earlier rule, links at the centres themselves from level 2 up."""
    radius, thickness = 0.3, 0.005
    pos, faces = patch(21, 1.0, center=(shift_m, 0.0, radius + drop_m))
    turn = np.radians(turn_deg)
    rotation = np.array([[np.cos(turn), -np.sin(turn), 0.0], [np.sin(turn), np.cos(turn), 0.0], [0.0, 0.0, 1.0]])
    pos = (pos - pos.mean(axis=0)) @ rotation.T + pos.mean(axis=0)
    fastest = []
    for options in (ClothOptions(), ClothOptions(coarse_links_between_aggregates=False)):
        contacts = Colliders(
            [Sphere(radius, name="ball", friction_static=0.6, friction_kinetic=0.5)], cloth_thickness=thickness
        )
        cloth = Cloth(
            pos,
            faces,
            material=preset("cotton"),
            settings=SolverSettings(substeps=10, solve_mode="serial"),
            options=options,
            contact_handler=contacts,
        )
        peak = 0.0
        for _ in range(576):
            diag = cloth.step()
            peak = max(peak, diag.kinetic_energy_j)
        assert float(np.linalg.norm(cloth.positions, axis=1).min()) - radius == pytest.approx(thickness, abs=1e-5)
        fastest.append(float(np.linalg.norm(cloth.velocities, axis=1).max()))
        if options.coarse_links_between_aggregates == "auto":
            assert cloth.links_between_aggregates  # nothing is pinned
            assert diag.kinetic_energy_j < 1e-8 * peak
    assert fastest[0] < 1e-3 and fastest[1] > 0.05, fastest


def test_a_vertex_the_solve_carries_past_its_broad_phase_budget_still_meets_the_sphere():
    """The broad phase lists a vertex's pairs for its path at its frame-start speed; a sheet
    wrapping a ball whips its edges round faster than that (at 40 substeps a vertex 75 mm from the
    ball at 34 mm a frame was pulled 89 mm, into it: 4.2 mm inside the sphere before the requery).
    Measured against the sphere itself: no vertex inside R + thickness at any frame end, at 40
    substeps as at 10, and the requery did act."""
    radius, thickness = 0.3, 0.005
    pos, faces = patch(21, 1.0, center=(0.0, 0.0, radius + 1.0))
    contacts = Colliders(
        [Sphere(radius, name="ball", friction_static=0.6, friction_kinetic=0.5)], cloth_thickness=thickness
    )
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=40), contact_handler=contacts)
    worst, requeried = math.inf, 0
    for _ in range(16):
        diag = cloth.step()
        requeried += diag.contacts["analytic_requeried"]
        worst = min(worst, float(np.linalg.norm(cloth.positions, axis=1).min()) - radius)
    assert worst >= thickness - 1e-6, f"a vertex came {thickness - worst:.3g} m inside R + thickness"
    assert requeried > 0


def _slope_run(theta, substeps, mu_s=0.5, mu_k=0.4, frames=24):
    """A patch lying on a plane inclined by theta; returns its centroid travel down the slope (m)."""
    thickness = 0.004
    q = quaternion_axis_angle((0.0, 1.0, 0.0), theta)
    normal = np.array([math.sin(theta), 0.0, math.cos(theta)])
    downhill = np.array([math.cos(theta), 0.0, -math.sin(theta)])
    pos, faces = patch(5, 0.2)
    # grid in the plane's local xy, lifted by the thickness, rotated onto the slope
    local = pos.copy()
    local[:, 2] = thickness
    world = local[:, 0:1] * downhill + local[:, 1:2] * np.array([0.0, 1.0, 0.0]) + local[:, 2:3] * normal
    contacts = Colliders([Plane(rotation=q, friction_static=mu_s, friction_kinetic=mu_k)], cloth_thickness=thickness)
    cloth = Cloth(
        world,
        faces,
        material=Material(air_drag_per_s=0.0),
        settings=SolverSettings(substeps=substeps),
        options=ClothOptions(tethers=False),
        contact_handler=contacts,
    )
    start = world.mean(axis=0)
    for _ in range(frames):
        cloth.step()
    height = (cloth.positions - 0.0) @ normal
    assert height.min() >= thickness - 1e-6
    return float((cloth.positions.mean(axis=0) - start) @ downhill)


@pytest.mark.parametrize("substeps", [5, 20])
def test_slope_critical_angle_is_tan_theta_equals_mu_s_at_any_substep_count(substeps):
    mu_s, mu_k = 0.5, 0.4
    for tan_theta in (0.45, 0.49):
        # tan(theta) < mu_s: static friction holds it exactly (not even a creep)
        below = _slope_run(math.atan(tan_theta), substeps, mu_s, mu_k)
        assert abs(below) < 1e-6, f"patch crept {below:.3g} m at tan(theta) = {tan_theta} < mu_s"
    for tan_theta in (0.51, 0.55):
        # tan(theta) > mu_s: it slides with kinetic friction, a = g (sin - mu_k cos), for 1 s
        theta = math.atan(tan_theta)
        above = _slope_run(theta, substeps, mu_s, mu_k)
        expected = 0.5 * G * (math.sin(theta) - mu_k * math.cos(theta)) * 1.0**2
        assert above == pytest.approx(expected, rel=0.05), f"slid {above:.4f} m, Coulomb predicts {expected:.4f} m"


def _box_carry(mu_s, mu_k, frames=48):
    thickness = 0.004
    top = 0.0
    box = Box(
        (2.0, 0.5, 0.05), name="tray", position=(0.0, 0.0, top - 0.05), friction_static=mu_s, friction_kinetic=mu_k
    )
    contacts = Colliders([box], cloth_thickness=thickness)
    pos, faces = patch(9, 0.4, center=(0.0, 0.0, top + thickness))
    cloth = Cloth(
        pos, faces, settings=SolverSettings(substeps=8), options=ClothOptions(tethers=False), contact_handler=contacts
    )
    fps = 24.0
    x_box = 0.0
    for f in range(frames):
        t = (f + 1) / fps
        # 1 m/s^2 ramp to 0.5 m/s: well under mu_s g, so static friction can carry the cloth
        speed = min(t, 0.5)
        x_box += speed / fps
        contacts.set_transform("tray", (x_box, 0.0, top - 0.05))
        cloth.step()
    return float(cloth.positions[:, 0].mean() - pos[:, 0].mean()), x_box


def test_cloth_resting_on_translating_box_moves_with_it_under_friction():
    moved, box_moved = _box_carry(0.6, 0.4)
    assert box_moved > 0.6
    assert moved == pytest.approx(box_moved, abs=2e-3), f"cloth moved {moved:.4f} m, box {box_moved:.4f} m"
    frictionless, _ = _box_carry(0.0, 0.0)
    assert abs(frictionless) < 1e-6, "without friction the box slides out under the cloth"


@pytest.mark.parametrize("substeps", [40])
def test_vertex_at_10_m_s_does_not_tunnel_through_2cm_plate(substeps):
    thickness = 0.003
    plate_half = 0.01  # 2 cm plate
    frame_dt = 1.0 / 24.0
    h = frame_dt / substeps
    assert 10.0 * h < 2 * plate_half, "the scenario must give at least one substep inside the plate"
    plate = Box((0.5, 0.5, plate_half), name="plate", position=(0.0, 0.0, 0.0))
    contacts = Colliders([plate], cloth_thickness=thickness)
    pos, faces = patch(3, 0.02, center=(0.0, 0.0, 0.3))
    v0 = np.tile([0.0, 0.0, -10.0], (pos.shape[0], 1))
    cloth = Cloth(
        pos, faces, settings=SolverSettings(substeps=substeps), initial_velocities=v0, contact_handler=contacts
    )
    lowest = math.inf
    for _ in range(6):
        cloth.step()
        lowest = min(lowest, float(cloth.positions[:, 2].min()))
    assert lowest >= plate_half + thickness - 1e-6, f"a vertex reached z = {lowest:.4f} m (plate top {plate_half})"
    assert float(np.abs(cloth.velocities[:, 2]).max()) < 0.5, "the patch stops on the plate"


@pytest.mark.parametrize("iterations", [1, 4])
def test_contacts_never_pull_a_cloth_leaving_the_surface(iterations):
    """A cloth thrown up off the ground follows exactly the trajectory it has without the ground."""
    thickness = 0.004
    pos, faces = patch(9, 0.4, center=(0.0, 0.0, thickness))
    rng = np.random.default_rng(3)
    v0 = np.tile([0.4, 0.0, 3.0], (pos.shape[0], 1)) + rng.normal(0.0, 0.2, pos.shape)
    settings = SolverSettings(substeps=6, iterations=iterations)
    contacts = Colliders([Plane(friction_static=0.8, friction_kinetic=0.6)], cloth_thickness=thickness)
    with_ground = Cloth(pos, faces, settings=settings, initial_velocities=v0, contact_handler=contacts)
    free = Cloth(pos, faces, settings=settings, initial_velocities=v0)
    for _ in range(8):  # 1/3 s: still in the air (apex at 0.46 s)
        with_ground.step()
        free.step()
        assert (contacts.c_lam[: contacts._n_contacts] >= 0.0).all()
        np.testing.assert_array_equal(with_ground.positions, free.positions)
        np.testing.assert_array_equal(with_ground.velocities, free.velocities)
    # the ground was a live candidate (the first frame had every vertex within reach), yet did nothing
    assert with_ground.history[0].contacts["candidates_analytic"] == pos.shape[0]
    assert with_ground.history[0].contacts["contacts_max"] == pos.shape[0]


def test_rotating_box_is_slerped_inside_the_frame_no_teleport():
    """A box turning 15 degrees per frame carries a resting cloth; the contact surface velocity
    seen in any substep (including the first) is bounded by omega r, and the cloth turns with it."""
    thickness = 0.004
    omega = math.pi / 2  # rad/s; centripetal omega^2 r << mu_s g, the cloth sticks
    fps = 24.0
    box = Box((0.5, 0.5, 0.05), name="turntable", position=(0.0, 0.0, -0.05), friction_static=0.8, friction_kinetic=0.7)

    class Recording(Colliders):
        max_surface_speed = 0.0

        def begin_substep(self, x_substep_start, x_predicted, t_start, t_end, h):
            super().begin_substep(x_substep_start, x_predicted, t_start, t_end, h)
            n = self._n_contacts
            if n:
                speed = np.linalg.norm(self.c_disp[:n], axis=1) / h
                self.max_surface_speed = max(self.max_surface_speed, float(speed.max()))

    contacts = Recording([box], cloth_thickness=thickness)
    pos, faces = patch(9, 0.5, center=(0.0, 0.0, thickness))
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=8), contact_handler=contacts)
    r_max = float(np.linalg.norm(pos[:, :2], axis=1).max())
    frames = 24
    for f in range(frames):
        angle = omega * (f + 1) / fps
        contacts.set_transform("turntable", (0.0, 0.0, -0.05), quaternion_axis_angle((0, 0, 1), angle))
        cloth.step()
    assert contacts.max_surface_speed <= omega * (r_max + 0.01) * 1.01
    assert contacts.max_surface_speed >= omega * r_max * 0.9
    # the cloth turned with the table: angle of the corner vertex
    corner = int(np.argmax(pos[:, 0] + pos[:, 1]))
    a0 = math.atan2(pos[corner, 1], pos[corner, 0])
    a1 = math.atan2(cloth.positions[corner, 1], cloth.positions[corner, 0])
    assert a1 - a0 == pytest.approx(omega * frames / fps, abs=math.radians(3))
    assert float(np.linalg.norm(cloth.velocities, axis=1).max()) <= omega * r_max * 1.2


def test_analytic_and_sdf_contacts_do_not_depend_on_the_thread_count():
    """The analytic and signed-distance narrow phases run per candidate in parallel and write the
    rows in candidate order: one and two Numba threads give bit-identical trajectories on a cloth
    falling onto a moving, rotating sphere, capsule, box, plane and signed distance grid."""
    from thread_counts import on_thread_counts

    from selvedge.solver.collisions import SDFGrid
    from selvedge.solver.mesh import uv_ellipsoid_mesh

    blob_v, blob_t = uv_ellipsoid_mesh(np.array([0.1, 0.1, 0.1]), 16, 12, np.array([0.0, 0.0, 0.0]))

    def run():
        pos, faces, _ = grid_mesh(20, 20, 0.8, 0.8, origin=(-0.4, -0.4, 0.6))
        contacts = Colliders(
            [
                Sphere(0.2, name="s", position=(0, 0, 0.3)),
                Capsule(0.05, 0.2, name="c", position=(-0.2, 0, 0.45)),
                Plane(name="p"),
                Box((0.1, 0.1, 0.1), name="b", position=(0.25, 0.2, 0.4)),
                SDFGrid(blob_v, blob_t, 0.01, name="g", position=(0, -0.2, 0.4)),
            ],
            cloth_thickness=0.004,
        )
        cloth = Cloth(pos, faces, settings=SolverSettings(substeps=8), contact_handler=contacts)
        rows = 0
        for f in range(40):
            q = quaternion_axis_angle((0, 0, 1), 0.05 * f)
            contacts.set_transform("c", (-0.2, 0.01 * f, 0.45), q)
            contacts.set_transform("g", (0.0, -0.2, 0.4 - 0.002 * f), q)
            contacts.set_transform("b", (0.25, 0.2, 0.4), quaternion_axis_angle((1, 0, 0), 0.03 * f))
            cloth.step()
            rows = max(rows, contacts.diagnostics()["contacts_max"])
        assert rows > 50  # the cloth touched the colliders
        return cloth.positions.copy()

    results = on_thread_counts(run)
    assert np.array_equal(results[0], results[1])
