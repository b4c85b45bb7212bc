"""Farm task: render a chunk of frames of one shot from its baked Selvedge caches (the Render step).

Run by Blender (what a farm worker does)::

    blender -b --python-exit-code 1 -P render_frames.py -- --project /mnt/proj --shots "shots/a.blend" \
        --shot-count 1 --shot-index 1 --chunk-start 1 --chunk-size 10 --frame-end 48 \
        --cache "//cache/{shot}" --output "//render/{shot}/{shot}_####"

or by a Python that has the ``bpy`` module. Only Blender itself is needed (the Selvedge extension
is not): the shot is opened, every cache of the shot's cache folder (``<object>.pc2`` with its
``<object>.json`` sidecar, written by the Bake step) is attached to its object through a Mesh
Cache modifier (the one the bake saved, or a new one; set as ``operators/mesh_cache.py`` says, a
copy of which the Open Job Description template embeds beside this script), and frames ``chunk start .. min(chunk
start + chunk size - 1, frame end)`` are rendered with the shot's own render settings. The task
fails with a clear message, rendering nothing, when the cache folder holds no cache, a requested
object has no cache, or a cache does not cover the frames. The .blend file is not saved.

``--shots``, ``--shot-count`` and ``--shot-index`` select the shot as in ``bake_shot.py``.
"""

import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # farm_shots.py lies beside this script (and, on a worker, mesh_cache.py: embedded)
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "operators"))  # in the repository: operators/mesh_cache.py
from farm_shots import TaskError, resolve_shot, script_args, split_list  # noqa: E402
from mesh_cache import MODIFIER_NAME, configure_mesh_cache, new_cache_modifier  # noqa: E402


def parse(argv):
    p = argparse.ArgumentParser(prog="render_frames.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--project", required=True)
    p.add_argument("--shots", required=True)
    p.add_argument("--shot-count", type=int, required=True)
    p.add_argument("--shot-index", type=int, required=True)
    p.add_argument("--chunk-start", type=int, required=True, help="first frame of this task")
    p.add_argument("--chunk-size", type=int, required=True, help="frames per task")
    p.add_argument("--frame-end", type=int, required=True, help="last frame of the job")
    p.add_argument("--cache", default="//cache/{shot}")
    p.add_argument("--objects", default="", help="comma-separated cloth objects that must have a cache")
    p.add_argument(
        "--output",
        default="",
        help="render output path ('#' = frame digits, {shot} = the shot's "
        "name, '//' = next to the .blend); empty: the shot's own",
    )
    return p.parse_args(script_args(argv))


def blend_relative(path, blend):
    return os.path.join(os.path.dirname(blend), path[2:]) if path.startswith("//") else path


def find_caches(folder):
    """``[(object name, pc2 path, sidecar)]`` for the caches in ``folder`` (sidecars name their object)."""
    caches = []
    for sidecar_path in sorted(glob.glob(os.path.join(glob.escape(folder), "*.json"))):
        try:
            with open(sidecar_path, encoding="utf-8") as f:
                sidecar = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(sidecar, dict) or "object" not in sidecar or "pc2" not in sidecar:
            continue
        pc2 = os.path.join(folder, sidecar["pc2"])
        if os.path.isfile(pc2):
            caches.append((sidecar["object"], pc2, sidecar))
    return caches


def attach_caches(bpy, blend, cache_setting, frames, required):
    """Point each cached object's Mesh Cache modifier at its cache; returns ``[(object, pc2)]``."""
    folder = blend_relative(cache_setting, blend)
    caches = find_caches(folder) if os.path.isdir(folder) else []
    if not caches:
        raise TaskError(
            f"no Selvedge cache (<object>.pc2 + .json) in {folder}; did the Bake step of this shot succeed?"
        )
    by_object = {name: (pc2, sidecar) for name, pc2, sidecar in caches}
    missing = [name for name in required if name not in by_object]
    if missing:
        raise TaskError(f"no cache for {', '.join(map(repr, missing))} in {folder}")
    attached = []
    for name, (pc2, sidecar) in sorted(by_object.items()):
        obj = bpy.data.objects.get(name)
        if obj is None or obj.type != "MESH":
            raise TaskError(f"the cache {pc2} is for object {name!r}, which is not a mesh in this shot")
        first, last = int(sidecar["frame_start"]), int(sidecar["frame_end"])
        if frames[0] < first or frames[-1] > last:
            raise TaskError(
                f"the cache of {name!r} holds frames {first}-{last}; this task renders frames {frames[0]}-{frames[-1]}"
            )
        points = sidecar.get("num_points")
        if points is not None and int(points) != len(obj.data.vertices):
            raise TaskError(
                f"the cache of {name!r} has {points} points but the mesh has {len(obj.data.vertices)} "
                "vertices; re-bake the shot"
            )
        mod = next((m for m in obj.modifiers if m.type == "MESH_CACHE" and m.name == MODIFIER_NAME), None)
        if mod is None:
            mod = new_cache_modifier(obj)
        configure_mesh_cache(mod, pc2, first)  # the playback contract of Selvedge's own bake
        attached.append((name, pc2))
    return attached


def main(argv):
    opts = parse(argv)
    try:
        blend = resolve_shot(opts.project, opts.shots, opts.shot_count, opts.shot_index)
        name = os.path.splitext(os.path.basename(blend))[0]
        if opts.chunk_size < 1:
            raise TaskError(f"the chunk size must be at least 1, got {opts.chunk_size}")
        last = min(opts.chunk_start + opts.chunk_size - 1, opts.frame_end)
        if last < opts.chunk_start:
            raise TaskError(f"chunk start {opts.chunk_start} is after the last frame {opts.frame_end}")
        frames = list(range(opts.chunk_start, last + 1))
        if not os.path.isfile(blend):
            raise TaskError(f"shot {name}: {blend}: no such .blend file")
        print(f"selvedge render: shot {name} ({blend}), frames {frames[0]}-{frames[-1]}", flush=True)

        import bpy

        try:
            bpy.ops.wm.open_mainfile(filepath=blend, load_ui=False)
        except RuntimeError as error:
            raise TaskError(f"cannot open {blend}: {str(error).strip()}") from None
        scene = bpy.context.scene
        cache = opts.cache.replace("{shot}", name)
        for obj_name, pc2 in attach_caches(bpy, blend, cache, frames, split_list(opts.objects)):
            print(f"selvedge render: {obj_name} <- {pc2}", flush=True)
        if opts.output:
            scene.render.filepath = opts.output.replace("{shot}", name)
        scene.render.use_overwrite = True
        scene.frame_start, scene.frame_end = frames[0], frames[-1]
        if scene.camera is None:
            raise TaskError(f"shot {name} has no active camera")
        bpy.ops.render.render(animation=True, scene=scene.name)
        missing = []
        for frame in frames:
            path = bpy.path.abspath(scene.render.frame_path(frame=frame))
            if os.path.isfile(path):
                print(f"selvedge render: frame {frame} -> {path}", flush=True)
            else:
                missing.append(path)
        if missing:
            raise TaskError(f"Blender did not write {', '.join(missing)}")
    except TaskError as error:
        print(f"selvedge render: FAILED: {error}", flush=True)
        return 1
    print(f"selvedge render: shot {name}: {len(frames)} frame(s) rendered", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
