"""Graph and features for the learned network, built from solver state with NumPy (world edges ask
the solver's collision kernels for closest points).

MeshGraphNets-style (004): nodes are particles, mesh edges come from the triangle mesh in both
directions, and every feature is a relative quantity (velocity, rest-space and world-space
relative displacement, inverse mass, node type, material, offset from the nearest hard pin
along the mesh), so shifting the whole scene leaves
the features unchanged. The time step is an explicit input (002 sec. 4).

Message passing in the network sums incoming edge messages with Gather + ReduceSum over a
padded per-node incidence table (``incidence[i, k]`` is the id of the k-th edge whose receiver is
node ``i``; unused slots point at a zero pad row with id ``E``). This is deterministic in
onnxruntime and fast on CPU, unlike ScatterND(add) (see the network issue).

World edges (issue 5): for every cloth vertex and every collider proxy of a
:class:`selvedge.solver.collisions.Colliders` contact handler (analytic plane, sphere, capsule or
box; triangle mesh, through the solver's hash grid; signed distance grid, q = p - phi grad phi)
whose surface lies within :data:`WORLD_RADIUS_M` of the vertex, one world edge from the closest
surface point (the sender, not a graph node) to the vertex (the receiver). Its features are
relative only: the vector from the vertex to the closest surface point, its length, the signed
distance to the shape (negative inside; for a mesh, behind its closest face), the gap the contact
keeps (cloth thickness + collider skin) and the surface point's velocity relative to the
vertex's. The closest point is taken at the frame-start pose; the surface velocity is that
material point's displacement from the frame-start to the frame-end pose divided by the frame
time. World messages are summed onto the receiving vertex with the same Gather + ReduceSum over
a padded table (``world_incidence``, pad id W). A cloth with no collider near gets zero world
edges: ``world_edge_features`` (0, N_WORLD) and a table of pad ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..solver.transforms import rotate_rows

#: Node feature layout; the ONNX model's input ``node_features`` has exactly these columns.
NODE_FEATURES = (
    "vel_x",
    "vel_y",
    "vel_z",
    "speed",  # m/s, world velocity (relative by nature)
    "type_free",
    "type_kinematic",
    "type_soft_pin",  # one-hot node type
    "inv_mass_scaled",  # inverse mass x mean free vertex mass (dimensionless)
    "log10_stretch_compliance",
    "log10_bend_compliance",
    "log10_density",
    "frame_dt",  # s, the network's (frame) time step
    "gravity_z",  # m/s^2
    "anchor_dx",
    "anchor_dy",
    "anchor_dz",  # x_i - x_anchor(i): offset from the nearest hard pin, m
    "anchor_rest_dist",  # rest-space geodesic distance to that pin, m
)
#: Edge feature layout; the ONNX model's input ``edge_features`` has exactly these columns.
EDGE_FEATURES = (
    "rest_dx",
    "rest_dy",
    "rest_dz",
    "rest_len",  # u_receiver - u_sender (rest space), m
    "world_dx",
    "world_dy",
    "world_dz",
    "world_len",  # x_receiver - x_sender (world space), m
    "strain",  # world_len / rest_len - 1
)
#: World-edge feature layout (collider surface -> cloth vertex); ONNX input ``world_edge_features``.
WORLD_EDGE_FEATURES = (
    "to_surface_x",
    "to_surface_y",
    "to_surface_z",  # q - x_i: vertex to closest collider surface point, m
    "to_surface_len",  # |q - x_i|, m
    "signed_distance",  # signed distance of x_i to the shape (negative inside), m
    "contact_gap",  # cloth thickness + collider skin kept by the contact, m
    "rel_vel_x",
    "rel_vel_y",
    "rel_vel_z",  # surface point velocity - vertex velocity, m/s
)
N_NODE = len(NODE_FEATURES)
N_EDGE = len(EDGE_FEATURES)
N_WORLD = len(WORLD_EDGE_FEATURES)
#: Radius of the world-edge query (m): a vertex gets an edge to every collider whose surface is
#: closer than this (signed distance <= radius, so penetrating vertices are always included).
WORLD_RADIUS_M = 0.05


@dataclass
class MeshGraph:
    """Static part of the graph (topology and rest space); rebuilt only when the mesh changes."""

    senders: np.ndarray  # (E,) int64
    receivers: np.ndarray  # (E,) int64
    incidence: np.ndarray  # (N, K) int64, pad value E
    rest_disp: np.ndarray  # (E, 3) float64
    rest_len: np.ndarray  # (E,) float64
    node_static: np.ndarray  # (N, N_NODE) float32 with the velocity columns zero
    free: np.ndarray  # (N,) bool
    anchor: np.ndarray  # (N,) int64 nearest hard-pinned vertex along the mesh (itself if none)

    @property
    def n_nodes(self) -> int:
        return self.incidence.shape[0]

    @property
    def n_edges(self) -> int:
        return self.senders.shape[0]


def incidence_table(receivers: np.ndarray, n_nodes: int) -> np.ndarray:
    """(N, K) table of incoming edge ids per node, padded with E (K = max in-degree, at least 1)."""
    e = receivers.shape[0]
    counts = np.bincount(receivers, minlength=n_nodes) if e else np.zeros(n_nodes, dtype=np.int64)
    k = max(1, int(counts.max()) if n_nodes else 1)
    table = np.full((n_nodes, k), e, dtype=np.int64)
    order = np.argsort(receivers, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(e) - np.repeat(starts, counts)
    table[receivers[order], slot] = order
    return table


def nearest_anchor(n_nodes: int, senders, receivers, lengths, sources) -> tuple[np.ndarray, np.ndarray]:
    """Multi-source Dijkstra along mesh edges: (nearest source id, distance) per node.

    Nodes with no source in their connected component get themselves and distance 0.
    """
    import heapq

    anchor = np.arange(n_nodes, dtype=np.int64)
    dist = np.full(n_nodes, np.inf)
    order = np.argsort(senders, kind="stable")
    s_sorted, r_sorted, l_sorted = senders[order], receivers[order], lengths[order]
    starts = np.searchsorted(s_sorted, np.arange(n_nodes + 1))
    heap = []
    for src in np.asarray(sources, dtype=np.int64):
        dist[src] = 0.0
        anchor[src] = src
        heap.append((0.0, int(src)))
    heapq.heapify(heap)
    while heap:
        d, i = heapq.heappop(heap)
        if d > dist[i]:
            continue
        for k in range(starts[i], starts[i + 1]):
            j = int(r_sorted[k])
            nd = d + float(l_sorted[k])
            if nd < dist[j]:
                dist[j] = nd
                anchor[j] = anchor[i]
                heapq.heappush(heap, (nd, j))
    dist[~np.isfinite(dist)] = 0.0
    return anchor, dist


def build_mesh_graph(
    rest_positions, undirected_edges, inv_mass, mass, material, *, soft_pinned=None, gravity_z: float = -9.81
) -> MeshGraph:
    """Static graph from the rest mesh. ``undirected_edges`` (E/2, 2) are unique vertex pairs."""
    rest = np.asarray(rest_positions, dtype=np.float64)
    und = np.asarray(undirected_edges, dtype=np.int64).reshape(-1, 2)
    senders = np.concatenate([und[:, 0], und[:, 1]])
    receivers = np.concatenate([und[:, 1], und[:, 0]])
    rest_disp = rest[receivers] - rest[senders]
    rest_len = np.linalg.norm(rest_disp, axis=1)
    n = rest.shape[0]
    inv_mass = np.asarray(inv_mass, dtype=np.float64)
    free = inv_mass > 0
    soft = np.zeros(n, dtype=bool) if soft_pinned is None else np.asarray(soft_pinned, dtype=bool)
    node = np.zeros((n, N_NODE), dtype=np.float32)
    node[:, 4] = free & ~soft
    node[:, 5] = ~free
    node[:, 6] = free & soft
    mean_mass = float(np.mean(np.asarray(mass)[free])) if free.any() else 1.0
    node[:, 7] = inv_mass * mean_mass
    stretch = getattr(material, "stretch_compliance_warp", 2e-4)
    node[:, 8] = np.log10(max(stretch, 1e-12))
    node[:, 9] = np.log10(max(getattr(material, "bend_compliance", 2e5), 1e-12))
    node[:, 10] = np.log10(max(getattr(material, "density_kg_m2", 0.15), 1e-12))
    node[:, 12] = gravity_z
    anchor, anchor_dist = nearest_anchor(n, senders, receivers, rest_len, np.flatnonzero(~free))
    node[:, 16] = anchor_dist
    return MeshGraph(
        senders=senders,
        receivers=receivers,
        incidence=incidence_table(receivers, n),
        rest_disp=rest_disp,
        rest_len=rest_len,
        node_static=node,
        free=free,
        anchor=anchor,
    )


def graph_from_cloth(cloth) -> MeshGraph:
    """Static graph of a :class:`selvedge.solver.Cloth`."""
    soft = np.zeros(cloth.x.shape[0], dtype=bool)
    soft[cloth.soft_pin_index] = True
    return build_mesh_graph(
        cloth.rest_positions,
        cloth.topology.edges,
        cloth.inv_mass,
        cloth.mass,
        cloth.material,
        soft_pinned=soft,
        gravity_z=float(cloth.settings.gravity_m_s2[2]),
    )


def node_features(graph: MeshGraph, x: np.ndarray, v: np.ndarray, frame_dt: float) -> np.ndarray:
    """(N, N_NODE) float32 node features at positions ``x`` (m) and velocities ``v`` (m/s)."""
    out = graph.node_static.copy()
    out[:, 13:16] = x - x[graph.anchor]
    out[:, 0:3] = v
    out[:, 3] = np.linalg.norm(v, axis=1)
    out[:, 11] = frame_dt
    return out


def edge_features(graph: MeshGraph, x: np.ndarray) -> np.ndarray:
    """(E, N_EDGE) float32 edge features at positions ``x``."""
    d = x[graph.receivers] - x[graph.senders]
    length = np.linalg.norm(d, axis=1)
    out = np.empty((graph.n_edges, N_EDGE), dtype=np.float32)
    out[:, 0:3] = graph.rest_disp
    out[:, 3] = graph.rest_len
    out[:, 4:7] = d
    out[:, 7] = length
    out[:, 8] = length / np.maximum(graph.rest_len, 1e-12) - 1.0
    return out


# -- world edges --------------------------------------------------------------------------------

PLANE, SPHERE, CAPSULE, BOX = 0, 1, 2, 3  # = solver.collisions.analytic kinds (SDF grids: ColliderState.grids)


@dataclass
class ColliderState:
    """Analytic colliders as arrays, at the frame start (pos0, rot0) and end (pos1, rot1)."""

    kind: np.ndarray  # (K,) int64
    dims: np.ndarray  # (K,3)
    pos0: np.ndarray  # (K,3)
    rot0: np.ndarray  # (K,4) quaternion (w, x, y, z)
    pos1: np.ndarray
    rot1: np.ndarray
    gap: np.ndarray  # (K,) cloth thickness + collider skin, m
    #: triangle-mesh colliders: (triangles (T,3), vertices at the frame start (M,3), at the end, gap m)
    meshes: list = field(default_factory=list)
    #: signed distance grids: (SDFGrid proxy, pos0, rot0, pos1, rot1, gap m)
    grids: list = field(default_factory=list)

    @classmethod
    def empty(cls) -> ColliderState:
        z = np.zeros((0, 3))
        return cls(np.zeros(0, np.int64), z, z, np.zeros((0, 4)), z, np.zeros((0, 4)), np.zeros(0))


def collider_state(handler) -> ColliderState | None:
    """The analytic and triangle-mesh proxies of a contact handler (its read-only ``snapshot()``, see
    ``solver.collisions.snapshot``), or None when it has none."""
    snapshot = getattr(handler, "snapshot", None)
    if snapshot is None:
        return None
    s = snapshot()
    if s.empty:
        return None
    meshes = [(m.triangles, m.vertices_start, m.vertices_end, m.gap) for m in s.meshes]
    grids = [(g.grid, g.pos0, g.rot0, g.pos1, g.rot1, g.gap) for g in s.grids]
    return ColliderState(s.kind, s.dims, s.pos0, s.rot0, s.pos1, s.rot1, s.gap, meshes, grids)


def mesh_world_edges(tris, v0, v1, points, radius):
    """Closest point of a triangle mesh (vertices ``v0`` at the frame start) to each point within
    ``radius``: (point indices, closest points at v0, the same material points at v1, signed
    distances: negative behind the closest face). Hash grid and kernel from the solver's mesh proxy."""
    from ..solver.collisions import hash_grid, mesh_kernels

    tri = v0[tris]
    lo = tri.min(axis=1) - radius
    hi = tri.max(axis=1) + radius
    extent = hi - lo
    cell = max(float(extent.max(axis=1).mean()), float(extent.max()) / 30.0, 1e-6)
    table = 1 << max(4, int(2 * len(tris) - 1).bit_length())
    bucket, items = hash_grid.hash_boxes(lo, hi, cell, table, 32)
    t, bary, dist, side = mesh_kernels.mesh_closest_points(
        np.ascontiguousarray(points), radius, tris, v0, cell, table, bucket, items
    )
    hit = np.flatnonzero(t >= 0)
    corners = tris[t[hit]]
    q0 = np.einsum("pk,pkd->pd", bary[hit], v0[corners])
    q1 = np.einsum("pk,pkd->pd", bary[hit], v1[corners])
    return hit, q0, q1, side[hit] * dist[hit]


_rotate = rotate_rows  # models/training imports it under this name


def local_closest(kind: int, dims, p):
    """Closest surface point of an analytic shape in its local frame: (signed distance (P,), point (P,3)).

    The solver's own shape code (``solver.collisions.analytic.local_closest``: plane z = 0 solid
    below; sphere radius a; capsule radius a, half length b along z; box half extents a, b, c).
    """
    from ..solver.collisions import analytic

    p = np.ascontiguousarray(p, dtype=np.float64)
    phi = np.empty(p.shape[0])
    closest = np.empty_like(p)
    analytic.local_closest_points(int(kind), np.asarray(dims, dtype=np.float64), p, phi, closest)
    return phi, closest


def grid_world_edges(grid, pos0, rot0, pos1, rot1, points, radius):
    """Closest surface points of a signed distance grid proxy (``SDFGrid``) within ``radius``:
    q = p - phi grad(phi) in the body's frame, at the frame-start and frame-end poses; returns
    (point indices, q at the start, q at the end, signed distances)."""
    conj0 = np.array([rot0[0], -rot0[1], -rot0[2], -rot0[3]])
    local = _rotate(conj0, points - pos0)
    phi, normal = grid.signed_distance(local)
    hit = np.flatnonzero(phi <= radius)
    q_local = local[hit] - phi[hit, None] * normal[hit]
    return hit, pos0 + _rotate(rot0, q_local), pos1 + _rotate(rot1, q_local), phi[hit]


def world_edges(
    colliders: ColliderState | None,
    x: np.ndarray,
    v: np.ndarray,
    frame_dt: float,
    free: np.ndarray | None = None,
    radius: float = WORLD_RADIUS_M,
):
    """World edges of the state (x, v): (receivers (W,) int64, features (W, N_WORLD) float32).

    Only free vertices (``free``) receive world edges; kinematic ones are moved by their pins.
    """
    if colliders is None or (len(colliders.kind) == 0 and not colliders.meshes and not colliders.grids):
        return np.zeros(0, np.int64), np.zeros((0, N_WORLD), np.float32)
    x = np.asarray(x, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    rec, feats = [], []
    cand = np.arange(x.shape[0]) if free is None else np.flatnonzero(free)
    for k in range(len(colliders.kind)):
        q0 = colliders.rot0[k]
        conj0 = np.array([q0[0], -q0[1], -q0[2], -q0[3]])
        local = _rotate(conj0, x[cand] - colliders.pos0[k])
        phi, ql = local_closest(int(colliders.kind[k]), colliders.dims[k], local)
        hit = phi <= radius
        if not hit.any():
            continue
        idx = cand[hit]
        q_start = colliders.pos0[k] + _rotate(q0, ql[hit])
        q_end = colliders.pos1[k] + _rotate(colliders.rot1[k], ql[hit])
        to = q_start - x[idx]
        f = np.empty((idx.size, N_WORLD), np.float64)
        f[:, 0:3] = to
        f[:, 3] = np.linalg.norm(to, axis=1)
        f[:, 4] = phi[hit]
        f[:, 5] = colliders.gap[k]
        f[:, 6:9] = (q_end - q_start) / frame_dt - v[idx]
        rec.append(idx)
        feats.append(f)
    surfaces = [mesh_world_edges(tris, v0, v1, x[cand], radius) + (gap,) for tris, v0, v1, gap in colliders.meshes]
    surfaces += [grid_world_edges(*g[:5], x[cand], radius) + (g[5],) for g in colliders.grids]
    for hit, q_start, q_end, phi, gap in surfaces:
        if hit.size == 0:
            continue
        idx = cand[hit]
        to = q_start - x[idx]
        f = np.empty((idx.size, N_WORLD), np.float64)
        f[:, 0:3] = to
        f[:, 3] = np.linalg.norm(to, axis=1)
        f[:, 4] = phi
        f[:, 5] = gap
        f[:, 6:9] = (q_end - q_start) / frame_dt - v[idx]
        rec.append(idx)
        feats.append(f)
    if not rec:
        return np.zeros(0, np.int64), np.zeros((0, N_WORLD), np.float32)
    rec = np.concatenate(rec).astype(np.int64)
    feats = np.concatenate(feats)
    order = np.argsort(rec, kind="stable")
    return rec[order], feats[order].astype(np.float32)


def model_inputs(
    graph: MeshGraph, x: np.ndarray, v: np.ndarray, frame_dt: float, colliders: ColliderState | None = None, world=None
) -> dict[str, np.ndarray]:
    """The ONNX model's input feed for one state. ``world``: precomputed :func:`world_edges` output."""
    if world is None:
        world = world_edges(colliders, x, v, frame_dt, graph.free)
    w_rcv, w_feat = world
    return {
        "node_features": node_features(graph, np.asarray(x, dtype=np.float64), v, frame_dt),
        "edge_features": edge_features(graph, np.asarray(x, dtype=np.float64)),
        "senders": graph.senders,
        "receivers": graph.receivers,
        "incidence": graph.incidence,
        "free_mask": graph.free.astype(np.float32)[:, None],
        "world_edge_features": w_feat,
        "world_receivers": w_rcv,
        "world_incidence": incidence_table(w_rcv, graph.n_nodes),
    }
