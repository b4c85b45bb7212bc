"""A read-only picture of a contact handler's colliders at one frame, for code outside the
collision layer (the learned network's world edges, ``models/graph.py``) so that it reads no
private field of :class:`~.colliders.Colliders`.

Every array is a copy marked read-only: a snapshot stays what it was when taken, whatever the
solver does next, and writing to it raises instead of corrupting the solver's state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .proxies import SDFGrid


def _frozen(a, dtype=np.float64) -> np.ndarray:
    out = np.array(a, dtype=dtype, copy=True)
    out.setflags(write=False)
    return out


@dataclass(frozen=True)
class MeshSnapshot:
    """A triangle-mesh collider over the frame: world vertices at its start and end (m)."""

    name: str | None
    triangles: np.ndarray  # (T, 3) int64
    vertices_start: np.ndarray  # (M, 3)
    vertices_end: np.ndarray  # (M, 3)
    gap: float  # cloth thickness + the collider's skin (m): what a contact keeps


@dataclass(frozen=True)
class GridSnapshot:
    """A signed distance grid proxy and its pose at the frame start and end (quaternions w, x, y, z)."""

    name: str | None
    grid: SDFGrid
    pos0: np.ndarray
    rot0: np.ndarray
    pos1: np.ndarray
    rot1: np.ndarray
    gap: float


@dataclass(frozen=True)
class ColliderSnapshot:
    """Every collider of a handler: the analytic shapes (plane, sphere, capsule, box; the kinds of
    ``analytic``) as arrays, the signed distance grids and the triangle meshes apart."""

    cloth_thickness: float  # m
    names: tuple  # (K,) of the analytic shapes
    kind: np.ndarray  # (K,) int64
    dims: np.ndarray  # (K, 3)
    pos0: np.ndarray  # (K, 3) frame start
    rot0: np.ndarray  # (K, 4)
    pos1: np.ndarray  # (K, 3) frame end
    rot1: np.ndarray  # (K, 4)
    gap: np.ndarray  # (K,) cloth thickness + skin (m)
    grids: tuple[GridSnapshot, ...]
    meshes: tuple[MeshSnapshot, ...]

    @property
    def empty(self) -> bool:
        return self.kind.shape[0] == 0 and not self.grids and not self.meshes


def snapshot_of(proxies, kind, dims, pos0, rot0, pos1, rot1, skin, cloth_thickness, meshes) -> ColliderSnapshot:
    """The snapshot of analytic ``proxies`` (with their arrays) and ``meshes`` ((proxy, v0, v1) triples)."""
    t = float(cloth_thickness)
    shapes = [k for k, p in enumerate(proxies) if not isinstance(p, SDFGrid)]
    grids = tuple(
        GridSnapshot(
            p.name, p, _frozen(pos0[k]), _frozen(rot0[k]), _frozen(pos1[k]), _frozen(rot1[k]), t + float(skin[k])
        )
        for k, p in enumerate(proxies)
        if isinstance(p, SDFGrid)
    )
    mesh_rows = tuple(
        MeshSnapshot(mesh.name, _frozen(mesh.triangles, np.int64), _frozen(v0), _frozen(v1), t + float(mesh.thickness))
        for mesh, v0, v1 in meshes
    )
    return ColliderSnapshot(
        t,
        tuple(proxies[k].name for k in shapes),
        _frozen(np.asarray(kind)[shapes], np.int64),
        _frozen(dims[shapes]),
        _frozen(pos0[shapes]),
        _frozen(rot0[shapes]),
        _frozen(pos1[shapes]),
        _frozen(rot1[shapes]),
        _frozen(t + skin[shapes]),
        grids,
        mesh_rows,
    )
