"""Set-up of a cloth: mass lumping, grain classification, tethers, soft pins, materials and pattern
rest lengths. Expected values are computed here independently (by hand formulas, scipy) or come
from the physics the docs state (1/(E t), log-scale slider end points)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import dijkstra
from scipy.spatial import Delaunay

from selvedge.solver import (
    PRESETS,
    Cloth,
    ClothInputError,
    ClothOptions,
    Material,
    SolverSettings,
    compliance_from_slider,
    grid_mesh,
    preset,
)
from selvedge.solver.constraints import BIAS, WARP, WEFT
from selvedge.solver.materials import BEND_COMPLIANCE_RANGE, STRETCH_COMPLIANCE_RANGE

G = 9.81


def edges_of(faces) -> np.ndarray:
    tri = np.asarray(faces)
    e = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
    return np.unique(np.sort(e, axis=1), axis=0)


def geodesic(positions, faces, sources) -> np.ndarray:
    e = edges_of(faces)
    w = np.linalg.norm(positions[e[:, 0]] - positions[e[:, 1]], axis=1)
    n = len(positions)
    return dijkstra(
        coo_matrix((w, (e[:, 0], e[:, 1])), shape=(n, n)).tocsr(), directed=False, indices=np.asarray(sources)
    ).T  # (N, P)


def stretch_params_by_edge(cloth, name):
    """A stretch-set parameter aligned with ``cloth.topology.edges`` (the set itself may be reordered)."""
    st = next(c for c in cloth.constraint_sets if c.name == "stretch")
    pairs = np.sort(st.vertices, axis=1)
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    assert np.array_equal(pairs[order], cloth.topology.edges)
    return st.params[name][order]


def expected_grain(d: np.ndarray) -> np.ndarray:
    """Warp along the second axis, weft along the first, bias beyond 22.5 degrees of either (by hand)."""
    angle = np.degrees(np.arctan2(np.abs(d[:, 1]), np.abs(d[:, 0])))
    out = np.full(len(d), BIAS)
    out[angle <= 22.5] = WEFT
    out[angle >= 67.5] = WARP
    return out


# ----------------------------------------------------------------------------------------------
# Mass lumping.
# ----------------------------------------------------------------------------------------------
def test_lumped_mass_on_an_irregular_curved_mesh():
    rng = np.random.default_rng(7)
    xy = np.concatenate([rng.random((60, 2)) * [1.0, 0.7], [[0, 0], [1, 0], [0, 0.7], [1, 0.7]]])
    faces = Delaunay(xy).simplices
    pos = np.column_stack([xy, 0.2 * np.sin(3 * xy[:, 0]) * np.cos(2 * xy[:, 1])])  # a curved sheet
    density = 0.23
    cloth = Cloth(pos, faces, material=Material(density_kg_m2=density), options=ClothOptions(tethers=False))
    area = 0.5 * np.linalg.norm(
        np.cross(pos[faces[:, 1]] - pos[faces[:, 0]], pos[faces[:, 2]] - pos[faces[:, 0]]), axis=1
    )
    expected = np.zeros(len(pos))
    for t, a in zip(faces, area):
        for v in t:
            expected[v] += density * a / 3.0
    assert math.isclose(cloth.mass.sum(), density * area.sum(), rel_tol=1e-12)
    assert np.allclose(cloth.mass, expected, rtol=1e-12, atol=0)
    # The curved sheet's area exceeds its 0.7 m^2 footprint, so mass follows the 3D surface, not the plan.
    assert area.sum() > 0.7 * 1.001
    assert np.allclose(cloth.inv_mass, 1.0 / expected, rtol=1e-12)


def test_lumped_mass_on_a_regular_grid_by_hand():
    # 3 x 3 vertices over 1 m x 1 m: 8 triangles of 1/8 m^2. A corner touches 1 or 2 triangles depending on
    # the diagonal, an edge mid-point 3, the centre 4 (alternating diagonals meet at the centre or not).
    pos, faces, _ = grid_mesh(3, 3, 1.0, 1.0)
    cloth = Cloth(pos, faces, options=ClothOptions(tethers=False))
    counts = np.bincount(np.asarray(faces).ravel(), minlength=9)
    assert np.allclose(cloth.mass, 0.15 * counts * (1 / 8) / 3, rtol=1e-14)
    assert math.isclose(cloth.mass.sum(), 0.15, rel_tol=1e-14)


# ----------------------------------------------------------------------------------------------
# Grain classification.
# ----------------------------------------------------------------------------------------------
def test_grain_from_uvs_aligned_and_rotated_45_degrees():
    pos, faces, uv = grid_mesh(6, 6, 0.5, 0.5, plane="xy")
    mat = Material(stretch_compliance_warp=1e-4, stretch_compliance_weft=2e-4, stretch_compliance_bias=3e-3)
    e = None
    for rotate in (False, True):
        uvs = uv.copy()
        if rotate:
            c = s = math.sqrt(0.5)
            uvs = uv @ np.array([[c, s], [-s, c]])
        cloth = Cloth(pos, faces, uvs=uvs, material=mat, options=ClothOptions(tethers=False))
        e = cloth.topology.edges
        d3 = pos[e[:, 1]] - pos[e[:, 0]]
        grain = np.asarray(cloth.edge_grain)
        expected = expected_grain(uvs[e[:, 1]] - uvs[e[:, 0]])
        assert np.array_equal(grain, expected)
        axis_edges = np.isclose(d3[:, 0], 0) | np.isclose(d3[:, 1], 0)
        if rotate:
            # The mesh's row/column edges run at 45 degrees to the grain: all bias; the diagonals are on grain.
            assert (grain[axis_edges] == BIAS).all()
            assert np.isin(grain[~axis_edges], [WARP, WEFT]).all()
        else:
            assert (grain[np.isclose(d3[:, 1], 0)] == WEFT).all()  # along x = along u
            assert (grain[np.isclose(d3[:, 0], 0)] == WARP).all()  # along y = along v
            assert (grain[~axis_edges] == BIAS).all()
        # Each edge's stretch compliance is its class's material compliance.
        per_class = {WARP: 1e-4, WEFT: 2e-4, BIAS: 3e-3}
        assert np.allclose(stretch_params_by_edge(cloth, "compliance"), [per_class[g] for g in expected], rtol=1e-15)


def test_grain_from_per_corner_uvs_matches_per_vertex():
    pos, faces, uv = grid_mesh(5, 4, 0.4, 0.3, plane="xy")
    corner_uv = uv[np.asarray(faces)]  # (T, 3, 2)
    a = Cloth(pos, faces, uvs=uv, options=ClothOptions(tethers=False))
    b = Cloth(pos, faces, uvs=corner_uv, options=ClothOptions(tethers=False))
    assert np.array_equal(a.edge_grain, b.edge_grain)
    assert np.isin(a.edge_grain, [WARP, WEFT, BIAS]).all() and len(set(a.edge_grain.tolist())) == 3


@pytest.mark.parametrize("plane", ["xy", "xz"])
def test_grain_without_uvs_falls_back_to_the_object_x_axis(plane):
    pos, faces, _ = grid_mesh(5, 5, 0.4, 0.4, plane=plane)
    cloth = Cloth(pos, faces, options=ClothOptions(tethers=False))
    e = cloth.topology.edges
    d = pos[e[:, 1]] - pos[e[:, 0]]
    second = 1 if plane == "xy" else 2
    # Weft along object X, warp across it in the surface plane, the diagonals bias.
    assert np.array_equal(cloth.edge_grain, expected_grain(d[:, [0, second]]))
    assert (cloth.edge_grain[np.isclose(d[:, second], 0)] == WEFT).all()
    assert (cloth.edge_grain[np.isclose(d[:, 0], 0)] == WARP).all()


def test_grain_without_uvs_on_a_grid_turned_45_degrees():
    pos, faces, _ = grid_mesh(5, 5, 0.4, 0.4, plane="xy")
    c = s = math.sqrt(0.5)
    pos = pos @ np.array([[c, s, 0], [-s, c, 0], [0, 0, 1]])  # turn the mesh about z
    cloth = Cloth(pos, faces, options=ClothOptions(tethers=False))
    e = cloth.topology.edges
    d = pos[e[:, 1]] - pos[e[:, 0]]
    assert np.array_equal(cloth.edge_grain, expected_grain(d[:, :2]))
    # Now the mesh rows/columns are bias and the diagonals are on the object axes.
    assert (cloth.edge_grain == BIAS).sum() == 2 * 5 * 4


# ----------------------------------------------------------------------------------------------
# Tethers (long range attachments).
# ----------------------------------------------------------------------------------------------
def _tethers(cloth):
    t = next(c for c in cloth.constraint_sets if c.name == "tether")
    assert t.unilateral
    return t.vertices, t.params["rest_length"]


@pytest.mark.parametrize("geodesic_mode", [True, False])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_each_free_vertex_gets_tether_count_tethers_to_its_nearest_pins(geodesic_mode, count):
    pos, faces, uv = grid_mesh(7, 6, 0.6, 0.5, plane="xz")
    n = len(pos)
    pinned = np.array([n - 7, n - 4, n - 1, 10])  # three top vertices and one inside
    pins = np.zeros(n)
    pins[pinned] = 1.0
    scale = 1.07
    cloth = Cloth(
        pos,
        faces,
        pin_weights=pins,
        options=ClothOptions(tether_geodesic=geodesic_mode, tether_count=count, tether_scale=scale),
    )
    pairs, rest = _tethers(cloth)
    if geodesic_mode:
        dist = geodesic(pos, faces, pinned)
    else:
        dist = np.linalg.norm(pos[:, None, :] - pos[None, pinned, :], axis=2)
    free = np.setdiff1d(np.arange(n), pinned)
    assert len(pairs) == count * len(free)
    for v in free:
        mine = pairs[:, 0] == v
        targets = pairs[mine, 1]
        assert len(targets) == count and len(set(targets.tolist())) == count
        d_sorted = np.sort(dist[v])
        kth = d_sorted[count - 1]
        for p, r in zip(targets, rest[mine]):
            col = int(np.flatnonzero(pinned == p)[0])
            assert dist[v, col] <= kth * (1 + 1e-12)  # one of the count nearest (ties allowed)
            assert math.isclose(r, scale * dist[v, col], rel_tol=1e-12)


def test_geodesic_tether_length_is_the_grid_path_and_at_least_euclidean():
    # Quad grid fan-triangulated with the c00-c11 diagonal: from the corner (0, 0), the shortest edge path to
    # (i, j) takes min(i, j) diagonals and |i - j| straight steps (by hand).
    nx, ny, dx = 6, 5, 0.1
    pos, faces, _ = grid_mesh(nx, ny, dx * (nx - 1), dx * (ny - 1), plane="xy", quads=True)
    pins = np.zeros(len(pos))
    pins[0] = 1.0
    cloth = Cloth(pos, faces, pin_weights=pins, options=ClothOptions(tether_geodesic=True, tether_scale=1.0))
    pairs, rest = _tethers(cloth)
    assert (pairs[:, 1] == 0).all()
    for v, r in zip(pairs[:, 0], rest):
        i, j = v % nx, v // nx
        by_hand = dx * (math.sqrt(2.0) * min(i, j) + abs(i - j))
        assert math.isclose(r, by_hand, rel_tol=1e-12), (v, r, by_hand)
        assert r >= np.linalg.norm(pos[v] - pos[0]) * (1 - 1e-12)


def test_geodesic_tethers_follow_a_curved_surface():
    # A strip bent into a half cylinder of radius 0.2 m, pinned along one straight edge: the geodesic rest
    # distance to the far edge is the half circumference (pi r), the Euclidean one the diameter (2 r).
    n_around, n_along, r = 17, 3, 0.2
    theta = np.linspace(0.0, math.pi, n_around)
    pos = np.array([[r * math.cos(t), y, r * math.sin(t)] for y in (0.0, 0.05, 0.1) for t in theta])
    idx = np.arange(n_around * n_along).reshape(n_along, n_around)
    faces = np.concatenate(
        [
            np.stack([idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel()], 1),
            np.stack([idx[:-1, :-1].ravel(), idx[1:, 1:].ravel(), idx[1:, :-1].ravel()], 1),
        ]
    )
    pinned = idx[:, 0]
    pins = np.zeros(len(pos))
    pins[pinned] = 1.0
    geo = Cloth(pos, faces, pin_weights=pins, options=ClothOptions(tether_geodesic=True, tether_scale=1.0))
    euc = Cloth(pos, faces, pin_weights=pins, options=ClothOptions(tether_geodesic=False, tether_scale=1.0))
    (gp, gr), (ep, er) = _tethers(geo), _tethers(euc)
    g_len = dict(zip(gp[:, 0].tolist(), gr))
    e_len = dict(zip(ep[:, 0].tolist(), er))
    assert g_len.keys() == e_len.keys()
    for v in g_len:
        assert g_len[v] >= e_len[v] * (1 - 1e-12)
    # The far edge (theta = pi) of the middle row, straight across from its pin: polyline arc vs diameter.
    far = int(idx[1, -1])
    chord = 2 * r * math.sin(math.pi / (n_around - 1) / 2)
    assert math.isclose(g_len[far], (n_around - 1) * chord, rel_tol=1e-12)  # -> pi r = 0.628 m
    assert math.isclose(e_len[far], 2 * r, rel_tol=1e-12)
    assert g_len[far] > 1.5 * e_len[far]


# ----------------------------------------------------------------------------------------------
# Soft pins.
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("weight", [0.5, 0.25, 0.8])
def test_soft_pin_sags_by_weight_times_goal_compliance(weight):
    # A horizontal right triangle whose three corners are soft-pinned with the same weight: it sinks without
    # deforming (no stretch, no bending), so each corner's goal spring alone carries its own weight:
    # d = m g alpha, with alpha = soft_pin_compliance (1 - p) / p (the documented mapping) and m = rho A / 3.
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], float)
    faces = np.array([[0, 1, 2]])
    base = 1e-2  # m/N at p = 0.5
    mat = Material(air_drag_per_s=4.0)
    cloth = Cloth(
        pos,
        faces,
        pin_weights=np.full(3, weight),
        material=mat,
        options=ClothOptions(tethers=False, soft_pin_compliance=base),
        settings=SolverSettings(substeps=10, iterations=2),
    )
    assert cloth.soft_pin_index.tolist() == [0, 1, 2]
    assert (cloth.inv_mass > 0).all()
    for _ in range(120):
        cloth.step()
    alpha = base * (1 - weight) / weight
    m = mat.density_kg_m2 * 0.5 / 3
    sag = -cloth.positions[:, 2]
    assert np.allclose(sag, m * G * alpha, rtol=1e-3), (sag, m * G * alpha)
    assert np.allclose(cloth.positions[:, :2], pos[:, :2], atol=1e-12)
    assert np.abs(cloth.velocities).max() < 1e-6


@pytest.mark.parametrize("mode", ["serial", "colored"])
def test_each_soft_pin_follows_its_own_moving_target(mode):
    # Soft pins at different hop counts from the hard pin: the pin-outward sweep order (and the
    # coloured schedule) put their goals in another order than soft_pin_index. The whole pinned set
    # glides 1 cm a frame along x, without gravity; a near-hard goal (weight 0.999) must keep each
    # soft-pinned vertex on its own target (given by the caller, not by the solver) to a fraction
    # of a millimetre. Goals swapped between vertices pull them ~0.4-1 m off.
    pos, faces, _ = grid_mesh(8, 8, 1.0, 1.0)
    pins = np.zeros(len(pos))
    pins[0] = 1.0
    soft = [63, 20, 7, 56]
    pins[soft] = 0.999
    cloth = Cloth(
        pos,
        faces,
        pin_weights=pins,
        material=Material(air_drag_per_s=2.0),
        settings=SolverSettings(solve_mode=mode, gravity_m_s2=(0.0, 0.0, 0.0), threads=2),
    )
    goal_rows = [s for s in cloth.constraint_sets if s.kind == "soft_pin"][0].vertices
    assert goal_rows.tolist() != sorted(soft)  # the case that matters: reordered goals
    worst = 0.0
    for frame in range(1, 31):
        targets = pos + np.array([0.01 * frame, 0.0, 0.0])
        cloth.step(pin_targets=targets)
        worst = max(worst, np.linalg.norm(cloth.positions[soft] - targets[soft], axis=1).max())
    assert worst < 2e-4, worst


def test_soft_pin_weight_one_is_hard_and_zero_is_free():
    pos, faces, _ = grid_mesh(3, 3, 0.2, 0.2, plane="xy")
    pins = np.zeros(9)
    pins[0], pins[1] = 1.0, 0.5
    cloth = Cloth(pos, faces, pin_weights=pins)
    assert cloth.inv_mass[0] == 0.0 and cloth.inv_mass[1] > 0.0
    assert cloth.kinematic_index.tolist() == [0] and cloth.soft_pin_index.tolist() == [1]
    assert cloth.pinned_vertices.tolist() == [0, 1]


# ----------------------------------------------------------------------------------------------
# Materials.
# ----------------------------------------------------------------------------------------------
def test_presets_exist_and_are_physically_ordered():
    names = {"cotton", "silk", "denim", "leather", "jersey_knit", "rubber"}
    assert names <= set(PRESETS)
    mats = {n: preset(n) for n in names}
    for n, m in mats.items():
        m.validate()
        assert m.name == n
        for alpha in (
            m.stretch_compliance_warp,
            m.stretch_compliance_weft,
            m.stretch_compliance_bias,
            m.shear_compliance,
        ):
            # Membrane stiffness E t of real fabrics: ~1e2 .. 1e5 N/m.
            assert 1e-5 <= alpha <= 1e-2, (n, alpha)
        assert 1e2 <= m.bend_compliance <= 1e8, (n, m.bend_compliance)  # bending stiffness 1e-8 .. 1e-2 N m
        assert 0.02 <= m.density_kg_m2 <= 1.5
    for n in ("cotton", "silk", "denim", "leather"):  # wovens: stiff on grain, soft on the bias
        m = mats[n]
        assert m.stretch_compliance_warp <= m.stretch_compliance_weft <= m.stretch_compliance_bias
    knit = mats["jersey_knit"]
    assert knit.stretch_compliance_weft > 2 * knit.stretch_compliance_warp  # knits stretch most along the weft
    rubber = mats["rubber"]
    assert rubber.stretch_compliance_warp == rubber.stretch_compliance_weft == rubber.stretch_compliance_bias
    # Heavier and stiffer in bending from silk to leather; silk is the lightest and drapes most.
    assert (
        mats["silk"].density_kg_m2
        < mats["cotton"].density_kg_m2
        < mats["denim"].density_kg_m2
        < mats["leather"].density_kg_m2
    )
    assert (
        mats["silk"].bend_compliance
        > mats["cotton"].bend_compliance
        > mats["denim"].bend_compliance
        > mats["leather"].bend_compliance
    )
    assert mats["denim"].stretch_compliance_warp < mats["cotton"].stretch_compliance_warp


def test_preset_compliance_shows_in_a_hanging_strip():
    # A single vertical edge carrying a mass: elongation = alpha F. Check with each preset's warp compliance.
    pos = np.array([[0, 0, 0], [0, 0, -0.1], [0.1, 0, 0]], float)  # triangle; edge 0-1 vertical = warp (no UVs:
    faces = np.array([[0, 1, 2]])  # X is weft, the other axis warp)
    for name in ("cotton", "jersey_knit"):
        m = preset(name)
        pins = np.array([1.0, 0.0, 1.0])
        cloth = Cloth(
            pos,
            faces,
            pin_weights=pins,
            material=Material(
                density_kg_m2=m.density_kg_m2,
                stretch_compliance_warp=m.stretch_compliance_warp,
                stretch_compliance_weft=m.stretch_compliance_weft,
                stretch_compliance_bias=m.stretch_compliance_bias,
                air_drag_per_s=5.0,
            ),
            options=ClothOptions(tethers=False, bending=False, shear=False),
            settings=SolverSettings(substeps=10, iterations=30),
        )
        edge01 = int(np.flatnonzero((cloth.topology.edges == [0, 1]).all(axis=1))[0])
        assert cloth.edge_grain[edge01] == WARP
        for _ in range(96):
            cloth.step()
        # Vertex 1 hangs from edge 0-1 (warp, vertical) and edge 1-2 (bias, diagonal): solve the 2-spring
        # static equilibrium by hand (small strains: linearise the lengths about the rest directions).
        w = m.density_kg_m2 * (0.5 * 0.1 * 0.1) / 3 * G
        u01 = np.array([0.0, 0.0, 1.0])  # from vertex 1 towards vertex 0
        u12 = np.array([0.1, 0.0, 0.1]) / math.hypot(0.1, 0.1)  # from vertex 1 towards vertex 2
        k = np.outer(u01, u01) / m.stretch_compliance_warp + np.outer(u12, u12) / m.stretch_compliance_bias
        k_xz = k[np.ix_([0, 2], [0, 2])]
        disp = np.linalg.solve(k_xz, [0.0, -w])
        got = cloth.positions[1, [0, 2]] - pos[1, [0, 2]]
        assert np.allclose(got, disp, rtol=0.02, atol=1e-9), (name, got, disp)


def test_slider_is_log_scale_and_monotone():
    soft, stiff = STRETCH_COMPLIANCE_RANGE
    assert (soft, stiff) == (1e-2, 1e-8)  # m/N, 001 sec. 3.4
    assert math.isclose(compliance_from_slider(0.0, STRETCH_COMPLIANCE_RANGE), 1e-2, rel_tol=1e-12)
    assert math.isclose(compliance_from_slider(1.0, STRETCH_COMPLIANCE_RANGE), 1e-8, rel_tol=1e-12)
    # log10 alpha = -2 - 6 s: equal slider steps are equal factors.
    for s in (0.25, 0.5, 0.75):
        assert math.isclose(compliance_from_slider(s, STRETCH_COMPLIANCE_RANGE), 10 ** (-2 - 6 * s), rel_tol=1e-12)
    values = np.array([compliance_from_slider(s, STRETCH_COMPLIANCE_RANGE) for s in np.linspace(0, 1, 101)])
    assert (np.diff(values) < 0).all()
    ratios = values[1:] / values[:-1]
    assert np.allclose(ratios, 10**-0.06, rtol=1e-9)
    bend = np.array([compliance_from_slider(s, BEND_COMPLIANCE_RANGE) for s in np.linspace(0, 1, 11)])
    assert (np.diff(bend) < 0).all() and bend[0] > bend[-1]
    for bad in (-0.01, 1.01):
        with pytest.raises(ClothInputError, match="stiffness slider must be within 0..1"):
            compliance_from_slider(bad, STRETCH_COMPLIANCE_RANGE)
    # with_stiffness sets warp from the slider and keeps the fabric's anisotropy.
    cotton = preset("cotton")
    firm = cotton.with_stiffness(stretch_01=0.5)
    assert math.isclose(firm.stretch_compliance_warp, 1e-5, rel_tol=1e-12)
    assert math.isclose(
        firm.stretch_compliance_bias / firm.stretch_compliance_warp,
        cotton.stretch_compliance_bias / cotton.stretch_compliance_warp,
        rel_tol=1e-12,
    )


def test_material_from_youngs_modulus():
    e_mod, t, rho, nu = 2.0e6, 1.5e-3, 1200.0, 0.3
    m = Material.from_youngs(e_mod, t, rho, poisson_ratio=nu)
    assert math.isclose(m.stretch_compliance_warp, 1.0 / (e_mod * t), rel_tol=1e-12)  # 1 / (E t)
    assert m.stretch_compliance_warp == m.stretch_compliance_weft == m.stretch_compliance_bias
    assert math.isclose(m.shear_compliance, 2 * (1 + nu) / (e_mod * t), rel_tol=1e-12)  # 1 / (G t)
    assert math.isclose(m.bend_compliance, 12 * (1 - nu**2) / (e_mod * t**3), rel_tol=1e-12)  # 1 / D
    assert math.isclose(m.density_kg_m2, rho * t, rel_tol=1e-12)
    with pytest.raises(ClothInputError, match="Young's modulus and thickness must be positive"):
        Material.from_youngs(0.0, t, rho)


# ----------------------------------------------------------------------------------------------
# Pattern rest lengths.
# ----------------------------------------------------------------------------------------------
def test_pattern_rest_lengths_shrink_a_stretched_model_back_to_pattern_size():
    pattern = 0.4  # m: UVs 0..1 scaled by uv_scale_m
    pos, faces, uv = grid_mesh(7, 7, pattern, pattern, plane="xy")
    modelled = pos * [1.3, 1.2, 1.0]  # modelled 30 % / 20 % too large in 3D
    cloth = Cloth(
        modelled,
        faces,
        uvs=uv,
        material=Material(air_drag_per_s=4.0),
        options=ClothOptions(rest_length_source="pattern", uv_scale_m=pattern, tethers=False),
        settings=SolverSettings(substeps=10, iterations=10, gravity_m_s2=(0.0, 0.0, 0.0)),
    )
    # Mass follows the pattern's area, not the stretched model's.
    assert math.isclose(cloth.mass.sum(), 0.15 * pattern**2, rel_tol=1e-12)
    rest = stretch_params_by_edge(cloth, "rest_length")
    e = cloth.topology.edges
    assert np.allclose(rest, np.linalg.norm(pos[e[:, 0]] - pos[e[:, 1]], axis=1), rtol=1e-12)
    for _ in range(72):
        cloth.step()
    x = cloth.positions
    # Rotation-invariant size: the shrinking may turn the piece in its plane (zero angular momentum does not
    # forbid a net turn of a deforming body), so measure side lengths and diagonals between the corners.
    c00, c10, c01, c11 = 0, 6, 42, 48
    sides = [np.linalg.norm(x[a] - x[b]) for a, b in ((c00, c10), (c01, c11), (c00, c01), (c10, c11))]
    diagonals = [np.linalg.norm(x[a] - x[b]) for a, b in ((c00, c11), (c10, c01))]
    before = [np.linalg.norm(modelled[c00] - modelled[c10]), np.linalg.norm(modelled[c00] - modelled[c01])]
    assert min(before) > 1.19 * pattern  # it really started stretched
    assert np.allclose(sides, pattern, rtol=5e-3), sides
    assert np.allclose(diagonals, pattern * math.sqrt(2), rtol=5e-3), diagonals
    lengths = np.linalg.norm(x[e[:, 0]] - x[e[:, 1]], axis=1)
    assert np.abs(lengths / rest - 1).max() < 5e-3
    assert np.abs(x[:, 2]).max() < 1e-6  # stays flat: bending rest angle is flat for a pattern
    # Area of the piece (shoelace over the boundary) equals the pattern's.
    ring = np.r_[np.arange(0, 7), np.arange(13, 49, 7), np.arange(47, 41, -1), np.arange(35, 0, -7)]
    px, py = x[ring, 0], x[ring, 1]
    area = 0.5 * abs(np.dot(px, np.roll(py, -1)) - np.dot(py, np.roll(px, -1)))
    assert math.isclose(area, pattern**2, rel_tol=1e-2)
