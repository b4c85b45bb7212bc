"""Baking: read cloth objects from the evaluated depsgraph, step the solver, write results.

This is the Python API behind the bake operators (``bpy.ops.selvedge.bake_cache`` and friends);
scripts may call :func:`bake_cache`, :func:`bake_shape_keys` and :func:`free_bake` directly.
Those run synchronously and print progress, so they work under ``blender -b``. The jobs they
drive (:class:`CacheBake`, :class:`ShapeKeyBake`) advance one frame per ``step()``, which is
what the operators' modal path calls from a timer, and can be cancelled between frames.

Per frame the only Python work is per object, never per vertex: positions come out of the
evaluated mesh with ``foreach_get`` and go into the solver and the cache as NumPy arrays.
Failures raise :class:`BakeError` (or the solver's ``SelvedgeError``) and leave the scene, the
frame and any previous cache as they were.

Colliders: every object with the role Collider becomes solver proxies (:class:`ColliderSource`),
read from the evaluated depsgraph at every frame: analytic proxies (plane, sphere, capsule, box
fitted to the object's bounds, or one capsule per deform bone) follow the object's (bone's)
world transform, with the first frame's scale folded into their size; Mesh proxies follow the
evaluated mesh's world-space vertices (fixed topology). Each cloth gets its own
``solver.collisions.Colliders`` (cloth thickness from the cloth, skin thickness from the
collider, friction the geometric mean of both), plus ``SelfCollision`` when the cloth's Self
Collision is on. Lengths are scaled by the scene's unit scale; thicknesses are metres.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import bpy
import numpy as np

from .scene_to_solver import (CLOTH_KEYS, SCENE_KEYS, WEIGHT_MAP_KEYS, cache_file_stem, frame_range,
                              material_from_settings, options_from_settings, settings_dict,
                              solver_settings_from_scene)

MODIFIER_NAME = "Selvedge Cache"
SHAPE_KEY_PREFIX = "Selvedge"


class BakeError(Exception):
    """The scene cannot be baked as it is; the message says what to change."""


# ----------------------------------------------------------------------------------------------
# Scene inspection
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
        raise BakeError(f"the cache folder {setting!r} is relative to the .blend file, which is not saved yet; "
                        "save the file or choose an absolute folder")
    folder = Path(bpy.path.abspath(setting))
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".selvedge_probe.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise BakeError(f"cannot write to the cache folder {str(folder)!r}: {error.strerror or error}") from None
    return folder


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
TOPOLOGY_MODIFIERS = {"SUBSURF", "MULTIRES", "MIRROR", "ARRAY", "SOLIDIFY", "BEVEL", "DECIMATE", "REMESH",
                      "TRIANGULATE", "WELD", "EDGE_SPLIT", "BOOLEAN", "SKIN", "SCREW", "WIREFRAME", "MASK", "BUILD"}


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
                    "move topology-changing modifiers (Subdivision, Mirror, ...) after the cloth or apply them")
            mesh.vertices.foreach_get("co", self._buffer)
        finally:
            obj_eval.to_mesh_clear()
        matrix = np.array(obj_eval.matrix_world, dtype=np.float64)
        local = self._buffer.reshape(-1, 3).astype(np.float64)
        return local @ matrix[:3, :3].T + matrix[:3, 3], matrix


def to_object_space(world: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """World-space (N,3) positions into the space of an object with world matrix ``matrix``."""
    return (world - matrix[:3, 3]) @ np.linalg.inv(matrix[:3, :3]).T


# ----------------------------------------------------------------------------------------------
# Colliders
def collider_objects(scene) -> list:
    """Objects of ``scene`` whose Selvedge role is Collider, in name order (deterministic)."""
    return sorted((o for o in scene.objects if o.selvedge.role == "COLLIDER"), key=lambda o: o.name)


def proxy_kind(obj) -> str:
    """The proxy a collider object becomes: PLANE, SPHERE, CAPSULE, BOX, MESH or BONES.

    Auto is the evaluated mesh for mesh objects and a box from the bounds for anything else;
    "Fit Capsules to Bones" (BONES) overrides the proxy kind. Raises :class:`BakeError` for
    settings that cannot work (a Mesh proxy on an object that is not a mesh).
    """
    s = obj.selvedge
    if s.fit_capsules_to_bones:
        if armature_of(obj) is None:
            raise BakeError(f"collider {obj.name}: 'Fit Capsules to Bones' is on but the object has no Armature "
                            "modifier (or armature parent) with an armature object; rig it or turn the option off")
        return "BONES"
    kind = s.collider_proxy
    if kind == "AUTO":
        return "MESH" if obj.type == "MESH" else "BOX"
    if kind == "MESH" and obj.type != "MESH":
        raise BakeError(f"collider {obj.name} is not a mesh (type {obj.type}) so it cannot use the Mesh proxy; "
                        "pick Sphere, Capsule, Box or Plane")
    return kind


def collider_misconfiguration(obj) -> list[tuple[str, str]]:
    """Problems the panel shows for a collider before a bake: ``[(level, message)]`` (cheap: no evaluation)."""
    try:
        kind = proxy_kind(obj)
    except BakeError as error:
        return [("ERROR", str(error).split(";")[0])]
    if kind == "MESH" and len(obj.data.polygons) == 0 and not obj.modifiers:
        return [("ERROR", "The mesh has no faces: nothing to collide with")]
    if kind == "PLANE":
        return [("WARNING", "Plane: infinite, through the origin along local Z (solid below)")]
    if kind in ("SPHERE", "CAPSULE", "BOX"):
        try:
            fit_bounds(kind, obj)
        except BakeError:
            return [("ERROR", f"Its bounds are flat or empty: no {kind.lower()} fits; use Plane or Mesh")]
    return []


def armature_of(obj):
    """The armature object deforming ``obj`` (first Armature modifier, else an armature parent), or None."""
    for mod in obj.modifiers:
        if mod.type == "ARMATURE" and mod.object is not None and mod.object.type == "ARMATURE":
            return mod.object
    if obj.parent is not None and obj.parent.type == "ARMATURE":
        return obj.parent
    return None


#: Rotation taking the capsule's local z axis (the solver's) onto a bone's local y axis (Blender's).
_Z_TO_BONE_Y = (np.sqrt(0.5), -np.sqrt(0.5), 0.0, 0.0)


def _quat_mul(a, b) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def _decompose(matrix):
    """(location (3,), rotation (w,x,y,z), scale (3,)) of a Blender 4x4 matrix."""
    loc, rot, scale = matrix.decompose()
    return np.array(loc, dtype=np.float64), np.array(rot, dtype=np.float64), np.array(scale, dtype=np.float64)


def fit_bounds(kind: str, obj_eval) -> dict:
    """Proxy size fitted to the evaluated object's bounds, in world units, scale folded in.

    The shapes match Blender's own bounds display (Object > Viewport Display > Bounds), as for
    rigid-body shapes: the sphere's radius is the largest half extent, the capsule runs along
    local Z with radius max(half x, half y), the box is the bounds. ``center`` is the bounds'
    centre in object space (the proxy sits there).
    """
    corners = np.array([tuple(c) for c in obj_eval.bound_box], dtype=np.float64)
    lo, hi = corners.min(axis=0), corners.max(axis=0)
    center = 0.5 * (lo + hi)
    _, _, scale = _decompose(obj_eval.matrix_world)
    half = 0.5 * (hi - lo) * np.abs(scale)
    fit = {"center": center, "scale": scale}
    if kind == "SPHERE":
        fit["radius"] = float(half.max())
    elif kind == "CAPSULE":
        fit["radius"] = float(max(half[0], half[1]))
        fit["half_length"] = float(max(half[2] - fit["radius"], 0.0))
    elif kind == "BOX":
        fit["half_extents"] = half
    if kind in ("SPHERE", "CAPSULE") and not fit["radius"] > 0.0 or kind == "BOX" and not (half > 0.0).all():
        raise BakeError(f"collider {obj_eval.name}: its bounds are flat or empty ({2 * half} world units), so a "
                        f"{kind.lower()} cannot be fitted; use the Plane or Mesh proxy")
    return fit


def bone_capsules(obj) -> tuple[object, list[dict], list[str]]:
    """Capsules of the deform bones of the armature rigging mesh ``obj`` (rest pose, armature space).

    Each vertex belongs to the deform bone with its largest weight; a bone's capsule is its
    head-tail segment with the radius of the farthest of its vertices from that segment (the
    undeformed mesh, taken into armature space with the objects' current world matrices).
    Returns (armature, [{"bone", "radius", "length"}], warnings). One Python pass over the
    vertex weights, at setup only.
    """
    armature = armature_of(obj)
    if armature is None:
        raise BakeError(f"{obj.name} has no Armature modifier (or armature parent) to fit capsules to")
    if obj.type != "MESH":
        raise BakeError(f"{obj.name} is not a mesh; capsules are fitted to the vertices a bone deforms")
    deform = {b.name: b for b in armature.data.bones if b.use_deform}
    group_bone = {g.index: g.name for g in obj.vertex_groups if g.name in deform}
    n = len(obj.data.vertices)
    co = np.empty(3 * n, dtype=np.float64)
    obj.data.vertices.foreach_get("co", co)
    to_arm = np.array(armature.matrix_world.inverted() @ obj.matrix_world, dtype=np.float64)
    co = co.reshape(-1, 3) @ to_arm[:3, :3].T + to_arm[:3, 3]
    owner = {}
    for v in obj.data.vertices:
        best, best_w = None, 0.0
        for g in v.groups:
            if g.group in group_bone and g.weight > best_w:
                best, best_w = group_bone[g.group], g.weight
        if best is not None:
            owner.setdefault(best, []).append(v.index)
    capsules, warnings = [], []
    for name, bone in deform.items():
        if name not in owner:
            warnings.append(f"{obj.name}: deform bone {name!r} has no vertices weighted mostly to it; no capsule")
            continue
        head, tail = np.array(bone.head_local), np.array(bone.tail_local)
        axis = tail - head
        length = float(np.linalg.norm(axis))
        p = co[owner[name]] - head
        t = np.clip(np.einsum("ij,j->i", p, axis) / max(length * length, 1e-300), 0.0, 1.0)  # no threaded BLAS
        radius = float(np.linalg.norm(p - t[:, None] * axis, axis=1).max())
        if radius <= 0.0:
            warnings.append(f"{obj.name}: the vertices of bone {name!r} lie on the bone; no capsule")
            continue
        capsules.append({"bone": name, "radius": radius, "length": length})
    if not capsules:
        raise BakeError(f"{obj.name}: no deform bone of {armature.name} has vertices weighted to it; weight-paint "
                        "the mesh (vertex groups named after the bones) or turn 'Fit Capsules to Bones' off")
    return armature, capsules, warnings


def bone_capsule_poses(armature, capsules, depsgraph):
    """World (position, rotation (w,x,y,z), scale (3,)) of each capsule's centre on the posed, evaluated armature."""
    from mathutils import Vector

    arm_eval = armature.evaluated_get(depsgraph)
    world = arm_eval.matrix_world
    out = []
    for c in capsules:
        matrix = world @ arm_eval.pose.bones[c["bone"]].matrix
        _, rot, scale = _decompose(matrix)
        centre = np.array(matrix @ Vector((0.0, 0.5 * c["length"], 0.0)), dtype=np.float64)
        out.append((centre, _quat_mul(rot, _Z_TO_BONE_Y), scale))
    return out


class ColliderSource:
    """One collider object read from the evaluated depsgraph: its proxies and their pose per frame.

    Analytic proxies (plane, sphere, capsule, box, bone capsules) keep their size from the first
    frame and follow the object's (or bone's) world transform; mesh proxies follow the
    evaluated mesh's world-space vertices, whose topology must stay fixed.
    """

    def __init__(self, obj, depsgraph, unit: float):
        self.obj, self.unit = obj, unit
        self.name = obj.name
        s = obj.selvedge
        self.thickness = float(s.collider_thickness_m)
        self.friction = float(s.collider_friction)
        self.kind = proxy_kind(obj)
        self.warnings: list[str] = []
        obj_eval = obj.evaluated_get(depsgraph)
        if self.kind == "BONES":
            self.armature, self.capsules, self.warnings = bone_capsules(obj)
            poses = bone_capsule_poses(self.armature, self.capsules, depsgraph)
            self.scale0 = [p[2] for p in poses]
            self.names = [f"{obj.name}:{c['bone']}" for c in self.capsules]
        elif self.kind == "MESH":
            mesh = obj_eval.to_mesh()
            try:
                self.n = len(mesh.vertices)
                mesh.calc_loop_triangles()
                self.triangles = np.empty(3 * len(mesh.loop_triangles), dtype=np.int32)
                mesh.loop_triangles.foreach_get("vertices", self.triangles)
            finally:
                obj_eval.to_mesh_clear()
            if self.triangles.size == 0:
                raise BakeError(f"collider {obj.name}: the mesh has no faces, so the cloth has nothing to collide "
                                "with; add faces or use a Sphere, Capsule, Box or Plane proxy")
            self.triangles = self.triangles.reshape(-1, 3)
            self._buffer = np.empty(3 * self.n, dtype=np.float32)
            self._tri_buffer = np.empty(self.triangles.size, dtype=np.int32)
            self.names = [obj.name]
        else:
            self.fit = fit_bounds(self.kind, obj_eval) if self.kind != "PLANE" else {
                "center": np.zeros(3), "scale": _decompose(obj_eval.matrix_world)[2]}
            self.names = [obj.name]
        self.frame = None
        self.read(depsgraph)

    # -- per frame ------------------------------------------------------------------------------
    def read(self, depsgraph, frame=None) -> None:
        """Read this frame's pose (world units) from the evaluated depsgraph into ``self.poses``."""
        obj_eval = self.obj.evaluated_get(depsgraph)
        if self.kind == "BONES":
            poses = bone_capsule_poses(self.armature, self.capsules, depsgraph)
            for (_, _, scale), scale0, c in zip(poses, self.scale0, self.capsules):
                self._check_scale(scale, scale0, frame, f"bone {c['bone']!r}")
            self.poses = [(p, q) for p, q, _ in poses]
        elif self.kind == "MESH":
            mesh = obj_eval.to_mesh()
            try:
                mesh.calc_loop_triangles()
                n, t = len(mesh.vertices), len(mesh.loop_triangles)
                same = n == self.n and t == self.triangles.shape[0]
                if same:
                    mesh.loop_triangles.foreach_get("vertices", self._tri_buffer)
                    same = np.array_equal(self._tri_buffer, self.triangles.reshape(-1))
                if not same:
                    raise BakeError(
                        f"collider {self.name}: its evaluated mesh changed topology at frame {frame} ({self.n} "
                        f"vertices, {self.triangles.shape[0]} triangles at the first frame; {n} and {t} now); a "
                        "Mesh proxy needs a fixed topology: apply or move modifiers that add or remove geometry, or "
                        "use an analytic proxy")
                mesh.vertices.foreach_get("co", self._buffer)
            finally:
                obj_eval.to_mesh_clear()
            matrix = np.array(obj_eval.matrix_world, dtype=np.float64)
            self.vertices = self._buffer.reshape(-1, 3).astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]
        else:
            loc, rot, scale = _decompose(obj_eval.matrix_world)
            self._check_scale(scale, self.fit["scale"], frame, "object")
            centre = np.array(obj_eval.matrix_world, dtype=np.float64) @ np.r_[self.fit["center"], 1.0]
            self.poses = [(centre[:3], rot)]
        self.frame = frame

    def _check_scale(self, scale, scale0, frame, what):
        if frame is not None and not np.allclose(scale, scale0, rtol=1e-6, atol=1e-9):
            raise BakeError(f"collider {self.name}: the {what} scale changes during the bake (frame {frame}: "
                            f"{tuple(np.round(scale, 6))}, first frame {tuple(np.round(scale0, 6))}); analytic "
                            "proxies keep their size, so animate location and rotation only or use the Mesh proxy")

    def proxies(self, cloth_friction_static: float, cloth_friction_kinetic: float) -> list:
        """Fresh solver proxies (metres) at the pose last read, for one cloth.

        Friction: the geometric mean of the collider's and the cloth's coefficients (static with
        static, kinetic with kinetic), so either side at 0 makes the contact frictionless.
        """
        from ..solver.collisions import Box, Capsule, Plane, Sphere, TriangleMesh

        u = self.unit
        mu_s = float(np.sqrt(self.friction * cloth_friction_static))
        mu_k = min(float(np.sqrt(self.friction * cloth_friction_kinetic)), mu_s)
        common = {"thickness": self.thickness, "friction_static": mu_s, "friction_kinetic": mu_k}
        if self.kind == "MESH":
            triangles, one_sided = _orient_closed(self.vertices, self.triangles)
            return [TriangleMesh(self.vertices * u, triangles, name=self.name, one_sided=one_sided, **common)]
        if self.kind == "BONES":
            s0 = [float(np.abs(s).max()) for s in self.scale0]
            return [Capsule(c["radius"] * s * u, 0.5 * c["length"] * s * u, name=name, position=p * u, rotation=q,
                            **common) for c, s, name, (p, q) in zip(self.capsules, s0, self.names, self.poses)]
        (p, q), = self.poses
        if self.kind == "PLANE":
            return [Plane(name=self.name, position=p * u, rotation=q, **common)]
        if self.kind == "SPHERE":
            return [Sphere(self.fit["radius"] * u, name=self.name, position=p * u, rotation=q, **common)]
        if self.kind == "CAPSULE":
            return [Capsule(self.fit["radius"] * u, self.fit["half_length"] * u, name=self.name, position=p * u,
                            rotation=q, **common)]
        return [Box(self.fit["half_extents"] * u, name=self.name, position=p * u, rotation=q, **common)]

    def apply(self, colliders) -> None:
        """Give the pose last read to a solver ``Colliders`` as the end of its next frame."""
        u = self.unit
        if self.kind == "MESH":
            colliders.set_mesh_positions(self.name, self.vertices * u)
            return
        for name, (p, q) in zip(self.names, self.poses):
            colliders.set_transform(name, p * u, q)

    def describe(self) -> dict:
        d = {"object": self.name, "proxy": self.kind, "thickness_m": self.thickness, "friction": self.friction}
        if self.kind == "BONES":
            d["capsules"] = [{"bone": c["bone"], "radius": c["radius"], "length": c["length"]} for c in self.capsules]
        elif self.kind == "MESH":
            d["vertices"], d["triangles"] = self.n, int(self.triangles.shape[0])
        elif self.kind != "PLANE":
            d.update({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.fit.items()})
        return d


def _orient_closed(vertices, triangles):
    """(triangles, one_sided): a closed mesh (every edge on two triangles) is wound outwards and one-sided."""
    e = np.sort(np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]]), axis=1)
    _, counts = np.unique(e, axis=0, return_counts=True)
    if not (counts == 2).all():
        return triangles, False
    a, b, c = vertices[triangles[:, 0]], vertices[triangles[:, 1]], vertices[triangles[:, 2]]
    volume = float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum()) / 6.0
    return (triangles if volume > 0 else triangles[:, [0, 2, 1]]), True


def read_colliders(scene, depsgraph, unit: float) -> list[ColliderSource]:
    return [ColliderSource(o, depsgraph, unit) for o in collider_objects(scene)]


# ----------------------------------------------------------------------------------------------
# Simulation
@dataclass
class ClothRun:
    obj: object
    reader: EvaluatedReader
    cloth: object
    settings: dict
    warnings: list[str]
    contacts: object = None
    #: models.coupling.LearnedCoupling when the scene's learned-network mode is on
    coupling: object = None


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
        for name in _baked_shape_key_names(obj):
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
        from .. import solver

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
        try:
            scene.frame_set(self.first)
            depsgraph = context.evaluated_depsgraph_get()
            self.colliders = read_colliders(scene, depsgraph, self.unit)
            for obj in objects:
                triangles, uvs, pins, weight_maps, warnings = read_topology(obj)
                reader = EvaluatedReader(obj)
                rest, matrix = reader.world_positions(depsgraph)
                material = material_from_settings(obj.selvedge)
                options = options_from_settings(obj.selvedge)
                try:
                    contacts = self._contacts(obj, material, triangles)
                    cloth = solver.Cloth(rest * self.unit, triangles, material=material, options=options,
                                         settings=solver_settings, pin_weights=pins, uvs=uvs, weight_maps=weight_maps,
                                         contact_handler=contacts)
                except solver.ClothInputError as error:
                    raise BakeError(f"{obj.name}: {error}") from None
                coupling = self._coupling(cloth, scene.selvedge.network_mode, obj.name)
                warnings += cloth.warnings
                if contacts is not None:
                    warnings += contacts.warnings
                for source in self.colliders:
                    warnings += source.warnings
                settings = {"object": settings_dict(obj.selvedge, CLOTH_KEYS),
                            "scene": settings_dict(scene.selvedge, SCENE_KEYS), "material": asdict(material),
                            "options": asdict(options), "bending_model": cloth.bending_model,
                            "solver": asdict(solver_settings), "colliders": [c.describe() for c in self.colliders]}
                self.runs.append(ClothRun(obj, reader, cloth, settings, warnings, contacts, coupling))
                on_frame(len(self.runs) - 1, 0, to_object_space(rest, matrix))
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
        from ..models.coupling import attach
        from ..models.runtime import ModelError

        try:
            coupling = attach(cloth, mode=self.NETWORK_MODES[network_mode])
        except ModelError as error:
            raise BakeError(f"{name}: learned network: {error}") from None
        for event in coupling.events:
            self.log(f"Selvedge: {name}: {event}")
        return coupling

    def _contacts(self, obj, material, triangles):
        """The cloth's contact handler: every collider's proxies, plus self-collision when on; None if neither."""
        from ..solver.collisions import Colliders, SelfCollision

        proxies = [p for c in self.colliders for p in c.proxies(material.friction_static, material.friction_kinetic)]
        self_collision = SelfCollision() if obj.selvedge.use_self_collision else None
        if not proxies and self_collision is None:
            return None
        return Colliders(proxies, cloth_thickness=material.thickness_m, self_collision=self_collision,
                         cloth_triangles=triangles if self_collision is not None else None)

    @property
    def finished(self) -> bool:
        return self.done >= self.total

    def step(self) -> bool:
        """Simulate the next frame; returns True while frames remain."""
        from .. import solver

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
            for index, run in enumerate(self.runs):
                if run.contacts is not None:
                    for source in self.colliders:
                        source.apply(run.contacts)
                targets, matrix = run.reader.world_positions(depsgraph)
                try:
                    if run.coupling is None:
                        diag = run.cloth.step(pin_targets=targets * self.unit)
                    else:
                        seen = len(run.coupling.events)
                        run.coupling.step(pin_targets=targets * self.unit)
                        diag = run.cloth.last_diagnostics
                        for event in run.coupling.events[seen:]:
                            self.log(f"Selvedge: {run.obj.name}, frame {frame}: {event}")
                except solver.SelvedgeError as error:
                    raise BakeError(f"{run.obj.name}, frame {frame}: {error}") from None
                strain = max(strain, diag.strain_max)
                self.on_frame(index, self.done + 1, to_object_space(run.cloth.positions / self.unit, matrix))
        except BaseException:
            self.close()
            raise
        self.done += 1
        self.last_ms = 1e3 * (time.perf_counter() - t0)
        self.last_strain = strain
        self.log(f"Selvedge: frame {frame} ({self.done}/{self.total}), {self.last_ms:.1f} ms, "
                 f"max strain {100 * strain:.2f}%")
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


def _blend_relative(path: Path, folder_setting: str) -> str:
    """Keep the user's '//' convention in paths stored in the file."""
    return bpy.path.relpath(str(path)) if folder_setting.startswith("//") else str(path)


def _check_objects(scene) -> list:
    objects = cloth_objects(scene)
    if not objects:
        raise BakeError("no object has the Selvedge role 'Cloth'; mark a mesh as cloth first")
    for obj in objects:
        read_topology(obj)  # fail on bad input before anything touches the disk or the scene
    for obj in collider_objects(scene):
        if proxy_kind(obj) == "MESH" and len(obj.data.polygons) == 0 and not obj.modifiers:
            raise BakeError(f"collider {obj.name}: the mesh has no faces, so the cloth has nothing to collide "
                            "with; add faces or use a Sphere, Capsule, Box or Plane proxy")
    frame_range(scene.selvedge, scene.frame_start, scene.frame_end)
    return objects


_STATS_CACHE: dict = {}


def last_bake_stats(obj) -> dict | None:
    """Summary of the object's last cache bake from its sidecar (cached by path and mtime; for the panel).

    ``{"frames", "frame_start", "frame_end", "strain_max", "strain_p95", "ms_per_frame"}`` where
    strain and time are those of the last frame; None when there is no readable sidecar.
    """
    stored = obj.selvedge.bake_sidecar_file
    if not stored:
        return None
    path = bpy.path.abspath(stored)
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        return None
    key = (path, stamp)
    if key not in _STATS_CACHE:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
            frames = doc["frames"]
            last = frames[-1] if frames else {}
            _STATS_CACHE.clear()
            _STATS_CACHE[key] = {
                "frames": len(frames), "frame_start": doc["frame_start"], "frame_end": doc["frame_end"],
                "strain_max": last.get("strain_max", 0.0), "strain_p95": last.get("strain_p95", 0.0),
                "ms_per_frame": last.get("timings_ms", {}).get("total", 0.0)}
        except (OSError, ValueError, KeyError):
            return None
    return _STATS_CACHE[key]


# ----------------------------------------------------------------------------------------------
# Bake to PC2 point cache
class CacheBake:
    """A PC2 bake in progress: :meth:`step` until False, then :meth:`finish`; or :meth:`cancel`.

    Frames stream into temporary files; nothing at the destination changes before
    :meth:`finish`, and :meth:`cancel` (or any failure) leaves no file behind.
    """

    def __init__(self, context, log=print):
        from ..solver.io_pc2 import PC2Writer

        self.context, self.log = context, log
        scene = context.scene
        objects = _check_objects(scene)
        self.folder = resolve_cache_folder(scene)
        self.stems = [cache_file_stem(o.name) for o in objects]
        if len(set(self.stems)) != len(self.stems):
            raise BakeError("two cloth objects map to the same cache file name; rename one of them")
        first = frame_range(scene.selvedge, scene.frame_start, scene.frame_end)[0]
        self.writers = []
        self.sim = None
        try:
            for stem, obj in zip(self.stems, objects):
                self.writers.append(PC2Writer(self.folder / f"{stem}.pc2", num_points=len(obj.data.vertices),
                                              start_frame=first))
            self.sim = Simulation(context, lambda i, _s, x: self.writers[i].write_frame(x), log)
        except BaseException:
            self.cancel()
            raise

    def step(self) -> bool:
        try:
            return self.sim.step()
        except BaseException:
            self.cancel()
            raise

    def cancel(self) -> None:
        for w in self.writers:
            w.abort()
        if self.sim is not None:
            self.sim.close()

    def finish(self) -> dict:
        """Commit the files (sidecars first) and add or update each object's Mesh Cache modifier."""
        from .. import solver
        from ..solver.io_pc2 import write_sidecar

        sim = self.sim
        if not sim.finished:
            raise BakeError("the bake is not finished")
        first, last = sim.first, sim.last
        try:
            # A PC2 without its sidecar is still usable; a stray sidecar is harmless.
            sidecars = []
            for run, stem in zip(sim.runs, self.stems):
                extra = {"solver_version": solver.__version__, "object": run.obj.name, "frame_start": first,
                         "frame_end": last, "num_points": run.reader.n, "pc2": f"{stem}.pc2",
                         "warnings": run.warnings}
                if run.coupling is not None:
                    extra["network"] = {"mode": run.coupling.mode, "events": list(run.coupling.events),
                                        "frames": [r.to_dict() for r in run.coupling.history]}
                sidecars.append(write_sidecar(self.folder / f"{stem}.json", run.settings, run.cloth.history, extra))
            paths = [w.close() for w in self.writers]
        except BaseException:
            self.cancel()
            raise
        folder_setting = self.context.scene.selvedge.cache_folder
        for run, pc2, sidecar in zip(sim.runs, paths, sidecars):
            obj = run.obj
            mod = _cache_modifier(obj)
            mod.cache_format = "PC2"
            mod.filepath = _blend_relative(pc2, folder_setting)
            mod.frame_start = first
            mod.frame_scale = 1.0
            mod.time_mode = "FRAME"
            mod.play_mode = "SCENE"
            mod.deform_mode = "OVERWRITE"
            mod.interpolation = "LINEAR"
            mod.factor = 1.0
            mod.forward_axis, mod.up_axis = "POS_Y", "POS_Z"  # PC2 holds object-space positions: no axis change
            mod.show_viewport = mod.show_render = True
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
        mod = obj.modifiers.new(MODIFIER_NAME, "MESH_CACHE")
    if hasattr(mod, "use_pin_to_last"):
        mod.use_pin_to_last = True
    return mod


# ----------------------------------------------------------------------------------------------
# Bake to shape keys
def _baked_shape_key_names(obj) -> list[str]:
    raw = obj.selvedge.bake_shape_keys
    return json.loads(raw) if raw else []


def _fcurves(id_data):
    """The F-curves animating ``id_data`` (slotted actions in 4.4+, ``action.fcurves`` before)."""
    anim = id_data.animation_data
    if anim is None or anim.action is None:
        return None
    try:
        from bpy_extras.anim_utils import action_get_channelbag_for_slot

        bag = action_get_channelbag_for_slot(anim.action, anim.action_slot)
        return bag.fcurves if bag is not None else None
    except (ImportError, AttributeError):
        return anim.action.fcurves


def _animation_state(id_data) -> dict:
    """Which animation data, action and slot ``id_data`` uses now (slots: Blender 4.4+)."""
    anim = id_data.animation_data
    action = anim.action if anim is not None else None
    slot = getattr(anim, "action_slot", None) if action is not None else None
    return {"animdata": anim is not None, "action": action.name if action else "",
            "slot": slot.identifier if slot is not None else "",
            "actions": [a.name for a in bpy.data.actions],
            "slots": [s.identifier for s in getattr(action, "slots", ())] if action else []}


def _animation_added(before: dict, id_data) -> dict:
    """What keyframing added: animation data, a new action, or a new slot in a shared action."""
    after = _animation_state(id_data)
    return {"animdata_created": not before["animdata"], "action": after["action"],
            "action_created": bool(after["action"]) and after["action"] not in before["actions"],
            "slot": after["slot"], "slot_created": bool(after["slot"]) and after["slot"] not in before["slots"]
            and after["action"] in before["actions"]}


def _remove_added_animation(id_data, added: dict) -> None:
    """Undo :func:`_animation_added` once our F-curves are gone (only parts that are now empty)."""
    anim = id_data.animation_data
    if anim is None or not added:
        return
    fcurves = _fcurves(id_data)
    if fcurves is not None and len(fcurves):
        return  # someone else animates this data too: keep it
    action = bpy.data.actions.get(added["action"]) if added["action"] else None
    if added["animdata_created"]:
        id_data.animation_data_clear()
    elif action is not None and anim.action == action:
        anim.action = None
    if action is None:
        return
    if added["action_created"] and action.users == 0:
        bpy.data.actions.remove(action)
    elif added["slot_created"] and hasattr(action, "slots"):
        slot = action.slots.get(added["slot"])
        if slot is not None:
            action.slots.remove(slot)


class ShapeKeyBake:
    """A shape-key bake in progress: :meth:`step` until False, then :meth:`finish`; or :meth:`cancel`.

    Frames are kept in memory; the object is only edited by :meth:`finish`.
    """

    def __init__(self, context, log=print):
        self.context, self.log = context, log
        scene = context.scene
        objects = _check_objects(scene)
        first, last = frame_range(scene.selvedge, scene.frame_start, scene.frame_end)
        self.samples = [np.empty((last - first + 1, len(o.data.vertices), 3), dtype=np.float32) for o in objects]
        self.sim = Simulation(context, self._store, log)

    def _store(self, index, sample, positions):
        self.samples[index][sample] = positions

    def step(self) -> bool:
        return self.sim.step()

    def cancel(self) -> None:
        self.sim.close()

    def finish(self) -> dict:
        sim = self.sim
        if not sim.finished:
            raise BakeError("the bake is not finished")
        first, last = sim.first, sim.last
        result = {}
        for run, frames in zip(sim.runs, self.samples):
            result[run.obj.name] = _write_shape_keys(run.obj, frames, first, last, self.log)
        self.context.view_layer.update()
        self.log(f"Selvedge: baked {len(sim.runs)} object(s) to shape keys, frames {first}-{last}")
        return result


def _write_shape_keys(obj, frames, first, last, log) -> list[str]:
    free_shape_keys(obj)
    if obj.data.shape_keys is None:
        obj.shape_key_add(name="Basis", from_mix=False)
        obj.selvedge.bake_created_basis = True
    key = obj.data.shape_keys
    animation_before = _animation_state(key)
    names = []
    for sample, frame in enumerate(range(first, last + 1)):
        block = obj.shape_key_add(name=f"{SHAPE_KEY_PREFIX}.{frame:04d}", from_mix=False)
        block.data.foreach_set("co", frames[sample].ravel())
        names.append(block.name)
        # A hat function: 1 at its frame, 0 at the neighbours (none before the first / after the last
        # frame, so the first and last states hold outside the range).
        for f, value in ((frame - 1, 0.0), (frame, 1.0), (frame + 1, 0.0)):
            if first <= f <= last:
                block.value = value
                block.keyframe_insert("value", frame=f)
        block.value = 0.0
    obj.selvedge.bake_shape_keys = json.dumps(names)
    obj.selvedge.bake_shape_key_animation = json.dumps(_animation_added(animation_before, key))
    fcurves = _fcurves(key)
    wanted = {f'key_blocks["{n}"].value' for n in names}
    for fc in fcurves or ():
        if fc.data_path in wanted:
            for point in fc.keyframe_points:
                point.interpolation = "LINEAR"
    if any(m.show_viewport and m.type != "MESH_CACHE" for m in obj.modifiers):
        log(f"Selvedge warning: {obj.name} has modifiers after its shape keys; they deform the baked shapes again")
    return names


def bake_shape_keys(context, log=print) -> dict:
    """Bake every cloth object to one shape key per frame with keyframed values.

    Existing shape keys are kept; a previous Selvedge shape-key bake is replaced. Returns
    ``{object name: [shape key names]}``.
    """
    job = ShapeKeyBake(context, log)
    while job.step():
        pass
    return job.finish()


def free_shape_keys(obj) -> int:
    """Remove the shape keys, F-curves and action a shape-key bake created; returns how many keys went."""
    names = _baked_shape_key_names(obj)
    key = obj.data.shape_keys if obj.type == "MESH" else None
    removed = 0
    if key is not None and names:
        fcurves = _fcurves(key)
        paths = {f'key_blocks["{n}"].value' for n in names}
        for fc in [fc for fc in (fcurves or ()) if fc.data_path in paths]:
            fcurves.remove(fc)
        for name in names:
            block = key.key_blocks.get(name)
            if block is not None:
                obj.shape_key_remove(block)
                removed += 1
        raw = obj.selvedge.bake_shape_key_animation
        _remove_added_animation(key, json.loads(raw) if raw else {})
    key = obj.data.shape_keys if obj.type == "MESH" else None
    if obj.selvedge.bake_created_basis and key is not None and len(key.key_blocks) == 1:
        obj.shape_key_clear()
    obj.selvedge.bake_shape_keys = ""
    obj.selvedge.bake_created_basis = False
    obj.selvedge.bake_shape_key_animation = ""
    return removed


# ----------------------------------------------------------------------------------------------
# Free
def free_bake(obj) -> list[str]:
    """Remove what bakes created on ``obj``: our Mesh Cache modifier, our cache files, our shape keys."""
    done = []
    s = obj.selvedge
    mod = obj.modifiers.get(s.bake_modifier) if s.bake_modifier else None
    if mod is not None and mod.type == "MESH_CACHE":
        obj.modifiers.remove(mod)
        done.append(f"modifier {s.bake_modifier!r}")
    for attribute in ("bake_cache_file", "bake_sidecar_file"):
        stored = getattr(s, attribute)
        if stored:
            path = Path(bpy.path.abspath(stored))
            if path.is_file():
                path.unlink()
                done.append(str(path))
            setattr(s, attribute, "")
    s.bake_modifier = ""
    removed = free_shape_keys(obj)
    if removed:
        done.append(f"{removed} shape keys")
    return done
