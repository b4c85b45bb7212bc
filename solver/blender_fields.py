"""Blender's force-field settings, read by name, as solver :class:`.forces.ForceField` objects.

Blender-free: the operators read the attributes of ``object.field``
(:data:`BLENDER_FIELD_SETTINGS`) and the object's world matrix and hand them over as plain values;
what Selvedge does not simulate comes back as a reason for the bake report.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .forces import SHAPES, ForceField

#: Blender's FieldSettings properties :func:`field_from_blender` reads (``bpy.types.FieldSettings``).
#: ``harmonic_damping`` is Blender's one damping value (the Drag field's Quadratic shows it too),
#: ``rest_length`` and ``size`` are one value (Harmonic's Rest Length, Turbulence's Size).
BLENDER_FIELD_SETTINGS = (
    "type",
    "shape",
    "strength",
    "flow",
    "noise",
    "seed",
    "size",
    "use_global_coords",
    "falloff_type",
    "falloff_power",
    "use_min_distance",
    "distance_min",
    "use_max_distance",
    "distance_max",
    "radial_falloff",
    "use_radial_min",
    "radial_min",
    "use_radial_max",
    "radial_max",
    "z_direction",
    "harmonic_damping",
    "use_gravity_falloff",
    "apply_to_location",
    "use_absorption",
)
_BLENDER_KINDS = {
    "WIND": "wind",
    "FORCE": "force",
    "VORTEX": "vortex",
    "TURBULENCE": "turbulence",
    "HARMONIC": "harmonic",
    "CHARGE": "charge",
    "DRAG": "drag",
}
#: Why each field type Selvedge does not simulate is left out (the bake report says it).
_NOT_SIMULATED = {
    "MAGNET": "a Magnetic field acts on moving charges; cloth carries none",
    "TEXTURE": "a Texture field needs Blender's texture evaluation at every vertex each substep",
    "GUIDE": "a Curve Guide steers particles along a curve; it has no force on cloth",
    "BOID": "a Boid field acts in Blender's boid simulation only",
    "LENNARDJ": "a Lennard-Jones field acts between particles of a size; cloth vertices have none",
    "FLUID_FLOW": "a Fluid Flow field needs the fluid domain's velocity grid",
}
_SHAPES_NOT_SIMULATED = {
    "SURFACE": "shape Surface (the field from the nearest point of the object's surface) is not "
    "simulated: use Point, Line, Plane or Every Point",
}
#: Every Point expands into one field per vertex: past this many the bake report says what it costs.
EVERY_POINT_WARN_VERTICES = 256
_COPIED = (
    "strength",
    "flow",
    "noise",
    "seed",
    "size",
    "use_global_coords",
    "falloff_power",
    "use_min_distance",
    "distance_min",
    "use_max_distance",
    "distance_max",
    "radial_falloff",
    "use_radial_min",
    "radial_min",
    "use_radial_max",
    "radial_max",
    "use_gravity_falloff",
)


def field_from_blender(settings: dict, matrix_world, effector_weights: dict | None = None):
    """(ForceField or None, reason) from a field object's settings, read by name from Blender's
    ``object.field`` (:data:`BLENDER_FIELD_SETTINGS`), its 4x4 world matrix, and the cloth's
    ``effector_weights`` (``all`` and one entry per field type, Blender's names). Blender-free,
    so the operators only read attributes. A field Selvedge does not simulate gives None and the
    reason (for the bake report); one with Apply to Location off gives None and no reason (it
    moves nothing in Blender either); a simulated field whose option is not gives the field and
    the reason."""
    type_name = str(settings.get("type"))
    kind = _BLENDER_KINDS.get(type_name)
    if kind is None:
        why = _NOT_SIMULATED.get(type_name, "unknown type")
        return None, f"field type {type_name!r} is not simulated ({why}); simulated: " + ", ".join(
            k.title() for k in _BLENDER_KINDS
        )
    if not settings.get("apply_to_location", True):
        return None, ""
    shape_name = str(settings.get("shape", "POINT"))
    if shape_name == "POINTS":
        return None, "field shape 'POINTS' (Every Point) needs the field mesh's vertices (fields_from_blender)"
    if shape_name in _SHAPES_NOT_SIMULATED:
        return None, f"field shape {shape_name!r}: " + _SHAPES_NOT_SIMULATED[shape_name]
    shape = shape_name.lower()
    if shape not in SHAPES:
        return None, f"field shape {shape_name!r} is not simulated (Point, Line and Plane are)"
    m = np.asarray(matrix_world, dtype=np.float64).reshape(4, 4)
    weights = effector_weights or {}
    weight = float(weights.get("all", 1.0)) * float(weights.get(kind, 1.0))
    values = {k: type(getattr(ForceField, k))(settings[k]) for k in _COPIED if k in settings}
    if "harmonic_damping" in settings:
        values["damping"] = float(settings["harmonic_damping"])
    if kind == "harmonic":  # Blender's f_size: the Rest Length here, the noise Size of a Turbulence
        values["rest_length"] = values.pop("size", 0.0)
    field = ForceField(
        kind=kind,
        location=tuple(m[:3, 3]),
        direction=tuple(m[:3, 2]),
        shape=shape,
        falloff_type=str(settings.get("falloff_type", "SPHERE")).lower(),
        z_direction=str(settings.get("z_direction", "BOTH")).lower(),
        weight=weight,
        **values,
    )
    if field.size <= 0.0:  # Blender's turbulence skips the scaling for Size 0: the same as 1
        field.size = 1.0
    field.validate()
    reason = ""
    if settings.get("use_absorption"):
        reason = "Absorption (colliders shading the field) is not simulated: the field acts through colliders"
    return field, reason


def fields_from_blender(settings: dict, matrix_world, effector_weights: dict | None = None, vertices=None):
    """(ForceField list, reason): :func:`field_from_blender`, and for shape Every Point one field
    per vertex of the field object's evaluated mesh, ``vertices`` = (positions, normals), (N, 3)
    each in object space (Blender: ``get_effector_data`` with ``PFIELD_SHAPE_POINTS`` takes the
    vertex and its normal as the field's location and axis, the object's origin and Z for the
    falloff's axial part, Turbulence and the vortex; a Harmonic one pulls cloth vertex i toward
    field vertex i mod N only)."""
    if str(settings.get("shape")) != "POINTS" or str(settings.get("type")) not in _BLENDER_KINDS:
        field, reason = field_from_blender(settings, matrix_world, effector_weights)
        return ([] if field is None else [field]), reason
    if vertices is None or len(vertices[0]) == 0:
        return [], "field shape Every Point on an object without vertices: no field"
    field, reason = field_from_blender(dict(settings, shape="POINT"), matrix_world, effector_weights)
    if field is None:
        return [], reason
    m = np.asarray(matrix_world, dtype=np.float64).reshape(4, 4)
    positions = np.asarray(vertices[0], dtype=np.float64).reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]
    normals = np.asarray(vertices[1], dtype=np.float64).reshape(-1, 3) @ m[:3, :3].T
    lengths = np.linalg.norm(normals, axis=1)
    count = positions.shape[0]
    fields = []
    for j in range(count):
        direction = normals[j] / lengths[j] if lengths[j] > 1e-12 else np.asarray(field.direction)
        fields.append(
            replace(
                field,
                location=tuple(positions[j]),
                direction=tuple(direction),
                origin=field.location,
                axis=field.direction,
                every_point=True,
                point_index=j,
                point_count=count if field.kind == "harmonic" else 0,
            )
        )
    if count > EVERY_POINT_WARN_VERTICES:
        note = f"Every Point with {count} vertices acts as {count} fields at every cloth vertex (slow)"
        reason = f"{reason}; {note}" if reason else note
    return fields, reason
