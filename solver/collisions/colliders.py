"""The contact layer: body proxies, friction and optional self-collision as a ContactHandler.

Per frame (``begin_frame``, 001 sec. 6.2): broad phase. Each free cloth vertex may travel
``|v| frame_dt + margin`` this frame, ``margin = broad_phase_margin_m + max_acceleration *
frame_dt^2 / 2`` (gravity and cloth forces). Analytic proxies are tested with the bounding
sphere swept along their centre's path (or, for the plane, the signed distance at the frame
start, middle and end). Mesh colliders use a tighter capsule per vertex: the chord of its
predicted path ``x + v t + a t^2 / 2`` (``a`` its velocity change over the last frame, at most
``max_acceleration``) grown by ``broad_phase_margin_m + |a| dt^2 / 8 + 0.05 |v| dt`` and the
collider's motion; each vertex collects the triangles within that capsule (uniform hash grid
of the triangles, a lower bound of the segment-triangle distance; in parallel chunks of
vertices), sorted nearest first (a vertex that moves less than ``LIST_SLACK_M`` a frame gets a
list that much wider than needed), and keeps an earlier frame's list while its new capsule lies
inside the old one.

A mesh collider standing still (this frame and the last) needs no candidate lists: its cells of
a coarse grid near the surface hold the faces that can be the closest to any point in them
(:mod:`.cell_lists`), next to a lower bound of the distance (:mod:`.distance_bounds`) and the
faces' convexity certificates (:mod:`.convexity`), built once per set of positions.

Per substep (``begin_substep``): narrow phase on those candidates only, with the colliders
placed at the substep end (position lerped, rotation slerped inside the frame; mesh vertices
lerped): one contact row (normal, surface point, radius, surface displacement over the
substep, friction). A mesh gives one contact per vertex, against its closest triangle; the
scan of the sorted candidates stops as soon as no remaining triangle can be closer, vertices
that cannot have come near the surface are skipped, a vertex whose last closest triangle is
provably still the closest measures only that one, and a vertex pushed off its capsule (so
that its list could miss a triangle) is detected and re-queried on the spot (its new list
appended), so the capsule is a speed choice, never a correctness assumption. The per-vertex work runs in
parallel (``prange``), compacted in vertex order: results do not depend on the thread count.

Per iteration (``project``): contacts are inequality constraints iterated with the elastic
ones; the multiplier is clamped so a contact never pulls (002 sec. 3), then the position
level Coulomb friction of 001 sec. 6.3 uses this substep's normal correction and the motion
relative to the collider surface.

Transforms: :meth:`Colliders.set_transform` / :meth:`Colliders.set_mesh_positions` give the
pose at the end of the next frame; the frame starts where the previous frame ended. After a
successful frame the Cloth calls :meth:`end_frame`, which makes the end pose the next start;
a proxy that is not moved stays put. A frame the Cloth rolls back leaves the poses as set, so
a retry replays the same motion.

Layout: this module is the handler (analytic proxies and SDF grids, self-collision, the contact
rows and their solve); each triangle mesh is a :class:`.mesh_collider.MeshCollider` (this cloth's
state of it and its phases) over the body's data, built once per set of positions for every
cloth (:mod:`.mesh_body`; proxies for other cloths: :meth:`.proxies.Collider.with_friction`); its
kernels are :mod:`.mesh_kernels` (broad phase) and :mod:`.mesh_narrow_phase`. Code outside the
collision layer reads the colliders through :meth:`Colliders.snapshot` (:mod:`.snapshot`).

Thickness: ``cloth_thickness`` must be > 0 (a ClothInputError otherwise): it is the gap kept
between cloth vertices and every collider (plus each collider's own ``thickness``) and the
self-collision radius. Quaternions are (w, x, y, z).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba
import numpy as np

from ..errors import ClothInputError
from ..hooks import ContactHandler
from ..transforms import quaternion_conjugate, rotate_rows
from . import analytic, contacts, mesh_kernels, sdf, self_contact
from .contacts import ContactRows
from .mesh_collider import MeshCollider
from .proxies import AnalyticCollider, SDFGrid, TriangleMesh, validated_rotation, validated_vector
from .snapshot import ColliderSnapshot, snapshot_of

#: how far past touching (in units of the contact distance r: ``C <= 0.05 r``) a vertex still
#: counts as lying on the body (:meth:`Colliders.add_touching_normals`); a vertex the body just
#: pushed sits at C = 0
TOUCHING_REACH = 0.05


@dataclass
class SelfCollision:
    """Self-collision settings (off unless a SelfCollision is given to :class:`Colliders`).

    ``thickness``: the distance kept between a vertex and another layer (and the particle
    radius: two vertices keep 2 x thickness apart); None uses the cloth thickness.
    ``particles``: particle-particle spheres (spatial hash, cell 2 x radius, vertices within
    two mesh hops excluded). ``triangles``: vertex-triangle repulsion, corrections shared by
    inverse mass over the four vertices.
    """

    thickness: float | None = None
    particles: bool = True
    triangles: bool = True
    #: self-collision + body-contact passes per solver iteration (>= 1), see Colliders.project
    rounds: int = 3


def _next_pow2(value: int) -> int:
    return 1 << max(4, int(value - 1).bit_length())


class Colliders(ContactHandler):
    """Contact handler over a list of proxies (:class:`Plane`, :class:`Sphere`, :class:`Capsule`,
    :class:`Box`, :class:`TriangleMesh`) plus optional self-collision.

    ``cloth_triangles`` (T,3) is needed only with ``self_collision``.
    """

    def __init__(
        self,
        colliders=(),
        cloth_thickness: float = 0.004,
        *,
        self_collision: SelfCollision | None = None,
        cloth_triangles=None,
        broad_phase_margin_m: float = 0.01,
        max_acceleration_m_s2: float = 20.0,
    ):
        thickness = float(cloth_thickness)
        if not (math.isfinite(thickness) and thickness > 0.0):
            raise ClothInputError(
                f"cloth_thickness must be finite and > 0 (a gap of a few mm, e.g. 0.004), got {cloth_thickness}; "
                "with zero thickness contacts would sit exactly on the surface and flicker through it"
            )
        for what, value in (
            ("broad_phase_margin_m", broad_phase_margin_m),
            ("max_acceleration_m_s2", max_acceleration_m_s2),
        ):
            if not (math.isfinite(value) and value >= 0):
                raise ClothInputError(f"{what} must be finite and >= 0, got {value}")
        self.cloth_thickness = thickness
        self.broad_phase_margin_m = float(broad_phase_margin_m)
        self.max_acceleration_m_s2 = float(max_acceleration_m_s2)
        self.colliders = list(colliders)
        self.analytic: list[AnalyticCollider] = []
        self.meshes: list[MeshCollider] = []
        self.warnings: list[str] = []
        names = set()
        for c in self.colliders:
            if isinstance(c, AnalyticCollider):
                self.analytic.append(c)
            elif isinstance(c, TriangleMesh):
                self.meshes.append(MeshCollider(c, self))
                self.warnings.extend(c.warnings)
            else:
                raise ClothInputError(
                    f"not a collider: {c!r} (use Plane, Sphere, Capsule, Box, SDFGrid or TriangleMesh)"
                )
            if c.name is not None:
                if c.name in names:
                    raise ClothInputError(f"two colliders are named {c.name!r}")
                names.add(c.name)
        k = len(self.analytic)
        self.kind = np.array([c.kind for c in self.analytic], dtype=np.int64)
        self.dims = np.array([c.dims for c in self.analytic], dtype=np.float64).reshape(k, 3)
        self.pos0 = np.array([c.position for c in self.analytic], dtype=np.float64).reshape(k, 3)
        self.rot0 = np.array([c.rotation for c in self.analytic], dtype=np.float64).reshape(k, 4)
        self.pos1 = self.pos0.copy()
        self.rot1 = self.rot0.copy()
        self.skin = np.array([c.thickness for c in self.analytic], dtype=np.float64)
        self.mu_s = np.array([c.friction_static for c in self.analytic], dtype=np.float64)
        self.mu_k = np.array([c.friction_kinetic for c in self.analytic], dtype=np.float64)
        self.bound = np.array([c.bound_radius for c in self.analytic], dtype=np.float64)
        self.sdf_index = [k for k, c in enumerate(self.analytic) if isinstance(c, SDFGrid)]
        #: analytic shapes other than SDF grids: without them the analytic narrow phase (a parallel
        #: region per substep) has nothing to do
        self._has_shapes = len(self.sdf_index) < k

        self.self_collision = self_collision
        self._self_tris = None
        if self_collision is not None:
            st = self.cloth_thickness if self_collision.thickness is None else float(self_collision.thickness)
            if not (math.isfinite(st) and st > 0.0):
                raise ClothInputError(
                    f"self-collision thickness must be finite and > 0, got {self_collision.thickness}"
                )
            self.self_thickness = st
            if not (isinstance(self_collision.rounds, (int, np.integer)) and self_collision.rounds >= 1):
                raise ClothInputError(f"self-collision rounds must be an integer >= 1, got {self_collision.rounds!r}")
            if cloth_triangles is None:
                raise ClothInputError("self-collision needs cloth_triangles (the cloth's (T, 3) triangles)")
            tris = np.ascontiguousarray(np.asarray(cloth_triangles), dtype=np.int64)
            if tris.ndim != 2 or tris.shape[1] != 3 or tris.shape[0] == 0 or tris.min() < 0:
                raise ClothInputError(f"cloth_triangles must be a non-empty (T, 3) index array, got {tris.shape}")
            self._self_tris = tris
        self._self_ready_n = -1

        self._frame_open = False
        self._seg_end = np.zeros((0, 3))
        self._active = np.zeros(0, dtype=np.bool_)
        self._frame_dt = 0.0
        self._pad = np.zeros(0)
        self._v_prev = np.zeros((0, 3))
        self._cand_vertex = np.zeros(0, dtype=np.int64)
        self._cand_proxy = np.zeros(0, dtype=np.int64)
        self._cand_hit = np.zeros(0, dtype=np.bool_)
        self._cand_res = np.zeros((0, 9))
        self._n_cand = 0
        self._budget = np.zeros(0)
        self._listed = np.zeros((0, 0), dtype=np.bool_)
        self._budget_origin = np.zeros((0, 3))
        self._alloc_contacts(0)
        self._n_contacts = 0
        self._t_frame = 0.0
        self._stats = {}
        self._empty_i = np.zeros(0, dtype=np.int64)
        self._self_pi = self._self_pj = self._empty_i
        self._self_lam_p = np.zeros(0)
        self._self_cv = self._self_ct = self._empty_i
        self._self_cs = np.zeros(0)
        self._self_lam_t = np.zeros(0)

    # ------------------------------------------------------------------------------------------
    def _index(self, key, pool, what):
        if isinstance(key, (int, np.integer)):
            if not 0 <= key < len(pool):
                raise ClothInputError(f"{what} index {key} out of range 0..{len(pool) - 1}")
            return int(key)
        for i, c in enumerate(pool):
            name = c.name
            if name == key:
                return i
        raise ClothInputError(f"no {what} named {key!r}")

    def set_transform(self, key, position, rotation=None, *, teleport: bool = False) -> None:
        """Pose of an analytic proxy (index among the analytic ones, or name) at the end of the next frame.

        ``rotation``: unit quaternion (w, x, y, z), None keeps the current one. ``teleport``
        also moves the frame-start pose (no interpolated sweep, no surface velocity).
        """
        k = self._index(key, self.analytic, "analytic collider")
        p = validated_vector(f"collider {key!r} position", position, 3)
        q = self.rot1[k].copy() if rotation is None else validated_rotation(f"collider {key!r} rotation", rotation)
        self.pos1[k] = p
        self.rot1[k] = q
        if teleport:
            self.pos0[k] = p
            self.rot0[k] = q

    def set_mesh_positions(self, key, vertices, *, teleport: bool = False) -> None:
        """World vertex positions (M,3) of a mesh collider at the end of the next frame."""
        m = self.meshes[self._index(key, self.meshes, "mesh collider")]
        v = np.ascontiguousarray(np.asarray(vertices, dtype=np.float64))
        if v.shape != m.v1.shape:
            raise ClothInputError(f"mesh collider {key!r}: positions must have shape {m.v1.shape}, got {v.shape}")
        if not np.isfinite(v).all():
            raise ClothInputError(f"mesh collider {key!r}: positions contain NaN or infinite values")
        m.set_positions(v, teleport=teleport)

    def end_frame(self) -> None:
        self._frame_open = False
        self.pos0[:] = self.pos1
        self.rot0[:] = self.rot1
        for m in self.meshes:
            m.end_frame()

    # ------------------------------------------------------------------------------------------
    def _alloc_contacts(self, capacity: int) -> None:
        capacity = max(int(capacity), 16)
        self._cap = capacity
        self.c_vertex = np.zeros(capacity, dtype=np.int64)
        self.c_normal = np.zeros((capacity, 3))
        self.c_point = np.zeros((capacity, 3))
        self.c_radius = np.zeros(capacity)
        self.c_disp = np.zeros((capacity, 3))
        self.c_mu_s = np.zeros(capacity)
        self.c_mu_k = np.zeros(capacity)
        self.c_lam = np.zeros(capacity)
        self.c_friction = np.zeros((capacity, 3))

    def _analytic_margin(self) -> float:
        """The path length (m) an analytic candidate is listed for beyond ``|v| frame_dt``: the
        broad-phase margin and half the largest acceleration over this frame's ``frame_dt``."""
        return self.broad_phase_margin_m + 0.5 * self.max_acceleration_m_s2 * self._frame_dt * self._frame_dt

    def _proxy_sweep(self) -> analytic.ProxySweep:
        return analytic.ProxySweep(
            self.kind, self.dims, self.pos0, self.rot0, self.pos1, self.rot1, self.skin, self.bound
        )

    def _pairs(self) -> analytic.CandidatePairs:
        return analytic.CandidatePairs(
            self._cand_vertex, self._cand_proxy, self._budget_origin, self._budget, self._listed
        )

    def begin_frame(self, x, v, inv_mass, frame_dt):
        n = x.shape[0]
        self._inv_mass = inv_mass
        self._frame_dt = frame_dt
        margin = self._analytic_margin()
        k = self.kind.shape[0]
        if self._cand_vertex.shape[0] < n * k:
            self._cand_vertex = np.zeros(n * k, dtype=np.int64)
            self._cand_proxy = np.zeros(n * k, dtype=np.int64)
            self._cand_hit = np.zeros(n * k, dtype=np.bool_)  # per-candidate scratch of the narrow phases
            self._cand_res = np.zeros((n * k, 9))
        self._n_cand = 0
        if k:
            # each vertex's budget sphere (centre, radius) and its listed pairs, for the requery of a
            # vertex the solve carries out of it (analytic.analytic_requery, in begin_substep)
            if self._budget.shape[0] != n or self._listed.shape != (n, k):
                self._budget_origin = np.empty((n, 3))
                self._budget = np.empty(n)
                self._listed = np.empty((n, k), dtype=np.bool_)
            self._n_cand = analytic.analytic_broad_phase(
                x, v, inv_mass, frame_dt, margin, self.cloth_thickness, self._proxy_sweep(), self._pairs()
            )
        mesh_cand = 0
        if self.meshes:
            if self._seg_end.shape != x.shape:
                self._seg_end = np.empty_like(x)
                self._pad = np.empty(n)
                self._active = np.empty(n, dtype=np.bool_)
                self._v_prev = v.copy()
            mesh_kernels.vertex_travel_segments(
                x,
                v,
                self._v_prev,
                inv_mass,
                frame_dt,
                self.max_acceleration_m_s2,
                self.broad_phase_margin_m,
                self.DEFLECTION_ALLOWANCE,
                self._seg_end,
                self._pad,
                self._active,
            )
            self._v_prev[:] = v
            for m in self.meshes:
                m.broad_phase(x, self._seg_end, self._active, self._pad, self._frame_open)
                mesh_cand += int((m.stop - m.first).sum())
        capacity = self._n_cand + n * len(self.meshes)
        if capacity > self._cap:
            self._alloc_contacts(2 * capacity)
        if self._self_tris is not None and self._self_ready_n != n:
            self._prepare_self(x)
        self._frame_open = True  # until end_frame: a frame begun again before it is a retry
        self._stats = {
            "candidates_analytic": self._n_cand,
            "candidates_mesh": mesh_cand,
            "mesh_lists_rebuilt": sum(m.rebuilt for m in self.meshes),
            "mesh_lists_requeried": 0,
            "analytic_requeried": 0,
            "mesh_scans_skipped": 0,
            "mesh_scans_cached": 0,
            "mesh_scans_certified": 0,
            "mesh_scans_cell_lists": 0,
            "contacts_max": 0,
            "contacts_active_last_substep": 0,
            "self_pairs_max": 0,
            "self_triangle_pairs_max": 0,
        }

    #: Skip a vertex's narrow-phase scan while a cached lower bound of its distance to the mesh
    #: keeps it out of contact reach, and measure only its last closest triangle while that one
    #: is provably still the closest (see :func:`.mesh_narrow_phase.mesh_narrow_phase`); False
    #: scans every candidate of every vertex every substep (same contacts, for tests and comparisons).
    use_clearance_cache = True

    #: Shortcuts for a mesh collider standing still in the frame and the one before (a body
    #: animated on twos would otherwise rebuild their data every other frame; same contacts, to the
    #: certificates' 1 nm; False for tests and comparisons; needs ``use_clearance_cache``): a
    #: vertex's last closest face, or a neighbour across the edge its closest point lies on, may
    #: prove itself the closest of the whole mesh by a convexity certificate (:mod:`.convexity`),
    #: with no list scan; coarse distance bounds (:mod:`.distance_bounds`) skip the scan of a
    #: vertex out of contact reach; the closest-face lists of the grid's cells
    #: (:mod:`.cell_lists`) stand in for the per-vertex candidate lists (no capsule queries).
    use_standing_shortcuts = True

    #: Extra capsule radius, as a fraction of the free-flight travel |v| frame_dt: a fast vertex
    #: is bent off its straight path by cloth forces and contacts. A vertex that still leaves its
    #: capsule is re-queried in the narrow phase. Measured on bench_collisions (drop phase, ms of
    #: contacts per frame): 0.25 -> 40.4, 0.1 -> 36.1, 0.05 -> 34.2, 0 -> 35.2; a re-query of a few
    #: vertices costs ~0.05 ms, so shorter lists win over fewer re-queries down to about 0.05.
    DEFLECTION_ALLOWANCE = 0.05

    #: Extra reach (m) a candidate list is built with, so that it stays valid while its vertex
    #: drifts a little over the next frames (see :func:`mesh_kernels.mesh_keep_lists`); without it
    #: nearly every list was rebuilt every frame. Measured on bench_collisions (ms of contacts per
    #: frame, draped / drop): 0 -> 14.9-17.1 / 28-32 (broad phase 6.0 draped), 0.005 -> 10.9-11.4 /
    #: 28-30 (3.2), 0.01 -> 10.7 / 27 (2.9). Only vertices that move less than this in a frame get
    #: it: a faster one cannot keep its list anyway (drop phase broad phase 11.2-12.6 -> 8.3-9.9 ms,
    #: three interleaved runs each; draped unchanged).
    LIST_SLACK_M = 0.005

    #: Reach (m) of the convexity certificates (:mod:`.convexity`): a face certifies vertices up to
    #: half of it above; it costs one grid query of this size per triangle when the collider's
    #: positions change (5k-triangle body: 13 ms on two threads), done only for a collider standing still.
    CERTIFICATE_REACH_M = 0.03

    #: Cell side and cap (m) of the coarse distance bounds of a standing collider
    #: (:mod:`.distance_bounds`): a bound is the cell centre's distance less half a diagonal
    #: (1.3 cm here), so vertices ~2 cm off the body already skip their scans; built once per
    #: set of positions (5k-triangle body: 13 ms for the distances, 36-39 ms for the cell lists, on
    #: two threads).
    DISTANCE_BOUND_CELL_M = 0.015
    DISTANCE_BOUND_BAND_M = 0.05
    #: Most cells of that grid (8 bytes each): a larger mesh (a terrain) gets larger cells.
    DISTANCE_BOUND_MAX_CELLS = 4_000_000
    #: Cells of that grid whose centre lies within 2 x the contact radius + half a cell diagonal +
    #: this distance (m) of the mesh get a list of the faces that can be the closest to a point in
    #: them (:mod:`.cell_lists`; 3.1 cm for the bench body): a vertex needs a scan where its bound
    #: (the centre's distance less half a diagonal) is within 2 x the radius + its travel, so one in
    #: a cell without a list needs one only when it travels farther than this in a substep (then
    #: it gets a candidate list of its own). The distance grid's band grows to it for large cells.
    CELL_LIST_TRAVEL_M = 0.01
    #: Most entries of those lists (16 bytes each; the bench's 5k-face body needs 580,000): a
    #: denser mesh standing still keeps per-vertex candidate lists (with the other shortcuts).
    CELL_LIST_MAX_ENTRIES = 4_000_000

    @staticmethod
    def _spare(new: int) -> int:
        """Free slots kept after a merge for the lists re-queried later in the frame (a quarter of
        the lists just built: a landing frame of bench_collisions re-queries 4-8 % of its
        candidates; when they do not fit, the next merge compacts and makes room)."""
        return 4096 + int(new) // 4

    def _prepare_self(self, x):
        n = x.shape[0]
        tris = self._self_tris
        if tris.max() >= n:
            raise ClothInputError(f"cloth_triangles index {int(tris.max())} but the cloth has {n} vertices")
        edges = np.unique(np.sort(np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]), axis=1), axis=0)
        self._excl_offsets, self._excl = self_contact.two_hop_lists(n, np.ascontiguousarray(edges))
        edge = np.linalg.norm(x[tris[:, 1]] - x[tris[:, 0]], axis=1)
        self._self_cell = max(2.0 * self.self_thickness, float(edge.mean()))
        self._self_table = _next_pow2(2 * max(n, tris.shape[0]))
        self._self_ready_n = n

    def begin_substep(self, x_substep_start, x_predicted, t_start, t_end, h):
        inv_mass = self._inv_mass_for(x_predicted)
        count = 0
        if self.kind.shape[0]:
            self._n_cand, requeried = analytic.analytic_requery(
                x_substep_start,
                x_predicted,
                inv_mass,
                h,
                (1.0 - t_end) * self._frame_dt,
                self._analytic_margin(),
                self.cloth_thickness,
                self._proxy_sweep(),
                self._pairs(),
                self._n_cand,
            )
            self._stats["analytic_requeried"] += requeried
        if self._n_cand:
            if self._has_shapes:
                count = analytic.analytic_narrow_phase(
                    x_substep_start,
                    x_predicted,
                    inv_mass,
                    self._cand_vertex,
                    self._cand_proxy,
                    self._n_cand,
                    t_start,
                    t_end,
                    self.kind,
                    self.dims,
                    self.pos0,
                    self.rot0,
                    self.pos1,
                    self.rot1,
                    self.skin,
                    self.mu_s,
                    self.mu_k,
                    self.cloth_thickness,
                    self._cand_hit,
                    self._cand_res,
                    self.c_vertex,
                    self.c_normal,
                    self.c_point,
                    self.c_radius,
                    self.c_disp,
                    self.c_mu_s,
                    self.c_mu_k,
                    0,
                )
            for k in self.sdf_index:
                g = self.analytic[k]
                count = sdf.sdf_narrow_phase(
                    x_substep_start,
                    x_predicted,
                    inv_mass,
                    self._cand_vertex,
                    self._cand_proxy,
                    self._n_cand,
                    k,
                    t_start,
                    t_end,
                    self.pos0,
                    self.rot0,
                    self.pos1,
                    self.rot1,
                    g.phi,
                    g.origin,
                    g.spacing,
                    self.cloth_thickness,
                    self.skin,
                    self.mu_s,
                    self.mu_k,
                    self._cand_hit,
                    self._cand_res,
                    self.c_vertex,
                    self.c_normal,
                    self.c_point,
                    self.c_radius,
                    self.c_disp,
                    self.c_mu_s,
                    self.c_mu_k,
                    count,
                )
        rows = ContactRows(
            self.c_vertex, self.c_normal, self.c_point, self.c_radius, self.c_disp, self.c_mu_s, self.c_mu_k
        )
        for m in self.meshes:
            count = m.narrow_phase(
                x_substep_start, x_predicted, inv_mass, t_start, t_end, h, self._frame_dt, rows, count, self._stats
            )
        self._n_contacts = count
        self.c_lam[:count] = 0.0
        self.c_friction[:count] = 0.0
        self._stats["contacts_max"] = max(self._stats.get("contacts_max", 0), count)
        if self._self_tris is not None:
            sc = self.self_collision
            if sc.particles:
                self._self_pi, self._self_pj = self_contact.self_particle_pairs(
                    x_substep_start,
                    x_predicted,
                    inv_mass,
                    self.self_thickness,
                    self._excl_offsets,
                    self._excl,
                    self._self_table,
                    numba.get_num_threads(),
                )
                self._self_lam_p = np.zeros(self._self_pi.shape[0])
            if sc.triangles:
                self._self_cv, self._self_ct, self._self_cs = self_contact.self_triangle_contacts(
                    x_substep_start,
                    x_predicted,
                    inv_mass,
                    self._self_tris,
                    self.self_thickness,
                    self._self_cell,
                    self._self_table,
                    self._excl_offsets,
                    self._excl,
                    numba.get_num_threads(),
                )
                self._self_lam_t = np.zeros(self._self_cv.shape[0])
            self._stats["self_pairs_max"] = max(self._stats["self_pairs_max"], int(self._self_pi.shape[0]))
            self._stats["self_triangle_pairs_max"] = max(
                self._stats["self_triangle_pairs_max"], int(self._self_cv.shape[0])
            )

    def _inv_mass_for(self, x):
        inv_mass = getattr(self, "_inv_mass", None)
        if inv_mass is None or inv_mass.shape[0] != x.shape[0]:
            raise ClothInputError("Colliders.begin_substep called before begin_frame gave the inverse masses")
        return inv_mass

    def project(self, x, x_substep_start, inv_mass, h):
        # Self-collision first, body contacts last (the last projection is satisfied best, 001
        # A.4). With self-collision on, the pair is repeated ``self_collision.rounds`` times: a
        # layer lying on the body and the layer falling onto it share every self correction by
        # inverse mass and the body hands the lower layer's share back, so one pass would leave
        # the upper layer only part of the way out (Gauss-Seidel on the stack converges in a few).
        rounds = self.self_collision.rounds if self._self_tris is not None else 1
        for _ in range(rounds):
            if self._self_tris is not None:
                if self._self_pi.shape[0]:
                    self_contact.solve_self_particles(
                        x, inv_mass, self._self_pi, self._self_pj, self.self_thickness, self._self_lam_p
                    )
                if self._self_cv.shape[0]:
                    self_contact.solve_self_triangles(
                        x,
                        inv_mass,
                        self._self_cv,
                        self._self_ct,
                        self._self_cs,
                        self._self_tris,
                        self.self_thickness,
                        self._self_lam_t,
                    )
            if self._n_contacts:
                contacts.solve_contacts(
                    x,
                    x_substep_start,
                    inv_mass,
                    self.c_vertex,
                    self.c_normal,
                    self.c_point,
                    self.c_radius,
                    self.c_disp,
                    self.c_mu_s,
                    self.c_mu_k,
                    self._n_contacts,
                    self.c_lam,
                    self.c_friction,
                )

    def add_push_normals(self, x, push) -> None:
        """Add to ``push[i]`` the outward normal of every body contact of the last narrow phase whose
        vertex i lies, at ``x`` (the substep's end), within the contact's own distance of touching
        (``C = n . (x - q) - r <= r``), pushed or not, for the stretch limit (:mod:`...strain_limit`).
        Pushed contacts only: a vertex resting on a ball is pushed in some substeps only, flickers
        between held and free, and the cloth never came to rest (mm/s after 40 frames); every row
        within reach: a cloth leaving the ground was held by it. Self-collision pushes are not
        reported (a :class:`~.world.CollisionWorld` reports its cloth contacts)."""
        if self._n_contacts:
            contacts.add_push_normals(
                x, self.c_vertex, self.c_normal, self.c_point, self.c_radius, self._n_contacts, push
            )

    def add_touching_normals(self, x, out) -> None:
        """Add to ``out[i]`` the outward normal of every body contact of the last narrow phase that
        vertex i touches or lies inside at ``x`` (``C = n . (x - q) - r <= 0.05 r``). A
        :class:`~.world.CollisionWorld` reads it before each pass of its cloth contacts: a cloth
        contact must not push such a vertex into the body, where the body's next pass would
        push it back out through the layer above (docs/design/cloth_contacts.md, "The body
        under the layers")."""
        if self._n_contacts:
            contacts.add_push_normals(
                x, self.c_vertex, self.c_normal, self.c_point, self.c_radius, self._n_contacts, out, TOUCHING_REACH
            )

    def snapshot(self) -> ColliderSnapshot:
        """Every collider at the current frame (start and end poses), as read-only copies (:mod:`.snapshot`):
        what code outside the collision layer reads instead of this handler's fields."""
        return snapshot_of(
            self.analytic,
            self.kind,
            self.dims,
            self.pos0,
            self.rot0,
            self.pos1,
            self.rot1,
            self.skin,
            self.cloth_thickness,
            [(m.mesh, m.v0, m.v1) for m in self.meshes],
        )

    def diagnostics(self) -> dict:
        stats = dict(self._stats)
        # counted when asked for (after the frame), not at every substep
        stats["contacts_active_last_substep"] = int(np.count_nonzero(self.c_lam[: self._n_contacts] > 0.0))
        return stats

    # ------------------------------------------------------------------------------------------
    def analytic_signed_distance(self, points, t: float = 1.0) -> np.ndarray:
        """(P, K) signed distance of points to the analytic proxies' shapes (skin not included) at frame fraction t."""
        pts = np.ascontiguousarray(np.asarray(points, dtype=np.float64).reshape(-1, 3))
        out = np.empty((pts.shape[0], self.kind.shape[0]))
        analytic.analytic_signed_distance(
            pts, float(t), self.kind, self.dims, self.pos0, self.rot0, self.pos1, self.rot1, out
        )
        for k in self.sdf_index:  # signed distance grids: trilinear value in the proxy's frame at t
            p, q = _pose_at(self.pos0[k], self.rot0[k], self.pos1[k], self.rot1[k], float(t))
            local = rotate_rows(quaternion_conjugate(q), pts - p)
            out[:, k] = self.analytic[k].signed_distance(local)[0]
        return out


def _pose_at(p0, q0, p1, q1, t):
    """Position (lerp) and rotation (slerp, shortest arc) at frame fraction t, as the kernels do."""
    p = p0 + t * (p1 - p0)
    d = float(q0 @ q1)
    q1 = q1 if d >= 0 else -q1
    d = abs(d)
    if d > 0.9995:
        q = (1 - t) * q0 + t * q1
    else:
        th = math.acos(min(d, 1.0))
        q = (math.sin((1 - t) * th) * q0 + math.sin(t * th) * q1) / math.sin(th)
    return p, q / np.linalg.norm(q)
