"""Shrinking (Blender Cloth's Shrinking Factor / Max Shrinking / Shrinking Group): a free sheet
without gravity settles to its rest lengths scaled by Blender's per-vertex factor
k = 1 - shrink_min + (shrink_min - shrink_max) w, sqrt(k_i k_j) per edge (computed here from the
formula, measured on the positions)."""

import numpy as np
import pytest

from selvedge.solver import Cloth, ClothInputError, ClothOptions, SolverSettings, grid_mesh
from selvedge.solver.shrink import Shrink

N = 9


def _sheet(mode="serial", shrink=None):
    pos, faces, uv = grid_mesh(N, N, 0.5, 0.5)
    settings = SolverSettings(substeps=10, gravity_m_s2=(0.0, 0.0, 0.0), solve_mode=mode, threads=2)
    return pos, Cloth(pos, faces, uvs=uv, settings=settings, options=ClothOptions(bending=False), shrink=shrink)


def _edge_ratio(cloth, pos):
    e = cloth.topology.edges
    return np.linalg.norm(cloth.positions[e[:, 0]] - cloth.positions[e[:, 1]], axis=1) / np.linalg.norm(
        pos[e[:, 0]] - pos[e[:, 1]], axis=1
    )


@pytest.mark.parametrize("mode", ["serial", "colored"])
def test_uniform_shrink_factor_scales_every_edge(mode):
    pos, cloth = _sheet(mode, Shrink(shrink_min=0.2))
    for _ in range(48):
        cloth.step()
    ratio = _edge_ratio(cloth, pos)
    assert np.allclose(ratio, 0.8, atol=0.01), (ratio.min(), ratio.max())


def test_shrinking_group_interpolates_between_factor_and_max():
    pos, cloth = _sheet()
    weights = (pos[:, 0] > 0.25).astype(float)  # right half in the group
    cloth.set_shrink(Shrink(shrink_min=0.0, shrink_max=0.3, weights=weights))
    for _ in range(72):
        cloth.step()
    # the two zones cannot both keep their metric in one sheet: measure away from the border
    e = cloth.topology.edges
    ratio = _edge_ratio(cloth, pos)
    mid_x = 0.5 * (pos[e[:, 0], 0] + pos[e[:, 1], 0])
    assert np.median(ratio[mid_x > 0.4]) == pytest.approx(1.0 - 0.3, abs=0.02)  # k = 1 - 0 + (0 - 0.3) * 1
    assert np.median(ratio[mid_x < 0.1]) == pytest.approx(1.0, abs=0.02)


def test_animated_shrink_follows_each_change_and_back():
    pos, cloth = _sheet("colored")
    for factor in (0.1, 0.25, 0.0):
        cloth.set_shrink(Shrink(shrink_min=factor))
        for _ in range(40):
            cloth.step()
        assert np.median(_edge_ratio(cloth, pos)) == pytest.approx(1.0 - factor, abs=0.01)


def test_shrink_to_nothing_is_refused():
    with pytest.raises(ClothInputError, match="shrink_min must be finite and at most"):
        _sheet(shrink=Shrink(shrink_min=1.0))
