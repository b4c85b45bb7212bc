"""PC2 point cache and JSON sidecar: checked against the format spec, byte for byte.

The spec (Blender's Mesh Cache modifier, io_pc2 / MeshCacheModifier): 12-byte signature
b"POINTCACHE2\\0", int32 version 1, int32 numPoints, float32 startFrame, float32 sampleRate,
int32 numSamples, then float32 x, y, z per point per sample, all little-endian. The expected
bytes below are built with ``struct`` from that description, not with the module under test.
"""

import json
import math
import os
import struct

import numpy as np
import pytest

from selvedge.solver import Cloth, SolverSettings, grid_mesh
from selvedge.solver.io_pc2 import (
    CacheError,
    PC2Writer,
    read_pc2,
    read_pc2_header,
    read_sidecar,
    write_pc2,
    write_sidecar,
)


def spec_bytes(frames, start_frame, sample_rate):
    """A PC2 file written by hand from the format description."""
    frames = np.asarray(frames, dtype=np.float64)
    n_samples, n_points, _ = frames.shape
    out = bytearray(b"POINTCACHE2\x00")
    out += struct.pack("<i", 1) + struct.pack("<i", n_points)
    out += struct.pack("<f", start_frame) + struct.pack("<f", sample_rate) + struct.pack("<i", n_samples)
    for s in range(n_samples):
        for p in range(n_points):
            out += struct.pack("<3f", *frames[s, p])
    return bytes(out)


def leftovers(folder, keep):
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


@pytest.fixture
def frames():
    rng = np.random.default_rng(7)
    return rng.normal(size=(5, 17, 3)) * 3.0


def test_one_shot_file_matches_spec_bytes(tmp_path, frames):
    path = write_pc2(tmp_path / "a.pc2", frames, start_frame=12.0, sample_rate=0.5)
    data = path.read_bytes()
    assert data == spec_bytes(frames, 12.0, 0.5)
    assert len(data) == 32 + 5 * 17 * 12
    signature, version, n_points, start, rate, n_samples = struct.unpack("<12siiffi", data[:32])
    assert (signature, version, n_points, start, rate, n_samples) == (b"POINTCACHE2\x00", 1, 17, 12.0, 0.5, 5)
    # First float of the payload: frame 0, point 0, x, little-endian float32.
    assert struct.unpack("<f", data[32:36])[0] == np.float32(frames[0, 0, 0])
    # Last float: frame 4, point 16, z.
    assert struct.unpack("<f", data[-4:])[0] == np.float32(frames[4, 16, 2])
    assert leftovers(tmp_path, {"a.pc2"}) == []


def test_file_mode_follows_umask_or_the_replaced_file(tmp_path, frames):
    umask = os.umask(0o027)
    try:
        path = write_pc2(tmp_path / "a.pc2", frames)
        assert path.stat().st_mode & 0o777 == 0o640  # 0666 & ~umask, as open() gives; not mkstemp's 0600
        path.chmod(0o604)
        write_pc2(path, frames[:1])
        assert path.stat().st_mode & 0o777 == 0o604  # an existing cache keeps its mode
        side = write_sidecar(tmp_path / "a.json", {})
        assert side.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(umask)


def test_round_trip_is_float32_exact(tmp_path, frames):
    write_pc2(tmp_path / "a.pc2", frames, start_frame=1.0)
    back, header = read_pc2(tmp_path / "a.pc2")
    assert back.shape == (5, 17, 3) and back.dtype == np.float32
    np.testing.assert_array_equal(back, frames.astype(np.float32))
    assert (header.num_points, header.num_samples, header.start_frame, header.sample_rate) == (17, 5, 1.0, 1.0)


def test_streaming_writer_equals_one_shot_and_patches_num_samples(tmp_path, frames):
    with PC2Writer(tmp_path / "s.pc2", num_points=17, start_frame=3.0) as cache:
        for f in frames:
            cache.write_frame(f)
        assert not (tmp_path / "s.pc2").exists()  # nothing visible until close
    data = (tmp_path / "s.pc2").read_bytes()
    assert data == spec_bytes(frames, 3.0, 1.0)
    assert struct.unpack("<i", data[28:32])[0] == 5
    assert leftovers(tmp_path, {"s.pc2"}) == []


def test_streaming_a_simulated_cloth(tmp_path):
    pos, faces, uv = grid_mesh(6, 6, plane="xz")
    pins = np.zeros(36)
    pins[[30, 35]] = 1.0
    cloth = Cloth(pos, faces, pin_weights=pins, uvs=uv, settings=SolverSettings(substeps=2))
    recorded = []
    with PC2Writer(tmp_path / "c.pc2", num_points=36) as cache:
        for _ in range(3):
            cloth.step()
            cache.write_frame(cloth.positions)
            recorded.append(np.array(cloth.positions))
    back, header = read_pc2(tmp_path / "c.pc2")
    assert header.num_samples == 3
    np.testing.assert_array_equal(back, np.asarray(recorded, dtype=np.float32))
    assert back[2, 0, 2] < pos[0, 2]  # the free bottom corner fell


def test_exception_mid_stream_keeps_previous_cache_byte_identical(tmp_path, frames):
    target = tmp_path / "cloth.pc2"
    write_pc2(target, frames[:2])
    before = target.read_bytes()
    with pytest.raises(RuntimeError, match="solver blew up"), PC2Writer(target, num_points=17) as cache:
        cache.write_frame(frames[2])
        cache.write_frame(frames[3])
        raise RuntimeError("solver blew up")
    assert target.read_bytes() == before
    assert leftovers(tmp_path, {"cloth.pc2"}) == []


def test_failure_during_commit_keeps_previous_cache(tmp_path, frames, monkeypatch):
    target = tmp_path / "cloth.pc2"
    write_pc2(target, frames[:1])
    before = target.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_pc2(target, frames)
    monkeypatch.undo()
    assert target.read_bytes() == before
    assert leftovers(tmp_path, {"cloth.pc2"}) == []


def test_nan_frame_is_refused_and_nothing_replaced(tmp_path, frames):
    target = tmp_path / "cloth.pc2"
    write_pc2(target, frames[:2])
    before = target.read_bytes()
    bad = frames.copy()
    bad[3, 4, 1] = np.nan
    with pytest.raises(CacheError, match=r"frame 3 contains 1 non-finite values \(first at point 4\)"):
        write_pc2(target, bad)
    bad[3, 4, 1] = np.inf
    with pytest.raises(CacheError, match="non-finite"):
        write_pc2(target, bad)
    assert target.read_bytes() == before
    assert leftovers(tmp_path, {"cloth.pc2"}) == []


@pytest.mark.parametrize("shape", [(17,), (17, 2), (16, 3), (0, 3), (17, 3, 1)])
def test_wrong_frame_shape_is_refused(tmp_path, shape):
    with PC2Writer(tmp_path / "w.pc2", num_points=17) as cache:
        with pytest.raises(CacheError, match="shape|points"):
            cache.write_frame(np.zeros(shape))
        cache.write_frame(np.zeros((17, 3)))  # the writer is still usable after a refused frame
    assert read_pc2_header(tmp_path / "w.pc2").num_samples == 1


def test_bad_one_shot_inputs(tmp_path):
    with pytest.raises(CacheError, match=r"\(F, N, 3\)"):
        write_pc2(tmp_path / "x.pc2", np.zeros((4, 3)))
    with pytest.raises(CacheError, match="no frames"):
        write_pc2(tmp_path / "x.pc2", [])
    with pytest.raises(CacheError, match="points"):
        write_pc2(tmp_path / "x.pc2", [np.zeros((4, 3)), np.zeros((5, 3))])
    with pytest.raises(CacheError, match="float32"):
        write_pc2(tmp_path / "x.pc2", np.full((1, 2, 3), 1e300))
    with pytest.raises(CacheError, match="sample_rate"):
        write_pc2(tmp_path / "x.pc2", np.zeros((1, 2, 3)), sample_rate=0.0)
    with pytest.raises(CacheError, match="num_points"):
        PC2Writer(tmp_path / "x.pc2", num_points=0)
    assert leftovers(tmp_path, set()) == []


def test_empty_stream_does_not_replace_the_cache(tmp_path, frames):
    target = tmp_path / "cloth.pc2"
    write_pc2(target, frames[:1])
    before = target.read_bytes()
    with pytest.raises(CacheError, match="no frames"), PC2Writer(target, num_points=17):
        pass
    assert target.read_bytes() == before
    assert leftovers(tmp_path, {"cloth.pc2"}) == []


def test_reader_rejects_corrupt_files(tmp_path, frames):
    path = write_pc2(tmp_path / "a.pc2", frames)
    data = path.read_bytes()
    (tmp_path / "sig.pc2").write_bytes(b"POINTCACHE3\x00" + data[12:])
    with pytest.raises(CacheError, match="signature"):
        read_pc2(tmp_path / "sig.pc2")
    (tmp_path / "short.pc2").write_bytes(data[:-12])
    with pytest.raises(CacheError, match="header promises"):
        read_pc2(tmp_path / "short.pc2")
    (tmp_path / "tiny.pc2").write_bytes(data[:20])
    with pytest.raises(CacheError, match="too short"):
        read_pc2(tmp_path / "tiny.pc2")


def test_sidecar_round_trip_with_diagnostics(tmp_path):
    pos, faces, uv = grid_mesh(5, 5, plane="xz")
    pins = np.zeros(25)
    pins[[20, 24]] = 1.0
    cloth = Cloth(pos, faces, pin_weights=pins, uvs=uv, settings=SolverSettings(substeps=2))
    diags = [cloth.step() for _ in range(2)]
    path = write_sidecar(
        tmp_path / "cloth.json",
        {"substeps": 2, "fps": 24.0, "pins": np.array([20, 24]), "solver": cloth.settings, "count": np.int64(3)},
        diags,
        extra={"cache": "cloth.pc2"},
    )
    doc = json.loads(path.read_text())
    assert doc == read_sidecar(path)
    assert doc["format"] == "selvedge-bake" and doc["version"] == 1 and doc["non_finite_values"] == 0
    assert doc["settings"]["pins"] == [20, 24] and doc["settings"]["count"] == 3
    assert doc["settings"]["solver"]["substeps"] == 2 and doc["settings"]["solver"]["gravity_m_s2"] == [0.0, 0.0, -9.81]
    assert doc["cache"] == "cloth.pc2"
    assert [f["frame"] for f in doc["frames"]] == [1, 2]
    assert doc["frames"][1]["strain_max"] == diags[1].strain_max
    assert doc["frames"][1]["constraints"]["stretch"]["count"] == cloth.stretch.count
    assert math.isclose(doc["frames"][0]["total_energy_j"], diags[0].total_energy_j)
    assert leftovers(tmp_path, {"cloth.json"}) == []


def test_sidecar_is_strict_json_with_nan_as_null(tmp_path):
    target = write_sidecar(
        tmp_path / "cloth.json",
        {"a": float("nan"), "b": [1.0, float("inf")]},
        [{"frame": 1, "strain_max": float("-inf")}],
    )
    text = target.read_text()
    assert "NaN" not in text and "Infinity" not in text
    doc = json.loads(text, parse_constant=lambda token: pytest.fail(f"non-strict JSON token {token}"))
    assert doc["settings"] == {"a": None, "b": [1.0, None]}
    assert doc["frames"] == [{"frame": 1, "strain_max": None}]
    assert doc["non_finite_values"] == 3


def test_sidecar_failure_keeps_previous(tmp_path, monkeypatch):
    target = tmp_path / "cloth.json"
    write_sidecar(target, {"a": 1})
    before = target.read_bytes()
    with pytest.raises(TypeError, match="not JSON serialisable"):
        write_sidecar(target, {"a": object()})
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError("I/O error")))
    with pytest.raises(OSError, match="I/O error"):
        write_sidecar(target, {"a": 2})
    monkeypatch.undo()
    assert target.read_bytes() == before
    assert leftovers(tmp_path, {"cloth.json"}) == []
