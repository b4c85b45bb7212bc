"""The coloured frame in one parallel region (solver/fused.py) against the per-phase coloured path.

Both run the same kernel bodies in the same order, so they must agree to the bit, whatever the
team of threads that turns up; and the team's atomics must count every claim exactly once.
"""

from __future__ import annotations

import functools

import numba
import numpy as np
import pytest
from numba import njit, prange

import selvedge.solver.cloth as cloth_module
from selvedge.solver import Cloth, ClothOptions, SolverSettings, grid_mesh
from selvedge.solver._team import FUSED_SUPPORTED, atomic_add
from selvedge.solver.collisions import Colliders, Plane
from selvedge.solver.fused import run_colored_frame


@njit(parallel=True)
def _claim_items(n_threads, n_items, counter, claimed_by):
    """Each thread claims items with atomic_add until none are left, as the fused frame does."""
    for t in prange(n_threads):
        while True:
            g = atomic_add(counter, 0, 1)
            if g >= n_items:
                break
            claimed_by[g] += t + 1


def test_atomic_add_hands_out_every_item_exactly_once_to_two_threads():
    assert numba.get_num_threads() >= 2
    counter = np.zeros(1, dtype=np.int64)
    claimed_by = np.zeros(2_000_000, dtype=np.int64)
    _claim_items(2, claimed_by.size, counter, claimed_by)
    # a lost or doubled update would leave an item unclaimed (0) or claimed twice (2 + 1 or more)
    assert set(np.unique(claimed_by).tolist()) <= {1, 2}
    assert counter[0] == claimed_by.size + 2  # one failed claim per thread ends its loop


def _sheet(n=20, soft_pins=True):
    pos, faces, uv = grid_mesh(n, n, 1.0, 1.0, origin=(0.0, 0.0, 1.0))
    pins = np.zeros(len(pos))
    pins[[(n - 1) * n, n * n - 1]] = 1.0  # two hard corners that move
    if soft_pins:
        pins[[n // 2, 3 * n + 5, n * n // 2]] = 0.7  # soft pins, reordered by the sweep
    return pos, faces, uv, pins


def _run(
    fused,
    bending,
    iterations,
    frames=15,
    threads=2,
    monkeypatch=None,
    team=None,
    limiting=False,
    n=20,
    aggregates=False,
):
    pos, faces, uv, pins = _sheet(n)
    cloth = Cloth(
        pos,
        faces,
        uvs=uv,
        pin_weights=pins,
        options=ClothOptions(
            bending_model=bending, stretch_limiting=limiting, coarse_links_between_aggregates=aggregates
        ),
        settings=SolverSettings(solve_mode="colored", threads=threads, substeps=6, iterations=iterations),
    )
    cloth.fused_frames = fused
    if team is not None:
        monkeypatch.setattr(cloth_module, "run_colored_frame", functools.partial(run_colored_frame, n_threads=team))
    for f in range(frames):
        targets = pos + np.array([0.02 * np.sin(0.3 * f), 0.0, 0.01 * f])
        cloth.step(pin_targets=targets)
    # the path under test was the one taken (other CPUs than x86-64 have the per-phase one only)
    assert (cloth._fused is not None) == (fused and FUSED_SUPPORTED)
    return cloth


@pytest.mark.parametrize("bending", ["isometric", "dihedral", "cross_edge"])
@pytest.mark.parametrize("iterations", [1, 2])
def test_fused_frame_is_bit_identical_to_the_per_phase_path(bending, iterations):
    a = _run(True, bending, iterations)
    b = _run(False, bending, iterations)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.v, b.v)
    for sa, sb in zip(a.constraint_sets, b.constraint_sets):
        assert np.array_equal(sa.lam, sb.lam), sa.name  # the multipliers the diagnostics read
    assert np.abs(a.x - a.rest_positions).max() > 0.05  # the sheet did move


@pytest.mark.parametrize("team", [1, 3])
def test_a_team_of_any_size_gives_the_same_frame(team, monkeypatch):
    # team=3 on 2 Numba threads: the third member never comes; the two that do close the team
    # after the join wait and share its items. team=1: one thread does everything.
    a = _run(True, "isometric", 1, frames=4, monkeypatch=monkeypatch, team=team)
    b = _run(False, "isometric", 1, frames=4)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.v, b.v)


@pytest.mark.parametrize("aggregates", [False, True])
@pytest.mark.parametrize("min_pairs", [0, cloth_module.STRETCH_LIMIT_BLOCK_MIN_PAIRS])
@pytest.mark.parametrize("team", [None, 1, 3])
def test_the_stretch_limit_levels_run_inside_the_fused_frame_with_the_same_bits(
    min_pairs, team, aggregates, monkeypatch
):
    # min_pairs=0: every coarse level split into blocks (a snapshot, the blocks, the cut pairs,
    # the children by block); the default: the coarse levels of this 32 x 32 sheet in one item.
    # Against the per-phase coloured path, which runs the same blocked levels serially;
    # ``aggregates``: the links measured between aggregate centres (one item computes them first).
    monkeypatch.setattr(cloth_module, "STRETCH_LIMIT_BLOCK_MIN_PAIRS", min_pairs)
    kw = dict(limiting=True, n=32, aggregates=aggregates)
    a = _run(True, "isometric", 2, frames=6, monkeypatch=monkeypatch, team=team, **kw)
    b = _run(False, "isometric", 2, frames=6, **kw)
    assert a.hierarchy is not None and a.hierarchy.edge_offsets.shape[0] - 2 >= 2
    assert np.array_equal(a.x, b.x) and np.array_equal(a.v, b.v)
    assert a.stretch_limit_active == b.stretch_limit_active > 0  # the limit did act, counted alike
    assert a.last_diagnostics.timings_ms["stretch_limit"] > 0.0


@pytest.mark.parametrize("aggregates", [False, True])
def test_the_coloured_stretch_limit_keeps_the_serial_strain(aggregates):
    # 64 x 64 corner sheet falling from flat: its first level (3906 pairs) runs by blocks, the
    # cut pairs after the blocks. The coloured sheet must stay within millimetres of the serial
    # one and its worst-frame P95 strain within a tenth of the serial one's.
    n = 64
    pos, faces, uv = grid_mesh(n, n, 1.0, 1.0, origin=(0.0, 0.0, 1.0))
    pins = np.zeros(len(pos))
    pins[[(n - 1) * n, n * n - 1]] = 1.0
    out = {}
    for mode in ("serial", "colored"):
        cloth = Cloth(
            pos,
            faces,
            uvs=uv,
            pin_weights=pins,
            settings=SolverSettings(solve_mode=mode, threads=2),
            options=ClothOptions(coarse_links_between_aggregates=aggregates),
        )
        p95 = max(cloth.step().strain_p95 for _ in range(12))
        out[mode] = (cloth.x.copy(), p95)
    assert cloth._colored[5].split >= 1 and cloth._fused is not None
    gap = np.linalg.norm(out["serial"][0] - out["colored"][0], axis=1).max()
    (_, ps), (_, pc) = out["serial"], out["colored"]
    print(f"\n[colored vs serial, 64 x 64] gap {1e3 * gap:.2f} mm, P95 {100 * pc:.3f} % vs {100 * ps:.3f} %")
    assert gap < 5e-3
    assert abs(pc - ps) < 0.1 * ps


def test_fused_phase_timings_cover_the_frame():
    # Every frame's phases fit inside its total; most of it is theirs in some frame (not asserted for
    # every frame: on a loaded machine a frame's thread wake-ups alone can take half of it).
    cloth = _run(True, "isometric", 1, frames=3)
    phases = ["predict", "stretch", "shear", "bend", "tether", "soft_pin", "velocity"]
    shares = []
    for _ in range(5):
        cloth.step(pin_targets=cloth.rest_positions)
        t = cloth.last_diagnostics.timings_ms
        assert all(t[p] > 0.0 for p in phases), t
        inside = sum(t[p] for p in phases)
        assert inside <= t["total"], (inside, t["total"])
        shares.append(inside / t["total"])
    assert max(shares) > 0.5, shares


def test_hooks_and_contacts_take_the_per_phase_path():
    pos, faces, _, pins = _sheet()
    cloth = Cloth(pos, faces, pin_weights=pins, settings=SolverSettings(solve_mode="colored", threads=2))
    assert (cloth._fused_schedule() is not None) == FUSED_SUPPORTED
    cloth.acceleration_hook = lambda x, v, h, t: None  # Python between the phases
    assert cloth._fused_schedule() is None
    grounded = Cloth(
        pos,
        faces,
        pin_weights=pins,
        options=ClothOptions(stretch_limiting=False),
        settings=SolverSettings(solve_mode="colored", threads=2),
        contact_handler=Colliders([Plane(position=(0.0, 0.0, -1.0))]),
    )
    assert grounded._fused_schedule() is None


def test_blocked_levels_keep_every_link_and_parent_and_let_blocks_run_apart(monkeypatch):
    # Against the hierarchy as built (serial order): the blocked one holds the same pairs with
    # the same limits per level, the same (child, parent, weight) triples and snapshot; in a
    # blocked level every pair of block b moves only vertices of part b, and every child of
    # block b lies in part b, so the blocks of a step never write the same vertex.
    monkeypatch.setattr(cloth_module, "STRETCH_LIMIT_BLOCK_MIN_PAIRS", 0)
    pos, faces, uv, pins = _sheet(32, soft_pins=False)
    cloth = Cloth(pos, faces, uvs=uv, pin_weights=pins, settings=SolverSettings(solve_mode="colored", threads=3))
    cloth._colored_schedule()
    part, blocked = cloth._colored[4], cloth._colored[5]
    hz, bz = cloth.hierarchy, blocked.hierarchy
    levels = hz.edge_offsets.shape[0] - 2
    assert blocked.split == levels >= 3

    def triples(h):
        rows = []
        for c in range(h.children.shape[0]):
            for e in range(h.parent_start[c], h.parent_start[c + 1]):
                rows.append((int(h.children[c]), int(h.parents[e]), float(h.parent_weight[e])))
        return sorted(rows)

    assert triples(hz) == triples(bz)
    assert sorted(hz.snapshot.tolist()) == sorted(bz.snapshot.tolist())
    for level in range(1, levels + 1):
        e0, e1 = hz.edge_offsets[level], hz.edge_offsets[level + 1]
        serial = sorted(zip(map(tuple, hz.edges[e0:e1].tolist()), hz.max_length[e0:e1].tolist()))
        assert serial == sorted(zip(map(tuple, bz.edges[e0:e1].tolist()), bz.max_length[e0:e1].tolist()))
        eb, cb, w = blocked.edge_blocks[level], blocked.child_blocks[level], hz.inv_mass[level]
        assert eb[0] == e0 and eb[-1] == e1
        for b in range(3):
            pairs = bz.edges[eb[b] : eb[b + 1]]
            movable = w[pairs] > 0.0
            assert (part[pairs][movable] == b).all()
            assert (part[bz.children[cb[b] : cb[b + 1]]] == b).all()
        assert cb[0] == hz.child_offsets[level - 1] and cb[-1] == hz.child_offsets[level]
