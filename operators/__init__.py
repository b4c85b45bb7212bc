"""Blender operators: thin, no physics here. Each module exposes CLASSES; they are joined here.

Modules that import ``bpy`` are imported inside ``register`` so that the Blender-free helpers
(``scene_to_solver``) can be imported and tested without Blender.
"""


def _classes():
    from . import bake_ops, overlay, preview_ops, setup_ops

    return (*setup_ops.CLASSES, *bake_ops.CLASSES, *preview_ops.CLASSES, *overlay.CLASSES)


def register():
    import bpy

    for cls in _classes():
        bpy.utils.register_class(cls)


def unregister():
    import bpy

    for cls in reversed(_classes()):
        bpy.utils.unregister_class(cls)


def __getattr__(name):
    """``operators.CLASSES``: every operator class, in registration order (imported on first use)."""
    if name == "CLASSES":
        return _classes()
    raise AttributeError(name)
