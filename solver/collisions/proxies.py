"""Collision proxies: what a character rig gives the solver (001 sec. 6.2).

Analytic shapes live in their own local frame (a rigid transform: position + unit quaternion
(w, x, y, z), local to world): the plane is z = 0 with normal +z, the capsule's axis is the
local z axis, the box is centred on the origin. A triangle mesh is given by vertex positions
(world space) and fixed triangles.

Every proxy has an outer ``thickness`` (a skin added to the shape; the cloth-side thickness
of :class:`~.colliders.Colliders` adds to it) and Coulomb friction coefficients.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from ..errors import ClothInputError
from ..transforms import IDENTITY, quaternion_axis_angle, quaternion_between  # noqa: F401  (re-exported)
from . import analytic, sdf
from .mesh_body import MeshBody


def validated_vector(what: str, value, size: int) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64).reshape(-1)
    if arr.shape != (size,) or not np.isfinite(arr).all():
        raise ClothInputError(f"{what} must be {size} finite numbers, got {value!r}")
    return arr


def validated_rotation(what: str, value) -> np.ndarray:
    q = validated_vector(what, value, 4)
    norm = float(np.linalg.norm(q))
    if norm < 1e-9:
        raise ClothInputError(f"{what} must be a non-zero quaternion (w, x, y, z), got {value!r}")
    return q / norm


def _non_negative(what: str, value: float) -> float:
    value = float(value)
    if not (math.isfinite(value) and value >= 0.0):
        raise ClothInputError(f"{what} must be finite and >= 0, got {value}")
    return value


def _positive(what: str, value: float) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > 0.0):
        raise ClothInputError(f"{what} must be finite and > 0, got {value}")
    return value


def combined_friction(
    collider_friction: float, cloth_friction_static: float, cloth_friction_kinetic: float
) -> tuple[float, float]:
    """(static, kinetic) Coulomb coefficients of a cloth-collider contact from both sides' coefficients.

    The geometric mean, mu = sqrt(mu_collider mu_cloth), static with static and kinetic with kinetic
    (Box2D's ``b2MixFriction`` rule): either side at 0 makes the contact frictionless, and equal
    sides give that value. The
    kinetic coefficient is clamped to the static one (mu_k <= mu_s, Coulomb's law as the friction
    kernel assumes).
    """
    mu_s = float(np.sqrt(collider_friction * cloth_friction_static))
    mu_k = min(float(np.sqrt(collider_friction * cloth_friction_kinetic)), mu_s)
    return mu_s, mu_k


def orient_closed_mesh(vertices, triangles) -> tuple[np.ndarray, bool]:
    """(triangles, one_sided) for a mesh collider: a closed mesh is wound outwards and made one-sided.

    Closed means every edge is shared by exactly two triangles (a 2-manifold without boundary); its
    signed volume V = 1/6 sum a . (b x c) (divergence theorem) is positive when the triangles wind
    counter-clockwise seen from outside, so a negative V flips every triangle. An open mesh (a
    boundary or non-manifold edge) has no inside: it is returned as given and two-sided.
    """
    e = np.sort(np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]]), axis=1)
    _, counts = np.unique(e, axis=0, return_counts=True)
    if not (counts == 2).all():
        return triangles, False
    a, b, c = vertices[triangles[:, 0]], vertices[triangles[:, 1]], vertices[triangles[:, 2]]
    volume = float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum()) / 6.0
    return (triangles if volume > 0 else triangles[:, [0, 2, 1]]), True


class Collider:
    """Common part of every proxy: name, skin thickness and friction."""

    def __init__(self, name: str | None, thickness: float, friction_static: float, friction_kinetic: float):
        self.name = name
        self.thickness = _non_negative(f"collider {name!r} thickness", thickness)
        self.friction_static = _non_negative(f"collider {name!r} friction_static", friction_static)
        self.friction_kinetic = _non_negative(f"collider {name!r} friction_kinetic", friction_kinetic)

    def with_friction(self, friction_static: float, friction_kinetic: float) -> Collider:
        """This proxy for another cloth, with that cloth's friction coefficients: a copy that shares
        what this one built (a signed distance grid's distances, a triangle mesh's :attr:`body` and
        so every cloth's pose data of it), so that each body's data is built once for all cloths."""
        other = copy.copy(self)
        Collider.__init__(other, self.name, self.thickness, friction_static, friction_kinetic)
        return other


class AnalyticCollider(Collider):
    kind = -1

    def __init__(self, dims, name, position, rotation, thickness, friction_static, friction_kinetic):
        super().__init__(name, thickness, friction_static, friction_kinetic)
        self.dims = np.asarray(dims, dtype=np.float64)
        self.position = validated_vector(f"collider {name!r} position", position, 3)
        self.rotation = validated_rotation(f"collider {name!r} rotation", rotation)

    @property
    def bound_radius(self) -> float:
        """Radius of a sphere around the local origin holding the shape (inf for the plane)."""
        raise NotImplementedError


class Plane(AnalyticCollider):
    """Infinite plane (ground): local z = 0, solid below, normal +z."""

    kind = analytic.PLANE

    def __init__(
        self,
        name=None,
        position=(0.0, 0.0, 0.0),
        rotation=IDENTITY,
        *,
        thickness=0.0,
        friction_static=0.6,
        friction_kinetic=0.4,
    ):
        super().__init__((0.0, 0.0, 0.0), name, position, rotation, thickness, friction_static, friction_kinetic)

    @classmethod
    def from_normal(cls, normal, point=(0.0, 0.0, 0.0), **kwargs) -> Plane:
        n = validated_vector("plane normal", normal, 3)
        if np.linalg.norm(n) < 1e-12:
            raise ClothInputError("plane normal must be non-zero")
        return cls(position=point, rotation=quaternion_between((0.0, 0.0, 1.0), n), **kwargs)

    @property
    def bound_radius(self) -> float:
        return math.inf


class Sphere(AnalyticCollider):
    kind = analytic.SPHERE

    def __init__(
        self,
        radius,
        name=None,
        position=(0.0, 0.0, 0.0),
        rotation=IDENTITY,
        *,
        thickness=0.0,
        friction_static=0.6,
        friction_kinetic=0.4,
    ):
        r = _positive(f"sphere {name!r} radius", radius)
        super().__init__((r, 0.0, 0.0), name, position, rotation, thickness, friction_static, friction_kinetic)

    @property
    def bound_radius(self) -> float:
        return float(self.dims[0])


class Capsule(AnalyticCollider):
    """Capsule of ``radius`` around the local z axis segment [-half_length, half_length]."""

    kind = analytic.CAPSULE

    def __init__(
        self,
        radius,
        half_length,
        name=None,
        position=(0.0, 0.0, 0.0),
        rotation=IDENTITY,
        *,
        thickness=0.0,
        friction_static=0.6,
        friction_kinetic=0.4,
    ):
        r = _positive(f"capsule {name!r} radius", radius)
        hl = _non_negative(f"capsule {name!r} half_length", half_length)
        super().__init__((r, hl, 0.0), name, position, rotation, thickness, friction_static, friction_kinetic)

    @property
    def bound_radius(self) -> float:
        return float(self.dims[0] + self.dims[1])


class Box(AnalyticCollider):
    """Box with ``half_extents`` (3,) along the local axes, centred on the local origin."""

    kind = analytic.BOX

    def __init__(
        self,
        half_extents,
        name=None,
        position=(0.0, 0.0, 0.0),
        rotation=IDENTITY,
        *,
        thickness=0.0,
        friction_static=0.6,
        friction_kinetic=0.4,
    ):
        e = validated_vector(f"box {name!r} half_extents", half_extents, 3)
        if (e <= 0).any():
            raise ClothInputError(f"box {name!r} half_extents must be > 0, got {half_extents!r}")
        super().__init__(e, name, position, rotation, thickness, friction_static, friction_kinetic)

    @property
    def bound_radius(self) -> float:
        return float(np.linalg.norm(self.dims))


class TriangleMesh(Collider):
    """Arbitrary triangle mesh collider (closed or open), e.g. an armature-deformed body.

    ``vertices`` (M,3) world positions, ``triangles`` (T,3). Positions change per frame with
    :meth:`Colliders.set_mesh_positions`; the topology is fixed. Degenerate (zero-area)
    triangles are dropped, with a note in ``warnings`` (they have no normal to push along).
    ``one_sided=True`` treats the front of the faces (right-hand winding) as outside for
    every cloth vertex (closed, consistently wound bodies: a vertex that ended up inside is
    pushed out); the default uses the side each cloth vertex was on at the frame start (of the
    closest face of the mesh; a vertex far from the mesh then takes the side it comes from when
    it first nears it), which is what works for open meshes.
    """

    def __init__(
        self,
        vertices,
        triangles,
        name=None,
        *,
        thickness=0.0,
        friction_static=0.6,
        friction_kinetic=0.4,
        one_sided=False,
    ):
        super().__init__(name, thickness, friction_static, friction_kinetic)
        v = np.ascontiguousarray(np.asarray(vertices, dtype=np.float64))
        if v.ndim != 2 or v.shape[1] != 3 or v.shape[0] == 0:
            raise ClothInputError(f"mesh collider {name!r}: vertices must have shape (M, 3), M > 0, got {v.shape}")
        if not np.isfinite(v).all():
            raise ClothInputError(f"mesh collider {name!r}: vertices contain NaN or infinite values")
        t = np.asarray(triangles)
        if t.size == 0:
            raise ClothInputError(f"mesh collider {name!r} has no triangles; give at least one triangle or drop it")
        if t.ndim != 2 or t.shape[1] != 3 or not np.issubdtype(t.dtype, np.integer):
            raise ClothInputError(
                f"mesh collider {name!r}: triangles must be an integer (T, 3) array, got {t.shape} {t.dtype}"
            )
        t = np.ascontiguousarray(t, dtype=np.int64)
        if t.min() < 0 or t.max() >= v.shape[0]:
            raise ClothInputError(
                f"mesh collider {name!r}: triangle indices must lie in 0..{v.shape[0] - 1}, found {t.min()}..{t.max()}"
            )
        self.warnings: list[str] = []
        area2 = np.linalg.norm(np.cross(v[t[:, 1]] - v[t[:, 0]], v[t[:, 2]] - v[t[:, 0]]), axis=1)
        scale = max(float(np.ptp(v, axis=0).max()), 1e-9)
        good = area2 > 1e-12 * scale * scale
        if not good.all():
            if not good.any():
                raise ClothInputError(f"mesh collider {name!r}: all {t.shape[0]} triangles are degenerate (zero area)")
            self.warnings.append(f"mesh collider {name!r}: dropped {int((~good).sum())} degenerate triangles")
            t = np.ascontiguousarray(t[good])
        self.triangles = t
        self.vertices = v
        self.one_sided = bool(one_sided)
        #: the body-side data shared by every cloth colliding with this mesh (and by the proxies
        #: :meth:`with_friction` makes from this one): built once per set of positions
        self.body = MeshBody(t, v.shape[0])


class SDFGrid(AnalyticCollider):
    """Signed distance grid of a closed triangle mesh: fast contacts with a rigid body.

    ``vertices`` (M,3) and ``triangles`` (T,3) describe the body in its own (local) frame; it
    is placed and animated like the analytic proxies (``position``, ``rotation`` (w, x, y, z),
    :meth:`Colliders.set_transform`, lerp/slerp inside the frame). The mesh must be closed
    and consistently wound (every edge shared by exactly two triangles, in opposite
    directions); an open mesh is a ClothInputError (use :class:`TriangleMesh` for it).

    Built once (Numba): distances at the nodes of a regular grid of ``spacing`` metres over
    the mesh's box grown by ``margin`` (default ``band``), exact (closest triangle) within
    ``band`` (default 3 x spacing) of the surface, a chamfer over-estimate farther; sign by
    ray-crossing parity. Queries interpolate trilinearly; the normal is the normalised
    gradient of the interpolant. Accuracy (measured in tests/collisions/test_sdf_grid.py on a
    sphere and a box): |error| < 2 spacing^2 / R near a faceted smooth part of curvature
    radius R, exact on flat faces, up to ~spacing at sharp edges and corners (trilinear
    interpolation rounds them). Use
    ``spacing`` below the cloth thickness for crisp contact heights on boxy bodies.
    """

    kind = analytic.SDF

    def __init__(
        self,
        vertices,
        triangles,
        spacing,
        name=None,
        position=(0.0, 0.0, 0.0),
        rotation=IDENTITY,
        *,
        band=None,
        margin=None,
        thickness=0.0,
        friction_static=0.6,
        friction_kinetic=0.4,
        max_nodes: int = 8_000_000,
    ):
        h = _positive(f"SDF grid {name!r} spacing", spacing)
        v = np.ascontiguousarray(np.asarray(vertices, dtype=np.float64))
        if v.ndim != 2 or v.shape[1] != 3 or v.shape[0] == 0:
            raise ClothInputError(f"SDF grid {name!r}: vertices must have shape (M, 3), M > 0, got {v.shape}")
        if not np.isfinite(v).all():
            raise ClothInputError(f"SDF grid {name!r}: vertices contain NaN or infinite values")
        t = np.asarray(triangles)
        if t.size == 0 or t.ndim != 2 or t.shape[1] != 3 or not np.issubdtype(t.dtype, np.integer):
            raise ClothInputError(
                f"SDF grid {name!r}: triangles must be a non-empty integer (T, 3) array, got {t.shape} {t.dtype}"
            )
        t = np.ascontiguousarray(t, dtype=np.int64)
        if t.min() < 0 or t.max() >= v.shape[0]:
            raise ClothInputError(f"SDF grid {name!r}: triangle indices must lie in 0..{v.shape[0] - 1}")
        _check_closed(t, name)
        band = 3.0 * h if band is None else _positive(f"SDF grid {name!r} band", band)
        margin = band if margin is None else _non_negative(f"SDF grid {name!r} margin", margin)
        lo = v.min(axis=0) - margin - h
        hi = v.max(axis=0) + margin + h
        shape = np.maximum(np.ceil((hi - lo) / h).astype(np.int64) + 1, 2)
        if int(np.prod(shape)) > max_nodes:
            raise ClothInputError(
                f"SDF grid {name!r}: {tuple(int(s) for s in shape)} nodes exceed max_nodes="
                f"{max_nodes}; use a larger spacing"
            )
        self.spacing = h
        self.band = band
        self.origin = lo
        self.phi = sdf.sdf_build(v, t, lo, h, shape, band)
        if not (self.phi < 0).any():
            raise ClothInputError(
                f"SDF grid {name!r}: no grid node lies inside the mesh (spacing {h} too large "
                "for the body, or the mesh is inside out)"
            )
        corners = np.array([[a, b, c] for a in (lo[0], hi[0]) for b in (lo[1], hi[1]) for c in (lo[2], hi[2])])
        bound = float(np.linalg.norm(corners, axis=1).max())
        super().__init__((bound, 0.0, 0.0), name, position, rotation, thickness, friction_static, friction_kinetic)
        self.vertices = v
        self.triangles = t

    @property
    def bound_radius(self) -> float:
        return float(self.dims[0])

    def signed_distance(self, points_local) -> tuple[np.ndarray, np.ndarray]:
        """(distance (P,), unit normal (P,3)) at local points, trilinear (negative inside)."""
        pts = np.ascontiguousarray(np.asarray(points_local, dtype=np.float64).reshape(-1, 3))
        out = np.empty(pts.shape[0])
        normals = np.empty((pts.shape[0], 3))
        sdf.sdf_signed_distance(pts, self.phi, self.origin, self.spacing, out, normals)
        return out, normals


def _check_closed(triangles: np.ndarray, name) -> None:
    """A closed, consistently wound mesh: every directed edge once, and its reverse once."""
    e = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    key = e[:, 0] * (int(triangles.max()) + 1) + e[:, 1]
    rev = e[:, 1] * (int(triangles.max()) + 1) + e[:, 0]
    uniq, counts = np.unique(key, return_counts=True)
    if (counts > 1).any():
        raise ClothInputError(
            f"SDF grid {name!r}: the mesh is not consistently wound or not manifold (an edge is "
            "used twice in the same direction); a signed distance needs a closed, oriented mesh"
        )
    missing = ~np.isin(rev, uniq)
    if missing.any():
        raise ClothInputError(
            f"SDF grid {name!r}: the mesh is open ({int(missing.sum())} boundary edges); a signed "
            "distance needs a closed mesh (use TriangleMesh for open meshes)"
        )
