"""Blender-free PC2 point caches (the Mesh Cache modifier's format) and JSON bake sidecars.

PC2 layout, all little-endian::

    char[12]  signature    b"POINTCACHE2\\0"
    int32     version      1
    int32     numPoints    vertices per sample
    float32   startFrame
    float32   sampleRate   frames between samples (1.0: one sample per frame)
    int32     numSamples
    float32[numSamples][numPoints][3]   x, y, z

Every write is atomic: data goes to a temporary file in the destination folder, is flushed and
fsynced, then ``os.replace``-d over the destination. If anything fails on the way the temporary
file is removed and an existing cache at the destination is left byte-identical.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import SelvedgeError

PC2_SIGNATURE = b"POINTCACHE2\0"
PC2_VERSION = 1
#: signature, version, numPoints, startFrame, sampleRate, numSamples
PC2_HEADER = struct.Struct("<12siiffi")
PC2_HEADER_SIZE = PC2_HEADER.size  # 32 bytes
_NUM_SAMPLES_OFFSET = PC2_HEADER_SIZE - 4
_FLOAT32_MAX = float(np.finfo(np.float32).max)


class CacheError(SelvedgeError, ValueError):
    """A point cache or sidecar could not be written or read as given."""


@dataclass(frozen=True)
class PC2Header:
    num_points: int
    start_frame: float
    sample_rate: float
    num_samples: int


def _open_temp(path: Path):
    """A temporary file next to ``path`` (same folder, so ``os.replace`` is atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600; give it the mode a plain open() would (or the replaced
        # file's), so a cache baked on one account stays readable by a render farm's.
        os.chmod(tmp, _target_mode(path))
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return os.fdopen(fd, "w+b"), Path(tmp)


def _target_mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        return 0o666 & ~_current_umask()


def _current_umask() -> int:
    """The process umask; read from /proc where possible (setting it, even briefly, races threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def _commit(handle, tmp: Path, path: Path) -> None:
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable where the platform allows it (POSIX)."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _discard(handle, tmp: Path) -> None:
    try:
        handle.close()
    finally:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass


def _frame_array(positions, num_points: int | None, what: str) -> np.ndarray:
    """Validate one frame (N,3) of positions and return it as little-endian float32."""
    x = np.asarray(positions)
    if x.ndim != 2 or x.shape[1] != 3:
        raise CacheError(f"{what} must have shape (N, 3), got {x.shape}")
    if num_points is not None and x.shape[0] != num_points:
        raise CacheError(f"{what} has {x.shape[0]} points; this cache holds {num_points} per frame")
    if x.shape[0] == 0:
        raise CacheError(f"{what} has no points")
    x = x.astype(np.float64, copy=False)
    bad = ~np.isfinite(x)
    if bad.any():
        first = int(np.argwhere(bad)[0][0])
        raise CacheError(
            f"{what} contains {int(bad.sum())} non-finite values (first at point {first}); "
            "refusing to write a cache Blender would show as garbage"
        )
    if np.abs(x).max() > _FLOAT32_MAX:
        raise CacheError(f"{what} holds values beyond the float32 range")
    return np.ascontiguousarray(x, dtype="<f4")


def _check_timing(start_frame: float, sample_rate: float) -> None:
    if not math.isfinite(start_frame):
        raise CacheError(f"start_frame must be finite, got {start_frame}")
    if not (math.isfinite(sample_rate) and sample_rate > 0):
        raise CacheError(f"sample_rate must be positive, got {sample_rate}")


class PC2Writer:
    """Stream frames into a PC2 file; the destination changes only when :meth:`close` succeeds.

    ::

        with PC2Writer("out/cloth.pc2", num_points=n, start_frame=1) as cache:
            for frame in range(48):
                cloth.step()
                cache.write_frame(cloth.positions)

    Leaving the ``with`` block through an exception (or calling :meth:`abort`) discards the
    temporary file and leaves any previous cache untouched.
    """

    def __init__(self, path, num_points: int, start_frame: float = 1.0, sample_rate: float = 1.0):
        if not (isinstance(num_points, (int, np.integer)) and num_points > 0):
            raise CacheError(f"num_points must be a positive integer, got {num_points!r}")
        _check_timing(start_frame, sample_rate)
        self.path = Path(path)
        self.num_points = int(num_points)
        self.start_frame = float(start_frame)
        self.sample_rate = float(sample_rate)
        self.num_samples = 0
        self._handle, self._tmp = _open_temp(self.path)
        self._open = True
        try:
            self._handle.write(
                PC2_HEADER.pack(PC2_SIGNATURE, PC2_VERSION, self.num_points, self.start_frame, self.sample_rate, 0)
            )
        except BaseException:
            self.abort()
            raise

    @property
    def closed(self) -> bool:
        return not self._open

    def write_frame(self, positions) -> None:
        """Append one sample (N,3). Bad input raises :class:`CacheError` and aborts nothing by itself."""
        if not self._open:
            raise CacheError("this PC2 writer is closed")
        data = _frame_array(positions, self.num_points, f"frame {self.num_samples}")
        self._handle.write(data.tobytes())
        self.num_samples += 1

    def close(self) -> Path:
        """Patch numSamples into the header, fsync and atomically move the file into place."""
        if not self._open:
            return self.path
        try:
            if self.num_samples == 0:
                raise CacheError("no frames were written; refusing to replace the cache with an empty one")
            self._handle.seek(_NUM_SAMPLES_OFFSET)
            self._handle.write(struct.pack("<i", self.num_samples))
            _commit(self._handle, self._tmp, self.path)
        except BaseException:
            self.abort()
            raise
        self._open = False
        return self.path

    def abort(self) -> None:
        """Drop the temporary file; the destination stays as it was."""
        if self._open:
            self._open = False
            _discard(self._handle, self._tmp)

    def __enter__(self) -> PC2Writer:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def __del__(self):  # a writer dropped without close() must not leave temp files behind
        try:
            self.abort()
        except Exception:
            pass


def write_pc2(path, frames, start_frame: float = 1.0, sample_rate: float = 1.0) -> Path:
    """Write all frames at once: ``frames`` is (F,N,3) or a sequence of (N,3) arrays."""
    frames = list(frames) if not isinstance(frames, np.ndarray) else frames
    if isinstance(frames, np.ndarray) and frames.ndim != 3:
        raise CacheError(f"frames must have shape (F, N, 3), got {frames.shape}")
    if len(frames) == 0:
        raise CacheError("no frames to write")
    first = np.asarray(frames[0])
    if first.ndim != 2:
        raise CacheError(f"each frame must have shape (N, 3), got {first.shape}")
    writer = PC2Writer(path, num_points=first.shape[0], start_frame=start_frame, sample_rate=sample_rate)
    try:
        for frame in frames:
            writer.write_frame(frame)
    except BaseException:
        writer.abort()
        raise
    return writer.close()


def read_pc2_header(path) -> PC2Header:
    with open(path, "rb") as f:
        raw = f.read(PC2_HEADER_SIZE)
    if len(raw) < PC2_HEADER_SIZE:
        raise CacheError(f"{path}: {len(raw)} bytes is too short for a PC2 header ({PC2_HEADER_SIZE})")
    signature, version, num_points, start, rate, samples = PC2_HEADER.unpack(raw)
    if signature != PC2_SIGNATURE:
        raise CacheError(f"{path}: not a PC2 file (signature {signature!r})")
    if version != PC2_VERSION:
        raise CacheError(f"{path}: unsupported PC2 version {version}")
    if num_points <= 0 or samples < 0:
        raise CacheError(f"{path}: corrupt header (numPoints {num_points}, numSamples {samples})")
    return PC2Header(num_points, float(start), float(rate), samples)


def read_pc2(path) -> tuple[np.ndarray, PC2Header]:
    """Read a whole PC2 file: returns ``(positions (F,N,3) float32, header)``."""
    header = read_pc2_header(path)
    expected = PC2_HEADER_SIZE + 12 * header.num_points * header.num_samples
    size = os.path.getsize(path)
    if size != expected:
        raise CacheError(
            f"{path}: {size} bytes, but the header promises {expected} "
            f"({header.num_samples} samples x {header.num_points} points)"
        )
    data = np.fromfile(path, dtype="<f4", offset=PC2_HEADER_SIZE)
    return data.reshape(header.num_samples, header.num_points, 3), header


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _finite_only(value, replaced: list):
    """Copy of a JSON tree with NaN / infinity replaced by None (JSON null), counting them."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        replaced.append(value)
        return None
    if isinstance(value, dict):
        return {k: _finite_only(v, replaced) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_only(v, replaced) for v in value]
    return value


def write_sidecar(path, settings: dict, frames=(), extra: dict | None = None) -> Path:
    """Atomically write the bake's JSON sidecar: settings plus per-frame diagnostics.

    ``frames`` holds :class:`~.diagnostics.FrameDiagnostics` objects or their ``to_dict()``
    form; NumPy values, dataclasses and paths are converted. The file is strict JSON: a NaN or
    infinity (a diagnostic of a degenerate frame, say) is written as ``null`` and counted in the
    top-level ``non_finite_values``, so a log entry never costs the bake it describes.
    """
    doc = {
        "format": "selvedge-bake",
        "version": 1,
        "settings": settings,
        "frames": [f.to_dict() if hasattr(f, "to_dict") else f for f in frames],
    }
    if extra:
        doc.update(extra)
    # Round trip through the permissive encoder to reach plain Python types, then make it strict.
    tree = json.loads(json.dumps(doc, default=_json_default))
    replaced: list = []
    tree = _finite_only(tree, replaced)
    tree["non_finite_values"] = len(replaced)
    text = json.dumps(tree, indent=1, allow_nan=False)
    path = Path(path)
    handle, tmp = _open_temp(path)
    try:
        handle.write(text.encode("utf-8"))
        _commit(handle, tmp, path)
    except BaseException:
        _discard(handle, tmp)
        raise
    return path


def read_sidecar(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)
