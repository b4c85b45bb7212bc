"""Colliders: every object with the role Collider becomes solver proxies, posed per frame.

Read from the evaluated depsgraph at every frame: analytic proxies (plane, sphere, capsule, box
fitted to the object's bounds, or one capsule per deform bone) follow the object's (bone's)
world transform, with the first frame's scale folded into their size; Mesh proxies follow the
evaluated mesh's world-space vertices (fixed topology). The physics of a contact (friction
combination, closed-mesh orientation) is the solver's: ``solver.collisions.combined_friction``
and ``solver.collisions.orient_closed_mesh``; quaternions are ``solver.transforms``. Lengths
are scaled by the scene's unit scale; thicknesses are metres.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ...solver.transforms import quaternion_multiply
from ..errors import BakeError

if TYPE_CHECKING:
    import bpy


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
            raise BakeError(
                f"collider {obj.name}: 'Fit Capsules to Bones' is on but the object has no Armature "
                "modifier (or armature parent) with an armature object; rig it or turn the option off"
            )
        return "BONES"
    kind = s.collider_proxy
    if kind == "AUTO":
        return "MESH" if obj.type == "MESH" else "BOX"
    if kind == "MESH" and obj.type != "MESH":
        raise BakeError(
            f"collider {obj.name} is not a mesh (type {obj.type}) so it cannot use the Mesh proxy; "
            "pick Sphere, Capsule, Box or Plane"
        )
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
    if (kind in ("SPHERE", "CAPSULE") and not fit["radius"] > 0.0) or (kind == "BOX" and not (half > 0.0).all()):
        raise BakeError(
            f"collider {obj_eval.name}: its bounds are flat or empty ({2 * half} world units), so a "
            f"{kind.lower()} cannot be fitted; use the Plane or Mesh proxy"
        )
    return fit


def bone_capsules(obj) -> tuple[bpy.types.Object, list[dict], list[str]]:
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
        raise BakeError(
            f"{obj.name}: no deform bone of {armature.name} has vertices weighted to it; weight-paint "
            "the mesh (vertex groups named after the bones) or turn 'Fit Capsules to Bones' off"
        )
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
        out.append((centre, quaternion_multiply(rot, _Z_TO_BONE_Y), scale))
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
                raise BakeError(
                    f"collider {obj.name}: the mesh has no faces, so the cloth has nothing to collide "
                    "with; add faces or use a Sphere, Capsule, Box or Plane proxy"
                )
            self.triangles = self.triangles.reshape(-1, 3)
            self._buffer = np.empty(3 * self.n, dtype=np.float32)
            self._tri_buffer = np.empty(self.triangles.size, dtype=np.int32)
            self.names = [obj.name]
        else:
            self.fit = (
                fit_bounds(self.kind, obj_eval)
                if self.kind != "PLANE"
                else {"center": np.zeros(3), "scale": _decompose(obj_eval.matrix_world)[2]}
            )
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
                        "use an analytic proxy"
                    )
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
            raise BakeError(
                f"collider {self.name}: the {what} scale changes during the bake (frame {frame}: "
                f"{tuple(np.round(scale, 6))}, first frame {tuple(np.round(scale0, 6))}); analytic "
                "proxies keep their size, so animate location and rotation only or use the Mesh proxy"
            )

    def proxies(self, cloth_friction_static: float, cloth_friction_kinetic: float) -> list:
        """Solver proxies (metres) at the pose last read, for one cloth (a mesh's is shared, see below).

        Friction: ``solver.collisions.combined_friction`` of the collider's and the cloth's
        coefficients; a closed mesh is wound outwards and one-sided (``orient_closed_mesh``).
        """
        from ...solver.collisions import (
            Box,
            Capsule,
            Plane,
            Sphere,
            TriangleMesh,
            combined_friction,
            orient_closed_mesh,
        )

        u = self.unit
        mu_s, mu_k = combined_friction(self.friction, cloth_friction_static, cloth_friction_kinetic)
        common = {"thickness": self.thickness, "friction_static": mu_s, "friction_kinetic": mu_k}
        if self.kind == "MESH":
            # one proxy per collider for every cloth, each with its friction: the body's data (spheres,
            # grids, a standing body's cell lists) is then built once for all (solver.collisions.mesh_body)
            vertices = self.vertices * u
            shared = getattr(self, "_mesh_proxy", None)
            if shared is None or not np.array_equal(shared.vertices, vertices):
                triangles, one_sided = orient_closed_mesh(self.vertices, self.triangles)
                shared = self._mesh_proxy = TriangleMesh(
                    vertices, triangles, name=self.name, one_sided=one_sided, **common
                )
            return [shared.with_friction(mu_s, mu_k)]
        if self.kind == "BONES":
            s0 = [float(np.abs(s).max()) for s in self.scale0]
            return [
                Capsule(c["radius"] * s * u, 0.5 * c["length"] * s * u, name=name, position=p * u, rotation=q, **common)
                for c, s, name, (p, q) in zip(self.capsules, s0, self.names, self.poses)
            ]
        ((p, q),) = self.poses
        if self.kind == "PLANE":
            return [Plane(name=self.name, position=p * u, rotation=q, **common)]
        if self.kind == "SPHERE":
            return [Sphere(self.fit["radius"] * u, name=self.name, position=p * u, rotation=q, **common)]
        if self.kind == "CAPSULE":
            return [
                Capsule(
                    self.fit["radius"] * u,
                    self.fit["half_length"] * u,
                    name=self.name,
                    position=p * u,
                    rotation=q,
                    **common,
                )
            ]
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


def read_colliders(scene, depsgraph, unit: float) -> list[ColliderSource]:
    """One :class:`ColliderSource` per collider object of ``scene``, posed at the depsgraph's frame."""
    return [ColliderSource(o, depsgraph, unit) for o in collider_objects(scene)]
