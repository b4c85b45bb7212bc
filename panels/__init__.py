"""Blender panels: thin, no physics here. Filled in by the Blender-extension issue."""

CLASSES: list = []


def register():
    import bpy

    for cls in CLASSES:
        bpy.utils.register_class(cls)


def unregister():
    import bpy

    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
