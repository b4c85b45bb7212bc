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
  vertex (:func:`fields_from_blender`), ``r`` from the vertex, ``z`` its normal, while ``q``
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
from dataclasses import dataclass, field, replace

import numpy as np
from numba import njit
from numba.np.unsafe.ndarray import to_fixed_tuple

from . import _numba_setup  # noqa: F401
from .aerodynamics import add_aerodynamic_accelerations
from .errors import ClothInputError
from .field_noise import turbulence_axes, wind_noise
from .kernels import _JIT, _JIT_SERIAL

FIELD_KINDS = ("wind", "force", "vortex", "turbulence", "harmonic", "charge", "drag")
SHAPES = ("point", "plane", "line")
FALLOFF_TYPES = ("sphere", "tube", "cone")
Z_DIRECTIONS = ("both", "positive", "negative")
WIND, FORCE, VORTEX, TURBULENCE, HARMONIC, CHARGE, DRAG = range(7)
POINT, PLANE, LINE = range(3)

# Columns of the packed (F, N_COLUMNS) parameter table the kernel reads.
(
    K_KIND,
    K_SHAPE,
    K_FALLOFF,
    K_ZDIR,
    K_OX,
    K_OY,
    K_OZ,
    K_ZX,
    K_ZY,
    K_ZZ,
    K_STRENGTH,
    K_FLOW,
    K_POWER,
    K_USE_MIN,
    K_MIN,
    K_USE_MAX,
    K_MAX,
    K_RPOWER,
    K_USE_RMIN,
    K_RMIN,
    K_USE_RMAX,
    K_RMAX,
    K_NOISE,
    K_SEED,
    K_SIZE,
    K_GLOBAL,
    K_WEIGHT,
    K_DAMPING,
    K_REST_LENGTH,
    K_GRAVITATION,
    K_UNIT,
    K_O2X,
    K_O2Y,
    K_O2Z,
    K_Z2X,
    K_Z2Y,
    K_Z2Z,
    K_EVERY_POINT,
    K_POINT_INDEX,
    K_POINT_COUNT,
) = range(40)
N_COLUMNS = 40


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


# ----------------------------------------------------------------------------------------------
@njit(inline="always", **_JIT)
def falloff_func(x, use_min, x_min, use_max, x_max, power):
    """Blender's ``falloff_func``: 0 beyond a used maximum, 1 inside a used minimum, else
    ``(1 + x - x_min)^-power`` (x_min = 0 when unused)."""
    if use_max and x > x_max:
        return 0.0
    if use_min and x < x_min:
        return 1.0
    if not use_min:
        x_min = 0.0
    if power == 0.0:
        return 1.0
    return (1.0 + x - x_min) ** (-power)


@njit(inline="always", **_JIT)
def field_falloff(f, d, qx, qy, qz):
    """``effector_falloff`` of field row ``f`` at a point at distance ``d`` from the field (by its
    shape) and offset q from the field object's origin (the weight included)."""
    zx, zy, zz = f[K_ZX], f[K_ZY], f[K_ZZ]
    c = zx * qx + zy * qy + zz * qz
    zdir = int(f[K_ZDIR])
    if (zdir == 1 and c < 0.0) or (zdir == 2 and c > 0.0):
        return 0.0
    kind = int(f[K_FALLOFF])
    out = f[K_WEIGHT]
    # Blender's falloff is in the scene's units (1 + x is not scale-free): lengths in those units
    inv = 1.0 / f[K_UNIT]
    use_min, x_min, use_max, x_max = f[K_USE_MIN] != 0, f[K_MIN] * inv, f[K_USE_MAX] != 0, f[K_MAX] * inv
    if kind == 0:
        return out * falloff_func(d * inv, use_min, x_min, use_max, x_max, f[K_POWER])
    out *= falloff_func(abs(c) * inv, use_min, x_min, use_max, x_max, f[K_POWER])
    if out == 0.0:
        return 0.0
    use_rmin, r_min, use_rmax, r_max = f[K_USE_RMIN] != 0, f[K_RMIN], f[K_USE_RMAX] != 0, f[K_RMAX]
    if kind == 1:
        px, py, pz = qx - c * zx, qy - c * zy, qz - c * zz
        radial = math.sqrt(px * px + py * py + pz * pz) * inv
        r_min, r_max = r_min * inv, r_max * inv
    else:  # degrees
        q = math.sqrt(qx * qx + qy * qy + qz * qz)
        cos = c / q if q > 0.0 else 1.0
        radial = math.degrees(math.acos(min(1.0, max(-1.0, cos))))
    return out * falloff_func(radial, use_rmin, r_min, use_rmax, r_max, f[K_RPOWER])


@njit(inline="always", **_JIT)
def _uniform_falloff(f):
    """The falloff is the weight everywhere: Sphere, power 0, no maximum, both Z directions."""
    return int(f[K_FALLOFF]) == 0 and f[K_POWER] == 0.0 and f[K_USE_MAX] == 0.0 and int(f[K_ZDIR]) == 0


@njit(inline="always", **_JIT)
def _point_spring(f, x, v, inv_mass, acceleration):
    """A Point Harmonic field of uniform falloff (the usual one) without the general loop's
    branches, which the compiler can then vectorise: the same arithmetic as the general loop."""
    g = -f[K_STRENGTH] * f[K_WEIGHT]
    b = -f[K_DAMPING] * 2.0 * math.sqrt(abs(f[K_STRENGTH]))
    rest = f[K_REST_LENGTH]
    ox, oy, oz = f[K_OX], f[K_OY], f[K_OZ]
    for i in range(x.shape[0]):
        rx, ry, rz = x[i, 0] - ox, x[i, 1] - oy, x[i, 2] - oz
        if rest != 0.0:
            d = math.sqrt(rx * rx + ry * ry + rz * rz)
            scale = (d - rest) / d if d > 0.0 else 1.0
            rx, ry, rz = rx * scale, ry * scale, rz * scale
        free = 1.0 if inv_mass[i] != 0.0 else 0.0
        acceleration[i, 0] += free * (g * rx + b * v[i, 0])
        acceleration[i, 1] += free * (g * ry + b * v[i, 1])
        acceleration[i, 2] += free * (g * rz + b * v[i, 2])


@njit(**_JIT_SERIAL)
def field_accelerations(x, v, inv_mass, fields, perms, counter, wind_as_air, acceleration, air_velocity):
    """Add every field's effect at every free vertex: accelerations (m/s^2) to ``acceleration``;
    with ``wind_as_air`` Wind fields add their vector (m/s) to ``air_velocity`` instead (the
    aerodynamic model's air). ``counter`` numbers the evaluation (noise draws)."""
    # field-outer (per vertex the fields still add in table order): a field's settings are loop
    # invariants of the vertex loop
    for k in range(fields.shape[0]):
        # a tuple of the row: values, not memory the stores to ``acceleration`` might alias, so
        # the compiler keeps them (and 1 / unit, sqrt(strength)) in registers
        f = to_fixed_tuple(fields[k], N_COLUMNS)
        kind = int(f[K_KIND])
        shape = int(f[K_SHAPE])
        zx, zy, zz = f[K_ZX], f[K_ZY], f[K_ZZ]
        z2x, z2y, z2z = f[K_Z2X], f[K_Z2Y], f[K_Z2Z]
        every_point = f[K_EVERY_POINT] != 0.0
        point_index, point_count = int(f[K_POINT_INDEX]), int(f[K_POINT_COUNT])
        if kind == HARMONIC and shape == POINT and point_count == 0 and f[K_NOISE] <= 0.0 and _uniform_falloff(f):
            _point_spring(f, x, v, inv_mass, acceleration)
            continue
        for i in range(x.shape[0]):
            if inv_mass[i] == 0.0:
                continue
            vx, vy, vz = v[i, 0], v[i, 1], v[i, 2]
            if point_count > 0 and i % point_count != point_index:
                continue  # Blender's Every Point Harmonic: one field vertex per cloth vertex
            qx, qy, qz = x[i, 0] - f[K_O2X], x[i, 1] - f[K_O2Y], x[i, 2] - f[K_O2Z]
            c = qx * zx + qy * zy + qz * zz
            if shape == POINT:
                rx, ry, rz = x[i, 0] - f[K_OX], x[i, 1] - f[K_OY], x[i, 2] - f[K_OZ]
            elif shape == PLANE and kind != VORTEX:  # from the nearest point of the XY plane
                rx, ry, rz = c * zx, c * zy, c * zz
            else:  # Line (and a Plane vortex): from the nearest point of the Z axis
                rx, ry, rz = qx - c * zx, qy - c * zy, qz - c * zz
            d = math.sqrt(rx * rx + ry * ry + rz * rz)
            fall = field_falloff(f, d, qx, qy, qz)
            if fall == 0.0:
                continue
            s = f[K_STRENGTH]
            damping = f[K_DAMPING]
            if f[K_NOISE] > 0.0:
                draw = counter * fields.shape[0] + k
                s += wind_noise(f[K_NOISE], int(f[K_SEED]), i, draw, 0)
                if kind == HARMONIC or kind == DRAG:
                    damping += wind_noise(f[K_NOISE], int(f[K_SEED]), i, draw, 1)
            ax = ay = az = 0.0
            if kind == WIND:
                ax, ay, az = s * fall * zx, s * fall * zy, s * fall * zz
                if wind_as_air:
                    air_velocity[i, 0] += ax
                    air_velocity[i, 1] += ay
                    air_velocity[i, 2] += az
                    continue
            elif kind == FORCE:
                if f[K_GRAVITATION] != 0.0:
                    s = 0.0 if d < 1.1920929e-07 else s / (d * d)
                if d > 0.0:
                    g = s * fall / d
                    ax, ay, az = g * rx, g * ry, g * rz
            elif kind == VORTEX:
                if shape == POINT and not every_point:
                    tx, ty, tz = zy * rz - zz * ry, zz * rx - zx * rz, zx * ry - zy * rx
                    t = math.sqrt(tx * tx + ty * ty + tz * tz)
                    if t > 0.0:
                        g = s * fall * d / t
                        ax, ay, az = g * tx, g * ty, g * tz
                else:  # co-rotation at s F rad/s about the object's axis: swirl, centripetal pull, unit drag
                    g = s * fall
                    tx, ty, tz = g * (z2y * qz - z2z * qy), g * (z2z * qx - z2x * qz), g * (z2x * qy - z2y * qx)
                    ax = g * (z2y * tz - z2z * ty) + tx - vx
                    ay = g * (z2z * tx - z2x * tz) + ty - vy
                    az = g * (z2x * ty - z2y * tx) + tz - vz
            elif kind == HARMONIC:
                rest = f[K_REST_LENGTH]
                if rest != 0.0 and d > 0.0:
                    scale = (d - rest) / d
                    rx, ry, rz = rx * scale, ry * scale, rz * scale
                g = -s * fall
                b = -damping * 2.0 * math.sqrt(abs(s))
                ax, ay, az = g * rx + b * vx, g * ry + b * vy, g * rz + b * vz
            elif kind == CHARGE:
                g = s * fall
                ax, ay, az = g * rx, g * ry, g * rz
            elif kind == DRAG:
                speed = math.sqrt(vx * vx + vy * vy + vz * vz)
                g = -fall * (min(s, 2.0 / f[K_UNIT]) * speed + min(damping, 2.0))
                ax, ay, az = g * vx, g * vy, g * vz
            else:
                if f[K_GLOBAL] != 0.0:
                    ux, uy, uz = x[i, 0], x[i, 1], x[i, 2]
                else:
                    ux, uy, uz = qx + z2x, qy + z2y, qz + z2z
                p = perms[k]
                size = f[K_SIZE]
                g = s * fall
                tx, ty, tz = turbulence_axes(p, size, ux, uy, uz)
                ax, ay, az = g * (2.0 * tx - 1.0), g * (2.0 * ty - 1.0), g * (2.0 * tz - 1.0)
            if kind != HARMONIC and kind != DRAG:
                flow = f[K_FLOW] * fall
                ax -= flow * vx
                ay -= flow * vy
                az -= flow * vz
            acceleration[i, 0] += ax
            acceleration[i, 1] += ay
            acceleration[i, 2] += az


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


#: Blender's FieldSettings properties :func:`field_from_blender` reads (``bpy.types.FieldSettings``).
#: ``harmonic_damping`` is Blender's one damping value (the Drag field's Quadratic shows it too),
#: ``rest_length`` and ``size`` are one value (Harmonic's Rest Length, Turbulence's Size).
BLENDER_FIELD_SETTINGS = (
    "type",
    "shape",
    "strength",
    "flow",
    "noise",
    "seed",
    "size",
    "use_global_coords",
    "falloff_type",
    "falloff_power",
    "use_min_distance",
    "distance_min",
    "use_max_distance",
    "distance_max",
    "radial_falloff",
    "use_radial_min",
    "radial_min",
    "use_radial_max",
    "radial_max",
    "z_direction",
    "harmonic_damping",
    "use_gravity_falloff",
    "apply_to_location",
    "use_absorption",
)
_BLENDER_KINDS = {
    "WIND": "wind",
    "FORCE": "force",
    "VORTEX": "vortex",
    "TURBULENCE": "turbulence",
    "HARMONIC": "harmonic",
    "CHARGE": "charge",
    "DRAG": "drag",
}
#: Why each field type Selvedge does not simulate is left out (the bake report says it).
_NOT_SIMULATED = {
    "MAGNET": "a Magnetic field acts on moving charges; cloth carries none",
    "TEXTURE": "a Texture field needs Blender's texture evaluation at every vertex each substep",
    "GUIDE": "a Curve Guide steers particles along a curve; it has no force on cloth",
    "BOID": "a Boid field acts in Blender's boid simulation only",
    "LENNARDJ": "a Lennard-Jones field acts between particles of a size; cloth vertices have none",
    "FLUID_FLOW": "a Fluid Flow field needs the fluid domain's velocity grid",
}
_SHAPES_NOT_SIMULATED = {
    "SURFACE": "shape Surface (the field from the nearest point of the object's surface) is not "
    "simulated: use Point, Line, Plane or Every Point",
}
#: Every Point expands into one field per vertex: past this many the bake report says what it costs.
EVERY_POINT_WARN_VERTICES = 256
_COPIED = (
    "strength",
    "flow",
    "noise",
    "seed",
    "size",
    "use_global_coords",
    "falloff_power",
    "use_min_distance",
    "distance_min",
    "use_max_distance",
    "distance_max",
    "radial_falloff",
    "use_radial_min",
    "radial_min",
    "use_radial_max",
    "radial_max",
    "use_gravity_falloff",
)


def field_from_blender(settings: dict, matrix_world, effector_weights: dict | None = None):
    """(ForceField or None, reason) from a field object's settings, read by name from Blender's
    ``object.field`` (:data:`BLENDER_FIELD_SETTINGS`), its 4x4 world matrix, and the cloth's
    ``effector_weights`` (``all`` and one entry per field type, Blender's names). Blender-free,
    so the operators only read attributes. A field Selvedge does not simulate gives None and the
    reason (for the bake report); one with Apply to Location off gives None and no reason (it
    moves nothing in Blender either); a simulated field whose option is not gives the field and
    the reason."""
    type_name = str(settings.get("type"))
    kind = _BLENDER_KINDS.get(type_name)
    if kind is None:
        why = _NOT_SIMULATED.get(type_name, "unknown type")
        return None, f"field type {type_name!r} is not simulated ({why}); simulated: " + ", ".join(
            k.title() for k in _BLENDER_KINDS
        )
    if not settings.get("apply_to_location", True):
        return None, ""
    shape_name = str(settings.get("shape", "POINT"))
    if shape_name == "POINTS":
        return None, "field shape 'POINTS' (Every Point) needs the field mesh's vertices (fields_from_blender)"
    if shape_name in _SHAPES_NOT_SIMULATED:
        return None, f"field shape {shape_name!r}: " + _SHAPES_NOT_SIMULATED[shape_name]
    shape = shape_name.lower()
    if shape not in SHAPES:
        return None, f"field shape {shape_name!r} is not simulated (Point, Line and Plane are)"
    m = np.asarray(matrix_world, dtype=np.float64).reshape(4, 4)
    weights = effector_weights or {}
    weight = float(weights.get("all", 1.0)) * float(weights.get(kind, 1.0))
    values = {k: type(getattr(ForceField, k))(settings[k]) for k in _COPIED if k in settings}
    if "harmonic_damping" in settings:
        values["damping"] = float(settings["harmonic_damping"])
    if kind == "harmonic":  # Blender's f_size: the Rest Length here, the noise Size of a Turbulence
        values["rest_length"] = values.pop("size", 0.0)
    field = ForceField(
        kind=kind,
        location=tuple(m[:3, 3]),
        direction=tuple(m[:3, 2]),
        shape=shape,
        falloff_type=str(settings.get("falloff_type", "SPHERE")).lower(),
        z_direction=str(settings.get("z_direction", "BOTH")).lower(),
        weight=weight,
        **values,
    )
    if field.size <= 0.0:  # Blender's turbulence skips the scaling for Size 0: the same as 1
        field.size = 1.0
    field.validate()
    reason = ""
    if settings.get("use_absorption"):
        reason = "Absorption (colliders shading the field) is not simulated: the field acts through colliders"
    return field, reason


def fields_from_blender(settings: dict, matrix_world, effector_weights: dict | None = None, vertices=None):
    """(ForceField list, reason): :func:`field_from_blender`, and for shape Every Point one field
    per vertex of the field object's evaluated mesh, ``vertices`` = (positions, normals), (N, 3)
    each in object space (Blender: ``get_effector_data`` with ``PFIELD_SHAPE_POINTS`` takes the
    vertex and its normal as the field's location and axis, the object's origin and Z for the
    falloff's axial part, Turbulence and the vortex; a Harmonic one pulls cloth vertex i toward
    field vertex i mod N only)."""
    if str(settings.get("shape")) != "POINTS" or str(settings.get("type")) not in _BLENDER_KINDS:
        field, reason = field_from_blender(settings, matrix_world, effector_weights)
        return ([] if field is None else [field]), reason
    if vertices is None or len(vertices[0]) == 0:
        return [], "field shape Every Point on an object without vertices: no field"
    field, reason = field_from_blender(dict(settings, shape="POINT"), matrix_world, effector_weights)
    if field is None:
        return [], reason
    m = np.asarray(matrix_world, dtype=np.float64).reshape(4, 4)
    positions = np.asarray(vertices[0], dtype=np.float64).reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
    normals = np.asarray(vertices[1], dtype=np.float64).reshape(-1, 3) @ m[:3, :3].T
    lengths = np.linalg.norm(normals, axis=1)
    count = positions.shape[0]
    fields = []
    for j in range(count):
        direction = normals[j] / lengths[j] if lengths[j] > 1e-12 else np.asarray(field.direction)
        fields.append(
            replace(
                field,
                location=tuple(positions[j]),
                direction=tuple(direction),
                origin=field.location,
                axis=field.direction,
                every_point=True,
                point_index=j,
                point_count=count if field.kind == "harmonic" else 0,
            )
        )
    if count > EVERY_POINT_WARN_VERTICES:
        note = f"Every Point with {count} vertices acts as {count} fields at every cloth vertex (slow)"
        reason = f"{reason}; {note}" if reason else note
    return fields, reason
