"""The candidate lists of a :class:`~.world.CollisionWorld`: the vertex-triangle and edge-edge
pairs its narrow phase tests, kept across substeps while no other pair can come into reach.

Candidates are found for a window of substeps: each vertex is assumed to keep this substep's
motion, the lists hold every pair that can come within reach along those straight paths, and
they serve while every vertex stays within about ``margin / 2`` of its path, up to a common
affine map (a cloth at rest, falling or carried keeps its list for up to 64 substeps; a flap
falling past a part at rest re-detects more often, with short paths only where the motion is).
With ``partial_detection``, the vertices that left their paths get new paths and only their
pairs are found again (:meth:`CandidateLists.detect_partial`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _numba_setup  # noqa: F401  (cache directory before any compilation)
from . import candidate_search as cs
from . import cloth_contacts as cc
from ._jit import _JIT

#: the most substeps one candidate list may serve (when nothing moves relative to the rest)
WINDOW_MAX = 64

#: more than this fraction of the vertices off their paths: a whole detection instead of a
#: partial one (a partial pass over many vertices costs more than a whole one; nine tenths
#: measured 1.16 x the whole list's contact time on the 64 x 64 drop, a third 0.63 x)
PARTIAL_FRACTION_MAX = 1.0 / 3.0

#: a vertex whose predicted step, relative to the common one, would take it off its path
#: (``margin / 2``) in more substeps than this gets no step: its path stays where it is,
#: relative to the common motion
SLOW_SUBSTEPS = 4

#: a partial pass also renews the vertices without a path step that have drifted this fraction of
#: the way off their paths: they drift at about the same speed and would each break alone, one
#: pass a substep (docs/design/cloth_contacts.md, "Two layered garments, after the shake"; with
#: the affine common motion, 0.75 renews fewer at a time: two layered garments 1.6 passes a frame
#: and 23-25 ms of detection against 1.0 and 27-31 at 0.5, 2.4 and 23 at 0.85, 5.9 and 34 at 0.95)
RENEW_STILL_AT = 0.75


#: the common motion's fit and medians look at at most about this many vertices (every k-th):
#: any map keeps the deviation bound sound, the medians only have to be ones that a few far-off
#: vertices cannot move (six medians over all 10k vertices of two garments were ~0.6 ms a substep)
MEDIAN_SAMPLE = 1024


@njit(inline="always", **_JIT)
def sample_stride(n):
    """Every how many vertices the common motion's fit and medians look at."""
    return max(1, n // MEDIAN_SAMPLE)


@njit(**_JIT)
def path_steps(x_start, x_pred, tolerance, slow_substeps, out):
    """Per vertex, the step its path takes per substep: this substep's predicted step less the
    common one (the per-axis median of the steps of every k-th vertex,
    :data:`MEDIAN_SAMPLE`; :func:`path_deviations` removes the common motion),
    zero when it would not take the vertex ``tolerance`` (``margin / 2``) off in
    ``slow_substeps`` (:data:`SLOW_SUBSTEPS`) substeps.

    Paths along the absolute steps, set at different substeps of a swaying garment, took
    different common velocities and drifted apart though the cloth moved as one; and the slow
    vertices' paths, a window long, listed pairs that the cloth's own motion never brings
    together (docs/design/cloth_contacts.md, "Cost")."""
    n = x_start.shape[0]
    if n == 0:
        return
    for i in range(n):
        for d in range(3):
            out[i, d] = x_pred[i, d] - x_start[i, d]
    k = sample_stride(n)
    c0, c1, c2 = np.median(out[::k, 0]), np.median(out[::k, 1]), np.median(out[::k, 2])
    slow = tolerance / slow_substeps
    for i in range(n):
        r0, r1, r2 = out[i, 0] - c0, out[i, 1] - c1, out[i, 2] - c2
        if r0 * r0 + r1 * r1 + r2 * r2 < slow * slow:
            r0 = r1 = r2 = 0.0
        out[i, 0], out[i, 1], out[i, 2] = r0, r1, r2


@njit(**_JIT)
def _window_paths(step, edge_length, window_max, path):
    """The window of :meth:`CandidateLists._window_for` (returned) and each vertex's path over it
    (``path``): its step less the centre of the steps' box, times the window."""
    n = step.shape[0]
    lo = np.full(3, np.inf)
    hi = np.full(3, -np.inf)
    for i in range(n):
        for d in range(3):
            lo[d] = min(lo[d], step[i, d])
            hi[d] = max(hi[d], step[i, d])
    centre = 0.5 * (lo + hi) if n else np.zeros(3)
    speed2 = 0.0
    for i in range(n):
        r2 = 0.0
        for d in range(3):
            r2 += (step[i, d] - centre[d]) ** 2
        speed2 = max(speed2, r2)
    speed = np.sqrt(speed2)
    window = window_max if speed * window_max <= edge_length else max(1, int(edge_length / speed))
    for i in range(n):
        for d in range(3):
            path[i, d] = window * (step[i, d] - centre[d])
    return window


@njit(inline="always", **_JIT)
def _residual(x, x_det, step, s, G, i):
    """x_i - (I + G) P_i, P_i = x_det_i + s step_i: vertex i's offset from its mapped path."""
    p0 = x_det[i, 0] + s * step[i, 0]
    p1 = x_det[i, 1] + s * step[i, 1]
    p2 = x_det[i, 2] + s * step[i, 2]
    return (
        x[i, 0] - (p0 + G[0, 0] * p0 + G[0, 1] * p1 + G[0, 2] * p2),
        x[i, 1] - (p1 + G[1, 0] * p0 + G[1, 1] * p1 + G[1, 2] * p2),
        x[i, 2] - (p2 + G[2, 0] * p0 + G[2, 1] * p1 + G[2, 2] * p2),
    )


@njit(**_JIT)
def _fit_affine(x_det, step, since, x_a, k):
    """G of the least-squares fit x_a ~ (I + G) P + b over every k-th vertex (P the paths'
    positions at x_a), ridge-regularised so that the normal direction of a flat sheet (no spread
    of P along it) stays as it is."""
    n = x_det.shape[0]
    m = (n + k - 1) // k
    p = np.empty((m, 3))  # the sampled paths' positions and x_a - P, then both centred
    u = np.empty((m, 3))
    for j in range(m):
        i = j * k
        for ax in range(3):
            p[j, ax] = x_det[i, ax] + since[i] * step[i, ax]
            u[j, ax] = x_a[i, ax] - p[j, ax]
    for ax in range(3):
        p[:, ax] -= p[:, ax].mean()
        u[:, ax] -= u[:, ax].mean()
    S = np.zeros((3, 3))
    R = np.zeros((3, 3))
    for j in range(m):
        for r in range(3):
            for c in range(3):
                S[r, c] += p[j, r] * p[j, c]
                R[r, c] += u[j, r] * p[j, c]
    ridge = 1e-6 * (S[0, 0] + S[1, 1] + S[2, 2]) + 1e-300
    for ax in range(3):
        S[ax, ax] += ridge
    # G = R S^-1 by the adjugate (S symmetric, positive definite with the ridge): Numba's
    # np.linalg and matrix product need SciPy's LAPACK / BLAS, which Blender does not ship
    a, b, c, d, e, f = S[0, 0], S[0, 1], S[0, 2], S[1, 1], S[1, 2], S[2, 2]
    inv = np.empty((3, 3))
    inv[0, 0], inv[0, 1], inv[0, 2] = d * f - e * e, c * e - b * f, b * e - c * d
    inv[1, 1], inv[1, 2], inv[2, 2] = a * f - c * c, b * c - a * e, a * d - b * b
    inv[1, 0], inv[2, 0], inv[2, 1] = inv[0, 1], inv[0, 2], inv[1, 2]
    det = a * inv[0, 0] + b * inv[1, 0] + c * inv[2, 0]
    G = np.zeros((3, 3))
    for r in range(3):
        for col in range(3):
            G[r, col] = (R[r, 0] * inv[0, col] + R[r, 1] * inv[1, col] + R[r, 2] * inv[2, col]) / det
    return G


@njit(**_JIT)
def path_deviations(x_det, step, since, x_a, x_b, affine, out):
    """Per vertex, its distance from where its own straight path puts it, up to a common map
    ``A P + b`` of the paths' positions P (``x_det + since step`` at x_a, one step further at x_b;
    ``since``: substeps since that vertex's path was set). ``A = I + G``: the identity, or with
    ``affine`` fitted by least squares at x_a (:func:`_fit_affine`); ``b`` per end the per-axis
    median of ``x - A P`` over every k-th vertex (:data:`MEDIAN_SAMPLE`). ``out``
    gets the larger of the two ends' distances; returns ``(G, b at x_a, |G|)``, ``|G|`` the
    Frobenius norm (at least the spectral one).

    At either end two vertices' placement is within ``out_i + out_j`` of the mapped placement of
    their paths, and so it is in between: one ``A`` for both ends keeps ``A P + b`` linear over
    the substep, as the motion from x_a to x_b is. An affine map takes a point and a triangle (two
    segments) to the point and the triangle of the mapped vertices, so their distance shrinks by
    at most the factor ``1 - |G|``: what :meth:`CandidateLists._common_motion` pays for. Why
    affine: a garment swinging slowly about its pinned top rotates and shears against any one
    translation, so its still vertices leave their paths together (on the two layered garments,
    18.9 % of the vertices more than 2 mm off after 40 substeps with a translation, 0.43 % with an
    affine map; docs/design/cloth_contacts.md). Why the median: a few far-off vertices cannot move
    it (the centre of the deviations' box, used before, followed a single vertex 2 cm off and put
    every other vertex 1 cm off its path)."""
    n = x_det.shape[0]
    G = np.zeros((3, 3))
    b = np.zeros(3)
    if n == 0:
        return G, b, 0.0
    k = sample_stride(n)
    if affine:
        G = _fit_affine(x_det, step, since, x_a, k)
    m = (n + k - 1) // k
    res = np.empty((6, m))  # the sampled vertices' residuals at both ends
    for j in range(m):
        i = j * k
        res[0, j], res[1, j], res[2, j] = _residual(x_a, x_det, step, since[i], G, i)
        res[3, j], res[4, j], res[5, j] = _residual(x_b, x_det, step, since[i] + 1, G, i)
    c = np.empty(6)
    for a in range(6):
        c[a] = np.median(res[a])
    for i in range(n):
        d0, d1, d2 = _residual(x_a, x_det, step, since[i], G, i)
        e0, e1, e2 = _residual(x_b, x_det, step, since[i] + 1, G, i)
        d0, d1, d2, e0, e1, e2 = d0 - c[0], d1 - c[1], d2 - c[2], e0 - c[3], e1 - c[4], e2 - c[5]
        out[i] = np.sqrt(max(d0 * d0 + d1 * d1 + d2 * d2, e0 * e0 + e1 * e1 + e2 * e2))
    for d in range(3):
        b[d] = c[d]
    return G, b, np.sqrt(np.sum(G * G))


@njit(**_JIT)
def touching(marked, prims):
    """Per primitive (rows of vertex numbers), whether any of its vertices is ``marked``."""
    out = np.zeros(prims.shape[0], dtype=np.bool_)
    for p in range(prims.shape[0]):
        for c in range(prims.shape[1]):
            if marked[prims[p, c]]:
                out[p] = True
                break
    return out


@njit(**_JIT)
def merge_pairs(old_a, old_b, old_side, old_held, old_keys, drop_a, drop_b, new_a, new_b, new_side, new_held, new_keys):
    """The pairs of a partial re-detection as one list in key order: the old pairs (a, b, side,
    held, key; sorted by key) whose ``drop_a[a]`` and ``drop_b[b]`` are both false, merged with
    the new ones (sorted by key, disjoint from the kept ones). Linear in the lists' length: the
    kept pairs are neither sorted nor given sides again."""
    n_old = old_keys.shape[0]
    n_new = new_keys.shape[0]
    keep = np.empty(n_old, dtype=np.bool_)
    total = n_new
    for i in range(n_old):
        keep[i] = not (drop_a[old_a[i]] or drop_b[old_b[i]])
        if keep[i]:
            total += 1
    width = old_side.shape[1]
    out_a = np.empty(total, dtype=np.int64)
    out_b = np.empty(total, dtype=np.int64)
    out_side = np.empty((total, width))
    out_held = np.empty(total, dtype=np.bool_)
    out_keys = np.empty(total, dtype=np.int64)
    i = 0
    j = 0
    for k in range(total):
        while i < n_old and not keep[i]:
            i += 1
        if j < n_new and (i >= n_old or new_keys[j] < old_keys[i]):
            out_a[k], out_b[k], out_held[k], out_keys[k] = new_a[j], new_b[j], new_held[j], new_keys[j]
            for c in range(width):
                out_side[k, c] = new_side[j, c]
            j += 1
        else:
            out_a[k], out_b[k], out_held[k], out_keys[k] = old_a[i], old_b[i], old_held[i], old_keys[i]
            for c in range(width):
                out_side[k, c] = old_side[i, c]
            i += 1
    return out_a, out_b, out_side, out_held, out_keys


#: the window of a vertex without a path step: none (its deviation alone ends its path)
WINDOW_STILL = 1 << 40


def _vertex_windows(step, window):
    """Each vertex's window: ``window`` for a vertex with a path step, none (WINDOW_STILL) for one
    without. A vertex with no step stays put relative to the common motion, which its deviation
    alone checks: a pair of two such vertices keeps its relative placement, and a pair with a
    moving vertex ends with that vertex's window (the windows that ended were all of vertices
    without a step: 50-110 of the two layered garments' vertices a substep, each a partial pass)."""
    still = ~np.any(step != 0.0, axis=1)
    return np.where(still, WINDOW_STILL, window)


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
        self._step = np.zeros((n, 3))  # this substep's path steps (:func:`path_steps`)
        #: the largest contact distance plus the margin: how far apart a pair not listed was
        self._reach = float(mesh.thickness.max(initial=0.0)) + self.margin_m

    _STATE = (
        "cand",
        "_vt_keys",
        "_ee_keys",
        "_x_det",
        "_det_step",
        "_since",
        "_window",
        "_deviation",
    )

    def snapshot(self) -> tuple:
        """The lists' state (copies), for :meth:`restore`: a frame run again starts from the lists,
        paths and remembered sides its first run started from (a crossed run refreshes sides)."""
        copy = lambda value: value.copy() if isinstance(value, np.ndarray) else value
        cand = None if self.cand is None else type(self.cand)(*(copy(a) for a in self.cand))
        return (cand,) + tuple(copy(getattr(self, name)) for name in self._STATE[1:])

    def restore(self, state: tuple) -> None:
        for name, value in zip(self._STATE, state):
            setattr(self, name, value)

    def refresh_sides(self, x, moved) -> None:
        """The pairs with a vertex in ``moved`` (n,) bool take their sides from x: after an
        untangling (:mod:`.untangle`) the sides remembered while the pair was crossed would push
        it back through."""
        c, m = self.cand, self.mesh
        if c is None:
            return
        vt = np.flatnonzero(moved[c.vt_vertex] | touching(moved, m.tris)[c.vt_triangle])
        if vt.shape[0]:
            side = np.empty(vt.shape[0])
            cc.initial_vt_sides(x, m.tris, c.vt_vertex[vt], c.vt_triangle[vt], side)
            c.vt_side[vt] = side
        edge_moved = touching(moved, m.edges)
        ee = np.flatnonzero(edge_moved[c.ee_a] | edge_moved[c.ee_b])
        if ee.shape[0]:
            side = np.empty((ee.shape[0], 3))
            cc.initial_ee_sides(x, m.edges, c.ee_a[ee], c.ee_b[ee], side)
            c.ee_side[ee] = side

    def update(self, x_start, x_pred, inv_mass, stats: dict) -> None:
        """Before a substep's narrow phase (``x_start``: positions at the substep start,
        ``x_pred``: predicted): detect again (all pairs, or the pairs of the vertices that left
        their paths) if any vertex left its path or its window ended; a partial pass also takes
        the still vertices past :data:`RENEW_STILL_AT` of the way (renewing a path early is always
        sound). Counts in ``stats``."""
        path_steps(x_start, x_pred, 0.5 * self.margin_m, SLOW_SUBSTEPS, self._step)
        if self.cand is None:
            self.detect(x_start, self._step, inv_mass, stats)
            return
        self._since += 1
        common, tolerance, affine = self._common_motion(x_start, x_pred)
        stats["affine_substeps"] += int(affine)
        broken = (self._since + 1 > self._window) | (self._deviation > tolerance)
        if not broken.any():
            return
        broken |= (self._window >= WINDOW_STILL) & (self._deviation > RENEW_STILL_AT * tolerance)
        count = int(np.count_nonzero(broken))
        if not self.partial_detection or count > PARTIAL_FRACTION_MAX * broken.shape[0]:
            self.detect(x_start, self._step, inv_mass, stats)
        else:
            self.detect_partial(x_start, self._step, inv_mass, broken, common, stats)

    def _common_motion(self, x_start, x_pred):
        """This substep's deviations (into ``_deviation``) from the paths up to one affine map ``A
        P + b`` (:func:`path_deviations`), and their tolerance ``(margin - |A - I| (d + margin)) /
        2``, d the largest contact distance: a pair not listed was farther than ``d + margin``
        along its paths, the map brings it at most ``|A - I| (d + margin)`` closer, and the two
        vertices' deviations the rest. When the map has strayed so far that nothing would be
        left (``|A - I| >= margin / (d + margin)``), a translation (tolerance ``margin / 2``).
        Returns ``((A, b), tolerance, affine)``: the map at the substep start and whether it is
        affine. Measured against a translation always (two layered garments: 1.5 partial passes a
        frame against 0.375 whole and 0.375 partial ones, the detection 40 -> 21-26 ms a frame)
        and against the better of the two at each substep (no better, two kernels a substep)."""
        args = (self._x_det, self._det_step, self._since, x_start, x_pred)
        G, b, norm = path_deviations(*args, True, self._deviation)
        tolerance = 0.5 * (self.margin_m - norm * self._reach)
        if tolerance > 0.0 and np.isfinite(norm):  # not finite: no spread to fit (one vertex)
            return (np.eye(3) + G, b), tolerance, True
        _, b, _ = path_deviations(*args, False, self._deviation)
        return (np.eye(3), b), 0.5 * self.margin_m, False

    def _window_for(self, step):
        """Substeps a list may serve when every vertex keeps ``step``: no path, relative to the
        common motion, longer than an edge (at most WINDOW_MAX); and the paths over that window."""
        path = np.empty_like(step)
        return _window_paths(step, self.edge_length, WINDOW_MAX, path), path

    def _cell(self):
        """Two edge lengths: a query (a box about an edge wide, grown by the largest half-extent
        of the grid's boxes) then visits 2-3 cells per axis instead of ~4, most of them empty
        around a sheet (the 48 x 48 garment's frame: 0.78 x the CPU time with one edge)."""
        return max(2.0 * self.edge_length, float(self.mesh.thickness.max()) + self.margin_m)

    def detect(self, x_start, step, inv_mass, stats: dict) -> None:
        """New lists for the coming substeps, the sides of pairs seen before kept.

        Every vertex is assumed to go on moving by ``step`` a substep (relative to the common motion,
        :func:`path_steps`) for ``window`` substeps, short enough that no vertex's path, relative to
        the common motion, is longer than an edge; the lists then hold every pair that can come
        within reach along those paths (see :func:`~.candidate_search.vertex_triangle_candidates`).
        They stay valid while every vertex keeps within about ``margin / 2`` of its path (up to a
        common affine map, :meth:`_common_motion`) and the window lasts. A falling flap next to a
        part at rest thus gets long paths only where the motion is, instead of one margin grown
        for the whole cloth."""
        x = x_start
        step = step.copy()
        window, path = self._window_for(step)
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
        self._window[:] = _vertex_windows(step, window)
        stats["detections"] += 1

    def detect_partial(self, x_start, step, inv_mass, broken, common, stats: dict) -> None:
        """Re-detect only the pairs with a vertex in ``broken`` (its path left the margin or its
        window ended), keeping the rest of the lists.

        The broken vertices get new paths from where they are, taken back through this substep's
        common map ``common = (A, b)`` (origin ``A^-1 (x - b)``), so that every path lives in one
        space and every vertex's deviation is measured against one map. The new pairs are found
        in that space, with every other vertex at its path's position now (the map of it within
        the tolerance of where it is) and following its own path; the pairs of two unbroken
        vertices keep the proof of the detection that found them (both still within the
        tolerance of the paths it used), so no pair can come within reach unseen. A pair's list
        entry lasts as long as the window of its later-set vertex, whose end re-detects it."""
        m = self.mesh
        x = x_start
        idx = np.flatnonzero(broken)
        A, b = common
        # new origins in the paths' space: A P + b = x now
        self._x_det[idx] = np.linalg.solve(A, (x[idx] - b).T).T
        self._det_step[idx] = step[idx]
        self._since[idx] = 0
        window, path = self._window_for(self._det_step)
        self._window[idx] = _vertex_windows(step[idx], window)
        q = self._x_det + self._since[:, None] * self._det_step  # the paths' positions now (their space)
        tri_hit = touching(broken, m.tris)
        edge_hit = touching(broken, m.edges)
        args = (q, inv_mass, m, self.margin_m, self._cell(), path)
        tri_boxes = cs.swept_triangle_boxes(q, path, m)
        va, ta = cs.vertex_triangle_candidates(*args, rows=idx, tri_boxes=tri_boxes)
        # the unbroken vertices against the few triangles with a broken corner, from those triangles
        vb, tb = cs.triangle_vertex_candidates(
            *args, np.flatnonzero(tri_hit), np.flatnonzero(~broken), tri_boxes=tri_boxes
        )
        if self.edge_edge:
            ea, eb = cs.edge_edge_candidates(*args, rows=np.flatnonzero(edge_hit))
        else:
            ea = eb = np.zeros(0, dtype=np.int64)
        self._merge(x, np.concatenate([va, vb]), np.concatenate([ta, tb]), ea, eb, broken, tri_hit, edge_hit)
        stats["partial_detections"] += 1
        stats["redetected_vertices"] += int(idx.shape[0])

    def _new_pairs(self, x, cv, ct, ea, eb):
        """New pairs sorted by key, with their sides at x (a pair in the lists before keeps its
        remembered side and held flag): (vt, ee), each [first, second, side (K, 1 or 3), held, keys]."""
        m, cand = self.mesh, self.cand
        vt_keys = cv * m.tris.shape[0] + ct
        order = np.argsort(vt_keys, kind="stable")
        cv, ct, vt_keys = cv[order], ct[order], vt_keys[order]
        vt_side = np.empty(cv.shape[0])
        cc.initial_vt_sides(x, m.tris, cv, ct, vt_side)
        ee_keys = ea * m.edges.shape[0] + eb
        order = np.argsort(ee_keys, kind="stable")
        ea, eb, ee_keys = ea[order], eb[order], ee_keys[order]
        ee_side = np.empty((ea.shape[0], 3))
        cc.initial_ee_sides(x, m.edges, ea, eb, ee_side)
        vt_held = np.zeros(cv.shape[0], dtype=np.bool_)
        ee_held = np.zeros(ea.shape[0], dtype=np.bool_)
        if cand is not None:
            cc.carry_sides(self._vt_keys, cand.vt_side, cand.vt_held, vt_keys, vt_side, vt_held)
            cc.carry_sides(self._ee_keys, cand.ee_side, cand.ee_held, ee_keys, ee_side, ee_held)
        return [cv, ct, vt_side.reshape(-1, 1), vt_held, vt_keys], [ea, eb, ee_side, ee_held, ee_keys]

    def _merge(self, x, cv, ct, ea, eb, broken, tri_hit, edge_hit):
        """The lists after a partial re-detection: the kept pairs (neither vertex broken nor
        triangle or edge touching one) as they were, merged with the new pairs in key order; the
        kept pairs are not sorted or given sides again (a partial pass costs what it renews)."""
        vt, ee = self._new_pairs(x, cv, ct, ea, eb)
        c = self.cand
        cv, ct, vt_side, vt_held, self._vt_keys = merge_pairs(
            c.vt_vertex, c.vt_triangle, c.vt_side.reshape(-1, 1), c.vt_held, self._vt_keys, broken, tri_hit, *vt
        )
        ea, eb, ee_side, ee_held, self._ee_keys = merge_pairs(
            c.ee_a, c.ee_b, c.ee_side, c.ee_held, self._ee_keys, edge_hit, edge_hit, *ee
        )
        self.cand = cc.new_candidates(cv, ct, vt_side, ea, eb, ee_side, vt_held, ee_held)

    def _install(self, x, cv, ct, ea, eb):
        """Make the pairs of a whole detection the lists (sorted by key, sides at x; a pair found
        before keeps its remembered side and held flag)."""
        vt, ee = self._new_pairs(x, cv, ct, ea, eb)
        self.cand = cc.new_candidates(vt[0], vt[1], vt[2], ee[0], ee[1], ee[2], vt[3], ee[3])
        self._vt_keys, self._ee_keys = vt[4], ee[4]
