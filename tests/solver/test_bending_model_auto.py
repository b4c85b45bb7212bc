"""``bending_model="auto"``: isometric bending for a flat rest shape, dihedral for a curved one.

The isometric model (Bergou 2006) is a linear constraint about a third the cost of a dihedral
projection, and its stencil is scaled to the dihedral model's discrete-shells energy for small
folds; it assumes a flat rest shape. These tests check the choice against the rest geometry and
that the choice does not change the physics of a flat sheet beyond the models' known difference
at large folds.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from selvedge.solver import Cloth, ClothOptions, SolverSettings, grid_mesh, preset
from selvedge.solver.constraints import AUTO_FLAT_REST_ANGLE_RAD


def _half_cylinder(n=12, radius=0.3):
    pos, faces, uv = grid_mesh(n, n, math.pi * radius, 0.6)
    angle = pos[:, 0] / radius
    curved = np.stack([radius * np.sin(angle), pos[:, 1], radius * (1.0 - np.cos(angle))], axis=1)
    return pos, curved, faces, uv


def _max_fold(pos, triangles):
    """Largest angle between the normals of two triangles sharing an edge."""
    normals = np.cross(pos[triangles[:, 1]] - pos[triangles[:, 0]], pos[triangles[:, 2]] - pos[triangles[:, 0]])
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    by_edge = {}
    for t, tri in enumerate(triangles):
        for a in range(3):
            by_edge.setdefault(tuple(sorted((tri[a], tri[(a + 1) % 3]))), []).append(t)
    folds = [
        math.acos(min(1.0, float(normals[a] @ normals[b]))) for a, b in (ts for ts in by_edge.values() if len(ts) == 2)
    ]
    return max(folds)


def test_auto_takes_isometric_for_flat_rest_shapes_and_dihedral_for_curved_ones():
    flat, curved, faces, uv = _half_cylinder()
    assert Cloth(flat, faces, uvs=uv).bending_model == "isometric"
    assert Cloth(curved, faces, uvs=uv).bending_model == "dihedral"
    # A curved mesh whose rest shape is its flat 2D pattern (UVs in metres) is flat at rest.
    pattern = Cloth(curved, faces, uvs=flat[:, :2], options=ClothOptions(rest_length_source="pattern"))
    assert pattern.bending_model == "isometric"
    # The threshold: one vertex lifted until its hinges fold just under / just over 0.5 degrees,
    # the fold measured here from the triangle normals.
    pos, faces, uv = grid_mesh(9, 9, 0.8, 0.8)
    for factor, expected in ((0.8, "isometric"), (1.3, "dihedral")):
        target = factor * AUTO_FLAT_REST_ANGLE_RAD
        lo, hi = 0.0, 0.01
        for _ in range(60):
            bumped = pos.copy()
            bumped[40, 2] = lift = 0.5 * (lo + hi)
            lo, hi = (lift, hi) if _max_fold(bumped, faces) < target else (lo, lift)
        assert _max_fold(bumped, faces) == pytest.approx(target, rel=1e-6)
        assert Cloth(bumped, faces, uvs=uv).bending_model == expected
    # An explicit model is kept whatever the shape.
    _, curved, faces, _ = _half_cylinder()
    assert Cloth(curved, faces, options=ClothOptions(bending_model="isometric")).bending_model == "isometric"


@pytest.mark.parametrize("material", ["denim", "leather"])
def test_auto_on_a_flat_sheet_springs_back_like_dihedral_bending(material):
    """A free 20 cm sheet (no gravity, no pins) starts with a 1 cm cosine bump over its flat rest
    shape; bending alone makes it spring back and ring. With auto (isometric) bending the
    out-of-plane extent follows the dihedral run frame by frame (measured within 0.1 mm), while
    the same sheet without bending does not ring back at all."""
    n, length = 20, 0.2
    pos, faces, uv = grid_mesh(n, n, length, length, origin=(-length / 2, -length / 2, 0.0))
    bumped = pos.copy()
    bumped[:, 2] = 0.01 * np.cos(np.pi * pos[:, 0] / length) * np.cos(np.pi * pos[:, 1] / length)
    extent = {}
    for name, options in (
        ("auto", ClothOptions()),
        ("dihedral", ClothOptions(bending_model="dihedral")),
        ("none", ClothOptions(bending=False)),
    ):
        cloth = Cloth(
            pos,
            faces,
            uvs=uv,
            material=dataclasses.replace(preset(material), air_drag_per_s=0.0),
            options=options,
            settings=SolverSettings(substeps=20, gravity_m_s2=(0.0, 0.0, 0.0)),
        )
        if name == "auto":
            assert cloth.bending_model == "isometric"
        cloth.set_positions(bumped)
        z = []
        for _ in range(24):
            cloth.step()
            z.append(np.ptp(cloth.positions[:, 2]))
        extent[name] = np.array(z)
    assert extent["dihedral"].min() < 0.5 * 0.0124  # the bump really springs back through flat
    np.testing.assert_allclose(extent["auto"], extent["dihedral"], atol=5e-4)
    assert np.abs(extent["none"] - extent["dihedral"]).max() > 4e-3  # and bending is what does it
