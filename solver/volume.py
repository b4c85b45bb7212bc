"""Pressure and volume: one XPBD constraint per closed island of the mesh (001 sec. 5.3).

Each closed, consistently oriented island has the volume ``V = sum_t (x_a x x_b) . x_c / 6`` with
the gradient ``grad_a V = (x_b x x_c) / 6`` summed over the island's triangles (the area-weighted
vertex normal / 3). Two laws act on it, as one generalised XPBD update per island:

* Blender Cloth's Pressure (``cloth_calc_average_pressure`` in Blender's cloth code): gauge
  pressure ``p(V) = pressure_scale (pressure + min(V_t / V - 1, |pressure| + 200))`` with V_t the
  Target Volume (Custom Volume) or the rest volume: an ideal gas at constant temperature (Boyle:
  p_gas V = p_t V_t) over an ambient pressure, plus a uniform overpressure. Units here: Pa.
* The seeds' volume constraint (001 sec. 5.3): ``C = V - k V_0`` (k the inflation factor) with
  compliance alpha (m^5/N); 0 holds the volume exactly.

The update (a Newton step of the implicit Euler equations on the one coordinate V; for the
constraint alone it is exactly XPBD's ``(-C - alpha~ lambda) / (K + alpha~)``):
``lambda`` is h^2 times the pressure, K = sum_i w_i g_i |grad_i V|^2 (g_i the pressure group's
weight), ``q = h^2 p(V)``, ``q' = h^2 dp/dV``::

    gas only:       dlambda = (q - lambda) / (1 - q' K)
    with C:         dlambda = (-C - alpha~ lambda + alpha~ q) / (K + alpha~ (1 - q' K))
    then            x_i += w_i g_i grad_i V dlambda

The gas's q' < 0 keeps it stable at any pressure. One island couples all its vertices, so it is
solved last and serially in every mode (001 sec. 7: a global constraint conflicts with every
colour); its cost is one pass over the island's triangles per iteration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from . import _numba_setup  # noqa: F401
from .errors import ClothInputError
from .kernels import _JIT


@dataclass
class Pressure:
    """Blender Cloth > Pressure (names as there) and the seeds' volume constraint."""

    #: Blender's Pressure: uniform overpressure (in units of pressure_scale)
    uniform_pressure_force: float = 0.0
    #: Blender's Custom Volume and Target Volume (m^3); off: each island's rest volume
    use_pressure_volume: bool = False
    target_volume: float = 0.0
    #: Blender's Pressure Scale (Pa): the gas's pressure at the target volume; 0: no gas
    pressure_factor: float = 0.0
    #: the seeds' volume constraint C = V - inflation * V_0, compliance m^5/N; None: off
    inflation: float = 1.0
    volume_compliance: float | None = None
    #: Blender's Pressure Vertex Group: per-vertex weights in [0, 1] scaling the pressure's push
    weights: np.ndarray | None = None

    def validate(self, n_vertices: int) -> None:
        for name in ("uniform_pressure_force", "target_volume", "pressure_factor", "inflation"):
            if not math.isfinite(getattr(self, name)):
                raise ClothInputError(f"pressure {name} must be finite, got {getattr(self, name)}")
        if self.pressure_factor < 0:
            raise ClothInputError(f"pressure_factor (Pressure Scale) must be >= 0, got {self.pressure_factor}")
        if self.use_pressure_volume and not self.target_volume > 0:
            raise ClothInputError(f"Custom Volume needs a positive target_volume (m^3), got {self.target_volume}")
        if self.volume_compliance is not None and not (
            math.isfinite(self.volume_compliance) and self.volume_compliance >= 0
        ):
            raise ClothInputError(f"volume_compliance must be None or finite and >= 0, got {self.volume_compliance}")
        if not self.inflation > 0:
            raise ClothInputError(f"inflation must be positive, got {self.inflation}")
        if self.weights is not None:
            w = np.asarray(self.weights, dtype=np.float64)
            if w.shape != (n_vertices,) or not np.isfinite(w).all() or w.min() < 0 or w.max() > 1:
                raise ClothInputError(f"pressure group weights must be {n_vertices} values in [0, 1]")

    @property
    def active(self) -> bool:
        return self.pressure_factor > 0.0 or self.volume_compliance is not None


def closed_islands(n_vertices: int, triangles: np.ndarray):
    """(triangles oriented outward and grouped by island, triangle offsets, vertex order, vertex offsets).

    Islands are sets of triangles joined through shared vertices. Raises ClothInputError when an
    island has a boundary or non-manifold edge (not closed) or inconsistently oriented faces.
    """
    tri = np.asarray(triangles, dtype=np.int64)
    parent = np.arange(n_vertices)

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b, c in tri:
        for u, v in ((a, b), (b, c)):
            ru, rv = find(u), find(v)
            if ru != rv:
                parent[ru] = rv
    root = np.array([find(i) for i in range(n_vertices)])
    tri_root = root[tri[:, 0]]
    islands = np.unique(tri_root)
    out_tris, tri_offsets, out_verts, vert_offsets = [], [0], [], [0]
    for k, r in enumerate(islands):
        t = tri[tri_root == r]
        directed = np.concatenate([t[:, [0, 1]], t[:, [1, 2]], t[:, [2, 0]]])
        undirected = np.sort(directed, axis=1)
        _, inverse, counts = np.unique(undirected, axis=0, return_inverse=True, return_counts=True)
        bad = counts[inverse.ravel()] != 2
        if bad.any():
            a, b = undirected[np.flatnonzero(bad)[0]]
            n_bad = int((counts != 2).sum())
            raise ClothInputError(
                f"pressure needs a closed mesh: island {k} ({t.shape[0]} triangles) has {n_bad} open or non-manifold "
                f"edges (first: vertices {a}-{b}); close the holes, or turn pressure off"
            )
        _, dcounts = np.unique(directed, axis=0, return_counts=True)
        if (dcounts != 1).any():
            raise ClothInputError(
                f"pressure needs consistently oriented faces: island {k} has neighbouring faces with opposite "
                "normals (in Blender: Mesh > Normals > Recalculate Outside)"
            )
        out_tris.append(t)
        tri_offsets.append(tri_offsets[-1] + t.shape[0])
        verts = np.unique(t)
        out_verts.append(verts)
        vert_offsets.append(vert_offsets[-1] + verts.size)
    return (
        np.ascontiguousarray(np.concatenate(out_tris)),
        np.array(tri_offsets, dtype=np.int64),
        np.concatenate(out_verts).astype(np.int64),
        np.array(vert_offsets, dtype=np.int64),
    )


@njit(**_JIT)
def island_volumes(x, triangles, tri_offsets, out):
    """V of every island (signed: positive for outward normals)."""
    for k in range(tri_offsets.shape[0] - 1):
        total = 0.0
        for t in range(tri_offsets[k], tri_offsets[k + 1]):
            a, b, c = triangles[t, 0], triangles[t, 1], triangles[t, 2]
            cx = x[a, 1] * x[b, 2] - x[a, 2] * x[b, 1]
            cy = x[a, 2] * x[b, 0] - x[a, 0] * x[b, 2]
            cz = x[a, 0] * x[b, 1] - x[a, 1] * x[b, 0]
            total += cx * x[c, 0] + cy * x[c, 1] + cz * x[c, 2]
        out[k] = total / 6.0


@njit(**_JIT)
def solve_volume(
    x,
    inv_mass,
    group_weight,
    triangles,
    tri_offsets,
    island_vertices,
    vertex_offsets,
    params,
    h,
    reset_lambda,
    lam,
    grad,
):
    """One pass over every island (module docstring). ``params[k]``: pressure_scale (Pa),
    uniform pressure, target volume V_t, constraint on (0/1), k V_0, alpha (m^5/N).
    ``grad`` is (n, 3) scratch (6 grad V), zero on entry and left zero."""
    h2 = h * h
    for k in range(tri_offsets.shape[0] - 1):
        if reset_lambda:
            lam[k] = 0.0
        volume = 0.0
        for t in range(tri_offsets[k], tri_offsets[k + 1]):
            a, b, c = triangles[t, 0], triangles[t, 1], triangles[t, 2]
            for i, j, m in ((a, b, c), (b, c, a), (c, a, b)):
                gx = x[j, 1] * x[m, 2] - x[j, 2] * x[m, 1]
                gy = x[j, 2] * x[m, 0] - x[j, 0] * x[m, 2]
                gz = x[j, 0] * x[m, 1] - x[j, 1] * x[m, 0]
                grad[i, 0] += gx  # 6 grad V: the 1/6 is applied once below (a division a corner cost
                grad[i, 1] += gy  # the kernel a quarter of its time)
                grad[i, 2] += gz
                if i == a:
                    volume += gx * x[a, 0] + gy * x[a, 1] + gz * x[a, 2]
        volume /= 6.0
        weighted = 0.0
        for q in range(vertex_offsets[k], vertex_offsets[k + 1]):
            i = island_vertices[q]
            wi = inv_mass[i] * group_weight[i]
            weighted += wi * (grad[i, 0] * grad[i, 0] + grad[i, 1] * grad[i, 1] + grad[i, 2] * grad[i, 2])
        weighted *= 1.0 / 36.0
        scale, uniform, v_target, use_c, v_c, alpha = (
            params[k, 0],
            params[k, 1],
            params[k, 2],
            params[k, 3],
            params[k, 4],
            params[k, 5],
        )
        q_gas = 0.0
        dq_gas = 0.0
        if scale > 0.0 and volume > 0.0:
            ratio = min(v_target / volume - 1.0, abs(uniform) + 200.0)
            q_gas = h2 * scale * (uniform + ratio)
            if ratio < abs(uniform) + 200.0:
                dq_gas = -h2 * scale * v_target / (volume * volume)
        if use_c != 0.0:
            alpha_tilde = alpha / h2
            denominator = weighted + alpha_tilde * (1.0 - dq_gas * weighted)
            dlam = 0.0
            if denominator > 1e-30:
                dlam = (-(volume - v_c) - alpha_tilde * lam[k] + alpha_tilde * q_gas) / denominator
        else:
            dlam = (q_gas - lam[k]) / (1.0 - dq_gas * weighted)
        lam[k] += dlam
        for q in range(vertex_offsets[k], vertex_offsets[k + 1]):
            i = island_vertices[q]
            s = inv_mass[i] * group_weight[i] * dlam * (1.0 / 6.0)
            for d in range(3):
                x[i, d] += s * grad[i, d]
                grad[i, d] = 0.0


class VolumeConstraints:
    """The closed islands of one cloth and their pressure (init apart from solve)."""

    def __init__(self, rest: np.ndarray, triangles: np.ndarray, pressure: Pressure):
        n = rest.shape[0]
        pressure.validate(n)
        self.triangles, self.tri_offsets, self.island_vertices, self.vertex_offsets = closed_islands(n, triangles)
        volumes = np.zeros(self.tri_offsets.size - 1)
        island_volumes(rest, self.triangles, self.tri_offsets, volumes)
        # an island whose faces all point inward: reverse them so its volume is positive
        for k in np.flatnonzero(volumes < 0):
            sl = slice(self.tri_offsets[k], self.tri_offsets[k + 1])
            self.triangles[sl] = self.triangles[sl][:, [0, 2, 1]]
        self.rest_volumes = np.abs(volumes)
        if (self.rest_volumes <= 0).any():
            raise ClothInputError("pressure needs islands that enclose a volume (an island has zero volume)")
        self.lam = np.zeros(self.rest_volumes.size)
        self._grad = np.zeros((n, 3))
        self.set_pressure(pressure)

    @property
    def count(self) -> int:
        return int(self.rest_volumes.size)

    def set_pressure(self, pressure: Pressure) -> None:
        n = self._grad.shape[0]
        pressure.validate(n)
        self.pressure = pressure
        self._weights = np.ones(n) if pressure.weights is None else np.asarray(pressure.weights, dtype=np.float64)

    def params(self) -> np.ndarray:
        p = self.pressure
        v_t = np.full(self.count, p.target_volume) if p.use_pressure_volume else self.rest_volumes
        use_c = p.volume_compliance is not None
        return np.ascontiguousarray(
            np.column_stack(
                [
                    np.full(self.count, p.pressure_factor),
                    np.full(self.count, p.uniform_pressure_force),
                    v_t,
                    np.full(self.count, float(use_c)),
                    p.inflation * self.rest_volumes,
                    np.full(self.count, p.volume_compliance if use_c else 0.0),
                ]
            ),
            dtype=np.float64,
        )

    def volumes(self, x: np.ndarray) -> np.ndarray:
        out = np.zeros(self.count)
        island_volumes(x, self.triangles, self.tri_offsets, out)
        return out

    def project(self, x, inv_mass, h, reset_lambda, params) -> None:
        solve_volume(
            x,
            inv_mass,
            self._weights,
            self.triangles,
            self.tri_offsets,
            self.island_vertices,
            self.vertex_offsets,
            params,
            h,
            reset_lambda,
            self.lam,
            self._grad,
        )
