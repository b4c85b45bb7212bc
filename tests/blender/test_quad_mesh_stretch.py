"""A quad mesh baked from Blender is held by the stretch limit as well as the solver holds the same
quads handed to it as polygons.

Blender hands the solver its loop triangles, every quad of a grid split the same way; coarsened over
those edges the stretch limit's levels come out lopsided (3.0 % P95; with every quad's second
diagonal added, as bakes did before, 1.6 %). The solver builds its levels on the quads' diagonals
chosen to alternate, and keeps the hem strung between the two pins off them where it can
(``solver/level_graph.py``). Measured here independently of the
solver's own diagnostics: edge strain of Blender's evaluated mesh played back through the Mesh
Cache modifier, over Blender's own mesh edges (the quads' sides), frame by frame, on the scene of
``bench/bench_vs_blender_cloth.py`` (a 1 m 64 x 64 cotton grid falling from two pinned corners,
where Blender's Cloth measures a worst-frame P95 of 2.57 %).
"""

import blender_scenes
import bpy
import numpy as np
import pytest
from blender_scenes import evaluated_co, fresh_blender, mesh_co

blender = pytest.fixture(autouse=True, name="blender")(fresh_blender)
cache_dir = pytest.fixture(name="cache_dir")(blender_scenes.cache_dir)

FRAMES = 60


def test_quad_grid_bake_stays_within_one_and_a_half_percent_p95_strain(cache_dir):
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, FRAMES
    scene.frame_set(1)
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=63, y_subdivisions=63, size=1.0, calc_uvs=True, location=(0, 0, 1))
    obj = bpy.context.object
    pinned = blender_scenes.pin_two_corners(obj, preset="cotton")
    assert len(obj.data.polygons) == 63 * 63 and all(p.loop_total == 4 for p in obj.data.polygons)
    rest = mesh_co(obj.data).astype(np.float64)
    edges = np.array([tuple(e.vertices) for e in obj.data.edges], dtype=np.int64)
    rest_length = np.linalg.norm(rest[edges[:, 1]] - rest[edges[:, 0]], axis=1)

    assert bpy.ops.selvedge.bake_cache() == {"FINISHED"}

    p95 = []
    for frame in range(2, FRAMES + 1):
        co = evaluated_co(obj, frame).astype(np.float64)
        np.testing.assert_allclose(co[pinned], rest[pinned], atol=1e-6)  # the pins hold
        strain = np.linalg.norm(co[edges[:, 1]] - co[edges[:, 0]], axis=1) / rest_length - 1.0
        p95.append(float(np.percentile(strain, 95)))
    # measured 1.15 % at the worst frame; before, with both diagonals in the level graph 1.94 %, with
    # the diagonals alternating but the pinned edge's hem on the levels 1.68 %
    assert max(p95) <= 0.0125, max(p95)
    assert min(p95) > 0.0  # the sheet hangs: its weight stretches it
