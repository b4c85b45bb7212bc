"""The Open Job Description template (farm/openjd/selvedge_bake_render.yaml), run for real.

``openjd check`` validates the template and ``openjd run`` (PyPI openjd-cli) executes it on two
tiny generated shots: a 5x5 grid cloth pinned at two corners, its object moved and rotated with
location keys, a camera, Cycles at 32x32 px and 1 sample. No ``blender`` executable exists here,
so BlenderExecutable points at a stand-in that runs ``blender -b --python-exit-code 1 -P SCRIPT --
ARGS`` with this Python and the bpy module: the command lines the template builds are the ones a
farm worker's Blender runs.

Checked: both shots' PC2 caches exist and, played back by Blender's own Mesh Cache modifier (the
bake saved the shots with the modifier set up), give the positions of a direct solver run of the
same inputs; every rendered frame exists as a 32x32 PNG and the cloth moves between frames. Bad
input: a missing .blend fails its Bake task with a clear message while the other shot's task
succeeds and no cache folder appears for it; a shot count that disagrees with the shot list, and a
Render task whose shot has no cache, fail clearly too.
"""

import importlib.util
import json
import math
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest
import yaml
from blender_scenes import evaluated_co, factory_scene, grid_cloth, save_shot, stacked_reference_run

from selvedge.solver.io_pc2 import read_pc2
from selvedge.solver.settings import SOLVE_MODES

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "farm" / "openjd" / "selvedge_bake_render.yaml"
OPENJD = Path(sys.executable).with_name("openjd")
FIRST, LAST, CHUNK = 1, 4, 2
SUBSTEPS = 4
SIZE = 32
#: Same bound as tests/blender/test_bake_operators.py: float32 positions of about 1 m, a few ulps.
ATOL = 1e-6

#: A stand-in for the `blender` executable: `blender -b [--python-exit-code N] -P SCRIPT -- ARGS`
#: runs SCRIPT in this Python (which has the bpy module) with Blender's sys.argv.
STAND_IN = """\
import runpy, sys, traceback
argv = sys.argv[1:]
own = argv[:argv.index("--")] if "--" in argv else argv
exit_code, script, i = 0, None, 0
while i < len(own):
    if own[i] == "-b":
        i += 1
    elif own[i] == "--python-exit-code":
        exit_code, i = int(own[i + 1]), i + 2
    elif own[i] in ("-P", "--python"):
        script, i = own[i + 1], i + 2
    else:
        sys.exit("blender stand-in: unsupported argument %r" % own[i])
sys.argv = ["blender", *argv]
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit:
    raise
except BaseException:
    traceback.print_exc()
    sys.exit(exit_code)
"""


def build_shot(path, preset, angle, motion):
    """Save a one-cloth shot with a camera and a tiny Cycles setup; returns the reference positions.

    The file says 10 substeps and frames 1-20: the job's parameters (4 substeps, frames 1-4) must win.
    """
    with factory_scene() as scene:
        start = np.array([0.0, 0.0, 1.0])
        obj, corners = grid_cloth(
            FIRST, LAST, substeps=SUBSTEPS, angle=angle, start=start, end=start + np.array(motion), preset=preset
        )
        expected = stacked_reference_run(obj, corners, FIRST, LAST)[0]

        camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
        scene.collection.objects.link(camera)
        camera.location = (0.0, -2.2, 1.4)
        camera.rotation_euler = (math.radians(80), 0.0, 0.0)
        scene.camera = camera
        light = bpy.data.objects.new("Sun", bpy.data.lights.new("Sun", "SUN"))
        scene.collection.objects.link(light)
        render = scene.render
        render.engine = "CYCLES"
        scene.cycles.samples = 1
        scene.cycles.device = "CPU"
        render.resolution_x = render.resolution_y = SIZE
        render.resolution_percentage = 100
        render.image_settings.file_format = "PNG"

        save_shot(path, FIRST)
        return expected


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    """Two shots, built once; each test copies them into a project folder of its own."""
    folder = tmp_path_factory.mktemp("shots")
    expected = {
        "shot_a": build_shot(folder / "shot_a.blend", "silk", 30.0, (0.12, 0.0, 0.05)),
        "shot_b": build_shot(folder / "shot_b.blend", "cotton", -20.0, (-0.05, 0.1, 0.08)),
    }
    assert np.abs(expected["shot_a"][-1] - expected["shot_b"][-1]).max() > 0.05  # a mix-up would show
    blender = folder / "blender"
    (folder / "blender_stand_in.py").write_text(STAND_IN)
    blender.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{folder / "blender_stand_in.py"}" "$@"\n')
    blender.chmod(0o755)
    return folder, expected, blender


def make_project(tmp_path, shots, names=("shot_a", "shot_b")):
    folder, _, _ = shots
    project = tmp_path / "project"
    (project / "shots").mkdir(parents=True)
    for name in names:
        shutil.copy(folder / f"{name}.blend", project / "shots" / f"{name}.blend")
    return project


def job_parameters(project, blender, shot_files, count, **extra):
    params = {
        "ProjectDir": str(project),
        "ShotFiles": shot_files,
        "ShotCount": count,
        "FrameStart": FIRST,
        "FrameEnd": LAST,
        "ChunkSize": CHUNK,
        "Substeps": SUBSTEPS,
        "SolveMode": "serial",
        "Threads": 1,
        "BlenderExecutable": str(blender),
        "SelvedgeDir": str(ROOT),
    }
    params.update(extra)
    return params


def openjd(*args, params=None, cwd=None, timeout=600):
    command = [str(OPENJD), *map(str, args)]
    if params is not None:
        command += ["--job-param", json.dumps(params)]
    env = dict(os.environ)
    env.pop("NUMBA_NUM_THREADS", None)
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    print("$", " ".join(command[:3]), "...\n", proc.stdout[-6000:], proc.stderr[-3000:])
    return proc


def load_farm_script(name):
    spec = importlib.util.spec_from_file_location(f"farm_{name}", ROOT / "farm" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def png_size(path):
    data = Path(path).read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_template_passes_openjd_check():
    proc = openjd("check", TEMPLATE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "passes validation checks" in proc.stdout


def test_embedded_scripts_are_the_farm_scripts():
    """The template carries farm/bake_shot.py and farm/render_frames.py, each step with the farm_shots.py
    they import written beside them (run farm/openjd/embed.py after edits)."""
    doc = yaml.safe_load(TEMPLATE.read_text())
    shared = (ROOT / "farm" / "farm_shots.py").read_text()
    for step, script, name in (("Bake", "bake_shot", "BakeShot"), ("Render", "render_frames", "RenderFrames")):
        files = {f["name"]: f for f in next(s for s in doc["steps"] if s["name"] == step)["script"]["embeddedFiles"]}
        assert files[name]["data"] == (ROOT / "farm" / f"{script}.py").read_text()
        assert files[name]["filename"] == f"{script}.py"
        assert files["FarmShots"]["data"] == shared and files["FarmShots"]["filename"] == "farm_shots.py"
        if step == "Render":  # the Mesh Cache playback contract the bake sets, for a worker without Selvedge
            assert files["MeshCache"]["data"] == (ROOT / "operators" / "mesh_cache.py").read_text()
            assert files["MeshCache"]["filename"] == "mesh_cache.py"
    assert [s["name"] for s in doc["steps"]] == ["Bake", "Render"]
    assert doc["steps"][1]["dependencies"] == [{"dependsOn": "Bake"}]
    defaults = {p["name"]: p.get("default") for p in doc["parameterDefinitions"]}
    assert defaults["CacheFolder"].startswith("//") and defaults["RenderOutput"].startswith("//")
    # the solve modes offered are the solver's, after the shot's own setting
    modes = next(p for p in doc["parameterDefinitions"] if p["name"] == "SolveMode")["allowedValues"]
    assert modes == ["scene", *SOLVE_MODES]


def test_bake_and_render_two_shots_with_openjd_run(tmp_path, shots):
    _, expected, blender = shots
    project = make_project(tmp_path, shots)
    params = job_parameters(project, blender, "shots/shot_a.blend, shots/shot_b.blend", 2, SaveShots="true")
    proc = openjd("run", TEMPLATE, "--step", "Render", "--run-dependencies", params=params, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    # Two Bake tasks, then 2 shots x 2 chunks of Render tasks, each in the worker's own words.
    for name in ("shot_a", "shot_b"):
        assert f"selvedge bake: shot {1 if name == 'shot_a' else 2} of 2: {name}" in out
        assert f"{name} | Cloth | frame {LAST} of {LAST}" in out
        for chunk in (FIRST, FIRST + CHUNK):
            assert f"selvedge render: shot {name} ({project / 'shots' / name}.blend), frames {chunk}-{chunk + 1}" in out
    assert out.count("Selvedge bake summary") == 2 and out.count("1 of 1 shot(s) baked") == 2

    # The caches: '//cache/{shot}' next to the shots, one PC2 + sidecar per cloth, the job's frames.
    errors = {}
    for name in ("shot_a", "shot_b"):
        cache = project / "shots" / "cache" / name
        assert sorted(p.name for p in cache.iterdir()) == ["Cloth.json", "Cloth.pc2"]
        frames, header = read_pc2(cache / "Cloth.pc2")
        assert (header.start_frame, header.num_samples, header.num_points) == (FIRST, LAST - FIRST + 1, 25)
        sidecar = json.loads((cache / "Cloth.json").read_text())
        assert sidecar["settings"]["scene"]["substeps"] == SUBSTEPS  # the job's value, not the file's 10

        # Played back by Blender's own Mesh Cache modifier in the shot the bake saved.
        bpy.ops.wm.read_factory_settings(use_empty=True)
        bpy.ops.wm.open_mainfile(filepath=str(project / "shots" / f"{name}.blend"))
        obj = bpy.data.objects["Cloth"]
        mod = obj.modifiers["Selvedge Cache"]
        assert mod.type == "MESH_CACHE" and mod.filepath == f"//cache/{name}/Cloth.pc2"
        errors[name] = max(
            float(np.abs(evaluated_co(obj, f) - expected[name][f - FIRST]).max()) for f in range(FIRST, LAST + 1)
        )
        assert float(np.abs(evaluated_co(obj, LAST) - evaluated_co(obj, FIRST)).max()) > 0.01  # it moved
        bpy.ops.wm.read_factory_settings(use_empty=True)

        # The renders: '//render/{shot}/{shot}_####', every frame, the shot's 32x32 PNG.
        renders = project / "shots" / "render" / name
        files = sorted(p.name for p in renders.iterdir())
        assert files == [f"{name}_{f:04d}.png" for f in range(FIRST, LAST + 1)]
        assert {png_size(renders / f) for f in files} == {(SIZE, SIZE)}
        assert (renders / files[0]).read_bytes() != (renders / files[-1]).read_bytes()
    print("max |Mesh Cache playback after openjd run - direct solver| (m):", errors)
    assert max(errors.values()) <= ATOL


def test_missing_blend_fails_its_task_and_the_other_shot_bakes(tmp_path, shots):
    """Farm tasks run independently: the missing shot's task fails clearly, the other one succeeds."""
    _, expected, blender = shots
    project = make_project(tmp_path, shots, names=("shot_b",))
    params = job_parameters(project, blender, "shots/missing.blend,shots/shot_b.blend", 2)

    bad = openjd("run", TEMPLATE, "--step", "Bake", "--task-param", "ShotIndex=1", params=params, cwd=tmp_path)
    assert bad.returncode != 0
    assert (
        f"selvedge bake: FAILED: shot missing: {project / 'shots' / 'missing.blend'}: no such .blend file" in bad.stdout
    )
    assert not (project / "shots" / "cache").exists()  # nothing, not even an empty folder

    good = openjd("run", TEMPLATE, "--step", "Bake", "--task-param", "ShotIndex=2", params=params, cwd=tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    cache = project / "shots" / "cache"
    assert sorted(p.name for p in cache.iterdir()) == ["shot_b", "shot_b.selvedge.log"]
    assert sorted(p.name for p in (cache / "shot_b").iterdir()) == ["Cloth.json", "Cloth.pc2"]
    frames, _ = read_pc2(cache / "shot_b" / "Cloth.pc2")
    assert float(np.abs(frames - expected["shot_b"]).max()) <= ATOL

    # This shot was not saved (SaveShots defaults to false): the Render task adds the Mesh Cache
    # modifier itself. Done here in-process: Blender's playback through it is the direct solver run.
    render_frames = load_farm_script("render_frames")
    bpy.ops.wm.read_factory_settings(use_empty=True)
    blend = str(project / "shots" / "shot_b.blend")
    bpy.ops.wm.open_mainfile(filepath=blend)
    obj = bpy.data.objects["Cloth"]
    assert [m.type for m in obj.modifiers] == []
    frames_to_render = list(range(FIRST, LAST + 1))
    attached = render_frames.attach_caches(bpy, blend, "//cache/shot_b", frames_to_render, ["Cloth"])
    assert attached == [("Cloth", str(cache / "shot_b" / "Cloth.pc2"))]
    error = max(float(np.abs(evaluated_co(obj, f) - expected["shot_b"][f - FIRST]).max()) for f in frames_to_render)
    print("max |Mesh Cache added by render_frames.py - direct solver| (m):", error)
    assert error <= ATOL
    with pytest.raises(render_frames.TaskError, match=f"holds frames {FIRST}-{LAST}; this task renders frames"):
        render_frames.attach_caches(bpy, blend, "//cache/shot_b", [LAST, LAST + 1], [])
    with pytest.raises(render_frames.TaskError, match="no cache for 'Shirt'"):
        render_frames.attach_caches(bpy, blend, "//cache/shot_b", frames_to_render, ["Shirt"])
    bpy.ops.wm.read_factory_settings(use_empty=True)

    # The Render task of the missing shot fails too, before opening anything.
    render = openjd(
        "run",
        TEMPLATE,
        "--step",
        "Render",
        "--no-run-dependencies",
        "--task-param",
        "ShotIndex=1",
        "--task-param",
        f"ChunkStart={FIRST}",
        params=params,
        cwd=tmp_path,
    )
    assert render.returncode != 0 and "no such .blend file" in render.stdout
    assert not (project / "shots" / "render").exists()


def test_inconsistent_job_and_render_without_cache_fail_clearly(tmp_path, shots):
    _, _, blender = shots
    project = make_project(tmp_path, shots, names=("shot_a",))
    wrong_count = job_parameters(project, blender, "shots/shot_a.blend", 2)
    proc = openjd("run", TEMPLATE, "--step", "Bake", "--task-param", "ShotIndex=1", params=wrong_count, cwd=tmp_path)
    assert proc.returncode != 0
    assert "the shot list names 1 shot(s) but the job has ShotCount=2 tasks" in proc.stdout
    assert not (project / "shots" / "cache").exists()

    # Rendering a shot whose Bake never ran: a clear failure, no frame.
    params = job_parameters(project, blender, "shots/*.blend", 1)
    proc = openjd(
        "run",
        TEMPLATE,
        "--step",
        "Render",
        "--no-run-dependencies",
        "--task-param",
        "ShotIndex=1",
        "--task-param",
        f"ChunkStart={FIRST}",
        params=params,
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert "no Selvedge cache (<object>.pc2 + .json) in" in proc.stdout and "did the Bake step" in proc.stdout
    assert not (project / "shots" / "render").exists()
