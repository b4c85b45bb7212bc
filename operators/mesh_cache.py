"""The playback contract of a Selvedge PC2 cache: how a Mesh Cache modifier must be set to play it.

A Selvedge PC2 holds object-space positions (no axis change), one sample per scene frame starting
at the bake's first frame, meant to replace the mesh's positions (not add to them), and the
modifier sits last in the stack so it sees the final vertex order. The bake
(:mod:`.bake.cache`) and the farm's render step (``farm/render_frames.py``, which runs with
Blender alone: ``farm/openjd/embed.py`` copies this file beside it) both set the modifier here.

Imports nothing: it takes Blender's objects and modifiers as given.
"""

MODIFIER_NAME = "Selvedge Cache"


def new_cache_modifier(obj):
    """A new Mesh Cache modifier on ``obj``, pinned last in the stack where Blender can (4.2+)."""
    mod = obj.modifiers.new(MODIFIER_NAME, "MESH_CACHE")
    if hasattr(mod, "use_pin_to_last"):
        mod.use_pin_to_last = True
    return mod


def configure_mesh_cache(mod, filepath: str, frame_start: int) -> None:
    """Set a Mesh Cache modifier to play the PC2 ``filepath`` whose first sample is ``frame_start``."""
    mod.cache_format = "PC2"
    mod.filepath = filepath
    mod.frame_start = frame_start
    mod.frame_scale = 1.0
    mod.time_mode = "FRAME"
    mod.play_mode = "SCENE"
    mod.deform_mode = "OVERWRITE"
    mod.interpolation = "LINEAR"
    mod.factor = 1.0
    mod.forward_axis, mod.up_axis = "POS_Y", "POS_Z"  # PC2 holds object-space positions: no axis change
    mod.show_viewport = mod.show_render = True
