"""Noise of the force fields: Perlin's improved noise in Blender's turbulence octave sum, and the
strength noise of Blender's ``wind_func`` drawn from a counter-based hash (reproducible bakes).

Blender's turbulence (``BLI_noise_generic_turbulence(size, x, y, z, 2, false, 2)``, noise basis 2
= improved Perlin) is built the same way here; the permutation comes from the field's seed (not
Blender's fixed table), so it matches Blender's in construction and statistics, not bit for bit
(tests/blender/test_field_formulas_against_blender.py compares the statistics with Blender's).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from . import _numba_setup  # noqa: F401
from .kernels import _JIT


@njit(inline="always", **_JIT)
def _fade(t):
    return t * t * t * (t * (t * 6.0 - 15.0) + 10.0)


#: Perlin's 16 gradient directions of the improved noise (the 12 cube-edge midpoints, 4 repeated),
#: one flat table per axis: the reference's branches on the hash mispredict at random and cost more
#: than the lookups, and a row of a 2-D table costs a view per lookup
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
_GX = np.ascontiguousarray(_GRADIENTS[:, 0])
_GY = np.ascontiguousarray(_GRADIENTS[:, 1])
_GZ = np.ascontiguousarray(_GRADIENTS[:, 2])


@njit(inline="always", **_JIT)
def _grad(hash_value, x, y, z):
    i = hash_value & 15
    return _GX[i] * x + _GY[i] * y + _GZ[i] * z


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


@njit(inline="always", **_JIT)
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
def _lattice_noise(p, xi, yi, zi, x, y, z, u, v, w):
    """:func:`improved_noise` from its cell (xi, yi, zi), the offsets in it and their fades."""
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


@njit(inline="always", **_JIT)
def turbulence_axes(p, size, x, y, z):
    """The three axes of Blender's turbulence force, :func:`turbulence` at (x, y, z), (y, z, x) and
    (z, x, y), each in [0, 1]. The three samples of an octave lie in the same lattice cell with
    permuted coordinates, so they share the floors and fades, and computed side by side the CPU
    overlaps their table lookups (measured 0.70 -> 0.52 ms for 4096 points)."""
    x, y, z = x / size, y / size, z / size
    tx = ty = tz = 0.0
    amp = 1.0
    scale = 1.0
    for _ in range(3):
        sx, sy, sz = scale * x, scale * y, scale * z
        fx, fy, fz = math.floor(sx), math.floor(sy), math.floor(sz)
        xi, yi, zi = int(fx) & 255, int(fy) & 255, int(fz) & 255
        sx -= fx
        sy -= fy
        sz -= fz
        u, v, w = _fade(sx), _fade(sy), _fade(sz)
        tx += amp * _lattice_noise(p, xi, yi, zi, sx, sy, sz, u, v, w)
        ty += amp * _lattice_noise(p, yi, zi, xi, sy, sz, sx, v, w, u)
        tz += amp * _lattice_noise(p, zi, xi, yi, sz, sx, sy, w, u, v)
        amp *= 0.5
        scale *= 2.0
    # over the octaves, sum amp (0.5 + 0.5 n) = 0.5 (1 + 1/2 + 1/4) + 0.5 sum amp n
    return (0.875 + 0.5 * tx) * (4.0 / 7.0), (0.875 + 0.5 * ty) * (4.0 / 7.0), (0.875 + 0.5 * tz) * (4.0 / 7.0)


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
def wind_noise(noise, seed, vertex, counter, salt):
    """Blender's ``wind_func``: ``sign * r / (128 g) * noise`` with r in 0..127, g in [1, 2); ``salt``
    tells apart the draws of one evaluation (strength, damping)."""
    r = int(_hash_unit(seed, vertex, counter, 2 * salt + 1) * 128.0)
    g = 1.0 + _hash_unit(seed, vertex, counter, 2 * salt + 2)
    sign = 1.0 if r > 64 else -1.0
    return sign * (r / g) * noise / 128.0
