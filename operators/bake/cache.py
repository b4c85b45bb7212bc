"""Bake to a PC2 point cache per object, played back by a Mesh Cache modifier.

Frames stream from the :class:`~.simulation.Simulation` into temporary files; the PC2 and its
JSON sidecar replace the destination only when every object baked (atomic writes), and the
modifier is set up by :func:`~..mesh_cache.configure_mesh_cache` (the playback contract the farm's
render step uses too).
"""

from __future__ import annotations

from pathlib import Path

import bpy

from ..errors import BakeError
from ..mesh_cache import MODIFIER_NAME, configure_mesh_cache, new_cache_modifier  # noqa: F401
from ..scene_to_solver import cache_file_stem, frame_range
from .scene_read import resolve_cache_folder
from .simulation import Simulation, check_objects


class CacheBake:
    """A PC2 bake in progress: :meth:`step` until False, then :meth:`finish`; or :meth:`cancel`.

    Frames stream into temporary files; nothing at the destination changes before
    :meth:`finish`, and :meth:`cancel` (or any failure) leaves no file behind.
    """

    def __init__(self, context, log=print):
        from ...solver.io_pc2 import PC2Writer

        self.context, self.log = context, log
        scene = context.scene
        objects = check_objects(scene)
        self.folder = resolve_cache_folder(scene)
        self.stems = [cache_file_stem(o.name) for o in objects]
        if len(set(self.stems)) != len(self.stems):
            raise BakeError("two cloth objects map to the same cache file name; rename one of them")
        first = frame_range(scene.selvedge, scene.frame_start, scene.frame_end)[0]
        self.writers: list[PC2Writer] = []
        try:
            for stem, obj in zip(self.stems, objects):
                self.writers.append(
                    PC2Writer(self.folder / f"{stem}.pc2", num_points=len(obj.data.vertices), start_frame=first)
                )
            self.sim = Simulation(context, lambda i, _s, x: self.writers[i].write_frame(x), log)
        except BaseException:
            self._abort_writers()  # a Simulation that failed has closed itself
            raise

    def step(self) -> bool:
        try:
            return self.sim.step()
        except BaseException:
            self.cancel()
            raise

    def _abort_writers(self) -> None:
        for w in self.writers:
            w.abort()

    def cancel(self) -> None:
        self._abort_writers()
        self.sim.close()

    def finish(self) -> dict:
        """Commit the files (sidecars first) and add or update each object's Mesh Cache modifier."""
        from ... import solver
        from ...solver.io_pc2 import write_sidecar

        sim = self.sim
        if not sim.finished:
            raise BakeError("the bake is not finished")
        first, last = sim.first, sim.last
        try:
            # A PC2 without its sidecar is still usable; a stray sidecar is harmless.
            sidecars = []
            for run, stem in zip(sim.runs, self.stems):
                extra = {
                    "solver_version": solver.__version__,
                    "object": run.obj.name,
                    "frame_start": first,
                    "frame_end": last,
                    "num_points": run.reader.n,
                    "pc2": f"{stem}.pc2",
                    "warnings": run.warnings,
                    # what Settle at Rest's Auto resolved to for this cloth (halfway: no pins)
                    "coarse_links": "halfway" if run.cloth.links_between_aggregates else "members",
                }
                if run.coupling is not None:
                    extra["network"] = {
                        "mode": run.coupling.mode,
                        "events": list(run.coupling.events),
                        "frames": [r.to_dict() for r in run.coupling.history],
                    }
                sidecars.append(write_sidecar(self.folder / f"{stem}.json", run.settings, run.cloth.history, extra))
            paths = [w.close() for w in self.writers]
        except BaseException:
            self.cancel()
            raise
        folder_setting = self.context.scene.selvedge.cache_folder
        for run, pc2, sidecar in zip(sim.runs, paths, sidecars):
            obj = run.obj
            mod = _cache_modifier(obj)
            configure_mesh_cache(mod, _blend_relative(pc2, folder_setting), first)
            obj.selvedge.bake_modifier = mod.name
            obj.selvedge.bake_cache_file = _blend_relative(pc2, folder_setting)
            obj.selvedge.bake_sidecar_file = _blend_relative(sidecar, folder_setting)
            for warning in run.warnings:
                self.log(f"Selvedge warning: {warning}")
        self.context.view_layer.update()
        self.log(f"Selvedge: baked {len(sim.runs)} object(s), frames {first}-{last}, into {self.folder}")
        return {run.obj.name: str(p) for run, p in zip(sim.runs, paths)}


def bake_cache(context, log=print) -> dict:
    """Bake every cloth object to ``<cache folder>/<object>.pc2`` + ``.json`` and add a Mesh Cache modifier.

    Returns ``{object name: pc2 path}``. Nothing is written unless every object bakes.
    """
    job = CacheBake(context, log)
    while job.step():
        pass
    return job.finish()


def _cache_modifier(obj):
    """Our Mesh Cache modifier (reused on re-bake), last in the stack so it sees the final vertex order."""
    mod = obj.modifiers.get(obj.selvedge.bake_modifier) if obj.selvedge.bake_modifier else None
    if mod is None or mod.type != "MESH_CACHE":
        return new_cache_modifier(obj)
    if hasattr(mod, "use_pin_to_last"):
        mod.use_pin_to_last = True
    return mod


def _blend_relative(path: Path, folder_setting: str) -> str:
    """Keep the user's '//' convention in paths stored in the file."""
    return bpy.path.relpath(str(path)) if folder_setting.startswith("//") else str(path)
