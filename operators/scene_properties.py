"""Selvedge's per-scene data, ``Scene.selvedge``: the solver's budget (substeps, iterations, solve
mode), the learned network, the layer mass scale, the frame range and the cache folder.

Registered with the object settings by :mod:`.properties` (``CLASSES``, ``register``); turned into
solver options by :mod:`.scene_to_solver` (no Blender there).
"""

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, StringProperty
from bpy.types import PropertyGroup

from .scene_to_solver import SOLVE_MODES

# Blender 4.5+ warns when a "//" path is set on a path property that does not declare support for
# blend-relative paths; 4.2 does not know the option.
_BLEND_RELATIVE_PATH: set = {"PATH_SUPPORTS_BLEND_RELATIVE"} if bpy.app.version >= (4, 5, 0) else set()

SOLVE_ITEMS = (
    (
        "auto",
        "Auto",
        "Coloured Gauss-Seidel in up to 4 mesh blocks fixed by the mesh, sharing up to 4 cores: the same "
        "bake on every machine. Serial for small cloths, for cloths that collide with each other or themselves, "
        "and where the blocks would not run in parallel",
    ),
    ("serial", "Serial", "Gauss-Seidel in one thread: deterministic, bit-identical bakes"),
    (
        "colored",
        "Coloured Parallel",
        "Gauss-Seidel on all cores: one mesh block per core, each in serial order, "
        "then the constraints across the cuts",
    ),
    ("jacobi", "Jacobi", "Averaged Jacobi updates on all cores: parallel, needs more iterations"),
)
assert tuple(i[0] for i in SOLVE_ITEMS) == SOLVE_MODES


class SelvedgeSceneSettings(PropertyGroup):
    substeps: IntProperty(
        name="Substeps",
        description="Solver substeps per frame (the main quality knob)",
        default=10,
        min=1,
        soft_max=100,
    )
    iterations: IntProperty(
        name="Iterations", description="Constraint passes per substep", default=1, min=1, soft_max=20
    )
    force_updates_per_frame: IntProperty(
        name="Field Updates",
        description="Evaluations of the force fields and aerodynamics per frame, held in between "
        "(raise for strong Flow, stiff Harmonic fields or light, draggy cloth)",
        default=1,
        min=1,
        soft_max=10,
    )
    solve_mode: EnumProperty(
        name="Solve Mode", description="How constraints are solved", items=SOLVE_ITEMS, default="auto"
    )
    stretch_refinements: IntProperty(
        name="Stretch Refinements",
        description="A frame that ends stretched past Refine Above is run again with twice the substeps, "
        "up to this many times (0: off): a hard landing on a body stretches far less, paid for only in "
        "those frames. A cloth resting on a collider can be set moving again by such a frame",
        default=0,
        min=0,
        max=4,
    )
    refine_stretch_above: FloatProperty(
        name="Refine Above",
        description="Stretch beyond the fabric's limit (95th percentile over the edges, in %) that sends "
        "a frame back for more substeps",
        default=5.0,
        min=0.0,
        soft_max=20.0,
        subtype="PERCENTAGE",
    )
    network_mode: EnumProperty(
        name="Learned Network",
        description="How the learned network assists the solver",
        items=(
            ("OFF", "Off", "Plain XPBD"),
            (
                "ACCELERATION",
                "Acceleration",
                "Each frame the network predicts a bounded acceleration residual added before integration; "
                "XPBD then projects (pins, stretch, contacts stay exact)",
            ),
            (
                "RESIDUAL",
                "Residual",
                "XPBD runs the frame, the network corrects it toward the expensive teacher budget, "
                "then a cheap projection runs again",
            ),
        ),
        default="OFF",
    )
    layer_mass_scale: FloatProperty(
        name="Layer Mass Scale",
        description="In a contact between two cloth layers the inner (lower Layer) one acts this many "
        "times heavier, so outer layers give way (1: off)",
        default=4.0,
        min=1.0,
        soft_max=20.0,
    )
    use_scene_frame_range: BoolProperty(
        name="Use Scene Frame Range", description="Bake the scene's frame range", default=True
    )
    frame_start: IntProperty(name="Start", description="First baked frame (the rest pose)", default=1)
    frame_end: IntProperty(name="End", description="Last baked frame", default=250)
    cache_folder: StringProperty(
        name="Cache Folder",
        description="Where point caches and sidecars are written",
        default="//selvedge_cache",
        subtype="DIR_PATH",
        options=_BLEND_RELATIVE_PATH,
    )
