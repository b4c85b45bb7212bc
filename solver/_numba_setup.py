"""Point Numba's on-disk cache at a writable per-user folder before any kernel is compiled.

Numba defaults to ``__pycache__`` next to the source, which is the extension folder: read-only
on a farm and wrong to pollute. ``SELVEDGE_CACHE_DIR`` overrides the location. Below it, one
folder per package name and one per version of the sources (:func:`source_fingerprint`).

Numba's cache entries name the module they were compiled in, and the same source files are
imported under different package names (``bl_ext.user_default.selvedge`` inside Blender,
``selvedge`` in plain Python), so each package name gets its own sub-folder; otherwise one
name would try to load the other's entries and fail.
"""

import os
import sys


def user_cache_dir() -> str:
    override = os.environ.get("SELVEDGE_CACHE_DIR")
    if override:
        return override
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
    elif sys.platform == "darwin":
        base = os.path.expanduser("~/Library/Caches")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "selvedge", "numba")


def source_fingerprint(root: str | None = None) -> str:
    """A hash of the solver's Python sources (this folder and below).

    Numba invalidates a cached function only when its own file changes: a kernel in one module
    that calls a changed function in another would go on loading the old code (measured here: the
    fused frame kept an old ``kernels.sweep_distance`` after kernels.py changed). Each version of
    the sources therefore gets a cache folder of its own.
    """
    import hashlib

    root = root or os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha1()
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, root).replace(os.sep, "/").encode())
            with open(path, "rb") as source:
                digest.update(source.read())
    return digest.hexdigest()[:12]


#: Cache folders of other source versions unused for this long are removed at import.
STALE_CACHE_DAYS = 14


def _prune_stale(parent: str, keep: str) -> None:
    """Remove sibling version folders not used for :data:`STALE_CACHE_DAYS` (a version in use
    touches its folder at every import); errors (another process removing it too) are ignored."""
    import shutil
    import time

    cutoff = time.time() - STALE_CACHE_DAYS * 86400
    try:
        for entry in os.scandir(parent):
            if entry.is_dir() and entry.path != keep and entry.stat().st_mtime < cutoff:
                shutil.rmtree(entry.path, ignore_errors=True)
    except OSError:
        pass


_PACKAGE = __name__.rsplit(".solver.", 1)[0]
_PACKAGE_DIR = os.path.join(user_cache_dir(), "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in _PACKAGE))
CACHE_DIR = os.path.join(_PACKAGE_DIR, source_fingerprint())
os.makedirs(CACHE_DIR, exist_ok=True)
try:
    os.utime(CACHE_DIR)  # in use: keeps it from being pruned by another version
except OSError:
    pass
_prune_stale(_PACKAGE_DIR, CACHE_DIR)
os.environ.setdefault("NUMBA_CACHE_DIR", CACHE_DIR)
# The coloured solve opens a few parallel regions per substep (one per constraint set, plus the
# prediction and the velocity update), ~100 a frame. OpenMP's default spin-waiting between them
# (GNU: 300,000 spins) starves the other thread whenever the machine has anything else to do, and
# fully passive threads fall asleep between regions and wake up late. A short spin (GNU OpenMP,
# which Numba uses on Linux: GOMP_SPINCOUNT overrides the wait policy) catches the next region
# while it comes within tens of microseconds. Measured: docs/design/solver.md ("OpenMP waiting").
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "1000")

import numba  # noqa: E402  (must follow the environment set-up above)

# Numba may already have been imported by someone else in this process (another add-on);
# its config was then read before our environment variable, so set it directly too.
numba.config.CACHE_DIR = CACHE_DIR
