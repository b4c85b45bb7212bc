"""Ending a Python process that imported the ``bpy`` module (Blender as a Python module).

The 4.x bpy modules do not survive the interpreter's normal shutdown once an add-on registered
classes (measured here with the pip modules on Python 3.11; registering Selvedge's property
groups alone is enough):

- 4.2 segfaults (exit status 139): a C++ static destructor of the SpaceType registry calls
  ``bpy_class_free`` -> ``PyGILState_Ensure`` after Python is finalized, even with every class
  unregistered again;
- 4.5 deadlocks: the main thread waits in ``GlobalState::~GlobalState()`` /
  ``pthread_cond_destroy`` on a second thread stuck in ``delayed_close_thread_run()``.

Both happen after the work is done and reported, so such a process leaves with
:func:`exit_process`: Selvedge unregistered, ``atexit`` handlers run, output flushed, then
``os._exit(status)``, which skips the C++ teardown. The 5.x modules and Blender itself (the
``blender`` executable, where Python never owns the process) exit normally through
``sys.exit``. Every script that imports bpy and the command line (``cli.py``) end through here,
so the knowledge lives in one place.
"""

import atexit
import os
import sys

#: bpy module releases whose interpreter shutdown crashes or hangs (every release before 5.0
#: that Selvedge supports: 4.2 and 4.5 measured, 4.3/4.4 share their teardown code).
BROKEN_SHUTDOWN_BEFORE = (5, 0)


def bpy_module_version():
    """``(major, minor)`` of the imported bpy *module*, or None (no bpy, or inside the Blender executable)."""
    bpy = sys.modules.get("bpy")
    app = getattr(bpy, "app", None)
    if app is None or getattr(app, "binary_path", ""):  # the blender executable sets binary_path
        return None
    return tuple(app.version[:2])


def needs_hard_exit() -> bool:
    version = bpy_module_version()
    return version is not None and version < BROKEN_SHUTDOWN_BEFORE


def _unregister_selvedge():
    """Unregister every loaded Selvedge package (``selvedge``, ``selvedge_cli``, ``bl_ext.*.selvedge``)
    whose classes are registered, so no Python callback is left for Blender's teardown."""
    bpy = sys.modules.get("bpy")
    if bpy is None or not hasattr(getattr(bpy, "types", None), "Scene") or not hasattr(bpy.types.Scene, "selvedge"):
        return
    here = os.path.normcase(os.path.join(os.path.dirname(os.path.abspath(__file__)), "__init__.py"))
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and os.path.normcase(os.path.abspath(path)) == here and hasattr(module, "unregister"):
            try:
                module.unregister()
            except Exception:
                pass
            if not hasattr(bpy.types.Scene, "selvedge"):
                return


def exit_process(status: int = 0):
    """End the process with ``status``; on the 4.x bpy modules without their crashing teardown."""
    status = int(status or 0)
    if not needs_hard_exit():
        sys.exit(status)
    _unregister_selvedge()
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(status)
