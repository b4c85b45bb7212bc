"""Constraint initialisation from the rest state (separate from the per-iteration solve).

Builds the flat arrays each ``solve_<constraint>`` kernel consumes: stretch (warp/weft/bias by
grain direction), shear, the three bending models, tethers and soft pins. Compliance units:
stretch, shear, cross-edge bending and tethers m/N; dihedral and isometric bending 1/(N m).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .coloring import color_constraints
from .errors import ClothInputError
from .geodesic import edge_adjacency, k_nearest_sources_euclidean, k_nearest_sources_geodesic
from .kernels import inverse_denominators
from .mesh import MIN_EDGE_LENGTH_M, MeshTopology

WARP, WEFT, BIAS = 0, 1, 2
GRAIN_NAMES = ("warp", "weft", "bias")
#: Edges within this angle (degrees) of the weft (u) or warp (v) axis take that class; others are bias.
GRAIN_TOLERANCE_DEG = 22.5
#: A painted weight of 0 makes a constraint this many times more compliant (weight 1 leaves it as is).
MIN_STIFFNESS_WEIGHT = 1e-3


@dataclass
class ConstraintSet:
    """One constraint type as structure-of-arrays, plus its multipliers and colouring."""

    name: str
    kind: str  # "distance" | "dihedral" | "isometric" | "soft_pin"
    vertices: np.ndarray  # (m, arity) int32, or (m,) for soft pins
    params: dict = field(default_factory=dict)  # per-constraint float arrays, first axis m
    unilateral: bool = False
    lam: np.ndarray | None = None
    #: Parallel schedule (``coloring.block_schedule``): segment b < len - 2 is block b, the last
    #: segment the constraints that cross a cut; [0, m] is one serial segment.
    block_offsets: np.ndarray | None = None
    _coefficients: StepCoefficients | None = field(default=None, repr=False, compare=False)
    _coefficients_h: float = field(default=float("nan"), repr=False, compare=False)

    def __post_init__(self):
        m = self.vertices.shape[0]
        if self.lam is None:
            self.lam = np.zeros((m, 3) if self.kind == "isometric" else m)
        if self.block_offsets is None:
            self.block_offsets = np.array([0, m], dtype=np.int64)

    @property
    def count(self) -> int:
        return int(self.vertices.shape[0])

    def coefficients(self, h: float, inv_mass: np.ndarray) -> StepCoefficients:
        """This set's :class:`StepCoefficients` for substeps of ``h`` s, kept until h changes.

        ``inv_mass`` is fixed for the life of a cloth, so h is the only key.
        """
        if self._coefficients is None or self._coefficients_h != h:
            self._coefficients = step_coefficients(self, inv_mass, h)
            self._coefficients_h = h
        return self._coefficients

    def permuted(self, order: np.ndarray, block_offsets: np.ndarray) -> ConstraintSet:
        """The same constraints in another order (for the parallel schedule)."""
        return ConstraintSet(
            name=self.name,
            kind=self.kind,
            vertices=np.ascontiguousarray(self.vertices[order]),
            params={k: np.ascontiguousarray(v[order]) for k, v in self.params.items()},
            unilateral=self.unilateral,
            block_offsets=block_offsets,
        )


@dataclass(frozen=True)
class StepCoefficients:
    """Per-constraint XPBD factors for one substep length h (000 sec. 3, XPBD eqs. 18 and 26).

    alpha_tilde = alpha / h^2, gamma = damping_s / h, and, where K = sum_j w_j |grad_j C|^2 does
    not depend on the positions (distance, isometric, soft pin), inv_denominator =
    1 / ((1 + gamma) K + alpha~), 0 for a constraint with no usable direction (every vertex
    kinematic). Dihedral bending gets an empty inv_denominator: its K changes with the fold.
    """

    alpha_tilde: np.ndarray
    gamma: np.ndarray
    inv_denominator: np.ndarray
    #: distance sets: (m, 4) rows of rest length, alpha~, gamma, inverse denominator, what the
    #: distance kernels read (one stream instead of four); empty for the other kinds
    distance_rows: np.ndarray = field(default_factory=lambda: np.empty((0, 4)))


def step_coefficients(
    constraint_set: ConstraintSet, inv_mass: np.ndarray, h: float, damping: bool = True
) -> StepCoefficients:
    """The :class:`StepCoefficients` of a set; ``damping=False`` drops the constraint damping."""
    c, p = constraint_set, constraint_set.params
    alpha_tilde = np.ascontiguousarray(p["compliance"] / (h * h), dtype=np.float64)
    if damping and "damping_s" in p:
        gamma = np.ascontiguousarray(p["damping_s"] / h, dtype=np.float64)
    else:
        gamma = np.zeros(c.count)
    if c.kind == "dihedral":
        return StepCoefficients(alpha_tilde, gamma, np.empty(0))
    w = inv_mass[c.vertices.reshape(c.count, -1)]
    if c.kind == "distance":
        k_sum = w.sum(axis=1)
    elif c.kind == "isometric":
        k_sum = (w * p["stencil"] ** 2).sum(axis=1)
    else:  # soft pin: grad C is a unit vector on one vertex
        k_sum = w[:, 0]
    inv_denominator = inverse_denominators(np.ascontiguousarray(k_sum, dtype=np.float64), alpha_tilde, gamma)
    rows = np.empty((0, 4))
    if c.kind == "distance":
        rows = np.ascontiguousarray(
            np.column_stack([p["rest_length"], alpha_tilde, gamma, inv_denominator]), dtype=np.float64
        )
    return StepCoefficients(alpha_tilde, gamma, inv_denominator, rows)


def _corner_uv_per_edge(topology: MeshTopology, uv: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """UV difference along each edge, (E,2), from per-vertex (N,2) or per-corner (T,3,2) UVs."""
    if uv.ndim == 2:
        return uv[edges[:, 1]] - uv[edges[:, 0]]
    tri = topology.triangles
    half = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
    half_uv = np.concatenate([uv[:, [0, 1]], uv[:, [1, 2]], uv[:, [2, 0]]])
    flip = half[:, 0] > half[:, 1]
    half_sorted = np.where(flip[:, None], half[:, ::-1], half)
    d = half_uv[:, 1] - half_uv[:, 0]
    d[flip] *= -1.0
    key_half = half_sorted[:, 0].astype(np.int64) * (1 << 32) + half_sorted[:, 1]
    key_edges = edges[:, 0].astype(np.int64) * (1 << 32) + edges[:, 1]
    order = np.argsort(key_half, kind="stable")
    pos = np.searchsorted(key_half[order], key_edges)
    return d[order[pos]]


def classify_grain(
    rest: np.ndarray,
    topology: MeshTopology,
    edges: np.ndarray,
    uv: np.ndarray | None,
    tolerance_deg: float = GRAIN_TOLERANCE_DEG,
) -> np.ndarray:
    """Warp / weft / bias class of each edge (or any vertex pair) from its direction.

    With UVs: weft runs along u, warp along v (the grain line of the pattern piece). Without:
    the object's X axis projected into the local surface plane is the weft direction.
    """
    tol = np.deg2rad(tolerance_deg)
    if uv is not None:
        d = _corner_uv_per_edge(topology, uv, edges)
        du, dv = np.abs(d[:, 0]), np.abs(d[:, 1])
    else:
        tri = topology.triangles
        normal_tri = np.cross(rest[tri[:, 1]] - rest[tri[:, 0]], rest[tri[:, 2]] - rest[tri[:, 0]])
        normal_v = np.zeros_like(rest)
        for c in range(3):
            np.add.at(normal_v, tri[:, c], normal_tri)
        n = normal_v[edges[:, 0]] + normal_v[edges[:, 1]]
        n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-30)
        weft_axis = np.array([1.0, 0.0, 0.0]) - n[:, :1] * n
        bad = np.linalg.norm(weft_axis, axis=1) < 0.3
        weft_axis[bad] = np.array([0.0, 1.0, 0.0]) - n[bad, 1:2] * n[bad]
        weft_axis /= np.linalg.norm(weft_axis, axis=1, keepdims=True)
        warp_axis = np.cross(n, weft_axis)
        e = rest[edges[:, 1]] - rest[edges[:, 0]]
        du, dv = np.abs(np.sum(e * weft_axis, 1)), np.abs(np.sum(e * warp_axis, 1))
    angle = np.arctan2(dv, du)
    grain = np.full(edges.shape[0], BIAS, dtype=np.int8)
    grain[angle <= tol] = WEFT
    grain[angle >= np.pi / 2 - tol] = WARP
    return grain


def vertex_uv(topology: MeshTopology, uv: np.ndarray) -> np.ndarray:
    """Per-vertex UV: as given, or the mean of a vertex's corner UVs (exact away from UV seams)."""
    if uv.ndim == 2:
        return uv
    n = int(topology.triangles.max()) + 1
    total = np.zeros((n, 2))
    hits = np.zeros(n)
    for c in range(3):
        np.add.at(total, topology.triangles[:, c], uv[:, c])
        np.add.at(hits, topology.triangles[:, c], 1.0)
    return total / np.maximum(hits, 1.0)[:, None]


def pair_rest_length(rest: np.ndarray, pairs: np.ndarray, uv_pattern_m: np.ndarray | None) -> np.ndarray:
    """Rest distance of vertex pairs: 3D mesh, or 2D pattern (per-vertex UV in metres) when given."""
    source = rest if uv_pattern_m is None else uv_pattern_m
    return np.linalg.norm(source[pairs[:, 0]] - source[pairs[:, 1]], axis=1)


def weight_scale(weight_map: np.ndarray | None, vertices: np.ndarray) -> np.ndarray:
    """Compliance multiplier from a painted stiffness weight (mean over the constraint's vertices)."""
    if weight_map is None:
        return np.ones(vertices.shape[0])
    w = weight_map[vertices].reshape(vertices.shape[0], -1).mean(axis=1)
    return 1.0 / np.maximum(w, MIN_STIFFNESS_WEIGHT)


def build_stretch(
    rest, topology, uv, uv_pattern_m, material, weight_maps, uv_scale_m: float = 1.0
) -> tuple[ConstraintSet, np.ndarray]:
    """Every mesh edge, with the compliance of its grain class scaled by painted weights.

    Pattern rest lengths with per-corner UVs use each edge's own corner UVs, so edges along a
    UV seam keep their true pattern length.
    """
    edges = topology.edges
    grain = classify_grain(rest, topology, edges, uv)
    per_class = np.array(
        [material.stretch_compliance_warp, material.stretch_compliance_weft, material.stretch_compliance_bias],
        dtype=np.float64,
    )
    compliance = per_class[grain].copy()
    for cls, name in enumerate(GRAIN_NAMES):
        sel = grain == cls
        compliance[sel] *= weight_scale(weight_maps.get(name), edges[sel]) * weight_scale(
            weight_maps.get("stretch"), edges[sel]
        )
    if uv_pattern_m is not None and uv.ndim == 3:
        rest_length = np.linalg.norm(_corner_uv_per_edge(topology, uv, edges), axis=1) * uv_scale_m
    else:
        rest_length = pair_rest_length(rest, edges, uv_pattern_m)
    collapsed = rest_length < MIN_EDGE_LENGTH_M
    if collapsed.any():
        first = int(np.flatnonzero(collapsed)[0])
        raise ClothInputError(
            f"{int(collapsed.sum())} edges have zero pattern (UV) length (first: vertices {edges[first].tolist()}); "
            "unwrap the mesh without overlapping or collapsed UVs, or use mesh rest lengths"
        )
    stretch = ConstraintSet(
        name="stretch",
        kind="distance",
        vertices=np.ascontiguousarray(edges, dtype=np.int32),
        params=dict(
            rest_length=rest_length,
            compliance=compliance,
            damping_s=np.full(edges.shape[0], material.stretch_damping_s),
        ),
    )
    return stretch, grain


def build_shear(rest, topology, uv, uv_pattern_m, material, weight_maps, grain) -> ConstraintSet:
    """The second diagonal of every quad-like pair of triangles whose shared edge is bias.

    A triangulated quad keeps only one diagonal, which resists shear in one direction only
    (001 sec. 5.1); the crossing diagonal restores the symmetry.
    """
    hinge_edge_class = grain[_edge_index(topology.edges, topology.hinge_edges)]
    candidates = topology.hinge_opposite[hinge_edge_class == BIAS]
    candidates = np.sort(candidates, axis=1).astype(np.int32)
    if candidates.shape[0]:
        cand_grain = classify_grain(rest, topology, candidates, None if uv is None else vertex_uv(topology, uv))
        candidates = candidates[cand_grain == BIAS]
    compliance = material.shear_compliance * weight_scale(weight_maps.get("shear"), candidates)
    return ConstraintSet(
        name="shear",
        kind="distance",
        vertices=np.ascontiguousarray(candidates.reshape(-1, 2)),
        params=dict(
            rest_length=pair_rest_length(rest, candidates, uv_pattern_m),
            compliance=compliance,
            damping_s=np.full(candidates.shape[0], material.stretch_damping_s),
        ),
    )


def _edge_index(edges: np.ndarray, query: np.ndarray) -> np.ndarray:
    key_edges = edges[:, 0].astype(np.int64) * (1 << 32) + edges[:, 1]
    q = np.sort(query, axis=1)
    key_query = q[:, 0].astype(np.int64) * (1 << 32) + q[:, 1]
    return np.searchsorted(key_edges, key_query)


def hinge_geometry(rest: np.ndarray, topology: MeshTopology):
    """Hinge edge length and the two wing triangle areas (rest state)."""
    a, b = topology.hinge_edges[:, 0], topology.hinge_edges[:, 1]
    c, d = topology.hinge_opposite[:, 0], topology.hinge_opposite[:, 1]
    e = rest[b] - rest[a]
    area0 = 0.5 * np.linalg.norm(np.cross(e, rest[c] - rest[a]), axis=1)
    area1 = 0.5 * np.linalg.norm(np.cross(e, rest[d] - rest[a]), axis=1)
    return np.linalg.norm(e, axis=1), area0, area1


def dihedral_rest_angle(rest: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """Signed rest dihedral angle with the same convention as the kernel (vectorised)."""
    x1, x2, x3, x4 = (rest[vertices[:, k]] for k in range(4))
    n1 = np.cross(x1 - x3, x1 - x4)
    n2 = np.cross(x2 - x4, x2 - x3)
    e = x4 - x3
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    n1 /= np.linalg.norm(n1, axis=1, keepdims=True)
    n2 /= np.linalg.norm(n2, axis=1, keepdims=True)
    return np.arctan2(np.sum(np.cross(n1, n2) * e, 1), np.sum(n1 * n2, 1))


def isometric_stencil(rest: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """Bergou et al. 2006 cotangent stencil scaled so the energy matches the dihedral model.

    ``vertices = (hinge a, hinge b, wing c, wing d)``; K = [c03+c04, c01+c02, -c01-c03, -c02-c04]
    and Q = 6/(A0+A1) K K^T; for a small fold theta, 1/2 x^T Q x = 3 |e|^2 theta^2 / (A0+A1),
    the discrete-shells energy the dihedral model uses.
    """
    x0, x1, x2, x3 = (rest[vertices[:, k]] for k in range(4))

    def cot(u, v):
        return np.sum(u * v, 1) / np.maximum(np.linalg.norm(np.cross(u, v), axis=1), 1e-30)

    e0, e1, e2, e3, e4 = x1 - x0, x2 - x0, x3 - x0, x2 - x1, x3 - x1
    c01, c02, c03, c04 = cot(e0, e1), cot(e0, e2), cot(-e0, e3), cot(-e0, e4)
    area0 = 0.5 * np.linalg.norm(np.cross(e0, e1), axis=1)
    area1 = 0.5 * np.linalg.norm(np.cross(e0, e2), axis=1)
    K = np.stack([c03 + c04, c01 + c02, -c01 - c03, -c02 - c04], axis=1)
    return K * np.sqrt(6.0 / (area0 + area1))[:, None]


def isometric_q(stencil_row: np.ndarray) -> np.ndarray:
    """The 4x4 Bergou Q matrix of one hinge (rank one: s s^T)."""
    return np.outer(stencil_row, stencil_row)


#: ``bending_model="auto"`` takes isometric bending when no hinge of the rest shape is folded by
#: more than this (0.5 degrees; a 2D pattern rest is flat by construction), dihedral otherwise.
AUTO_FLAT_REST_ANGLE_RAD = np.radians(0.5)


def build_bending(rest, topology, uv_pattern_m, material, weight_maps, model: str) -> ConstraintSet:
    """Bending on every manifold interior edge with one of three models (001 sec. 5.2).

    Per-hinge compliance follows discrete shells so the fold stiffness does not depend on mesh
    resolution: alpha_e = alpha_bend (A0 + A1) / (6 |e|^2) for the dihedral angle; the isometric
    stencil carries the same geometry factor; the cross-edge spring uses alpha_e * L_cross^2
    (angle -> distance lever arm), an approximation that is second order near flat.

    ``model="auto"`` resolves to isometric for a flat rest shape (its linear constraint costs
    about a third of a dihedral projection and converges better; it would pull a curved rest
    shape flat) and to dihedral otherwise.
    """
    edge_len, area0, area1 = hinge_geometry(rest, topology)
    flat_rest = uv_pattern_m is not None
    scale = weight_scale(weight_maps.get("bend"), np.concatenate([topology.hinge_edges, topology.hinge_opposite], 1))
    hinge_compliance = material.bend_compliance * (area0 + area1) / (6.0 * edge_len**2) * scale
    m = topology.hinge_edges.shape[0]
    damping = np.full(m, material.bend_damping_s)
    rest_angle = None
    if model in ("dihedral", "auto"):
        verts = np.ascontiguousarray(np.concatenate([topology.hinge_opposite, topology.hinge_edges], 1), np.int32)
        rest_angle = np.zeros(m) if flat_rest else dihedral_rest_angle(rest, verts)
        if model == "auto":
            folded = np.abs(rest_angle[np.isfinite(rest_angle)])
            model = "isometric" if folded.size == 0 or folded.max() <= AUTO_FLAT_REST_ANGLE_RAD else "dihedral"
    if model == "dihedral":
        return ConstraintSet(
            "bend",
            "dihedral",
            verts,
            dict(
                rest_angle=rest_angle,
                rest_cos=np.cos(rest_angle),
                rest_sin=np.sin(rest_angle),
                compliance=hinge_compliance,
                damping_s=damping,
            ),
        )
    if model == "isometric":
        verts = np.ascontiguousarray(np.concatenate([topology.hinge_edges, topology.hinge_opposite], 1), np.int32)
        stencil = (
            isometric_stencil(rest, verts) if uv_pattern_m is None else isometric_stencil(_flat(uv_pattern_m), verts)
        )
        return ConstraintSet(
            "bend",
            "isometric",
            verts,
            dict(stencil=stencil, compliance=material.bend_compliance * scale, damping_s=damping),
        )
    if model == "cross_edge":
        verts = np.ascontiguousarray(np.sort(topology.hinge_opposite, axis=1), np.int32)
        rest_length = pair_rest_length(rest, verts, uv_pattern_m)
        return ConstraintSet(
            "bend",
            "distance",
            verts,
            dict(rest_length=rest_length, compliance=hinge_compliance * rest_length**2, damping_s=damping),
        )
    raise ClothInputError(f"bending model must be 'cross_edge', 'dihedral', 'isometric' or 'auto', got {model!r}")


def _flat(uv_pattern_m: np.ndarray) -> np.ndarray:
    return np.concatenate([uv_pattern_m, np.zeros((uv_pattern_m.shape[0], 1))], axis=1)


def build_tethers(
    rest, topology, inv_mass, hard_pins, *, geodesic: bool, count: int, scale: float, compliance: float, uv_pattern_m
) -> ConstraintSet:
    """Long range attachments (Kim, Chentanez, Mueller 2012): each free vertex to its nearest pin(s).

    C = |x_i - x_pin| - scale * L <= 0, unilateral (cloth may bunch towards the pin, never
    stretch beyond). L is the straight or geodesic (shortest path over edges) rest distance.
    """
    empty = ConstraintSet(
        "tether",
        "distance",
        np.zeros((0, 2), np.int32),
        dict(rest_length=np.zeros(0), compliance=np.zeros(0), damping_s=np.zeros(0)),
        unilateral=True,
    )
    free = np.flatnonzero(inv_mass > 0)
    if hard_pins.size == 0 or free.size == 0:
        return empty
    source_space = rest if uv_pattern_m is None else _flat(uv_pattern_m)
    k = int(min(count, hard_pins.size))
    if geodesic:
        edge_len = pair_rest_length(rest, topology.edges, uv_pattern_m)
        start, nbr, length = edge_adjacency(rest.shape[0], topology.edges, edge_len)
        src, dist = k_nearest_sources_geodesic(rest.shape[0], start, nbr, length, hard_pins.astype(np.int64), k)
    else:
        src, dist = k_nearest_sources_euclidean(np.ascontiguousarray(source_space), hard_pins.astype(np.int64), k)
    src, dist = src[free], dist[free]
    ok = np.isfinite(dist) & (src >= 0)
    rows = np.repeat(free, k).reshape(-1, k)
    pairs = np.stack([rows[ok], src[ok]], axis=1).astype(np.int32)
    return ConstraintSet(
        "tether",
        "distance",
        np.ascontiguousarray(pairs),
        dict(
            rest_length=scale * dist[ok],
            compliance=np.full(pairs.shape[0], compliance),
            damping_s=np.zeros(pairs.shape[0]),
        ),
        unilateral=True,
    )


def build_soft_pins(soft_index: np.ndarray, soft_weight: np.ndarray, soft_pin_compliance: float) -> ConstraintSet:
    """Goal constraints for partial pin weights p in (0, 1): alpha = alpha_pin (1 - p) / p (m/N).

    p -> 1 approaches a hard pin, p -> 0 a free vertex; targets are interpolated per substep.
    """
    compliance = soft_pin_compliance * (1.0 - soft_weight) / soft_weight
    return ConstraintSet(
        "soft_pin", "soft_pin", np.ascontiguousarray(soft_index, dtype=np.int32), dict(compliance=compliance)
    )


def sweep_order_from_pins(
    constraint_set: ConstraintSet, hops_to_pin: np.ndarray, held: np.ndarray | None = None
) -> ConstraintSet:
    """Reorder a set so a Gauss-Seidel sweep starts at the pins and moves outward; the
    constraints that hold a ``held`` vertex (:func:`held_by_pins`) to its pins go last.

    A sweep carries a pin's correction down a whole chain in one pass only when it starts at
    the pin (001 sec. 2.4 and 7.1); mesh order starts wherever vertex 0 happens to be. Measured
    on a 64x64 sheet hanging from two corners, 20 substeps x 1 iteration, dihedral bending: max
    strain 82 % in mesh order, 37 % pin-outward (with isometric bending the order matters little:
    35 vs 38 %).

    A vertex held by three or more constraints to nearly collinear pins (the row under a pinned
    ring: its edge up and both quad diagonals, as stretch and shear constraints) has its distance
    from the ring's surface fixed only through the ring's curvature. Projected first, those
    constraints left it off them at every substep's end, with the rest of the set's pull on it,
    and the next substep's first projections threw it through that surface and back: a tube
    hanging from a pinned ring vibrated at 2-3 m/s next to it and stretched 38 % (0.7 % with them
    last; tests/solver/test_pinned_ring.py). For every other constraint at a pin the pin-outward
    start stays: a sheet hanging from one point strained 1.13 % instead of 0.83 % with its pin's
    edges last, 4.1 % in the coloured mode. The order is stable, so serial mode stays
    bit-reproducible.
    """
    if constraint_set.count == 0:
        return constraint_set
    rows = constraint_set.vertices.reshape(constraint_set.count, -1)
    key = hops_to_pin[rows].min(axis=1).astype(np.float64)
    if held is not None:
        key[(key == 0) & held[rows].any(axis=1)] = np.inf  # after everything else
    order = np.argsort(key, kind="stable")
    return constraint_set.permuted(order, np.array([0, constraint_set.count], dtype=np.int64))


#: Constraints per window of :func:`interleave_independent`: small next to a hop ring of any
#: useful mesh, so the sweep still moves outward ring by ring.
SWEEP_WINDOW = 64


def interleave_independent(
    constraint_set: ConstraintSet, inv_mass: np.ndarray, window: int = SWEEP_WINDOW
) -> ConstraintSet:
    """Reorder each run of ``window`` consecutive constraints by graph colour, keeping the sweep.

    In pin-outward (or mesh) order neighbouring constraints share a vertex, so every projection
    waits for the previous one's store: the serial sweep runs at the latency of one sqrt plus
    two divisions. Constraints of one colour inside a window share no writable vertex, so the
    CPU overlaps them. Measured on a 128x128 sheet: 39 -> 26 ns per stretch projection; the
    order moves no constraint by more than one window, so the pin-outward sweep is kept
    (tests/solver/test_pin_outward_sweep_order.py measures the strain). Stable, so still bit-reproducible.
    """
    if constraint_set.count <= 1:
        return constraint_set
    order, offsets = color_constraints(constraint_set.vertices, inv_mass)
    color = np.empty(constraint_set.count, dtype=np.int64)
    color[order] = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    key = (np.arange(constraint_set.count) // window) * (offsets.size + 1) + color
    return constraint_set.permuted(np.argsort(key, kind="stable"), np.array([0, constraint_set.count], dtype=np.int64))


def held_by_pins(n_vertices: int, sets, kinematic: np.ndarray, at_least: int = 3) -> np.ndarray:
    """Free vertices held to hard pins by at least ``at_least`` distance constraints of ``sets``
    (their edges up and quad diagonals under a pinned ring): three fix a point, up to its mirror."""
    count = np.zeros(n_vertices, np.int64)
    is_kin = np.zeros(n_vertices, bool)
    is_kin[kinematic] = True
    for s in sets:
        if s.kind != "distance" or s.unilateral or s.count == 0:
            continue
        v = s.vertices.reshape(s.count, -1)
        pinned = is_kin[v]
        one = pinned.sum(axis=1) == 1
        free = np.where(pinned[one, 0], v[one, 1], v[one, 0])
        np.add.at(count, free, 1)
    return count >= at_least


def hops_to_pins(n_vertices: int, edges: np.ndarray, kinematic: np.ndarray) -> np.ndarray:
    """Edge hops from every vertex to the nearest kinematic vertex (inf where none is reachable)."""
    start, neighbour, length = edge_adjacency(n_vertices, edges, np.ones(edges.shape[0]))
    _, dist = k_nearest_sources_geodesic(n_vertices, start, neighbour, length, kinematic.astype(np.int64), 1)
    return dist[:, 0]
