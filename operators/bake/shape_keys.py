"""Bake to shape keys: one shape key per frame with a keyframed hat-function value; freeing them.

Frames are kept in memory and the object is only edited by :meth:`ShapeKeyBake.finish`; what a
bake added to the animation data (animation data, action, slot in Blender 4.4+) is recorded on the
object, so :func:`free_shape_keys` removes exactly that and nothing the user made.
"""

from __future__ import annotations

import json

import bpy
import numpy as np

from ..errors import BakeError
from ..scene_to_solver import frame_range
from .scene_read import baked_shape_key_names
from .simulation import Simulation, check_objects

SHAPE_KEY_PREFIX = "Selvedge"


def _fcurves(id_data):
    """The F-curves animating ``id_data`` (slotted actions in 4.4+, ``action.fcurves`` before)."""
    anim = id_data.animation_data
    if anim is None or anim.action is None:
        return None
    try:
        from bpy_extras.anim_utils import action_get_channelbag_for_slot

        bag = action_get_channelbag_for_slot(anim.action, anim.action_slot)
        return bag.fcurves if bag is not None else None
    except (ImportError, AttributeError):
        return anim.action.fcurves


def _animation_state(id_data) -> dict:
    """Which animation data, action and slot ``id_data`` uses now (slots: Blender 4.4+)."""
    anim = id_data.animation_data
    action = anim.action if anim is not None else None
    slot = getattr(anim, "action_slot", None) if action is not None else None
    return {
        "animdata": anim is not None,
        "action": action.name if action else "",
        "slot": slot.identifier if slot is not None else "",
        "actions": [a.name for a in bpy.data.actions],
        "slots": [s.identifier for s in getattr(action, "slots", ())] if action else [],
    }


def _animation_added(before: dict, id_data) -> dict:
    """What keyframing added: animation data, a new action, or a new slot in a shared action."""
    after = _animation_state(id_data)
    return {
        "animdata_created": not before["animdata"],
        "action": after["action"],
        "action_created": bool(after["action"]) and after["action"] not in before["actions"],
        "slot": after["slot"],
        "slot_created": bool(after["slot"])
        and after["slot"] not in before["slots"]
        and after["action"] in before["actions"],
    }


def _remove_added_animation(id_data, added: dict) -> None:
    """Undo :func:`_animation_added` once our F-curves are gone (only parts that are now empty)."""
    anim = id_data.animation_data
    if anim is None or not added:
        return
    fcurves = _fcurves(id_data)
    if fcurves is not None and len(fcurves):
        return  # someone else animates this data too: keep it
    action = bpy.data.actions.get(added["action"]) if added["action"] else None
    if added["animdata_created"]:
        id_data.animation_data_clear()
    elif action is not None and anim.action == action:
        anim.action = None
    if action is None:
        return
    if added["action_created"] and action.users == 0:
        bpy.data.actions.remove(action)
    elif added["slot_created"] and hasattr(action, "slots"):
        slot = action.slots.get(added["slot"])
        if slot is not None:
            action.slots.remove(slot)


class ShapeKeyBake:
    """A shape-key bake in progress: :meth:`step` until False, then :meth:`finish`; or :meth:`cancel`.

    Frames are kept in memory; the object is only edited by :meth:`finish`.
    """

    def __init__(self, context, log=print):
        self.context, self.log = context, log
        scene = context.scene
        objects = check_objects(scene)
        first, last = frame_range(scene.selvedge, scene.frame_start, scene.frame_end)
        self.samples = [np.empty((last - first + 1, len(o.data.vertices), 3), dtype=np.float32) for o in objects]
        self.sim = Simulation(context, self._store, log)

    def _store(self, index, sample, positions):
        self.samples[index][sample] = positions

    def step(self) -> bool:
        return self.sim.step()

    def cancel(self) -> None:
        self.sim.close()

    def finish(self) -> dict:
        sim = self.sim
        if not sim.finished:
            raise BakeError("the bake is not finished")
        first, last = sim.first, sim.last
        result = {}
        for run, frames in zip(sim.runs, self.samples):
            result[run.obj.name] = write_shape_keys(run.obj, frames, first, last, self.log)
        self.context.view_layer.update()
        self.log(f"Selvedge: baked {len(sim.runs)} object(s) to shape keys, frames {first}-{last}")
        return result


def write_shape_keys(obj, frames, first, last, log) -> list[str]:
    """Replace the object's previous shape-key bake by one key per frame of ``frames`` (F, N, 3), ``first``..``last``."""
    free_shape_keys(obj)
    if obj.data.shape_keys is None:
        obj.shape_key_add(name="Basis", from_mix=False)
        obj.selvedge.bake_created_basis = True
    key = obj.data.shape_keys
    animation_before = _animation_state(key)
    names = []
    for sample, frame in enumerate(range(first, last + 1)):
        block = obj.shape_key_add(name=f"{SHAPE_KEY_PREFIX}.{frame:04d}", from_mix=False)
        block.data.foreach_set("co", frames[sample].ravel())
        names.append(block.name)
        # A hat function: 1 at its frame, 0 at the neighbours (none before the first / after the last
        # frame, so the first and last states hold outside the range).
        for f, value in ((frame - 1, 0.0), (frame, 1.0), (frame + 1, 0.0)):
            if first <= f <= last:
                block.value = value
                block.keyframe_insert("value", frame=f)
        block.value = 0.0
    obj.selvedge.bake_shape_keys = json.dumps(names)
    obj.selvedge.bake_shape_key_animation = json.dumps(_animation_added(animation_before, key))
    fcurves = _fcurves(key)
    wanted = {f'key_blocks["{n}"].value' for n in names}
    for fc in fcurves or ():
        if fc.data_path in wanted:
            for point in fc.keyframe_points:
                point.interpolation = "LINEAR"
    if any(m.show_viewport and m.type != "MESH_CACHE" for m in obj.modifiers):
        log(f"Selvedge warning: {obj.name} has modifiers after its shape keys; they deform the baked shapes again")
    return names


def bake_shape_keys(context, log=print) -> dict:
    """Bake every cloth object to one shape key per frame with keyframed values.

    Existing shape keys are kept; a previous Selvedge shape-key bake is replaced. Returns
    ``{object name: [shape key names]}``.
    """
    job = ShapeKeyBake(context, log)
    while job.step():
        pass
    return job.finish()


def free_shape_keys(obj) -> int:
    """Remove the shape keys, F-curves and action a shape-key bake created; returns how many keys went."""
    names = baked_shape_key_names(obj)
    key = obj.data.shape_keys if obj.type == "MESH" else None
    removed = 0
    if key is not None and names:
        fcurves = _fcurves(key)
        paths = {f'key_blocks["{n}"].value' for n in names}
        if fcurves is not None:
            for fc in [fc for fc in fcurves if fc.data_path in paths]:
                fcurves.remove(fc)
        for name in names:
            block = key.key_blocks.get(name)
            if block is not None:
                obj.shape_key_remove(block)
                removed += 1
        raw = obj.selvedge.bake_shape_key_animation
        _remove_added_animation(key, json.loads(raw) if raw else {})
    key = obj.data.shape_keys if obj.type == "MESH" else None
    if obj.selvedge.bake_created_basis and key is not None and len(key.key_blocks) == 1:
        obj.shape_key_clear()
    obj.selvedge.bake_shape_keys = ""
    obj.selvedge.bake_created_basis = False
    obj.selvedge.bake_shape_key_animation = ""
    return removed
