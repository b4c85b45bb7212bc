"""Randomised training/evaluation scenes, fully determined by an integer seed.

Meshes: regular grids of several resolutions and aspect ratios, irregular triangulations
(jittered vertices with random diagonals), a cape (pinned along one edge) and a skirt-like
open cylinder pinned at its waist. Pins: corners, one edge, one corner, a waist ring; some pins
move (sinusoidal sway / lift). Materials: presets with log-uniform stiffness scaling. Initial
motion: random uniform velocity. Colliders are not included in this version (see README).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ...solver.materials import PRESETS, Material
from ...solver.mesh import grid_mesh

KINDS = ("grid", "irregular", "cape", "skirt")


@dataclass
class Scene:
    seed: int
    kind: str
    rest: np.ndarray         # (N,3)
    faces: np.ndarray        # (T,3)
    pins: np.ndarray         # (N,) 0/1 hard pins
    material: Material
    v0: np.ndarray           # (3,) initial uniform velocity
    sway: np.ndarray         # (3,) amplitude (m) of the pins' sinusoidal motion
    sway_hz: float

    def pin_targets(self, frame: int, fps: float) -> np.ndarray:
        """(N,3) positions whose pinned rows are the pins' targets at the end of ``frame`` (1-based)."""
        t = frame / fps
        return self.rest + self.sway[None, :] * np.sin(2 * np.pi * self.sway_hz * t)


def _grid(rng, nx, ny, sx, sy, irregular):
    pos, faces, _ = grid_mesh(nx, ny, sx, sy, plane="xz")
    faces = np.asarray(faces)
    if irregular:
        dx, dy = sx / (nx - 1), sy / (ny - 1)
        interior = (pos[:, 0] > 1e-9) & (pos[:, 0] < sx - 1e-9) & (pos[:, 2] > 1e-9) & (pos[:, 2] < sy - 1e-9)
        jit = rng.uniform(-0.3, 0.3, size=(len(pos), 2)) * [dx, dy]
        pos[interior, 0] += jit[interior, 0]
        pos[interior, 2] += jit[interior, 1]
        # random diagonal per quad
        idx = np.arange(nx * ny).reshape(ny, nx)
        c00, c10, c01, c11 = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
        flip = rng.random(c00.size) < 0.5
        t1 = np.where(flip[:, None], np.stack([c00, c10, c01], 1), np.stack([c00, c10, c11], 1))
        t2 = np.where(flip[:, None], np.stack([c10, c11, c01], 1), np.stack([c00, c11, c01], 1))
        faces = np.concatenate([t1, t2])
    return pos, faces.astype(np.int64)


def _skirt(rng, n_around, n_down, radius, length):
    ang = np.linspace(0, 2 * np.pi, n_around, endpoint=False)
    zs = np.linspace(0, -length, n_down)
    flare = np.linspace(1.0, rng.uniform(1.1, 1.5), n_down)
    pos = np.array([[radius * f * np.cos(a), radius * f * np.sin(a), z] for z, f in zip(zs, flare) for a in ang])
    faces = []
    for j in range(n_down - 1):
        for i in range(n_around):
            a, b = j * n_around + i, j * n_around + (i + 1) % n_around
            c, d = a + n_around, b + n_around
            faces += [[a, b, d], [a, d, c]]
    return pos, np.asarray(faces, dtype=np.int64)


def make_scene(seed: int, kind: str | None = None, size_range=(8, 16)) -> Scene:
    rng = np.random.default_rng(seed)
    kind = kind or KINDS[int(rng.integers(len(KINDS)))]
    if kind == "skirt":
        pos, faces = _skirt(rng, int(rng.integers(12, 20)), int(rng.integers(5, 10)), rng.uniform(0.12, 0.2),
                            rng.uniform(0.3, 0.6))
        pins = (np.abs(pos[:, 2]) < 1e-9).astype(np.float64)
    else:
        nx = int(rng.integers(*size_range))
        aspect = rng.uniform(0.6, 1.6)
        ny = max(4, int(round(nx * aspect)))
        sx = rng.uniform(0.4, 1.0)
        sy = sx * (ny - 1) / (nx - 1) * rng.uniform(0.9, 1.1)
        pos, faces = _grid(rng, nx, ny, sx, sy, irregular=(kind == "irregular"))
        pos[:, 2] -= sy  # hang below the pinned top edge at z = 0
        top = np.abs(pos[:, 2]) < 1e-9
        left, right = np.abs(pos[:, 0]) < 1e-9, np.abs(pos[:, 0] - sx) < 1e-9
        choice = "edge" if kind == "cape" else ("corners", "edge", "corner")[int(rng.integers(3))]
        if choice == "edge":
            pins = top
        elif choice == "corners":
            pins = top & (left | right)
        else:
            pins = top & left
        pins = pins.astype(np.float64)
        # start tilted: rotate about the top edge so the cloth swings
        tilt = rng.uniform(-1.2, 1.2)
        y, z = pos[:, 1].copy(), pos[:, 2].copy()
        pos[:, 1], pos[:, 2] = y * np.cos(tilt) - z * np.sin(tilt), y * np.sin(tilt) + z * np.cos(tilt)
    base = PRESETS[sorted(PRESETS)[int(rng.integers(len(PRESETS)))]]
    s = 10.0 ** rng.uniform(-0.5, 0.5)
    b = 10.0 ** rng.uniform(-1.0, 1.0)
    material = replace(base, stretch_compliance_warp=base.stretch_compliance_warp * s,
                       stretch_compliance_weft=base.stretch_compliance_weft * s,
                       stretch_compliance_bias=base.stretch_compliance_bias * s,
                       shear_compliance=base.shear_compliance * s, bend_compliance=base.bend_compliance * b,
                       density_kg_m2=base.density_kg_m2 * 10.0 ** rng.uniform(-0.3, 0.3))
    v0 = rng.normal(0, 0.5, size=3)
    moving = rng.random() < 0.6
    sway = rng.normal(0, 0.15, size=3) if moving else np.zeros(3)
    return Scene(seed=seed, kind=kind, rest=pos, faces=faces, pins=pins, material=material, v0=v0, sway=sway,
                 sway_hz=float(rng.uniform(0.3, 1.5)))
