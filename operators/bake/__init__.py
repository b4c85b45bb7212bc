"""Baking: read cloth objects from the evaluated depsgraph, step the solver, write results.

This is the Python API behind the bake operators (``bpy.ops.selvedge.bake_cache`` and friends);
scripts may call :func:`bake_cache`, :func:`bake_shape_keys` and :func:`free_bake` directly.
Those run synchronously and print progress, so they work under ``blender -b``. The jobs they
drive (:class:`CacheBake`, :class:`ShapeKeyBake`) advance one frame per ``step()``, which is
what the operators' modal path calls from a timer, and can be cancelled between frames.
Failures raise :class:`BakeError` (or the solver's ``SelvedgeError``) and leave the scene, the
frame and any previous cache as they were.

One module per stage, in the order the data flows:

* :mod:`.scene_read`: which objects are cloth, the panel's checks, topology, pins, UVs and weight
  maps, the evaluated positions per frame (:class:`EvaluatedReader`);
* :mod:`.colliders`: collider objects to solver proxies (bounds fitting, bone capsules), posed per
  frame (:class:`ColliderSource`);
* :mod:`.simulation`: the solver run over the frame range (:class:`Simulation`);
* :mod:`.cloth_world`: the cloths that collide with each other and themselves, stepped in one
  collision world (:class:`BakeWorld`);
* :mod:`.cache`: PC2 + sidecar and the Mesh Cache modifier (:class:`CacheBake`);
* :mod:`.shape_keys`: keyed shape keys (:class:`ShapeKeyBake`) and their removal;
* :mod:`.free`: Free Bake;
* :mod:`.stats`: the sidecar statistics the panel shows (:func:`last_bake_stats`).
"""

from ..errors import BakeError
from .cache import MODIFIER_NAME, CacheBake, bake_cache
from .colliders import (
    ColliderSource,
    armature_of,
    bone_capsule_poses,
    bone_capsules,
    collider_misconfiguration,
    collider_objects,
    fit_bounds,
    proxy_kind,
    read_colliders,
)
from .free import free_bake
from .scene_read import (
    TOPOLOGY_MODIFIERS,
    EvaluatedReader,
    cloth_objects,
    has_bake,
    misconfiguration,
    read_topology,
    resolve_cache_folder,
    to_object_space,
)
from .shape_keys import SHAPE_KEY_PREFIX, ShapeKeyBake, _fcurves, bake_shape_keys, free_shape_keys, write_shape_keys
from .simulation import ClothRun, Simulation, simulate
from .stats import last_bake_stats

__all__ = [
    "MODIFIER_NAME",
    "SHAPE_KEY_PREFIX",
    "TOPOLOGY_MODIFIERS",
    "BakeError",
    "CacheBake",
    "ClothRun",
    "ColliderSource",
    "EvaluatedReader",
    "ShapeKeyBake",
    "Simulation",
    "_fcurves",
    "armature_of",
    "bake_cache",
    "bake_shape_keys",
    "bone_capsule_poses",
    "bone_capsules",
    "cloth_objects",
    "collider_misconfiguration",
    "collider_objects",
    "fit_bounds",
    "free_bake",
    "free_shape_keys",
    "has_bake",
    "last_bake_stats",
    "misconfiguration",
    "proxy_kind",
    "read_colliders",
    "read_topology",
    "resolve_cache_folder",
    "simulate",
    "to_object_space",
    "write_shape_keys",
]
