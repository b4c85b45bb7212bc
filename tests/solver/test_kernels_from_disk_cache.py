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

ROOT = Path(__file__).resolve().parents[2]

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
from selvedge.solver.collisions import geometry, hash_grid, mesh_kernels as mk
verts, tris = uv_ellipsoid_mesh(np.array([0.18, 0.12, 0.35]), 50, 26, np.array([0.0, 0.0, 1.0]))
rng = np.random.default_rng(7)
seg_a = np.column_stack([rng.uniform(-0.25, 0.25, 400), rng.uniform(-0.2, 0.2, 400), rng.uniform(0.6, 1.45, 400)])
seg_b = seg_a + rng.normal(0.0, 0.06, (400, 3))
pad = np.full(400, 0.1)
tlo, thi = np.empty((len(tris), 3)), np.empty((len(tris), 3))
mk.swept_triangle_boxes(verts, verts, tris, 0.004, tlo, thi)
center, rad = np.empty((len(tris), 3)), np.empty(len(tris))
geometry.triangle_spheres(verts, tris, center, rad)
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
# a frame without contacts: one Numba call (solver/fused.py), its kernels loaded like the others
free = Cloth(pos, faces, pin_weights=np.eye(1, len(pos), 0).ravel(), settings=SolverSettings(substeps=6,
             solve_mode=sys.argv[2]))
for f in range(4):
    free.step()
np.save(sys.argv[1], np.concatenate([cloth.positions.ravel(), lists[0][2], free.positions.ravel()]))
"""


def _cache_files(cache):
    return sorted(str(p.relative_to(cache)) for p in Path(cache).rglob("*") if p.is_file())


def test_a_second_process_loads_every_kernel_from_the_cache_and_gets_the_same_cloth(tmp_path, monkeypatch):
    """This process runs the broad-phase query with lists that overflow its first buffers, in one
    and two chunks, then drops a cloth (coloured mode) onto a moving mesh ball and a sphere with
    self-collision, compiling (or loading) and caching every kernel it needs; a second process
    with the same cache directory must load all of them (write nothing new), not crash (the
    crash of numba#8578 needed a cached function to start the parallel runtime: the query runs
    first there), and end bit-identical to this process.

    The cache is the session's own: a fresh one would make this test compile every kernel once
    more (about 4 minutes of CI on two cores) for the same check."""
    import runpy

    from selvedge.solver import _numba_setup as setup

    script = tmp_path / "drop.py"
    script.write_text(SCRIPT.format(devtools=str(ROOT / "devtools")))
    here = tmp_path / "positions_here.npy"
    monkeypatch.setattr(sys, "argv", [str(script), str(here), "colored"])
    runpy.run_path(str(script), run_name="__main__")
    cache = Path(setup.CACHE_DIR)
    before = _cache_files(cache)
    out = tmp_path / "positions_loaded.npy"
    env = dict(os.environ, SELVEDGE_CACHE_DIR=setup.user_cache_dir())
    env.pop("NUMBA_CACHE_DIR", None)
    proc = subprocess.run(
        [sys.executable, str(script), str(out), "colored"], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, f"the second process failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    assert len(before) > 20  # the collision and solver kernels were cached
    assert _cache_files(cache) == before  # nothing recompiled in the second process
    mine, loaded = np.load(here), np.load(out)
    assert np.array_equal(mine, loaded)
    cloth = loaded[: 16 * 16 * 3].reshape(-1, 3)
    assert np.isfinite(cloth).all() and cloth[:, 2].min() < 0.3  # it fell onto the ball
    assert loaded.size > cloth.size + 8 * 400  # the query's lists overflowed their first buffers


def test_each_version_of_the_sources_gets_its_own_cache_folder(tmp_path):
    """Numba invalidates a cached function only when its own file changes, so a kernel calling a
    changed function of another module would load old code: the cache folder is keyed by a hash
    of every solver source file, and folders of other versions unused for two weeks are pruned."""
    import shutil
    import time

    from selvedge.solver import _numba_setup as setup

    assert os.path.basename(setup.CACHE_DIR) == setup.source_fingerprint()
    copy = tmp_path / "solver"
    shutil.copytree(Path(setup.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = setup.source_fingerprint(str(copy))
    assert before == setup.source_fingerprint()  # the same sources, wherever they are
    nested = copy / "collisions" / "geometry.py"
    original = nested.read_bytes()
    nested.write_bytes(original + b"\n# changed\n")  # a module another one calls
    assert setup.source_fingerprint(str(copy)) != before
    nested.write_bytes(original)
    assert setup.source_fingerprint(str(copy)) == before

    parent = tmp_path / "cache"
    keep, recent, stale = parent / "current", parent / "other_recent", parent / "other_stale"
    for folder in (keep, recent, stale):
        folder.mkdir(parents=True)
        (folder / "entry.nbi").write_bytes(b"x")
    old = time.time() - (setup.STALE_CACHE_DAYS + 1) * 86400
    os.utime(stale, (old, old))
    os.utime(keep, (old, old))  # the folder in use is never pruned, whatever its age
    setup._prune_stale(str(parent), str(keep))
    assert keep.exists() and recent.exists() and not stale.exists()
