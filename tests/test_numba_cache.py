"""Kernels loaded from Numba's on-disk cache behave as freshly compiled ones.

A second process loads every kernel from the cache (a farm bake, a Blender session after the
first): Numba has had bugs that only show there (a cached serial function calling a parallel
one crashed once loaded, numba/numba#8578), which no test in one process can see.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, {devtools!r})
from selvedge_import import import_selvedge
import_selvedge()
from selvedge.solver import Cloth, SolverSettings, grid_mesh
from selvedge.solver.collisions import Colliders, SelfCollision, Sphere, TriangleMesh
from selvedge.solver.mesh import uv_ellipsoid_mesh

# first (before any other parallel kernel has run in this process): the broad-phase query on its own,
# with lists that overflow the first buffers (grown, resumed)
from selvedge.solver.collisions import hash_grid, mesh_kernels as mk
verts, tris = uv_ellipsoid_mesh(np.array([0.18, 0.12, 0.35]), 50, 26, np.array([0.0, 0.0, 1.0]))
rng = np.random.default_rng(7)
seg_a = np.column_stack([rng.uniform(-0.25, 0.25, 400), rng.uniform(-0.2, 0.2, 400), rng.uniform(0.6, 1.45, 400)])
seg_b = seg_a + rng.normal(0.0, 0.06, (400, 3))
pad = np.full(400, 0.1)
tlo, thi = np.empty((len(tris), 3)), np.empty((len(tris), 3))
mk.swept_triangle_boxes(verts, verts, tris, 0.004, tlo, thi)
center, rad = np.empty((len(tris), 3)), np.empty(len(tris))
mk.triangle_spheres(verts, tris, center, rad)
bucket, items = hash_grid.hash_boxes(tlo, thi, 0.02, 4096, 32)
lists = [mk.mesh_query_candidates(seg_a, seg_b, pad, 0.004, np.ones(400, dtype=np.bool_), tlo, thi, 0.02, 4096,
                                  bucket, items, 32, tris, verts, center, rad, chunks) for chunks in (1, 2)]
assert all(np.array_equal(a, b) for a, b in zip(*lists))

body_v, body_t = uv_ellipsoid_mesh(0.25, 24, 12, np.zeros(3))
pos, faces, _ = grid_mesh(16, 16, 0.8, 0.8, origin=(-0.4, -0.4, 0.4))
contacts = Colliders([TriangleMesh(body_v, body_t, name="ball"), Sphere(0.1, position=(0.3, 0.0, -0.2))],
                     cloth_thickness=0.004, self_collision=SelfCollision(), cloth_triangles=faces)
cloth = Cloth(pos, faces, settings=SolverSettings(substeps=8, solve_mode=sys.argv[2]), contact_handler=contacts)
for f in range(16):
    contacts.set_mesh_positions("ball", body_v + [0.02 * min(f + 1, 8), 0.0, 0.0])
    cloth.step()
np.save(sys.argv[1], np.concatenate([cloth.positions.ravel(), lists[0][2]]))
"""


def _cache_files(cache):
    return sorted(str(p.relative_to(cache)) for p in Path(cache).rglob("*") if p.is_file())


def test_a_second_process_loads_every_kernel_from_the_cache_and_gets_the_same_cloth(tmp_path):
    """Two processes with an empty cache directory run the broad-phase query with lists that
    overflow its first buffers, in one and two chunks (first: the crash of numba#8578 needed a
    cached function to start the parallel runtime), then drop a cloth (coloured mode) onto a moving
    mesh ball and a sphere with self-collision: the first compiles and writes the cache, the second
    must write nothing new (everything loaded), not crash, and end with bit-identical results."""
    cache = tmp_path / "numba-cache"
    script = tmp_path / "drop.py"
    script.write_text(SCRIPT.format(devtools=str(ROOT / "devtools")))
    env = dict(os.environ, SELVEDGE_CACHE_DIR=str(cache))
    env.pop("NUMBA_CACHE_DIR", None)
    results, listings = [], []
    for run in range(2):
        out = tmp_path / f"positions{run}.npy"
        proc = subprocess.run([sys.executable, str(script), str(out), "colored"], env=env, capture_output=True,
                              text=True, timeout=900)
        assert proc.returncode == 0, f"run {run} failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        results.append(np.load(out))
        listings.append(_cache_files(cache))
    assert len(listings[0]) > 20  # the collision and solver kernels were cached
    assert listings[1] == listings[0]  # nothing recompiled in the second process
    assert np.array_equal(results[0], results[1])
    cloth = results[1][:16 * 16 * 3].reshape(-1, 3)
    assert np.isfinite(cloth).all() and cloth[:, 2].min() < 0.3  # it fell onto the ball
    assert results[1].size > cloth.size + 8 * 400  # the query's lists overflowed their first buffers
