"""Per-frame diagnostics: constraint error |C|, XPBD residual |C + alpha~ lambda|, multipliers,
edge strain, energy and phase timings (001 sec. 3.6 and 000 sec. 8).

The residual, not C, says whether the solve converged: a compliant edge carrying a load should
be stretched, by exactly alpha * force. Kernels fill flat arrays in one pass; percentiles use
``np.partition`` (linear time), so diagnostics stay on in production.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from numba import njit

from . import _numba_setup  # noqa: F401
from ._intrinsics import sqrt
from .kernels import dihedral_angle_and_gradient, wrap_angle


@njit(cache=True)
def distance_errors(x, vertices, rest_length, compliance, unilateral, h, lam, c_abs, residual_abs):
    for k in range(vertices.shape[0]):
        i, j = vertices[k, 0], vertices[k, 1]
        d = sqrt((x[i, 0] - x[j, 0]) ** 2 + (x[i, 1] - x[j, 1]) ** 2 + (x[i, 2] - x[j, 2]) ** 2)
        C = d - rest_length[k]
        if unilateral and C < 0.0:
            C = 0.0 if lam[k] == 0.0 else C
        c_abs[k] = abs(C) if not unilateral else max(C, 0.0)
        residual_abs[k] = abs(C + compliance[k] / (h * h) * lam[k])


@njit(cache=True)
def soft_pin_errors(x, vertex, target, compliance, h, lam, c_abs, residual_abs):
    for k in range(vertex.shape[0]):
        i = vertex[k]
        C = sqrt((x[i, 0] - target[k, 0]) ** 2 + (x[i, 1] - target[k, 1]) ** 2 + (x[i, 2] - target[k, 2]) ** 2)
        c_abs[k] = C
        residual_abs[k] = abs(C + compliance[k] / (h * h) * lam[k])


@njit(cache=True)
def dihedral_errors(x, vertices, rest_angle, compliance, h, lam, c_abs, residual_abs):
    for k in range(vertices.shape[0]):
        theta, ok, _, _, _, _ = dihedral_angle_and_gradient(
            x, vertices[k, 0], vertices[k, 1], vertices[k, 2], vertices[k, 3]
        )
        C = wrap_angle(theta - rest_angle[k]) if ok else 0.0
        c_abs[k] = abs(C)
        residual_abs[k] = abs(C + compliance[k] / (h * h) * lam[k])


@njit(cache=True)
def isometric_errors(x, vertices, stencil, compliance, h, lam, c_abs, residual_abs):
    for k in range(vertices.shape[0]):
        at = compliance[k] / (h * h)
        c0 = c1 = c2 = 0.0  # scalars: an array here was an allocation per hinge
        for a in range(4):
            s, j = stencil[k, a], vertices[k, a]
            c0 += s * x[j, 0]
            c1 += s * x[j, 1]
            c2 += s * x[j, 2]
        c_abs[k] = sqrt(c0**2 + c1**2 + c2**2)
        residual_abs[k] = sqrt((c0 + at * lam[k, 0]) ** 2 + (c1 + at * lam[k, 1]) ** 2 + (c2 + at * lam[k, 2]) ** 2)


@njit(cache=True)
def edge_strain(x, edges, rest_length, out):
    """Engineering strain (L - L0) / L0 of each edge."""
    for k in range(edges.shape[0]):
        i, j = edges[k, 0], edges[k, 1]
        d = sqrt((x[i, 0] - x[j, 0]) ** 2 + (x[i, 1] - x[j, 1]) ** 2 + (x[i, 2] - x[j, 2]) ** 2)
        out[k] = (d - rest_length[k]) / rest_length[k]


@njit(cache=True)
def energies(x, v, mass, inv_mass, gravity):
    """(kinetic, gravitational) energy in J of the free vertices: sum m |v|^2 / 2 and -sum m g . x
    (pins, inverse mass 0, are moved by the rig and carry none). One pass, no temporaries."""
    kinetic = 0.0
    potential = 0.0
    for i in range(x.shape[0]):
        if inv_mass[i] > 0.0:
            m = mass[i]
            kinetic += 0.5 * m * (v[i, 0] ** 2 + v[i, 1] ** 2 + v[i, 2] ** 2)
            potential -= m * (gravity[0] * x[i, 0] + gravity[1] * x[i, 1] + gravity[2] * x[i, 2])
    return kinetic, potential


def p95(values: np.ndarray) -> float:
    if values.size == 0:
        return 0.0
    k = int(math.ceil(0.95 * values.size)) - 1
    return float(np.partition(values, k)[k])


@dataclass
class ConstraintStats:
    count: int
    c_mean: float
    c_p95: float
    c_max: float
    residual_mean: float
    residual_p95: float
    residual_max: float
    lambda_min: float
    lambda_max: float

    @classmethod
    def from_arrays(cls, c_abs: np.ndarray, residual: np.ndarray, lam: np.ndarray) -> ConstraintStats:
        if c_abs.size == 0:
            return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        return cls(
            count=int(c_abs.size),
            c_mean=float(c_abs.mean()),
            c_p95=p95(c_abs),
            c_max=float(c_abs.max()),
            residual_mean=float(residual.mean()),
            residual_p95=p95(residual),
            residual_max=float(residual.max()),
            lambda_min=float(lam.min()),
            lambda_max=float(lam.max()),
        )


@dataclass
class FrameDiagnostics:
    """What one frame did; ``to_dict`` gives the JSON form written to sidecars and bench output."""

    frame: int
    constraints: dict[str, ConstraintStats] = field(default_factory=dict)
    strain_max: float = 0.0
    strain_p95: float = 0.0
    #: Largest strain of the edges within two edges of a hard pin (a point pin's strain is singular
    #: on any mesh: the load of a whole sheet goes through a few edges), and of all the others.
    strain_max_pin_rings: float = 0.0
    strain_max_outside_pin_rings: float = 0.0
    strain_p95_outside_pin_rings: float = 0.0
    #: Coarse spans the hierarchical stretch limit (:mod:`.multilevel`) projected in the frame's last pass.
    stretch_limit_active: int = 0
    #: Substeps the frame ran: ``SolverSettings.substeps`` x ``substep_scale``, which is 2 or 4 when
    #: the frame was run again because it ended stretched (``stretch_refinements``) or, in a
    #: collision world, crossed (``crossing_refinements``).
    substeps: int = 0
    substep_scale: int = 1
    #: 95th percentile over the mesh edges of the strain beyond each edge's stretch limit (its
    #: grain's): what ``SolverSettings.refine_stretch_above`` is compared with.
    stretch_over_limit_p95: float = 0.0
    kinetic_energy_j: float = 0.0
    gravitational_energy_j: float = 0.0
    timings_ms: dict[str, float] = field(default_factory=dict)
    contacts: dict = field(default_factory=dict)

    @property
    def total_energy_j(self) -> float:
        return self.kinetic_energy_j + self.gravitational_energy_j

    def to_dict(self) -> dict:
        d = asdict(self)
        d["total_energy_j"] = self.total_energy_j
        return d
