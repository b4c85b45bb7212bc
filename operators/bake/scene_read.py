"""Scene read: which objects take part, what the panel warns about, and each cloth's topology.

The first stage of a bake (:mod:`.colliders` -> :mod:`.simulation` -> :mod:`.cache` /
:mod:`.shape_keys`). Setup-time reads walk vertex groups once; per-frame reads
(:class:`EvaluatedReader`) are one ``foreach_get`` per object, never a loop over vertices.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import bpy
import numpy as np

from ..errors import BakeError
from ..scene_to_solver import WEIGHT_MAP_KEYS


def cloth_objects(scene) -> list:
    """Objects of ``scene`` whose Selvedge role is Cloth, in name order (deterministic)."""
    return sorted((o for o in scene.objects if o.selvedge.role == "CLOTH"), key=lambda o: o.name)


def has_bake(obj) -> bool:
    s = obj.selvedge
    return bool(s.bake_cache_file or s.bake_sidecar_file or s.bake_modifier or s.bake_shape_keys)


def resolve_cache_folder(scene) -> Path:
    """The absolute cache folder, created if needed; raises :class:`BakeError` if it cannot be written."""
    setting = scene.selvedge.cache_folder.strip()
    if not setting:
        raise BakeError("the cache folder is empty; set Scene > Selvedge > Cache Folder")
    if setting.startswith("//") and not bpy.data.filepath:
        raise BakeError(
            f"the cache folder {setting!r} is relative to the .blend file, which is not saved yet; "
            "save the file or choose an absolute folder"
        )
    folder = Path(bpy.path.abspath(setting))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".selvedge_probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise BakeError(f"cannot write to the cache folder {str(folder)!r}: {error.strerror or error}") from None
    return folder


def baked_shape_key_names(obj) -> list[str]:
    """The shape keys the object's last shape-key bake created (stored on the object as JSON)."""
    raw = obj.selvedge.bake_shape_keys
    return json.loads(raw) if raw else []


def _vertex_group_weights(obj, name: str, n: int, what: str = "pin group") -> np.ndarray:
    """Weights (N,) of vertex group ``name`` (0 where unassigned). Runs once per bake, not per frame."""
    group = obj.vertex_groups.get(name)
    if group is None:
        raise BakeError(f"{obj.name}: vertex group {name!r} does not exist ({what}); create it or clear the field")
    index = group.index
    weights = np.zeros(n)
    for vertex in obj.data.vertices:
        for element in vertex.groups:
            if element.group == index:
                weights[vertex.index] = element.weight
    return weights


def _uv_layer(obj):
    mesh = obj.data
    name = obj.selvedge.uv_map
    if name:
        layer = mesh.uv_layers.get(name)
        if layer is None:
            raise BakeError(f"{obj.name}: UV map {name!r} does not exist; pick an existing one or clear the field")
        return layer
    return mesh.uv_layers.active


#: Modifier types that change the vertex count, so a cloth cannot sit on top of them.
TOPOLOGY_MODIFIERS = {
    "SUBSURF",
    "MULTIRES",
    "MIRROR",
    "ARRAY",
    "SOLIDIFY",
    "BEVEL",
    "DECIMATE",
    "REMESH",
    "TRIANGULATE",
    "WELD",
    "EDGE_SPLIT",
    "BOOLEAN",
    "SKIN",
    "SCREW",
    "WIREFRAME",
    "MASK",
    "BUILD",
}


def misconfiguration(obj) -> list[tuple[str, str]]:
    """Problems the panel shows before a bake: ``[(level, message)]`` with level ERROR or WARNING.

    Meant for redraws: edge counts come from ``foreach_get`` and ``bincount``; only the
    empty-pin-group check walks vertices, and it stops at the first pinned one.
    """
    out = []
    if obj.type != "MESH":
        return [("ERROR", "Only meshes can be cloth")]
    mesh = obj.data
    if len(mesh.polygons) == 0:
        return [("ERROR", "The mesh has no faces")]
    s = obj.selvedge
    if s.uv_map and mesh.uv_layers.get(s.uv_map) is None:
        out.append(("ERROR", f"UV map '{s.uv_map}' does not exist"))
    elif not mesh.uv_layers:
        out.append(("WARNING", "No UV map: the fabric is treated as isotropic"))
    if not s.pin_group:
        out.append(("WARNING", "No pin group: the whole cloth falls freely"))
    elif obj.vertex_groups.get(s.pin_group) is None:
        out.append(("ERROR", f"Pin group '{s.pin_group}' does not exist"))
    else:
        index = obj.vertex_groups[s.pin_group].index
        if not any(g.group == index and g.weight > 0 for v in mesh.vertices for g in v.groups):
            out.append(("WARNING", f"Pin group '{s.pin_group}' has no weighted vertices"))
    for key, setting in WEIGHT_MAP_KEYS.items():
        group = getattr(s, setting)
        if group and obj.vertex_groups.get(group) is None:
            out.append(("ERROR", f"{key.title()} weight map '{group}' does not exist"))
    edge_of_loop = np.empty(len(mesh.loops), dtype=np.int64)
    mesh.loops.foreach_get("edge_index", edge_of_loop)
    faces_per_edge = np.bincount(edge_of_loop, minlength=len(mesh.edges))
    if (faces_per_edge > 2).any():
        out.append(("WARNING", f"Non-manifold: {int((faces_per_edge > 2).sum())} edges have more than two faces"))
    changing = [m.name for m in obj.modifiers if m.type in TOPOLOGY_MODIFIERS and m.show_viewport]
    if changing:
        out.append(("ERROR", f"Modifiers change the vertex count: {', '.join(changing)}"))
    return out


def read_topology(obj) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, dict, list[str]]:
    """Triangles, per-corner UVs, pin weights and stiffness weight maps from the object's own mesh (setup only)."""
    if obj.type != "MESH":
        raise BakeError(f"{obj.name} is not a mesh (type {obj.type}); only meshes can be cloth")
    mesh = obj.data
    if len(mesh.polygons) == 0:
        raise BakeError(f"{obj.name}: the mesh has no faces; cloth needs faces")
    mesh.calc_loop_triangles()
    t = len(mesh.loop_triangles)
    triangles = np.empty(3 * t, dtype=np.int32)
    mesh.loop_triangles.foreach_get("vertices", triangles)
    warnings = []
    layer = _uv_layer(obj)
    uvs = None
    if layer is not None:
        loops = np.empty(3 * t, dtype=np.int32)
        mesh.loop_triangles.foreach_get("loops", loops)
        corner_uv = np.empty(2 * len(mesh.loops), dtype=np.float32)
        layer.data.foreach_get("uv", corner_uv)
        uvs = corner_uv.reshape(-1, 2)[loops].reshape(t, 3, 2).astype(np.float64)
    else:
        warnings.append(f"{obj.name}: no UV map; the fabric is treated as isotropic")
    pins = None
    if obj.selvedge.pin_group:
        pins = _vertex_group_weights(obj, obj.selvedge.pin_group, len(mesh.vertices))
        if not pins.any():
            warnings.append(f"{obj.name}: pin group {obj.selvedge.pin_group!r} has no weighted vertices")
    weight_maps = {}
    for key, setting in WEIGHT_MAP_KEYS.items():
        group = getattr(obj.selvedge, setting)
        if group:
            weight_maps[key] = _vertex_group_weights(obj, group, len(mesh.vertices), f"{key} weight map")
    return triangles.reshape(t, 3), uvs, pins, weight_maps, warnings


def cloth_options(obj):
    """The solver ``ClothOptions`` a bake gives the cloth object: its settings
    (:func:`~..scene_to_solver.options_from_settings`)."""
    from ..scene_to_solver import options_from_settings

    return options_from_settings(obj.selvedge)


class EvaluatedReader:
    """Reads an object's evaluated vertex positions in world space with one ``foreach_get``."""

    def __init__(self, obj):
        self.obj = obj
        self.n = len(obj.data.vertices)
        self._buffer = np.empty(3 * self.n, dtype=np.float32)

    def world_positions(self, depsgraph) -> tuple[np.ndarray, np.ndarray]:
        """(positions (N,3) float64 in world space, 4x4 world matrix) at the depsgraph's frame."""
        obj_eval = self.obj.evaluated_get(depsgraph)
        mesh = obj_eval.to_mesh()
        try:
            if len(mesh.vertices) != self.n:
                raise BakeError(
                    f"{self.obj.name}: its modifiers change the vertex count ({self.n} -> {len(mesh.vertices)}); "
                    "move topology-changing modifiers (Subdivision, Mirror, ...) after the cloth or apply them"
                )
            mesh.vertices.foreach_get("co", self._buffer)
        finally:
            obj_eval.to_mesh_clear()
        matrix = np.array(obj_eval.matrix_world, dtype=np.float64)
        local = self._buffer.reshape(-1, 3).astype(np.float64)
        return local @ matrix[:3, :3].T + matrix[:3, 3], matrix


def to_object_space(world: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """World-space (N,3) positions into the space of an object with world matrix ``matrix``."""
    return (world - matrix[:3, 3]) @ np.linalg.inv(matrix[:3, :3]).T
