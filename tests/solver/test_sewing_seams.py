"""Sewing: seams close on the schedule they are given, under Blender's Max Sewing Force at the
rate Newton's law gives, and bend across once closed like the unbroken cloth.

References: the closing ramp L(t) = L0 (1 - t / T) (stiff seams follow it); two free rigid
panels pulled together by n pairs at the force cap F each close their gap g0 as
g(t) = g0 - (n F / M) t^2 (M one panel's mass); a sewn strip's droop against the same strip cut
from one piece.
"""

import numpy as np
import pytest

from selvedge.solver import Cloth, ClothInputError, ClothOptions, Material, SolverSettings, grid_mesh
from selvedge.solver.sewing import Sewing, loose_edges


def two_panels(nx=3, ny=3, width=0.1, height=0.1, gap=0.05):
    """Panel A at x in [0, width], panel B at x in [width + gap, 2 width + gap], the facing columns paired."""
    pa, fa, _ = grid_mesh(nx, ny, width, height)
    pb = pa + [width + gap, 0.0, 0.0]
    pos = np.concatenate([pa, pb])
    faces = np.concatenate([fa, fa + nx * ny])
    idx = np.arange(nx * ny).reshape(ny, nx)
    pairs = np.stack([idx[:, -1], idx[:, 0] + nx * ny], axis=1)
    return pos, faces, pairs, nx * ny


def _cloth(pos, faces, sewing, gravity=(0.0, 0.0, 0.0), pins=None, material=None, substeps=10, mode="serial"):
    return Cloth(
        pos,
        faces,
        material=material or Material(air_drag_per_s=0.0),
        settings=SolverSettings(substeps=substeps, gravity_m_s2=gravity, solve_mode=mode, threads=2),
        sewing=sewing,
        pin_weights=pins,
        options=ClothOptions(tethers=False),
    )


def test_stiff_seam_follows_the_closing_ramp_then_stays_shut():
    """Thread only pulls: the gap never lags the ramp (a stiff seam), the panels may coast ahead of it;
    shut (under 1 mm) from T on."""
    pos, faces, pairs, _ = two_panels()
    closing = 0.5
    cloth = _cloth(pos, faces, Sewing(pairs, closing_time_s=closing, sewing_compliance=1e-8))
    g0 = 0.05
    for frame in range(1, 37):
        cloth.step()
        t = frame / 24
        gap = cloth.sewing.gaps(cloth.x).max()
        assert gap <= g0 * max(0.0, 1 - t / closing) + 0.01 * g0, frame
        if frame == 1:
            assert gap > g0 * (1 - t / closing) - 0.03 * g0
        if t >= closing:
            assert gap < 1e-3, frame
    assert cloth.sewing.closed.all()
    assert cloth.sewing.gaps(cloth.x).max() < 1e-4


@pytest.mark.parametrize("mode", ["serial", "colored"])
def test_max_sewing_force_sets_the_closing_time(mode):
    force, g0 = 2e-4, 0.05
    pos, faces, pairs, half = two_panels(gap=g0)
    cloth = _cloth(pos, faces, Sewing(pairs, closing_time_s=0.0, sewing_force_max=force), mode=mode)
    mass_a = cloth.mass[:half].sum()
    n = pairs.shape[0]
    closing_time = np.sqrt(g0 * mass_a / (n * force))
    for frame in range(1, 25):
        cloth.step()
        t = frame / 24
        if t < 0.9 * closing_time:
            gap = cloth.sewing.gaps(cloth.x).mean()
            assert gap == pytest.approx(g0 - n * force / mass_a * t**2, abs=0.02 * g0), frame
    assert cloth.sewing.closed.all() and cloth.sewing.gaps(cloth.x).max() < 1e-4


BEND = 2000.0  # 1/(N m): the whole strip droops ~2.5 cm, a free hinge lets it hang (~10 cm)


def _strip_tip_height(sewn: bool, seam_bending: bool = True):
    nx, ny, width = 5, 3, 0.1
    material = Material(density_kg_m2=0.2, bend_compliance=BEND, air_drag_per_s=1.0)
    if sewn:
        pos, faces, pairs, half = two_panels(nx, ny, width, 0.04, gap=0.02)
        sewing = Sewing(pairs, closing_time_s=0.1, seam_bending=seam_bending)
        tip = half + np.arange(ny) * nx + nx - 1
    else:
        pos, faces, _ = grid_mesh(2 * nx - 1, ny, 2 * width, 0.04)
        sewing = None
        tip = np.arange(ny) * (2 * nx - 1) + 2 * nx - 2
    pins = np.zeros(len(pos))
    row = nx if sewn else 2 * nx - 1
    pins[(np.arange(ny) * row)[:, None] + np.arange(nx)] = 1.0  # the first panel (or half) held in place
    cloth = _cloth(pos, faces, sewing, gravity=(0.0, 0.0, -9.81), pins=pins, material=material, substeps=20)
    for _ in range(72):
        cloth.step()
    return cloth.positions[tip, 2].mean()


def test_bending_is_continuous_across_a_closed_seam():
    whole = _strip_tip_height(sewn=False)
    sewn = _strip_tip_height(sewn=True)
    hinged = _strip_tip_height(sewn=True, seam_bending=False)
    assert hinged < whole - 0.05  # without seam bending the second panel hangs from the seam
    assert abs(sewn - whole) < 0.2 * abs(hinged - whole)


def test_loose_edges_are_blenders_sewing_edges():
    edges = np.array([[0, 1], [1, 2], [0, 2], [2, 3], [1, 4]])
    assert loose_edges(edges, [[0, 1, 2]]).tolist() == [[2, 3], [1, 4]]


def test_bad_sewing_edges_are_refused():
    pos, faces, pairs, _ = two_panels()
    with pytest.raises(ClothInputError, match="sewing edge 1 connects vertex 4 to itself"):
        _cloth(pos, faces, Sewing(np.array([[2, 9], [4, 4]])))
    with pytest.raises(ClothInputError, match="outside the mesh"):
        _cloth(pos, faces, Sewing(np.array([[2, 99]])))
    with pytest.raises(ClothInputError, match="is an edge of a face"):
        _cloth(pos, faces, Sewing(np.array([[0, 1]])))
