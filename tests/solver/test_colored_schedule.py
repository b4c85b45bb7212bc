"""The coloured (block-parallel) schedule and the per-substep coefficients, measured.

The coloured mode cuts the cloth into blocks that share no writable vertex, sweeps each block in
the serial order on its own thread, then runs the constraints that cross a cut. These tests check
that schedule against an independent reading of the mesh (vertex sets per block), its
reproducibility, and that it converges like the serial sweep it is built from.
"""

from __future__ import annotations

import numpy as np
import pytest

from selvedge.solver import Cloth, SolverSettings, grid_mesh
from selvedge.solver.coloring import partition_vertices


def _hanging_sheet(n, **settings):
    pos, faces, uv = grid_mesh(n, n, 1.0, 1.0, origin=(0.0, 0.0, 1.0))
    pins = np.zeros(len(pos))
    pins[[(n - 1) * n, n * n - 1]] = 1.0
    return Cloth(pos, faces, uvs=uv, pin_weights=pins, settings=SolverSettings(**settings)), pos


@pytest.mark.parametrize("blocks", [2, 3])
def test_blocks_share_no_writable_vertex_and_keep_the_serial_sweep_order(blocks):
    cloth, _ = _hanging_sheet(24, solve_mode="colored", threads=blocks)
    writable = cloth.inv_mass > 0.0
    part = partition_vertices(cloth.rest_positions, writable, blocks, cloth.topology.edges)
    cloth.constraint_sets  # builds the schedule
    assert np.array_equal(part, cloth._colored[4])  # the partition the cloth runs
    counts = np.bincount(part[writable], minlength=blocks)
    assert counts.max() - counts.min() <= 1  # balanced by the vertices that carry work
    crossing_total = 0
    for serial_set, block_set in zip(cloth._sets_serial, cloth.constraint_sets):
        rows = block_set.vertices.reshape(block_set.count, -1)
        serial_rows = serial_set.vertices.reshape(serial_set.count, -1)
        # Same constraints (as rows with their rest data), each exactly once.
        key = [tuple(r) for r in serial_rows]
        position = {k: i for i, k in enumerate(key)}
        assert len(position) == serial_set.count
        where = np.array([position[tuple(r)] for r in rows])
        assert np.array_equal(np.sort(where), np.arange(serial_set.count))
        offsets = block_set.block_offsets
        assert offsets.size == blocks + 2 and offsets[0] == 0 and offsets[-1] == block_set.count
        touched = []
        for b in range(blocks):
            seg = slice(offsets[b], offsets[b + 1])
            seg_rows = rows[seg]
            w = writable[seg_rows]
            # Every writable vertex of block b lies in part b ...
            assert np.all(part[seg_rows][w] == b)
            touched.append(set(seg_rows[w].tolist()))
            # ... and the block keeps the serial sweep order.
            assert np.all(np.diff(where[seg]) > 0)
        for a in range(blocks):
            for b in range(a + 1, blocks):
                assert not touched[a] & touched[b]
        crossing = rows[offsets[blocks] :]
        for r in crossing:  # the last segment holds only constraints that really cross a cut
            assert len(set(part[r[writable[r]]].tolist())) >= 2
        crossing_total += crossing.shape[0]
    # Straight cuts through a 24 x 24 sheet (at most 24 vertices long): the crossing constraints are a
    # few per cut vertex (stretch, shear and bending around it; measured 5.6 to 6.7).
    assert 0 < crossing_total < 8 * 24 * (blocks - 1)


def _renumbered_grid(nx, ny, numbering):
    """A flat nx x ny grid (row-major from grid_mesh) with its vertices renumbered; returns
    (positions, edges as vertex pairs)."""
    pos, faces, _ = grid_mesh(nx, ny, 1.0, ny / nx)
    perm = {
        "row-major": np.arange(nx * ny),
        "column-major": np.arange(nx * ny).reshape(ny, nx).T.ravel(),
        "shuffled": np.random.default_rng(3).permutation(nx * ny),
    }[numbering]
    new_index = np.argsort(perm)
    tri = new_index[np.asarray(faces)]
    edges = np.unique(np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]]), axis=1), axis=0)
    return pos[perm], edges


@pytest.mark.parametrize(
    "nx, ny, numbering",
    [(32, 32, "row-major"), (32, 32, "column-major"), (64, 32, "row-major"), (32, 64, "column-major")],
)
def test_two_parts_are_runs_of_memory_where_a_straight_cut_allows(nx, ny, numbering):
    """Two threads writing neighbouring vertices share cache lines, so the cut follows memory:
    a grid numbered row by row is cut between two rows whatever its longer side (a cut across
    the rows would share a line on every row; measured 2.9-4.6 against 2.3-2.6 ms a frame)."""
    pos, edges = _renumbered_grid(nx, ny, numbering)
    part = partition_vertices(pos, np.ones(len(pos), dtype=bool), 2, edges)
    assert np.bincount(part).tolist() == [nx * ny // 2] * 2
    assert np.count_nonzero(np.diff(part)) == 1  # two runs of consecutive indices
    # A straight cut between the rows (columns) of a memory-ordered grid of triangles crosses
    # each of the run's edges and the diagonals between them: 2 x (run length) - 1 edges.
    run = nx if numbering == "row-major" else ny
    assert np.count_nonzero(part[edges[:, 0]] != part[edges[:, 1]]) == 2 * run - 1


def test_a_shuffled_mesh_still_gets_a_short_straight_cut():
    """With no order in memory every plane shares lines alike, so the shortest cut wins (a cut in
    index order would cross half the edges and run them all on one thread)."""
    pos, edges = _renumbered_grid(32, 32, "shuffled")
    part = partition_vertices(pos, np.ones(len(pos), dtype=bool), 2, edges)
    assert np.bincount(part).tolist() == [512, 512]
    assert np.count_nonzero(part[edges[:, 0]] != part[edges[:, 1]]) == 63
    assert np.count_nonzero(np.diff(part)) > 300  # memory order is lost, as built


def test_colored_mode_is_bit_identical_run_to_run():
    runs = []
    for _ in range(2):
        cloth, pos = _hanging_sheet(24, solve_mode="colored", threads=2, substeps=8)
        for f in range(30):
            cloth.step(pos + np.array([0.1 * np.sin(f / 6.0), 0.0, 0.0]))
        runs.append(cloth.positions.copy())
    assert np.array_equal(runs[0], runs[1])
    assert np.abs(runs[0] - pos).max() > 0.05  # it moved: equality is not trivial


def test_colored_mode_converges_like_the_serial_sweep():
    """Blocks keep the pin-outward serial order, so the strain of a hanging sheet at a one-iteration
    budget matches serial (a per-constraint colouring loses the order: measured 2.0 vs 1.27 max
    strain on 128 x 128 at the benchmark budget)."""
    strains = {}
    for mode in ("serial", "colored"):
        cloth, pos = _hanging_sheet(48, solve_mode=mode, threads=2, substeps=10)
        worst = 0.0
        for _ in range(36):
            cloth.step(pos)
            worst = max(worst, float(cloth.edge_strain().max()))
        strains[mode] = worst
    assert strains["colored"] <= 1.1 * strains["serial"], strains
    assert strains["serial"] > 0.01  # the budget leaves visible strain to compare


@pytest.mark.parametrize("blocks", [2, 3])
def test_block_owned_prediction_and_velocity_match_the_serial_kernels(blocks):
    """The coloured mode predicts and updates velocities per block (each thread its own part's
    vertices): every vertex exactly once, with the serial arithmetic, so the same bits (a vertex in
    two parts would move twice, one in none not at all). Checked on a random state with drag,
    wind, a learned acceleration and kinematic targets."""
    from selvedge.solver import kernels as kn

    cloth, _ = _hanging_sheet(17, solve_mode="colored", threads=blocks)
    order, offsets = cloth._vertex_blocks()
    assert np.array_equal(np.sort(order), np.arange(cloth.x.shape[0]))
    rng = np.random.default_rng(5)
    n = cloth.x.shape[0]
    x, v, extra = rng.normal(size=(n, 3)), rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    inv_mass = np.where(rng.random(n) < 0.1, 0.0, rng.random(n) + 0.5)
    kin = np.flatnonzero(inv_mass == 0.0)
    k_start, k_end = rng.normal(size=(kin.size, 3)), rng.normal(size=(kin.size, 3))
    args = (np.array([0.0, 0.0, -9.81]), extra, 0.7, np.array([1.0, 0.5, 0.0]), kin, k_start, k_end, 0.25, 1e-3)
    outs = []
    for blocked in (False, True):
        xs, vs, x0 = x.copy(), v.copy(), np.zeros((n, 3))
        if blocked:
            kn.predict_positions_blocks(xs, vs, inv_mass, *args, x0, order, offsets)
        else:
            kn.predict_positions(xs, vs, inv_mass, *args, x0)
        xs += 1e-4 * np.sin(np.arange(3 * n).reshape(n, 3))  # "constraint corrections"
        if blocked:
            kn.update_velocities_blocks(xs, x0, 1e-3, vs, order, offsets)
        else:
            kn.update_velocities(xs, x0, 1e-3, vs)
        outs.append((xs, vs, x0))
    for a, b in zip(*outs):
        assert np.array_equal(a, b)
    assert np.abs(outs[0][0] - x).max() > 1e-4  # the prediction moved the free vertices


def test_step_coefficients_follow_the_substep_length():
    """alpha~, gamma and 1/denominator are kept per substep length: a cloth stepped at 24 fps and then
    at 48 fps must match a fresh cloth started from the same state at 48 fps, bit for bit."""
    a, pos = _hanging_sheet(12, substeps=6)
    b, _ = _hanging_sheet(12, substeps=6)
    a.step(pos)
    b.set_positions(a.positions, a.velocities)
    a.step(pos, frame_dt=1 / 48)
    b.step(pos, frame_dt=1 / 48)
    assert np.array_equal(a.positions, b.positions)
    c, _ = _hanging_sheet(12, substeps=6)  # and the 48 fps step differs from a 24 fps one
    c.set_positions(b.positions, b.velocities)
    c.step(pos)
    assert np.abs(c.positions - a.positions).max() > 1e-4


def test_colored_mode_keeps_the_thread_count_the_process_chose():
    """Without ``settings.threads`` the blocks follow Numba's current thread count (what ``cli.py
    --threads`` sets for a farm worker) and stepping leaves that count alone; with it, the blocks
    and the threads follow the setting."""
    import numba

    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        cloth, pos = _hanging_sheet(12, solve_mode="colored", substeps=4)
        cloth.step(pos)
        assert numba.get_num_threads() == 1
        assert cloth.parallel_blocks == 1
        assert np.diff(cloth.constraint_sets[0].block_offsets).size == 2  # one block and the (empty) cut set
        pinned, _ = _hanging_sheet(12, solve_mode="colored", substeps=4, threads=2)
        pinned.step(pos)
        assert pinned.parallel_blocks == 2
        assert numba.get_num_threads() == min(2, numba.config.NUMBA_NUM_THREADS)
    finally:
        numba.set_num_threads(before)
