"""Selvedge: XPBD cloth for Blender. Holds imports and register/unregister only.

Heavy modules (numba, the solver, onnxruntime) are imported lazily by the operators, so
enabling the add-on is fast and importing this package outside Blender does not need bpy.
"""


def register():
    from . import operators, panels
    from .operators import properties

    properties.register()
    operators.register()
    panels.register()


def unregister():
    from . import operators, panels
    from .operators import properties

    panels.unregister()
    operators.unregister()
    properties.unregister()
