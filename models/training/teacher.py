"""Teacher data: the project's own XPBD solver at a high-quality budget, deterministic (serial mode).

Scenes with colliders (models/training/scenes.py) run with a Colliders contact handler at both
budgets; the colliders are posed for every frame by ``Scene.place_colliders`` (frame-start pose
and frame-end pose), so the cheap step from a teacher state sees the same collider motion.

For every teacher frame t the cheap budget is also stepped once from the teacher state, so each
sample holds x_t, v_t (teacher), x_{t+1}, v_{t+1} (teacher) and x^cheap_{t+1}, v^cheap_{t+1} (cheap
budget from the teacher state); the network's targets are r_x = (x_{t+1} - x^cheap_{t+1}) / dt^2 and
r_v = (v_{t+1} - v^cheap_{t+1}) / dt. Storage: one compressed .npz
per trajectory (float32 states x, v, x_cheap, v_cheap; float64 static data) and protocol.json with the exact numerical
protocol (fps, substeps, iterations, solve order, bending model, seeds).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ...solver.cloth import Cloth
from ...solver.settings import ClothOptions, SolverSettings
from .scenes import make_scene

#: Train/test split by trajectory (scene seed), never by frame (001 sec. 9.7).
TRAIN_SEEDS = range(0, 64)
TEST_SEEDS = range(1000, 1012)
#: Held-out scenes for the evaluation bench (bench/bench_network.py), disjoint from both.
BENCH_SEEDS = range(2000, 2004)

PROTOCOL = {
    "fps": 24.0,
    "teacher_substeps": 64,
    "teacher_iterations": 1,
    "cheap_substeps": 8,
    "cheap_iterations": 1,
    "solve_mode": "serial",
    "solve_order": "stretch -> shear -> bend -> tethers (serial Gauss-Seidel, sweep order from pins)",
    "bending_model": "dihedral",
    "gravity_m_s2": [0.0, 0.0, -9.81],
    "colliders": (
        "per scene: none / sphere / capsule / box moving sinusoidally (0.1-0.3 m, 0.3-0.6 Hz) (scenes.COLLIDER_KINDS), "
        "analytic proxies in a Colliders contact handler, cloth thickness 0.004 m, default friction"
    ),
    "target": (
        "r_x = (x_teacher[t+1] - x_cheap[t+1 | teacher state t]) / frame_dt^2 and "
        "r_v = (v_teacher[t+1] - v_cheap[t+1 | teacher state t]) / frame_dt, both m/s^2"
    ),
}


def make_cloth(scene, substeps: int, iterations: int = 1, fps: float = 24.0) -> Cloth:
    settings = SolverSettings(substeps=substeps, iterations=iterations, solve_mode="serial", fps=fps)
    return Cloth(
        scene.rest,
        scene.faces,
        material=scene.material,
        pin_weights=scene.pins,
        settings=settings,
        options=ClothOptions(bending_model=PROTOCOL["bending_model"]),
        initial_velocities=np.tile(scene.v0, (len(scene.rest), 1)),
        contact_handler=scene.make_colliders(),
    )


def generate_trajectory(seed: int, frames: int, protocol: dict = PROTOCOL, kind: str | None = None) -> dict:
    scene = make_scene(seed, kind)
    fps = protocol["fps"]
    teacher = make_cloth(scene, protocol["teacher_substeps"], protocol["teacher_iterations"], fps)
    cheap = make_cloth(scene, protocol["cheap_substeps"], protocol["cheap_iterations"], fps)
    n = len(scene.rest)
    xs = np.empty((frames + 1, n, 3), np.float32)
    vs = np.empty((frames + 1, n, 3), np.float32)
    xc = np.empty((frames, n, 3), np.float32)
    vc = np.empty((frames, n, 3), np.float32)
    xs[0], vs[0] = teacher.x, teacher.v
    for f in range(frames):
        targets = scene.pin_targets(f + 1, fps)
        cheap.set_positions(teacher.x, teacher.v)
        scene.place_colliders(cheap.contact_handler, f + 1, fps)
        cheap.step(targets)
        xc[f], vc[f] = cheap.x, cheap.v
        scene.place_colliders(teacher.contact_handler, f + 1, fps)
        teacher.step(targets)
        xs[f + 1], vs[f + 1] = teacher.x, teacher.v
    return {
        "seed": seed,
        "kind": scene.kind,
        "collider": scene.collider_kind,
        "x": xs,
        "v": vs,
        "x_cheap": xc,
        "v_cheap": vc,
        "rest": scene.rest,
        "faces": scene.faces,
        "pins": scene.pins,
        "material": json.dumps(asdict(scene.material)),
    }


def generate(out_dir: Path, seeds, frames: int, log=print) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "protocol.json").write_text(json.dumps({**PROTOCOL, "frames": frames, "seeds": list(seeds)}, indent=1))
    paths = []
    t0 = time.perf_counter()
    for i, seed in enumerate(seeds):
        path = out_dir / f"traj_{seed:05d}.npz"
        if not path.exists():
            np.savez_compressed(path, **generate_trajectory(seed, frames))
        paths.append(path)
        if (i + 1) % 10 == 0:
            log(f"  teacher data: {i + 1}/{len(seeds)} trajectories ({time.perf_counter() - t0:.0f} s)")
    return paths
