"""One base for the long operators (bakes, preview): a synchronous path and a modal one on top.

A *job* is a plain object with ``step() -> bool`` (one frame; True while frames remain),
``finish() -> result`` and ``cancel()``; it knows nothing of Blender's UI, so scripts and tests
drive it directly. :class:`ModalJobOperator` gives an operator

* ``execute``: the synchronous path (scripts, ``blender -b``): every step, then ``finish``;
* ``invoke``: where there is a window, a :class:`JobModal` driver: one step per timer event, the
  job's status text in the status bar and the 3D view's header, Esc to stop between frames;
  headless it falls back to ``execute``.

Only :data:`~.errors.EXPECTED_ERRORS` become reports; anything else is a bug and propagates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import bpy
from bpy.types import Operator

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import OperatorReturnItems

from .errors import EXPECTED_ERRORS, failure_message


def has_ui(context) -> bool:
    """Whether there is a window to put timers and text in (the bpy module has a window object, but
    no event loop: ``bpy.app.background``)."""
    return not bpy.app.background and getattr(context, "window", None) is not None


class JobModal:
    """Drives a job from a modal operator: one step per timer event, status text, Esc.

    ``report(level set, message)`` is the operator's ``report``. Every UI call is skipped where
    there is no window (headless), so the event logic can be driven with plain events. Subclasses
    say what the status line reads (:meth:`status_text`), what Esc does (:meth:`escape`) and which
    other events go on to Blender (:meth:`other_event`).
    """

    failure_prefix = "Selvedge failed"

    def __init__(self, job, report, summary: Callable[[Any], str] = str):
        self.job, self.report, self.summary = job, report, summary
        self.timer = None

    # -- what subclasses say --------------------------------------------------------------------
    def status_text(self) -> str:
        return ""

    def escape(self, context) -> set:
        """Esc: cancel the job (nothing kept)."""
        self.job.cancel()
        self.end(context)
        self.report({"WARNING"}, "Selvedge job cancelled")
        return {"CANCELLED"}

    def other_event(self, event) -> set:
        return {"PASS_THROUGH"}

    # -- the event loop -------------------------------------------------------------------------
    def start(self, context, operator) -> None:
        """Add the timer and the modal handler (``operator``'s ``modal`` delegates to :meth:`modal`)."""
        if has_ui(context):
            self.timer = context.window_manager.event_timer_add(0.001, window=context.window)
            context.window_manager.modal_handler_add(operator)
        self._text(context, self.status_text())

    @staticmethod
    def _text(context, text) -> None:
        if not has_ui(context):
            return
        if context.workspace is not None:
            context.workspace.status_text_set(text)
        area = context.area
        if area is not None and area.type == "VIEW_3D":
            area.header_text_set(text)
        screen = context.screen
        for a in getattr(screen, "areas", ()):
            if a.type == "VIEW_3D":
                a.tag_redraw()

    def end(self, context) -> None:
        if self.timer is not None:
            context.window_manager.event_timer_remove(self.timer)
            self.timer = None
        self._text(context, None)

    def fail(self, context, error) -> set:
        self.end(context)
        self.report({"ERROR"}, failure_message(self.failure_prefix, error))
        return {"CANCELLED"}

    def modal(self, context, event) -> set:
        if event.type == "ESC" and event.value != "RELEASE":
            try:
                return self.escape(context)
            except EXPECTED_ERRORS as error:
                return self.fail(context, error)
        if event.type != "TIMER":
            return self.other_event(event)
        try:
            more = self.job.step()
            self._text(context, self.status_text())
            if more:
                return {"RUNNING_MODAL"}
            result = self.job.finish()
        except EXPECTED_ERRORS as error:
            return self.fail(context, error)
        self.end(context)
        self.report({"INFO"}, self.summary(result))
        return {"FINISHED"}


class ModalJobOperator(Operator):
    """Base of the long operators: ``execute`` runs the job synchronously, ``invoke`` modally.

    Subclasses give ``bl_idname``/``bl_label``, :meth:`make_job`, :meth:`summary`, and
    ``modal_class`` (a :class:`JobModal` subclass) with ``failure_prefix``.
    """

    bl_options = {"REGISTER", "UNDO"}
    modal_class = JobModal

    def make_job(self, context):
        raise NotImplementedError

    def summary(self, result) -> str:
        raise NotImplementedError

    def prepare(self, context, interactive: bool = False) -> None:
        """Before the job: the solver's packages loaded (a :class:`~..dependencies.DependencyError`,
        one readable report, when not) and the first run's Numba compile announced (the report, and the
        status bar when interactive) and done."""
        from ..dependencies import prepare_bake

        def show_status(message):
            JobModal._text(context, message)
            bpy.ops.wm.redraw_timer(type="DRAW_WIN_SWAP", iterations=1)  # painted before the compile blocks

        scene = context.scene
        network_mode = scene.selvedge.network_mode if scene is not None else "OFF"
        prepare_bake(self.report, network_mode, show_status if interactive else None)

    def execute(self, context) -> set[OperatorReturnItems]:
        try:
            self.prepare(context)
            job = self.make_job(context)
            while job.step():
                pass
            result = job.finish()
        except EXPECTED_ERRORS as error:
            self.report({"ERROR"}, failure_message(self.modal_class.failure_prefix, error))
            return {"CANCELLED"}
        self.report({"INFO"}, self.summary(result))
        return {"FINISHED"}

    def invoke(self, context, event) -> set[OperatorReturnItems]:
        if not has_ui(context):
            return self.execute(context)
        try:
            self.prepare(context, interactive=True)
            job = self.make_job(context)
        except EXPECTED_ERRORS as error:
            JobModal._text(context, None)
            self.report({"ERROR"}, failure_message(self.modal_class.failure_prefix, error))
            return {"CANCELLED"}
        self._modal = self.modal_class(job, self.report, self.summary)
        self._modal.start(context, self)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        return self._modal.modal(context, event)
