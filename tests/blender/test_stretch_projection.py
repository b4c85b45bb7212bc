"""Stretch Projection (``obj.selvedge.stretch_projection_steps``): the fine level's fast projection
(solver/fine_projection.py) as a bake sees it.

A cotton sheet lands on a ball; at the default solve its threads stretch while it wraps (the
short-wavelength stretch of an impact, which the stretch limit's coarse levels do not reach),
and the projection holds them near cotton's limit. Measured independently of the solver's own
diagnostics: edge strain of Blender's evaluated mesh played back through the Mesh Cache
modifier, over Blender's own mesh edges, frame by frame; the sphere is the collider.
"""

import blender_scenes
import bpy
import numpy as np
import pytest
from blender_scenes import evaluated_co, fresh_blender, mesh_co, world_matrix

blender = pytest.fixture(autouse=True, name="blender")(fresh_blender)
cache_dir = pytest.fixture(name="cache_dir")(blender_scenes.cache_dir)

FRAMES = 20
RADIUS = 0.2


def _drop_on_ball():
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, FRAMES
    scene.frame_set(1)
    bpy.ops.mesh.primitive_uv_sphere_add(segments=32, ring_count=16, radius=RADIUS, location=(0.0, 0.0, 0.0))
    ball = bpy.context.object
    ball.selvedge.role = "COLLIDER"
    ball.selvedge.collider_proxy = "MESH"
    bpy.ops.mesh.primitive_grid_add(
        x_subdivisions=23, y_subdivisions=23, size=0.8, calc_uvs=True, location=(0.0, 0.0, RADIUS + 0.08)
    )
    sheet = bpy.context.object
    sheet.selvedge.role = "CLOTH"
    sheet.selvedge.material_preset = "cotton"
    return sheet


def _bake_strain(sheet, steps):
    """Worst-frame P95 edge strain of the played-back bake, and the closest approach to the ball's centre."""
    sheet.selvedge.stretch_projection_steps = steps
    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}
    rest = mesh_co(sheet.data).astype(np.float64)
    edges = np.array([tuple(e.vertices) for e in sheet.data.edges], dtype=np.int64)
    rest_length = np.linalg.norm(rest[edges[:, 1]] - rest[edges[:, 0]], axis=1)
    p95, closest = [], np.inf
    for frame in range(2, FRAMES + 1):
        co = evaluated_co(sheet, frame).astype(np.float64)
        strain = np.linalg.norm(co[edges[:, 1]] - co[edges[:, 0]], axis=1) / rest_length - 1.0
        p95.append(float(np.percentile(strain, 95)))
        m = world_matrix(sheet, frame)
        closest = min(closest, float(np.linalg.norm(co @ m[:3, :3].T + m[:3, 3], axis=1).min()))
    return max(p95), closest


def test_stretch_projection_holds_a_landing_sheet_near_its_limit(cache_dir):
    sheet = _drop_on_ball()
    plain, plain_closest = _bake_strain(sheet, 0)
    projected, closest = _bake_strain(sheet, 2)
    # measured: 9.4 % at the default solve while the sheet wraps the ball, 1.7 % with 2 steps
    print(
        f"worst-frame P95: {plain:.4f} plain, {projected:.4f} projected; closest {plain_closest:.4f} / {closest:.4f} m"
    )
    assert plain > 0.05, plain
    assert projected < 0.4 * plain and projected < 0.03, (projected, plain)
    # the body contacts still hold: no vertex inside the ball (the collider keeps the cloth outside)
    assert min(closest, plain_closest) > RADIUS, (closest, plain_closest)
