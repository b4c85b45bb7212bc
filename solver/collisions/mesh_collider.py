"""One triangle-mesh collider as one cloth sees it: its state and its phases.

A :class:`MeshCollider` holds what is the cloth's (the frame's poses it was given, the candidate
lists of its vertices, the narrow phase's caches) and takes what is the body's from the body
(:mod:`.mesh_body`: bounding spheres, hash grids and a standing body's data, built once for every
cloth). Its phases, called by :class:`~.colliders.Colliders`:

- :meth:`broad_phase` (per frame): candidate triangles of every vertex along its travel capsule
  (reusing the lists still valid, querying the rest) or, for a body standing still, the closest
  face lists of its cells; the side each vertex starts the frame on.
- :meth:`narrow_phase` (per substep): one contact per vertex against its closest triangle, the
  lost vertices re-queried on the spot (:meth:`_requery`).

The tuning (``DEFLECTION_ALLOWANCE``, ``LIST_SLACK_M``, the standing shortcuts' constants, the
``use_*`` switches) is read from the owning ``Colliders`` (``tuning``), where tests and
comparisons set it; see the docstrings there.
"""

from __future__ import annotations

import numba
import numpy as np

from ..errors import ClothInputError
from . import mesh_kernels, mesh_narrow_phase
from .mesh_body import StandingData, StandingParams, TriangleGrid
from .mesh_narrow_phase import BodyFrame, CandidateLists, NarrowCaches, NarrowScratch

#: The shortcuts of a collider that does not stand still: none (placeholders of the right types).
NO_STANDING_DATA = StandingData(
    np.zeros((0, 3)),
    np.zeros(0),
    np.zeros((1, 1, 1)),
    np.zeros(3),
    1.0,
    0.0,
    np.zeros(1, dtype=np.int64),
    np.zeros(1, dtype=np.int64),
    np.zeros(0, dtype=np.int64),
    np.zeros(0),
    np.full(1, -1.0),
    False,
)


def _same_pose(a, b) -> bool:
    """Two poses of a body with the same positions (the same pose, unless the body forgot it since)."""
    return a is not None and b is not None and (a is b or np.array_equal(a.vertices, b.vertices))


class MeshCollider:
    """A :class:`~.proxies.TriangleMesh` proxy's state for one cloth (see the module docstring)."""

    def __init__(self, mesh, tuning):
        self.mesh = mesh
        self.tuning = tuning  # the owning Colliders: cloth thickness, margins, constants and switches
        self.body = mesh.body  # shared with every cloth colliding with this mesh (mesh_body)
        self.pose0 = self.pose1 = self.body.pose(mesh.vertices)  # the frame's start and end
        self.v0 = self.v1 = self.pose0.vertices  # (their positions: read, never written)
        self.nbr = self.body.edge_neighbours
        self.motion = 0.0
        self.cum_motion = 0.0  # collider motion bound summed over the frames done
        # candidate lists: vertex i's are cand[first[i]:stop[i]], built around the travel segment
        # [seg_a, seg_b] of reach r_built when the summed motion was mark (re-queried lists appended)
        self.first = np.zeros(0, dtype=np.int64)
        self.stop = np.zeros(0, dtype=np.int64)
        self.cand = np.zeros(0, dtype=np.int64)
        self.d0 = np.zeros(0)
        self.used = 0  # slots of cand / d0 in use
        self.seg_a = np.zeros((0, 3))
        self.seg_b = np.zeros((0, 3))
        self.mark = np.zeros(0)
        self.r_built = np.zeros(0)
        self.base_shift = np.zeros(0)
        self.rebuilt = 0
        self.grid = None  # hash grid of the triangle boxes at the frame start (the body's, when first needed)
        self.grid_pose = None  # the pose it was taken for: kept while the collider stands still
        self.center = np.zeros((0, 3))  # bounding spheres of the triangles at the frame start (the body's)
        self.rad = np.zeros(0)
        self.standing = False  # still this frame and the last: the standing shortcuts apply
        self.prev_pose = None  # the frame-start pose of the last frame
        self.standing_data = NO_STANDING_DATA  # the body's, while standing
        self.side = np.zeros(0)
        self.path = np.zeros(0)
        self.path_prev = np.zeros((0, 3))
        self._alloc_vertices(0)

    def _alloc_vertices(self, n: int) -> None:
        """Per-vertex caches and scratch of the narrow phase (``clear`` < 0 / ``near_t`` < 0: scan)."""
        self.clear = np.full(n, -1.0)
        self.clear_pos = np.zeros((n, 3))
        self.clear_mark = np.zeros(n)
        self.near_t = np.full(n, -1, dtype=np.int64)
        self.near_other = np.zeros(n)
        self.near_pos = np.zeros((n, 3))
        self.near_mark = np.zeros(n)
        self.lost = np.zeros(n, dtype=np.bool_)
        self.hit = np.zeros(n, dtype=np.int8)
        self.res = np.zeros((n, 9))
        self.from_cache = np.zeros(n, dtype=np.bool_)
        self.certified = np.zeros(n, dtype=np.bool_)  # certified at its last scan (counted)
        self.cell_scan = np.zeros(n, dtype=np.bool_)

    @property
    def name(self):
        return self.mesh.name

    @property
    def radius(self) -> float:
        """The gap a contact keeps: cloth thickness + the collider's skin (m)."""
        return self.tuning.cloth_thickness + self.mesh.thickness

    # -- poses ------------------------------------------------------------------------------------
    def set_positions(self, vertices: np.ndarray, *, teleport: bool = False) -> None:
        """World vertex positions (M, 3), validated, at the end of the next frame (``teleport``: at its start too)."""
        self.pose1 = self.body.pose(vertices)
        self.v1 = self.pose1.vertices
        if teleport:
            self.pose0, self.v0 = self.pose1, self.v1
            self.seg_a = np.zeros((0, 3))  # a jump is not a bounded motion: rebuild every candidate list

    def end_frame(self) -> None:
        self.pose0, self.v0 = self.pose1, self.v1
        self.cum_motion += self.motion

    def forget_grid(self) -> None:
        """Drop the hash grid, this cloth's and the body's (the next frame builds a new one; for tests)."""
        self.grid = self.grid_pose = None
        self.pose0.forget_grids()

    def body_frame(self) -> BodyFrame:
        return BodyFrame(
            self.mesh.triangles, self.v0, self.v1, self.center, self.rad, self.nbr, self.motion, self.cum_motion
        )

    def lists(self) -> CandidateLists:
        return CandidateLists(
            self.first, self.stop, self.cand, self.d0, self.seg_a, self.seg_b, self.r_built, self.base_shift
        )

    # -- broad phase (per frame) ------------------------------------------------------------------
    def broad_phase(self, x, seg_end, active, pad, frame_open: bool) -> None:
        """Candidate triangles of every vertex: reuse the list where still valid, query the rest.

        Vertex i moves along the segment [x_i, seg_end_i] give or take ``pad_i`` (see
        :func:`mesh_kernels.vertex_travel_segments`) and the collider moves at most ``motion``: its
        list holds every triangle within ``r_built = pad + motion + slack + radius`` of that
        segment (collider at the frame start; slack ``LIST_SLACK_M`` for a vertex whose segment is
        shorter than it, else 0), sorted nearest first. A list built in an
        earlier frame is kept while this frame's capsule lies inside the old one shrunk by the
        collider's motion since (see :func:`mesh_kernels.mesh_keep_lists`). A vertex pushed off its
        segment further than the capsule allows (a contact deflected it) is caught in the
        narrow phase and re-queried there (:meth:`_requery`).

        A collider standing still this frame and the last (with ``use_standing_shortcuts``) builds
        no lists: every vertex starts with an empty one (``r_built`` 0), the narrow phase scans the
        list of the cell the vertex is in, and re-queries a vertex only where it needs a scan in a
        cell too far from the mesh for a list (one moving more than ~1 cm a substep). A landing
        frame of bench_collisions queried ~3,800 capsules with ~120,000 candidates (8 of 10 ms of
        its broad phase) and re-queried ~500 lost vertices. ``frame_open``: this frame was begun
        before (a retry: the same frame, every vertex scanned afresh).
        """
        n = x.shape[0]
        radius = self.radius
        tuning = self.tuning
        d = self.v1 - self.v0
        self.motion = float(np.sqrt(np.einsum("ij,ij->i", d, d).max()))
        if not _same_pose(self.grid_pose, self.pose0):  # new positions: new grid, new spheres (the body's)
            self.grid = None
            self.grid_pose = self.pose0
            self.center, self.rad = self.pose0.spheres()
        if not frame_open:  # (a retried frame is the same frame)
            self.standing = self.motion == 0.0 and _same_pose(self.prev_pose, self.pose0)
            self.prev_pose = self.pose0
        self.standing &= tuning.use_clearance_cache and tuning.use_standing_shortcuts
        first = self.seg_a.shape != x.shape
        if self.standing:
            self._standing_data(radius)
        if self.standing and self.standing_data.has_cell_lists:  # the cell lists name the closest face
            self.seg_a, self.seg_b = x.copy(), x.copy()
            self.mark = np.full(n, self.cum_motion)
            self.r_built = np.zeros(n)  # a vertex out of the cells with lists that needs a scan is re-queried
            self.first = np.zeros(n, dtype=np.int64)
            self.stop = np.zeros(n, dtype=np.int64)
            self.used = 0
            self.rebuilt = 0
        else:
            self._capsule_lists(x, seg_end, active, pad + self.motion, radius, first)
        self.base_shift = self.cum_motion - self.mark
        if first or frame_open:  # a jump (new lists from scratch) or a retried frame: scan every vertex
            self.clear[:] = -1.0
            self.near_t[:] = -1
        self.path = np.zeros(n)  # path length of each vertex since the frame start (or a clean scan)
        self.path_prev = x.copy()
        self.side = np.ones(n)
        near_t = self.near_t if self.near_t.shape[0] == n else np.full(n, -1, dtype=np.int64)  # (before any substep)
        mesh_narrow_phase.mesh_frame_sides(
            x, self.lists(), self.body_frame(), self._shortcuts(), self.mesh.one_sided, self.standing, near_t, self.side
        )

    def _shortcuts(self) -> StandingData:
        return self.standing_data if self.standing else NO_STANDING_DATA

    def _capsule_lists(self, x, seg_end, active, need, radius, first):
        """Candidate lists of a collider that moves (or just stopped): keep the valid ones, query
        the rest (see :meth:`broad_phase`)."""
        n = x.shape[0]
        slack = self.tuning.LIST_SLACK_M
        if first:
            keep = np.zeros(n, dtype=np.bool_)
        else:
            moved_since = self.cum_motion + self.motion - self.mark
            keep = np.empty(n, dtype=np.bool_)
            mesh_kernels.mesh_keep_lists(
                x, seg_end, active, self.seg_a, self.seg_b, self.r_built, need + radius, moved_since, slack, keep
            )
        rebuild = active & ~keep
        self.rebuilt = int(np.count_nonzero(rebuild))
        if self.rebuilt:
            # the slack only pays for a vertex slow enough to keep its list (one moving farther than
            # the slack in a frame leaves the old capsule anyway)
            step = seg_end - x
            slow = np.einsum("ij,ij->i", step, step) <= slack**2
            reach = need + np.where(slow, slack, 0.0)
            offsets, cand, d0 = self._query(x, seg_end, reach, radius, rebuild)
            if first:
                self.seg_a = x.copy()
                self.seg_b = seg_end.copy()
                self.mark = np.full(n, self.cum_motion)
                self.r_built = reach + radius
                self.first, self.stop = offsets[:-1].copy(), offsets[1:].copy()
                self.cand, self.d0, self.used = cand, d0, int(offsets[-1])
            else:
                self.first, self.stop, self.cand, self.d0, self.used = mesh_kernels.mesh_merge_candidates(
                    keep | ~active,
                    self.first,
                    self.stop,
                    self.cand,
                    self.d0,
                    offsets,
                    cand,
                    d0,
                    self.tuning._spare(offsets[-1]),
                )
                self.seg_a[rebuild] = x[rebuild]
                self.seg_b[rebuild] = seg_end[rebuild]
                self.mark[rebuild] = self.cum_motion
                self.r_built[rebuild] = reach[rebuild] + radius
        elif first:
            self.seg_a, self.seg_b = x.copy(), seg_end.copy()
            self.mark = np.full(n, self.cum_motion)
            self.r_built = need + radius
            self.first = np.zeros(n, dtype=np.int64)
            self.stop = np.zeros(n, dtype=np.int64)

    def _standing_data(self, radius):
        """Face normals, convexity certificates, coarse distance bounds and closest-face lists per
        cell of a standing collider at its positions ``v0``: the body's
        (:meth:`.mesh_body.BodyPose.standing_data`), built once per pose for every cloth. The
        certificates take the frame's triangle grid when there is one (they do not depend on its cell)."""
        t = self.tuning
        params = StandingParams(
            t.CERTIFICATE_REACH_M,
            t.DISTANCE_BOUND_CELL_M,
            t.DISTANCE_BOUND_BAND_M,
            t.DISTANCE_BOUND_MAX_CELLS,
            t.CELL_LIST_TRAVEL_M,
            t.CELL_LIST_MAX_ENTRIES,
        )
        self.standing_data = self.pose0.standing_data(radius, params, self.grid)

    def _query(self, seg_a, seg_b, pad, radius, which):
        """CSR candidate lists of the vertices in ``which`` (others empty), collider at frame start;
        the grid's cell suits their mean pad."""
        reach = float(np.mean(pad[which])) if which.any() else 0.0
        g = self._grid(radius, reach)
        return mesh_kernels.mesh_query_candidates(
            seg_a,
            seg_b,
            pad,
            radius,
            which,
            g.lo,
            g.hi,
            g.cell,
            g.table,
            g.bucket,
            g.items,
            32,
            self.mesh.triangles,
            self.v0,
            self.center,
            self.rad,
            numba.get_num_threads(),
        )

    def _grid(self, radius, reach=None) -> TriangleGrid:
        """The hash grid of the collider's triangle boxes (grown by ``radius``) at the frame start.

        Any cell size gives the same lists; one near max(triangle extent, 2 reach) visits few
        cells and few boxes. A grid is kept while the collider stands still (rebuilding it took
        0.65 ms a frame on bench_collisions' 5k-triangle body) and its cell is within 2x of that;
        ``reach=None`` takes any grid of this radius (the narrow phase's re-queries). A new one is
        the body's (:meth:`.mesh_body.BodyPose.grid`: built once per pose, radius and cell for every cloth).
        """
        g = self.grid
        if (
            g is not None
            and g.radius == radius
            and (reach is None or 0.5 <= g.cell / max(g.extent, 2.0 * reach, 1e-6) <= 2.0)
        ):
            return g
        self.grid = self.pose0.grid(radius, reach)
        return self.grid

    # -- narrow phase (per substep) ---------------------------------------------------------------
    def narrow_phase(self, x_start, x_pred, inv_mass, t_start, t_end, h, frame_dt, rows, count, stats) -> int:
        """This collider's contacts at the substep end, written into ``rows`` (a
        :class:`.contacts.ContactRows`) from row ``count``; returns the next row. Vertices flagged
        lost (pushed off their capsule) are re-queried and measured again in a second pass."""
        n = x_pred.shape[0]
        if self.path.shape[0] != n:
            raise ClothInputError("Colliders.begin_substep called before begin_frame")
        if self.lost.shape[0] != n:
            self._alloc_vertices(n)
        if not self.tuning.use_clearance_cache:
            self.clear[:] = -1.0
            self.near_t[:] = -1
        caches = NarrowCaches(
            self.side,
            self.path,
            self.path_prev,
            self.clear,
            self.clear_pos,
            self.clear_mark,
            self.near_t,
            self.near_other,
            self.near_pos,
            self.near_mark,
        )
        scratch = NarrowScratch(self.lost, self.hit, self.res, self.from_cache, self.certified, self.cell_scan)
        body = self.body_frame()
        shortcuts = self._shortcuts()
        for attempt in range(2):
            new_count, n_lost, n_skipped, n_cached, n_certified, n_cell = mesh_narrow_phase.mesh_narrow_phase(
                x_start,
                x_pred,
                inv_mass,
                self.lists(),
                body,
                caches,
                scratch,
                shortcuts,
                rows,
                t_start,
                t_end,
                self.radius,
                self.mesh.friction_static,
                self.mesh.friction_kinetic,
                attempt == 1,
                self.standing,
                count,
            )
            if attempt == 0:
                for key, value in (
                    ("mesh_scans_skipped", n_skipped),
                    ("mesh_scans_cached", n_cached),
                    ("mesh_scans_certified", n_certified),
                    ("mesh_scans_cell_lists", n_cell),
                ):
                    stats[key] = stats.get(key, 0) + value
            if n_lost == 0 or attempt == 1:
                break
            self._requery(x_start, x_pred, t_end, h, frame_dt, stats)
        return new_count

    def _requery(self, x_start, x_pred, t_end, h, frame_dt, stats):
        """New candidate lists for the vertices the narrow phase flagged ``lost``: a capsule from
        the prediction along the substep's velocity to the end of the frame, of radius substep
        travel + margin + collider motion + the deflection allowance of that remaining path (a
        vertex that still leaves it later in the frame is flagged and re-queried again). One
        Numba call (:func:`mesh_kernels.requery_lost`) on the frame's grid."""
        t = self.tuning
        g = self._grid(self.radius)
        used, idx, offsets, cand, d0 = mesh_kernels.requery_lost(
            self.lost,
            x_start,
            x_pred,
            (1.0 - t_end) * frame_dt,
            h,
            t.broad_phase_margin_m + self.motion,
            t.DEFLECTION_ALLOWANCE,
            g,
            32,
            self.body_frame(),
            self.lists(),
            self.used,
            self.mark,
            self.cum_motion,
        )
        if used < 0:  # no room left: compact (dropping the replaced lists) with room for these and more
            keep = np.ones(self.first.shape[0], dtype=np.bool_)
            self.first, self.stop, self.cand, self.d0, self.used = mesh_kernels.mesh_merge_candidates(
                keep,
                self.first,
                self.stop,
                self.cand,
                self.d0,
                offsets,
                cand,
                d0,
                int(offsets[-1]) + t._spare(self.used),
            )
            used = mesh_kernels.mesh_append_lists(
                idx, offsets, cand, d0, self.first, self.stop, self.cand, self.d0, self.used
            )
        self.used = used
        stats["mesh_lists_requeried"] = stats.get("mesh_lists_requeried", 0) + int(idx.shape[0])
