"""Rigid transforms with unit quaternions (w, x, y, z): the one helper set of the project.

Conventions (Hamilton product, active rotation, local to world), as in Blender's ``mathutils``
and the collision kernels (``solver.collisions.analytic.quat_rotate`` is the scalar Numba twin of
:func:`rotate_rows`): a point p in a frame (position t, rotation q) is at ``t + q p q*`` in the
world. Plain NumPy, no Blender: the Blender side decomposes its matrices and hands these
functions the (location, rotation, scale) parts.
"""

from __future__ import annotations

import math

import numpy as np

from .errors import ClothInputError

IDENTITY = (1.0, 0.0, 0.0, 0.0)


def quaternion_axis_angle(axis, angle_rad: float) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a rotation by ``angle_rad`` about ``axis``:
    (cos(angle/2), sin(angle/2) axis/|axis|)."""
    a = np.asarray(axis, dtype=np.float64)
    norm = float(np.linalg.norm(a))
    if not (np.isfinite(norm) and norm > 0 and np.isfinite(angle_rad)):
        raise ClothInputError(
            f"rotation axis must be a finite non-zero vector and the angle finite, got {axis}, {angle_rad}"
        )
    s = math.sin(0.5 * angle_rad) / norm
    return np.array([math.cos(0.5 * angle_rad), a[0] * s, a[1] * s, a[2] * s])


def quaternion_between(a, b) -> np.ndarray:
    """Shortest rotation (w, x, y, z) taking direction a to direction b: (1 + a.b, a x b), normalised
    (a half-turn about any axis orthogonal to a when b = -a)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    a = a / np.linalg.norm(a)
    b = b / np.linalg.norm(b)
    d = float(a @ b)
    if d < -1.0 + 1e-12:
        ortho = np.cross(a, (1.0, 0.0, 0.0))
        if np.linalg.norm(ortho) < 1e-6:
            ortho = np.cross(a, (0.0, 1.0, 0.0))
        return quaternion_axis_angle(ortho, math.pi)
    c = np.cross(a, b)
    q = np.array([1.0 + d, c[0], c[1], c[2]])
    return q / np.linalg.norm(q)


def quaternion_multiply(a, b) -> np.ndarray:
    """Hamilton product a b (rotate by b, then by a), both (w, x, y, z)."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array(
        [
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ]
    )


def quaternion_conjugate(q) -> np.ndarray:
    """(w, -x, -y, -z): the inverse rotation of a unit quaternion."""
    return np.array([q[0], -q[1], -q[2], -q[3]])


def rotate_rows(q, v):
    """Rotate the rows of v (P,3) by the unit quaternion q (w, x, y, z):
    v + 2w (u x v) + u x (2 u x v) with u the vector part (Rodrigues in quaternion form)."""
    w, u = q[0], np.asarray(q[1:])
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)
