"""Numba options shared by the collision kernels.

``cache=True`` writes to the user cache directory set by ``solver._numba_setup``. The parallel
variant is for per-vertex loops that write only their own slots (see mesh_kernels).
"""

_JIT = dict(cache=True, fastmath=False, nogil=True, error_model="numpy")
_JIT_PARALLEL = dict(_JIT, parallel=True)
