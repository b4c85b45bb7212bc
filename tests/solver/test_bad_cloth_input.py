"""Bad input: every case gets a specific ClothInputError naming the problem, or the documented safe
handling (asserted by measuring the behaviour, not just that something ran)."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from selvedge.solver import (
    Cloth,
    ClothInputError,
    ClothOptions,
    Material,
    SimulationError,
    SolverSettings,
    grid_mesh,
    preset,
)

G = 9.81
RHO = Material().density_kg_m2


def square(nx=4, ny=4, size=0.3, plane="xz"):
    return grid_mesh(nx, ny, size, size, plane=plane)


def hanging(nx=4, ny=4, size=0.3, **kwargs):
    pos, faces, uv = square(nx, ny, size)
    top = np.flatnonzero(np.isclose(pos[:, 2], size))
    pins = np.zeros(len(pos))
    pins[top] = 1.0
    return pos, faces, uv, pins


def tri_area(p, t):
    return 0.5 * np.linalg.norm(np.cross(p[t[:, 1]] - p[t[:, 0]], p[t[:, 2]] - p[t[:, 0]]), axis=1)


# ----------------------------------------------------------------------------------------------
# Mesh defects.
# ----------------------------------------------------------------------------------------------
def test_zero_length_edge_is_an_error_naming_the_vertices():
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 1, 0]], float)  # vertex 3 sits on vertex 2
    faces = np.array([[0, 1, 2], [1, 3, 2]])
    with pytest.raises(ClothInputError, match=r"1 zero-length edges .*vertices 2-3.*merge vertices by distance"):
        Cloth(pos, faces)


@pytest.mark.parametrize("bending_model", ["dihedral", "isometric"])
def test_zero_area_triangle_carries_no_mass_and_no_bending(bending_model):
    # A unit square split at the mid-point 4 of its bottom edge into three good triangles, plus a sliver
    # (0, 1, 4) whose three corners are collinear along that bottom edge.
    pos = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0.5, 0, 0]], float)
    faces = np.array([[0, 4, 3], [4, 1, 2], [4, 2, 3], [0, 1, 4]])
    cloth = Cloth(
        pos,
        faces,
        options=ClothOptions(tethers=False, bending_model=bending_model),
        material=Material(air_drag_per_s=0.0),
        settings=SolverSettings(substeps=10),
    )
    assert any("1 zero-area triangles (first: 3)" in w and "no mass and no bending" in w for w in cloth.warnings)
    # Mass: only the good triangles count. Independently: areas 1/4, 1/4, 1/2; a third of each to its corners.
    expected = np.zeros(5)
    for tri, area in (((0, 4, 3), 0.25), ((4, 1, 2), 0.25), ((4, 2, 3), 0.5)):
        expected[list(tri)] += RHO * area / 3
    assert np.allclose(cloth.mass, expected, rtol=1e-12)
    assert math.isclose(cloth.mass.sum(), RHO * 1.0, rel_tol=1e-12)
    # Bending: hinges 4-3 and 4-2 join two good triangles; 0-4 and 4-1 border the sliver and get none.
    bend = next(c for c in cloth.constraint_sets if c.name == "bend")
    assert bend.kind == bending_model
    hinge = slice(2, 4) if bending_model == "dihedral" else slice(0, 2)  # dihedral: wings first; isometric: hinge
    hinges = sorted(tuple(sorted(v)) for v in bend.vertices[:, hinge].tolist())
    assert hinges == [(2, 4), (3, 4)]
    # Safe: the cloth falls freely and exactly (semi-implicit Euler z = -g h^2 n (n+1) / 2), no NaN from the sliver.
    for _ in range(5):
        cloth.step()
    n, h = 50, 1 / 240
    assert np.allclose(cloth.positions[:, 2], -G * h * h * n * (n + 1) / 2, rtol=1e-9)


def test_vertex_only_in_zero_area_triangles_is_held_in_place():
    pos = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0.5, 0, 0]], float)
    faces = np.array([[0, 1, 2], [0, 2, 3], [0, 4, 1]])  # vertex 4 is only in the collinear sliver
    cloth = Cloth(pos, faces, options=ClothOptions(tethers=False))
    assert any("1 vertices touch only zero-area triangles; held in place" in w for w in cloth.warnings)
    assert cloth.mass[4] == 0.0 and cloth.inv_mass[4] == 0.0
    assert math.isclose(cloth.mass.sum(), RHO * 1.0, rel_tol=1e-12)
    for _ in range(3):
        cloth.step()
    assert np.array_equal(cloth.positions[4], pos[4])
    assert np.isfinite(cloth.positions).all()


def test_duplicate_vertices_warn_and_are_simulated_separately():
    # Two unit squares side by side whose seam is unwelded: vertices 4, 5 duplicate 1, 2.
    pos = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [1, 0, 0], [1, 1, 0], [2, 0, 0], [2, 1, 0]], float)
    faces = np.array([[0, 1, 2], [0, 2, 3], [4, 6, 7], [4, 7, 5]])
    pins = np.zeros(8)
    pins[[0, 3]] = 1.0  # pin the left square's left edge only
    cloth = Cloth(
        pos,
        faces,
        pin_weights=pins,
        options=ClothOptions(tethers=False),
        material=Material(air_drag_per_s=0.0),
        settings=SolverSettings(substeps=10),
    )
    assert any("2 vertices share a position" in w and "separate" in w for w in cloth.warnings)
    for _ in range(12):
        cloth.step()
    # The right square is not connected: it falls freely (semi-implicit Euler: z = -g h^2 n(n+1)/2).
    steps = 120
    h = 1 / 240
    z_free = -G * h * h * steps * (steps + 1) / 2
    assert np.allclose(cloth.positions[4:, 2], z_free, rtol=1e-9)
    # The left square swings on its pinned edge: its corners stay within the tether-free stretch of 1 m
    # (+10 %) of the pins, while the duplicates of those corners have fallen away with the right square.
    for corner, pin in ((1, 0), (2, 3)):
        assert np.linalg.norm(cloth.positions[corner] - pos[pin]) < 1.1
    assert cloth.positions[[1, 2], 2].max() > z_free + 0.2
    assert np.linalg.norm(cloth.positions[1] - cloth.positions[4]) > 0.1


def test_duplicate_triangles_are_ignored_with_a_warning():
    pos, faces, uv = square(3, 3, 1.0)
    doubled = np.concatenate([faces, faces[:2][:, [1, 2, 0]]])  # two triangles repeated (rotated winding)
    cloth = Cloth(pos, doubled, options=ClothOptions(tethers=False))
    reference = Cloth(pos, faces, options=ClothOptions(tethers=False))
    assert any("2 duplicate triangles ignored" in w for w in cloth.warnings)
    # Mass is not counted twice: total = rho x 1 m^2, per vertex identical to the clean mesh.
    assert math.isclose(cloth.mass.sum(), RHO * 1.0, rel_tol=1e-12)
    assert np.allclose(cloth.mass, reference.mass, rtol=1e-14)
    assert [c.count for c in cloth.constraint_sets] == [c.count for c in reference.constraint_sets]


def test_non_manifold_edge_gets_no_bending_and_a_warning():
    # A 3 x 3 grid (16 edges, 8 interior hinges) plus a "fin" triangle standing on the interior edge 1-4,
    # which is then shared by three triangles.
    pos, faces, _ = grid_mesh(3, 3, 1.0, 1.0, plane="xy")
    counts = {}
    for t in faces:
        for a, b in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0])):
            key = (min(a, b), max(a, b))
            counts[key] = counts.get(key, 0) + 1
    assert counts[(1, 4)] == 2 and sum(c == 2 for c in counts.values()) == 8
    pos = np.vstack([pos, [0.5, 0.25, 0.5]])
    faces = np.vstack([faces, [1, 4, 9]])
    cloth = Cloth(pos, faces, options=ClothOptions(tethers=False))
    assert any("1 non-manifold edges (first: vertices [1, 4]) get no bending" in w for w in cloth.warnings)
    bend = next(c for c in cloth.constraint_sets if c.name == "bend")
    hinges = {tuple(sorted(h)) for h in bend.vertices[:, 2:].tolist()}  # dihedral: wings, then the hinge
    # The other 7 hinges keep their bending; the non-manifold one has none.
    assert len(hinges) == bend.count == 7
    assert (1, 4) not in hinges
    assert next(c for c in cloth.constraint_sets if c.name == "stretch").count == 16 + 2
    for _ in range(3):
        cloth.step()
    assert np.isfinite(cloth.positions).all()


def test_loose_vertices_are_held_in_place_with_a_warning():
    pos, faces, uv, pins = hanging()
    loose = np.array([[5.0, 5.0, 5.0], [6.0, 5.0, 5.0]])
    pos2 = np.concatenate([pos, loose])
    pins2 = np.concatenate([pins, [0.0, 0.0]])
    cloth = Cloth(pos2, faces, pin_weights=pins2)
    assert any("2 loose vertices" in w and "held in place" in w for w in cloth.warnings)
    for _ in range(10):
        cloth.step()
    assert np.array_equal(cloth.positions[-2:], loose)
    assert np.array_equal(cloth.velocities[-2:], np.zeros((2, 3)))
    assert cloth.mass[-2:].sum() == 0.0


def test_every_vertex_pinned_runs_and_follows_the_targets():
    pos, faces, uv = square(4, 4)
    cloth = Cloth(pos, faces, pin_weights=np.ones(len(pos)))
    assert cloth.pinned_vertices.size == len(pos)
    offset = np.array([0.1, -0.2, 0.05])
    for f in range(1, 4):
        target = pos + f * offset
        diag = cloth.step(pin_targets=target)
        assert np.allclose(cloth.positions, target, rtol=0, atol=1e-15)
        # Every vertex moves with the frame's displacement over the frame time.
        assert np.allclose(cloth.velocities, offset * 24.0, rtol=0, atol=1e-12)
    assert diag.kinetic_energy_j == 0.0  # no free vertices
    assert not any("tether" in w for w in cloth.warnings)


def test_nothing_pinned_falls_freely_and_tethers_warn():
    pos, faces, uv = square(4, 4, plane="xy")
    cloth = Cloth(
        pos,
        faces,
        material=Material(air_drag_per_s=0.0),  # tethers on by default
        settings=SolverSettings(substeps=10),
    )
    assert any("tethers requested but the cloth has no hard pins" in w for w in cloth.warnings)
    assert all(c.name != "tether" or c.count == 0 for c in cloth.constraint_sets)
    for _ in range(24):
        cloth.step()
    steps, h = 240, 1 / 240
    assert np.allclose(cloth.positions[:, 2], -G * h * h * steps * (steps + 1) / 2, rtol=1e-9)
    assert np.allclose(cloth.velocities[:, 2], -G * 1.0, rtol=1e-9)


# ----------------------------------------------------------------------------------------------
# Non-finite and out-of-range values.
# ----------------------------------------------------------------------------------------------
def test_nan_in_vertices():
    pos, faces, uv = square()
    pos[5, 1] = np.nan
    with pytest.raises(ClothInputError, match=r"vertex positions contains 1 non-finite values \(first at index 5\)"):
        Cloth(pos, faces)


def test_nan_in_uvs():
    pos, faces, uv = square()
    uv[3] = np.inf
    with pytest.raises(ClothInputError, match=r"UVs contains 2 non-finite values \(first at index 3\)"):
        Cloth(pos, faces, uvs=uv)


def test_nan_in_pin_weights():
    pos, faces, uv, pins = hanging()
    pins[7] = np.nan
    with pytest.raises(ClothInputError, match=r"pin_weights contains 1 non-finite values \(first at index 7\)"):
        Cloth(pos, faces, pin_weights=pins)


def test_nan_in_weight_map():
    pos, faces, uv = square()
    bend = np.ones(len(pos))
    bend[2] = np.nan
    with pytest.raises(ClothInputError, match=r"weight map 'bend' contains 1 non-finite values"):
        Cloth(pos, faces, weight_maps={"bend": bend})


def test_unknown_weight_map_name():
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match=r"unknown weight maps \['stiffness'\]"):
        Cloth(pos, faces, weight_maps={"stiffness": np.ones(len(pos))})


def test_nan_in_pin_targets_is_rejected_and_nothing_moves():
    pos, faces, uv, pins = hanging()
    cloth = Cloth(pos, faces, pin_weights=pins)
    cloth.step()
    before = cloth.positions.copy(), cloth.velocities.copy()
    targets = pos[cloth.pinned_vertices].copy()
    targets[1, 2] = np.nan
    with pytest.raises(ClothInputError, match=r"pin targets contains 1 non-finite values"):
        cloth.step(pin_targets=targets)
    assert np.array_equal(cloth.positions, before[0]) and np.array_equal(cloth.velocities, before[1])
    assert cloth.frame == 1
    # NaN on an unpinned row of an (N,3) target array is ignored (only pinned rows are read).
    full = pos.copy()
    full[0] = np.nan
    assert pins[0] == 0.0
    cloth.step(pin_targets=full)
    assert np.isfinite(cloth.positions).all()


def test_nan_in_soft_pin_targets():
    pos, faces, uv, pins = hanging()
    pins[0] = 0.5  # a soft pin on a bottom vertex
    cloth = Cloth(pos, faces, pin_weights=pins)
    full = pos.copy()
    full[0, 0] = np.nan
    with pytest.raises(ClothInputError, match=r"pin targets contains 1 non-finite"):
        cloth.step(pin_targets=full)


@pytest.mark.parametrize("bad", [-0.1, 1.5])
def test_pin_weights_out_of_range(bad):
    pos, faces, uv, pins = hanging()
    pins[3] = bad
    with pytest.raises(ClothInputError, match=r"pin_weights must lie in \[0, 1\]"):
        Cloth(pos, faces, pin_weights=pins)


def test_weight_map_out_of_range():
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match=r"weight map 'warp' must lie in \[0, 1\], found 0..2"):
        Cloth(pos, faces, weight_maps={"warp": np.linspace(0, 2, len(pos))})


# ----------------------------------------------------------------------------------------------
# Shapes and indices.
# ----------------------------------------------------------------------------------------------
def test_wrong_vertex_shape():
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match=r"vertex positions must have shape \(N, 3\), got \(16, 2\)"):
        Cloth(pos[:, :2], faces)


def test_empty_mesh():
    with pytest.raises(ClothInputError, match="no vertices"):
        Cloth(np.zeros((0, 3)), np.zeros((0, 3), int))
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match=r"triangles must have shape \(T, 3\) with T > 0"):
        Cloth(pos, np.zeros((0, 3), int))


def test_face_with_two_vertices():
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match="face 1 has 2 vertices; a face needs at least 3"):
        Cloth(pos, [[0, 1, 5], [2, 3]])


def test_triangle_repeating_a_vertex():
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match=r"1 triangles repeat a vertex \(first: triangle 0 = \[0, 0, 5\]\)"):
        Cloth(pos, np.array([[0, 0, 5], [0, 1, 5]]))


@pytest.mark.parametrize("index", [16, -1])
def test_triangle_index_out_of_range(index):
    pos, faces, uv = square()
    faces = faces.copy()
    faces[4, 2] = index
    with pytest.raises(ClothInputError, match=r"triangle vertex indices must lie in \[0, 15\]"):
        Cloth(pos, faces)


@pytest.mark.parametrize("as_list", [False, True])
def test_fractional_triangle_index_is_rejected_not_truncated(as_list):
    # 1.7 cast to int32 would silently become vertex 1 and build a different mesh.
    pos, faces, uv = square()
    faces = faces.astype(np.float64)
    faces[4, 2] = 1.7
    with pytest.raises(ClothInputError, match=r"must be whole numbers: 1 are not \(first: 1\.7"):
        Cloth(pos, faces.tolist() if as_list else faces)


@pytest.mark.parametrize("as_list", [False, True])
def test_triangle_index_beyond_int32_is_rejected_not_wrapped(as_list):
    # 2**32 + 7 cast to int32 wraps to 7, a valid vertex of this 16-vertex grid.
    pos, faces, uv = square()
    faces = faces.astype(np.int64)
    assert np.int64(2**32 + 7).astype(np.int32) == 7  # the wrap the check must catch
    faces[4, 2] = 2**32 + 7
    with pytest.raises(ClothInputError, match=r"triangle vertex indices must lie in \[0, 15\], found 0\.\.4294967303"):
        Cloth(pos, faces.tolist() if as_list else faces)


def test_whole_float_triangle_indices_are_accepted_like_integers():
    pos, faces, uv = square()
    a = Cloth(pos, faces)
    b = Cloth(pos, faces.astype(np.float64))
    assert np.array_equal(a.topology.triangles, b.topology.triangles)


def test_non_numeric_triangle_indices_are_rejected():
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match="must be integers, got an array of bool"):
        Cloth(pos, np.ones((3, 3), dtype=bool))


def test_wrong_pin_weight_shape():
    pos, faces, uv, pins = hanging()
    with pytest.raises(ClothInputError, match=r"pin_weights must have shape \(16,\), got \(15,\)"):
        Cloth(pos, faces, pin_weights=pins[:-1])


def test_wrong_uv_shape():
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match=r"UVs must have shape \(16, 2\) per vertex or \(18, 3, 2\) per corner"):
        Cloth(pos, faces, uvs=uv[:, :1])


def test_wrong_pin_target_shape():
    pos, faces, uv, pins = hanging()
    cloth = Cloth(pos, faces, pin_weights=pins)
    with pytest.raises(ClothInputError, match=r"pin targets must have shape \(16, 3\) .* or \(4, 3\)"):
        cloth.step(pin_targets=np.zeros((5, 3)))


def test_wrong_initial_velocity_shape_and_nan():
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match=r"initial velocities must have shape \(16, 3\)"):
        Cloth(pos, faces, initial_velocities=np.zeros((16, 2)))
    v = np.zeros((16, 3))
    v[2, 0] = np.nan
    with pytest.raises(ClothInputError, match="initial velocities contains 1 non-finite"):
        Cloth(pos, faces, initial_velocities=v)


def test_acceleration_hook_wrong_shape():
    pos, faces, uv = square()
    cloth = Cloth(pos, faces, acceleration_hook=lambda x, v, h, t: np.zeros((3, 3)))
    with pytest.raises(ClothInputError, match=r"acceleration hook returned shape \(3, 3\), expected \(16, 3\)"):
        cloth.step()


# ----------------------------------------------------------------------------------------------
# Settings, options and materials.
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(substeps=0), r"substeps must be an integer >= 1, got 0"),
        (dict(substeps=2.5), r"substeps must be an integer >= 1, got 2.5"),
        (dict(iterations=0), r"iterations must be an integer >= 1, got 0"),
        (dict(solve_mode="gpu"), r"solve_mode must be one of \('auto', 'serial', 'colored', 'jacobi'\), got 'gpu'"),
        (dict(jacobi_omega=2.0), r"jacobi_omega must lie in \(0, 2\), got 2.0"),
        (dict(jacobi_omega=0.0), r"jacobi_omega must lie in \(0, 2\), got 0.0"),
        (dict(fps=0.0), r"fps must be positive"),
        (dict(gravity_m_s2=(0.0, np.nan, -9.81)), r"gravity_m_s2 must be three finite numbers"),
        (dict(wind_m_s=(1.0, 2.0)), r"wind_m_s must be three finite numbers"),
    ],
)
def test_invalid_settings(kwargs, message):
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match=message):
        Cloth(pos, faces, settings=SolverSettings(**kwargs))


def test_settings_changed_to_invalid_after_construction_are_caught_at_step():
    pos, faces, uv = square()
    cloth = Cloth(pos, faces)
    cloth.settings.substeps = 0
    with pytest.raises(ClothInputError, match="substeps must be an integer >= 1"):
        cloth.step()
    assert cloth.frame == 0 and np.array_equal(cloth.positions, pos)


def test_invalid_frame_dt():
    pos, faces, uv = square()
    cloth = Cloth(pos, faces)
    with pytest.raises(ClothInputError, match="frame_dt must be positive"):
        cloth.step(frame_dt=-0.1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(bending_model="springs"),
            r"bending_model must be one of \('cross_edge', 'dihedral', 'isometric', 'auto'\)",
        ),
        (dict(rest_length_source="uv"), r"rest_length_source must be 'mesh' or 'pattern'"),
        (dict(tether_scale=0.9), r"tether_scale must be >= 1"),
        (dict(tether_count=0), r"tether_count must be an integer in 1..8"),
        (dict(tether_count=9), r"tether_count must be an integer in 1..8"),
        (dict(soft_pin_compliance=-1.0), r"soft_pin_compliance must be finite and >= 0"),
        (dict(uv_scale_m=np.nan), r"uv_scale_m must be finite and >= 0"),
    ],
)
def test_invalid_options(kwargs, message):
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match=message):
        Cloth(pos, faces, options=ClothOptions(**kwargs))


def test_pattern_rest_lengths_need_uvs():
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match="rest_length_source='pattern' needs UVs"):
        Cloth(pos, faces, options=ClothOptions(rest_length_source="pattern"))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(density_kg_m2=0.0), r"material density_kg_m2 must be positive, got 0.0"),
        (dict(stretch_compliance_warp=-1e-4), r"material stretch_compliance_warp must be finite and >= 0"),
        (dict(air_drag_per_s=np.inf), r"material air_drag_per_s must be finite and >= 0"),
    ],
)
def test_invalid_material(kwargs, message):
    pos, faces, uv = square()
    with pytest.raises(ClothInputError, match=message):
        Cloth(pos, faces, material=Material(**kwargs))


def test_unknown_preset_lists_the_choices():
    with pytest.raises(
        ClothInputError,
        match=r"unknown material preset 'velvet'; choose one of \['cotton', 'denim', "
        r"'jersey_knit', 'leather', 'rubber', 'silk'\]",
    ):
        preset("velvet")


# ----------------------------------------------------------------------------------------------
# Failures during a frame: named cause, exact rollback.
# ----------------------------------------------------------------------------------------------
def _hook_cloth(bad_frame, value, **options):
    pos, faces, uv, pins = hanging(6, 6, 0.4)
    holder = {}

    def hook(x, v, h, t_start):
        if holder["cloth"].frame == bad_frame - 1 and t_start >= 0.5:  # mid-frame, from substep 6 of 10
            a = np.zeros_like(x)
            a[7] = value
            return a
        return None

    cloth = Cloth(
        pos,
        faces,
        pin_weights=pins,
        settings=SolverSettings(substeps=10),
        acceleration_hook=hook,
        options=ClothOptions(**options),
    )
    holder["cloth"] = cloth
    return cloth


def test_non_finite_acceleration_raises_naming_the_hook_and_rolls_back_exactly():
    cloth = _hook_cloth(bad_frame=4, value=np.nan)
    for _ in range(3):
        cloth.step()
    x_before, v_before = cloth.positions.copy(), cloth.velocities.copy()
    history_before = len(cloth.history)
    with pytest.raises(
        SimulationError,
        match=r"frame 4: the acceleration hook returned non-finite values in "
        r"substep 6; the frame was rolled back",
    ):
        cloth.step()
    # Bit-exact rollback to the frame start; the frame counter and history are untouched.
    assert np.array_equal(cloth.positions, x_before)
    assert np.array_equal(cloth.velocities, v_before)
    assert cloth.frame == 3 and len(cloth.history) == history_before
    # The cloth is still usable: with the hook fixed, the next step succeeds from that state.
    cloth.acceleration_hook = None
    cloth.step()
    assert cloth.frame == 4 and np.isfinite(cloth.positions).all()


def test_exploding_acceleration_raises_and_rolls_back():
    # A finite but absurd 1e8 g on one vertex. Without tethers nothing can absorb it. (With tethers on, the
    # unilateral tether projects the vertex back onto its reach sphere every substep and the frame ends
    # at 0.06 m/s: PBD treats it as an inelastic hit on the anchor, so no error; see the report.)
    cloth = _hook_cloth(bad_frame=2, value=[1e9, 0.0, 0.0], tethers=False)
    cloth.step()
    x_before, v_before = cloth.positions.copy(), cloth.velocities.copy()
    with pytest.raises(SimulationError) as info:
        cloth.step()
    message = str(info.value)
    # The phase that first produced the exploding state is named, with the limit and the rollback.
    assert "frame 2: prediction produced a non-finite or exploding position at vertex 7 in substep 6" in message
    assert "500.0 m/s" in message and "rolled back" in message
    assert np.array_equal(cloth.positions, x_before) and np.array_equal(cloth.velocities, v_before)
    assert cloth.frame == 1


def test_stepping_from_two_threads_at_once_is_refused():
    pos, faces, uv, pins = hanging()
    entered, release = threading.Event(), threading.Event()

    def blocking_hook(x, v, h, t_start):
        if t_start == 0.0:
            entered.set()
            assert release.wait(timeout=30.0)
        return None

    cloth = Cloth(pos, faces, pin_weights=pins, acceleration_hook=blocking_hook)
    errors = []

    def first():
        try:
            cloth.step()
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    worker = threading.Thread(target=first)
    worker.start()
    try:
        assert entered.wait(timeout=30.0)
        with pytest.raises(RuntimeError, match="already running in another thread"):
            cloth.step()
    finally:
        release.set()
        worker.join(timeout=30.0)
    assert not worker.is_alive() and errors == []
    # The refused call changed nothing: exactly one frame was taken, by the first thread.
    assert cloth.frame == 1 and len(cloth.history) == 1
    cloth.step()  # and the lock was released
    assert cloth.frame == 2
