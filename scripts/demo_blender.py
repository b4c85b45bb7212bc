"""Headless Blender demo (the main job): a rigged body dressed in two garments, baked with the Selvedge operators.

Builds the scene from primitives with the ``bpy`` module (no Blender UI): a two-bone rigged
cylinder torso whose collider is one capsule per bone (``selvedge.fit_capsules_to_bones``), a
sphere head parented to the upper bone (``selvedge.fit_collider(shape='SPHERE')``), and two
garments, open tubes shaped to the body (``GARMENTS``) and pinned at their necklines, parented to
the upper bone so the pins follow the animation: a ``Shirt`` over the shoulders down to the hips
(layer 0) and a ``Cape`` flaring over it (layer 1, ``--layers 1`` leaves it out). Both
self-collide and collide with each other (one collision world). The rig bends and turns while the
cloth drapes. Then it bakes with ``bpy.ops.selvedge.bake_cache()``, saves ``demo.blend`` (Mesh
Cache modifier configured, cache path relative to the .blend), counts the crossing triangle pairs
of the played-back layers at every frame with Blender's ``BVHTree.overlap`` and the closest any
cloth vertex comes to the body's capsules and head, renders two PNGs (front and back) with Cycles
on the CPU and prints a summary (last line: JSON).

Run: ``.venv/bin/python scripts/demo_blender.py [--frames 48] [--resolution 32] [--out out/demo_blender]``
with ``requirements/demo.txt`` installed; or ``blender -b -P scripts/demo_blender.py -- [options]``.
Outputs in ``--out``: ``demo.blend``, ``Shirt.pc2``, ``Shirt.json`` (sidecar), ``Cape.pc2``, ``Cape.json``,
``preview.png`` (front), ``preview_back.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "devtools"))
import bpy
import numpy as np
from cloth_checks import cloth_world, crossing_pairs, distance_to_body
from selvedge_import import import_selvedge

selvedge = import_selvedge()

#: The body, in metres (scene unit scale 1). The upper bone's capsule ends in a dome of the torso's
#: radius around SHOULDER_Z: the shoulders the garments hang from.
TORSO_RADIUS, TORSO_BOTTOM, BONE_LENGTH = 0.15, 0.8, 0.3
SHOULDER_Z = TORSO_BOTTOM + 2 * BONE_LENGTH
HEAD_RADIUS, HEAD_Z = 0.1, 1.52
#: The garments, surfaces of revolution around the body's axis, each a profile (radius, height) from
#: its neckline (pinned) down: an arc over the shoulder dome ``ease`` outside the torso's radius, from
#: ``neck_deg`` off the vertical (clear of the head) to the horizontal, then straight lines to the hem.
#: ``around_deg``: the arc it covers around the axis (None: closed all round; the front is -Y).
#: Inner (layer 0): a tube-like shirt down to the hips; outer (layer 1): a cape over the shoulders
#: and the back, open at the front, flaring a little.
GARMENTS = (
    {"name": "Shirt", "ease": 0.012, "neck_deg": 50.0, "below": ((0.162, 0.9),), "around_deg": None},
    {"name": "Cape", "ease": 0.035, "neck_deg": 40.0, "below": ((0.26, 0.98),), "around_deg": (-40.0, 220.0)},
)
#: Base colours (RGBA): the layers (inner blue, outer dark red) and the body.
LAYER_COLOURS = ((0.12, 0.25, 0.55, 1.0), (0.45, 0.06, 0.06, 1.0))
SKIN_COLOUR = (0.8, 0.62, 0.5, 1.0)


def build_scene(frames: int, resolution: int, substeps: int, layers: int = 2):
    """The demo scene in a fresh file; returns (rig, body, head, [shirt, cape])."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if not hasattr(bpy.types.Object, "selvedge"):
        selvedge.register()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 1 + frames
    scene.render.fps = 24
    scene.selvedge.substeps = substeps
    collection = scene.collection

    # Rig: Lower (0.8-1.1 m) and Upper (1.1-1.4 m) bones along +Z.
    rig = bpy.data.objects.new("Rig", bpy.data.armatures.new("Rig"))
    collection.objects.link(rig)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    bones = rig.data.edit_bones
    lower = bones.new("Lower")
    lower.head, lower.tail = (0, 0, TORSO_BOTTOM), (0, 0, TORSO_BOTTOM + BONE_LENGTH)
    upper = bones.new("Upper")
    upper.head, upper.tail = lower.tail, (0, 0, SHOULDER_Z)
    upper.parent, upper.use_connect = lower, True
    bpy.ops.object.mode_set(mode="OBJECT")

    # Torso: an open cylinder skinned to both bones (weights blend around the joint).
    segments, rings = 16, 9
    z = np.linspace(TORSO_BOTTOM, SHOULDER_Z, rings)
    a = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    verts = [(TORSO_RADIUS * math.cos(t), TORSO_RADIUS * math.sin(t), h) for h in z for t in a]
    mesh = bpy.data.meshes.new("Body")
    mesh.from_pydata(verts, [], _tube_quads(segments, rings, closed=True))
    body = bpy.data.objects.new("Body", mesh)
    collection.objects.link(body)
    body.parent = rig
    joint = TORSO_BOTTOM + BONE_LENGTH
    g_lower, g_upper = body.vertex_groups.new(name="Lower"), body.vertex_groups.new(name="Upper")
    for i, (_, _, h) in enumerate(verts):
        w = min(max((h - joint + 0.05) / 0.1, 0.0), 1.0)
        if w < 1.0:
            g_lower.add([i], 1.0 - w, "REPLACE")
        if w > 0.0:
            g_upper.add([i], w, "REPLACE")
    body.modifiers.new("Armature", "ARMATURE").object = rig

    # Head: a UV sphere riding on the upper bone.
    bpy.ops.mesh.primitive_uv_sphere_add(radius=HEAD_RADIUS, location=(0.0, 0.0, HEAD_Z), segments=24, ring_count=12)
    head = bpy.context.object
    head.name = "Head"
    _parent_to_bone(head, rig, "Upper")
    skin = _material("Skin", SKIN_COLOUR)
    body.data.materials.append(skin)
    head.data.materials.append(skin)

    # Cloth: the garments around the torso, pinned at their necklines, riding on the upper bone.
    cloths = [_garment(garment, resolution, layer, rig) for layer, garment in enumerate(GARMENTS[:layers])]

    # Colliders with the Selvedge operators: capsules from the bones, a sphere fitted to the head.
    bpy.context.view_layer.objects.active = body
    _ok(bpy.ops.selvedge.fit_capsules_to_bones(), "fit_capsules_to_bones")
    bpy.ops.object.select_all(action="DESELECT")
    head.select_set(True)
    bpy.context.view_layer.objects.active = head
    _ok(bpy.ops.selvedge.fit_collider(shape="SPHERE"), "fit_collider")

    # Animation: the body leans and the chest bends over the bake (smooth keys, rest at frame 1).
    last = scene.frame_end
    for frame, lean, bend, turn in ((1, 0.0, 0.0, 0.0), (last, 8.0, 15.0, 20.0)):
        for name, angles in (("Lower", (0.0, math.radians(lean), 0.0)), ("Upper", (math.radians(bend), 0.0, 0.0))):
            pb = rig.pose.bones[name]
            pb.rotation_mode = "XYZ"
            pb.rotation_euler = angles
            pb.keyframe_insert("rotation_euler", frame=frame)
        rig.rotation_euler = (0.0, 0.0, math.radians(turn))
        rig.keyframe_insert("rotation_euler", frame=frame)
    for obj in (body, head, *cloths):
        obj.data.shade_smooth()
    scene.frame_set(1)
    return rig, body, head, cloths


def _tube_quads(segments: int, rings: int, closed: bool) -> list[tuple[int, int, int, int]]:
    """Quads of a tube of ``rings`` rings of ``segments`` vertices (ring-major), open at both ends;
    ``closed``: the last vertex of a ring joins the first (else the tube is slit along its length)."""
    return [
        (
            r * segments + i,
            r * segments + (i + 1) % segments,
            (r + 1) * segments + (i + 1) % segments,
            (r + 1) * segments + i,
        )
        for r in range(rings - 1)
        for i in range(segments if closed else segments - 1)
    ]


def garment_profile(garment: dict, segments: int) -> np.ndarray:
    """(rings, 2) radius and height of each ring of ``garment``, neckline first, spaced along the
    profile about as far apart as its vertices around the body (near-square quads)."""
    radius = TORSO_RADIUS + garment["ease"]
    arc = np.radians(np.linspace(garment["neck_deg"], 90.0, 64))
    points = np.vstack(
        [np.column_stack((radius * np.sin(arc), SHOULDER_Z + radius * np.cos(arc))), np.array(garment["below"])]
    )
    along = np.concatenate(([0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))))
    rings = max(3, round(along[-1] / (2 * np.pi * radius / segments)) + 1)
    s = np.linspace(0.0, along[-1], rings)
    return np.column_stack((np.interp(s, along, points[:, 0]), np.interp(s, along, points[:, 1])))


def _garment(garment: dict, segments: int, layer: int, rig):
    """A cotton garment of ``segments`` vertices around (``garment_profile``), its neckline ring pinned,
    on garment layer ``layer``, self-colliding; U runs around it (warp), V down (weft)."""
    profile = garment_profile(garment, segments)
    closed = garment["around_deg"] is None
    if closed:
        a = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    else:
        a = np.radians(np.linspace(*garment["around_deg"], segments))
    verts = [(r * math.cos(t), r * math.sin(t), h) for r, h in profile for t in a]
    faces = _tube_quads(segments, len(profile), closed)
    mesh = bpy.data.meshes.new(garment["name"])
    mesh.from_pydata(verts, [], faces)
    uv = mesh.uv_layers.new(name="UVMap").data
    corners = ((0, 0), (1, 0), (1, 1), (0, 1))  # a quad's corners in (around, down) steps
    columns = segments if closed else segments - 1
    for k, face in enumerate(mesh.polygons):
        r, i = divmod(k, columns)
        for loop, (du, dv) in zip(face.loop_indices, corners):
            uv[loop].uv = ((i + du) / columns, 1.0 - (r + dv) / (len(profile) - 1))
    cloth = bpy.data.objects.new(garment["name"], mesh)
    bpy.context.scene.collection.objects.link(cloth)
    cloth.vertex_groups.new(name="Pins").add(list(range(segments)), 1.0, "REPLACE")
    _parent_to_bone(cloth, rig, "Upper")
    s = cloth.selvedge
    s.role = "CLOTH"
    s.material_preset = "cotton"
    s.pin_group = "Pins"
    s.collision_layer = layer
    s.use_self_collision = True
    # a colour per layer, so the renders tell them apart
    cloth.data.materials.append(_material(garment["name"], LAYER_COLOURS[layer % len(LAYER_COLOURS)]))
    return cloth


def _material(name: str, colour) -> bpy.types.Material:
    """A Principled BSDF material of base colour ``colour`` (RGBA)."""
    material = bpy.data.materials.new(name)
    if bpy.app.version < (5, 0, 0):  # node materials by default from 5.0 (the switch goes in 6.0)
        material.use_nodes = True
    bsdf = material.node_tree.nodes.get("Principled BSDF") if material.node_tree else None
    if bsdf is not None:
        bsdf.inputs["Base Color"].default_value = colour
    return material


def _parent_to_bone(obj, rig, bone):
    """Parent keeping the current world transform (a bone child is placed relative to the bone's tail)."""
    world = obj.matrix_world.copy()
    obj.parent, obj.parent_type, obj.parent_bone = rig, "BONE", bone
    bpy.context.view_layer.update()
    obj.matrix_world = world


def _ok(result, what):
    if result != {"FINISHED"}:
        raise RuntimeError(f"bpy.ops.selvedge.{what} returned {result}")


#: Where the two renders look from (front, back), at the chest.
CAMERA_LOCATIONS = ((1.0, -1.7, 1.45), (-1.0, 1.7, 1.45))


def place_camera(cam, location) -> None:
    cam.location = location
    cam.rotation_euler = _look_rotation(np.array([0.0, 0.0, 1.18]) - np.array(location))


def add_camera_and_light(scene, width: int, height: int, samples: int, path: Path):
    cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(cam)
    place_camera(cam, CAMERA_LOCATIONS[0])
    scene.camera = cam
    sun = bpy.data.objects.new("Sun", bpy.data.lights.new("Sun", "SUN"))
    sun.data.energy = 3.0
    sun.rotation_euler = (math.radians(40), math.radians(10), math.radians(30))
    scene.collection.objects.link(sun)
    if scene.world is None:
        scene.world = bpy.data.worlds.new("World")
    scene.world.color = (0.2, 0.22, 0.25)
    r = scene.render
    r.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = samples
    scene.cycles.use_denoising = False
    r.resolution_x, r.resolution_y, r.resolution_percentage = width, height, 100
    r.image_settings.file_format = "PNG"
    r.filepath = str(path)


def _look_rotation(direction):
    from mathutils import Vector

    return Vector(direction).to_track_quat("-Z", "Y").to_euler()


def capsules_and_sphere(rig, head, depsgraph):
    """The body's collision shapes from Blender's own pose: [(a, b, radius)] segments (a == b: sphere)."""
    body_radius = TORSO_RADIUS
    rig_eval = rig.evaluated_get(depsgraph)
    world = np.array(rig_eval.matrix_world)
    shapes = []
    for pb in rig_eval.pose.bones:
        shapes.append(
            (
                world[:3, :3] @ np.array(pb.head) + world[:3, 3],
                world[:3, :3] @ np.array(pb.tail) + world[:3, 3],
                body_radius,
            )
        )
    centre = np.array(head.evaluated_get(depsgraph).matrix_world.translation)
    shapes.append((centre, centre, HEAD_RADIUS))
    return shapes


def main(argv=None) -> int:
    if argv is None:
        argv = sys.argv[sys.argv.index("--") + 1 :] if "--" in sys.argv else sys.argv[1:]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=48, help="simulated frames (default 48)")
    parser.add_argument("--resolution", type=int, default=32, help="garment vertices around the body (default 32)")
    parser.add_argument(
        "--substeps", type=int, default=10, help="solver substeps per frame (default 10, the scene default)"
    )
    parser.add_argument("--width", type=int, default=320, help="preview width in pixels (default 320)")
    parser.add_argument("--height", type=int, default=240, help="preview height in pixels (default 240)")
    parser.add_argument("--samples", type=int, default=8, help="Cycles samples (default 8)")
    parser.add_argument("--layers", type=int, choices=(1, 2), default=2, help="cloth layers (default 2: Shirt, Cape)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "out" / "demo_blender", help="output folder (default out/demo_blender)"
    )
    args = parser.parse_args(argv)
    if args.frames < 1 or args.resolution < 3:
        parser.error("--frames must be >= 1 and --resolution >= 3")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    blend, png, png_back = out / "demo.blend", out / "preview.png", out / "preview_back.png"

    rig, body, head, cloths = build_scene(args.frames, args.resolution, args.substeps, args.layers)
    cloth = cloths[0]
    scene = bpy.context.scene
    add_camera_and_light(scene, args.width, args.height, args.samples, png)
    bpy.context.preferences.filepaths.save_version = 0  # no demo.blend1 backups
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))  # the cache folder is relative to the .blend
    scene.selvedge.cache_folder = "//"

    # Numba compiles the solver on the first run on a machine (cached in the user cache folder, loaded
    # from there later): timed apart, so ms/frame and the bake time are the solver's own.
    from importlib import import_module

    dependencies = import_module(selvedge.__name__ + ".dependencies")
    cold = not dependencies.solver_compiled_before()
    compile_s = dependencies.compile_solver()
    t0 = time.perf_counter()
    _ok(bpy.ops.selvedge.bake_cache(), "bake_cache")
    bake_s = time.perf_counter() - t0
    sidecar_path = Path(bpy.path.abspath(cloth.selvedge.bake_cache_file)).with_suffix(".json")
    sidecar = json.loads(sidecar_path.read_text())
    strain_max = max(f["strain_max"] for f in sidecar["frames"])
    solver_ms = float(np.mean([f["timings_ms"]["total"] for f in sidecar["frames"]]))
    cloth_contacts = max(f["contacts"].get("cloth_cloth_pushing_pairs_max", 0) for f in sidecar["frames"])

    # Playback through the Mesh Cache modifier: the closest any cloth vertex comes to the body, and
    # the crossing triangle pairs of the layers (Blender's own overlap test) at every frame.
    closest, crossings = math.inf, []
    for frame in range(scene.frame_start, scene.frame_end + 1):
        scene.frame_set(frame)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        shapes = capsules_and_sphere(rig, head, depsgraph)
        for obj in cloths:
            closest = min(closest, float(distance_to_body(cloth_world(obj, depsgraph), shapes).min()))
        crossings.append(crossing_pairs(cloths, depsgraph))
    scene.frame_set(scene.frame_end)
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))

    t0 = time.perf_counter()
    bpy.ops.render.render(write_still=True)
    scene.render.filepath = str(png_back)
    place_camera(scene.camera, CAMERA_LOCATIONS[1])
    bpy.ops.render.render(write_still=True)
    render_s = time.perf_counter() - t0
    summary = {
        "frames": args.frames,
        "vertices": len(cloth.data.vertices),
        "layers": [o.name for o in cloths],
        "layer_vertices": [len(o.data.vertices) for o in cloths],
        "crossing_pairs_max": max(crossings),
        "cloth_cloth_contacts_max": cloth_contacts,
        "substeps": args.substeps,
        "ms_per_frame": solver_ms,
        "bake_s": bake_s,
        "strain_max": strain_max,
        "compile_s": compile_s,
        "compile_cold": cold,
        "min_distance_to_body_m": closest,
        "render_s": render_s,
        "blend": str(blend),
        "pc2": str(Path(bpy.path.abspath(cloth.selvedge.bake_cache_file))),
        "sidecar": str(sidecar_path),
        "png": str(png),
        "png_back": str(png_back),
    }
    print(
        f"Selvedge demo: {args.frames} frames of {len(cloths)} layer(s) ({', '.join(summary['layers'])}, "
        f"{'+'.join(map(str, summary['layer_vertices']))} vertices) on a rigged body, "
        f"{solver_ms:.1f} ms/frame in the solver ({bake_s:.1f} s for the whole bake), "
        f"max strain {100 * strain_max:.2f}%, closest approach to the body {1e3 * closest:.2f} mm, "
        f"crossing triangle pairs {max(crossings)} at most in a frame (BVHTree.overlap), render {render_s:.1f} s"
    )
    print(
        f"Selvedge demo: solver {'compiled by Numba (first run on this machine)' if cold else 'loaded from the cache'}"
        f" in {compile_s:.1f} s before the bake ({dependencies.solver_cache_folder()})"
    )
    print(f"Selvedge demo: wrote {blend}, {summary['pc2']}, {sidecar_path}, {png}, {png_back}")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    from importlib import import_module

    try:
        status = main()
    except RuntimeError as error:  # operator failures arrive as RuntimeError with Blender's report
        print(f"Selvedge demo failed: {error}", file=sys.stderr)
        status = 1
    # The 4.x bpy modules crash (4.2) or hang (4.5) in their own teardown at exit: see module_exit.py.
    import_module(selvedge.__name__ + ".module_exit").exit_process(status)
