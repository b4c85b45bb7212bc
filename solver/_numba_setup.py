"""Point Numba's on-disk cache at a writable per-user folder before any kernel is compiled.

Numba defaults to ``__pycache__`` next to the source, which is the extension folder: read-only
on a farm and wrong to pollute. ``SELVEDGE_CACHE_DIR`` overrides the location.

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


_PACKAGE = __name__.rsplit(".solver.", 1)[0]
CACHE_DIR = os.path.join(user_cache_dir(), "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in _PACKAGE))
os.makedirs(CACHE_DIR, exist_ok=True)
os.environ.setdefault("NUMBA_CACHE_DIR", CACHE_DIR)
# The coloured solve opens a few parallel regions per substep (one per constraint set, plus the
# prediction and the velocity update), ~100 a frame. OpenMP's default spin-waiting between them
# (GNU: 300,000 spins) starves the other thread whenever the machine has anything else to do:
# measured with the per-colour schedule, 128x128, 2 threads on a busy 2-core box: 2328 ms/frame
# spinning, 185 ms passive. Fully passive threads fall asleep between regions and wake up late
# (2 threads on an idle 2-core box, 64x64: 1.1x serial; 32x32: 0.7x). A short spin (GNU
# OpenMP, which Numba uses on Linux: GOMP_SPINCOUNT overrides the wait policy) catches the next
# region while it comes within tens of microseconds: 64x64 1.5-1.7x, 32x32 1.3x; with one of the
# two cores taken by another process it costs 0.68x against passive 0.91x (10,000 spins: 0.28x).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("GOMP_SPINCOUNT", "1000")

import numba  # noqa: E402  (must follow the environment set-up above)

# Numba may already have been imported by someone else in this process (another add-on);
# its config was then read before our environment variable, so set it directly too.
numba.config.CACHE_DIR = CACHE_DIR
