"""Cloth against cloth in a bake: the cloth objects that share one ``CollisionWorld``.

Every cloth object with Collide with Cloth on collides two-way with every other such object of
the bake, and a cloth with Self Collision on with itself: these cloths are stepped together in
one :class:`~...solver.collisions.world.CollisionWorld` (vertex-triangle and edge-edge contacts,
each cloth's Thickness, Layer and Friction; the scene's Layer Mass Scale). The others are
stepped alone, as before. Each cloth keeps its own body contacts (its ``Colliders``); the body's
data is shared by every cloth (``ColliderSource.proxies``). The world counts the crossing
triangle pairs of its cloths at every frame end (``solver.collisions.intersections``), which the
sidecar records per frame next to the contact counts (``contacts`` of each frame).

With the learned network on, each cloth is stepped by its network coupling, which drives a lone
``Cloth``: there is then no world, self-collision falls back to the body handler's particle
self-collision and cloth objects do not collide with each other (a warning says so).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING

from ..errors import BakeError
from ..scene_to_solver import cloth_collision_from_settings

if TYPE_CHECKING:
    from ...solver.collisions.world import CollisionWorld


def world_members(objects, network_mode: str) -> tuple[list[int], list[str]]:
    """Indices of ``objects`` (the bake's cloth objects) that go into the collision world, and warnings.

    A cloth joins when it collides with itself, or with the other cloths while at least one other
    cloth does too; none join in a learned-network bake (see the module docstring). A frame whose
    fast folds cross is run again by the world with more substeps (``CollisionWorld``'s
    ``crossing_refinements``), so self-collision needs no substep count of its own.
    """
    crossing = [k for k, o in enumerate(objects) if o.selvedge.use_cloth_collision]
    if len(crossing) < 2:
        crossing = []
    selfish = [k for k, o in enumerate(objects) if o.selvedge.use_self_collision]
    members = sorted(set(crossing) | set(selfish))
    if network_mode == "OFF" or not members:
        return members, []
    warnings = []
    if crossing:
        warnings.append(
            f"the learned network steps each cloth alone: {', '.join(objects[k].name for k in crossing)} do not "
            "collide with each other in this bake (set Learned Network to Off for cloth-cloth collisions)"
        )
    return [], warnings


def uses_particle_self_collision(obj, in_world: bool) -> bool:
    """Whether the cloth's body handler carries the older particle self-collision (outside a world only)."""
    return bool(obj.selvedge.use_self_collision) and not in_world


class BakeWorld:
    """The collision world of a bake's member cloths (``runs[k]`` for ``k`` in ``members``)."""

    def __init__(self, runs, members: list[int], scene_settings):
        from ...solver import ClothInputError
        from ...solver.collisions.world import CollisionWorld

        self.members = list(members)
        self.names = [runs[k].obj.name for k in self.members]
        self.collisions = [
            cloth_collision_from_settings(runs[k].obj.selvedge, runs[k].cloth.material) for k in self.members
        ]
        try:
            self.world: CollisionWorld = CollisionWorld(
                [runs[k].cloth for k in self.members],
                self.collisions,
                layer_mass_scale=float(scene_settings.layer_mass_scale),
                count_intersections=True,
            )
        except ClothInputError as error:
            raise BakeError(f"collision world of {', '.join(self.names)}: {error}") from None
        for k, settings in zip(self.members, self.collisions):
            runs[k].settings["cloth_collision"] = asdict(settings)
            runs[k].settings["collision_world"] = self.describe()

    def describe(self) -> dict:
        w = self.world
        return {
            "objects": self.names,
            "layer_mass_scale": w.layer_mass_scale,
            "contact_rounds": w.contact_rounds,
            "margin_m": w.margin_m,
            "detection_margin_m": w.detection_margin_m,
            "edge_edge": w.edge_edge,
        }

    def step(self, targets: dict, frame: int) -> list:
        """One frame of every member; ``targets`` maps a run index to its pin targets (metres).
        Returns the members' ``FrameDiagnostics`` in member order."""
        from ...solver import SelvedgeError

        try:
            return self.world.step([targets[k] for k in self.members])
        except SelvedgeError as error:
            cloths = ", ".join(f"cloth {i} = {name}" for i, name in enumerate(self.names))
            raise BakeError(f"frame {frame}, collision world ({cloths}): {error}") from None
