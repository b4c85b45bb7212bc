"""Simulation: step the solver over the bake's frame range, one frame per ``step()``.

Sits between the scene read (:mod:`.scene_read`, :mod:`.colliders`) and the writers
(:mod:`.cache`, :mod:`.shape_keys`), which receive each frame's object-space positions through
``on_frame``. Failures raise :class:`~..errors.BakeError` (or a solver ``SelvedgeError``) and leave
the scene, the frame and any previous result as they were (:meth:`Simulation.close`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import bpy

from ..errors import BakeError
from ..scene_to_solver import (
    CLOTH_KEYS,
    SCENE_KEYS,
    aerodynamics_from_settings,
    frame_range,
    material_from_settings,
    pressure_from_settings,
    settings_dict,
    sewing_from_settings,
    shrink_from_settings,
    solver_settings_from_scene,
)
from .cloth_world import BakeWorld, uses_particle_self_collision, world_members
from .colliders import collider_objects, proxy_kind, read_colliders
from .fields import group_weights, loose_edge_pairs, read_force_fields, scene_gravity
from .scene_read import (
    EvaluatedReader,
    baked_shape_key_names,
    cloth_objects,
    cloth_options,
    read_topology,
    to_object_space,
)

if TYPE_CHECKING:  # imported when a bake starts (Numba loads with the solver)
    from ...models.coupling import LearnedCoupling
    from ...solver.cloth import Cloth
    from ...solver.collisions import Colliders


@dataclass
class ClothRun:
    obj: bpy.types.Object
    reader: EvaluatedReader
    cloth: Cloth
    settings: dict
    warnings: list[str]
    contacts: Colliders | None = None
    #: the network's coupling when the scene's learned-network mode is on
    coupling: LearnedCoupling | None = None


def _disable_previous_results(objects):
    """Hide our own cache modifier and mute our shape keys so they do not feed the simulation.

    Returns an undo list of (setter, value) applied by :func:`_restore`.
    """
    undo = []
    for obj in objects:
        mod = obj.modifiers.get(obj.selvedge.bake_modifier) if obj.selvedge.bake_modifier else None
        if mod is not None and mod.type == "MESH_CACHE" and mod.show_viewport:
            undo.append((mod, "show_viewport", True))
            mod.show_viewport = False
        keys = obj.data.shape_keys if obj.type == "MESH" else None
        for name in baked_shape_key_names(obj):
            block = keys.key_blocks.get(name) if keys else None
            if block is not None and not block.mute:
                undo.append((block, "mute", False))
                block.mute = True
    return undo


def _restore(undo):
    for target, attribute, value in reversed(undo):
        setattr(target, attribute, value)


class Simulation:
    """Simulate every cloth object of the scene over the bake frame range, one frame per :meth:`step`.

    ``on_frame(run_index, sample_index, object_space_positions)`` receives sample 0 (the rest
    state at the first frame) from the constructor and then one sample per stepped frame. The
    scene's frame, our previous bake modifiers and shape keys are restored by :meth:`close`,
    which runs by itself when the last frame is done or a step fails.
    """

    def __init__(self, context, on_frame, log=print):
        from ... import solver

        self.context, self.on_frame, self.log = context, on_frame, log
        scene = self.scene = context.scene
        objects = cloth_objects(scene)
        if not objects:
            raise BakeError("no object has the Selvedge role 'Cloth'; mark a mesh as cloth first")
        self.first, self.last = frame_range(scene.selvedge, scene.frame_start, scene.frame_end)
        fps = scene.render.fps / scene.render.fps_base
        solver_settings = solver_settings_from_scene(scene.selvedge, fps)
        #: Blender units to metres (the solver works in SI units).
        self.unit = float(scene.unit_settings.scale_length) or 1.0
        self._original_frame = scene.frame_current, scene.frame_subframe
        self._undo = _disable_previous_results(objects)
        self._open = True
        self.done = 0
        self.total = self.last - self.first
        self.last_ms = 0.0
        self.last_strain = 0.0
        self.runs: list[ClothRun] = []
        self._groups: dict = {}
        self.world: BakeWorld | None = None
        members, world_warnings = world_members(objects, scene.selvedge.network_mode)
        try:
            scene.frame_set(self.first)
            depsgraph = context.evaluated_depsgraph_get()
            self.colliders = read_colliders(scene, depsgraph, self.unit)
            for index, obj in enumerate(objects):
                triangles, uvs, pins, weight_maps, warnings = read_topology(obj)
                reader = EvaluatedReader(obj)
                rest, matrix = reader.world_positions(depsgraph)
                material = material_from_settings(obj.selvedge)
                options = cloth_options(obj)
                s = obj.selvedge
                settings_obj = replace(solver_settings, gravity_m_s2=scene_gravity(scene, s))
                fields, field_warnings = read_force_fields(scene, depsgraph, obj, self.unit)
                warnings += field_warnings + world_warnings
                try:
                    contacts = self._contacts(obj, material, triangles, index in members)
                    shrink_group = group_weights(obj, s.vertex_group_shrink, "shrinking group")
                    pressure_group = group_weights(obj, s.vertex_group_pressure, "pressure group")
                    cloth = solver.Cloth(
                        rest * self.unit,
                        triangles,
                        material=material,
                        options=options,
                        settings=settings_obj,
                        pin_weights=pins,
                        uvs=uvs,
                        weight_maps=weight_maps,
                        contact_handler=contacts,
                        force_fields=fields,
                        aerodynamics=aerodynamics_from_settings(s),
                        shrink=shrink_from_settings(s, shrink_group),
                        pressure=pressure_from_settings(s, pressure_group),
                        sewing=sewing_from_settings(s, loose_edge_pairs(obj)),
                    )
                except solver.ClothInputError as error:
                    raise BakeError(f"{obj.name}: {error}") from None
                self._groups[obj.name] = (shrink_group, pressure_group)
                coupling = self._coupling(cloth, scene.selvedge.network_mode, obj.name)
                warnings += cloth.warnings
                if contacts is not None:
                    warnings += contacts.warnings
                for source in self.colliders:
                    warnings += source.warnings
                settings = {
                    "object": settings_dict(obj.selvedge, CLOTH_KEYS),
                    "scene": settings_dict(scene.selvedge, SCENE_KEYS),
                    "material": asdict(material),
                    "options": asdict(options),
                    "bending_model": cloth.bending_model,
                    "solver": asdict(settings_obj),
                    "colliders": [c.describe() for c in self.colliders],
                    "features": cloth.feature_settings(),
                }
                self.runs.append(ClothRun(obj, reader, cloth, settings, warnings, contacts, coupling))
                on_frame(len(self.runs) - 1, 0, to_object_space(rest, matrix))
            if members:
                self.world = BakeWorld(self.runs, members, scene.selvedge)
            context.window_manager.progress_begin(0, max(self.total, 1))
        except BaseException:
            self.close()
            raise

    #: Scene enum -> models.coupling mode: the network adds a bounded acceleration residual before
    #: integration (002 architecture B), or corrects a cheap XPBD frame toward the teacher's result.
    NETWORK_MODES = {"ACCELERATION": "B", "RESIDUAL": "residual"}

    def _coupling(self, cloth, network_mode, name):
        """Couple the shipped network to ``cloth`` (None when the mode is Off); says which provider runs it."""
        if network_mode == "OFF":
            return None
        from ...models.coupling import attach
        from ...models.runtime import ModelError

        try:
            coupling = attach(cloth, mode=self.NETWORK_MODES[network_mode])
        except ModelError as error:
            raise BakeError(f"{name}: learned network: {error}") from None
        for event in coupling.events:
            self.log(f"Selvedge: {name}: {event}")
        return coupling

    def _contacts(self, obj, material, triangles, in_world):
        """The cloth's body contact handler: every collider's proxies, plus the particle self-collision
        when on outside a collision world (in one the world has the cloth's self contacts); None if neither."""
        from ...solver.collisions import Colliders, SelfCollision

        proxies = [p for c in self.colliders for p in c.proxies(material.friction_static, material.friction_kinetic)]
        self_collision = SelfCollision() if uses_particle_self_collision(obj, in_world) else None
        if not proxies and self_collision is None:
            return None
        return Colliders(
            proxies,
            cloth_thickness=material.thickness_m,
            self_collision=self_collision,
            cloth_triangles=triangles if self_collision is not None else None,
        )

    def _update_features(self, run, depsgraph) -> None:
        """Animated fields, gravity, aerodynamics, shrinking and pressure at this frame."""
        s = run.obj.selvedge
        fields, _ = read_force_fields(self.scene, depsgraph, run.obj, self.unit)
        run.cloth.force_fields = fields
        run.cloth.settings.gravity_m_s2 = scene_gravity(self.scene, s)
        run.cloth.aerodynamics = aerodynamics_from_settings(s)
        shrink_group, pressure_group = self._groups[run.obj.name]
        shrink = shrink_from_settings(s, shrink_group)
        if (shrink.shrink_min, shrink.shrink_max) != (run.cloth.shrink.shrink_min, run.cloth.shrink.shrink_max):
            run.cloth.set_shrink(shrink)
        pressure = pressure_from_settings(s, pressure_group)
        if pressure is not None:
            run.cloth.set_pressure(pressure)

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    def step(self) -> bool:
        """Simulate the next frame; returns True while frames remain."""
        from ... import solver

        if self.finished:
            self.close()
            return False
        try:
            t0 = time.perf_counter()
            frame = self.first + self.done + 1
            self.scene.frame_set(frame)
            depsgraph = self.context.evaluated_depsgraph_get()
            for source in self.colliders:
                source.read(depsgraph, frame)
            strain = 0.0
            world_targets = {}
            for index, run in enumerate(self.runs):
                if run.contacts is not None:
                    for source in self.colliders:
                        source.apply(run.contacts)
                targets, matrix = run.reader.world_positions(depsgraph)
                in_world = self.world is not None and index in self.world.members
                try:
                    self._update_features(run, depsgraph)
                    if in_world:
                        world_targets[index] = (targets * self.unit, matrix)
                        continue
                    if run.coupling is None:
                        diag = run.cloth.step(pin_targets=targets * self.unit)
                    else:
                        seen = len(run.coupling.events)
                        run.coupling.step(pin_targets=targets * self.unit)
                        diag = run.cloth.last_diagnostics
                        assert diag is not None  # the coupling's step ran the cloth's
                        for event in run.coupling.events[seen:]:
                            self.log(f"Selvedge: {run.obj.name}, frame {frame}: {event}")
                except solver.SelvedgeError as error:
                    raise BakeError(f"{run.obj.name}, frame {frame}: {error}") from None
                strain = max(strain, diag.strain_max)
                self.on_frame(index, self.done + 1, to_object_space(run.cloth.positions / self.unit, matrix))
            if self.world is not None:
                diags = self.world.step({k: t for k, (t, _) in world_targets.items()}, frame)
                for index, diag in zip(self.world.members, diags):
                    run = self.runs[index]
                    strain = max(strain, diag.strain_max)
                    positions = run.cloth.positions / self.unit
                    self.on_frame(index, self.done + 1, to_object_space(positions, world_targets[index][1]))
        except BaseException:
            self.close()
            raise
        self.done += 1
        self.last_ms = 1e3 * (time.perf_counter() - t0)
        self.last_strain = strain
        contacts = ""
        if self.world is not None:
            st = self.world.world.last_stats
            contacts = f", cloth contacts {st['pushes']} pushes, {st.get('intersections', 0)} crossing triangle pairs"
        self.log(
            f"Selvedge: frame {frame} ({self.done}/{self.total}), {self.last_ms:.1f} ms, "
            f"max strain {100 * strain:.2f}%{contacts}"
        )
        self.context.window_manager.progress_update(self.done)
        if self.finished:
            self.close()
            return False
        return True

    def close(self) -> None:
        """Put the frame, our previous results and the progress bar back (idempotent)."""
        if not self._open:
            return
        self._open = False
        self.context.window_manager.progress_end()
        self.scene.frame_set(self._original_frame[0], subframe=self._original_frame[1])
        _restore(self._undo)
        self.context.view_layer.update()


def simulate(context, on_frame, log=print) -> Simulation:
    """Run a :class:`Simulation` to the end (the synchronous path)."""
    sim = Simulation(context, on_frame, log)
    while sim.step():
        pass
    return sim


def check_objects(scene) -> list:
    """The scene's cloth objects, after the checks that need no simulation (raises :class:`BakeError`)."""
    objects = cloth_objects(scene)
    if not objects:
        raise BakeError("no object has the Selvedge role 'Cloth'; mark a mesh as cloth first")
    for obj in objects:
        read_topology(obj)  # fail on bad input before anything touches the disk or the scene
    for obj in collider_objects(scene):
        if proxy_kind(obj) == "MESH" and len(obj.data.polygons) == 0 and not obj.modifiers:
            raise BakeError(
                f"collider {obj.name}: the mesh has no faces, so the cloth has nothing to collide "
                "with; add faces or use a Sphere, Capsule, Box or Plane proxy"
            )
    frame_range(scene.selvedge, scene.frame_start, scene.frame_end)
    return objects
