"""Shrinking (Blender Cloth's Shrinking Factor / Max Shrinking / Shrinking Group): a free sheet
without gravity settles to its rest lengths scaled by Blender's per-vertex factor
k = 1 - shrink_min + (shrink_min - shrink_max) w, sqrt(k_i k_j) per edge (computed here from the
formula, measured on the positions)."""

import dataclasses

import numpy as np
import pytest

from selvedge.solver import Cloth, ClothInputError, ClothOptions, SolverSettings, grid_mesh, preset
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


def _hanging_cotton(shrink, mode="serial"):
    """A vertical 1 m cotton sheet (25 x 25) hanging from the middle of its top edge."""
    pos, faces, uv = grid_mesh(25, 25, 1.0, 1.0, origin=(0.0, 0.0, 1.0), plane="xz")
    pins = np.zeros(len(pos))
    pins[int(np.argmin(np.abs(pos[:, 0] - 0.5) - pos[:, 2]))] = 1.0
    material = dataclasses.replace(preset("cotton"), air_drag_per_s=2.0)
    settings = SolverSettings(solve_mode=mode, threads=2)
    return pos, Cloth(pos, faces, uvs=uv, pin_weights=pins, material=material, settings=settings, shrink=shrink)


@pytest.mark.parametrize("mode", ["serial", "colored"])
def test_shrink_scales_the_stretch_limit_levels_and_the_shrunk_cloth_keeps_its_limit(mode):
    """The coarse links of the stretch limit (solver/multilevel.py) end limited against the shrunk
    lengths, sqrt(k_i k_j) times the unshrunk ones as for an edge (on the way there, as far as
    the edges around their ends have shrunk); a shrunk stiff sheet hanging from one point then
    strains (against its shrunk rest lengths) about as little as an unshrunk one, where with
    unshrunk links (11 % of slack against cotton's 0.1 %) it hung like plain XPBD (5 % P95) and with
    its tethers shrunk at once it was torn in (31-51 %)."""
    pos, plain = _hanging_cotton(None, mode)
    _, shrunk = _hanging_cotton(Shrink(shrink_min=0.1), mode)
    strain = {}
    for name, cloth in (("plain", plain), ("shrunk", shrunk)):
        worst = 0.0
        for frame in range(60):
            cloth.step()
            if frame >= 24:  # after the shrunk sheet has contracted by its 10 %
                worst = max(worst, float(np.percentile(cloth.edge_strain(), 95)))
        strain[name] = worst
    print(
        f"\n[shrink + stretch limit, {mode}] P95 strain (frames 24-60) plain {strain['plain']:.4f}, shrunk 0.9 "
        f"{strain['shrunk']:.4f}"
    )
    levels = [(plain.hierarchy, shrunk.hierarchy)]
    if mode == "colored":  # the levels in block order the coloured frame runs
        levels.append((plain._colored[5].hierarchy, shrunk._colored[5].hierarchy))
    for hz_plain, hz_shrunk in levels:
        assert np.array_equal(hz_plain.edges, hz_shrunk.edges)
        assert np.allclose(hz_shrunk.max_length, 0.9 * hz_plain.max_length, rtol=1e-12, atol=0.0)
    assert strain["shrunk"] < 1.5 * max(strain["plain"], preset("cotton").stretch_limit)
    # the shrunk sheet's edges settle at the shrunk lengths (0.9 of the unshrunk)
    assert np.median(_edge_ratio(shrunk, pos)) == pytest.approx(0.9, abs=0.005)
