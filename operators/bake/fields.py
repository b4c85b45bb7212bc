"""Force fields, gravity and the feature inputs of a cloth, read from the scene for the solver.

Thin: Blender's field settings are read by name (``solver.blender_fields.BLENDER_FIELD_SETTINGS``) at
the evaluated frame and turned into solver ``ForceField`` objects by
``solver.blender_fields.fields_from_blender``; lengths are converted from Blender units to metres.
"""

from __future__ import annotations

import numpy as np

from ..scene_to_solver import effector_weights
from .scene_read import _vertex_group_weights

#: Field settings that are lengths (Blender units -> metres).
_LENGTHS = ("distance_min", "distance_max", "size")
#: ... and with a Tube falloff (a Cone's are degrees).
_TUBE_LENGTHS = ("radial_min", "radial_max")
#: The power of length in each field type's Strength (and Noise, which adds to it): Wind, Force and
#: Turbulence give an acceleration (m/s^2); Force with Gravitation strength / d^2 (m^3/s^2); Drag's
#: speed factor is per metre; Harmonic and Charge (1/s^2), Vortex (1/s) have none.
_STRENGTH_LENGTH_POWER = {"WIND": 1, "FORCE": 1, "TURBULENCE": 1, "DRAG": -1}


def _strength_unit_power(settings: dict) -> int:
    if settings.get("type") == "FORCE" and settings.get("use_gravity_falloff"):
        return 3
    return _STRENGTH_LENGTH_POWER.get(str(settings.get("type")), 0)


def field_objects(scene, cloth_settings):
    """Objects with a force field that may act on the cloth: the Effector Collection's, else the scene's."""
    collection = cloth_settings.effector_collection
    objects = collection.all_objects if collection is not None else scene.objects
    return [o for o in objects if getattr(o, "field", None) is not None and o.field.type != "NONE"]


def read_force_fields(scene, depsgraph, obj, unit: float):
    """(ForceField list, warnings) acting on cloth ``obj`` at the depsgraph's frame; a field type,
    shape or option Selvedge does not simulate gives a warning naming the object and what."""
    from ...solver.blender_fields import BLENDER_FIELD_SETTINGS, fields_from_blender

    weights = effector_weights(obj.selvedge)
    fields, warnings = [], []
    for source in field_objects(scene, obj.selvedge):
        if source == obj:
            continue
        evaluated = source.evaluated_get(depsgraph)
        settings = {k: getattr(evaluated.field, k) for k in BLENDER_FIELD_SETTINGS if hasattr(evaluated.field, k)}
        for key in _LENGTHS + (_TUBE_LENGTHS if settings.get("falloff_type") == "TUBE" else ()):
            if key in settings:
                settings[key] = float(settings[key]) * unit
        scale = unit ** _strength_unit_power(settings)
        for key in ("strength", "noise"):
            if key in settings:
                settings[key] = float(settings[key]) * scale
        matrix = np.array(evaluated.matrix_world, dtype=np.float64)
        matrix[:3, 3] *= unit
        vertices = _mesh_vertices(evaluated) if settings.get("shape") == "POINTS" else None
        if vertices is not None:
            vertices = (vertices[0] * unit, vertices[1])
        source_fields, reason = fields_from_blender(settings, matrix, weights, vertices)
        if reason:
            warnings.append(f"{source.name}: {reason}")
        for field in source_fields:
            field.length_unit_m = unit
        fields += source_fields
    return fields, warnings


def _mesh_vertices(evaluated):
    """(positions, normals) in object space of an evaluated mesh object's vertices, else None."""
    mesh = evaluated.data if evaluated.type == "MESH" else None
    if mesh is None or len(mesh.vertices) == 0:
        return None
    n = len(mesh.vertices)
    co = np.empty(3 * n, dtype=np.float32)
    nor = np.empty(3 * n, dtype=np.float32)
    mesh.vertices.foreach_get("co", co)
    mesh.vertices.foreach_get("normal", nor)
    return co.reshape(n, 3).astype(np.float64), nor.reshape(n, 3).astype(np.float64)


def scene_gravity(scene, cloth_settings) -> tuple:
    """The scene's gravity (m/s^2, none when Gravity is off in the scene) times the cloth's Gravity weight."""
    if not scene.use_gravity:
        return (0.0, 0.0, 0.0)
    # Blender stores gravity as float32 (-9.8100004...); 6 decimals give back the value typed in
    return tuple(round(float(g), 6) * float(cloth_settings.field_weight_gravity) for g in scene.gravity)


def loose_edge_pairs(obj) -> np.ndarray:
    """Blender's sewing edges: the mesh's edges that belong to no face (S, 2)."""
    from ...solver.sewing import loose_edges

    mesh = obj.data
    edges = np.empty(2 * len(mesh.edges), dtype=np.int64)
    mesh.edges.foreach_get("vertices", edges)
    return loose_edges(edges.reshape(-1, 2), [tuple(p.vertices) for p in mesh.polygons])


def group_weights(obj, name: str, what: str):
    """A feature's vertex group weights, or None when no group is named."""
    return _vertex_group_weights(obj, name, len(obj.data.vertices), what) if name else None
