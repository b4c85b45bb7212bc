"""Per-triangle aerodynamic drag and lift against the relative air velocity.

Chaos Cloth's aerodynamics (``FVelocityAndPressureField``: Drag Coefficient, Lift Coefficient,
air density) is the anchor: each triangle of area A and unit normal n meets the relative air
velocity ``u = air - v`` (air at the triangle = mean of its vertices' air, v the mean of their
velocities); with ``q = rho |u|^2 / 2``, ``d = u / |u|`` and ``cos = n . d``:

    drag  F_D = q A C_D |cos| d                  (the projected area |cos| A meets the flow)
    lift  F_L = q A C_L cos (n - cos d)          (perpendicular to the flow, |F_L| = q A C_L |cos| sin)

i.e. flat-plate theory's normal force split into its parts along and across the flow: a sheet
facing the flow gets the full drag and no lift, one edge-on to it gets neither, one at 45 deg
the most lift. Each vertex takes a third of its triangles' force and divides by its own mass.

The force is explicit (evaluated at the substep start), so a very light, very draggy cloth
could overshoot the air speed within one substep: each triangle's force is scaled down so its
velocity change in one substep, ``h |F| / m_t`` (m_t the triangle's third-shares of mass),
never exceeds |u|. A free sheet falling flat reaches ``sqrt(2 m g / (rho C_D A))``; edge-on it
falls freely (tests/solver/test_force_fields_and_aerodynamics.py measures both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from numba import njit

from . import _numba_setup  # noqa: F401
from .errors import ClothInputError
from .kernels import _JIT

#: Air at sea level, 15 C (kg/m^3); Chaos Cloth's default air density too.
AIR_DENSITY_KG_M3 = 1.225


@dataclass
class Aerodynamics:
    """Drag and lift coefficients (dimensionless, per unit area) and the air density."""

    drag_coefficient: float = 0.0
    lift_coefficient: float = 0.0
    air_density_kg_m3: float = AIR_DENSITY_KG_M3

    def validate(self) -> None:
        for name in ("drag_coefficient", "lift_coefficient", "air_density_kg_m3"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ClothInputError(f"aerodynamics {name} must be finite and >= 0, got {value}")

    @property
    def active(self) -> bool:
        return self.air_density_kg_m3 > 0.0 and (self.drag_coefficient > 0.0 or self.lift_coefficient > 0.0)


@njit(inline="always", **_JIT)
def _add_share(acceleration, i, m, fx, fy, fz):
    if m > 0.0:
        inv = 1.0 / m
        acceleration[i, 0] += fx * inv
        acceleration[i, 1] += fy * inv
        acceleration[i, 2] += fz * inv


@njit(**_JIT)
def add_aerodynamic_accelerations(
    x, v, triangles, mass, air, drag_coefficient, lift_coefficient, air_density, h, acceleration
):
    """Add each triangle's drag and lift (module docstring) / vertex mass to ``acceleration``;
    vertices of mass 0 or infinite (kinematic: ``mass`` is the lumped mass) take their share
    as lost. ``air`` (n, 3) is the air velocity at each vertex."""
    third = 1.0 / 3.0
    for t in range(triangles.shape[0]):
        a, b, c = triangles[t, 0], triangles[t, 1], triangles[t, 2]
        e1x, e1y, e1z = x[b, 0] - x[a, 0], x[b, 1] - x[a, 1], x[b, 2] - x[a, 2]
        e2x, e2y, e2z = x[c, 0] - x[a, 0], x[c, 1] - x[a, 1], x[c, 2] - x[a, 2]
        nx, ny, nz = e1y * e2z - e1z * e2y, e1z * e2x - e1x * e2z, e1x * e2y - e1y * e2x
        twice_area = math.sqrt(nx * nx + ny * ny + nz * nz)
        m_t = third * (mass[a] + mass[b] + mass[c])
        if twice_area < 1e-14 or m_t <= 0.0:
            continue
        inv_area2 = 1.0 / twice_area
        nx, ny, nz = nx * inv_area2, ny * inv_area2, nz * inv_area2
        ux = third * (air[a, 0] + air[b, 0] + air[c, 0] - v[a, 0] - v[b, 0] - v[c, 0])
        uy = third * (air[a, 1] + air[b, 1] + air[c, 1] - v[a, 1] - v[b, 1] - v[c, 1])
        uz = third * (air[a, 2] + air[b, 2] + air[c, 2] - v[a, 2] - v[b, 2] - v[c, 2])
        speed_sq = ux * ux + uy * uy + uz * uz
        if speed_sq < 1e-24:
            continue
        speed = math.sqrt(speed_sq)
        inv_speed = 1.0 / speed
        dx, dy, dz = ux * inv_speed, uy * inv_speed, uz * inv_speed
        cos = nx * dx + ny * dy + nz * dz
        q_area = 0.25 * air_density * speed_sq * twice_area
        kd = q_area * drag_coefficient * abs(cos)
        kl = q_area * lift_coefficient * cos
        fx = kd * dx + kl * (nx - cos * dx)
        fy = kd * dy + kl * (ny - cos * dy)
        fz = kd * dz + kl * (nz - cos * dz)
        magnitude = math.sqrt(fx * fx + fy * fy + fz * fz)
        scale = third
        if h * magnitude > speed * m_t:
            scale *= speed * m_t / (h * magnitude)
        fx, fy, fz = scale * fx, scale * fy, scale * fz
        _add_share(acceleration, a, mass[a], fx, fy, fz)
        _add_share(acceleration, b, mass[b], fx, fy, fz)
        _add_share(acceleration, c, mass[c], fx, fy, fz)
