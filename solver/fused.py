"""The coloured solve of a whole frame in one parallel region.

The coloured mode (``kernels.*_colored``) opens a parallel region per constraint set, plus the
prediction and the velocity update: ~6 a substep, ~120 a frame at 20 substeps. Each costs the
dispatch from Python and waking the other thread, which on a small sheet is as long as the
work itself. Here the frame is a list of work items in solve order (a block's prediction, a block's
sweep over one constraint set, the constraints crossing a cut, a block's velocity update),
cut into steps: every item of a step waits until all items of the steps before have finished,
exactly the order of the separate regions, so the result is the same bits. Block b's items
belong to the team member of rank b (mod the team size), so a block's vertices stay in one
core's cache (items claimed first come, first served swapped blocks between the threads and ran
slower than serial); a member waits for a step on an atomic count of finished items
(:mod:`._team`). The team is whoever arrives within ~1 ms (:data:`JOIN_TICKS`): the members
present then close it and share the items of one that never comes, so a region cannot wait on
a thread that does not run.

The hierarchical stretch limit (:mod:`.multilevel`) runs inside the region too, at the start of
every iteration: its coarsest levels in one item, each finer level by blocks, then its pairs
crossing a cut, then its children by block (:func:`.multilevel.blocked_hierarchy`).

Used for frames with no contact handler and no learned hooks (their Python calls sit between
the phases), on x86-64 (the phase timings read the time-stamp counter); everything else takes
the per-phase path in :meth:`Cloth._run_frame`. The measurements behind this design are in
docs/design/solver.md ("The coloured mode on two threads").
"""

from __future__ import annotations

import math
import time

import numba
import numpy as np
from numba import njit, prange

from . import kernels as kn
from . import multilevel as ml
from ._team import (
    atomic_add,
    atomic_read,
    call_void,
    compare_exchange,
    cycle_counter,
    spin_pause,
    yield_function_address,
)
from .kernels import _JIT, _JIT_PARALLEL

PREDICT, DISTANCE, DIHEDRAL, ISOMETRIC, SOFT_PIN, VELOCITY = range(6)
#: the hierarchical stretch limit (:mod:`.multilevel`): a block's level-1 snapshot, a block's (or
#: the cut's) sweep of one level, a block's children following their parents, and the coarsest
#: levels in one item (with the whole snapshot first when ``flag`` is 1)
ML_SNAPSHOT, ML_SWEEP, ML_PROLONG, ML_COARSE, ML_OFFSETS = range(6, 11)
_YIELD_ADDRESS = yield_function_address()
# Stand-ins for the sets a cloth does not have (empty arrays of the kernel's types), made once.
_NO_DIHEDRAL = (np.zeros((0, 4), np.int32), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))
_NO_ISOMETRIC = (np.zeros((0, 4), np.int32), np.zeros((0, 4)), np.zeros(0), np.zeros(0), np.zeros(0), np.zeros((0, 3)))
_NO_SOFT_TARGETS = (np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0, np.int64), np.zeros((0, 3)))
_NO_SOFT_PINS = (np.zeros(0, np.int32), np.zeros(0), np.zeros(0), np.zeros(0))
_NO_HIERARCHY = ml.Hierarchy(
    edges=np.zeros((0, 2), np.int64),
    max_length=np.zeros(0),
    edge_offsets=np.zeros(1, np.int64),
    inv_mass=np.zeros((1, 0)),
    children=np.zeros(0, np.int64),
    child_offsets=np.zeros(1, np.int64),
    parent_start=np.zeros(1, np.int64),
    parents=np.zeros(0, np.int64),
    parent_weight=np.zeros(0),
    snapshot=np.zeros(0, np.int64),
)


class FusedSchedule:
    """The work items of one frame for a coloured cloth, and the arrays its kernel reads.

    Built once per (substeps, iterations, block count); ``rows(h)`` concatenates the distance
    sets' per-substep coefficients, kept until h changes.
    """

    def __init__(
        self,
        sets,
        vertex_order,
        vertex_offsets,
        part,
        kinematic_index,
        n_sub,
        iterations,
        blocked=None,
        between_aggregates=False,
    ):
        n_blocks = vertex_offsets.shape[0] - 1
        self.key = (n_sub, iterations, n_blocks)
        self.sets = sets
        self.blocked = blocked
        self.hierarchy = blocked.hierarchy if blocked is not None else _NO_HIERARCHY
        self.phase_names = (
            ["predict"] + [c.name for c in sets] + ["velocity"] + ["stretch_limit"] * (blocked is not None)
        )
        ml_phase = len(sets) + 2
        by_kind = {c.kind: c for c in sets}
        self.dihedral, self.isometric, self.soft_pin = (by_kind.get(k) for k in ("dihedral", "isometric", "soft_pin"))
        self.vertex_order = vertex_order
        owner = part[kinematic_index]
        self.kin_order = np.argsort(owner, kind="stable").astype(np.int64)
        self.kin_offsets = np.searchsorted(owner[self.kin_order], np.arange(n_blocks + 1)).astype(np.int64)

        distance = [c for c in sets if c.kind == "distance"]
        starts = np.cumsum([0] + [c.count for c in distance])
        self._distance = distance
        self._distance_start = {id(c): int(s) for c, s in zip(distance, starts)}
        self.d_vertices = (
            np.ascontiguousarray(np.concatenate([c.vertices for c in distance]), dtype=np.int32)
            if distance
            else np.zeros((0, 2), np.int32)
        )
        self.d_lam = np.zeros(int(starts[-1]))
        self._rows_h = math.nan
        self._rows = np.zeros((0, 4))

        predict = [(PREDICT, int(vertex_offsets[b]), int(vertex_offsets[b + 1]), b) for b in range(n_blocks)]
        velocity = [(VELOCITY, int(vertex_offsets[b]), int(vertex_offsets[b + 1]), b) for b in range(n_blocks)]
        # items (kind, first, stop, flag) in solve order, with their substep, iteration, step and owner
        item_sub, item_iter, item_step, items, step_phase, item_owner = [], [], [], [], [], []

        def add_step(phase, step_items, sub, iteration, owners=None):
            owners = range(len(step_items)) if owners is None else owners
            kept = [(o, it) for o, it in zip(owners, step_items) if it[2] > it[1] or it[0] == PREDICT]
            if not kept:
                return
            step_phase.append(phase)
            for owner, it in kept:
                items.append(it)
                item_owner.append(owner)
                item_sub.append(sub)
                item_iter.append(iteration)
                item_step.append(len(step_phase) - 1)

        for sub in range(n_sub):
            add_step(0, predict, sub, 0)
            for iteration in range(iterations):
                for step_items, owners in self._multilevel_steps(blocked, n_blocks, between_aggregates):
                    add_step(ml_phase, step_items, sub, iteration, owners)
                for phase, c in enumerate(sets, start=1):
                    for step_items in self._set_steps(c, n_blocks):
                        add_step(phase, step_items, sub, iteration)
            add_step(len(sets) + 1, velocity, sub, 0)
        table = np.array(items, dtype=np.int64).reshape(-1, 4)
        self.item_kind, self.item_a, self.item_b, self.item_flag = (np.ascontiguousarray(table[:, k]) for k in range(4))
        self.item_owner = np.array(item_owner, dtype=np.int64)
        self.item_sub = np.array(item_sub, dtype=np.int64)
        self.item_iter = np.array(item_iter, dtype=np.int64)
        item_step = np.array(item_step, dtype=np.int64)
        self.step_first = np.searchsorted(item_step, np.arange(len(step_phase))).astype(np.int64)
        self.item_wait = self.step_first[item_step]
        self.step_phase = np.array(step_phase, dtype=np.int64)
        self.item_end = np.zeros(len(items), dtype=np.int64)
        #: violating coarse pairs each item projected; the last pass's are the diagnostics' active set
        self.item_active = np.zeros(len(items), dtype=np.int64)
        ml_kinds = (self.item_kind == ML_SWEEP) | (self.item_kind == ML_COARSE)
        last = (self.item_sub == n_sub - 1) & (self.item_iter == iterations - 1)
        self.last_pass_items = np.flatnonzero(ml_kinds & last)
        self.counters = np.zeros(2, dtype=np.int64)

    @staticmethod
    def _multilevel_steps(blocked, n_blocks, between_aggregates):
        """Steps of one coarse-to-fine pass (:func:`.multilevel.solve_multilevel` over the blocked
        hierarchy, same order): with ``between_aggregates`` the aggregates' centres in one item
        (:func:`.multilevel.aggregate_offsets`), the levels kept in serial order
        (``blocked.split + 1 .. L``) in one item, the whole snapshot first; then per blocked level
        its blocks (a block's snapshot first when no item came before), the pairs crossing a cut,
        and the children by block. As (items, owners) pairs."""
        if blocked is None:
            return []
        hz = blocked.hierarchy
        levels = hz.edge_offsets.shape[0] - 2
        split = blocked.split
        steps = [([(ML_OFFSETS, 0, 1, 0)], [0])] if between_aggregates else []
        first = len(steps)  # the steps before the first of the pass's own
        snap = blocked.snapshot_blocks
        if split < levels:
            steps.append(([(ML_COARSE, split + 1, levels + 1, 1)], [0]))
        for level in range(split, 0, -1):
            eb, cb = blocked.edge_blocks[level], blocked.child_blocks[level]
            sweep = [(ML_SWEEP, int(eb[b]), int(eb[b + 1]), level) for b in range(n_blocks)]
            if len(steps) == first:
                pairs = [[(ML_SNAPSHOT, int(snap[b]), int(snap[b + 1]), 0), sweep[b]] for b in range(n_blocks)]
                steps.append(([it for p in pairs for it in p], [b for b in range(n_blocks) for _ in range(2)]))
            else:
                steps.append((sweep, list(range(n_blocks))))
            steps.append(([(ML_SWEEP, int(eb[n_blocks]), int(eb[n_blocks + 1]), level)], [0]))
            steps.append(
                ([(ML_PROLONG, int(cb[b]), int(cb[b + 1]), 0) for b in range(n_blocks)], list(range(n_blocks)))
            )
        return steps

    def _set_steps(self, c, n_blocks):
        """Steps of one pass over set c: its blocks side by side, then the constraints crossing a cut
        (soft pins: one goal per vertex, so all in one step, split evenly)."""
        off = c.block_offsets
        if c.kind == "soft_pin":
            cuts = np.linspace(0, c.count, n_blocks + 1).astype(np.int64)
            return [[(SOFT_PIN, int(cuts[b]), int(cuts[b + 1]), 0) for b in range(n_blocks)]]
        kind = {"distance": DISTANCE, "dihedral": DIHEDRAL, "isometric": ISOMETRIC}[c.kind]
        base = self._distance_start.get(id(c), 0)
        flag = int(c.unilateral)
        blocks = [(kind, base + int(off[b]), base + int(off[b + 1]), flag) for b in range(n_blocks)]
        return [blocks, [(kind, base + int(off[n_blocks]), base + int(off[n_blocks + 1]), flag)]]

    def rows(self, h, inv_mass):
        """The distance sets' ``distance_rows`` for substeps of h, concatenated in set order."""
        if h != self._rows_h:
            parts = [c.coefficients(h, inv_mass).distance_rows for c in self._distance]
            self._rows = np.ascontiguousarray(np.concatenate(parts)) if parts else np.zeros((0, 4))
            self._rows_h = h
        return self._rows

    def store_multipliers(self):
        """Copy the frame's distance multipliers back to their sets (the diagnostics read them)."""
        for c in self._distance:
            a = self._distance_start[id(c)]
            c.lam[:] = self.d_lam[a : a + c.count]

    def phase_seconds(self, start_tick, wall_s):
        """Seconds per phase name: each step lasts from the end of the step before (the region's
        start for the first) to the end of its last item, counted in time-stamp ticks and scaled so
        that the phases add up to the call's wall-clock time."""
        step_end = np.maximum.reduceat(self.item_end, self.step_first)
        ticks = np.diff(np.concatenate(([start_tick], step_end))).astype(np.float64)
        per_phase = np.bincount(self.step_phase, weights=ticks, minlength=len(self.phase_names))
        total = per_phase.sum()
        scale = wall_s / total if total > 0 else 0.0
        return {name: float(t * scale) for name, t in zip(self.phase_names, per_phase)}


#: Time-stamp ticks (~1 ms at 2-4 GHz) a thread waits for the rest of the team to arrive: an
#: idle worker thread sleeps between regions and takes 0.05-0.3 ms to wake up.
JOIN_TICKS = 3_000_000
#: Ticks (~20 us) a thread spins for a step to finish before it yields its time slice at every
#: further check: on a busy machine the thread it waits for may be off its core, and spinning
#: would keep it off.
SPIN_TICKS = 60_000
_CLOSED = 1 << 40


@njit(inline="always", **_JIT)
def _join_team(counters, n_threads):
    """(rank, team size) of the calling thread; rank -1: the team was closed without it.

    ``counters[0]`` counts arrivals. A thread that has waited :data:`JOIN_TICKS` for the
    others closes the team (adds ``_CLOSED``) with those that came: a thread that never comes
    (a back end running the region's iterations one after the other) cannot hold the frame up.
    """
    rank = -1
    while True:
        k = atomic_read(counters, 0)
        if k >= n_threads:
            break
        if compare_exchange(counters, 0, k, k + 1) == k:
            rank = k
            break
    if rank < 0:
        return -1, 1
    start = cycle_counter()
    while True:
        k = atomic_read(counters, 0)
        if k == n_threads:
            return rank, n_threads
        if k >= _CLOSED:
            return rank, k - _CLOSED
        if cycle_counter() - start > JOIN_TICKS:
            compare_exchange(counters, 0, k, k + _CLOSED)
        else:
            spin_pause()


@njit(inline="always", **_JIT)
def _wait_for(counters, finished, yield_address):
    """Wait until ``counters[1]`` (items finished) reaches ``finished``."""
    if atomic_read(counters, 1) >= finished:
        return
    start = cycle_counter()
    while atomic_read(counters, 1) < finished:
        if yield_address != 0 and cycle_counter() - start > SPIN_TICKS:
            call_void(yield_address)
        else:
            spin_pause()


@njit(**_JIT)
def _predict_block(
    first,
    stop,
    block,
    t_end,
    decay,
    h,
    x,
    v,
    inv_mass,
    x_substep_start,
    gravity,
    no_extra,
    wind,
    vertex_order,
    kinematic_index,
    kin_order,
    kin_offsets,
    kinematic_start,
    kinematic_end,
    soft_start,
    soft_end,
    soft_slot,
    soft_target,
):
    """Block ``block``'s prediction, then its kinematic vertices at ``t_end`` (block 0 also
    interpolates the soft-pin targets): ``kernels.predict_positions_blocks`` for one block.

    Nothing in an item may allocate an initialised array (``no_extra`` comes from outside): the
    parallel pipeline turns ``np.zeros`` into a parallel loop of its own, which inside the region
    cost 60-120 us an item (32 x 32: half of every substep)."""
    kn.predict_vertex_range(
        first, stop, vertex_order, x, v, inv_mass, gravity, no_extra, False, decay, wind, h, x_substep_start
    )
    for q in range(kin_offsets[block], kin_offsets[block + 1]):
        k = kin_order[q]
        i = kinematic_index[k]
        for d in range(3):
            x[i, d] = kinematic_start[k, d] + t_end * (kinematic_end[k, d] - kinematic_start[k, d])
    if block == 0:
        kn.interpolate_targets(soft_start, soft_end, soft_slot, t_end, soft_target)


@njit(**_JIT_PARALLEL)
def colored_frame(
    n_threads,
    yield_address,
    counters,
    item_owner,
    item_kind,
    item_a,
    item_b,
    item_flag,
    item_sub,
    item_iter,
    item_wait,
    item_end,
    n_sub,
    iterations,
    h,
    x,
    v,
    inv_mass,
    x_substep_start,
    gravity,
    air_drag_per_s,
    wind,
    vertex_order,
    kinematic_index,
    kin_order,
    kin_offsets,
    kinematic_start,
    kinematic_end,
    soft_start,
    soft_end,
    soft_slot,
    soft_target,
    d_vertices,
    d_rows,
    d_lam,
    dh_vertices,
    dh_rest_cos,
    dh_rest_sin,
    dh_alpha_tilde,
    dh_gamma,
    dh_lam,
    iso_vertices,
    iso_stencil,
    iso_alpha_tilde,
    iso_gamma,
    iso_inv_denominator,
    iso_lam,
    sp_vertex,
    sp_alpha_tilde,
    sp_inv_denominator,
    sp_lam,
    hierarchy,
    x_snapshot,
    ml_work,
    item_active,
):
    """Every substep of one frame: the work items in order, each after all items of the steps
    before it (see the module docstring). Per item the same kernel bodies as the coloured drivers
    (``kernels.solve_*``, ``_predict_vertex``), so the same arithmetic. Returns the time-stamp
    count at the start; ``item_end`` gets each item's at its end."""
    decay = math.exp(-air_drag_per_s * h)
    no_extra = np.empty((0, 3))  # np.zeros would be a (0-long) parallel loop: a region of its own
    n_items = item_kind.shape[0]
    counters[0] = 0
    counters[1] = 0
    start = cycle_counter()
    for _ in prange(n_threads):
        rank, size = _join_team(counters, n_threads)
        for g in range(n_items):
            if rank < 0 or item_owner[g] % size != rank:
                continue
            _wait_for(counters, item_wait[g], yield_address)
            kind, a, b, sub = item_kind[g], item_a[g], item_b[g], item_sub[g]
            t_end = (sub + 1) / n_sub
            reset_lambda = item_iter[g] == 0
            keep_lambda = item_iter[g] < iterations - 1 or sub == n_sub - 1
            if kind == PREDICT:
                _predict_block(
                    a,
                    b,
                    item_flag[g],
                    t_end,
                    decay,
                    h,
                    x,
                    v,
                    inv_mass,
                    x_substep_start,
                    gravity,
                    no_extra,
                    wind,
                    vertex_order,
                    kinematic_index,
                    kin_order,
                    kin_offsets,
                    kinematic_start,
                    kinematic_end,
                    soft_start,
                    soft_end,
                    soft_slot,
                    soft_target,
                )
            elif kind == DISTANCE:
                kn.sweep_distance(
                    a,
                    b,
                    x,
                    x_substep_start,
                    inv_mass,
                    d_vertices,
                    d_rows,
                    item_flag[g] == 1,
                    reset_lambda,
                    keep_lambda,
                    d_lam,
                )
            elif kind == DIHEDRAL:
                kn.sweep_bend_dihedral(
                    a,
                    b,
                    x,
                    x_substep_start,
                    inv_mass,
                    dh_vertices,
                    dh_rest_cos,
                    dh_rest_sin,
                    dh_alpha_tilde,
                    dh_gamma,
                    reset_lambda,
                    keep_lambda,
                    dh_lam,
                )
            elif kind == ISOMETRIC:
                kn.sweep_bend_isometric(
                    a,
                    b,
                    x,
                    x_substep_start,
                    inv_mass,
                    iso_vertices,
                    iso_stencil,
                    iso_alpha_tilde,
                    iso_gamma,
                    iso_inv_denominator,
                    reset_lambda,
                    keep_lambda,
                    iso_lam,
                )
            elif kind == SOFT_PIN:
                kn.sweep_soft_pin(
                    a,
                    b,
                    x,
                    inv_mass,
                    sp_vertex,
                    soft_target,
                    sp_alpha_tilde,
                    sp_inv_denominator,
                    reset_lambda,
                    keep_lambda,
                    sp_lam,
                )
            elif kind == VELOCITY:
                kn.velocity_range(a, b, vertex_order, x, x_substep_start, h, v)
            elif kind == ML_SNAPSHOT:
                ml.snapshot_range(x, x_snapshot, hierarchy.snapshot, a, b)
            elif kind == ML_SWEEP:
                level = item_flag[g]
                item_active[g] = ml._sweep_level(
                    x, hierarchy.inv_mass[level], hierarchy.edges, hierarchy.max_length, a, b, ml_work.offset[level]
                )
            elif kind == ML_PROLONG:
                ml.prolong_range(x, x_snapshot, hierarchy, a, b)
            elif kind == ML_OFFSETS:
                ml.aggregate_offsets(x, hierarchy, ml_work)
            else:
                if item_flag[g] == 1:
                    ml.snapshot_range(x, x_snapshot, hierarchy.snapshot, 0, hierarchy.snapshot.shape[0])
                item_active[g] = ml.solve_levels(x, x_snapshot, hierarchy, b - 1, a, ml_work.offset)
            item_end[g] = cycle_counter()
            atomic_add(counters, 1, 1)
    return start


def run_colored_frame(
    cloth, schedule: FusedSchedule, h, gravity, wind, kinematic_end, soft_end, timings, n_threads: int | None = None
) -> None:
    """One frame of ``cloth`` through :func:`colored_frame`; adds the phase times to ``timings``.
    ``n_threads``: the team size asked for (default: Numba's thread count, at most one a block)."""
    w = cloth.inv_mass
    dh, iso, sp = schedule.dihedral, schedule.isometric, schedule.soft_pin
    if dh is not None:
        k = dh.coefficients(h, w)
        dh_args = (dh.vertices, dh.params["rest_cos"], dh.params["rest_sin"], k.alpha_tilde, k.gamma, dh.lam)
    else:
        dh_args = _NO_DIHEDRAL
    if iso is not None:
        k = iso.coefficients(h, w)
        iso_args = (iso.vertices, iso.params["stencil"], k.alpha_tilde, k.gamma, k.inv_denominator, iso.lam)
    else:
        iso_args = _NO_ISOMETRIC
    if sp is not None:
        k = sp.coefficients(h, w)
        soft_args = (cloth._soft_prev, soft_end, sp.params["slot"], sp.params["target"])
        sp_args = (sp.vertices, k.alpha_tilde, k.inv_denominator, sp.lam)
    else:
        soft_args, sp_args = _NO_SOFT_TARGETS, _NO_SOFT_PINS
    s = schedule
    n_sub, iterations, n_blocks = s.key
    t0 = time.perf_counter()
    start = colored_frame(
        n_threads or min(n_blocks, numba.get_num_threads()),
        _YIELD_ADDRESS,
        s.counters,
        s.item_owner,
        s.item_kind,
        s.item_a,
        s.item_b,
        s.item_flag,
        s.item_sub,
        s.item_iter,
        s.item_wait,
        s.item_end,
        n_sub,
        iterations,
        h,
        cloth.x,
        cloth.v,
        w,
        cloth._x_substep_start,
        gravity,
        cloth.material.air_drag_per_s,
        wind,
        s.vertex_order,
        cloth.kinematic_index,
        s.kin_order,
        s.kin_offsets,
        cloth._target_prev,
        kinematic_end,
        *soft_args,
        s.d_vertices,
        s.rows(h, w),
        s.d_lam,
        *dh_args,
        *iso_args,
        *sp_args,
        s.hierarchy,
        cloth._ml_snapshot,
        cloth._ml_work,
        s.item_active,
    )
    wall = time.perf_counter() - t0
    s.store_multipliers()
    if s.blocked is not None:
        cloth.stretch_limit_active = int(s.item_active[s.last_pass_items].sum())
    for name, seconds in s.phase_seconds(start, wall).items():
        timings[name] = timings.get(name, 0.0) + seconds
