"""The XPBD cloth: build from arrays, step frames, read positions, velocities and diagnostics.

Loop structure (001 appendix A, 002 sec. 3): substeps outermost; in each substep predict
(gravity, force fields and aerodynamics: :mod:`.forces`), reset every multiplier, iterate
stretch -> shear -> bend -> tethers -> soft pins -> sewing (:mod:`.sewing`) -> pressure
(:mod:`.volume`) -> contacts, rebuild velocities from positions. Shrink (:mod:`.shrink`) scales
the rest lengths between frames. Kinematic (hard-pinned) vertices have inverse mass 0 and
follow targets interpolated linearly inside the frame.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np

from . import kernels as kn
from ._team import FUSED_SUPPORTED
from .aerodynamics import Aerodynamics
from .coloring import block_schedule, partition_vertices
from .constraints import (
    BIAS,
    WARP,
    WEFT,
    ConstraintSet,
    build_bending,
    build_shear,
    build_soft_pins,
    build_stretch,
    build_tethers,
    classify_grain,
    held_by_pins,
    hops_to_pins,
    interleave_independent,
    pair_rest_length,
    sweep_order_from_pins,
    vertex_uv,
)
from .correction import corrected_state, project_stretch_and_contacts
from .diagnostics import (
    ConstraintStats,
    FrameDiagnostics,
    dihedral_errors,
    distance_errors,
    edge_strain,
    energies,
    isometric_errors,
    p95,
    soft_pin_errors,
)
from .errors import ClothInputError, SimulationError
from .fine_projection import FineEdges, Workspace, fast_projection, fine_edges
from .fine_projection import workspace as fp_workspace
from .forces import ExternalForces
from .fused import FusedSchedule, run_colored_frame
from .hooks import (
    AccelerationHook,
    ContactHandler,
    CorrectionResult,
    FrameState,
    ProposalHook,
    StepObserver,
    SubstepState,
    read_only,
)
from .level_graph import quad_level_graph, taut_borders
from .materials import Material
from .mesh import build_topology, check_finite, lumped_vertex_mass, rest_is_flat, triangulate
from .multilevel import (
    Hierarchy,
    aggregate_work,
    blocked_hierarchy,
    build_hierarchy,
    solve_multilevel,
    solve_multilevel_contacts,
    unit_rows,
)
from .settings import AUTO_BLOCK_MIN_VERTICES, AUTO_BLOCKS, ClothOptions, SolverSettings
from .sewing import Sewing, SewingConstraints
from .shrink import Shrink
from .volume import Pressure, VolumeConstraints

#: Pin weights at or above this are hard pins (inverse mass 0); above 0 and below it, soft pins.
HARD_PIN_WEIGHT = 1.0 - 1e-6
#: A coarse link within this angle (degrees) of the warp or weft takes that grain's stretch limit,
#: otherwise the bias one (mesh edges use ``constraints.GRAIN_TOLERANCE_DEG``, 22.5).
LINK_GRAIN_TOLERANCE_DEG = 10.0
#: A frame run again with more substeps (``SolverSettings.stretch_refinements``) earns another
#: doubling only if it cut the stretch beyond the limits (P95) to at most this share of the run
#: before. A landing's doublings cut it to 0.49-0.84; a cloth pulled longer than it is by its pins
#: stretches more at more substeps (two corners of a 1 m sheet pulled 4 cm apart a frame: 1.14-1.38
#: per doubling), where 4 x would be paid for nothing.
REFINE_MIN_GAIN = 0.95
#: Only one cloth may be stepping at a time in this process (Numba's thread pool is shared).
_SOLVER_LOCK = threading.Lock()


#: In the coloured mode a coarse level of the stretch limit with at least this many pairs runs by
#: blocks in parallel (:func:`.multilevel.blocked_hierarchy`); the smaller levels run in serial
#: order in one piece: a level split into blocks costs three waits of the team (about what ~2000
#: projections take on two threads) and delays its cut pairs to the end of its pass.
STRETCH_LIMIT_BLOCK_MIN_PAIRS = 2000
#: In the per-phase coloured path (a cloth with contacts, hooks, fields, sewing or pressure) a
#: phase whose estimated work is below this (us) runs its blocks one after the other on the
#: calling thread instead of in a parallel region: the same bits (blocks share no movable vertex),
#: without waking the team, which a region between two Python calls costs (docs/design/solver.md,
#: "Solve modes").
PARALLEL_PHASE_MIN_US = 1000.0
#: Estimated cost of one projection (ns) by constraint kind, and of one vertex's prediction or
#: velocity update, for :data:`PARALLEL_PHASE_MIN_US` (docs/design/solver.md, "Where the serial
#: speed comes from").
PROJECTION_NS = {"distance": 25.0, "isometric": 30.0, "dihedral": 60.0, "soft_pin": 10.0}
VERTEX_STEP_NS = 8.0


def _region_pays(work_ns: float) -> bool:
    """Whether a phase of ``work_ns`` estimated work is worth a parallel region in the per-phase
    coloured path (:data:`PARALLEL_PHASE_MIN_US`)."""
    return work_ns >= 1e3 * PARALLEL_PHASE_MIN_US


class _FineSetup(NamedTuple):
    """:meth:`Cloth._fine_projection`'s arrays, kept while ``key`` (the limits' inputs) holds."""

    key: tuple
    edges: FineEdges
    work: Workspace
    lam: np.ndarray  # the last multipliers per edge (warm start)
    normal: np.ndarray  # (N, 3) the body contacts' unit normals, refilled each substep


class Cloth:
    """A simulated cloth piece. Not thread-safe: step one cloth at a time per process.

    Parameters
    ----------
    vertices : (N,3) rest (and initial) positions in metres.
    faces : (T,3) triangles, or a list of polygons (quads and n-gons are fan-triangulated).
    pin_weights : (N,) in [0,1]; 1 pins hard (kinematic), (0,1) is a soft goal constraint.
    uvs : (N,2) per-vertex or (T,3,2) per-triangle-corner UVs giving the fabric grain.
    weight_maps : optional (N,) stiffness weights in [0,1] keyed by ``warp``, ``weft``, ``bias``,
        ``stretch`` (all grains), ``shear`` and ``bend``; 0 is 1000x more compliant.
    """

    def __init__(
        self,
        vertices,
        faces,
        *,
        material: Material | None = None,
        options: ClothOptions | None = None,
        settings: SolverSettings | None = None,
        pin_weights=None,
        uvs=None,
        weight_maps=None,
        initial_velocities=None,
        contact_handler: ContactHandler | None = None,
        acceleration_hook: AccelerationHook | None = None,
        proposal_hook: ProposalHook | None = None,
        shrink: Shrink | None = None,
        force_fields=None,
        aerodynamics: Aerodynamics | None = None,
        pressure: Pressure | None = None,
        sewing: Sewing | None = None,
    ):
        self.material = material or Material()
        self.options = options or ClothOptions()
        self.settings = settings or SolverSettings()
        self.material.validate()
        self.options.validate()
        self.settings.validate()
        rest = np.ascontiguousarray(np.asarray(vertices, dtype=np.float64))
        triangles = triangulate(faces)
        self.topology = build_topology(rest, triangles)
        self.warnings = list(self.topology.warnings)
        n = rest.shape[0]
        self.rest_positions = rest

        uv = self._validated_uv(uvs, n)
        uv_pattern_m = None
        if self.options.rest_length_source == "pattern":
            if uv is None:
                raise ClothInputError("rest_length_source='pattern' needs UVs (the 2D pattern)")
            uv_pattern_m = vertex_uv(self.topology, uv) * self.options.uv_scale_m
        pins = self._validated_weights("pin_weights", pin_weights, n, default=0.0)
        maps = {k: self._validated_weights(f"weight map {k!r}", v, n) for k, v in (weight_maps or {}).items()}
        unknown = set(maps) - {"warp", "weft", "bias", "stretch", "shear", "bend"}
        if unknown:
            raise ClothInputError(f"unknown weight maps {sorted(unknown)}; use warp, weft, bias, stretch, shear, bend")

        area = self.topology.triangle_area * ~self.topology.degenerate_triangle
        if uv_pattern_m is not None:
            t = self.topology.triangles
            p0, p1, p2 = uv_pattern_m[t[:, 0]], uv_pattern_m[t[:, 1]], uv_pattern_m[t[:, 2]]
            area = 0.5 * np.abs(np.cross(p1 - p0, p2 - p0)) * ~self.topology.degenerate_triangle
        self.mass = lumped_vertex_mass(n, self.topology.triangles, area, self.material.density_kg_m2)
        hard = pins >= HARD_PIN_WEIGHT
        massless = self.mass <= 0.0
        if (massless & ~hard).any() and self.topology.loose_vertices.size < int((massless & ~hard).sum()):
            self.warnings.append(
                f"{int((massless & ~hard).sum())} vertices touch only zero-area triangles; held in place"
            )
        kinematic = hard | massless
        self.inv_mass = np.where(kinematic, 0.0, 1.0 / np.where(kinematic, 1.0, self.mass))
        self.pinned_vertices = np.flatnonzero(pins > 0.0).astype(np.int64)
        self.kinematic_index = np.flatnonzero(kinematic).astype(np.int64)
        soft = (pins > 0.0) & ~kinematic
        self.soft_pin_index = np.flatnonzero(soft).astype(np.int64)
        links = self.options.coarse_links_between_aggregates
        #: the coarse links are measured halfway to their aggregates' centres
        #: (``ClothOptions.coarse_links_between_aggregates``; "auto": when nothing is pinned)
        self.links_between_aggregates = bool(self.pinned_vertices.size == 0 if links == "auto" else links)
        self.pin_weights = pins

        self.x = rest.copy()
        self.v = np.zeros_like(rest)
        if initial_velocities is not None:
            v0 = np.asarray(initial_velocities, dtype=np.float64)
            if v0.shape != rest.shape:
                raise ClothInputError(f"initial velocities must have shape {rest.shape}, got {v0.shape}")
            check_finite("initial velocities", v0)
            self.v[~kinematic] = v0[~kinematic]
        self._x_substep_start = rest.copy()
        self._target_prev = rest[self.kinematic_index].copy()
        self._soft_prev = rest[self.soft_pin_index].copy()

        sets: list[ConstraintSet] = []
        stretch, self.edge_grain = build_stretch(
            rest, self.topology, uv, uv_pattern_m, self.material, maps, self.options.uv_scale_m
        )
        self.edge_rest_length = stretch.params["rest_length"]  # in topology.edges order, like edge_grain
        sets.append(stretch)
        if self.options.shear:
            sets.append(build_shear(rest, self.topology, uv, uv_pattern_m, self.material, maps, self.edge_grain))
        if self.options.bending:
            sets.append(
                build_bending(rest, self.topology, uv_pattern_m, self.material, maps, self.options.bending_model)
            )
        if self.options.tethers:
            tethers = build_tethers(
                rest,
                self.topology,
                self.inv_mass,
                np.flatnonzero(hard & ~massless),
                geodesic=self.options.tether_geodesic,
                count=self.options.tether_count,
                scale=self.options.tether_scale,
                compliance=self.options.tether_compliance,
                uv_pattern_m=uv_pattern_m,
            )
            if tethers.count == 0 and self.inv_mass.any():
                self.warnings.append("tethers requested but the cloth has no hard pins: no tethers built")
            sets.append(tethers)
        if self.soft_pin_index.size:
            soft_set = build_soft_pins(self.soft_pin_index, pins[self.soft_pin_index], self.options.soft_pin_compliance)
            soft_set.params["target"] = rest[self.soft_pin_index].copy()
            # which entry of soft_pin_index (and of the per-frame targets) each goal belongs to:
            # the sweep orders and the coloured schedule reorder the set's rows
            soft_set.params["slot"] = np.arange(self.soft_pin_index.size, dtype=np.int64)
            sets.append(soft_set)
        sets = [s for s in sets if s.count > 0 or s.name == "stretch"]
        for c in sets:
            if c.kind == "distance":
                c.params["rest_length_unshrunk"] = c.params["rest_length"].copy()
        self._edge_rest_unshrunk = self.edge_rest_length.copy()
        #: each mesh edge's stretch limit by its grain: a frame's stretch beyond it decides whether
        #: the frame is run again with more substeps (``SolverSettings.stretch_refinements``)
        self._edge_stretch_limit = self._grain_stretch_limits()[self.edge_grain]
        #: a shrunk edge's rest length over the longer of it and its unshrunk one (None: no shrink):
        #: the refinement measures a shrinking cloth against its unshrunk size (see _needs_refinement)
        self._refine_length_scale: np.ndarray | None = None
        #: mesh edges (``topology.edges`` order) with an end at most two edges from a hard pin (its 2-ring)
        self._pin_ring_edges = np.zeros(self.topology.edges.shape[0], dtype=bool)
        if self.kinematic_index.size:
            hops = hops_to_pins(n, self.topology.edges, self.kinematic_index)
            held = held_by_pins(n, sets, self.kinematic_index)
            sets = [sweep_order_from_pins(s, hops, held) for s in sets]
            pinned_hard = np.flatnonzero(hard & ~massless)
            if pinned_hard.size:
                ring_hops = hops_to_pins(n, self.topology.edges, pinned_hard)
                e = self.topology.edges
                self._pin_ring_edges = np.minimum(ring_hops[e[:, 0]], ring_hops[e[:, 1]]) <= 2
        sets = [interleave_independent(s, self.inv_mass) for s in sets]
        self._sets_serial = sets
        #: hierarchical stretch limiting (:mod:`.multilevel`), None when off
        self.hierarchy: Hierarchy | None = None
        if self.options.stretch_limiting:
            flat = uv_pattern_m is not None or rest_is_flat(rest, self.topology)
            source = rest if uv_pattern_m is None else np.concatenate([uv_pattern_m, np.zeros((n, 1))], axis=1)
            # the level-0 graph: the mesh edges with each quad's diagonal chosen to alternate (a
            # quad mesh cut one way, as Blender's loop triangles and a fan cut it, made the levels
            # lopsided: :mod:`.level_graph`); True adds every quad's second diagonal instead (the
            # shear pairs), False takes the mesh edges as they are
            shear_set = next((c for c in sets if c.name == "shear"), None)
            graph = self.topology.edges.astype(np.int64)
            graph_length = self.edge_rest_length
            diagonals = self.options.stretch_limit_graph_diagonals
            if diagonals == "auto":
                graph, row = quad_level_graph(rest, self.topology)
                graph_length = graph_length[row]
                graph_length[row < 0] = pair_rest_length(rest, graph[row < 0], uv_pattern_m)
            elif diagonals and shear_set is not None and shear_set.count:
                graph = np.concatenate([graph, shear_set.vertices.astype(np.int64)])
                graph_length = np.concatenate([graph_length, shear_set.params["rest_length"]])
            level_mass, level_inv_mass = self._attached_mass(pins)
            self.hierarchy = build_hierarchy(
                source,
                graph,
                graph_length,
                level_mass,
                level_inv_mass,
                self._link_limits(rest, uv),
                flat,
                max_levels=self.options.stretch_limit_levels,
                anchored=soft,
                between_aggregates=self.links_between_aggregates,
                border=taut_borders(rest, self.topology, hard),
            )
        #: (levels, their links' limits before shrinking, after it) of the serial hierarchy and, once
        #: built, the coloured mode's blocked one: :meth:`set_shrink` scales the limits like the edges
        self._ml_limits: list[tuple[Hierarchy, np.ndarray, np.ndarray]] = []
        if self.hierarchy is not None:
            unshrunk = self.hierarchy.max_length.copy()
            self._ml_limits.append((self.hierarchy, unshrunk, unshrunk))
        #: some coarse link's limit or tether's length is above its shrunk target (:meth:`_tighten_limits`)
        self._ml_settling = False
        self._ml_snapshot = np.zeros_like(rest)
        #: the coarse pass's aggregate centres (:func:`.multilevel.aggregate_offsets`); the blocked
        #: hierarchy of the coloured mode has the same levels
        self._ml_work = aggregate_work(self.hierarchy, rest.shape[0], self.links_between_aggregates)
        #: per vertex, the direction the contacts pushed it in the last substep (summed over its
        #: contacts, the contact handler's and a world's; zero: none): the coarse pass slides such a
        #: vertex or lifts it off, never presses it in (:mod:`.strain_limit`)
        self.contact_push = np.zeros_like(rest)
        self.stretch_limit_active = 0
        #: the fine projection's setup (:class:`_FineSetup`), built at its first substep
        self._fp: _FineSetup | None = None
        #: (active edges, CG iterations) of the last fine projection
        self.fine_projection_stats = (0, 0)
        self._colored: tuple | None = None
        self._fused: FusedSchedule | None = None
        #: coloured frames without contacts or hooks run in one parallel region (:mod:`.fused`);
        #: False forces the per-phase path (same bits; for comparisons)
        self.fused_frames = True

        self.contact_handler = contact_handler
        self.acceleration_hook = acceleration_hook
        self.proposal_hook = proposal_hook
        self._observers: list[StepObserver] = []
        self._correction_undo: tuple[np.ndarray, np.ndarray] | None = None
        self.frame = 0
        self.history: list[FrameDiagnostics] = []
        self._dx = np.zeros_like(rest)
        self._hits = np.zeros(n)
        self._no_extra = np.zeros((0, 3))
        if aerodynamics is not None:
            aerodynamics.validate()
        #: force fields and aerodynamics (:mod:`.forces`, :mod:`.aerodynamics`): one call a substep when on
        self.external_forces = ExternalForces(
            self.topology.triangles, self.mass, self.inv_mass, force_fields, aerodynamics or Aerodynamics()
        )
        #: pressure / volume per closed island (:mod:`.volume`); None while pressure is off
        self.volume: VolumeConstraints | None = None
        if pressure is not None:
            self.set_pressure(pressure)
        #: seams (:mod:`.sewing`), None without sewing; ``time_s``: simulated seconds, the seams' clock
        self.sewing = SewingConstraints(rest, self.topology, self.material, sewing) if sewing is not None else None
        self.time_s = 0.0
        self.shrink = Shrink()
        if shrink is not None:
            self.set_shrink(shrink)
        #: set by a :class:`~.collisions.world.CollisionWorld` that steps this cloth with others
        self.in_world = False
        #: cloth-contact + body-contact passes per iteration (a world raises it for stacked layers)
        self.contact_rounds = 1
        #: set by a world one of whose cloths has the fine projection: every cloth of it then
        #: yields one more ``"contacts"`` after the substep's projection (the same sync points
        #: for all), so the cloth contacts, which the projection does not hold, act after it
        self.contact_round_after_projection = False

    def _link_limits(self, rest, uv):
        """The stretch limit of each coarse link of :mod:`.multilevel`, by its grain.

        ``Material.stretch_limit`` is the warp's; weft and bias links stop at the same tension,
        so their limits scale with their compliance (cotton: warp 0.2 %, weft 0.25 %, bias
        1.25 %), which keeps the fabric's anisotropy. Without shear constraints the cloth is
        meant to shear freely: bias links then only connect the levels, with no constraint.
        Links count as warp or weft within :data:`LINK_GRAIN_TOLERANCE_DEG` of the thread only:
        a link a few cells long at 18 deg (3 cells by 1) stretches when the cloth shears.
        """
        per_grain = self._grain_stretch_limits()
        vertex_uvs = None if uv is None else vertex_uv(self.topology, uv)

        def limits(pairs):
            return per_grain[classify_grain(rest, self.topology, pairs, vertex_uvs, LINK_GRAIN_TOLERANCE_DEG)]

        return limits

    def _grain_stretch_limits(self) -> np.ndarray:
        """The stretch limit of the warp, weft and bias (indexed by grain; see :meth:`_link_limits`)."""
        m = self.material

        def scaled(compliance):  # the same tension: the limit scales with the compliance
            if m.stretch_compliance_warp > 0.0:
                return m.stretch_limit * compliance / m.stretch_compliance_warp
            return m.stretch_limit if compliance == 0.0 else np.inf  # a rigid warp

        per_grain = np.empty(3)
        per_grain[WARP] = m.stretch_limit
        per_grain[WEFT] = scaled(m.stretch_compliance_weft)
        per_grain[BIAS] = scaled(m.stretch_compliance_bias) if self.options.shear else np.inf
        return per_grain

    # ------------------------------------------------------------------------------------------
    @staticmethod
    def _validated_weights(name, weights, n, default=None):
        if weights is None:
            return np.full(n, default, dtype=np.float64)
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (n,):
            raise ClothInputError(f"{name} must have shape ({n},), got {w.shape}")
        check_finite(name, w)
        if w.min() < 0.0 or w.max() > 1.0:
            raise ClothInputError(f"{name} must lie in [0, 1], found {w.min():.3g}..{w.max():.3g}")
        return w

    def _validated_uv(self, uvs, n):
        if uvs is None:
            return None
        uv = np.asarray(uvs, dtype=np.float64)
        t = self.topology.triangles.shape[0]
        if uv.shape not in ((n, 2), (t, 3, 2)):
            raise ClothInputError(f"UVs must have shape ({n}, 2) per vertex or ({t}, 3, 2) per corner, got {uv.shape}")
        check_finite("UVs", uv)
        return uv

    # ------------------------------------------------------------------------------------------
    @property
    def positions(self) -> np.ndarray:
        """Current positions (N,3), metres; a read-only view."""
        view = self.x.view()
        view.flags.writeable = False
        return view

    @property
    def velocities(self) -> np.ndarray:
        view = self.v.view()
        view.flags.writeable = False
        return view

    @property
    def constraint_sets(self) -> list[ConstraintSet]:
        """The constraint sets in solve order, as scheduled for the current solve mode.

        Coloured mode cuts the cloth into :attr:`parallel_blocks` blocks (:func:`partition_vertices`)
        and reorders each set with :func:`block_schedule`: the blocks run in parallel, each in the
        serial sweep order, then the few constraints that cross a cut. The schedule, and so the
        result, depends on the block count; for a given count it is bit-reproducible.
        """
        if self.solve_mode != "colored":
            return self._sets_serial
        return self._colored_schedule()[1]

    def _colored_schedule(self):
        """(block count, constraint sets, vertex_order, vertex_offsets) of the coloured mode, built
        for the current block count: the sets in block order and each part's vertices."""
        n_blocks = self.parallel_blocks
        if self._colored is None or self._colored[0] != n_blocks:
            part = partition_vertices(self.rest_positions, self.inv_mass > 0.0, n_blocks, self.topology.edges)
            sets = [s.permuted(*block_schedule(s.vertices, part, self.inv_mass, n_blocks)) for s in self._sets_serial]
            vertex_order = np.argsort(part, kind="stable")
            vertex_offsets = np.searchsorted(part[vertex_order], np.arange(n_blocks + 1)).astype(np.int64)
            blocked = None
            if self.hierarchy is not None:
                # the links' order in blocks, read from their indices carried as the limits
                index = self.hierarchy._replace(max_length=np.arange(self.hierarchy.max_length.size, dtype=np.float64))
                blocked = blocked_hierarchy(index, part, n_blocks, STRETCH_LIMIT_BLOCK_MIN_PAIRS)
                perm = blocked.hierarchy.max_length.astype(np.int64)
                _, unshrunk, target = self._ml_limits[0]
                blocked.hierarchy.max_length[:] = self.hierarchy.max_length[perm]
                self._ml_limits[1:] = [(blocked.hierarchy, unshrunk[perm], target[perm])]
            self._colored = (n_blocks, sets, vertex_order, vertex_offsets, part, blocked)
        return self._colored[:4]

    def _one_region_frames(self) -> bool:
        """Whether a coloured frame of this cloth can run as one parallel region (:mod:`.fused`):
        no Python call between its phases (a contact handler, learned hooks or observers, force
        fields, pressure, sewing, Stretch Projection) and a CPU with the time-stamp counter the
        phase timings read."""
        return bool(
            self.fused_frames
            and FUSED_SUPPORTED
            and self.contact_handler is None
            and self.acceleration_hook is None
            and self.proposal_hook is None
            and not self._observers
            and not self.external_forces.active
            and self.volume is None
            and self.sewing is None
            and not self.options.fine_projection
        )

    def _parallel_phases_pay(self) -> bool:
        """Whether some constraint set's pass is long enough (:data:`PARALLEL_PHASE_MIN_US`) for the
        per-phase coloured path to run it in a parallel region."""
        return any(_region_pays(c.count * PROJECTION_NS[c.kind]) for c in self._sets_serial)

    def _fused_schedule(self) -> FusedSchedule | None:
        """The one-region schedule of a coloured frame (:mod:`.fused`), or None where a frame must
        take the per-phase path: another mode, or a frame with Python calls between its phases or
        on a CPU without the time-stamp counter (:meth:`_one_region_frames`)."""
        if self.solve_mode != "colored" or not self._one_region_frames():
            return None
        n_blocks, sets, vertex_order, vertex_offsets = self._colored_schedule()
        key = (self.settings.substeps, self.settings.iterations, n_blocks)
        if self._fused is None or self._fused.key != key or self._fused.sets is not sets:
            self._fused = FusedSchedule(
                sets,
                vertex_order,
                vertex_offsets,
                self._colored[4],
                self.kinematic_index,
                *key[:2],
                self._colored[5],
                self.links_between_aggregates,
            )
        return self._fused

    def _attached_mass(self, pins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Masses (kg) and inverse masses the coarse levels of the stretch limit see: a soft-pinned
        vertex carries its attachment, ``m + h^2 / alpha`` (h the substep at ``settings.fps``,
        alpha the goal's compliance of :func:`.constraints.build_soft_pins`).

        Why: XPBD's goal constraint holds a vertex like a spring of compliance alpha~ = alpha / h^2
        to a fixed target, so a push on it moves it by ``1 / (m + 1 / alpha~)`` per unit impulse,
        not ``1 / m`` (eliminate the goal's multiplier: ``dx = w (lambda - dx / alpha~)``). Seen as
        free (mass m), a coarse link moved a soft pin (weight 0.7: ~1 kg attached against 0.15 g)
        and every child with it, the goal pulled only the pin back, and the children's move grew
        into the velocities: the 32 x 32 two-corner sheet with three soft pins tore at frame 4
        (1820 %). Carried into the levels as mass, the attachment weighs on the soft pin's coarse
        vertex (soft pins are preferred members of every level, ``build_hierarchy(anchored=...)``)
        and on the parents of one that is left a child. A ``frame_dt`` other than 1 / fps changes
        h^2 / alpha by its square; an estimate of the right order is all the levels need.
        """
        mass, inv_mass = self.mass, self.inv_mass
        if self.soft_pin_index.size == 0:
            return mass, inv_mass
        h = 1.0 / (self.settings.fps * self.settings.substeps)
        soft = self.soft_pin_index
        weight = pins[soft]
        compliance = self.options.soft_pin_compliance * (1.0 - weight) / weight  # build_soft_pins' alpha (m/N)
        mass = mass.copy()
        mass[soft] += h * h / np.maximum(compliance, 1e-300)
        inv_mass = inv_mass.copy()
        inv_mass[soft] = 1.0 / mass[soft]
        return mass, inv_mass

    def _stretch_limit_levels(self) -> Hierarchy | None:
        """The hierarchy as the current solve mode runs it: in the coloured mode with each level
        in block order (:func:`.multilevel.blocked_hierarchy`, the order of the fused frame)."""
        if self.hierarchy is None or self.solve_mode != "colored":
            return self.hierarchy
        self._colored_schedule()
        return self._colored[5].hierarchy

    def _vertex_blocks(self):
        """(vertex_order, vertex_offsets) of the coloured mode's parts, or None in the other modes:
        the per-vertex steps of a substep run on the thread whose block owns the vertex."""
        if self.solve_mode != "colored":
            return None
        return self._colored_schedule()[2:]

    @property
    def solve_mode(self) -> str:
        """The mode this cloth runs: ``settings.solve_mode`` with ``"auto"`` resolved. Auto is
        ``"colored"`` in :attr:`auto_blocks` blocks for a cloth of at least two blocks' vertices,
        stepped on its own, whose coloured frames run as one region or whose constraint sets are
        long enough for parallel regions to pay (:meth:`_parallel_phases_pay`); otherwise
        ``"serial"``: a small cloth, a cloth in a :class:`~.collisions.world.CollisionWorld`
        (where a coloured sweep more often keeps a cloth-cloth crossing that a serial one undoes,
        docs/design/cloth_contacts.md), and one whose blocks would all run in turn anyway (the same
        time as serial, a little more stretch where the blocks cut the sweep).

        Why coloured: the blocks share the cores, and a fixed block count gives the same bake on
        any machine (docs/design/solver.md, "Solve modes", has the measurements)."""
        mode = self.settings.solve_mode
        if mode != "auto":
            return mode
        if self.in_world or self.auto_blocks < 2:
            return "serial"
        return "colored" if self._one_region_frames() or self._parallel_phases_pay() else "serial"

    @property
    def auto_blocks(self) -> int:
        """Blocks of the auto mode, a function of the mesh alone (not of the machine): the largest
        power of two with :data:`.settings.AUTO_BLOCK_MIN_VERTICES` vertices in each, at most
        :data:`.settings.AUTO_BLOCKS` (a power of two, so two or four threads share them evenly)."""
        blocks = 1
        while 2 * blocks <= AUTO_BLOCKS and 2 * blocks * AUTO_BLOCK_MIN_VERTICES <= self.x.shape[0]:
            blocks *= 2
        return blocks

    @property
    def parallel_blocks(self) -> int:
        """Blocks of the coloured schedule: ``settings.threads``; else, in the auto mode,
        :attr:`auto_blocks`, and in the coloured mode Numba's current thread count (all cores
        unless something in the process, e.g. ``cli.py --threads``, set fewer).

        With more blocks than cores the blocks share the threads; the result depends on the
        block count only, so a fixed ``threads`` (or the auto mode) gives the same bake on any machine.
        """
        if self.settings.threads:
            return int(self.settings.threads)
        return self.auto_blocks if self.settings.solve_mode == "auto" else int(numba.get_num_threads())

    @property
    def bending_model(self) -> str | None:
        """The bending model in use (``"auto"`` resolved from the rest shape), None without bending."""
        kinds = {"dihedral": "dihedral", "isometric": "isometric", "distance": "cross_edge"}
        return next((kinds[c.kind] for c in self._sets_serial if c.name == "bend"), None)

    @property
    def stretch(self) -> ConstraintSet:
        """The stretch constraints (one per mesh edge) in serial sweep order."""
        return self._sets_serial[0]

    @property
    def constraint_count(self) -> int:
        return sum(s.count for s in self._sets_serial)

    @property
    def last_diagnostics(self) -> FrameDiagnostics | None:
        return self.history[-1] if self.history else None

    def set_positions(self, positions, velocities=None) -> None:
        """Teleport the cloth (e.g. to a start pose); multipliers are per substep, nothing else to reset."""
        x = np.asarray(positions, dtype=np.float64)
        if x.shape != self.x.shape:
            raise ClothInputError(f"positions must have shape {self.x.shape}, got {x.shape}")
        check_finite("positions", x)
        self.x[:] = x
        self.v[:] = 0.0 if velocities is None else np.asarray(velocities, dtype=np.float64)
        self.contact_push[:] = 0.0  # the old pose's contacts
        self._target_prev = self.x[self.kinematic_index].copy()
        self._soft_prev = self.x[self.soft_pin_index].copy()

    @property
    def force_fields(self) -> list:
        """The :class:`~.forces.ForceField` list acting on the cloth; assign a new list each frame
        to follow animated fields (the operators rebuild it from the evaluated scene)."""
        return self.external_forces.fields

    @force_fields.setter
    def force_fields(self, fields) -> None:
        self.external_forces.set_fields(fields)

    @property
    def aerodynamics(self) -> Aerodynamics:
        return self.external_forces.aerodynamics

    @aerodynamics.setter
    def aerodynamics(self, value: Aerodynamics) -> None:
        value.validate()
        self.external_forces.aerodynamics = value

    def set_pressure(self, pressure: Pressure) -> None:
        """Turn pressure on, change it (animatable: call between frames) or off (an inactive Pressure).
        Raises ClothInputError for a mesh with an open or inconsistently oriented island."""
        if not pressure.active:
            pressure.validate(self.x.shape[0])
            self.volume = None
        elif self.volume is None:
            self.volume = VolumeConstraints(self.rest_positions, self.topology.triangles, pressure)
        else:
            self.volume.set_pressure(pressure)

    def feature_settings(self) -> dict:
        """Force fields, aerodynamics, shrink, pressure and sewing as plain data (for the sidecar)."""
        from dataclasses import asdict

        def plain(obj, drop=()):
            return {k: v for k, v in asdict(obj).items() if k not in drop}

        out = {
            "force_fields": [plain(f) for f in self.force_fields],
            "aerodynamics": plain(self.aerodynamics),
            "shrink": plain(self.shrink, ("weights",)) | {"group": self.shrink.weights is not None},
        }
        if self.volume is not None:
            out["pressure"] = plain(self.volume.pressure, ("weights",)) | {
                "group": self.volume.pressure.weights is not None,
                "islands": self.volume.count,
                "rest_volumes_m3": self.volume.rest_volumes.tolist(),
            }
        if self.sewing is not None:
            out["sewing"] = plain(self.sewing.sewing, ("pairs",)) | {
                "pairs": self.sewing.count,
                "seam_hinges": int(self.sewing.hinges.shape[0]),
            }
        return out

    def set_shrink(self, shrink: Shrink) -> None:
        """Scale every distance constraint's rest length by Blender's shrink factor (:mod:`.shrink`),
        from the unshrunk lengths; call between frames to animate it. Cheap: one pass over the sets."""
        shrink.validate(self.x.shape[0])
        self.shrink = shrink
        n = self.x.shape[0]
        colored = self._colored[1] if self._colored is not None else []
        for c in list(self._sets_serial) + list(colored):
            if c.kind != "distance" or c.count == 0:
                continue
            base = c.params["rest_length_unshrunk"]
            target = base if shrink.is_identity else base * shrink.pair_scale(c.vertices, n)
            if c.unilateral:  # tethers: limits like the coarse links, lowered as the cloth shrinks
                c.params["rest_length_target"] = target
                np.maximum(target, c.params["rest_length"], out=c.params["rest_length"])
            else:
                c.params["rest_length"][:] = target
            c._coefficients = None  # distance_rows hold the rest length
        if self._fused is not None:
            self._fused._rows_h = float("nan")
        base = self._edge_rest_unshrunk
        self.edge_rest_length[:] = base if shrink.is_identity else base * shrink.pair_scale(self.topology.edges, n)
        self._refine_length_scale = (
            None if shrink.is_identity else self.edge_rest_length / np.maximum(self.edge_rest_length, base)
        )
        for k, (hz, unshrunk, _) in enumerate(self._ml_limits):
            target = unshrunk if shrink.is_identity else unshrunk * shrink.pair_scale(hz.edges, n)
            self._ml_limits[k] = (hz, unshrunk, target)
            np.maximum(target, hz.max_length, out=hz.max_length)  # a growing factor frees the links at once
        self._ml_settling = True
        self._tighten_limits()

    def _tighten_limits(self) -> None:
        """Lower each coarse link's limit and each tether's length towards its shrunk target as far
        as the cloth around its ends has shrunk (in place: the fused frame holds the levels'
        arrays): ``L_max = max(target, min(L_max, L_unshrunk sqrt(s_i s_j)))``, ``s_v`` the mean of
        the vertex's mesh edges' current length over their unshrunk rest length; after
        :meth:`set_shrink` and after every accepted frame while a limit is above its target.

        Why: shrinking scales the links' limits like the edges (``sqrt(k_i k_j)`` of the link's two
        ends; exact for a uniform factor); set at once, every link of a cloth still at its
        unshrunk size is violated by the whole shrink and the coarse pass pulls the cloth in
        within one substep (shrink 0.1 on a free 0.5 m sheet: edges crumpled to 0.4-1.8 of their
        length, the sheet never settled); tethers, shrunk at once, did the same (a 25 x 25 cotton
        sheet hanging from one point, shrink 0.1: P95 strain 31-51 %, tethers off 0.8 %). Lowered
        as the material's own constraints shrink the edges, the links follow the cloth and reach
        their target with it. The edges, not the pair's chord, say how far: a chord held at its
        current length locked every fold in (the sewn skirt's seams stayed 6 cm open), and the
        excess scaled by 0.75 each frame tore the hanging sheet again (P95 51 %). Without any of
        this a shrunk cloth was limited against its unshrunk lengths (shrink 0.1: 11 % of slack
        against cotton's 0.1 %).
        """
        if not self._ml_settling:
            return
        limits = [(hz.edges, hz.max_length, unshrunk, target) for hz, unshrunk, target in self._ml_limits]
        colored = self._colored[1] if self._colored is not None else []
        for c in list(self._sets_serial) + list(colored):
            if "rest_length_target" in c.params:
                p = c.params
                limits.append((c.vertices, p["rest_length"], p["rest_length_unshrunk"], p["rest_length_target"]))
                c._coefficients = None
        if self._fused is not None and len(limits) > len(self._ml_limits):
            self._fused._rows_h = float("nan")
        # how far the cloth has shrunk at each vertex: its mesh edges' mean length over their unshrunk rest
        e = self.topology.edges
        n = self.x.shape[0]
        ratio = np.linalg.norm(self.x[e[:, 0]] - self.x[e[:, 1]], axis=1) / self._edge_rest_unshrunk
        degree = np.bincount(e[:, 0], minlength=n) + np.bincount(e[:, 1], minlength=n)
        scale = (np.bincount(e[:, 0], ratio, n) + np.bincount(e[:, 1], ratio, n)) / np.maximum(degree, 1)
        scale[degree == 0] = 1.0
        settling = False
        for pairs, limit, unshrunk, target in limits:
            reached = unshrunk * np.sqrt(scale[pairs[:, 0]] * scale[pairs[:, 1]])
            np.maximum(target, np.minimum(limit, reached), out=limit)
            settling = settling or bool((limit > target).any())
        self._ml_settling = settling

    # -- observers and corrections (solver/hooks.py) -------------------------------------------
    @property
    def observers(self) -> tuple[StepObserver, ...]:
        """The attached observers, in call order."""
        return tuple(self._observers)

    def add_observer(self, observer: StepObserver) -> None:
        """Attach ``observer`` (called after those already attached); it sees read-only state only."""
        if observer in self._observers:
            raise ValueError("this observer is already attached to the cloth")
        self._observers.append(observer)

    def remove_observer(self, observer: StepObserver) -> None:
        self._observers.remove(observer)

    def _frame_state(self, frame_dt: float, replay: bool = False) -> FrameState:
        return FrameState(self.frame, frame_dt, read_only(self.x), read_only(self.v), read_only(self.inv_mass), replay)

    def _substep_acceleration(self, sub: int, n_sub: int, h: float, check_phases: bool) -> np.ndarray | None:
        """The learned accelerations of one substep: the hook's plus every observer's, or None."""
        t_start = sub / n_sub
        total = None
        if self.acceleration_hook is not None:
            a = self.acceleration_hook(self.x, self.v, h, t_start)
            if a is not None:
                total = np.ascontiguousarray(a, dtype=np.float64)
                if total.shape != self.x.shape:
                    raise ClothInputError(f"acceleration hook returned shape {total.shape}, expected {self.x.shape}")
        if self._observers:
            state = SubstepState(sub, n_sub, h, t_start, read_only(self.x), read_only(self.v), replay=check_phases)
            for observer in self._observers:
                a = observer.substep_acceleration(state)
                if a is None:
                    continue
                a = np.ascontiguousarray(a, dtype=np.float64)
                if a.shape != self.x.shape:
                    raise ClothInputError(
                        f"observer {type(observer).__name__} returned an acceleration of shape "
                        f"{a.shape}, expected {self.x.shape}"
                    )
                total = a if total is None else total + a
        if check_phases and total is not None and not np.isfinite(total).all():
            raise _PhaseFailure(f"the acceleration hook returned non-finite values in substep {sub + 1}")
        return total

    def apply_correction(
        self, dx, dv, frame_dt: float | None = None, *, iterations: int = 2, omega: float = 1.0
    ) -> CorrectionResult:
        """Apply a change proposed for the current (frame-end) state and project it (solver/correction.py).

        ``dx`` (N,3) metres and ``dv`` (N,3) m/s are added to the free vertices; then ``iterations``
        Jacobi stretch passes (over-relaxation ``omega``) and the contact handler's projection pull
        the proposal back onto the constraints, and v = v + dv + (x - x_proposal) / frame_dt.
        Kinematic vertices never move. A non-finite result is not applied (``applied`` False).
        :meth:`revert_correction` takes the change back until the next frame.
        """
        frame_dt = 1.0 / self.settings.fps if frame_dt is None else float(frame_dt)
        dx = np.asarray(dx, dtype=np.float64)
        dv = np.asarray(dv, dtype=np.float64)
        for name, a in (("dx", dx), ("dv", dv)):
            if a.shape != self.x.shape:
                raise ClothInputError(f"correction {name} must have shape {self.x.shape}, got {a.shape}")
        h = frame_dt / self.settings.substeps

        def project(x):
            project_stretch_and_contacts(x, self.inv_mass, self.stretch, self.contact_handler, h, iterations, omega)

        if not _SOLVER_LOCK.acquire(blocking=False):
            raise RuntimeError("the Selvedge solver is already running in another thread; step one cloth at a time")
        try:
            proposal, x, v = corrected_state(self.x, self.v, self.inv_mass, dx, dv, frame_dt, project)
        finally:
            _SOLVER_LOCK.release()
        if not (np.isfinite(x).all() and np.isfinite(v).all()):
            return CorrectionResult(False, read_only(proposal))
        if self._correction_undo is None:
            self._correction_undo = (self.x.copy(), self.v.copy())
        self.x[:] = x
        self.v[:] = v
        return CorrectionResult(True, read_only(proposal))

    def revert_correction(self) -> None:
        """Take back every :meth:`apply_correction` since the last frame: the state is the frame's own again."""
        if self._correction_undo is None:
            raise RuntimeError("no correction to revert since the last frame")
        self.x[:], self.v[:] = self._correction_undo
        self._correction_undo = None

    # ------------------------------------------------------------------------------------------
    def _split_targets(self, pin_targets):
        """Frame-end targets for kinematic and soft-pinned vertices from (N,3) or (P,3) input."""
        if pin_targets is None:
            return self._target_prev.copy(), self._soft_prev.copy()
        t = np.asarray(pin_targets, dtype=np.float64)
        n = self.x.shape[0]
        if t.shape == (n, 3):
            full = t
        elif t.shape == (self.pinned_vertices.size, 3):
            full = self.x.copy()
            full[self.kinematic_index] = self._target_prev
            full[self.pinned_vertices] = t
        else:
            raise ClothInputError(
                f"pin targets must have shape ({n}, 3) (all vertices) or ({self.pinned_vertices.size}, 3) "
                f"(the pinned vertices, in order), got {t.shape}"
            )
        check_finite("pin targets", full[self.kinematic_index])
        check_finite("pin targets", full[self.soft_pin_index])
        return full[self.kinematic_index].copy(), full[self.soft_pin_index].copy()

    def step(self, pin_targets=None, frame_dt: float | None = None) -> FrameDiagnostics:
        """Advance one frame. ``pin_targets``: where pinned vertices are at the frame's end.

        Raises :class:`SimulationError` (state rolled back to the frame start) when the frame
        produced a non-finite state or a vertex faster than ``settings.max_speed_m_s``.
        """
        if not _SOLVER_LOCK.acquire(blocking=False):
            raise RuntimeError("the Selvedge solver is already running in another thread; step one cloth at a time")
        try:
            self._correction_undo = None
            diag = self._step_locked(pin_targets, frame_dt)
        finally:
            _SOLVER_LOCK.release()
        if self._observers:
            state = self._frame_state(1.0 / self.settings.fps if frame_dt is None else float(frame_dt))
            for observer in self._observers:
                observer.end_frame(state)
        return diag

    def _step_locked(self, pin_targets, frame_dt):
        state = self._begin_step(pin_targets, frame_dt)
        while True:
            phases = self._frame_phases(
                state.frame_dt, state.kinematic_end, state.soft_end, state.timings, False, state.substep_scale
            )
            for _ in phases:
                pass  # a lone cloth has nothing to do at the sync points (see CollisionWorld)
            failure = self._frame_failure(state)
            if failure is not None:
                self._roll_back(state)
                raise SimulationError(failure)
            if not self._needs_refinement(state):
                return self._commit_step(state)
            self._roll_back(state)  # stretched: the frame again, twice the substeps
            state.substep_scale *= 2

    def _needs_refinement(self, state: _StepState) -> bool:
        """Whether the frame just run ends stretched past ``SolverSettings.refine_stretch_above``
        (the 95th percentile of the edges' strain beyond their grain's stretch limit, which it
        stores in ``state.stretch_over_limit_p95`` for the diagnostics) with a refinement left
        (``stretch_refinements``), and the last refinement, if any, cut that stretch to at most
        :data:`REFINE_MIN_GAIN` of the run before it. A shrunk edge's strain is taken against the
        longer of its shrunk and unshrunk rest lengths."""
        s = self.settings
        strain = state.strain
        if self._refine_length_scale is not None:
            # a shrinking cloth is stretched against its shrunk lengths until it has contracted,
            # which is the shrink at work, not an impact: the longer length decides
            strain = (1.0 + strain) * self._refine_length_scale - 1.0
        last, state.stretch_over_limit_p95 = state.stretch_over_limit_p95, p95(strain - self._edge_stretch_limit)
        # a refinement that did not cut the stretch by REFINE_MIN_GAIN earns no other: the stretch is
        # imposed (pins or seams pulling the cloth longer than it is), not the solve's
        helped = state.substep_scale == 1 or state.stretch_over_limit_p95 <= REFINE_MIN_GAIN * last
        return (
            helped
            and state.substep_scale < 2**s.stretch_refinements
            and state.stretch_over_limit_p95 > s.refine_stretch_above
        )

    def _roll_back(self, state: _StepState) -> None:
        """Back to the frame start: positions, velocities and the contact pushes the coarse pass reads."""
        self.x[:], self.v[:] = state.snapshot
        self.contact_push[:] = state.contact_push

    def _begin_step(self, pin_targets, frame_dt) -> _StepState:
        """Validate the frame's inputs and snapshot the state (the first part of :meth:`step`)."""
        self.settings.validate()
        frame_dt = 1.0 / self.settings.fps if frame_dt is None else float(frame_dt)
        if not (np.isfinite(frame_dt) and frame_dt > 0):
            raise ClothInputError(f"frame_dt must be positive, got {frame_dt}")
        kinematic_end, soft_end = self._split_targets(pin_targets)
        if kinematic_end.size:
            travel = np.linalg.norm(kinematic_end - self._target_prev, axis=1)
            worst = int(np.argmax(travel))
            if travel[worst] / frame_dt > self.settings.max_speed_m_s:
                raise ClothInputError(
                    f"pin target of vertex {int(self.kinematic_index[worst])} jumps {travel[worst]:.3g} m in one frame "
                    f"(faster than max_speed_m_s={self.settings.max_speed_m_s}); for a camera cut or a teleporting "
                    "rig call set_positions() instead of stepping"
                )
        if self.solve_mode == "colored" and self.settings.threads:
            numba.set_num_threads(min(int(self.settings.threads), numba.config.NUMBA_NUM_THREADS))
        return _StepState(
            frame_dt,
            kinematic_end,
            soft_end,
            (self.x.copy(), self.v.copy()),
            {},
            time.perf_counter(),
            self.contact_push.copy(),
        )

    def _frame_failure(self, state: _StepState) -> str | None:
        """Why the frame just run must be rolled back (a non-finite or too fast vertex, an edge
        torn past ``max_strain``), or None; keeps the strain for :meth:`_commit_step`."""
        bad = kn.first_bad_vertex(self.x, self.v, self.settings.max_speed_m_s)
        if bad >= 0:
            self.contact_push[:] = state.contact_push
            cause = self._diagnose(
                state.snapshot, state.frame_dt, state.kinematic_end, state.soft_end, bad, state.substep_scale
            )
            return f"frame {self.frame + 1}: {cause}; the frame was rolled back"
        strain = self.edge_strain()
        worst_edge = int(np.argmax(strain))
        if strain[worst_edge] > self.settings.max_strain:
            a, b = self.topology.edges[worst_edge]
            return (
                f"frame {self.frame + 1}: edge {a}-{b} stretched to {100 * strain[worst_edge]:.0f} % "
                f"(limit {100 * self.settings.max_strain:.0f} %): the budget cannot hold this cloth together; "
                f"raise substeps (now {self.settings.substeps * state.substep_scale}); the frame was rolled back"
            )
        state.strain = strain
        return None

    def _commit_step(self, state: _StepState) -> FrameDiagnostics:
        """Accept the frame: new pin targets, the contact handler's end of frame, diagnostics."""
        self._target_prev = state.kinematic_end
        self._soft_prev = state.soft_end
        self._tighten_limits()
        if self.contact_handler is not None:
            self.contact_handler.end_frame()
        self.frame += 1
        self.time_s += state.frame_dt
        state.timings["total"] = time.perf_counter() - state.t_frame
        t0 = time.perf_counter()
        diag = self._diagnostics(state.frame_dt / (self.settings.substeps * state.substep_scale), state)
        state.timings["diagnostics"] = time.perf_counter() - t0
        diag.timings_ms = {k: 1e3 * v for k, v in state.timings.items()}
        self.history.append(diag)
        return diag

    def _diagnose(self, snapshot, frame_dt, kinematic_end, soft_end, bad_vertex, substep_scale=1) -> str:
        """Replay the failed frame with a check after every phase to name the first bad one."""
        self.x[:], self.v[:] = snapshot
        try:
            for _ in self._frame_phases(frame_dt, kinematic_end, soft_end, {}, True, substep_scale):
                pass
        except _PhaseFailure as failure:
            return str(failure)
        speed = float(np.linalg.norm(snapshot[1][bad_vertex])) if np.isfinite(snapshot[1][bad_vertex]).all() else 0.0
        return (
            f"vertex {bad_vertex} became non-finite or exceeded {self.settings.max_speed_m_s} m/s "
            f"(speed at frame start {speed:.3g} m/s)"
        )

    def _check(self, phase: str, substep: int, h: float) -> None:
        bad = kn.first_bad_vertex(self.x, (self.x - self._x_substep_start) / h, self.settings.max_speed_m_s)
        if bad >= 0:
            raise _PhaseFailure(
                f"{phase} produced a non-finite or exploding position at vertex {bad} in substep {substep + 1} "
                f"(limit {self.settings.max_speed_m_s} m/s)"
            )

    def _frame_phases(self, frame_dt, kinematic_end, soft_end, timings, check_phases, substep_scale=1):
        """Run one frame; a generator that yields at the sync points a :class:`CollisionWorld`
        needs to step several cloths in lockstep: ``"predicted"`` after each substep's prediction
        (and the handler's narrow phase), ``"contacts"`` after each iteration's elastic sets, before
        the handler's body contacts (``contact_rounds`` times), ``"substep_end"`` after the
        velocity update. Stepped to the end alone, it is the frame of :meth:`step`. The frame runs
        ``settings.substeps * substep_scale`` substeps (a world's retry of a crossed frame)."""
        s = self.settings
        n_sub = s.substeps * int(substep_scale)
        h = frame_dt / n_sub
        gravity = np.asarray(s.gravity_m_s2, dtype=np.float64)
        wind = np.asarray(s.wind_m_s, dtype=np.float64)
        sets = self.constraint_sets
        handler = self.contact_handler
        clock = time.perf_counter

        def tick(name, t0):
            timings[name] = timings.get(name, 0.0) + clock() - t0

        observers = self._observers
        if observers:
            state = self._frame_state(frame_dt, replay=check_phases)
            for observer in observers:
                observer.begin_frame(state)
        if handler is not None:
            t0 = clock()
            handler.begin_frame(self.x, self.v, self.inv_mass, frame_dt)
            tick("contacts_broad_phase", t0)
        soft_set = next((c for c in sets if c.kind == "soft_pin"), None)
        fused = None if check_phases or self.in_world or n_sub != s.substeps else self._fused_schedule()
        if fused is not None:
            run_colored_frame(self, fused, h, gravity, wind, kinematic_end, soft_end, timings)
            return
        blocks = self._vertex_blocks()
        if blocks is not None and not _region_pays(self.x.shape[0] * VERTEX_STEP_NS):
            blocks = None  # per vertex the same arithmetic in any order: one pass on this thread
        volume, sewing = self.volume, self.sewing
        levels = self._stretch_limit_levels()
        volume_params = volume.params() if volume is not None else None
        for sub in range(n_sub):
            t_start, t_end = sub / n_sub, (sub + 1) / n_sub
            extra = self._no_extra
            if self.acceleration_hook is not None or observers:
                t0 = clock()
                a = self._substep_acceleration(sub, n_sub, h, check_phases)
                extra = extra if a is None else a
                tick("learned", t0)
            if self.external_forces.active:
                t0 = clock()
                forces = self.external_forces.accelerations(
                    self.x, self.v, wind, self.material.air_drag_per_s, sub, n_sub, s.force_updates_per_frame, h
                )
                extra = forces if extra.shape[0] == 0 else extra + forces
                tick("forces", t0)
                if check_phases and not np.isfinite(extra).all():
                    raise _PhaseFailure(f"the force fields or aerodynamics gave non-finite forces in substep {sub + 1}")
            t0 = clock()
            predict_args = (
                self.x,
                self.v,
                self.inv_mass,
                gravity,
                extra,
                self.material.air_drag_per_s,
                wind,
                self.kinematic_index,
                self._target_prev,
                kinematic_end,
                t_end,
                h,
                self._x_substep_start,
            )
            if blocks is None:
                kn.predict_positions(*predict_args)
            else:
                kn.predict_positions_blocks(*predict_args, *blocks)
            if soft_set is not None:
                kn.interpolate_targets(
                    self._soft_prev, soft_end, soft_set.params["slot"], t_end, soft_set.params["target"]
                )
            tick("predict", t0)
            if check_phases:
                self._check("prediction", sub, h)
            if self.proposal_hook is not None:
                t0 = clock()
                proposal = self.proposal_hook(self._x_substep_start, self.x, self.v, h)
                if proposal is not None:
                    proposal = np.asarray(proposal, dtype=np.float64)
                    free = self.inv_mass > 0
                    self.x[free] = proposal[free]
                tick("learned", t0)
                if check_phases:
                    self._check("the proposal hook", sub, h)
            if sewing is not None:
                sewing.begin_substep(self.x, self.time_s + t_end * frame_dt)
            x_proposal = self.x.copy() if observers else None
            contact_aware = levels is not None and self.options.stretch_limit_contacts
            if contact_aware:
                # before the narrow phases: they see where the coarse pass put the vertices (the
                # contacts then project after it, and a vertex it moves far is still found)
                self._coarse_pass(levels, sub, h, check_phases, tick)
            if handler is not None:
                t0 = clock()
                handler.begin_substep(self._x_substep_start, self.x, t_start, t_end, h)
                tick("contacts_narrow_phase", t0)
            yield "predicted"
            for iteration in range(s.iterations):
                if levels is not None and (iteration > 0 or not contact_aware):
                    self._coarse_pass(levels, sub, h, check_phases, tick)
                for c in sets:
                    t0 = clock()
                    self._project(
                        c, h, reset_lambda=iteration == 0, keep_lambda=iteration < s.iterations - 1 or sub == n_sub - 1
                    )
                    tick(c.name, t0)
                    if check_phases:
                        self._check(f"the {c.name} constraints", sub, h)
                if sewing is not None:
                    t0 = clock()
                    sewing.project(self.x, self._x_substep_start, self.inv_mass, h, iteration == 0)
                    tick("sewing", t0)
                    if check_phases:
                        self._check("the sewing constraints", sub, h)
                if volume is not None:
                    t0 = clock()
                    volume.project(self.x, self.inv_mass, h, iteration == 0, volume_params)
                    tick("pressure", t0)
                    if check_phases:
                        self._check("the pressure (volume) constraints", sub, h)
                for _ in range(self.contact_rounds):
                    yield "contacts"
                    if handler is not None:
                        t0 = clock()
                        handler.project(self.x, self._x_substep_start, self.inv_mass, h)
                        tick("contacts_solve", t0)
                        if check_phases:
                            self._check("the contact handler", sub, h)
            if self.options.fine_projection:
                self._fine_projection(sub, h, check_phases, tick)
            if self.contact_round_after_projection:
                yield "contacts"
                if handler is not None:
                    t0 = clock()
                    handler.project(self.x, self._x_substep_start, self.inv_mass, h)
                    tick("contacts_solve", t0)
            t0 = clock()
            if blocks is None:
                kn.update_velocities(self.x, self._x_substep_start, h, self.v)
            else:
                kn.update_velocities_blocks(self.x, self._x_substep_start, h, self.v, *blocks)
            tick("velocity", t0)
            if handler is not None:
                t0 = clock()
                handler.end_substep(self.x, self.v, self.inv_mass, h)
                tick("contacts_solve", t0)
            if contact_aware:
                # a world adds its cloth-cloth pushes at "substep_end" (contact_push is a view of its array)
                self.contact_push[:] = 0.0
                add_push = getattr(handler, "add_push_normals", None)
                if add_push is not None:
                    add_push(self.x, self.contact_push)
            if observers:
                t0 = clock()
                state = SubstepState(
                    sub,
                    n_sub,
                    h,
                    t_start,
                    read_only(self.x),
                    read_only(self.v),
                    read_only(self._x_substep_start),
                    read_only(x_proposal),
                    check_phases,
                )
                for observer in observers:
                    observer.end_substep(state)
                tick("learned", t0)
            yield "substep_end"

    def _fine_projection(self, sub: int, h: float, check_phases: bool, tick) -> None:
        """The fine level's fast projection (:mod:`.fine_projection`) after the substep's contacts:
        the body contacts' normals held, then the contacts projected once more (without, 4-13
        vertices of the garment bench ended inside the body: the vertices its narrow phase found
        but not within reach of touching are free for the projection)."""
        t0 = time.perf_counter()
        o = self.options
        m = self.material
        key = (m.stretch_limit, m.stretch_compliance_warp, m.stretch_compliance_weft, o.fine_projection_compression)
        fp = self._fp
        if fp is None or fp.key != key:
            fp = self._fp = self._fine_setup(key)
        handler = self.contact_handler
        normal = fp.normal
        normal.fill(0.0)  # the body contacts' unit normals (the rule of the stretch limit's holds)
        add_push = getattr(handler, "add_push_normals", None)
        if add_push is not None:
            add_push(self.x, normal)
            unit_rows(normal)
        self.fine_projection_stats = fast_projection(
            self.x,
            self.inv_mass,
            normal,
            fp.lam,
            self.edge_rest_length,
            fp.edges,
            int(o.fine_projection),
            int(o.fine_projection_cg_iterations),
            1e-3,
            float(o.fine_projection_damping),
            fp.work,
        )
        tick("fine_projection", t0)
        if handler is not None:
            t0 = time.perf_counter()
            handler.project(self.x, self._x_substep_start, self.inv_mass, h)
            tick("contacts_solve", t0)
        if check_phases:
            self._check("the fine projection", sub, h)

    def _fine_setup(self, key) -> _FineSetup:
        """The fine projection's edges (warp and weft only: :mod:`.fine_projection`), limits,
        thread lines, workspace, multipliers and contact normals."""
        m = self.material
        keep = np.flatnonzero(self.edge_grain != BIAS)
        grain = self.edge_grain[keep]
        per_grain = np.array([m.stretch_limit, m.stretch_limit * m.stretch_compliance_weft / m.stretch_compliance_warp])
        limit = per_grain[grain]
        edges = fine_edges(
            self.topology.edges[keep],
            keep,
            1.0 + limit,
            1.0 - limit if self.options.fine_projection_compression else np.zeros(len(keep)),
            grain,
        )
        return _FineSetup(key, edges, fp_workspace(len(self.x), len(keep)), np.zeros(len(keep)), np.zeros_like(self.x))

    def _coarse_pass(self, levels: Hierarchy, sub: int, h: float, check_phases: bool, tick) -> None:
        """The hierarchical stretch limit (:func:`.multilevel.solve_multilevel`); with
        ``options.stretch_limit_contacts``, respecting the contacts of the last substep
        (:func:`.multilevel.solve_multilevel_contacts`)."""
        t0 = time.perf_counter()
        if self.options.stretch_limit_contacts:
            unit_rows(self.contact_push)
            self.stretch_limit_active = solve_multilevel_contacts(
                self.x, self._ml_snapshot, levels, self.contact_push, self._ml_work
            )
        else:
            self.stretch_limit_active = solve_multilevel(self.x, self._ml_snapshot, levels, self._ml_work)
        tick("stretch_limit", t0)
        if check_phases:
            self._check("the stretch limit", sub, h)

    def _project(self, c: ConstraintSet, h: float, reset_lambda: bool, keep_lambda: bool = True) -> None:
        """One pass over one constraint set in the current solve mode.

        ``reset_lambda``: the substep's first pass, which starts every multiplier from 0.
        ``keep_lambda``: store the multipliers (False for a pass whose multipliers no one reads).
        """
        mode = self.solve_mode
        if mode == "colored" and not _region_pays(c.count * PROJECTION_NS[c.kind]):
            mode = "serial"  # the block-ordered set swept in one piece: blocks, then the cut (same bits)
        x, x0, w, p = self.x, self._x_substep_start, self.inv_mass, c.params
        k = c.coefficients(h, w)
        if c.kind == "distance":
            args = (x, x0, w, c.vertices, k.distance_rows, c.unilateral)
            fns = (kn.solve_distance_serial, kn.solve_distance_colored, kn.solve_distance_jacobi)
        elif c.kind == "dihedral":
            args = (x, x0, w, c.vertices, p["rest_cos"], p["rest_sin"], k.alpha_tilde, k.gamma)
            fns = (kn.solve_bend_dihedral_serial, kn.solve_bend_dihedral_colored, kn.solve_bend_dihedral_jacobi)
        elif c.kind == "isometric":
            args = (x, x0, w, c.vertices, p["stencil"], k.alpha_tilde, k.gamma, k.inv_denominator)
            fns = (kn.solve_bend_isometric_serial, kn.solve_bend_isometric_colored, kn.solve_bend_isometric_jacobi)
        else:
            args = (x, w, c.vertices, p["target"], k.alpha_tilde, k.inv_denominator)
            if mode == "serial":
                kn.solve_soft_pin_serial(*args, reset_lambda, keep_lambda, c.lam)
            elif mode == "colored":
                kn.solve_soft_pin_colored(*args, reset_lambda, keep_lambda, c.lam)
            else:
                kn.solve_soft_pin_jacobi(*args, reset_lambda, keep_lambda, c.lam, self._dx, self._hits)
                kn.apply_jacobi(x, self._dx, self._hits, self.settings.jacobi_omega)
            return
        if mode == "serial":
            fns[0](*args, reset_lambda, keep_lambda, c.lam)
        elif mode == "colored":
            fns[1](*args, c.block_offsets, reset_lambda, keep_lambda, c.lam)
        else:
            fns[2](*args, reset_lambda, keep_lambda, c.lam, self._dx, self._hits)
            kn.apply_jacobi(x, self._dx, self._hits, self.settings.jacobi_omega)

    # ------------------------------------------------------------------------------------------
    def constraint_errors(self, h: float | None = None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per constraint set: (|C|, |C + alpha~ lambda|) arrays at the current state."""
        h = h if h is not None else 1.0 / (self.settings.fps * self.settings.substeps)
        out = {}
        for c in self.constraint_sets:
            c_abs = np.zeros(c.count)
            res = np.zeros(c.count)
            p = c.params
            if c.kind == "distance":
                distance_errors(
                    self.x, c.vertices, p["rest_length"], p["compliance"], c.unilateral, h, c.lam, c_abs, res
                )
            elif c.kind == "dihedral":
                dihedral_errors(self.x, c.vertices, p["rest_angle"], p["compliance"], h, c.lam, c_abs, res)
            elif c.kind == "isometric":
                isometric_errors(self.x, c.vertices, p["stencil"], p["compliance"], h, c.lam, c_abs, res)
            else:
                soft_pin_errors(self.x, c.vertices, p["target"], p["compliance"], h, c.lam, c_abs, res)
            out[c.name] = (c_abs, res)
        return out

    def edge_strain(self) -> np.ndarray:
        """Strain (L - L0)/L0 of every mesh edge (``topology.edges`` order) at the current state."""
        out = np.empty(self.topology.edges.shape[0])
        edge_strain(self.x, self.topology.edges, self.edge_rest_length, out)
        return out

    def _diagnostics(self, h: float, state: _StepState) -> FrameDiagnostics:
        strain = state.strain
        diag = FrameDiagnostics(frame=self.frame)
        for c, (c_abs, res) in zip(self.constraint_sets, self.constraint_errors(h).values()):
            diag.constraints[c.name] = ConstraintStats.from_arrays(c_abs, res, c.lam)
        diag.strain_max = float(strain.max())
        diag.strain_p95 = p95(strain)
        ring = self._pin_ring_edges
        if ring.any():
            diag.strain_max_pin_rings = float(strain[ring].max())
        if not ring.all():
            outside = strain[~ring]
            diag.strain_max_outside_pin_rings = float(outside.max())
            diag.strain_p95_outside_pin_rings = p95(outside)
        diag.stretch_limit_active = int(self.stretch_limit_active)
        diag.substeps = self.settings.substeps * state.substep_scale
        diag.substep_scale = int(state.substep_scale)
        diag.stretch_over_limit_p95 = state.stretch_over_limit_p95
        diag.kinetic_energy_j, diag.gravitational_energy_j = energies(
            self.x, self.v, self.mass, self.inv_mass, np.asarray(self.settings.gravity_m_s2, dtype=np.float64)
        )
        if self.contact_handler is not None:
            diag.contacts = self.contact_handler.diagnostics()
        return diag


class _PhaseFailure(Exception):
    pass


@dataclass
class _StepState:
    """One frame in progress: its inputs, the snapshot a failure rolls back to, the timings."""

    frame_dt: float
    kinematic_end: np.ndarray
    soft_end: np.ndarray
    snapshot: tuple
    timings: dict
    t_frame: float
    #: the contact pushes at the frame start (restored with the snapshot)
    contact_push: np.ndarray | None = None
    strain: np.ndarray | None = None
    #: the frame runs ``settings.substeps * substep_scale`` substeps (a retry of a frame that ended
    #: stretched, ``SolverSettings.stretch_refinements``, or in a collision world left new crossings,
    #: :class:`.collisions.world.CollisionWorld`)
    substep_scale: int = 1
    #: the 95th percentile of the edges' strain beyond their stretch limit at the frame's end
    #: (:meth:`Cloth._needs_refinement`)
    stretch_over_limit_p95: float = 0.0
