"""Milestones M4 and M5 (001 appendix A): constraint toggles change the drape; substeps beat iterations.

A 1 m square (11 x 11 vertices) starts flat and horizontal, pinned hard at the two corners of
one edge, and falls into a hanging drape. Shear angles, dihedral angles and edge strains are
measured here from the positions (independently of the solver's own diagnostics).
"""

import numpy as np
import pytest

from selvedge.solver import Cloth, ClothOptions, Material, SolverSettings, grid_mesh

N = 11
FPS = 24
SECONDS = 3.0
IDX = np.arange(N * N).reshape(N, N)  # IDX[row (v, warp), column (u, weft)]


def _grid():
    pos, faces, uv = grid_mesh(N, N, 1.0, 1.0)
    pins = np.zeros(N * N)
    pins[IDX[-1, 0]] = 1.0
    pins[IDX[-1, -1]] = 1.0
    return pos, faces, uv, pins


def mean_shear_angle_deg(x: np.ndarray) -> float:
    """Mean |angle between the warp and weft edges at a cell corner - 90 deg| over all cell corners."""
    a, b, c, d = x[IDX[:-1, :-1]], x[IDX[:-1, 1:]], x[IDX[1:, :-1]], x[IDX[1:, 1:]]
    deviations = []
    for corner, weft_end, warp_end in ((a, b, c), (b, a, d), (c, d, a), (d, c, b)):
        e1, e2 = weft_end - corner, warp_end - corner
        cos = np.sum(e1 * e2, -1) / (np.linalg.norm(e1, axis=-1) * np.linalg.norm(e2, axis=-1))
        deviations.append(np.abs(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))) - 90.0))
    return float(np.mean(deviations))


def mean_abs_dihedral_deg(cloth: Cloth, x: np.ndarray) -> float:
    """Mean unsigned angle between the normals of the two triangles at every interior edge."""
    t = cloth.topology
    a, b = t.hinge_edges[:, 0], t.hinge_edges[:, 1]
    p, q = t.hinge_opposite[:, 0], t.hinge_opposite[:, 1]
    n1 = np.cross(x[b] - x[a], x[p] - x[a])
    n2 = np.cross(x[q] - x[a], x[b] - x[a])  # both wing normals on the same side when flat
    n1 /= np.linalg.norm(n1, axis=1, keepdims=True)
    n2 /= np.linalg.norm(n2, axis=1, keepdims=True)
    return float(np.degrees(np.mean(np.arccos(np.clip(np.sum(n1 * n2, 1), -1.0, 1.0)))))


# Stiff along the threads, very soft on the bias (the triangulation diagonals), a moderately stiff
# shear diagonal and a noticeable bending stiffness: each toggle then has a visible job.
SOFT_BIAS = Material(
    stretch_compliance_warp=1e-5,
    stretch_compliance_weft=1e-5,
    stretch_compliance_bias=1e-1,
    shear_compliance=1e-3,
    bend_compliance=1e2,
)


def _drape(options: ClothOptions):
    """Shear and dihedral angles averaged over the second half of a 3 s fall-and-hang."""
    pos, faces, uv, pins = _grid()
    cloth = Cloth(
        pos,
        faces,
        uvs=uv,
        pin_weights=pins,
        material=SOFT_BIAS,
        options=options,
        settings=SolverSettings(substeps=10, iterations=1, fps=FPS),
    )
    frames = int(SECONDS * FPS)
    shear, fold = [], []
    for f in range(frames):
        cloth.step()
        if f >= frames // 2:
            shear.append(mean_shear_angle_deg(cloth.positions))
            fold.append(mean_abs_dihedral_deg(cloth, cloth.positions))
    # The drape really happened: the free bottom edge (row 0) fell well below the pins.
    assert cloth.positions[IDX[0], 2].max() < -0.5
    return float(np.mean(shear)), float(np.mean(fold))


def test_m4_shear_and_bending_toggles_change_the_drape():
    # The XPBD shear and bending constraints' own effect, so without the hierarchical stretch limit:
    # with it, the coarse links near the threads cap this 10^4-times-softer bias (see
    # docs/design/stiff_fabric.md), and the sheet shears and sags less.
    plain = dict(stretch_limiting=False)
    shear_on, fold_on = _drape(ClothOptions(**plain))
    shear_off, _ = _drape(ClothOptions(shear=False, **plain))
    _, fold_off = _drape(ClothOptions(bending=False, **plain))
    # A flat square grid has 0 deg shear and 0 deg folds: both numbers start at zero.
    # Measured: shear 0.87 deg with shear constraints, 2.36 deg without (the cells are pulled into
    # rhombi); folds 1.2 deg with bending, 4.2 deg without (the sheet creases like plastic film).
    # Margins: factor 1.8 and 2 where 2.7 and 3.5 were measured.
    assert shear_off > 1.8 * shear_on
    assert shear_off > shear_on + 0.8
    assert fold_off > 2.0 * fold_on
    assert fold_off > fold_on + 1.5


# ----------------------------------------------------------------------------------------------
# M5: a fixed budget of 16 projections per frame
# ----------------------------------------------------------------------------------------------
def _hang_strain(substeps: int, iterations: int) -> float:
    """Mean over the last second of the frame's maximum edge strain; checks the diagnostic too."""
    pos, faces, uv, pins = _grid()
    # Tethers and the hierarchical stretch limit off: the budget alone must hold the stretch (either
    # would hide the comparison; with the limit on, 16x1 gives 1.3 % and 1x16 2.2 %).
    cloth = Cloth(
        pos,
        faces,
        uvs=uv,
        pin_weights=pins,
        material=Material(),
        options=ClothOptions(tethers=False, stretch_limiting=False),
        settings=SolverSettings(substeps=substeps, iterations=iterations, fps=FPS),
    )
    edges = cloth.topology.edges
    rest_len = np.linalg.norm(pos[edges[:, 0]] - pos[edges[:, 1]], axis=1)
    strains = []
    for _ in range(int(SECONDS * FPS)):
        diag = cloth.step()
        x = cloth.positions
        own = np.max(np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1) / rest_len - 1.0)
        assert diag.strain_max == pytest.approx(own, rel=1e-9, abs=1e-12)
        strains.append(diag.strain_max)
    return float(np.mean(strains[-FPS:]))


def test_m5_substeps_beat_iterations_at_a_fixed_budget():
    many_substeps = _hang_strain(16, 1)
    balanced = _hang_strain(4, 4)
    many_iterations = _hang_strain(1, 16)
    converged = _hang_strain(64, 4)  # 16x the budget: the reference stiffness
    # Measured max strain: 16x1 3.8 %, 4x4 9.5 %, 1x16 27 %, converged 0.36 %.
    assert many_substeps < 0.25 * many_iterations
    assert many_substeps < balanced < many_iterations
    # A truncated solve is always softer than the converged one, never stiffer.
    assert converged < many_substeps
    assert converged < 0.01
