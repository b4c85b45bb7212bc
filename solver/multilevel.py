"""Hierarchical stretch limiting (Mueller 2008, Hierarchical Position Based Dynamics), inside XPBD.

Why: a Gauss-Seidel sweep carries a correction about one edge per pass, so the whole-sheet sag
mode of a stiff cloth decays over hundreds of sweeps and the cloth stretches like rubber at any
affordable budget. A coarse level moves many fine vertices at once: each coarse edge spans 2-3
fine edges, the next level twice that, and so on, so after the coarse-to-fine pass the
low-frequency stretch is gone and the fine sweep only fixes local error.

Levels (built once from the rest state, :func:`build_hierarchy`):

* level 0 is the mesh; level l+1's vertices are a maximal independent set of level l's graph
  (hard pins always belong to every level, soft pins are taken before the other vertices), so every level-l vertex is a level-(l+1) vertex or
  the neighbour of one, and each level has about a quarter of the vertices of the one below;
* a level-(l+1) edge joins two of its vertices that a path of at most three level-l edges links
  through non-members; its rest length is the rest distance (flat rest shapes and pattern rest
  lengths), or for a curved rest shape the shortest such path (a chord would forbid unfolding);
* a non-member vertex of level l moves with its level-(l+1) neighbours ("parents") by inverse
  rest-distance weights, and each coarse vertex carries its own mass plus its share of its
  children's (``m_p = m_p + sum_c w_cp m_c``); pins have inverse mass 0 at every level, and a
  soft pin's mass includes its attachment (``Cloth._attached_mass``).

Constraints: a coarse edge is a strain-limit inequality (:mod:`.strain_limit`): it acts only when
its vertices are further apart than ``(1 + stretch_limit)`` times its rest length, as HPBD's
unilateral links do. So it never stiffens bending or compression, and below the limit the
material's own compliance decides how much the cloth stretches; the limit is a material property
(``Material.stretch_limit``). The mesh itself (level 0) is left to the XPBD stretch constraints: the same
inequality on the mesh edges as well bought nothing measurable (docs/design/stiff_fabric.md).

With ``ClothOptions.coarse_links_between_aggregates`` (by default for a cloth without pins) a
link is measured halfway between its members and their aggregates' centres of mass
(:func:`aggregate_offsets`, ``CENTRE_WEIGHT``): the correction moves the aggregates, and a link
measured at the members alone applied their fine-scale motion to whole aggregates, which pumped
energy into a cloth at rest (docs/design/stiff_fabric.md, "Halfway, on every level").

Solve (each iteration of each substep, :func:`solve_multilevel`): snapshot the level-1 vertices;
for l = L .. 1: one Gauss-Seidel pass over level l's edges (pin-outward order), then every
level-(l-1) vertex that is not on level l moves by its parents' weighted displacement since the
snapshot (those parents are the only vertices moved so far). Fixed order, so bit-reproducible.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from . import _numba_setup  # noqa: F401
from ._intrinsics import sqrt
from .geodesic import edge_adjacency, k_nearest_sources_geodesic
from .kernels import _JIT
from .strain_limit import (
    separation_of_members,
    separation_with_offsets,
    solve_strain_limit,
    solve_strain_limit_contacts,
)

#: A level with fewer vertices than this is not built (its edges would span the whole cloth).
MIN_LEVEL_VERTICES = 8
#: Levels at most (above the mesh); 6 reach ~25 vertices from 100k.
MAX_LEVELS = 8
#: With ``between_aggregates``, where a link is measured: at ``x + CENTRE_WEIGHT (c - x)`` of each
#: end, between the member x itself (0) and its aggregate's centre of mass c (1), on every level.
#: 56 drops of a sheet on a ball (24 s): every one settles from 0.5 up (1 of 28 keeps moving at
#: 0.25, 25 of 42 at 0); a two-corner 64 x 64 sheet holds P95 1.41 % at 0.5, 1.85 % at 1
#: (docs/design/stiff_fabric.md, "Halfway, on every level").
CENTRE_WEIGHT = 0.5


class Hierarchy(NamedTuple):
    """The coarse levels as flat arrays (level l's rows between ``*_offsets[l]`` and ``[l + 1]``).

    ``edges``/``max_length``: all levels' strain-limit pairs (global vertex ids; level 0, the mesh,
    has none: its edges are the XPBD stretch constraints). ``inv_mass``: (levels + 1, N) inverse
    masses per level (row 0 the cloth's own).
    ``children``: per level l >= 1, the level-(l-1) vertices off level l (global ids, between
    ``child_offsets[l - 1]`` and ``[l]``), with their parents in CSR (``parent_start`` indexes
    ``parents``/``parent_weight``). ``snapshot``: the level-1 vertices.
    """

    edges: np.ndarray
    max_length: np.ndarray
    edge_offsets: np.ndarray
    inv_mass: np.ndarray
    children: np.ndarray
    child_offsets: np.ndarray
    parent_start: np.ndarray
    parents: np.ndarray
    parent_weight: np.ndarray
    snapshot: np.ndarray


@njit(cache=True)
def _independent_set(start, nbr, forced, preferred, last):
    """Greedy maximal independent set in vertex order, ``forced`` vertices (pins) taken first, then
    the open ``preferred`` ones (soft pins: a member unless a neighbour already is), then the rest,
    the open ``last`` ones (a taut hem: ``build_hierarchy(border=...)``) after all others."""
    n = start.shape[0] - 1
    state = np.zeros(n, np.int8)  # 0 open, 1 member, 2 next to a member
    for v in range(n):
        if forced[v]:
            state[v] = 1
    for v in range(n):
        if forced[v]:
            for e in range(start[v], start[v + 1]):
                if state[nbr[e]] == 0:
                    state[nbr[e]] = 2
    for v in range(n):
        if preferred[v] and state[v] == 0:
            state[v] = 1
            for e in range(start[v], start[v + 1]):
                if state[nbr[e]] == 0:
                    state[nbr[e]] = 2
    for border in (False, True):
        for v in range(n):
            if state[v] == 0 and last[v] == border:
                state[v] = 1
                for e in range(start[v], start[v + 1]):
                    if state[nbr[e]] == 0:
                        state[nbr[e]] = 2
    return state == 1


@njit(cache=True)
def _coarse_pairs(start, nbr, length, member, coarse_id):
    """Member pairs linked by <= 3 edges through non-members, with the shortest such path length."""
    n = start.shape[0] - 1
    n_coarse = 0
    for v in range(n):
        if member[v]:
            n_coarse += 1
    best = np.full(n_coarse, np.inf)
    touched = np.empty(n_coarse, np.int64)
    out_a = []
    out_b = []
    out_len = []
    for p in range(n):
        if not member[p]:
            continue
        cp = coarse_id[p]
        n_touched = 0
        for e1 in range(start[p], start[p + 1]):
            a = nbr[e1]
            l1 = length[e1]
            if member[a]:
                ca = coarse_id[a]
                if ca > cp:
                    if best[ca] == np.inf:
                        touched[n_touched] = ca
                        n_touched += 1
                    best[ca] = min(best[ca], l1)
                continue
            for e2 in range(start[a], start[a + 1]):
                b = nbr[e2]
                l2 = l1 + length[e2]
                if b == p:
                    continue
                if member[b]:
                    cb = coarse_id[b]
                    if cb > cp:
                        if best[cb] == np.inf:
                            touched[n_touched] = cb
                            n_touched += 1
                        best[cb] = min(best[cb], l2)
                    continue
                for e3 in range(start[b], start[b + 1]):
                    q = nbr[e3]
                    if q == p or not member[q]:
                        continue
                    cq = coarse_id[q]
                    if cq > cp:
                        if best[cq] == np.inf:
                            touched[n_touched] = cq
                            n_touched += 1
                        best[cq] = min(best[cq], l2 + length[e3])
        for t in range(n_touched):
            c = touched[t]
            out_a.append(cp)
            out_b.append(c)
            out_len.append(best[c])
            best[c] = np.inf
    m = len(out_a)
    pairs = np.empty((m, 2), np.int64)
    path = np.empty(m)
    for k in range(m):
        pairs[k, 0] = out_a[k]
        pairs[k, 1] = out_b[k]
        path[k] = out_len[k]
    return pairs, path


def _pin_outward(pairs: np.ndarray, n: int, kinematic: np.ndarray) -> np.ndarray:
    """Order of ``pairs`` for a sweep that starts at the pins (hops over the level's own graph)."""
    if not kinematic.any() or pairs.shape[0] == 0:
        return np.arange(pairs.shape[0])
    start, nbr, length = edge_adjacency(n, pairs, np.ones(pairs.shape[0]))
    _, dist = k_nearest_sources_geodesic(n, start, nbr, length, np.flatnonzero(kinematic).astype(np.int64), 1)
    hops = dist[:, 0]
    return np.argsort(np.minimum(hops[pairs[:, 0]], hops[pairs[:, 1]]), kind="stable")


def build_hierarchy(
    positions: np.ndarray,
    edges: np.ndarray,
    edge_rest_length: np.ndarray,
    mass: np.ndarray,
    inv_mass: np.ndarray,
    stretch_limit,
    flat_rest: bool,
    max_levels: int = MAX_LEVELS,
    anchored: np.ndarray | None = None,
    between_aggregates: bool = False,
    border: np.ndarray | None = None,
) -> Hierarchy:
    """The levels of :mod:`this module <.multilevel>` for a mesh (see the module docstring).

    ``positions``: rest positions (or the flattened pattern) whose distances are the coarse rest
    lengths when ``flat_rest``; ``edges``/``edge_rest_length``: the stretch edges (level 0).
    ``stretch_limit``: one strain for every link, or a function of an (m, 2) array of global vertex
    pairs giving each link's limit (``inf``: the pair links the level's graph but gets no constraint).
    ``anchored``: vertices held by an attachment (soft pins, their attachment already in ``mass``):
    preferred members of every level (a soft pin off a level would move with its parents against
    its goal) and sources of the pin-outward order, like the pins; None: none.
    ``between_aggregates``: the links' rest lengths are the distances of the points they are
    measured at (:func:`aggregate_offsets`, ``ClothOptions.coarse_links_between_aggregates``).
    ``border``: vertices taken as members of a level last, where no other vertex can be (the taut
    hems of :func:`.level_graph.taut_borders`: held on the levels, a hem strung between two pins is
    a chain of links at their limit whose Gauss-Seidel corrections run along it while its load
    pulls across it; a 64 x 64 sheet hanging from the corners of one edge strains 1.4-1.7 % P95 when
    that hem is a member of every level, 0.9-1.2 % when it is not; docs/design/stiff_fabric.md, "A
    taut hem stays off the levels"). None: none.
    """
    n = positions.shape[0]
    kinematic = inv_mass <= 0.0
    limit_of = stretch_limit if callable(stretch_limit) else (lambda pairs: np.full(pairs.shape[0], stretch_limit))
    edge_list = [np.zeros((0, 2), np.int64)]  # level 0 (the mesh) is solved by the XPBD stretch constraints
    max_length = [np.zeros(0)]
    inv_rows = [np.asarray(inv_mass, np.float64)]
    child_list, parent_start, parent_list, weight_list = [], [0], [], []
    child_offsets = [0]

    level_ids = np.arange(n)  # global ids of the current level's vertices
    level_edges = np.asarray(edges, np.int64)  # in level-local ids
    level_len = np.asarray(edge_rest_length, np.float64)
    level_mass = np.asarray(mass, np.float64).copy()
    level_kin = kinematic.copy()
    level_anchor = np.zeros(n, np.bool_) if anchored is None else np.asarray(anchored, np.bool_) & ~kinematic
    level_border = np.zeros(n, np.bool_) if border is None else np.asarray(border, np.bool_)
    for _ in range(max_levels):
        m = level_ids.size
        if level_edges.shape[0] == 0:
            break
        start, nbr, length = edge_adjacency(m, level_edges, level_len)
        member = _independent_set(start, nbr, level_kin, level_anchor, level_border)
        n_coarse = int(member.sum())
        if n_coarse < MIN_LEVEL_VERTICES or n_coarse > 0.75 * m:
            break
        coarse_id = np.cumsum(member) - 1
        pairs, path = _coarse_pairs(start, nbr, length, member, coarse_id)
        coarse_global = level_ids[member]
        chord = np.linalg.norm(positions[coarse_global[pairs[:, 0]]] - positions[coarse_global[pairs[:, 1]]], axis=1)
        rest = chord if flat_rest else np.maximum(chord, path)
        # parents of each non-member: its member neighbours, weighted by inverse rest distance
        children = np.flatnonzero(~member & ~level_kin)
        src = np.repeat(np.arange(m), np.diff(start))
        keep = ~member[src] & member[nbr] & ~level_kin[src]
        p_child, p_parent, p_len = src[keep], nbr[keep], length[keep]
        order = np.argsort(p_child, kind="stable")
        p_child, p_parent, p_len = p_child[order], p_parent[order], p_len[order]
        w = 1.0 / np.maximum(p_len, 1e-12)
        counts = np.bincount(p_child, minlength=m)
        w /= np.bincount(p_child, weights=w, minlength=m)[p_child]
        assert (counts[children] > 0).all(), "an independent set leaves no vertex without a member neighbour"
        coarse_mass = level_mass[member].copy()
        np.add.at(coarse_mass, coarse_id[p_parent], w * level_mass[p_child])
        coarse_kin = level_kin[member]
        order = _pin_outward(pairs, n_coarse, coarse_kin | level_anchor[member])
        pairs, rest = pairs[order], rest[order]

        links = coarse_global[pairs]
        limit = np.asarray(limit_of(links), dtype=np.float64)
        keep_link = np.isfinite(limit)
        edge_list.append(links[keep_link])
        max_length.append(((1.0 + limit) * rest)[keep_link])
        row = np.zeros(n)
        row[coarse_global] = np.where(coarse_kin, 0.0, 1.0 / np.where(coarse_kin, 1.0, coarse_mass))
        inv_rows.append(row)
        child_list.append(level_ids[children])
        seg = np.cumsum(counts[children])
        parent_start.extend((parent_start[-1] + seg).tolist())
        parent_list.append(level_ids[p_parent])
        weight_list.append(w)
        child_offsets.append(child_offsets[-1] + children.size)

        if len(edge_list) == 2:
            level_one = coarse_global.astype(np.int64)
        level_ids, level_edges, level_len = coarse_global, pairs, rest
        level_mass, level_kin, level_anchor = coarse_mass, coarse_kin, level_anchor[member]
        level_border = level_border[member]

    levels = len(edge_list) - 1
    edge_offsets = np.cumsum([0] + [e.shape[0] for e in edge_list]).astype(np.int64)
    empty_i = np.zeros(0, np.int64)
    hz = Hierarchy(
        edges=np.ascontiguousarray(np.concatenate(edge_list), dtype=np.int64),
        max_length=np.ascontiguousarray(np.concatenate(max_length)),
        edge_offsets=edge_offsets,
        inv_mass=np.ascontiguousarray(np.stack(inv_rows)),
        children=np.concatenate(child_list).astype(np.int64) if levels else empty_i,
        child_offsets=np.asarray(child_offsets, np.int64),
        parent_start=np.asarray(parent_start, np.int64),
        parents=np.concatenate(parent_list).astype(np.int64) if levels else empty_i,
        parent_weight=np.concatenate(weight_list) if levels else np.zeros(0),
        snapshot=level_one if levels else empty_i,
    )
    return _between_aggregates(hz, positions, flat_rest) if between_aggregates else hz


def _between_aggregates(hz: Hierarchy, positions: np.ndarray, flat_rest: bool) -> Hierarchy:
    """The links' limits rescaled from their members' rest distance to that of the points they are
    measured at (:func:`aggregate_offsets`, toward the aggregates' centres). On a curved rest shape
    those lie inside the curve, closer than they are unrolled (up to 20 % on a half cylinder),
    which would forbid unrolling it: there a limit is never lowered."""
    if hz.edges.shape[0] == 0:
        return hz
    rest = np.ascontiguousarray(positions, dtype=np.float64)
    work = aggregate_work(hz, rest.shape[0], True)
    aggregate_offsets(rest, hz, work)
    e = hz.edges
    level = np.searchsorted(hz.edge_offsets, np.arange(e.shape[0]), side="right") - 1
    between_points = (rest[e[:, 0]] + work.offset[level, e[:, 0]]) - (rest[e[:, 1]] + work.offset[level, e[:, 1]])
    between_members = np.linalg.norm(rest[e[:, 0]] - rest[e[:, 1]], axis=1)
    ratio = np.linalg.norm(between_points, axis=1) / np.maximum(between_members, 1e-12)
    if not flat_rest:
        ratio = np.maximum(ratio, 1.0)
    return hz._replace(max_length=np.ascontiguousarray(hz.max_length * ratio))


@njit(**_JIT)
def _sweep_level(x, inv_mass, edges, max_length, first, stop, offset):
    """Links ``first:stop`` in order; ``offset``: the level's (N, 3) :func:`aggregate_offsets`, or
    no rows for links measured between their members. The choice is made once, outside the loop
    (a test per link made the members' pass 4 x slower)."""
    active = 0
    if offset.shape[0] == 0:
        for k in range(first, stop):
            i, j, dx, dy, dz = separation_of_members(k, x, edges)
            active += solve_strain_limit(x, inv_mass, i, j, dx, dy, dz, max_length[k])
    else:
        for k in range(first, stop):
            i, j, dx, dy, dz = separation_with_offsets(k, x, edges, offset)
            active += solve_strain_limit(x, inv_mass, i, j, dx, dy, dz, max_length[k])
    return active


class AggregateWork(NamedTuple):
    """Scratch of :func:`aggregate_offsets`: ``centre``, ``pending`` (N, 3), ``offset``
    (levels + 1, N, 3): ``offset[l, p]`` from level-l member p to where its links are measured,
    and the free members of each level (level l's between ``member_start[l]`` and ``[l + 1]``).
    Without the links between aggregates every array has no rows (nothing is held or read)."""

    centre: np.ndarray
    pending: np.ndarray
    offset: np.ndarray
    member_start: np.ndarray
    members: np.ndarray


def aggregate_work(hierarchy: Hierarchy | None, n: int, between_aggregates: bool) -> AggregateWork:
    """The scratch of :func:`aggregate_offsets` for ``hierarchy`` (None: no levels) over n
    vertices; empty unless ``between_aggregates`` (the links are then measured between members)."""
    rows = 1 if hierarchy is None else hierarchy.edge_offsets.shape[0] - 1
    free = [np.zeros(0, np.int64)] * rows
    if hierarchy is not None and between_aggregates:
        free = [np.zeros(0, np.int64)] + [np.flatnonzero(hierarchy.inv_mass[level] > 0.0) for level in range(1, rows)]
    n = n if between_aggregates else 0
    return AggregateWork(
        np.zeros((n, 3)),
        np.zeros((n, 3)),
        np.zeros((rows, n, 3)),
        np.cumsum([0] + [f.size for f in free]).astype(np.int64),
        np.concatenate(free).astype(np.int64),
    )


@njit(**_JIT)
def aggregate_offsets(x, hierarchy, work):
    """``work.offset[l, p]``: from each level-l member p to the point its links are measured at,
    ``CENTRE_WEIGHT`` of the way to the centre of mass of its aggregate (p and, through the levels
    below, the vertices that move with it). Level by level from the mesh:
    ``c_p = (m_p c_p + sum_c w_cp m_c c_c) / M_p``, the children's centres weighted as the
    prolongation moves them (``M_p = m_p + sum_c w_cp m_c``, the level's lumped mass). A link
    measured at the members alone reads their fine-scale motion, which its correction then applies
    to whole aggregates: the levels pumped energy into a cloth at rest. The centre averages that
    motion out, at the price of seeing less of a stretch inside an aggregate
    (docs/design/stiff_fabric.md, "Halfway, on every level"). Pinned members are their own
    centres (offset 0)."""
    hz = hierarchy
    levels = hz.edge_offsets.shape[0] - 2
    centre, pending, offset = work.centre, work.pending, work.offset
    if centre.shape[0] == 0:  # an empty work: links between members, nothing to measure
        return
    for v in range(x.shape[0]):
        for d in range(3):
            centre[v, d] = x[v, d]
    for level in range(1, levels + 1):
        inv_below = hz.inv_mass[level - 1]
        inv_here = hz.inv_mass[level]
        for c in range(hz.child_offsets[level - 1], hz.child_offsets[level]):
            i = hz.children[c]
            m_c = 1.0 / inv_below[i]  # children are never pinned
            for e in range(hz.parent_start[c], hz.parent_start[c + 1]):
                p = hz.parents[e]
                if inv_here[p] > 0.0:  # a pinned parent is its own centre
                    w = hz.parent_weight[e] * m_c
                    for d in range(3):
                        pending[p, d] += w * centre[i, d]
        for k in range(work.member_start[level], work.member_start[level + 1]):
            v = work.members[k]
            m_p = 1.0 / inv_below[v]
            for d in range(3):
                centre[v, d] = (m_p * centre[v, d] + pending[v, d]) * inv_here[v]
                pending[v, d] = 0.0
                offset[level, v, d] = CENTRE_WEIGHT * (centre[v, d] - x[v, d])


@njit(**_JIT)
def snapshot_range(x, x_snapshot, snapshot, first, stop):
    """Copy the positions of ``snapshot[first:stop]`` (level-1 vertices) into ``x_snapshot``."""
    for k in range(first, stop):
        v = snapshot[k]
        for d in range(3):
            x_snapshot[v, d] = x[v, d]


@njit(inline="always", **_JIT)
def _parents_displacement(x, x_snapshot, hz, c):
    """Child ``c``'s parents' weighted displacement since the snapshot (its prolongation)."""
    mx = 0.0
    my = 0.0
    mz = 0.0
    for e in range(hz.parent_start[c], hz.parent_start[c + 1]):
        p = hz.parents[e]
        w = hz.parent_weight[e]
        mx += w * (x[p, 0] - x_snapshot[p, 0])
        my += w * (x[p, 1] - x_snapshot[p, 1])
        mz += w * (x[p, 2] - x_snapshot[p, 2])
    return mx, my, mz


@njit(**_JIT)
def prolong_range(x, x_snapshot, hierarchy, first, stop):
    """Move children ``first:stop`` by their parents' weighted displacement since the snapshot."""
    hz = hierarchy
    for c in range(first, stop):
        i = hz.children[c]
        mx, my, mz = _parents_displacement(x, x_snapshot, hz, c)
        x[i, 0] += mx
        x[i, 1] += my
        x[i, 2] += mz


@njit(**_JIT)
def solve_levels(x, x_snapshot, hierarchy, top, bottom, offset):
    """Levels ``top`` down to ``bottom``: each level's sweep, then its children follow their parents."""
    hz = hierarchy
    active = 0
    for level in range(top, bottom - 1, -1):
        active += _sweep_level(
            x,
            hz.inv_mass[level],
            hz.edges,
            hz.max_length,
            hz.edge_offsets[level],
            hz.edge_offsets[level + 1],
            offset[level],
        )
        prolong_range(x, x_snapshot, hz, hz.child_offsets[level - 1], hz.child_offsets[level])
    return active


@njit(**_JIT)
def solve_multilevel(x, x_snapshot, hierarchy, work):
    """One coarse-to-fine pass over levels L .. 1 (module docstring); the number of violating
    coarse pairs it projected (the active set, for the diagnostics). ``work``: :func:`aggregate_work`
    (with no rows the links are measured between their members, as without
    ``ClothOptions.coarse_links_between_aggregates``)."""
    hz = hierarchy
    levels = hz.edge_offsets.shape[0] - 2
    if levels == 0:
        return 0
    aggregate_offsets(x, hz, work)
    snapshot_range(x, x_snapshot, hz.snapshot, 0, hz.snapshot.shape[0])
    return solve_levels(x, x_snapshot, hz, levels, 1, work.offset)


class BlockedHierarchy(NamedTuple):
    """A :class:`Hierarchy` reordered for the coloured mode's vertex parts (:func:`blocked_hierarchy`).

    Levels ``split + 1 .. L`` keep their serial order (one item runs them); for each level
    ``l <= split``, ``edge_blocks[l]``: absolute offsets into ``hierarchy.edges`` of its blocks
    (``n_blocks + 2`` entries: block b between ``[b]`` and ``[b + 1]``, the pairs crossing a cut
    between ``[n_blocks]`` and ``[n_blocks + 1]``); ``child_blocks[l]``: offsets of level l's
    children per block; ``snapshot_blocks``: offsets of the level-1 vertices per block.
    """

    hierarchy: Hierarchy
    split: int
    edge_blocks: np.ndarray
    child_blocks: np.ndarray
    snapshot_blocks: np.ndarray


def blocked_hierarchy(hz: Hierarchy, part: np.ndarray, n_blocks: int, min_pairs: int) -> BlockedHierarchy:
    """The same levels with each level of at least ``min_pairs`` pairs in block order (a block's
    pairs move only its own vertices, in their serial pin-outward order; then the pairs crossing a
    cut), its children and the snapshot sorted by block (:func:`.coloring.block_schedule`).

    The smaller (coarser) levels keep the serial order: they are cheap, and the block order delays
    the pairs crossing the cut to the end of a level's pass, which on a coarse level (where a pair
    spans a good part of the sheet) breaks the pin-outward sweep that carries a correction across
    the sheet in one pass (32 x 32 corner sheet, every level blocked: 12 mm from serial after 12
    frames, against 5 mm for the fine sweep alone).

    The blocks of a level share no movable vertex and a child is written by its own prolongation
    only, so a level's blocks (and its children's blocks) can run at the same time with the same
    result as :func:`solve_multilevel` over this reordered hierarchy, whatever the team of threads.
    """
    from .coloring import block_schedule

    levels = hz.edge_offsets.shape[0] - 2
    edges, max_length = hz.edges.copy(), hz.max_length.copy()
    edge_blocks = np.zeros((levels + 1, n_blocks + 2), np.int64)
    child_blocks = np.zeros((levels + 1, n_blocks + 1), np.int64)
    child_order = np.arange(hz.children.shape[0])
    split = 0
    while split < levels and hz.edge_offsets[split + 2] - hz.edge_offsets[split + 1] >= min_pairs:
        split += 1
    for level in range(1, split + 1):
        e0, e1 = int(hz.edge_offsets[level]), int(hz.edge_offsets[level + 1])
        order, off = block_schedule(hz.edges[e0:e1], part, hz.inv_mass[level], n_blocks)
        edges[e0:e1] = hz.edges[e0 + order]
        max_length[e0:e1] = hz.max_length[e0 + order]
        edge_blocks[level] = e0 + off
        c0, c1 = int(hz.child_offsets[level - 1]), int(hz.child_offsets[level])
        child_part = part[hz.children[c0:c1]]
        corder = np.argsort(child_part, kind="stable")
        child_order[c0:c1] = c0 + corder
        child_blocks[level] = c0 + np.searchsorted(child_part[corder], np.arange(n_blocks + 1))
    counts = np.diff(hz.parent_start)[child_order]
    parent_start = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    within = np.arange(int(parent_start[-1])) - np.repeat(parent_start[:-1], counts)
    src = np.repeat(hz.parent_start[:-1][child_order], counts) + within
    snap_part = part[hz.snapshot]
    sorder = np.argsort(snap_part, kind="stable")
    blocked = hz._replace(
        edges=np.ascontiguousarray(edges),
        max_length=np.ascontiguousarray(max_length),
        children=np.ascontiguousarray(hz.children[child_order]),
        parent_start=parent_start,
        parents=np.ascontiguousarray(hz.parents[src]),
        parent_weight=np.ascontiguousarray(hz.parent_weight[src]),
        snapshot=np.ascontiguousarray(hz.snapshot[sorder]),
    )
    snapshot_blocks = np.searchsorted(snap_part[sorder], np.arange(n_blocks + 1)).astype(np.int64)
    return BlockedHierarchy(blocked, split, edge_blocks, child_blocks, snapshot_blocks)


# ----------------------------------------------------------------------------------------------
# The coarse pass with the contacts respected (ClothOptions.stretch_limit_contacts, issue 21).
@njit(**_JIT)
def _sweep_level_contacts(x, inv_mass, edges, max_length, first, stop, offset, normal):
    """:func:`_sweep_level` with :func:`.strain_limit.solve_strain_limit_contacts`."""
    active = 0
    if offset.shape[0] == 0:
        for k in range(first, stop):
            i, j, dx, dy, dz = separation_of_members(k, x, edges)
            active += solve_strain_limit_contacts(x, inv_mass, i, j, dx, dy, dz, max_length[k], normal)
    else:
        for k in range(first, stop):
            i, j, dx, dy, dz = separation_with_offsets(k, x, edges, offset)
            active += solve_strain_limit_contacts(x, inv_mass, i, j, dx, dy, dz, max_length[k], normal)
    return active


@njit(**_JIT)
def unit_rows(normal):
    """Scale every non-zero row of ``normal`` to unit length, in place (summed push directions)."""
    for i in range(normal.shape[0]):
        length_sq = normal[i, 0] * normal[i, 0] + normal[i, 1] * normal[i, 1] + normal[i, 2] * normal[i, 2]
        if length_sq > 0.0:
            inv = 1.0 / sqrt(length_sq)
            normal[i, 0] *= inv
            normal[i, 1] *= inv
            normal[i, 2] *= inv


@njit(**_JIT)
def solve_multilevel_contacts(x, x_snapshot, hierarchy, normal, work):
    """:func:`solve_multilevel` where a vertex with a unit push direction ``normal[i]`` (a contact
    touched it in the last substep; zero rows for the others) is never moved into that contact,
    neither by a link (:func:`.strain_limit.solve_strain_limit_contacts`) nor by its parents (the
    inward part of their displacement is dropped). Free vertices take the same arithmetic."""
    hz = hierarchy
    levels = hz.edge_offsets.shape[0] - 2
    active = 0
    if levels == 0:
        return 0
    aggregate_offsets(x, hz, work)
    snapshot_range(x, x_snapshot, hz.snapshot, 0, hz.snapshot.shape[0])
    for level in range(levels, 0, -1):
        active += _sweep_level_contacts(
            x,
            hz.inv_mass[level],
            hz.edges,
            hz.max_length,
            hz.edge_offsets[level],
            hz.edge_offsets[level + 1],
            work.offset[level],
            normal,
        )
        for c in range(hz.child_offsets[level - 1], hz.child_offsets[level]):
            i = hz.children[c]
            mx, my, mz = _parents_displacement(x, x_snapshot, hz, c)
            inward = mx * normal[i, 0] + my * normal[i, 1] + mz * normal[i, 2]
            if inward < 0.0:
                mx -= inward * normal[i, 0]
                my -= inward * normal[i, 1]
                mz -= inward * normal[i, 2]
            x[i, 0] += mx
            x[i, 1] += my
            x[i, 2] += mz
    return active
