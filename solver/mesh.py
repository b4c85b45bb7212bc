"""Triangle-mesh topology and input validation for the cloth solver.

Everything here runs once when a cloth is built, vectorised with NumPy; nothing per frame.
Bad input is reported with a specific :class:`ClothInputError` (what, how many, the first
offending indices and how to fix it in Blender) or handled safely and listed in
``MeshTopology.warnings``; see the table in docs/user/bad_input.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import ClothInputError

#: Edges shorter than this (metres) are treated as zero length.
MIN_EDGE_LENGTH_M = 1e-9
#: Triangles whose area is below this fraction of the squared longest edge are degenerate.
MIN_TRIANGLE_AREA_RATIO = 1e-10


def triangulate(faces) -> np.ndarray:
    """Fan-triangulate polygons (triangles, quads, n-gons) into a (T,3) int64 array.

    The second diagonal of each quad is recovered later as a shear constraint across the
    bias hinge (see ``constraints.build_shear``), so no quad bookkeeping is needed here.
    Indices are checked to be whole numbers before any integer conversion (a cast would turn
    1.7 into 1 silently); their range is checked by :func:`build_topology`, which knows N.
    """
    if isinstance(faces, np.ndarray) and faces.ndim == 2 and faces.shape[1] == 3:
        return _integral_indices(faces, "triangle vertex indices")
    tris: list[tuple[int, int, int]] = []
    for face_index, face in enumerate(faces):
        face = _integral_indices(np.asarray(face).reshape(-1), f"face {face_index}'s vertex indices").tolist()
        if len(face) < 3:
            raise ClothInputError(f"face {face_index} has {len(face)} vertices; a face needs at least 3")
        for k in range(1, len(face) - 1):
            tris.append((face[0], face[k], face[k + 1]))
    return np.array(tris, dtype=np.int64).reshape(-1, 3)


def _integral_indices(values: np.ndarray, name: str) -> np.ndarray:
    """``values`` as int64, or a ClothInputError when one is not a whole number (1.7, NaN, inf, text)
    or lies beyond int64."""
    a = np.asarray(values)
    if a.dtype == np.bool_ or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
        raise ClothInputError(f"{name} must be integers, got an array of {a.dtype}")
    if np.issubdtype(a.dtype, np.floating):
        bad = ~np.isfinite(a) | (a != np.round(a)) | (np.abs(a) >= 2.0**63)
        if bad.any():
            first = tuple(int(k) for k in np.argwhere(bad)[0])
            raise ClothInputError(
                f"{name} must be whole numbers: {int(bad.sum())} are not "
                f"(first: {a[first]!r} at position {list(first)})"
            )
    elif a.dtype == np.uint64 and a.size and a.max() >= 2**63:
        raise ClothInputError(f"{name} must lie below 2^63, found {int(a.max())}")
    return np.ascontiguousarray(a, dtype=np.int64)


def check_finite(name: str, array: np.ndarray) -> None:
    """Raise naming the array and the first bad row when it holds NaN or infinity."""
    bad = ~np.isfinite(array)
    if bad.any():
        first = int(np.argwhere(bad)[0][0])
        raise ClothInputError(f"{name} contains {int(bad.sum())} non-finite values (first at index {first})")


@dataclass
class MeshTopology:
    """Edges, adjacency and rest measures of a triangle mesh (all arrays flat, SoA)."""

    triangles: np.ndarray  # (T,3) int32
    edges: np.ndarray  # (E,2) int32, i < j, unique
    edge_triangle_count: np.ndarray  # (E,) number of triangles using each edge
    hinge_edges: np.ndarray  # (H,2) shared edge of two triangles (manifold interior edges)
    hinge_opposite: np.ndarray  # (H,2) the vertex opposite the hinge in each triangle
    triangle_area: np.ndarray  # (T,) rest area, m^2
    degenerate_triangle: np.ndarray  # (T,) bool
    loose_vertices: np.ndarray  # indices of vertices used by no triangle
    warnings: list[str] = field(default_factory=list)


def build_topology(rest_positions: np.ndarray, triangles: np.ndarray) -> MeshTopology:
    """Validate a triangle mesh and derive edges and bending hinges.

    Zero-length edges are an error (they have no direction to keep); zero-area triangles,
    duplicate triangles, non-manifold edges and loose vertices are handled safely and
    reported in ``warnings``.
    """
    x = np.asarray(rest_positions, dtype=np.float64)
    n = x.shape[0]
    if x.ndim != 2 or x.shape[1] != 3:
        raise ClothInputError(f"vertex positions must have shape (N, 3), got {x.shape}")
    if n == 0:
        raise ClothInputError("the mesh has no vertices")
    check_finite("vertex positions", x)
    tri = np.asarray(triangles)
    if tri.ndim != 2 or tri.shape[1] != 3 or tri.shape[0] == 0:
        raise ClothInputError(f"triangles must have shape (T, 3) with T > 0, got {tri.shape}")
    tri = _integral_indices(tri, "triangle vertex indices")  # checked before the int32 cast below
    if tri.min() < 0 or tri.max() >= n:
        raise ClothInputError(f"triangle vertex indices must lie in [0, {n - 1}], found {tri.min()}..{tri.max()}")
    tri = tri.astype(np.int32)
    warnings: list[str] = []

    repeated = (tri[:, 0] == tri[:, 1]) | (tri[:, 1] == tri[:, 2]) | (tri[:, 0] == tri[:, 2])
    if repeated.any():
        first = int(np.flatnonzero(repeated)[0])
        raise ClothInputError(
            f"{int(repeated.sum())} triangles repeat a vertex (first: triangle {first} = {tri[first].tolist()})"
        )
    key = np.sort(tri, axis=1)
    _, first_index = np.unique(key, axis=0, return_index=True)
    if first_index.size < tri.shape[0]:
        warnings.append(f"{tri.shape[0] - first_index.size} duplicate triangles ignored")
        tri = tri[np.sort(first_index)]

    half = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
    opposite_of_half = np.concatenate([tri[:, 2], tri[:, 0], tri[:, 1]])
    half_tri = np.tile(np.arange(tri.shape[0], dtype=np.int32), 3)
    half_sorted = np.sort(half, axis=1)
    edges, inverse, counts = np.unique(half_sorted, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    edges = edges.astype(np.int32)

    length = np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1)
    short = length < MIN_EDGE_LENGTH_M
    if short.any():
        first = int(np.flatnonzero(short)[0])
        raise ClothInputError(
            f"{int(short.sum())} zero-length edges (first: vertices {edges[first, 0]}-{edges[first, 1]}, "
            f"length {length[first]:.3g} m); merge vertices by distance before simulating"
        )

    e1 = x[tri[:, 1]] - x[tri[:, 0]]
    e2 = x[tri[:, 2]] - x[tri[:, 0]]
    area = 0.5 * np.linalg.norm(np.cross(e1, e2), axis=1)
    longest_sq = np.max(np.stack([np.sum(e1 * e1, 1), np.sum(e2 * e2, 1), np.sum((e2 - e1) ** 2, 1)], axis=1), axis=1)
    degenerate = area < MIN_TRIANGLE_AREA_RATIO * longest_sq
    if degenerate.any():
        warnings.append(
            f"{int(degenerate.sum())} zero-area triangles (first: {int(np.flatnonzero(degenerate)[0])}) "
            "carry no mass and no bending"
        )

    nonmanifold = counts > 2
    if nonmanifold.any():
        first = int(np.flatnonzero(nonmanifold)[0])
        warnings.append(
            f"{int(nonmanifold.sum())} non-manifold edges (first: vertices {edges[first].tolist()}) get no bending"
        )

    order = np.argsort(inverse, kind="stable")
    grouped_edge = inverse[order]
    starts = np.searchsorted(grouped_edge, np.arange(edges.shape[0]))
    hinge_ids = np.flatnonzero(counts == 2)
    first_half = order[starts[hinge_ids]]
    second_half = order[starts[hinge_ids] + 1]
    hinge_ok = ~(degenerate[half_tri[first_half]] | degenerate[half_tri[second_half]])
    hinge_edges = edges[hinge_ids][hinge_ok]
    hinge_opposite = np.stack([opposite_of_half[first_half], opposite_of_half[second_half]], axis=1)[hinge_ok]

    used = np.zeros(n, dtype=bool)
    used[tri.ravel()] = True
    loose = np.flatnonzero(~used).astype(np.int32)
    if loose.size:
        warnings.append(f"{loose.size} loose vertices (in no triangle) are held in place")

    rounded = np.round(x / MIN_EDGE_LENGTH_M).astype(np.int64)
    unique_positions = np.unique(rounded, axis=0).shape[0]
    if unique_positions < n:
        warnings.append(
            f"{n - unique_positions} vertices share a position with another vertex (unwelded seam?); "
            "they are simulated as separate, unconnected vertices"
        )

    return MeshTopology(
        triangles=tri,
        edges=edges,
        edge_triangle_count=counts.astype(np.int32),
        hinge_edges=np.ascontiguousarray(hinge_edges, dtype=np.int32).reshape(-1, 2),
        hinge_opposite=np.ascontiguousarray(hinge_opposite, dtype=np.int32).reshape(-1, 2),
        triangle_area=area,
        degenerate_triangle=degenerate,
        loose_vertices=loose,
        warnings=warnings,
    )


#: A rest shape whose triangle normals all lie within this angle of one another counts as flat.
FLAT_REST_ANGLE_RAD = np.radians(0.5)


def rest_is_flat(rest_positions: np.ndarray, topology: MeshTopology) -> bool:
    """True when every non-degenerate triangle of the rest shape faces the same way (or its reverse)."""
    t = topology.triangles[~topology.degenerate_triangle]
    if t.shape[0] == 0:
        return True
    x = rest_positions
    normal = np.cross(x[t[:, 1]] - x[t[:, 0]], x[t[:, 2]] - x[t[:, 0]])
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    # einsum, not ``@``: a threaded BLAS would spin idle threads (see Cloth._diagnostics)
    return bool(np.abs(np.einsum("ij,j->i", normal, normal[0])).min() >= np.cos(FLAT_REST_ANGLE_RAD))


def lumped_vertex_mass(n_vertices: int, triangles: np.ndarray, triangle_area: np.ndarray, density_kg_m2) -> np.ndarray:
    """Per-vertex mass: each triangle's areal density x area split equally over its corners."""
    tri_mass = np.asarray(density_kg_m2, dtype=np.float64) * triangle_area
    mass = np.zeros(n_vertices, dtype=np.float64)
    for corner in range(3):
        np.add.at(mass, triangles[:, corner], tri_mass / 3.0)
    return mass


def grid_mesh(
    nx: int,
    ny: int,
    size_x: float = 1.0,
    size_y: float = 1.0,
    origin=(0.0, 0.0, 0.0),
    plane: str = "xy",
    quads: bool = False,
):
    """A regular nx x ny vertex grid (for tests, benchmarks and the demo).

    Returns ``(positions (N,3), faces, uvs (N,2))``; faces are quads (list) when ``quads`` is
    true, otherwise triangles (T,3) with alternating diagonals so the mesh has no handedness.
    UV ``u`` runs along x (weft) and ``v`` along the second axis (warp).
    """
    u = np.linspace(0.0, 1.0, nx)
    v = np.linspace(0.0, 1.0, ny)
    uu, vv = np.meshgrid(u, v)
    uv = np.stack([uu.ravel(), vv.ravel()], axis=1)
    pos = np.zeros((nx * ny, 3))
    a, b = uu.ravel() * size_x, vv.ravel() * size_y
    if plane == "xy":
        pos[:, 0], pos[:, 1] = a, b
    elif plane == "xz":
        pos[:, 0], pos[:, 2] = a, b
    else:
        raise ValueError(f"plane must be 'xy' or 'xz', got {plane!r}")
    pos += np.asarray(origin, dtype=np.float64)
    idx = np.arange(nx * ny).reshape(ny, nx)
    c00, c10, c01, c11 = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
    if quads:
        return pos, np.stack([c00, c10, c11, c01], axis=1).tolist(), uv
    flip = ((np.arange(ny - 1)[:, None] + np.arange(nx - 1)[None, :]) % 2 == 1).ravel()
    t1 = np.where(flip[:, None], np.stack([c00, c10, c01], 1), np.stack([c00, c10, c11], 1))
    t2 = np.where(flip[:, None], np.stack([c10, c11, c01], 1), np.stack([c00, c11, c01], 1))
    return pos, np.concatenate([t1, t2]).astype(np.int32), uv


def uv_ellipsoid_mesh(radii, segments: int = 48, rings: int = 24, center=(0.0, 0.0, 0.0)):
    """A closed UV sphere or ellipsoid (for tests, benchmarks and demos), outward winding.

    Returns ``(positions (N,3), triangles (T,3) int64)`` with T = 2 segments (rings - 1).
    """
    theta = np.linspace(0.0, np.pi, rings + 1)[1:-1]
    phi = 2 * np.pi * np.arange(segments) / segments
    tt, pp = np.meshgrid(theta, phi, indexing="ij")
    body = np.stack([np.sin(tt) * np.cos(pp), np.sin(tt) * np.sin(pp), np.cos(tt)], axis=-1).reshape(-1, 3)
    v = np.concatenate([body, [[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]]) * radii + np.asarray(center, dtype=np.float64)
    north, south = len(v) - 2, len(v) - 1
    ring = np.arange(rings - 2)[:, None] * segments
    a = (ring + np.arange(segments)[None, :]).ravel()
    b = (ring + (np.arange(segments)[None, :] + 1) % segments).ravel()
    quads = np.stack([np.stack([a, a + segments, b + segments], 1), np.stack([a, b + segments, b], 1)], 1)
    s_idx = np.arange(segments)
    last = (rings - 2) * segments
    caps = np.stack(
        [
            np.stack([np.full(segments, north), s_idx, (s_idx + 1) % segments], 1),
            np.stack([np.full(segments, south), last + (s_idx + 1) % segments, last + s_idx], 1),
        ],
        1,
    )
    return v, np.concatenate([quads.reshape(-1, 3), caps.reshape(-1, 3)]).astype(np.int64)
