"""The force-field kernel: every field of a packed parameter table at every vertex (Numba).

The formulas are Blender's effector code, written out in :mod:`.forces`' docstring; the table's
columns are the ``K_*`` constants below, one row per :class:`.forces.ForceField`
(``ForceField.row``), so this module knows neither Blender nor the dataclass.
"""

from __future__ import annotations

import math

from numba import njit
from numba.np.unsafe.ndarray import to_fixed_tuple

from . import _numba_setup  # noqa: F401
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
