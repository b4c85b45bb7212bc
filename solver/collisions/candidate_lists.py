"""The candidate lists of a :class:`~.world.CollisionWorld`: the vertex-triangle and edge-edge
pairs its narrow phase tests, kept across substeps while no other pair can come into reach.

Candidates are found for a window of substeps: each vertex is assumed to keep this substep's
motion, the lists hold every pair that can come within reach along those straight paths, and
they serve while every vertex stays within ``margin / 2`` of its path, up to a common
translation (a cloth at rest, falling or carried keeps its list for up to 64 substeps; a flap
falling past a part at rest re-detects more often, with short paths only where the motion is).
With ``partial_detection``, the vertices that left their paths get new paths and only their
pairs are found again (:meth:`CandidateLists.detect_partial`).
"""

from __future__ import annotations

import numpy as np

from . import candidate_search as cs
from . import cloth_contacts as cc

#: the most substeps one candidate list may serve (when nothing moves relative to the rest)
WINDOW_MAX = 64

#: more than this fraction of the vertices off their paths: a whole detection instead of a
#: partial one (a partial pass over many vertices costs more than a whole one; nine tenths
#: measured 1.16 x the whole list's contact time on the 64 x 64 drop, a third 0.63 x)
PARTIAL_FRACTION_MAX = 1.0 / 3.0


class CandidateLists:
    """The pairs of ``mesh`` (a :class:`~.cloth_contacts.ContactMesh`) within reach of each other
    for the coming substeps, with each vertex's path (origin, step per substep, substeps since it
    was set, and for how many substeps the pairs found with it hold).

    ``margin_m``: how much farther than the contact distance a pair is listed; ``edge_length``:
    the longest relative path a window may give a vertex; ``edge_edge``: False lists the
    vertex-triangle pairs only; ``partial_detection``: see the module docstring.
    """

    def __init__(
        self, mesh: cc.ContactMesh, margin_m: float, edge_length: float, edge_edge: bool, partial_detection: bool
    ):
        n = mesh.rest.shape[0]
        self.mesh = mesh
        self.margin_m = float(margin_m)
        self.edge_length = float(edge_length)
        self.edge_edge = bool(edge_edge)
        self.partial_detection = bool(partial_detection)
        #: the lists (None before the first detection)
        self.cand: cc.Candidates | None = None
        self._vt_keys = self._ee_keys = np.zeros(0, dtype=np.int64)
        self._x_det = np.zeros((n, 3))
        self._det_step = np.zeros((n, 3))
        self._since = np.zeros(n, dtype=np.int64)
        self._window = np.zeros(n, dtype=np.int64)
        self._deviation = np.zeros(n)

    _STATE = ("cand", "_vt_keys", "_ee_keys", "_x_det", "_det_step", "_since", "_window", "_deviation")

    def snapshot(self) -> tuple:
        """The lists' state (copies), for :meth:`restore`: a frame run again starts from the lists,
        paths and remembered sides its first run started from (a crossed run refreshes sides)."""
        copy = lambda value: value.copy() if isinstance(value, np.ndarray) else value
        cand = None if self.cand is None else type(self.cand)(*(copy(a) for a in self.cand))
        return (cand,) + tuple(copy(getattr(self, name)) for name in self._STATE[1:])

    def restore(self, state: tuple) -> None:
        for name, value in zip(self._STATE, state):
            setattr(self, name, value)

    def update(self, x_start, x_pred, inv_mass, stats: dict) -> None:
        """Before a substep's narrow phase (``x_start``: positions at the substep start,
        ``x_pred``: predicted): detect again (all pairs, or the pairs of the vertices that left
        their paths) if any vertex left its path or its window ended. Counts in ``stats``."""
        if self.cand is None:
            self.detect(x_start, x_pred, inv_mass, stats)
            return
        self._since += 1
        common = cc.path_deviations(self._x_det, self._det_step, self._since, x_start, x_pred, self._deviation)
        broken = (self._since + 1 > self._window) | (self._deviation > 0.5 * self.margin_m)
        count = int(np.count_nonzero(broken))
        if count and (not self.partial_detection or count > PARTIAL_FRACTION_MAX * broken.shape[0]):
            self.detect(x_start, x_pred, inv_mass, stats)
        elif count:
            self.detect_partial(x_start, x_pred, inv_mass, broken, common, stats)

    def _window_for(self, step):
        """Substeps a list may serve when every vertex keeps ``step``: no path, relative to the
        common motion, longer than an edge (at most WINDOW_MAX); and the relative steps."""
        common = 0.5 * (step.min(axis=0) + step.max(axis=0)) if step.shape[0] else np.zeros(3)
        relative = step - common
        speed = float(np.sqrt(np.max(np.sum(relative * relative, axis=1)))) if step.shape[0] else 0.0
        window = WINDOW_MAX if speed * WINDOW_MAX <= self.edge_length else max(1, int(self.edge_length / speed))
        return window, relative

    def _cell(self):
        """Two edge lengths: a query (a box about an edge wide, grown by the largest half-extent
        of the grid's boxes) then visits 2-3 cells per axis instead of ~4, most of them empty
        around a sheet (the 48 x 48 garment's frame: 0.78 x the CPU time with one edge)."""
        return max(2.0 * self.edge_length, float(self.mesh.thickness.max()) + self.margin_m)

    def detect(self, x_start, x_pred, inv_mass, stats: dict) -> None:
        """New lists for the coming substeps, the sides of pairs seen before kept.

        Every vertex is assumed to go on moving as in this substep (``step`` = predicted minus
        start position) for ``window`` substeps, short enough that no vertex's path, relative to
        the common motion, is longer than an edge; the lists then hold every pair that can come
        within reach along those paths (see :func:`~.candidate_search.vertex_triangle_candidates`).
        They stay valid while every vertex keeps within ``margin / 2`` of its path (up to a
        common translation) and the window lasts. A falling flap next to a part at rest thus
        gets long paths only where the motion is, instead of one margin grown for the whole
        cloth."""
        x = x_start
        step = x_pred - x
        window, relative = self._window_for(step)
        path = window * relative
        m = self.mesh
        cv, ct = cs.vertex_triangle_candidates(x, inv_mass, m, self.margin_m, self._cell(), path)
        if self.edge_edge:
            ea, eb = cs.edge_edge_candidates(x, inv_mass, m, self.margin_m, self._cell(), path)
        else:
            ea = eb = np.zeros(0, dtype=np.int64)
        self._install(x, cv, ct, ea, eb)
        self._x_det[:] = x
        self._det_step = step
        self._since[:] = 0
        self._window[:] = window
        stats["detections"] += 1

    def detect_partial(self, x_start, x_pred, inv_mass, broken, common, stats: dict) -> None:
        """Re-detect only the pairs with a vertex in ``broken`` (its path left the margin or its
        window ended), keeping the rest of the lists.

        The broken vertices get new paths from where they are (their origin shifted by the
        common translation ``common`` of this substep's deviations, so that every vertex's
        deviation is still measured against one common translation). The new pairs are found
        with every other vertex at its path's position now (within ``margin / 2`` of where it
        is) and following its own path; the pairs of two unbroken vertices keep the proof of
        the detection that found them (both still within ``margin / 2`` of the paths it used),
        so no pair can come within reach unseen. A pair's list entry lasts as long as the window
        of its later-set vertex, whose end re-detects it."""
        m = self.mesh
        x = x_start
        idx = np.flatnonzero(broken)
        self._x_det[idx] = x[idx] - np.asarray(common)
        self._det_step[idx] = x_pred[idx] - x[idx]
        self._since[idx] = 0
        window, relative = self._window_for(self._det_step)
        self._window[idx] = window
        path = window * relative
        q = self._x_det + self._since[:, None] * self._det_step + np.asarray(common)  # paths' positions now
        q[idx] = x[idx]
        tri_hit = broken[m.tris].any(axis=1)
        edge_hit = broken[m.edges].any(axis=1)
        args = (q, inv_mass, m, self.margin_m, self._cell(), path)
        va, ta = cs.vertex_triangle_candidates(*args, rows=idx)
        # the unbroken vertices against the few triangles with a broken corner, from those triangles
        vb, tb = cs.triangle_vertex_candidates(*args, np.flatnonzero(tri_hit), np.flatnonzero(~broken))
        cand = self.cand
        keep = ~(broken[cand.vt_vertex] | tri_hit[cand.vt_triangle])
        cv = np.concatenate([cand.vt_vertex[keep], va, vb])
        ct = np.concatenate([cand.vt_triangle[keep], ta, tb])
        if self.edge_edge:
            ea1, eb1 = cs.edge_edge_candidates(*args, rows=np.flatnonzero(edge_hit))
            keep_e = ~(edge_hit[cand.ee_a] | edge_hit[cand.ee_b])
            ea = np.concatenate([cand.ee_a[keep_e], ea1])
            eb = np.concatenate([cand.ee_b[keep_e], eb1])
        else:
            ea = eb = np.zeros(0, dtype=np.int64)
        self._install(x, cv, ct, ea, eb)
        stats["partial_detections"] += 1
        stats["redetected_vertices"] += int(idx.shape[0])

    def _install(self, x, cv, ct, ea, eb):
        """Sort the pairs by key, give them their sides at x (a pair found before keeps its
        remembered side and held flag), and make them the lists."""
        vt_side = np.empty(cv.shape[0])
        cc.initial_vt_sides(x, self.mesh.tris, cv, ct, vt_side)
        ee_side = np.empty((ea.shape[0], 3))
        cc.initial_ee_sides(x, self.mesh.edges, ea, eb, ee_side)
        vt_keys = cv * self.mesh.tris.shape[0] + ct  # ascending: vertex order, triangles sorted below
        order = np.argsort(vt_keys, kind="stable")
        cv, ct, vt_side, vt_keys = cv[order], ct[order], vt_side[order], vt_keys[order]
        ee_keys = ea * self.mesh.edges.shape[0] + eb
        order = np.argsort(ee_keys, kind="stable")
        ea, eb, ee_side, ee_keys = ea[order], eb[order], ee_side[order], ee_keys[order]
        vt_held = np.zeros(cv.shape[0], dtype=np.bool_)
        ee_held = np.zeros(ea.shape[0], dtype=np.bool_)
        if self.cand is not None:
            cc.carry_sides(self._vt_keys, self.cand.vt_side, self.cand.vt_held, vt_keys, vt_side, vt_held)
            cc.carry_sides(self._ee_keys, self.cand.ee_side, self.cand.ee_held, ee_keys, ee_side, ee_held)
        self.cand = cc.Candidates(
            cv, ct, vt_side, ea, eb, ee_side, vt_held, ee_held, np.zeros(cv.shape[0]), np.zeros(ea.shape[0])
        )
        self._vt_keys, self._ee_keys = vt_keys, ee_keys
