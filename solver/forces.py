"""Force fields: Blender's Wind, Force, Vortex, Turbulence, Harmonic, Charge and Drag fields as
Blender-free descriptions, evaluated in Numba at every vertex.

The operators build one :class:`ForceField` per field object of the evaluated scene each frame
(its world matrix, strength, falloff, noise); nothing here knows Blender. The formulas are those
of Blender's effector code (``BKE/intern/effect.cc``: ``get_effector_data``, ``effector_falloff``,
``falloff_func``, ``do_physical_effector``, ``wind_func``), checked against Blender's own
evaluation through a particle system (tests/blender/test_field_formulas_against_blender.py):

* Field frame: the object's origin ``o`` and unit Z axis ``z``; ``q = p - o`` (Blender's
  ``vec_to_point2``) and ``c = z . q``. The offset ``r`` from the field to the point (Blender's
  ``vec_to_point``) depends on the shape: Point ``r = q``; Plane ``r = c z`` (from the nearest
  point of the XY plane); Line ``r = q - c z`` (from the nearest point of the Z axis), and a
  Vortex with shape Plane takes the Line's ``r`` too. ``d = |r|``. Every Point: one field per
  vertex (:func:`.blender_fields.fields_from_blender`), ``r`` from the vertex, ``z`` its normal, while ``q``
  and the Z used by Turbulence and the vortex stay the object's. Harmonic with a Rest Length
  L scales ``r`` by ``(d - L) / d`` (d itself unchanged).
* Falloff F (``effector_falloff``): 0 if Z Direction is ``positive`` and c < 0 (``negative``:
  c > 0); Sphere ``f(d)``; Tube ``f(|c|) f_r(|q - c z|)``; Cone ``f(|c|) f_r(angle(z, q) in
  degrees)``, with ``falloff_func``: 0 beyond a used maximum, 1 inside a used minimum, else
  ``(1 + x - x_min)^-power`` (x_min = 0 when the minimum is unused); f_r the same with the radial
  settings and radial power. The cloth's effector weight (All x this type) multiplies F.
* Force (``do_physical_effector``), with s the strength (plus noise), b the damping (Harmonic
  Damping; Drag's second coefficient) and v the vertex velocity (m/s):
  Wind ``s F z``; Force ``s F r/|r|`` (Gravitation: s / d^2); Vortex, shape Point:
  ``s F d (z x r)/|z x r|``; Vortex, other shapes: ``t = s F (z x q)``, ``s F (z x t) + t - v``
  (the point co-rotates at s F rad/s); Harmonic ``-s F r - 2 b sqrt|s| v``; Charge ``s F r``
  (the cloth carries charge +1: Blender's own cloth carries none, its particles their Charge
  field's strength); Drag ``-F v (min(s, 2) |v| + min(b, 2))``; Turbulence ``s F (2 T(u) - 1)``
  per axis, T Blender's ``BLI_noise_generic_turbulence`` of depth 2 (:mod:`.field_noise`) at
  ``u = q + z`` (``p`` with Global) scaled by 1/Size, the axes sampled at (u_x, u_y, u_z),
  (u_y, u_z, u_x), (u_z, u_x, u_y). Flow (Inflow for a Vortex) adds ``-flow F v`` except to
  Harmonic and Drag: with flow > 0 a constant field becomes a drag toward ``s z / flow``.
* Noise (``wind_func``): each evaluation adds ``sign * r / (128 g) * noise`` to the strength
  (and, for Harmonic and Drag, another draw to the damping), r uniform in 0..127 and g uniform
  in [1, 2): Blender's distribution, drawn from a counter-based hash of (seed, vertex, update),
  so a bake is reproducible.

Units: as on Blender's particles (1 kg, velocities per second), the field value is an
acceleration (m/s^2), so a cloth's response does not depend on its mesh resolution. When the cloth
has aerodynamics (:mod:`.aerodynamics`), Wind fields instead set the air velocity ``s F z`` (m/s)
that the drag and lift (and the per-vertex air drag) act against: that is how wind flutters a flag.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .aerodynamics import add_aerodynamic_accelerations
from .errors import ClothInputError
from .field_kernels import FALLOFF_TYPES, FIELD_KINDS, N_COLUMNS, SHAPES, Z_DIRECTIONS, field_accelerations

__all__ = ["FALLOFF_TYPES", "FIELD_KINDS", "SHAPES", "Z_DIRECTIONS", "ExternalForces", "ForceField"]


@dataclass
class ForceField:
    """One field object, in world space (metres, seconds). Names follow Blender's Field settings."""

    kind: str  # one of FIELD_KINDS
    location: tuple = (0.0, 0.0, 0.0)
    #: the object's local Z axis in world space (normalised here); wind blows along it
    direction: tuple = (0.0, 0.0, 1.0)
    strength: float = 1.0
    flow: float = 0.0
    shape: str = "point"
    falloff_type: str = "sphere"
    falloff_power: float = 0.0
    use_min_distance: bool = False
    distance_min: float = 0.0
    use_max_distance: bool = False
    distance_max: float = 0.0
    radial_falloff: float = 0.0
    use_radial_min: bool = False
    radial_min: float = 0.0
    use_radial_max: bool = False
    radial_max: float = 0.0
    z_direction: str = "both"
    noise: float = 0.0
    seed: int = 0
    #: Turbulence: noise size (m); use_global_coords samples the noise at world positions
    size: float = 1.0
    use_global_coords: bool = False
    #: the cloth's effector weight for this field (Blender: All x the field type's weight)
    weight: float = 1.0
    #: Harmonic: Damping (1: critical), 1/s per sqrt(strength); Drag: the linear coefficient (1/s)
    damping: float = 1.0
    #: Harmonic: Rest Length (m), the distance at which the spring pulls nothing (0: none)
    rest_length: float = 0.0
    #: Force: Gravitation, the strength falls off with 1 / distance^2
    use_gravity_falloff: bool = False
    #: metres per Blender unit of the scene the field is read from: Blender's falloff
    #: ``(1 + x - x_min)^-power`` and the Drag field's cap of 2 on its speed factor are in those units
    length_unit_m: float = 1.0
    #: Blender's shape Every Point expands into one field per vertex of the field's mesh: then
    #: ``location``/``direction`` are the vertex and its normal, ``origin``/``axis`` the object's
    #: origin and Z (Blender measures the falloff's axial part, Turbulence and the vortex from
    #: them), and a Harmonic one pulls only the cloth vertices i with i % point_count == point_index
    origin: tuple | None = None
    axis: tuple | None = None
    every_point: bool = False
    point_index: int = 0
    point_count: int = 0

    def validate(self) -> None:
        for name, allowed in (
            ("kind", FIELD_KINDS),
            ("shape", SHAPES),
            ("falloff_type", FALLOFF_TYPES),
            ("z_direction", Z_DIRECTIONS),
        ):
            if getattr(self, name) not in allowed:
                raise ClothInputError(f"force field {name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("location", "direction") + tuple(n for n in ("origin", "axis") if getattr(self, n) is not None):
            value = np.asarray(getattr(self, name), dtype=np.float64)
            if value.shape != (3,) or not np.isfinite(value).all():
                raise ClothInputError(f"force field {name} must be three finite numbers, got {getattr(self, name)!r}")
        if np.linalg.norm(self.direction) < 1e-12:
            raise ClothInputError("force field direction (its Z axis) must not be zero")
        for name in (
            "strength",
            "flow",
            "falloff_power",
            "distance_min",
            "distance_max",
            "radial_falloff",
            "radial_min",
            "radial_max",
            "noise",
            "size",
            "weight",
            "damping",
            "rest_length",
        ):
            if not math.isfinite(getattr(self, name)):
                raise ClothInputError(f"force field {name} must be finite, got {getattr(self, name)}")
        if not (math.isfinite(self.length_unit_m) and self.length_unit_m > 0):
            raise ClothInputError(f"force field length_unit_m must be positive, got {self.length_unit_m}")
        if self.kind == "turbulence" and not self.size > 0:
            raise ClothInputError(f"turbulence size must be positive, got {self.size}")

    def row(self) -> np.ndarray:
        z = np.asarray(self.direction, dtype=np.float64)
        z = z / np.linalg.norm(z)
        o = np.asarray(self.location, dtype=np.float64)
        o2 = o if self.origin is None else np.asarray(self.origin, dtype=np.float64)
        z2 = z if self.axis is None else np.asarray(self.axis, dtype=np.float64) / np.linalg.norm(self.axis)
        return np.array(
            [
                FIELD_KINDS.index(self.kind),
                SHAPES.index(self.shape),
                FALLOFF_TYPES.index(self.falloff_type),
                Z_DIRECTIONS.index(self.z_direction),
                o[0],
                o[1],
                o[2],
                z[0],
                z[1],
                z[2],
                self.strength,
                self.flow,
                self.falloff_power,
                self.use_min_distance,
                self.distance_min,
                self.use_max_distance,
                self.distance_max,
                self.radial_falloff,
                self.use_radial_min,
                self.radial_min,
                self.use_radial_max,
                self.radial_max,
                self.noise,
                self.seed,
                self.size,
                self.use_global_coords,
                self.weight,
                self.damping,
                self.rest_length,
                self.use_gravity_falloff,
                self.length_unit_m,
                o2[0],
                o2[1],
                o2[2],
                z2[0],
                z2[1],
                z2[2],
                self.every_point,
                self.point_index,
                self.point_count,
            ],
            dtype=np.float64,
        )


def pack_fields(fields) -> tuple[np.ndarray, np.ndarray]:
    """(parameter table (F, N_COLUMNS), Perlin permutations (F, 512) int64) of validated fields."""
    fields = list(fields or ())
    for f in fields:
        f.validate()
    table = np.array([f.row() for f in fields], dtype=np.float64).reshape(len(fields), N_COLUMNS)
    perms = np.zeros((len(fields), 512), dtype=np.int64)
    for k, f in enumerate(fields):
        p = np.random.default_rng(int(f.seed)).permutation(256)
        perms[k] = np.concatenate([p, p])
    return table, perms


def evaluate_fields(fields, positions, velocities=None, update=0) -> np.ndarray:
    """(n, 3) acceleration (m/s^2) of ``fields`` at world ``positions`` (m) moving at
    ``velocities`` (m/s, default at rest): the kernel the step loop runs, for one evaluation
    (``update`` numbers the evaluation for the strength noise)."""
    x = np.ascontiguousarray(positions, dtype=np.float64).reshape(-1, 3)
    v = np.zeros_like(x) if velocities is None else np.ascontiguousarray(velocities, dtype=np.float64)
    acc, air = np.zeros_like(x), np.zeros_like(x)
    table, perms = pack_fields(fields)
    field_accelerations(x, v, np.ones(x.shape[0]), table, perms, update, False, acc, air)
    return acc


def evaluated_every_substep(f: ForceField) -> bool:
    """Fields whose force is a stiff function of the state, evaluated every substep instead of
    held: a Harmonic spring, and the Plane vortex's centripetal pull (a spring of rate (s F)^2).
    Held over a frame an explicit spring gains energy by 1 + k dt^2 / 2 per hold (measured: a
    free triangle in a Harmonic field of strength 4 doubles its energy in 10 s at one update a
    frame, and one of strength 100 explodes); per substep: -0.2 % at strength 4, +3.4 % at 100 over 10 s."""
    return f.kind == "harmonic" or (f.kind == "vortex" and (f.shape != "point" or f.every_point))


@dataclass
class ExternalForces:
    """Fields and aerodynamics of one cloth: the per-substep acceleration they add (m/s^2).

    ``accelerations`` is the one call the step loop makes per substep; it returns an empty (0, 3)
    array when nothing is on, so a cloth without fields or aerodynamics pays nothing.
    """

    triangles: np.ndarray
    mass: np.ndarray
    inv_mass: np.ndarray
    fields: list = field(default_factory=list)
    aerodynamics: object = None
    _table: np.ndarray = None
    _perms: np.ndarray = None
    _stiff_table: np.ndarray = None
    _stiff_perms: np.ndarray = None
    _counter: int = 0
    _stiff_counter: int = 0
    _held: np.ndarray = None
    _acc: np.ndarray = None
    _air: np.ndarray = None

    def __post_init__(self):
        self.set_fields(self.fields)

    def set_fields(self, fields) -> None:
        self.fields = list(fields or ())
        held = [f for f in self.fields if not evaluated_every_substep(f)]
        stiff = [f for f in self.fields if evaluated_every_substep(f)]
        self._table, self._perms = pack_fields(held)
        self._stiff_table, self._stiff_perms = pack_fields(stiff)

    @property
    def active(self) -> bool:
        aero = self.aerodynamics
        return bool(self.fields) or (aero is not None and aero.active)

    def accelerations(self, x, v, wind, air_drag_per_s, substep, n_substeps, updates_per_frame, h):
        """(n, 3) acceleration (m/s^2) of the fields and the aerodynamics for this substep.

        Evaluated at the start of every ``n_substeps / updates_per_frame``-th substep and held in
        between (``SolverSettings.force_updates_per_frame``; once a frame by default: per substep a
        64 x 64 sheet's drag and lift alone cost ~70 % of its elastic solve, see
        docs/design/forces_sewing_pressure.md), except the fields of :func:`evaluated_every_substep`.
        The aerodynamic overshoot limit uses the hold time."""
        every = max(1, n_substeps // max(1, min(updates_per_frame, n_substeps)))
        n = x.shape[0]
        stiff = self._stiff_table.shape[0] > 0
        if self._held is None or self._held.shape[0] != n:
            self._held = np.zeros((n, 3))
            self._air = np.zeros((n, 3))
            self._acc = np.zeros((n, 3)) if stiff else self._held
        elif substep % every != 0:
            return self._held if not stiff else self._add_stiff(x, v)
        held, air = self._held, self._air
        held[:] = 0.0
        air[:] = 0.0
        aero = self.aerodynamics
        aero_on = aero is not None and aero.active
        if self._table.shape[0]:
            field_accelerations(x, v, self.inv_mass, self._table, self._perms, self._counter, aero_on, held, air)
        self._counter += 1
        if aero_on:
            if self._table.shape[0] and air_drag_per_s > 0.0:
                # the per-vertex air drag pulls toward the local air, not only the global wind
                held += air_drag_per_s * air
            air += np.asarray(wind, dtype=np.float64)
            add_aerodynamic_accelerations(
                x,
                v,
                self.triangles,
                self.mass,
                air,
                aero.drag_coefficient,
                aero.lift_coefficient,
                aero.air_density_kg_m3,
                h * every,
                held,
            )
        return held if not stiff else self._add_stiff(x, v)

    def _add_stiff(self, x, v):
        if self._acc is self._held or self._acc.shape != self._held.shape:
            self._acc = np.zeros_like(self._held)
        acc = self._acc
        acc[:] = self._held
        table, perms = self._stiff_table, self._stiff_perms
        field_accelerations(x, v, self.inv_mass, table, perms, self._stiff_counter, False, acc, self._air)
        self._stiff_counter += 1
        return acc
