"""The headless demo (scripts/demo_bake.py): its cache and sidecar agree with the scene it describes."""

import importlib.util
import json
import struct
from pathlib import Path

import numpy as np

from selvedge.solver import grid_mesh

ROOT = Path(__file__).resolve().parents[2]


def load_demo():
    spec = importlib.util.spec_from_file_location("selvedge_demo_bake", ROOT / "scripts" / "demo_bake.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_writes_a_cache_matching_the_scene(tmp_path, capsys):
    n, frames = 8, 6
    assert (
        load_demo().main(["--frames", str(frames), "--resolution", str(n), "--out", str(tmp_path), "--substeps", "4"])
        == 0
    )
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (summary["frames"], summary["vertices"]) == (frames, n * n)
    assert summary["pc2"] == str(tmp_path / "cloth.pc2") and summary["sidecar"] == str(tmp_path / "cloth.json")

    data = (tmp_path / "cloth.pc2").read_bytes()
    signature, version, points, start, rate, samples = struct.unpack("<12siiffi", data[:32])
    assert (signature, version, points, start, rate, samples) == (b"POINTCACHE2\x00", 1, n * n, 1.0, 1.0, frames + 1)
    assert len(data) == 32 + 12 * n * n * (frames + 1)
    cache = np.frombuffer(data, dtype="<f4", offset=32).reshape(frames + 1, n * n, 3)

    rest, _, _ = grid_mesh(n, n, 1.0, 1.0, origin=(0.0, 0.0, 1.0))
    np.testing.assert_array_equal(cache[0], rest.astype(np.float32))  # frame 1 is the start pose
    fixed, moving = (n - 1) * n, n * n - 1
    np.testing.assert_array_equal(cache[:, fixed], np.repeat(rest[[fixed]], frames + 1, 0).astype(np.float32))
    # The moving corner follows smoothstep(frame / int(0.75 * frames)) towards (-0.4, 0, +0.2) m.
    ramp = int(0.75 * frames)
    for f in range(frames + 1):
        t = min(1.0, f / ramp)
        s = t * t * (3 - 2 * t)
        np.testing.assert_allclose(cache[f, moving], rest[moving] + s * np.array([-0.4, 0.0, 0.2]), atol=1e-6)
    # Free vertices fell under gravity: the mean height at the end is below the start.
    assert cache[-1, :, 2].mean() < rest[:, 2].mean() - 0.01

    doc = json.loads((tmp_path / "cloth.json").read_text())
    assert doc["cache"] == "cloth.pc2" and doc["settings"]["pc2_samples"] == frames + 1
    assert doc["settings"]["pinned_vertices"] == [fixed, moving]
    assert [d["frame"] for d in doc["frames"]] == list(range(1, frames + 1))
    assert summary["max_strain"] == max(d["strain_max"] for d in doc["frames"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cloth.json", "cloth.pc2"]
