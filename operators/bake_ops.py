"""Bake operators: thin wrappers over :mod:`.bake` (jobs run by :class:`.modal_job.ModalJobOperator`)."""

from typing import TYPE_CHECKING

from bpy.types import Operator

from .errors import EXPECTED_ERRORS, failure_message
from .modal_job import JobModal, ModalJobOperator

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import OperatorReturnItems


def poll_any_cloth(cls, context) -> bool:
    """The poll of every operator that simulates: the scene has a cloth object (else says so)."""
    scene = context.scene
    if scene is None or not any(o.selvedge.role == "CLOTH" for o in scene.objects):
        cls.poll_message_set("No object has the Selvedge role 'Cloth'; mark a mesh as cloth first")
        return False
    return True


class BakeModal(JobModal):
    """A bake's modal run: progress in the status bar, Esc cancels (a cancelled bake writes nothing)."""

    failure_prefix = "Selvedge bake failed"

    def status_text(self) -> str:
        sim = self.job.sim
        return (
            f"Selvedge: frame {sim.first + sim.done} of {sim.last}, {sim.last_ms:.0f} ms/frame, "
            f"max strain {100 * sim.last_strain:.1f}%  (Esc to cancel)"
        )

    def escape(self, context) -> set:
        self.job.cancel()
        self.end(context)
        self.report({"WARNING"}, "Selvedge bake cancelled; nothing was written")
        return {"CANCELLED"}


class _BakeOperator(ModalJobOperator):
    """Synchronous ``execute`` (scripts, ``blender -b``); ``invoke`` adds a modal run with a progress
    bar, a status line and Esc to cancel (a cancelled bake writes nothing)."""

    modal_class = BakeModal

    @classmethod
    def poll(cls, context):
        return poll_any_cloth(cls, context)


class SELVEDGE_OT_bake_cache(_BakeOperator):
    """Simulate every Selvedge cloth object and write a PC2 point cache per object, played by a Mesh Cache modifier"""

    bl_idname = "selvedge.bake_cache"
    bl_label = "Bake to Cache"

    def make_job(self, context):
        from .bake import CacheBake

        return CacheBake(context)

    def summary(self, result):
        return f"Selvedge: baked {len(result)} object(s) to PC2 caches"


class SELVEDGE_OT_bake_shape_keys(_BakeOperator):
    """Simulate every Selvedge cloth object and store one keyframed shape key per frame"""

    bl_idname = "selvedge.bake_shape_keys"
    bl_label = "Bake to Shape Keys"

    def make_job(self, context):
        from .bake import ShapeKeyBake

        return ShapeKeyBake(context)

    def summary(self, result):
        return f"Selvedge: baked {sum(len(v) for v in result.values())} shape keys on {len(result)} object(s)"


class SELVEDGE_OT_free_bake(Operator):
    """Remove what Selvedge bakes created (cache modifier, cache files, shape keys) and nothing else"""

    bl_idname = "selvedge.free_bake"
    bl_label = "Free Bake"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        from .bake import has_bake

        if context.scene is None or not any(has_bake(o) for o in context.scene.objects):
            cls.poll_message_set("Nothing baked by Selvedge in this scene")
            return False
        return True

    def execute(self, context) -> "set[OperatorReturnItems]":
        from .bake import free_bake, has_bake

        freed = []
        if context.scene is None:  # poll() rules it out
            return {"CANCELLED"}
        try:
            for obj in context.scene.objects:
                if has_bake(obj):
                    freed += free_bake(obj)
        except EXPECTED_ERRORS as error:
            self.report({"ERROR"}, failure_message(BakeModal.failure_prefix, error))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Selvedge: freed {len(freed)} item(s)")
        return {"FINISHED"}


CLASSES = (SELVEDGE_OT_bake_cache, SELVEDGE_OT_bake_shape_keys, SELVEDGE_OT_free_bake)
