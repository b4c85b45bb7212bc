"""Randomised training/evaluation scenes, fully determined by an integer seed.

Meshes: regular grids of several resolutions and aspect ratios, irregular triangulations
(jittered vertices with random diagonals), a cape (pinned along one edge) and a skirt-like
open cylinder pinned at its waist. Pins: corners, one edge, one corner, a waist ring; some pins
move (sinusoidal sway / lift). Materials: presets with log-uniform stiffness scaling. Initial
motion: random uniform velocity. Colliders (drawn from a second random stream of the same seed,
so the cloth part of a scene is unchanged by them): none (~25 %), a sphere, a capsule or a box
moving sinusoidally into the cloth's swing plane and back, placed where the cloth swings or
hangs into it, never overlapping the cloth at the start. ``make_cloth`` in teacher.py attaches
them as a :class:`selvedge.solver.collisions.Colliders` contact handler, and
:meth:`Scene.place_colliders` poses them for every frame (same protocol for every budget).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from ...solver.materials import PRESETS, Material
from ...solver.mesh import grid_mesh

KINDS = ("grid", "irregular", "cape", "skirt")
COLLIDER_KINDS = ("none", "sphere", "capsule", "moving_box")
#: Gap the contacts keep between cloth vertices and collider surfaces (m), the Colliders default.
CLOTH_THICKNESS_M = 0.004


@dataclass
class ColliderSpec:
    kind: str  # "sphere" | "capsule" | "box"
    dims: tuple  # sphere (r,), capsule (r, half_length), box (hx, hy, hz); m
    position: np.ndarray  # (3,) centre at t = 0, m
    amplitude: np.ndarray  # (3,) amplitude of a sinusoidal motion, m (zero for static colliders)
    rotation: np.ndarray  # (4,) quaternion (w, x, y, z), fixed
    hz: float = 0.0  # frequency of that motion (it starts moving towards the cloth at t = 0)

    def position_at(self, t: float) -> np.ndarray:
        return self.position + self.amplitude * np.sin(2 * np.pi * self.hz * t)

    def proxy(self, name: str):
        from ...solver.collisions import Box, Capsule, Sphere

        if self.kind == "sphere":
            return Sphere(self.dims[0], name=name, position=self.position, rotation=self.rotation)
        if self.kind == "capsule":
            return Capsule(self.dims[0], self.dims[1], name=name, position=self.position, rotation=self.rotation)
        return Box(self.dims, name=name, position=self.position, rotation=self.rotation)


@dataclass
class Scene:
    seed: int
    kind: str
    rest: np.ndarray  # (N,3)
    faces: np.ndarray  # (T,3)
    pins: np.ndarray  # (N,) 0/1 hard pins
    material: Material
    v0: np.ndarray  # (3,) initial uniform velocity
    sway: np.ndarray  # (3,) amplitude (m) of the pins' sinusoidal motion
    sway_hz: float
    colliders: list = field(default_factory=list)  # ColliderSpec, possibly empty

    @property
    def collider_kind(self) -> str:
        if not self.colliders:
            return "none"
        c = self.colliders[0]
        return "moving_box" if c.kind == "box" else c.kind

    def make_colliders(self):
        """A fresh Colliders contact handler for one Cloth, or None for a scene without colliders."""
        if not self.colliders:
            return None
        from ...solver.collisions import Colliders

        return Colliders([c.proxy(f"c{k}") for k, c in enumerate(self.colliders)], cloth_thickness=CLOTH_THICKNESS_M)

    def place_colliders(self, handler, frame: int, fps: float) -> None:
        """Pose the colliders for the step to ``frame`` (1-based): start pose at frame - 1, end pose at frame.

        The start pose is set explicitly (teleport), so a cheap solver restarted from a teacher
        state sees exactly the teacher's collider motion for that frame.
        """
        if handler is None:
            return
        for k, c in enumerate(self.colliders):
            handler.set_transform(k, c.position_at((frame - 1) / fps), c.rotation, teleport=True)
            handler.set_transform(k, c.position_at(frame / fps), c.rotation)

    def collider_state(self, frame: int, fps: float):
        """models.graph.ColliderState for the step from frame index ``frame`` (0-based) to ``frame + 1``."""
        from ..graph import ColliderState

        if not self.colliders:
            return None
        kinds = {"sphere": 1, "capsule": 2, "box": 3}
        dims = np.zeros((len(self.colliders), 3))
        for k, c in enumerate(self.colliders):
            dims[k, : len(c.dims)] = c.dims
        rot = np.array([c.rotation for c in self.colliders], dtype=np.float64)
        return ColliderState(
            np.array([kinds[c.kind] for c in self.colliders], dtype=np.int64),
            dims,
            np.array([c.position_at(frame / fps) for c in self.colliders]),
            rot,
            np.array([c.position_at((frame + 1) / fps) for c in self.colliders]),
            rot.copy(),
            np.full(len(self.colliders), CLOTH_THICKNESS_M),
        )

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


def _quat(axis, angle):
    axis = np.asarray(axis, dtype=np.float64)
    axis = axis / np.linalg.norm(axis)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis])


def _clearance(spec: ColliderSpec, pts: np.ndarray) -> float:
    """Smallest signed distance from the cloth vertices to the collider surface at t = 0."""
    from ..graph import _rotate, local_closest

    kinds = {"sphere": 1, "capsule": 2, "box": 3}
    q = spec.rotation
    local = _rotate(np.array([q[0], -q[1], -q[2], -q[3]]), pts - spec.position)
    dims = np.zeros(3)
    dims[: len(spec.dims)] = spec.dims
    return float(local_closest(kinds[spec.kind], dims, local)[0].min())


def make_colliders(seed: int, kind: str, pos: np.ndarray, collider: str | None = None) -> list:
    """Random colliders for a scene whose cloth starts at ``pos``; own random stream (seed, 7)."""
    rng = np.random.default_rng([seed, 7])
    choice = collider or COLLIDER_KINDS[int(rng.integers(len(COLLIDER_KINDS)))]
    if choice == "none":
        return []
    lo, hi = pos.min(axis=0), pos.max(axis=0)
    if kind == "skirt":
        radius = float(np.linalg.norm(pos[:, :2], axis=1).min())
        length = -lo[2]
        ang = rng.uniform(0, 2 * np.pi)
        side = np.array([np.cos(ang), np.sin(ang), 0.0])
        if choice == "sphere":  # a ball inside the skirt, touching range of the swinging hem
            r = radius * rng.uniform(0.4, 0.7)
            centre = np.array([0.0, 0.0, -length * rng.uniform(0.5, 0.8)]) + side * radius * rng.uniform(0.0, 0.3)
            spec = ColliderSpec("sphere", (r,), centre, np.zeros(3), np.array([1.0, 0, 0, 0]))
        elif choice == "capsule":  # a leg-like capsule inside the skirt
            r = radius * rng.uniform(0.25, 0.5)
            hl = length * rng.uniform(0.3, 0.5)
            centre = np.array([0.0, 0.0, -length * 0.6]) + side * radius * rng.uniform(0.1, 0.4)
            rot = _quat([rng.normal(), rng.normal(), 0.0], rng.uniform(0.0, 0.3))  # tilted up to 0.3 rad
            spec = ColliderSpec("capsule", (r, hl), centre, np.zeros(3), rot)
        else:  # a box coming in from the side at hem height
            h = rng.uniform(0.05, 0.15, size=3)
            centre = np.array([0.0, 0.0, -length * rng.uniform(0.5, 0.9)]) + side * (radius * 1.6 + h.max() + 0.05)
            spec = ColliderSpec(
                "box",
                tuple(h),
                centre,
                -side * rng.uniform(0.1, 0.3),
                _quat([0, 0, 1], rng.uniform(0, np.pi)),
                hz=float(rng.uniform(0.3, 0.6)),
            )
    else:
        # the cloth swings about its pinned top edge (x axis) through the plane y = 0: the collider sits
        # on the far side of that plane from the start tilt, within reach of the swing
        tilt_side = np.sign(pos[:, 1].mean()) or 1.0
        x = rng.uniform(lo[0] + 0.25 * (hi[0] - lo[0]), lo[0] + 0.75 * (hi[0] - lo[0]))
        height = float(np.linalg.norm(pos[:, 1:], axis=1).max())  # hanging length
        z = -height * rng.uniform(0.45, 0.9)
        if choice == "sphere":
            r = rng.uniform(0.06, 0.18)
            spec = ColliderSpec(
                "sphere",
                (r,),
                np.array([x, -tilt_side * (r + rng.uniform(0.0, 0.1)), z]),
                np.zeros(3),
                np.array([1.0, 0, 0, 0]),
            )
        elif choice == "capsule":
            r = rng.uniform(0.03, 0.08)
            hl = rng.uniform(0.1, 0.3)
            axis = np.array([1.0, rng.normal(0, 0.3), rng.normal(0, 0.5)])  # roughly along the cloth's width
            from ...solver.collisions.proxies import quaternion_between

            spec = ColliderSpec(
                "capsule",
                (r, hl),
                np.array([x, -tilt_side * (r + rng.uniform(0.0, 0.1)), z]),
                np.zeros(3),
                quaternion_between((0.0, 0.0, 1.0), axis),
            )
        else:  # a box swinging in and out of the swing plane (from the far side towards the cloth)
            h = rng.uniform(0.05, 0.15, size=3)
            spec = ColliderSpec(
                "box",
                tuple(h),
                np.array([x, -tilt_side * (h.max() * 1.8 + rng.uniform(0.02, 0.15)), z]),
                np.array([0.0, tilt_side * rng.uniform(0.1, 0.3), rng.uniform(-0.05, 0.05)]),
                _quat([0, 0, 1], rng.uniform(-0.5, 0.5)),
                hz=float(rng.uniform(0.3, 0.6)),
            )
    # never overlap the cloth at the start: move the collider away from the cloth until it clears it
    if kind == "skirt":
        away = spec.position - np.array([0.0, 0.0, spec.position[2]])
    else:
        away = np.array([0.0, spec.position[1] - pos[:, 1].mean() or -1.0, 0.0])
    n_away = away / max(np.linalg.norm(away), 1e-9)
    for _ in range(200):
        if _clearance(spec, pos) > CLOTH_THICKNESS_M + 0.01:
            break
        if kind == "skirt" and choice != "moving_box":
            # inside the skirt: shrink instead of moving
            spec.dims = tuple(d * 0.9 for d in spec.dims)
        else:
            spec.position = spec.position + 0.01 * n_away
    return [spec]


def make_scene(seed: int, kind: str | None = None, size_range=(8, 16), collider: str | None = None) -> Scene:
    rng = np.random.default_rng(seed)
    kind = kind or KINDS[int(rng.integers(len(KINDS)))]
    if kind == "skirt":
        pos, faces = _skirt(
            rng, int(rng.integers(12, 20)), int(rng.integers(5, 10)), rng.uniform(0.12, 0.2), rng.uniform(0.3, 0.6)
        )
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
    material = replace(
        base,
        stretch_compliance_warp=base.stretch_compliance_warp * s,
        stretch_compliance_weft=base.stretch_compliance_weft * s,
        stretch_compliance_bias=base.stretch_compliance_bias * s,
        shear_compliance=base.shear_compliance * s,
        bend_compliance=base.bend_compliance * b,
        density_kg_m2=base.density_kg_m2 * 10.0 ** rng.uniform(-0.3, 0.3),
    )
    v0 = rng.normal(0, 0.5, size=3)
    moving = rng.random() < 0.6
    sway = rng.normal(0, 0.15, size=3) if moving else np.zeros(3)
    sway_hz = float(rng.uniform(0.3, 1.5))
    return Scene(
        seed=seed,
        kind=kind,
        rest=pos,
        faces=faces,
        pins=pins,
        material=material,
        v0=v0,
        sway=sway,
        sway_hz=sway_hz,
        colliders=make_colliders(seed, kind, pos, collider),
    )
