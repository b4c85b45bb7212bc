"""Force fields: Blender's Wind, Force, Vortex and Turbulence as Blender-free descriptions, evaluated
in Numba at every vertex once per substep.

The operators build one :class:`ForceField` per field object of the evaluated scene each frame
(its world matrix, strength, falloff, noise); nothing here knows Blender. Formulas follow
Blender's effector code (``BKE/intern/effect.cc``: ``get_effector_data``, ``effector_falloff``,
``falloff_func``, ``do_physical_effector``, ``wind_func``), written down here as implemented:

* Field frame: location ``o`` and unit axis ``z`` of the object. Shape ``point``: ``r = p - o``;
  shape ``plane``: ``r`` is the component of ``p - o`` along ``z`` (the distance to the XY plane).
  ``d = |r|``, ``c = z . r``.
* Falloff (``effector_falloff``): 0 if Z Direction is ``positive`` and c < 0 (``negative``: c > 0);
  ``sphere``: f(d); ``tube``: f(|c|) f_r(|r - c z|); ``cone``: f(|c|) f_r(angle(z, r) in degrees),
  with ``falloff_func``: 0 beyond a used maximum, 1 inside a used minimum, else
  ``(1 + x - x_min)^-power`` (x_min = 0 when the minimum is unused); f_r the same with the
  radial settings and radial power. The cloth's effector weight (All x this type) multiplies it.
* Force (``do_physical_effector``), with s the strength (plus noise) and F the falloff:
  Wind ``s F z``; Force ``s F r/|r|``; Vortex ``s F d (z x r)/|z x r|`` (Blender's point vortex);
  Turbulence ``s F (2 T(q) - 1)`` per axis, T Blender's ``BLI_noise_generic_turbulence`` of depth 2
  (improved Perlin noise, octaves 1, 1/2, 1/4, sum x 4/7) at ``q = r + z`` scaled by 1/Size
  (``p`` with Global), the axes sampled at (q_x, q_y, q_z), (q_y, q_z, q_x), (q_z, q_x, q_y).
  Flow adds ``-flow F v``: with flow > 0 a constant field becomes a drag toward the velocity
  ``s z / flow`` (Blender's tooltip: "convert effector force into air flow velocity").
* Noise (``wind_func``): each evaluation adds ``sign * r / (128 g) * noise`` to the strength,
  r uniform in 0..127 and g uniform in [1, 2): the same distribution as Blender's, drawn from a
  counter-based hash of (seed, vertex, substep), so a bake is reproducible.

Units: Blender's particles divide the force by the particle mass (1 kg by default); Selvedge
applies the field value as an acceleration (m/s^2), i.e. as on Blender's 1 kg particle, so a
cloth's response does not depend on its mesh resolution. When the cloth has aerodynamics
(:mod:`.aerodynamics`), Wind fields instead set the air velocity ``s F z`` (m/s) that the drag and
lift (and the per-vertex air drag) act against: that is how wind flutters a flag. Perlin
permutations come from the field's seed (not Blender's fixed table), so turbulence matches
Blender's in construction and statistics, not bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from . import _numba_setup  # noqa: F401
from .aerodynamics import add_aerodynamic_accelerations
from .errors import ClothInputError
from .kernels import _JIT

FIELD_KINDS = ("wind", "force", "vortex", "turbulence")
SHAPES = ("point", "plane")
FALLOFF_TYPES = ("sphere", "tube", "cone")
Z_DIRECTIONS = ("both", "positive", "negative")

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
) = range(27)
N_COLUMNS = 27


@dataclass
class ForceField:
    """One field object, in world space (metres, seconds). Names follow Blender's Field settings."""

    kind: str  # "wind" | "force" | "vortex" | "turbulence"
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

    def validate(self) -> None:
        for name, allowed in (
            ("kind", FIELD_KINDS),
            ("shape", SHAPES),
            ("falloff_type", FALLOFF_TYPES),
            ("z_direction", Z_DIRECTIONS),
        ):
            if getattr(self, name) not in allowed:
                raise ClothInputError(f"force field {name} must be one of {allowed}, got {getattr(self, name)!r}")
        for name in ("location", "direction"):
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
        ):
            if not math.isfinite(getattr(self, name)):
                raise ClothInputError(f"force field {name} must be finite, got {getattr(self, name)}")
        if self.kind == "turbulence" and not self.size > 0:
            raise ClothInputError(f"turbulence size must be positive, got {self.size}")

    def row(self) -> np.ndarray:
        z = np.asarray(self.direction, dtype=np.float64)
        z = z / np.linalg.norm(z)
        o = np.asarray(self.location, dtype=np.float64)
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
def _fade(t):
    return t * t * t * (t * (t * 6.0 - 15.0) + 10.0)


#: Perlin's 16 gradient directions of the improved noise (the 12 cube-edge midpoints, 4 repeated),
#: as a table: the reference's branches on the hash mispredict at random and cost more than the lookups
_GRADIENTS = np.array(
    [
        [1, 1, 0],
        [-1, 1, 0],
        [1, -1, 0],
        [-1, -1, 0],
        [1, 0, 1],
        [-1, 0, 1],
        [1, 0, -1],
        [-1, 0, -1],
        [0, 1, 1],
        [0, -1, 1],
        [0, 1, -1],
        [0, -1, -1],
        [1, 1, 0],
        [0, -1, 1],
        [-1, 1, 0],
        [0, -1, -1],
    ],
    dtype=np.float64,
)


@njit(inline="always", **_JIT)
def _grad(hash_value, x, y, z):
    g = _GRADIENTS[hash_value & 15]
    return g[0] * x + g[1] * y + g[2] * z


@njit(inline="always", **_JIT)
def _lerp(t, a, b):
    return a + t * (b - a)


@njit(inline="always", **_JIT)
def improved_noise(p, x, y, z):
    """Ken Perlin's improved noise (2002) with permutation ``p`` (512 entries), in about [-1, 1]."""
    fx, fy, fz = math.floor(x), math.floor(y), math.floor(z)
    xi, yi, zi = int(fx) & 255, int(fy) & 255, int(fz) & 255
    x -= fx
    y -= fy
    z -= fz
    u, v, w = _fade(x), _fade(y), _fade(z)
    a = p[xi] + yi
    aa = p[a] + zi
    ab = p[a + 1] + zi
    b = p[xi + 1] + yi
    ba = p[b] + zi
    bb = p[b + 1] + zi
    return _lerp(
        w,
        _lerp(
            v,
            _lerp(u, _grad(p[aa], x, y, z), _grad(p[ba], x - 1, y, z)),
            _lerp(u, _grad(p[ab], x, y - 1, z), _grad(p[bb], x - 1, y - 1, z)),
        ),
        _lerp(
            v,
            _lerp(u, _grad(p[aa + 1], x, y, z - 1), _grad(p[ba + 1], x - 1, y, z - 1)),
            _lerp(u, _grad(p[ab + 1], x, y - 1, z - 1), _grad(p[bb + 1], x - 1, y - 1, z - 1)),
        ),
    )


@njit(**_JIT)
def turbulence(p, size, x, y, z):
    """Blender's ``BLI_noise_generic_turbulence(size, x, y, z, oct=2, hard=False)`` over improved
    Perlin noise mapped to [0, 1]: octaves at scale 1, 2, 4 with amplitude 1, 1/2, 1/4, x 4/7."""
    x, y, z = x / size, y / size, z / size
    total = 0.0
    amp = 1.0
    scale = 1.0
    for _ in range(3):
        total += amp * (0.5 + 0.5 * improved_noise(p, scale * x, scale * y, scale * z))
        amp *= 0.5
        scale *= 2.0
    return total * (4.0 / 7.0)


@njit(inline="always", **_JIT)
def _hash_unit(seed, vertex, counter, salt):
    """A uniform number in [0, 1) from (seed, vertex, counter, salt) (splitmix64 finaliser)."""
    z = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(vertex) * np.uint64(0xBF58476D1CE4E5B9)
    z = z + np.uint64(counter) * np.uint64(0x94D049BB133111EB) + np.uint64(salt)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(inline="always", **_JIT)
def wind_noise(noise, seed, vertex, counter):
    """Blender's ``wind_func``: ``sign * r / (128 g) * noise`` with r in 0..127, g in [1, 2)."""
    r = int(_hash_unit(seed, vertex, counter, 1) * 128.0)
    g = 1.0 + _hash_unit(seed, vertex, counter, 2)
    sign = 1.0 if r > 64 else -1.0
    return sign * (r / g) * noise / 128.0


@njit(inline="always", **_JIT)
def field_falloff(f, rx, ry, rz):
    """``effector_falloff`` of field row ``f`` at offset r (the weight included)."""
    zx, zy, zz = f[K_ZX], f[K_ZY], f[K_ZZ]
    c = zx * rx + zy * ry + zz * rz
    zdir = int(f[K_ZDIR])
    if (zdir == 1 and c < 0.0) or (zdir == 2 and c > 0.0):
        return 0.0
    kind = int(f[K_FALLOFF])
    d = math.sqrt(rx * rx + ry * ry + rz * rz)
    out = f[K_WEIGHT]
    if kind == 0:
        return out * falloff_func(d, f[K_USE_MIN] != 0, f[K_MIN], f[K_USE_MAX] != 0, f[K_MAX], f[K_POWER])
    out *= falloff_func(abs(c), f[K_USE_MIN] != 0, f[K_MIN], f[K_USE_MAX] != 0, f[K_MAX], f[K_POWER])
    if out == 0.0:
        return 0.0
    if kind == 1:
        px, py, pz = rx - c * zx, ry - c * zy, rz - c * zz
        radial = math.sqrt(px * px + py * py + pz * pz)
    else:
        cos = c / d if d > 0.0 else 1.0
        radial = math.degrees(math.acos(min(1.0, max(-1.0, cos))))
    return out * falloff_func(radial, f[K_USE_RMIN] != 0, f[K_RMIN], f[K_USE_RMAX] != 0, f[K_RMAX], f[K_RPOWER])


@njit(**_JIT)
def field_accelerations(x, v, inv_mass, fields, perms, counter, wind_as_air, acceleration, air_velocity):
    """Add every field's effect at every free vertex: accelerations (m/s^2) to ``acceleration``;
    with ``wind_as_air`` Wind fields add their vector (m/s) to ``air_velocity`` instead (the
    aerodynamic model's air). ``counter`` numbers the substep (noise draws)."""
    for i in range(x.shape[0]):
        if inv_mass[i] == 0.0:
            continue
        for k in range(fields.shape[0]):
            f = fields[k]
            kind = int(f[K_KIND])
            zx, zy, zz = f[K_ZX], f[K_ZY], f[K_ZZ]
            rx, ry, rz = x[i, 0] - f[K_OX], x[i, 1] - f[K_OY], x[i, 2] - f[K_OZ]
            if int(f[K_SHAPE]) == 1:  # plane: the offset along the axis only
                c = rx * zx + ry * zy + rz * zz
                rx, ry, rz = c * zx, c * zy, c * zz
            fall = field_falloff(f, rx, ry, rz)
            if fall == 0.0:
                continue
            s = f[K_STRENGTH]
            if f[K_NOISE] > 0.0:
                s += wind_noise(f[K_NOISE], int(f[K_SEED]), i, counter * fields.shape[0] + k)
            s *= fall
            ax = ay = az = 0.0
            if kind == 0:
                ax, ay, az = s * zx, s * zy, s * zz
                if wind_as_air:
                    air_velocity[i, 0] += ax
                    air_velocity[i, 1] += ay
                    air_velocity[i, 2] += az
                    continue
            elif kind == 1:
                d = math.sqrt(rx * rx + ry * ry + rz * rz)
                if d > 0.0:
                    ax, ay, az = s * rx / d, s * ry / d, s * rz / d
            elif kind == 2:
                tx, ty, tz = zy * rz - zz * ry, zz * rx - zx * rz, zx * ry - zy * rx
                t = math.sqrt(tx * tx + ty * ty + tz * tz)
                if t > 0.0:
                    d = math.sqrt(rx * rx + ry * ry + rz * rz)
                    ax, ay, az = s * d * tx / t, s * d * ty / t, s * d * tz / t
            else:
                if f[K_GLOBAL] != 0.0:
                    qx, qy, qz = x[i, 0], x[i, 1], x[i, 2]
                else:
                    qx, qy, qz = rx + zx, ry + zy, rz + zz
                p = perms[k]
                size = f[K_SIZE]
                ax = s * (2.0 * turbulence(p, size, qx, qy, qz) - 1.0)
                ay = s * (2.0 * turbulence(p, size, qy, qz, qx) - 1.0)
                az = s * (2.0 * turbulence(p, size, qz, qx, qy) - 1.0)
            flow = f[K_FLOW] * fall
            acceleration[i, 0] += ax - flow * v[i, 0]
            acceleration[i, 1] += ay - flow * v[i, 1]
            acceleration[i, 2] += az - flow * v[i, 2]


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
    _counter: int = 0
    _acc: np.ndarray = None
    _air: np.ndarray = None

    def __post_init__(self):
        self.set_fields(self.fields)

    def set_fields(self, fields) -> None:
        self.fields = list(fields or ())
        self._table, self._perms = pack_fields(self.fields)

    @property
    def active(self) -> bool:
        aero = self.aerodynamics
        return bool(self.fields) or (aero is not None and aero.active)

    def accelerations(self, x, v, wind, air_drag_per_s, substep, n_substeps, updates_per_frame, h):
        """(n, 3) acceleration (m/s^2) of the fields and the aerodynamics for this substep.

        Evaluated at the start of every ``n_substeps / updates_per_frame``-th substep and held in
        between (``SolverSettings.force_updates_per_frame``; once a frame by default: per substep a
        64 x 64 sheet's drag and lift alone cost ~70 % of its elastic solve, see
        docs/design/forces_sewing_pressure.md). The aerodynamic overshoot limit uses the hold time."""
        every = max(1, n_substeps // max(1, min(updates_per_frame, n_substeps)))
        if self._acc is not None and substep % every != 0:
            return self._acc
        n = x.shape[0]
        if self._acc is None or self._acc.shape[0] != n:
            self._acc = np.zeros((n, 3))
            self._air = np.zeros((n, 3))
        acc, air = self._acc, self._air
        acc[:] = 0.0
        air[:] = 0.0
        aero = self.aerodynamics
        aero_on = aero is not None and aero.active
        if self.fields:
            field_accelerations(x, v, self.inv_mass, self._table, self._perms, self._counter, aero_on, acc, air)
        self._counter += 1
        if aero_on:
            if self.fields and air_drag_per_s > 0.0:
                # the per-vertex air drag pulls toward the local air, not only the global wind
                acc += air_drag_per_s * air
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
                acc,
            )
        return acc


#: Blender's FieldSettings properties :func:`field_from_blender` reads (``bpy.types.FieldSettings``).
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
)
_BLENDER_KINDS = {"WIND": "wind", "FORCE": "force", "VORTEX": "vortex", "TURBULENCE": "turbulence"}


def field_from_blender(settings: dict, matrix_world, effector_weights: dict | None = None):
    """(ForceField or None, reason) from a field object's settings, read by name from Blender's
    ``object.field`` (:data:`BLENDER_FIELD_SETTINGS`), its 4x4 world matrix, and the cloth's
    ``effector_weights`` (``all`` and one entry per field type, Blender's names). Blender-free,
    so the operators only read attributes; a field Selvedge does not simulate gives None and
    the reason (for the bake's warnings)."""
    kind = _BLENDER_KINDS.get(str(settings.get("type")))
    if kind is None:
        return None, f"field type {settings.get('type')!r} is not simulated (Wind, Force, Vortex, Turbulence are)"
    shape = str(settings.get("shape", "POINT")).lower()
    if shape not in SHAPES:
        return None, f"field shape {settings.get('shape')!r} is not simulated (Point and Plane are)"
    m = np.asarray(matrix_world, dtype=np.float64).reshape(4, 4)
    weights = effector_weights or {}
    weight = float(weights.get("all", 1.0)) * float(weights.get(kind, 1.0))
    field = ForceField(
        kind=kind,
        location=tuple(m[:3, 3]),
        direction=tuple(m[:3, 2]),
        shape=shape,
        falloff_type=str(settings.get("falloff_type", "SPHERE")).lower(),
        z_direction=str(settings.get("z_direction", "BOTH")).lower(),
        weight=weight,
        **{
            k: type(getattr(ForceField, k))(settings[k])
            for k in BLENDER_FIELD_SETTINGS
            if k in settings and k not in ("type", "shape", "falloff_type", "z_direction")
        },
    )
    if field.size <= 0.0:  # Blender's turbulence skips the scaling for Size 0: the same as 1
        field.size = 1.0
    field.validate()
    return field, ""
