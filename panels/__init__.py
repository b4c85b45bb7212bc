"""Blender panels: thin, no physics here. Each module exposes CLASSES; they are joined here.

Modules that import ``bpy`` are imported inside ``register`` (see ``operators/__init__.py``).
"""


def _classes():
    from . import sidebar

    return (*sidebar.CLASSES,)


def register():
    import bpy

    for cls in _classes():
        bpy.utils.register_class(cls)


def unregister():
    import bpy

    for cls in reversed(_classes()):
        bpy.utils.unregister_class(cls)


def __getattr__(name):
    """``panels.CLASSES``: every panel class, in registration order (imported on first use)."""
    if name == "CLASSES":
        return _classes()
    raise AttributeError(name)
