"""Bake operators: thin wrappers over :mod:`.bake` that turn errors into reports."""
import bpy
from bpy.types import Operator


def _any_cloth(context) -> bool:
    scene = context.scene
    return scene is not None and any(o.selvedge.role == "CLOTH" for o in scene.objects)


def _failure_message(error: BaseException) -> str:
    if isinstance(error, OSError):
        return f"Selvedge bake failed: {error.strerror or error} ({error.filename or 'file'})"
    return f"Selvedge bake failed: {error}"


def _expected_errors():
    """The errors a bake reports as one message. Importing the solver's error classes imports numba:
    when that fails, the dependency error (already raised and reported) is the one to catch."""
    from ..dependencies import DependencyError

    try:
        from ..solver.errors import SelvedgeError
        from .bake import BakeError
    except ImportError:
        return (DependencyError, OSError, ValueError)
    return (DependencyError, BakeError, SelvedgeError, OSError, ValueError)


def _prepare(operator, context, interactive: bool = False):
    """Packages loaded (one readable DependencyError otherwise); the first bake's compile announced."""
    from ..dependencies import prepare_bake

    def show_status(message):
        context.workspace.status_text_set(message)
        bpy.ops.wm.redraw_timer(type="DRAW_WIN_SWAP", iterations=1)  # paint it before the compile blocks

    prepare_bake(operator.report, context.scene.selvedge.network_mode, show_status if interactive else None)


class _BakeOperator:
    """Synchronous ``execute`` (scripts, ``blender -b``); ``invoke`` adds a modal run with a progress
    bar, a status line and Esc to cancel (a cancelled bake writes nothing)."""

    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        if not _any_cloth(context):
            cls.poll_message_set("No object has the Selvedge role 'Cloth'; mark a mesh as cloth first")
            return False
        return True

    def make_job(self, context):
        raise NotImplementedError

    def summary(self, result) -> str:
        raise NotImplementedError

    def execute(self, context):
        try:
            _prepare(self, context)
            job = self.make_job(context)
            while job.step():
                pass
            result = job.finish()
        except _expected_errors() as error:
            self.report({"ERROR"}, _failure_message(error))
            return {"CANCELLED"}
        self.report({"INFO"}, self.summary(result))
        return {"FINISHED"}

    def invoke(self, context, event):
        if bpy.app.background or context.window is None:
            return self.execute(context)
        try:
            _prepare(self, context, interactive=True)
            self._job = self.make_job(context)
        except _expected_errors() as error:
            context.workspace.status_text_set(None)
            self.report({"ERROR"}, _failure_message(error))
            return {"CANCELLED"}
        wm = context.window_manager
        self._timer = wm.event_timer_add(0.001, window=context.window)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def _end(self, context):
        context.window_manager.event_timer_remove(self._timer)
        context.workspace.status_text_set(None)

    def modal(self, context, event):
        if event.type == "ESC":
            self._job.cancel()
            self._end(context)
            self.report({"WARNING"}, "Selvedge bake cancelled; nothing was written")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        try:
            more = self._job.step()
            sim = self._job.sim
            context.workspace.status_text_set(
                f"Selvedge: frame {sim.first + sim.done} of {sim.last}, {sim.last_ms:.0f} ms/frame, "
                f"max strain {100 * sim.last_strain:.1f}%  (Esc to cancel)")
            if more:
                return {"RUNNING_MODAL"}
            result = self._job.finish()
        except _expected_errors() as error:
            self._end(context)
            self.report({"ERROR"}, _failure_message(error))
            return {"CANCELLED"}
        self._end(context)
        self.report({"INFO"}, self.summary(result))
        return {"FINISHED"}


class SELVEDGE_OT_bake_cache(_BakeOperator, Operator):
    """Simulate every Selvedge cloth object and write a PC2 point cache per object, played by a Mesh Cache modifier"""

    bl_idname = "selvedge.bake_cache"
    bl_label = "Bake to Cache"

    def make_job(self, context):
        from .bake import CacheBake

        return CacheBake(context)

    def summary(self, result):
        return f"Selvedge: baked {len(result)} object(s) to PC2 caches"


class SELVEDGE_OT_bake_shape_keys(_BakeOperator, Operator):
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

    def execute(self, context):
        from .bake import free_bake, has_bake

        freed = []
        try:
            for obj in context.scene.objects:
                if has_bake(obj):
                    freed += free_bake(obj)
        except OSError as error:
            self.report({"ERROR"}, _failure_message(error))
            return {"CANCELLED"}
        self.report({"INFO"}, f"Selvedge: freed {len(freed)} item(s)")
        return {"FINISHED"}


CLASSES = (SELVEDGE_OT_bake_cache, SELVEDGE_OT_bake_shape_keys, SELVEDGE_OT_free_bake)
