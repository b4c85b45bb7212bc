"""The auto solve mode, ``SolverSettings``' default: the coloured schedule in blocks fixed by the
mesh (up to ``AUTO_BLOCKS``) for a cloth stepped on its own, serial for a small cloth and in a
``CollisionWorld``. What a bake must keep: the same bits whatever the machine's thread count, and
the serial mode's result within millimetres."""

import numba
import numpy as np
import pytest

from selvedge.solver import Cloth, SolverSettings, grid_mesh
from selvedge.solver.collisions import Colliders, Sphere
from selvedge.solver.collisions.world import ClothCollision, CollisionWorld
from selvedge.solver.settings import AUTO_BLOCK_MIN_VERTICES, AUTO_BLOCKS


def _sheet(n, settings=None):
    """A 1 m sheet of n x n vertices hanging from the two corners of one edge."""
    pos, faces, uv = grid_mesh(n, n, 1.0, 1.0, origin=(-0.5, -0.5, 1.0))
    pins = np.zeros(len(pos))
    pins[[n * (n - 1), n * n - 1]] = 1.0
    return Cloth(pos, faces, uvs=uv, pin_weights=pins, settings=settings or SolverSettings())


def test_auto_blocks_follow_the_mesh_and_a_world_runs_serial():
    assert SolverSettings().solve_mode == "auto"
    assert (AUTO_BLOCKS, AUTO_BLOCK_MIN_VERTICES) == (4, 1024)
    for n, mode, blocks in ((64, "colored", 4), (48, "colored", 2), (32, "serial", 1), (100, "colored", 4)):
        cloth = _sheet(n)
        assert (cloth.solve_mode, cloth.auto_blocks) == (mode, blocks), n
        if mode == "colored":
            assert cloth.parallel_blocks == blocks
    # an explicit block count wins; the coloured mode keeps one block per thread
    assert _sheet(64, SolverSettings(threads=3)).parallel_blocks == 3
    assert _sheet(64, SolverSettings(solve_mode="colored")).parallel_blocks == numba.get_num_threads()
    # cloths that collide with each other (or themselves) are stepped serially
    a, b = _sheet(64), _sheet(64)
    CollisionWorld([a, b], [ClothCollision(), ClothCollision()])
    assert (a.solve_mode, b.solve_mode) == ("serial", "serial")
    # a contact handler keeps a frame on the per-phase path: coloured only where a set's pass is long
    # enough for a parallel region (64 x 64: ~0.3 ms a pass, its blocks would all run in turn)
    for n, mode in ((64, "serial"), (128, "colored")):
        pos, faces, uv = grid_mesh(n, n, 1.0, 1.0, origin=(-0.5, -0.5, 1.0))
        cloth = Cloth(pos, faces, uvs=uv, contact_handler=Colliders([Sphere(0.3, name="ball")], cloth_thickness=0.004))
        assert cloth.solve_mode == mode, n


def test_an_auto_bake_has_the_same_bits_on_one_thread_and_on_two():
    assert numba.get_num_threads() >= 2
    runs = []
    before = numba.get_num_threads()
    try:
        for threads in (1, 2, 1):
            numba.set_num_threads(threads)
            cloth = _sheet(64)
            for f in range(6):
                cloth.step(pin_targets=cloth.rest_positions + np.array([0.02 * np.sin(0.4 * f), 0.0, 0.01 * f]))
            assert cloth._fused is not None  # the one-region coloured frame ran
            runs.append(cloth.positions.copy())
    finally:
        numba.set_num_threads(before)
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[2])


def test_auto_stays_within_millimetres_of_serial_and_stretches_as_little():
    """The blocks change the Gauss-Seidel order at their cuts only: after 24 frames of a hanging,
    swinging 64 x 64 sheet the vertices are within 5 mm of the serial run's and the worst-frame P95
    edge strain within a tenth of a percentage point."""
    out = {}
    for mode in ("serial", "auto"):
        cloth = _sheet(64, SolverSettings(solve_mode=mode))
        worst = 0.0
        for _ in range(24):
            cloth.step()
            worst = max(worst, float(np.percentile(cloth.edge_strain(), 95)))
        out[mode] = (cloth.positions.copy(), worst)
    gap = np.linalg.norm(out["auto"][0] - out["serial"][0], axis=1).max()
    assert gap < 5e-3
    assert out["auto"][1] == pytest.approx(out["serial"][1], abs=1e-3)


def test_the_per_phase_coloured_path_gives_the_same_bits_in_or_out_of_parallel_regions(monkeypatch):
    """A cloth with a contact handler takes the per-phase path; a phase below
    ``PARALLEL_PHASE_MIN_US`` runs its blocks one after the other instead of in a parallel region.
    Both must give the bits of the same block schedule: every phase in a parallel region (0) against
    every phase on the calling thread (1e12)."""
    import selvedge.solver.cloth as cloth_module

    def run(parallel_min_us):
        monkeypatch.setattr(cloth_module, "PARALLEL_PHASE_MIN_US", parallel_min_us)
        pos, faces, uv = grid_mesh(64, 64, 1.0, 1.0, origin=(-0.5, -0.5, 1.0))
        ball = Colliders([Sphere(0.3, name="ball", position=(0.0, 0.0, 0.6))], cloth_thickness=0.004)
        cloth = Cloth(
            pos, faces, uvs=uv, contact_handler=ball, settings=SolverSettings(solve_mode="colored", threads=4)
        )
        for _ in range(8):
            cloth.step()
        assert cloth.solve_mode == "colored" and cloth._fused is None
        return cloth.positions.copy()

    parallel, sequential = run(0.0), run(1e12)
    assert parallel[:, 2].min() < 0.85  # it fell past the ball's top (0.9 m) and drapes over it
    assert np.array_equal(parallel, sequential)
