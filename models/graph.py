"""Graph and features for the learned network, built from solver state with NumPy only.

MeshGraphNets-style (004): nodes are particles, mesh edges come from the triangle mesh in both
directions, and every feature is a relative quantity (velocity, rest-space and world-space
relative displacement, inverse mass, node type, material, offset from the nearest hard pin
along the mesh), so shifting the whole scene leaves
the features unchanged. The time step is an explicit input (002 sec. 4).

Message passing in the network sums incoming edge messages with Gather + ReduceSum over a
padded per-node incidence table (``incidence[i, k]`` is the id of the k-th edge whose receiver is
node ``i``; unused slots point at a zero pad row with id ``E``). This is deterministic in
onnxruntime and fast on CPU, unlike ScatterND(add) (see the network issue).

World edges (radius query to collider surfaces / non-adjacent cloth vertices) are not built in
this version: the shipped model has mesh edges only (see models/README.md, known limits).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Node feature layout; the ONNX model's input ``node_features`` has exactly these columns.
NODE_FEATURES = (
    "vel_x", "vel_y", "vel_z", "speed",                # m/s, world velocity (relative by nature)
    "type_free", "type_kinematic", "type_soft_pin",  # one-hot node type
    "inv_mass_scaled",                                # inverse mass x mean free vertex mass (dimensionless)
    "log10_stretch_compliance", "log10_bend_compliance", "log10_density",
    "frame_dt",                                       # s, the network's (frame) time step
    "gravity_z",                                      # m/s^2
    "anchor_dx", "anchor_dy", "anchor_dz",            # x_i - x_anchor(i): offset from the nearest hard pin, m
    "anchor_rest_dist",                               # rest-space geodesic distance to that pin, m
)
#: Edge feature layout; the ONNX model's input ``edge_features`` has exactly these columns.
EDGE_FEATURES = (
    "rest_dx", "rest_dy", "rest_dz", "rest_len",       # u_receiver - u_sender (rest space), m
    "world_dx", "world_dy", "world_dz", "world_len",   # x_receiver - x_sender (world space), m
    "strain",                                          # world_len / rest_len - 1
)
N_NODE = len(NODE_FEATURES)
N_EDGE = len(EDGE_FEATURES)


@dataclass
class MeshGraph:
    """Static part of the graph (topology and rest space); rebuilt only when the mesh changes."""

    senders: np.ndarray      # (E,) int64
    receivers: np.ndarray    # (E,) int64
    incidence: np.ndarray    # (N, K) int64, pad value E
    rest_disp: np.ndarray    # (E, 3) float64
    rest_len: np.ndarray     # (E,) float64
    node_static: np.ndarray  # (N, N_NODE) float32 with the velocity columns zero
    free: np.ndarray         # (N,) bool
    anchor: np.ndarray       # (N,) int64 nearest hard-pinned vertex along the mesh (itself if none)

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


def build_mesh_graph(rest_positions, undirected_edges, inv_mass, mass, material, *, soft_pinned=None,
                     gravity_z: float = -9.81) -> MeshGraph:
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
    return MeshGraph(senders=senders, receivers=receivers, incidence=incidence_table(receivers, n),
                     rest_disp=rest_disp, rest_len=rest_len, node_static=node, free=free, anchor=anchor)


def graph_from_cloth(cloth) -> MeshGraph:
    """Static graph of a :class:`selvedge.solver.Cloth`."""
    soft = np.zeros(cloth.x.shape[0], dtype=bool)
    soft[cloth.soft_pin_index] = True
    return build_mesh_graph(cloth.rest_positions, cloth.topology.edges, cloth.inv_mass, cloth.mass, cloth.material,
                            soft_pinned=soft, gravity_z=float(cloth.settings.gravity_m_s2[2]))


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


def model_inputs(graph: MeshGraph, x: np.ndarray, v: np.ndarray, frame_dt: float) -> dict[str, np.ndarray]:
    """The ONNX model's input feed for one state."""
    return {
        "node_features": node_features(graph, np.asarray(x, dtype=np.float64), v, frame_dt),
        "edge_features": edge_features(graph, np.asarray(x, dtype=np.float64)),
        "senders": graph.senders,
        "receivers": graph.receivers,
        "incidence": graph.incidence,
        "free_mask": graph.free.astype(np.float32)[:, None],
    }
