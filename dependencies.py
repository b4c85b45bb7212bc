"""Loading the solver's and the network's third-party packages, with one readable message per failure.

Inside Blender, numba, llvmlite and onnxruntime come from the wheels bundled in the extension zip
(Blender installs them into its extensions' ``.local/lib/pythonX.Y/site-packages``); NumPy is
Blender's own. What can go wrong, and what the user reads instead of a chained traceback:

- numba (or llvmlite) missing: the zip for another Blender Python was installed (its wheels do
  not load here), or plain Python without the pins;
- numba too old for the NumPy it finds (``Numba needs NumPy 2.3 or less``): an old numba earlier
  on ``sys.path``, or a Blender whose NumPy is newer than this build supports;
- llvmlite not the one numba was built against;
- onnxruntime missing (only the learned-network modes need it).

:func:`require_solver` and :func:`require_network` import the packages (the bundled copies
first, see :func:`_bundled_first`) and raise :class:`DependencyError` with a message that names
what to install or which build to use. This module imports neither bpy nor Numba (the solver's
error classes only), so the operators' ``except`` clause never imports numba again.
"""

import contextlib
import os
import re
import sys

from .solver.errors import SelvedgeError  # plain Python: the solver package loads Numba lazily

#: The pins of requirements/solver.txt and scripts/build_extension.py (checked by the tests).
NUMBA, LLVMLITE, ONNXRUNTIME = "0.68.1", "0.50.0", "1.32.0"
#: NumPy versions those pins load with (numba 0.68's own check), for the message.
NUMPY_RANGE = "1.22 to 2.5"


class DependencyError(SelvedgeError, RuntimeError):
    """A package the solver or the network needs does not load; the message says what to do (one of the
    operators' expected errors: reported, never a traceback)."""


def _blender_version():
    bpy = sys.modules.get("bpy")
    version = getattr(getattr(bpy, "app", None), "version", None)
    return tuple(version[:3]) if version else None


def _build_for_this_blender() -> str:
    """The archive an artist should install here, as scripts/build_extension.py names it."""
    if sys.version_info[:2] == (3, 11):
        return "the Blender 4.2-5.0 build (selvedge-<version>-<platform>-blender4.2-5.0.zip)"
    if sys.version_info[:2] == (3, 13):
        return "the Blender 5.1+ build (selvedge-<version>-<platform>-blender5.1-5.x.zip)"
    return (
        f"a build for Python {sys.version_info[0]}.{sys.version_info[1]} (none is made: Blender 4.2-5.0 "
        "run Python 3.11, 5.1+ Python 3.13)"
    )


def _where() -> str:
    blender = _blender_version()
    python = f"Python {sys.version_info[0]}.{sys.version_info[1]}"
    numpy = sys.modules.get("numpy")
    numpy_text = f", NumPy {numpy.__version__}" if numpy is not None else ""
    return f"Blender {'.'.join(map(str, blender))} ({python}{numpy_text})" if blender else f"{python}{numpy_text}"


def _fix(packages: str) -> str:
    if getattr(getattr(sys.modules.get("bpy"), "app", None), "binary_path", ""):  # the Blender executable
        return f"install {_build_for_this_blender()} from Preferences > Get Extensions > Install from Disk"
    return f"pip install {packages} (or, inside Blender, install {_build_for_this_blender()})"


def _bundled_site_packages():
    """The extensions' wheel folder on ``sys.path`` (Blender appends it), or None outside Blender."""
    tail = os.path.join(
        "extensions", ".local", "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages"
    )
    for entry in sys.path:
        if entry and os.path.normpath(entry).endswith(tail):
            return entry
    return None


@contextlib.contextmanager
def _bundled_first():
    """Import with the extensions' wheel folder first on ``sys.path``.

    Blender appends that folder, so a numba installed in Blender's own Python, the user's site
    folder or a venv on PYTHONPATH would win over the tested copy in the zip. Only the imports
    made here see the change; NumPy is imported before, so Blender's stays in use.
    """
    site = _bundled_site_packages()
    if site is None or sys.path[:1] == [site]:
        yield
        return
    sys.path.insert(0, site)
    try:
        yield
    finally:
        try:
            sys.path.remove(site)  # the inserted first copy; Blender's own entry stays where it was
        except ValueError:
            pass


def _numba_message(error: ImportError) -> str:
    text = " ".join(str(error).split())
    missing = getattr(error, "name", None)
    if isinstance(error, ModuleNotFoundError) and missing in ("numba", "llvmlite"):
        return (
            f"Selvedge cannot run its solver: {missing} is not installed for {_where()}. "
            f"The extension zip bundles numba {NUMBA} and llvmlite {LLVMLITE} per Blender Python; "
            f"{_fix(f'numba=={NUMBA} llvmlite=={LLVMLITE}')}."
        )
    found = re.search(r"Numba needs NumPy ([\d.]+) or (less|greater)", text)
    if found:
        numba_version = _installed_version("numba")
        return (
            f"Selvedge cannot run its solver: numba {numba_version or '(unknown version)'} does not support "
            f"NumPy {_numpy_version()} ({text}). Selvedge needs numba {NUMBA}, which supports NumPy "
            f"{NUMPY_RANGE}; {_fix(f'numba=={NUMBA} llvmlite=={LLVMLITE}')}."
        )
    if "llvmlite" in text or "LLVM" in text or missing == "llvmlite":
        return (
            f"Selvedge cannot run its solver: llvmlite {_installed_version('llvmlite') or ''} does not match "
            f"numba ({text}). Selvedge needs numba {NUMBA} with llvmlite {LLVMLITE}; "
            f"{_fix(f'numba=={NUMBA} llvmlite=={LLVMLITE}')}."
        )
    return (
        f"Selvedge cannot run its solver: numba does not load in {_where()} ({type(error).__name__}: {text}). "
        f"Selvedge needs numba {NUMBA} with llvmlite {LLVMLITE}; {_fix(f'numba=={NUMBA} llvmlite=={LLVMLITE}')}."
    )


def _numpy_version() -> str:
    numpy = sys.modules.get("numpy")
    return getattr(numpy, "__version__", "?")


def _installed_version(name: str):
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__version__", None):
        return module.__version__
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:
        return None


_SOLVER_READY = False


def require_solver() -> None:
    """Import NumPy, llvmlite and numba for the solver, or raise :class:`DependencyError`."""
    global _SOLVER_READY
    if _SOLVER_READY:
        return
    try:
        import numpy  # noqa: F401  (Blender's; imported before the bundled folder goes first)
    except ImportError as error:
        raise DependencyError(
            f"Selvedge cannot run its solver: NumPy does not load in {_where()} ({error}). "
            "Blender ships NumPy; in plain Python: pip install numpy"
        ) from None
    try:
        with _bundled_first():
            import numba  # noqa: F401  (imports and checks llvmlite itself)
    except ImportError as error:
        raise DependencyError(_numba_message(error)) from None
    _SOLVER_READY = True


def require_network() -> None:
    """Import onnxruntime for the learned-network modes, or raise :class:`DependencyError`."""
    try:
        with _bundled_first():
            import onnxruntime  # noqa: F401
    except ImportError as error:
        text = " ".join(str(error).split())
        if isinstance(error, ModuleNotFoundError) and getattr(error, "name", None) == "onnxruntime":
            reason = f"onnxruntime is not installed for {_where()}"
        else:
            reason = f"onnxruntime does not load in {_where()} ({text})"
        raise DependencyError(
            f"Selvedge's learned network needs onnxruntime {ONNXRUNTIME}: {reason}. "
            f"Set Network to Off to bake with the XPBD solver alone, or "
            f"{_fix(f'onnxruntime=={ONNXRUNTIME}')}."
        ) from None


# ----------------------------------------------------------------------------------------------
# First bake after install: Numba compiles the solver's kernels once per machine and source version
def solver_cache_folder() -> str:
    """Where the compiled kernels go: the user cache folder of ``solver/_numba_setup.py``."""
    from .solver import _numba_setup

    return _numba_setup.CACHE_DIR


def numba_cache_subfolders() -> list[str]:
    """The cache sub-folders Numba fills for the solver's kernels of *this* copy of the sources.

    Below the version folder, Numba keeps each source folder's kernels in ``<folder name>_<sha1 of
    its absolute path>``, named by its own ``_CacheLocator.get_suitable_cache_subpath``: the same
    Selvedge version installed at a second path (another Blender release's extension folder, a fresh
    clone) compiles again into sub-folders of its own.
    """
    require_solver()
    from numba.core.caching import _CacheLocator

    here = os.path.dirname(os.path.abspath(__file__))
    sources = [os.path.join(here, "solver", "kernels.py"), os.path.join(here, "solver", "collisions", "world.py")]
    return [os.path.join(solver_cache_folder(), _CacheLocator.get_suitable_cache_subpath(f)) for f in sources]


def solver_compiled_before() -> bool:
    """Whether this copy of the sources has compiled kernels in the cache: a Numba index file in
    each of its sub-folders (:func:`numba_cache_subfolders`), those of the solver and of its
    collisions. Another install of the same version at another path does not count: Numba
    compiles again for it."""
    for folder in numba_cache_subfolders():
        try:
            if not any(name.endswith(".nbi") for name in os.listdir(folder)):
                return False
        except OSError:  # not there yet
            return False
    return True


def compile_solver() -> float:
    """Compile (or load from the cache) the solver's kernels on a 4x4 grid; returns the seconds taken.

    The bake's kernels are typed by float64/int32 arrays whatever the mesh, so a tiny cloth with one
    collider of each analytic kind (what body proxies are) compiles the machine code the first frame
    of a real bake would; then two tiny cloths lying on each other over a mesh collider, stepped in a
    collision world, compile the mesh collider and the cloth contacts (detection, narrow phase,
    solve, crossing count, untangling), which a garment bake otherwise compiled inside its first frames (the
    demo's frame 2: 47 s of its reported ms/frame on a fresh clone). Those two are curved, large
    enough for a level of the stretch limit, and one is pulled by a pin, so that the dihedral
    bending, the levels' build and the partial re-detection compile here too: the demo's first
    frame took 10 s of them before (found by listing Numba's compile events during its bake).
    Rarer paths (a frame run again) still compile when first met, cached the same way. Measured:
    170 s cold with the machine 7x oversubscribed (load 15 on 2 cores), 7 s from the disk cache
    there (before the world was added); tens of milliseconds once loaded in the session.
    """
    import time

    require_solver()
    t0 = time.perf_counter()
    import numpy as np

    from .solver import Cloth, grid_mesh
    from .solver.collisions import Box, Capsule, Colliders, Plane, Sphere, TriangleMesh
    from .solver.collisions.world import CollisionWorld

    vertices, faces, uvs = grid_mesh(4, 4, origin=(0.0, 0.0, 0.1))
    proxies = [
        Plane(),
        Sphere(0.2, position=(0.5, 0.5, -0.15)),
        Capsule(0.05, 0.2, position=(0.2, 0.2, 0.0)),
        Box((0.1, 0.1, 0.1), position=(0.8, 0.8, 0.0)),
    ]
    colliders = Colliders(proxies, cloth_thickness=0.004)
    cloth = Cloth(vertices, faces, uvs=uvs, contact_handler=colliders)
    cloth.step()
    body_v, body_f, _ = grid_mesh(6, 6, 1.2, 1.2, origin=(-0.1, -0.1, 0.0))
    body = TriangleMesh(body_v, body_f, name="warm-up body")
    # Two curved 6 x 6 layers (a curved rest shape bends by the dihedral model, and 36 vertices make
    # a level of the stretch limit's hierarchy, as a garment's do), the upper one's corner pinned and
    # pulled up a little faster each frame, so that some of its vertices leave their paths and the
    # candidate lists are re-detected in part, as they are while a garment moves.
    curved, curved_faces, _ = grid_mesh(6, 6, 0.5, 0.5)
    curved[:, 2] = 0.2 * (curved[:, 0] - 0.25) ** 2 + 0.01
    pins = np.zeros(curved.shape[0])
    pins[-1] = 1.0
    layers = [
        Cloth(curved + (0.0, 0.0, 0.003 * k), curved_faces, contact_handler=Colliders([body]), pin_weights=pins * k)
        for k in range(2)
    ]
    world = CollisionWorld(layers, count_intersections=True)
    corner = layers[1].rest_positions[layers[1].pinned_vertices]
    for frame in range(4):
        world.step([None, corner + (0.0, 0.0, 0.002 * frame * frame)])
    # a frame that ends crossed is untangled (solver/collisions/untangle.py): a vertex of the upper
    # layer pushed through the lower one, on a copy
    from .solver.collisions.intersections import one_group
    from .solver.collisions.untangle import untangle

    crossed = world.x.copy()
    crossed[world.offsets[1] + 14, 2] -= 0.05
    untangle(crossed, world.mesh.tris, world.inv_mass, one_group(world.mesh.tris.shape[0]), 0.002, 2)
    return time.perf_counter() - t0


def prepare_bake(report, network_mode: str = "OFF", show_status=None, log=print):
    """What an operator runs before a bake: the packages loaded (:class:`DependencyError` when not)
    and, on the first bake after install, the Numba compile announced and done.

    ``report`` is the operator's ``self.report``. Blender shows an operator's reports once it
    returns, so the announcement also goes, before the compile blocks, to ``show_status``
    (interactive runs: the status bar) and to ``log`` (the console, a ``blender -b`` log; None for
    none). Returns the compile's seconds, or None when the cache already held the kernels.
    """
    require_solver()
    if network_mode != "OFF":
        require_network()
    if solver_compiled_before():
        return None
    message = (
        "Selvedge: first bake on this machine: compiling the solver with Numba (once per machine, "
        f"Selvedge version and install folder, about two minutes on two cores; cached in {solver_cache_folder()})"
    )
    report({"INFO"}, message)
    if show_status is not None:
        show_status(message)
    if log is not None:
        log(message)
        sys.stdout.flush()
    seconds = compile_solver()
    report({"INFO"}, f"Selvedge: solver compiled in {seconds:.1f} s; later bakes load it from the cache")
    return seconds
