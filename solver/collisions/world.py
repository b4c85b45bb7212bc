"""One collision world per scene: several cloths stepped in lockstep, colliding with each other
and with themselves (vertex-triangle and edge-edge contacts, :mod:`.cloth_contacts`).

Each cloth keeps its own elastic solve and its own body contacts (its ``contact_handler``);
the world owns what crosses cloths. The cloths' positions, velocities and substep-start
positions become row blocks of three world arrays (the cloths' ``x``, ``v`` and substep-start
arrays are views into them), so the contact kernels see every cloth at once without copies.
A frame::

    every cloth: validate, snapshot                       (Cloth._begin_step)
    per substep, every cloth in turn at each sync point   (Cloth._frame_phases):
        predict + body narrow phase  -> world: re-detect if the displacement bound broke,
                                               narrow phase of the candidates
        per iteration: elastic sets (the cloths side by side, one thread each: _elastic_pool)
                                     -> world: cloth contacts, then the cloth's body contacts,
                                               ``contact_rounds`` times (the body last)
        velocities, friction
    every cloth checked; one failure rolls every cloth back
    crossings counted: more guarded ones than at the frame start -> untangled (:mod:`.untangle`);
        still more, or a cloth stretched past its ``refine_stretch_above`` -> every cloth (and the
        candidate lists) back to the frame start, the frame again at twice the substeps
        (``crossing_refinements`` / each cloth's ``stretch_refinements`` times)
    crossed pairs left after the last run: untangled
    every cloth commits

The candidate lists and their windows of substeps: :mod:`.candidate_lists`.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

import numba
import numpy as np

from ..cloth import _SOLVER_LOCK, Cloth
from ..diagnostics import FrameDiagnostics
from ..errors import ClothInputError, SimulationError
from . import candidate_search as cs
from . import cloth_contacts as cc
from .candidate_lists import CandidateLists
from .intersections import TriangleGroups, list_crossings
from .untangle import untangle

#: the narrow phase's reach slack per vertex (``adaptive_slack``): twice how far the last
#: substep's solve carried the vertex from its prediction at a pass of the cloth contacts, plus
#: this floor (m), at most the margin
SLACK_FLOOR_M = 0.0005
SLACK_FACTOR = 2.0

#: the candidate lists' margin is at least this many substeps of depenetration
#: (``depenetration_m_s`` x the substep): the tolerance of a path is half the margin, and a vertex
#: pushed out of an old overlap leaves its straight path by up to one substep of depenetration at
#: once, so with the thickness alone as the margin (1.5 mm: 0.75 mm of tolerance against 2.1 mm
#: a substep at 10 substeps and 24 fps) such vertices were renewed at nearly every substep
#: (docs/design/cloth_contacts.md, "The lists' margin apart from the solve's")
DETECTION_MARGIN_SUBSTEPS = 2.0
#: ... but at most this fraction of the mean edge (unless the solve's margin is more): a reach
#: near half an edge lists every vertex's in-plane neighbours ("Cost"), and at 5 substeps the
#: 64 x 64 sheet of 4 mm with two substeps of depenetration (8.3 mm) took 1.4-1.5 x the time
DETECTION_MARGIN_EDGE_FRACTION = 0.25


@dataclass
class ClothCollision:
    """How one cloth takes part in a :class:`CollisionWorld`.

    ``thickness_m``: the cloth's thickness; two cloths keep half the sum of their thicknesses
    between their mid-surfaces, two layers of one cloth keep ``thickness_m``.
    ``layer``: higher numbers are outer layers; in a contact of two layers the lower one moves
    as if ``CollisionWorld.layer_mass_scale`` times heavier (Vellum's layer shock).
    ``self_collision``: the cloth collides with itself. ``collide_with_cloths``: with the others.
    ``friction``: Coulomb coefficient (a pair uses the geometric mean of both cloths').
    """

    thickness_m: float = 0.004
    layer: int = 0
    self_collision: bool = True
    collide_with_cloths: bool = True
    friction: float = 0.3

    def validate(self, what: str) -> None:
        if not (math.isfinite(self.thickness_m) and self.thickness_m > 0.0):
            raise ClothInputError(f"{what}: thickness_m must be finite and > 0 (e.g. 0.004), got {self.thickness_m}")
        if not isinstance(self.layer, (int, np.integer)):
            raise ClothInputError(f"{what}: layer must be an integer, got {self.layer!r}")
        if not (math.isfinite(self.friction) and self.friction >= 0.0):
            raise ClothInputError(f"{what}: friction must be finite and >= 0, got {self.friction}")


def _advance(phases):
    """One cloth's frame generator to its next sync point (on a pool thread)."""
    return next(phases, None)


class CollisionWorld:
    """Steps ``cloths`` together; every cloth collides with every other and with itself.

    ``collisions``: one :class:`ClothCollision` per cloth (default: all on, 4 mm, layer 0).
    ``layer_mass_scale``: how much heavier the lower layer of a contact acts (>= 1; 1 = off).
    ``contact_rounds``: cloth-contact + body-contact passes per iteration (>= 1).
    ``margin_m``: how much farther than the contact distance plus their travel the narrow phase may
    solve a pair (the cap of ``adaptive_slack``; None: the largest thickness; half an edge, the
    default before, listed every vertex's in-plane neighbours: docs/design/cloth_contacts.md,
    "Cost"). ``detection_margin_m``: how much farther than the contact distance a pair is listed
    (None: ``margin_m``, or two substeps of depenetration where that is more, at most a quarter of
    the mean edge, :data:`DETECTION_MARGIN_SUBSTEPS`; at least ``margin_m``): a wider list holds more pairs and
    lasts longer, and it does not change which pairs the narrow phase solves, which only ever
    reach ``margin_m``. ``count_intersections``: count the triangle pairs
    (sharing no vertex) that cross each other at every frame end (``last_stats["intersections"]``;
    ``"intersections_guarded"``: those of them the contacts keep apart, i.e. not the pairs of a cloth
    with self-collision off, nor of a cloth that opts out of cloth-cloth collisions).
    ``edge_edge``: False keeps the vertex-triangle contacts only (for comparisons).
    ``depenetration_m_s``: how fast a pair that starts a substep overlapping is pushed apart (m/s;
    the overlap a substep's own motion made is undone at once; see
    :func:`.cloth_contacts.solve_vertex_triangle`). ``partial_detection``: when some vertices leave
    their paths, re-detect only their pairs (:meth:`.CandidateLists.detect_partial`) instead of
    the whole list. ``adaptive_slack``: how much farther than the contact distance plus their
    predicted travel a pair is solved: per vertex, 0.5 mm plus twice how far the last substep's
    solve carried it from its prediction, at most ``margin_m`` (:func:`.cloth_contacts.solve_slack`;
    False: ``margin_m`` for every pair, as before stop 42: two garments hanging 6 mm apart, 2 mm
    beyond their contact distance, then solved 65k pairs a substep that never pushed).

    ``crossing_refinements``: a frame that ends with more crossing triangle pairs that the contacts
    keep apart (``"intersections_guarded"``) than it started with is rolled back and run again
    with twice the substeps, up to this many times (3: at most 8x the substeps; 0 = off). Turning
    it on counts the crossings at every frame end. The cause it answers: a fast fold at too few
    substeps (docs/design/cloth_contacts.md, "Crossings on the garment"), paid for only in the
    frames that fold. A cloth whose ``SolverSettings`` ask for it (``stretch_refinements``) also
    sends the world's frame back when it ends stretched. Three by default: at most 4x left crossed
    pairs in some frames of a garment draped over a body under either rule of the coarse links
    (up to 8 pairs in 6 of 47 frames, or 14 in 28 frames), 8x none (docs/design/cloth_contacts.md,
    "Crossed frames run again").

    ``untangle_rounds``: a frame that ends with crossed pairs the contacts keep apart is
    untangled (:mod:`.untangle`: intersection contour minimization, each vertex at most the
    smallest contact distance a round), for up to this many rounds (0 = off). With
    ``untangle_first`` (the default) that comes before the frame is run again: a frame whose new
    crossings it undoes is kept, one it does not is run again with more substeps as before, and
    the last run is untangled too. A crossing the runs at more substeps did not avoid used to stay
    for good (no contact is active for an edge through a triangle's corner); a landing fold that
    crossed was run at up to 8 x the substeps (the 48 x 48 garment: 1.6-1.8 x the time of
    untangling first, the 44 x 44: 2.8 x, and a pair left crossed from frame 18 on: docs/design/
    cloth_contacts.md, "Untangling").

    Four rounds by default: a layer squeezed between the body and an outer layer (two sheets
    draped on a sphere, 24 x 24 each) crossed itself in 5 triangle pairs at a crumpled border
    with two rounds, in none with four.
    """

    def __init__(
        self,
        cloths,
        collisions=None,
        *,
        layer_mass_scale: float = 4.0,
        contact_rounds: int = 4,
        margin_m: float | None = None,
        count_intersections: bool = False,
        edge_edge: bool = True,
        depenetration_m_s: float = 0.5,
        partial_detection: bool = True,
        crossing_refinements: int = 3,
        adaptive_slack: bool = True,
        untangle_rounds: int = 16,
        untangle_first: bool = True,
        detection_margin_m: float | None = None,
    ):
        self.cloths: list[Cloth] = list(cloths)
        if not self.cloths or not all(isinstance(c, Cloth) for c in self.cloths):
            raise ClothInputError("CollisionWorld needs a non-empty list of Cloth objects")
        if len({id(c) for c in self.cloths}) != len(self.cloths):
            raise ClothInputError("the same Cloth is listed twice in one CollisionWorld")
        if any(c.in_world for c in self.cloths):
            raise ClothInputError("a Cloth belongs to one CollisionWorld at most")
        if collisions is None:
            collisions = [ClothCollision() for _ in self.cloths]
        self.collisions = list(collisions)
        if len(self.collisions) != len(self.cloths):
            raise ClothInputError(f"{len(self.cloths)} cloths but {len(self.collisions)} ClothCollision settings")
        for k, s in enumerate(self.collisions):
            s.validate(f"cloth {k}")
        key = {(c.settings.substeps, c.settings.iterations, c.settings.fps) for c in self.cloths}
        if len(key) != 1:
            raise ClothInputError(
                f"the cloths of one CollisionWorld must share substeps, iterations and fps (got {sorted(key)})"
            )
        if not (math.isfinite(layer_mass_scale) and layer_mass_scale >= 1.0):
            raise ClothInputError(f"layer_mass_scale must be finite and >= 1, got {layer_mass_scale}")
        if not (isinstance(contact_rounds, (int, np.integer)) and contact_rounds >= 1):
            raise ClothInputError(f"contact_rounds must be an integer >= 1, got {contact_rounds!r}")
        if not (math.isfinite(depenetration_m_s) and depenetration_m_s >= 0.0):
            raise ClothInputError(f"depenetration_m_s must be finite and >= 0, got {depenetration_m_s}")
        if not (isinstance(crossing_refinements, (int, np.integer)) and 0 <= crossing_refinements <= 4):
            raise ClothInputError(f"crossing_refinements must be an integer from 0 to 4, got {crossing_refinements!r}")
        self.crossing_refinements = int(crossing_refinements)
        if not (isinstance(untangle_rounds, (int, np.integer)) and untangle_rounds >= 0):
            raise ClothInputError(f"untangle_rounds must be an integer >= 0, got {untangle_rounds!r}")
        self.untangle_rounds = int(untangle_rounds)
        self.untangle_first = bool(untangle_first)
        #: crossing triangle pairs at the end of the last frame (None: not counted yet)
        self._crossings: int | None = None
        #: the last count of :meth:`_count_crossings` or :meth:`_untangle`: (all, guarded pairs' rows)
        self._crossed: tuple[int, np.ndarray] = (0, np.zeros((0, 2), dtype=np.int64))
        self.depenetration_m_s = float(depenetration_m_s)
        self._depenetration_m = 0.0
        self.layer_mass_scale = float(layer_mass_scale)
        self.contact_rounds = int(contact_rounds)
        self.count_intersections = (
            bool(count_intersections) or self.crossing_refinements > 0 or self.untangle_rounds > 0
        )
        self.edge_edge = bool(edge_edge)

        sizes = [c.x.shape[0] for c in self.cloths]
        projecting = any(c.options.fine_projection for c in self.cloths)  # see Cloth.contact_round_after_projection
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        n = int(self.offsets[-1])
        self.x = np.empty((n, 3))
        self.v = np.empty((n, 3))
        self.x_start = np.empty((n, 3))
        #: the cloths' ``contact_push`` rows (views): where the contacts pushed each vertex last substep
        self.contact_push = np.zeros((n, 3))
        self._pool: ThreadPoolExecutor | None = None  # built on the first frame that can use it (_elastic_pool)
        for k, c in enumerate(self.cloths):
            o, e = self.offsets[k], self.offsets[k + 1]
            self.x[o:e] = c.x
            self.v[o:e] = c.v
            self.x_start[o:e] = c._x_substep_start
            c.x, c.v, c._x_substep_start = self.x[o:e], self.v[o:e], self.x_start[o:e]
            self.contact_push[o:e] = c.contact_push
            c.contact_push = self.contact_push[o:e]
            c.in_world = True
            c.contact_rounds = self.contact_rounds
            c.contact_round_after_projection = projecting
        self.inv_mass = np.concatenate([c.inv_mass for c in self.cloths])
        #: the cloths whose stretch limit reads the contact pushes (``ClothOptions.stretch_limit_contacts``)
        self._push_cloths = {
            k for k, c in enumerate(self.cloths) if c.hierarchy is not None and c.options.stretch_limit_contacts
        }
        tris = np.concatenate([c.topology.triangles + self.offsets[k] for k, c in enumerate(self.cloths)])
        tris = tris[~np.concatenate([c.topology.degenerate_triangle for c in self.cloths])]
        edges = np.concatenate([c.topology.edges + self.offsets[k] for k, c in enumerate(self.cloths)])
        per_vertex = lambda values, dtype: np.repeat(np.asarray(values, dtype=dtype), sizes)
        self.mesh = cs.rest_exclusions(
            cc.ContactMesh(
                tris=np.ascontiguousarray(tris, dtype=np.int64),
                edges=np.ascontiguousarray(edges, dtype=np.int64),
                thickness=per_vertex([s.thickness_m for s in self.collisions], np.float64),
                layer=per_vertex([s.layer for s in self.collisions], np.int64),
                cloth=per_vertex(range(len(self.cloths)), np.int64),
                friction=per_vertex([s.friction for s in self.collisions], np.float64),
                self_ok=np.array([s.self_collision for s in self.collisions], dtype=np.bool_),
                cross_ok=np.array([s.collide_with_cloths for s in self.collisions], dtype=np.bool_),
                rest=np.ascontiguousarray(np.concatenate([c.rest_positions for c in self.cloths])),
            )
        )
        #: which crossings a refinement can answer: pairs the cloth contacts keep apart
        self._triangle_groups = TriangleGroups(
            self.mesh.cloth[self.mesh.tris[:, 0]], self.mesh.self_ok, self.mesh.cross_ok
        )
        edge_len = float(np.mean(np.linalg.norm(self.x[edges[:, 1]] - self.x[edges[:, 0]], axis=1)))
        self.edge_length = edge_len
        self.margin_m = float(self.mesh.thickness.max()) if margin_m is None else float(margin_m)
        if not (math.isfinite(self.margin_m) and self.margin_m > 0.0):
            raise ClothInputError(f"margin_m must be finite and > 0, got {margin_m}")
        if detection_margin_m is None:
            substep_s = 1.0 / (self.cloths[0].settings.fps * self.cloths[0].settings.substeps)
            depenetration = DETECTION_MARGIN_SUBSTEPS * self.depenetration_m_s * substep_s
            detection_margin_m = max(self.margin_m, min(depenetration, DETECTION_MARGIN_EDGE_FRACTION * edge_len))
        self.detection_margin_m = float(detection_margin_m)
        if not (math.isfinite(self.detection_margin_m) and self.detection_margin_m >= self.margin_m):
            raise ClothInputError(
                f"detection_margin_m must be finite and at least margin_m ({self.margin_m}), got {detection_margin_m}"
            )
        self.lists = CandidateLists(self.mesh, self.detection_margin_m, edge_len, self.edge_edge, partial_detection)
        self._vt_rows = self._ee_rows = np.zeros(0, dtype=np.int64)
        self._vt_lam = self._ee_lam = np.zeros(0)
        #: per vertex, the outward normals of the body contacts it lies on, refreshed before each
        #: pass of the cloth contacts (:func:`.cloth_contacts._body_share`)
        self.body_normal = np.zeros((n, 3))
        #: per vertex, how far it is from its substep start less the pass's mean displacement
        #: (``_moved_common``), refreshed before each pass of the cloth contacts
        #: (:func:`.cloth_contacts._still_apart`)
        self.moved = np.zeros(n)
        self._moved_common = np.zeros(3)
        #: per vertex, the number of the last cloth-contact pass it moved in or after, and where
        #: it was when the last pass began (:func:`.cloth_contacts.stamp_moved`): a pass skips the
        #: pairs none of whose vertices moved since the pass before it (``skip_unmoved``)
        self.moved_stamp = np.zeros(n, dtype=np.int64)
        self._x_seen = np.zeros((n, 3))
        self._pass = 1
        self._first_pass = True
        self._last_pushed = 0
        #: A/B switch of that skip (exact: the same positions bit for bit with it off)
        self.skip_unmoved = True
        self.adaptive_slack = bool(adaptive_slack)
        self._x_pred = np.zeros((n, 3))  # this substep's prediction
        #: per vertex, how far this substep's solve has carried it from its prediction (NaN: not
        #: known, as after a frame rolled back: the next substep takes the whole margin)
        self._excess = np.full(n, np.nan)
        self._slack = np.full(n, self.margin_m)  # (per vertex; stays the margin without adaptive_slack)
        self._travel = np.zeros(n)  # per vertex, this substep's predicted travel (cc.vertex_travel)
        self.last_stats: dict = {}
        self.last_timings_ms: dict = {}
        #: per cloth, over the last frame's substeps: the most pairs that pushed in one substep with
        #: another cloth (``cloth_cloth``) and within the cloth (``self``); see :meth:`_count_pushing`
        self.last_pushing_pairs_max = {
            "cloth_cloth": np.zeros(len(self.cloths), dtype=np.int64),
            "self": np.zeros(len(self.cloths), dtype=np.int64),
        }

    # ------------------------------------------------------------------------------------------
    @property
    def partial_detection(self) -> bool:
        """Re-detect only the pairs of the vertices that left their paths (:mod:`.candidate_lists`)."""
        return self.lists.partial_detection

    @partial_detection.setter
    def partial_detection(self, on: bool) -> None:
        self.lists.partial_detection = bool(on)

    def _count_pushing(self):
        """Per cloth, the pairs of the substep just solved that pushed (multiplier > 0), split into
        pairs with another cloth and pairs within the cloth (a cross pair counts for both cloths);
        the frame keeps the largest count of its substeps (``last_pushing_pairs_max``)."""
        k = len(self.cloths)
        owner, cand = self.mesh.cloth, self.lists.cand
        if cand is None:
            return
        vt = self._vt_rows[self._vt_lam > 0.0]
        ee = self._ee_rows[self._ee_lam > 0.0]
        a = np.concatenate([owner[cand.vt_vertex[vt]], owner[self.mesh.edges[cand.ee_a[ee], 0]]])
        b = np.concatenate([owner[self.mesh.tris[cand.vt_triangle[vt], 0]], owner[self.mesh.edges[cand.ee_b[ee], 0]]])
        same = a == b
        cross = np.bincount(a[~same], minlength=k) + np.bincount(b[~same], minlength=k)
        own = np.bincount(a[same], minlength=k)
        m = self.last_pushing_pairs_max
        np.maximum(m["cloth_cloth"], cross, out=m["cloth_cloth"])
        np.maximum(m["self"], own, out=m["self"])

    def _predicted(self):
        t0 = time.perf_counter()
        self._count_pushing()  # the previous substep's pairs (their multipliers are reset below)
        self.lists.update(self.x_start, self.x, self.inv_mass, self.last_stats)
        t1 = time.perf_counter()
        if self.adaptive_slack:
            cc.solve_slack(self._excess, SLACK_FLOOR_M, SLACK_FACTOR, self.margin_m, self._slack)
        cc.vertex_travel(self.x_start, self.x, self._travel)
        args = (self.x_start, self.x, self.mesh, self.lists.cand, self._slack, self._travel)
        self._vt_rows = cc.vertex_triangle_narrow(*args)
        self._ee_rows = cc.edge_edge_narrow(*args)
        self._x_pred[:] = self.x
        self._first_pass = True
        self._vt_lam = np.zeros(self._vt_rows.shape[0])
        self._ee_lam = np.zeros(self._ee_rows.shape[0])
        st = self.last_stats
        st["vertex_triangle_active_max"] = max(st["vertex_triangle_active_max"], int(self._vt_rows.shape[0]))
        st["edge_edge_active_max"] = max(st["edge_edge_active_max"], int(self._ee_rows.shape[0]))
        t2 = time.perf_counter()
        self._tick("cloth_contacts_detection", t1 - t0)
        self._tick("cloth_contacts_narrow_phase", t2 - t1)

    def _solve(self):
        t0 = time.perf_counter()
        rows = bool(self._vt_rows.shape[0] or self._ee_rows.shape[0])
        if rows:
            self._pass += 1
            everything = self._first_pass or not self.skip_unmoved
            moved = cc.stamp_moved(self.x, self._x_seen, self.moved_stamp, self._pass - 1, everything)
            self._first_pass = False
            if not everything and moved == 0 and self._last_pushed == 0:
                # nothing pushed in the last pass and nothing moved since: this one would read the
                # same positions and do nothing (nor would the excess change)
                self.last_stats["passes_skipped"] += 1
                self._tick("cloth_contacts_solve", time.perf_counter() - t0)
                return
        if self.adaptive_slack:
            cc.track_excess(self.x, self._x_pred, self._excess)
        m, cand = self.mesh, self.lists.cand
        pushed = 0
        if rows:
            self._read_body_normals()
            self._moved_common = cc.distances_moved(self.x, self.x_start, self.moved)
        if self._vt_rows.shape[0]:
            pushed += cc.solve_vertex_triangle(
                self.x,
                self.x_start,
                self.inv_mass,
                m.tris,
                m.thickness,
                m.layer,
                m.friction,
                self.layer_mass_scale,
                self._depenetration_m,
                cand.vt_vertex,
                cand.vt_triangle,
                cand.vt_side,
                cand.vt_held,
                cand.vt_start,
                self._vt_rows,
                self._vt_lam,
                self.body_normal,
                cand.vt_clearance,
                self.moved,
                self._moved_common,
                self.moved_stamp,
                self._pass,
            )
        if self._ee_rows.shape[0]:
            pushed += cc.solve_edge_edge(
                self.x,
                self.x_start,
                self.inv_mass,
                m.edges,
                m.thickness,
                m.layer,
                m.friction,
                self.layer_mass_scale,
                self._depenetration_m,
                cand.ee_a,
                cand.ee_b,
                cand.ee_side,
                cand.ee_held,
                cand.ee_start,
                self._ee_rows,
                self._ee_lam,
                self.body_normal,
                cand.ee_clearance,
                self.moved,
                self._moved_common,
                self.moved_stamp,
                self._pass,
            )
        self.last_stats["pushes"] += pushed
        self._last_pushed = pushed
        self._tick("cloth_contacts_solve", time.perf_counter() - t0)

    def _read_body_normals(self) -> None:
        """``body_normal``: where each vertex lies on its cloth's body colliders now (zeros: free).
        The body contacts come after the cloth contacts in each round and push a vertex the cloth
        contacts moved into the body straight back out, through the layer over it; read here,
        the cloth contacts push that layer out instead (docs/design/cloth_contacts.md, "The body
        under the layers")."""
        self.body_normal.fill(0.0)
        for k, c in enumerate(self.cloths):
            touching = getattr(c.contact_handler, "add_touching_normals", None)
            if touching is not None:
                o, e = self.offsets[k], self.offsets[k + 1]
                touching(self.x[o:e], self.body_normal[o:e])

    def _count_crossings(self) -> tuple[int, int]:
        """Crossing triangle pairs at the frame end: all, and those the contacts keep apart (kept
        in ``_crossed`` with the latter's list, where an untangling starts from)."""
        t0 = time.perf_counter()
        self._crossed = list_crossings(self.x, self.mesh.tris, self._triangle_groups)
        self._tick("intersection_count", time.perf_counter() - t0)
        return self._crossed[0], self._crossed[1].shape[0]

    def _untangle(self) -> tuple[int, int]:
        """Untangle the crossed pairs the contacts keep apart (:func:`.untangle.untangle`, each
        vertex at most the smallest contact distance a round); a fully untangled world's pairs
        with a moved vertex take their sides from where they now are. Returns the crossing
        counts afterwards (all, guarded)."""
        t0 = time.perf_counter()
        step = float(self.mesh.thickness.min())
        before, after, rounds, moved, self._crossed = untangle(
            self.x, self.mesh.tris, self.inv_mass, self._triangle_groups, step, self.untangle_rounds, self._crossed
        )
        self.last_stats["untangled_pairs"] += max(before - after, 0)
        self.last_stats["untangle_rounds"] += rounds
        if after == 0 and self.lists.cand is not None:
            self.lists.refresh_sides(self.x, moved)
        self._tick("untangle", time.perf_counter() - t0)
        return self._crossed[0], after

    def _run_frame(self, states, scale: int) -> None:
        """Every cloth's frame phases in lockstep, ``scale`` times the substeps, the world's
        contacts at the sync points (see the module docstring)."""
        for s in states:
            s.substep_scale = scale
        self._depenetration_m = self.depenetration_m_s * states[0].frame_dt / (self.cloths[0].settings.substeps * scale)
        for counts in self.last_pushing_pairs_max.values():
            counts[:] = 0
        self._vt_rows = self._ee_rows = np.zeros(0, dtype=np.int64)  # (the last frame's were counted)
        self._vt_lam = self._ee_lam = np.zeros(0)
        phases = [
            c._frame_phases(s.frame_dt, s.kinematic_end, s.soft_end, s.timings, False, scale)
            for c, s in zip(self.cloths, states)
        ]
        pool = self._elastic_pool()
        last = None
        while True:
            if pool is not None and last == "predicted":  # the elastic sets: each cloth on a thread
                futures = [pool.submit(_advance, p) for p in phases]
                wait(futures)  # all done before any error is raised: no thread still writes a cloth
                tags = [f.result() for f in futures]
            else:
                tags = [next(p, None) for p in phases]
            last = tags[0]
            if tags[0] is None:
                break
            if tags[0] == "predicted":
                self._predicted()
            elif tags[0] == "contacts":
                self._solve()
            elif tags[0] == "substep_end" and self.lists.cand is not None and self._push_cloths:
                m, cand = self.mesh, self.lists.cand
                cc.add_push_normals(
                    self.x,
                    m.tris,
                    m.edges,
                    cand.vt_vertex,
                    cand.vt_triangle,
                    cand.vt_side,
                    self._vt_rows,
                    self._vt_lam,
                    cand.ee_a,
                    cand.ee_b,
                    cand.ee_side,
                    self._ee_rows,
                    self._ee_lam,
                    self.contact_push,
                )
                for k, c in enumerate(self.cloths):
                    if k not in self._push_cloths:
                        self.contact_push[self.offsets[k] : self.offsets[k + 1]] = 0.0
        self._count_pushing()  # the last substep's pairs

    def _elastic_pool(self) -> ThreadPoolExecutor | None:
        """Threads that run the cloths' elastic sets side by side (one a cloth), or None: the
        segment from "predicted" to the first "contacts" of each substep (coarse pass, constraint
        sets, sewing, pressure) reads and writes only its own cloth's rows, so the cloths run it
        at once with the same bits. The other segments are short: on threads they cost more than
        they gave (docs/design/cloth_contacts.md, "The cloths' elastic sets side by side"). Only
        under a thread-safe Numba threading layer (OpenMP, TBB; not the workqueue, which aborts
        when two threads start parallel kernels), known once a parallel kernel has run."""
        if len(self.cloths) < 2:
            return None
        try:
            layer = numba.threading_layer()
        except ValueError:
            return None
        if layer not in ("omp", "tbb"):
            return None
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=len(self.cloths))
        return self._pool

    def _tick(self, key, seconds):
        self._timings[key] = self._timings.get(key, 0.0) + seconds

    # ------------------------------------------------------------------------------------------
    def step(self, pin_targets=None, frame_dt: float | None = None) -> list[FrameDiagnostics]:
        """Advance every cloth one frame. ``pin_targets``: None or one entry per cloth (None or
        that cloth's targets, as :meth:`Cloth.step` takes them). A cloth whose frame fails rolls
        every cloth back (:class:`SimulationError` naming it)."""
        targets = [None] * len(self.cloths) if pin_targets is None else list(pin_targets)
        if len(targets) != len(self.cloths):
            raise ClothInputError(
                f"pin_targets: {len(self.cloths)} entries expected (one per cloth), got {len(targets)}"
            )
        if not _SOLVER_LOCK.acquire(blocking=False):
            raise RuntimeError("the Selvedge solver is already running in another thread; step one world at a time")
        try:
            return self._step_locked(targets, frame_dt)
        finally:
            _SOLVER_LOCK.release()

    def _step_locked(self, targets, frame_dt):
        states = [c._begin_step(t, frame_dt) for c, t in zip(self.cloths, targets)]
        self._timings = {}
        self.last_stats = {
            "detections": 0,
            "partial_detections": 0,
            "redetected_vertices": 0,
            "affine_substeps": 0,
            "vertex_triangle_active_max": 0,
            "edge_edge_active_max": 0,
            "pushes": 0,
            "passes_skipped": 0,
            "untangled_pairs": 0,
            "untangle_rounds": 0,
        }
        t_frame = time.perf_counter()
        if self.crossing_refinements and self._crossings is None:
            self._crossings = self._count_crossings()[1]  # the first frame's start
        refines = self.crossing_refinements or any(c.settings.stretch_refinements for c in self.cloths)
        lists_start = self.lists.snapshot() if refines else None
        scale, crossings, guarded = 1, 0, 0
        while True:
            self._run_frame(states, scale)
            failures = [(k, c._frame_failure(s)) for k, (c, s) in enumerate(zip(self.cloths, states))]
            failures = [(k, f) for k, f in failures if f is not None]
            if failures:
                for c, s in zip(self.cloths, states):
                    c._roll_back(s)
                if lists_start is not None:
                    self.lists.restore(lists_start)
                self._excess[:] = np.nan
                k, why = failures[0]
                raise SimulationError(
                    f"cloth {k} of the collision world: {why} (every cloth of the world was rolled back)"
                )
            if self.count_intersections:
                crossings, guarded = self._count_crossings()
            # only crossings the contacts keep apart: a cloth without self-collision folds through
            # itself at any substep count (run again, it paid 4 x and was thrown about)
            crossed = scale < 2**self.crossing_refinements and guarded > (self._crossings or 0)
            untangled = crossed and self.untangle_first and self.untangle_rounds > 0
            if untangled:
                crossings, guarded = self._untangle()
                crossed = guarded > (self._crossings or 0)
            stretched = [c._needs_refinement(s) for c, s in zip(self.cloths, states)]  # (each sets its P95)
            if not (crossed or any(stretched)):
                break
            for c, s in zip(self.cloths, states):  # new crossings or a stretched cloth: again, twice the substeps
                c._roll_back(s)
            self.lists.restore(lists_start)
            lists_start = self.lists.snapshot()
            self._excess[:] = np.nan  # (the run again starts with the whole slack, as a first substep)
            scale *= 2
        self.last_stats["substep_scale"] = scale
        if guarded and self.untangle_rounds and not untangled:  # (not this run's again)
            crossings, guarded = self._untangle()
        if self.count_intersections:
            self.last_stats["intersections"] = crossings
            self.last_stats["intersections_guarded"] = guarded
        if self.crossing_refinements:
            self._crossings = guarded
        if self.lists.cand is not None:
            self.last_stats["vertex_triangle_candidates"] = int(self.lists.cand.vt_vertex.shape[0])
            self.last_stats["edge_edge_candidates"] = int(self.lists.cand.ee_a.shape[0])
        self._timings["world_total"] = time.perf_counter() - t_frame
        self.last_timings_ms = {k: 1e3 * v for k, v in self._timings.items()}
        diags = [c._commit_step(s) for c, s in zip(self.cloths, states)]
        for k, d in enumerate(diags):
            d.contacts.update({f"cloth_{key}": v for key, v in self.last_stats.items()})
            d.timings_ms.update({f"world_{key}": v for key, v in self.last_timings_ms.items()})  # shared phases
            d.contacts["cloth_cloth_pushing_pairs_max"] = int(self.last_pushing_pairs_max["cloth_cloth"][k])
            d.contacts["self_pushing_pairs_max"] = int(self.last_pushing_pairs_max["self"][k])
        return diags
