"""Simulate (preview): watch the cloth simulate frame by frame, with Esc to stop.

What the preview writes, and why: it is a shape-key bake (:class:`.bake.ShapeKeyBake`) that
shows itself while it runs. An artist presses Simulate to *see* the cloth, then scrubs the
timeline, plays it back, tweaks a slider and simulates again; so the result has to stay in the
scene, play back without Selvedge, work in a .blend that was never saved (a PC2 cache needs a
cache folder, by default next to the saved file) and be removed by Free Bake like any other
bake. Keyed shape keys do all of that; a finished preview is exactly what Bake to Shape Keys
makes (it replaces a previous shape-key bake, other shape keys are kept).

While it runs, each object carries one temporary shape key, "Selvedge Preview", holding the
last simulated frame; the scene is at that frame, so the viewport shows the cloth as it is being
computed (the key is muted while the next frame's pins are read, so it never feeds back into the
simulation). The strain overlay (:mod:`.overlay`) is fed every frame too.

Esc stops between frames, as the user chose with ``on_cancel``:

* ``KEEP`` (default, as Blender's own cloth keeps the frames of an interrupted bake): the frames
  done so far become keyed shape keys, first frame to the last one simulated;
* ``REVERT``: the scene is left as it was before: the temporary key (and a Basis it had to add)
  is removed, the frame, earlier bakes and the overlay are restored, the mesh is untouched.

Under ``blender -b`` (or called from a script), ``execute`` runs every frame synchronously and
prints progress; ``invoke`` adds the modal run with the progress bar and the status/header text.
"""

from __future__ import annotations

import time

import bpy
from bpy.props import EnumProperty

from . import overlay
from .bake_ops import poll_any_cloth
from .modal_job import JobModal, ModalJobOperator

LIVE_KEY = "Selvedge Preview"
ON_CANCEL_ITEMS = (
    ("KEEP", "Keep Frames", "On Esc, keep the frames simulated so far as keyed shape keys"),
    ("REVERT", "Revert", "On Esc, leave the scene as it was before the preview"),
)


class LiveKey:
    """A temporary shape key that shows the latest preview frame on one object."""

    def __init__(self, obj):
        self.obj = obj
        self.created_basis = obj.data.shape_keys is None
        self.active_index = obj.active_shape_key_index
        if self.created_basis:
            obj.shape_key_add(name="Basis", from_mix=False)
        block = obj.shape_key_add(name=LIVE_KEY, from_mix=False)
        self.name = block.name
        block.value = 1.0
        block.mute = True
        obj.active_shape_key_index = self.active_index

    def _block(self):
        key = self.obj.data.shape_keys
        return key.key_blocks.get(self.name) if key is not None else None

    def hide(self) -> None:
        block = self._block()
        if block is not None and not block.mute:
            block.mute = True

    def show(self, positions) -> None:
        """Display object-space ``positions`` (N,3)."""
        block = self._block()
        if block is None:
            return
        block.data.foreach_set("co", positions.ravel())
        block.mute = False
        self.obj.data.shape_keys.update_tag()
        self.obj.data.update_tag()

    def remove(self) -> None:
        """Remove the key and, if it had to add one, the Basis (idempotent)."""
        block = self._block()
        if block is not None:
            self.obj.shape_key_remove(block)
        key = self.obj.data.shape_keys
        if self.created_basis and key is not None and len(key.key_blocks) == 1:
            self.obj.shape_key_clear()
        self.created_basis = False
        if self.obj.data.shape_keys is not None and self.active_index < len(self.obj.data.shape_keys.key_blocks):
            self.obj.active_shape_key_index = self.active_index


class PreviewRun:
    """The preview's state machine: :meth:`step` until False, then :meth:`finish`; or :meth:`cancel`.

    Free of Blender's UI (no timers, no events), so scripts and tests can drive it; the operator's
    modal path (:class:`PreviewModal`) adds progress text and Esc on top.
    """

    def __init__(self, context, on_cancel: str = "KEEP", log=print):
        from .bake import ShapeKeyBake

        if on_cancel not in {"KEEP", "REVERT"}:
            raise ValueError(f"on_cancel must be 'KEEP' or 'REVERT', not {on_cancel!r}")
        self.context, self.on_cancel, self.log = context, on_cancel, log
        self.job = ShapeKeyBake(context, log)
        self.sim = self.job.sim
        self.live: list[LiveKey] = []
        self.records = []
        self._previous_records = {}
        self.closed = False
        try:
            for run, samples in zip(self.sim.runs, self.job.samples):
                name = run.obj.name
                self._previous_records[name] = overlay._RECORDS.get(name)
                record = overlay.new_record(overlay.mesh_edges(run.obj.data), samples, "preview", self.sim.first)
                overlay.set_record(run.obj, record)
                self.records.append(record)
                self.live.append(LiveKey(run.obj))
        except BaseException:
            self._revert()
            raise

    @property
    def frame(self) -> int:
        """The last frame simulated (the first frame before any step)."""
        return self.sim.first + self.sim.done

    def step(self) -> bool:
        """Simulate and show the next frame; returns True while frames remain."""
        for live in self.live:
            live.hide()
        try:
            more = self.job.step()
        except BaseException:
            self._revert()
            raise
        sample = self.sim.done
        for live, run, samples, record in zip(self.live, self.sim.runs, self.job.samples, self.records):
            overlay.set_sample(record, sample)
            diag = run.cloth.history[-1]
            record.stats = {
                "frame": self.frame,
                "strain_max": float(diag.strain_max),
                "strain_p95": float(diag.strain_p95),
                "ms_per_frame": self.sim.last_ms,
            }
            live.show(samples[sample])
        return more

    def status_text(self) -> str:
        sim = self.sim
        esc = "keep frames done" if self.on_cancel == "KEEP" else "revert"
        return (
            f"Selvedge preview: frame {self.frame} of {sim.last}, {sim.last_ms:.0f} ms/frame, "
            f"max strain {100 * sim.last_strain:.2f}%  (Esc: stop and {esc})"
        )

    def _remove_live(self) -> None:
        for live in self.live:
            live.remove()

    def _stamp_records(self) -> None:
        now = time.time_ns()
        for record in self.records:
            record.stamp = now

    def _revert(self) -> None:
        """Leave the scene as it was before (idempotent)."""
        self.sim.close()
        self._remove_live()
        overlay.restore_records(self._previous_records)
        self.closed = True
        self.context.view_layer.update()

    def finish(self) -> dict:
        """All frames done: write the keyed shape keys (as Bake to Shape Keys); ``{object: [keys]}``."""
        self._remove_live()
        result = self.job.finish()
        self._stamp_records()
        self.closed = True
        return result

    def cancel(self, keep: bool | None = None) -> dict:
        """Stop between frames. Keep the frames done so far (``{object: [keys]}``) or revert (``{}``)."""
        from .bake import write_shape_keys

        if self.closed:
            return {}
        keep = self.on_cancel == "KEEP" if keep is None else keep
        done = self.sim.done
        if not keep or done == 0:
            self._revert()
            return {}
        self.sim.close()
        self._remove_live()
        first = self.sim.first
        result = {}
        for run, frames in zip(self.sim.runs, self.job.samples):
            result[run.obj.name] = write_shape_keys(run.obj, frames[: done + 1], first, first + done, self.log)
        self._stamp_records()
        self.closed = True
        self.context.view_layer.update()
        self.log(f"Selvedge: preview stopped; kept frames {first}-{first + done} as shape keys")
        return result


#: Events a running preview passes on: view navigation (orbit, pan, zoom, numpad and NDOF views) and
#: Blender's own timers. Everything else (undo, delete, edits) is held back until it ends: the
#: simulation reads the scene every frame and holds on to its objects.
NAVIGATION_EVENTS = {
    "MOUSEMOVE",
    "INBETWEEN_MOUSEMOVE",
    "MIDDLEMOUSE",
    "WHEELUPMOUSE",
    "WHEELDOWNMOUSE",
    "WHEELINMOUSE",
    "WHEELOUTMOUSE",
    "TRACKPADPAN",
    "TRACKPADZOOM",
    "MOUSEROTATE",
    "MOUSESMARTZOOM",
    "WINDOW_DEACTIVATE",
    "NONE",
}


def passes_through(event) -> bool:
    kind = event.type
    return kind in NAVIGATION_EVENTS or kind.startswith(
        ("NDOF_", "NUMPAD_", "TIMER_", "TIMER0", "TIMER1", "TIMER2", "TIMERREGION")
    )


def _summary(result) -> str:
    return f"Selvedge preview: {sum(len(v) for v in result.values())} frame(s) on {len(result)} object(s)"


class PreviewModal(JobModal):
    """The interactive part: one frame per timer event, status/header text, Esc to stop; the view
    can be navigated meanwhile (:func:`passes_through`). ``run`` is the :class:`PreviewRun`."""

    failure_prefix = "Selvedge preview failed"

    def __init__(self, run: PreviewRun, report, summary=_summary):
        super().__init__(run, report, summary)
        self.run = run

    def status_text(self) -> str:
        return self.run.status_text()

    def other_event(self, event) -> set:
        return {"PASS_THROUGH"} if passes_through(event) else {"RUNNING_MODAL"}

    def escape(self, context) -> set:
        keep = self.run.on_cancel == "KEEP"
        kept = self.run.cancel()
        self.end(context)
        if kept:
            frames = len(next(iter(kept.values())))
            self.report({"WARNING"}, f"Selvedge preview stopped; kept {frames} frame(s) as shape keys")
            return {"FINISHED"}
        self.report(
            {"WARNING"},
            "Selvedge preview cancelled; the scene is as it was"
            if not keep
            else "Selvedge preview cancelled before the first frame; nothing kept",
        )
        return {"CANCELLED"}


class SELVEDGE_OT_simulate_preview(ModalJobOperator):
    """Simulate the cloth frame by frame and watch it in the viewport (Esc stops: keep the frames done or
    revert, as chosen). The result is a shape-key bake"""

    bl_idname = "selvedge.simulate_preview"
    bl_label = "Simulate (Preview)"
    modal_class = PreviewModal

    on_cancel: EnumProperty(
        name="On Esc",
        description="What Esc does with the frames simulated so far",
        items=ON_CANCEL_ITEMS,
        default="KEEP",
    )

    @classmethod
    def poll(cls, context):
        if not poll_any_cloth(cls, context):
            return False
        if context.mode != "OBJECT":
            cls.poll_message_set("Switch to Object Mode to simulate")
            return False
        return True

    def _choice(self, context) -> str:
        if self.properties.is_property_set("on_cancel"):
            return self.on_cancel
        return getattr(context.window_manager, "selvedge_preview_on_cancel", self.on_cancel)

    def make_job(self, context):
        return PreviewRun(context, self._choice(context))

    def summary(self, result) -> str:
        return _summary(result)

    @classmethod
    def register(cls):
        bpy.types.WindowManager.selvedge_preview_on_cancel = EnumProperty(  # pyright: ignore
            name="On Esc", description="What Esc does to a running preview", items=ON_CANCEL_ITEMS, default="KEEP"
        )

    @classmethod
    def unregister(cls):
        del bpy.types.WindowManager.selvedge_preview_on_cancel


CLASSES = (SELVEDGE_OT_simulate_preview,)
