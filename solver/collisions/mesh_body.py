"""Body-side data of a triangle-mesh collider, built once per set of positions and shared by every
cloth that collides with the body.

A :class:`MeshBody` belongs to a :class:`~.proxies.TriangleMesh` proxy (``proxy.body``); proxies
made from it for other cloths (:meth:`~.proxies.Collider.with_friction`) share it. What depends
only on the body's positions lives in a :class:`BodyPose`, one per set of world positions (a
frame's pose): the triangles' bounding spheres, their hash grids, and a standing body's
convexity certificates, distance bounds and closest-face lists per cell (up to 64 MB for a
5k-face body). Every cloth's :class:`~.colliders.Colliders` asks the body for the pose of the
positions it was given (:meth:`MeshBody.pose`, matched by value), so three cloths over one body
build each of these once, not three times, and get the very same arrays they would have built
themselves (the builds are deterministic). What depends on a cloth (its candidate lists, its
narrow-phase caches, the frame's motion bookkeeping) stays in that cloth's handler.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import cell_lists, convexity, distance_bounds, geometry, hash_grid, mesh_kernels


def _next_pow2(value: int) -> int:
    return 1 << max(4, int(value - 1).bit_length())


class TriangleGrid(NamedTuple):
    """Hash grid of a mesh collider's triangle boxes (grown by ``radius``) at one pose."""

    lo: np.ndarray
    hi: np.ndarray
    cell: float
    table: int
    bucket: np.ndarray
    items: np.ndarray
    radius: float
    extent: float  # mean largest side of the boxes


class StandingParams(NamedTuple):
    """Tuning of a standing collider's data (the ``Colliders`` constants of the same names, in m)."""

    certificate_reach_m: float
    distance_bound_cell_m: float
    distance_bound_band_m: float
    distance_bound_max_cells: int
    cell_list_travel_m: float
    cell_list_max_entries: int


class StandingData(NamedTuple):
    """A standing collider's shortcuts at one pose, for one contact radius (see ``Colliders``)."""

    tnorm: np.ndarray  # (T, 3) face normals
    cert: np.ndarray  # (T,) convexity certificates (:mod:`.convexity`)
    dbounds: np.ndarray  # coarse distance bounds (:mod:`.distance_bounds`)
    dorigin: np.ndarray
    dinv: float  # 1 / cell side
    dband: float  # cap
    cell_first: np.ndarray  # closest-face lists of those cells (:mod:`.cell_lists`)
    cell_stop: np.ndarray
    cell_cand: np.ndarray
    cell_d0: np.ndarray
    cell_reach: np.ndarray
    has_cell_lists: bool


class BodyPose:
    """One set of the body's world positions (``vertices``, (M, 3), not to be written) and what was
    built on it, each piece once, when first asked for."""

    def __init__(self, body: MeshBody, vertices: np.ndarray):
        self.body = body
        self.vertices = vertices
        self._spheres = None
        self._boxes: dict = {}
        self._grids: dict = {}
        self._standing: dict = {}

    def spheres(self) -> tuple[np.ndarray, np.ndarray]:
        """Bounding spheres of the triangles: centres (T, 3) and radii (T,)."""
        if self._spheres is None:
            tris = self.body.triangles
            center = np.empty((tris.shape[0], 3))
            rad = np.empty(tris.shape[0])
            geometry.triangle_spheres(self.vertices, tris, center, rad)
            self._spheres = center, rad
            self.body.builds["triangle_spheres"] += 1
        return self._spheres

    def _triangle_boxes(self, radius: float):
        boxes = self._boxes.get(radius)
        if boxes is None:
            tris = self.body.triangles
            tlo = np.empty((tris.shape[0], 3))
            thi = np.empty((tris.shape[0], 3))
            mesh_kernels.swept_triangle_boxes(self.vertices, self.vertices, tris, radius, tlo, thi)
            boxes = self._boxes[radius] = tlo, thi, float((thi - tlo).max(axis=1).mean())
        return boxes

    def grid(self, radius: float, reach: float | None = None) -> TriangleGrid:
        """The hash grid of the triangle boxes grown by ``radius``, of cell max(mean box extent,
        2 ``reach``): any cell size gives the same candidate lists, one near that visits few cells
        and few boxes (see ``Colliders._grid``)."""
        tlo, thi, extent = self._triangle_boxes(radius)
        cell = max(extent, 2.0 * (reach or 0.0), 1e-6)
        g = self._grids.get((radius, cell))
        if g is None:
            table = _next_pow2(2 * self.body.triangles.shape[0])
            bucket, items = hash_grid.hash_boxes(tlo, thi, cell, table, 32)
            g = self._grids[(radius, cell)] = TriangleGrid(tlo, thi, cell, table, bucket, items, radius, extent)
            self.body.builds["triangle_grids"] += 1
        return g

    def forget_grids(self) -> None:
        """Drop the kept hash grids (the next query builds a new one; for tests and comparisons)."""
        self._grids.clear()

    def standing_data(self, radius: float, params: StandingParams, grid: TriangleGrid | None = None) -> StandingData:
        """Face normals, convexity certificates, coarse distance bounds and closest-face lists per
        cell for a standing collider at this pose (built once per radius and tuning). The
        certificates take ``grid`` (any hash grid of this radius: they do not depend on its cell)."""
        key = (radius, params)
        data = self._standing.get(key)
        if data is None:
            data = self._standing[key] = self._build_standing(radius, params, grid)
            self.body.builds["standing_data"] += 1
        return data

    def _build_standing(self, radius, params, grid):
        tris = self.body.triangles
        v0 = self.vertices
        center, rad = self.spheres()
        tnorm = np.empty((tris.shape[0], 3))
        cert = np.empty(tris.shape[0])
        g = grid if grid is not None and grid.radius == radius else self.grid(radius)
        convexity.convexity_certificates(
            v0,
            tris,
            center,
            rad,
            params.certificate_reach_m,
            convexity.COPLANAR_TOL_M,
            g.lo,
            g.hi,
            1.0 / g.cell,
            g.table,
            g.bucket,
            g.items,
            32,
            tnorm,
            cert,
        )
        extent = np.ptp(v0, axis=0) + 2.0 * params.distance_bound_band_m
        cell = max(
            params.distance_bound_cell_m, float(np.prod(extent) / params.distance_bound_max_cells) ** (1.0 / 3.0)
        )
        list_band = params.cell_list_travel_m + 0.5 * math.sqrt(3.0) * cell + 2.0 * radius
        band = max(params.distance_bound_band_m, list_band)  # (the centre distances are exact up to it)
        dorigin, centre, dbounds = distance_bounds.distance_bound_grid(v0, tris, center, rad, cell, band)
        lists = cell_lists.closest_face_lists(
            v0, tris, center, rad, dorigin, cell, centre, list_band, params.cell_list_max_entries
        )
        if lists is not None:
            offsets, cell_cand, cell_d0, cell_reach = lists
        else:  # too many: candidate lists of the vertices, as for a moving collider
            offsets, cell_cand, cell_d0 = np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
            cell_reach = np.full(dbounds.size, -1.0)  # (every cell of the grid: none has a list)
        return StandingData(
            tnorm,
            cert,
            dbounds,
            dorigin,
            1.0 / cell,
            band,
            offsets[:-1],
            offsets[1:],
            cell_cand,
            cell_d0,
            cell_reach,
            lists is not None,
        )


class MeshBody:
    """A triangle-mesh collider's fixed topology and its poses (see the module docstring).

    ``builds`` counts what was built, by kind (``triangle_spheres``, ``triangle_grids``,
    ``standing_data``), over every cloth sharing the body.
    """

    #: Poses kept for other cloths to find (a frame needs two: its start and its end).
    KEPT_POSES = 4

    def __init__(self, triangles: np.ndarray, n_vertices: int):
        self.triangles = triangles
        self.n_vertices = int(n_vertices)
        self._nbr = None
        self._poses: list[BodyPose] = []
        self.builds = {"triangle_spheres": 0, "triangle_grids": 0, "standing_data": 0}

    @property
    def edge_neighbours(self) -> np.ndarray:
        """(T, 3) the triangle across each edge (:func:`convexity.edge_neighbours`)."""
        if self._nbr is None:
            self._nbr = convexity.edge_neighbours(self.triangles, self.n_vertices)
        return self._nbr

    def pose(self, vertices: np.ndarray) -> BodyPose:
        """The pose of these world positions (M, 3): a kept one with the same values, else a new one
        (on a copy of them)."""
        for p in reversed(self._poses):
            if p.vertices is vertices or np.array_equal(p.vertices, vertices):
                return p
        p = BodyPose(self, np.array(vertices, dtype=np.float64, order="C", copy=True))
        self._poses = self._poses[-(self.KEPT_POSES - 1) :] + [p]
        return p
