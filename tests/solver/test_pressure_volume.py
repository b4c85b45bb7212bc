"""Pressure (Blender Cloth's ideal-gas pressure) and the seeds' volume constraint (001 sec. 5.3).

Analytic reference: a regular icosahedron of edge springs is symmetric enough that its inflated
equilibrium is a uniform scale r (every edge and vertex alike), so virtual work gives
p(V) dV = sum_e f_e dL_e:   p(r^3 V_0) * 3 r^2 V_0 = sum_e L0_e^2 (r - 1) / alpha_e
with alpha_e each edge's stretch compliance (m/N). Solved here with scipy's brentq.
"""

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.spatial import ConvexHull

from selvedge.solver import Cloth, ClothInputError, ClothOptions, Material, SolverSettings, grid_mesh
from selvedge.solver.volume import Pressure

PHI = (1 + 5**0.5) / 2


def icosahedron(radius=0.3):
    v = []
    for a in (-1, 1):
        for b in (-PHI, PHI):
            v += [(0, a, b), (a, b, 0), (b, 0, a)]
    v = np.array(v, dtype=float)
    v *= radius / np.linalg.norm(v[0])
    faces = ConvexHull(v).simplices.copy()
    for f in faces:  # outward
        n = np.cross(v[f[1]] - v[f[0]], v[f[2]] - v[f[0]])
        if np.dot(n, v[f].mean(axis=0)) < 0:
            f[[1, 2]] = f[[2, 1]]
    return v, faces


def _balloon(pressure, compliance=2e-3, mode="serial"):
    """Heavy (2 kg/m^2) and at 60 substeps, so XPBD's one-iteration softening of the edges,
    alpha -> alpha + h^2 (w_i + w_j), stays under 0.4 % of alpha."""
    v, f = icosahedron()
    material = Material(
        density_kg_m2=2.0,
        stretch_compliance_warp=compliance,
        stretch_compliance_weft=compliance,
        stretch_compliance_bias=compliance,
        air_drag_per_s=2.0,
        stretch_damping_s=1e-3,
    )
    settings = SolverSettings(substeps=60, gravity_m_s2=(0.0, 0.0, 0.0), solve_mode=mode, threads=2)
    cloth = Cloth(
        v,
        f,
        material=material,
        settings=settings,
        pressure=pressure,
        options=ClothOptions(bending=False, shear=False, tethers=False),
    )
    return v, cloth


def _equilibrium_scale(cloth, rest, pressure_of_volume):
    stretch = cloth.stretch
    e = stretch.vertices
    stiffness = np.sum(np.sum((rest[e[:, 0]] - rest[e[:, 1]]) ** 2, axis=1) / stretch.params["compliance"])
    v0 = cloth.volume.rest_volumes[0]
    return brentq(lambda r: pressure_of_volume(r**3 * v0) * 3 * r**2 * v0 - stiffness * (r - 1), 0.3, 3.0)


def _settle(cloth, seconds=4.0):
    for _ in range(int(24 * seconds)):
        cloth.step()


@pytest.mark.parametrize("mode", ["serial", "colored"])
def test_ideal_gas_balloon_settles_at_the_virtual_work_equilibrium(mode):
    scale, uniform = 2000.0, 0.5  # Pa; Blender: p = scale (uniform + V_t / V - 1), V_t = rest volume
    rest, cloth = _balloon(Pressure(pressure_factor=scale, uniform_pressure_force=uniform), mode=mode)
    v0 = cloth.volume.rest_volumes[0]
    r = _equilibrium_scale(cloth, rest, lambda vol: scale * (uniform + v0 / vol - 1))
    _settle(cloth)
    measured = (cloth.volume.volumes(cloth.x)[0] / v0) ** (1 / 3)
    assert r > 1.05
    assert measured == pytest.approx(r, rel=0.005)
    radii = np.linalg.norm(cloth.positions - cloth.positions.mean(axis=0), axis=1)
    assert radii.std() / radii.mean() < 1e-3  # still an icosahedron


def test_custom_target_volume_below_rest_deflates():
    rest, cloth = _balloon(None)
    cloth.set_pressure(Pressure(pressure_factor=500.0, use_pressure_volume=True, target_volume=0.03))
    v0 = cloth.volume.rest_volumes[0]
    assert v0 > 0.03
    r = _equilibrium_scale(cloth, rest, lambda vol: 500.0 * (0.03 / vol - 1))
    _settle(cloth)
    assert (cloth.volume.volumes(cloth.x)[0] / v0) ** (1 / 3) == pytest.approx(r, rel=0.005)
    assert r < 0.99


@pytest.mark.parametrize("alpha", [0.0, 2e-5])
def test_volume_constraint_inflation_factor(alpha):
    """C = V - k V_0 with compliance alpha: pressure (k V_0 - V) / alpha; alpha = 0 holds V = k V_0."""
    k = 1.3
    rest, cloth = _balloon(Pressure(inflation=k, volume_compliance=alpha))
    v0 = cloth.volume.rest_volumes[0]
    _settle(cloth)
    measured = cloth.volume.volumes(cloth.x)[0] / v0
    if alpha == 0.0:
        assert measured == pytest.approx(k, rel=2e-3)
    else:
        r = _equilibrium_scale(cloth, rest, lambda vol: (k * v0 - vol) / alpha)
        assert 1.0 < r**3 < k - 0.02
        assert measured ** (1 / 3) == pytest.approx(r, rel=0.005)


def test_pressure_group_weight_zero_keeps_vertices_from_the_push():
    v, f = icosahedron()
    weights = np.ones(len(v))
    weights[0] = 0.0
    cloth = Cloth(
        v,
        f,
        settings=SolverSettings(gravity_m_s2=(0.0, 0.0, 0.0)),
        options=ClothOptions(bending=False, shear=False, tethers=False),
        pressure=Pressure(pressure_factor=1000.0, uniform_pressure_force=1.0, weights=weights),
    )
    for c in cloth._sets_serial:
        c.params["compliance"][:] = 1e6  # membrane nearly absent: only the pressure moves vertices
        c._coefficients = None
    cloth.step()
    moved = np.linalg.norm(cloth.positions - v, axis=1)
    assert moved[0] < 1e-3 * moved[1:].min()


def test_pressure_on_an_open_mesh_is_refused_with_the_edge():
    pos, faces, _ = grid_mesh(4, 4)
    with pytest.raises(ClothInputError, match=r"pressure needs a closed mesh: island 0 .* open or non-manifold edges"):
        Cloth(pos, faces, pressure=Pressure(pressure_factor=100.0))
    v, f = icosahedron()
    f[0] = f[0][[0, 2, 1]]
    with pytest.raises(ClothInputError, match="consistently oriented faces"):
        Cloth(v, f, pressure=Pressure(pressure_factor=100.0))
    # an inactive Pressure builds nothing and checks nothing about closure
    assert Cloth(pos, faces, pressure=Pressure()).volume is None
