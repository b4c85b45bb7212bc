"""The command line (``cli.py``) with the real bpy module, run as a separate process.

Shots are tiny .blend files built here from primitives (a 5x5 grid cloth pinned at two corners
by a vertex group, its object moved and rotated with location keys) and saved with *other*
settings than the command line asks for (10 substeps, frames 1-20), so the flags must reach the
bake. The caches are compared with a direct solver run of the same inputs (the reference of
tests/blender/test_bake_operators.py), frame by frame, and one shot is reopened after ``--save`` to read
the cache back through Blender's own Mesh Cache modifier. Failures (missing .blend, no cloth,
unwritable cache folder, a pin that teleports mid-bake) must fail their shot clearly, leave no
partial cache and leave the other shots' caches in place.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import bpy
import numpy as np
import pytest
from blender_scenes import factory_scene, grid_cloth, mesh_co, save_shot, stacked_reference_run

import selvedge
from selvedge import cli_core
from selvedge.operators import scene_to_solver as s2s
from selvedge.solver.io_pc2 import read_pc2, read_sidecar
from selvedge.solver.settings import SOLVE_MODES

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "cli.py"
FIRST, LAST = 1, 6
SUBSTEPS = 4
#: The PC2 holds float32 of positions of about 1 m (~1.2e-7 rounding); same bound as test_blender_bake.
ATOL = 1e-6
FLAGS = ["--frames", str(FIRST), str(LAST), "--substeps", str(SUBSTEPS), "--mode", "serial", "--threads", "1"]


def build_shot(path, preset="silk", angle=30.0, motion=(0.12, 0.0, 0.05), cloth=True, teleport_at=None):
    """Save a one-cloth shot; returns the reference positions (F, N, 3) for FIRST..LAST (or None)."""
    with factory_scene() as scene:
        scene.frame_start, scene.frame_end = FIRST, LAST
        scene.frame_set(FIRST)
        if not cloth:
            bpy.ops.mesh.primitive_cube_add()
            bpy.ops.wm.save_as_mainfile(filepath=str(path))
            return None
        start = np.array([0.5, -0.25, 1.0])
        end = start + np.array(motion) if teleport_at is None else None
        obj, corners = grid_cloth(FIRST, LAST, substeps=SUBSTEPS, angle=angle, start=start, end=end, preset=preset)
        if teleport_at is not None:  # still until the frame before, then 1 km away: the solver refuses
            obj.keyframe_insert("location", frame=teleport_at - 1)
            obj.location = (1000.0, 0.0, 0.0)
            obj.keyframe_insert("location", frame=teleport_at)
        expected = stacked_reference_run(obj, corners, FIRST, LAST)[0] if teleport_at is None else None
        # What the file says differs from the command line: the flags must win.
        save_shot(path, FIRST)
        return expected


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shots")
    expected = {
        "shot_a": build_shot(folder / "shot_a.blend"),
        "shot_b": build_shot(folder / "shot_b.blend", preset="cotton", angle=-20.0, motion=(-0.05, 0.1, 0.08)),
        "nocloth": build_shot(folder / "nocloth.blend", cloth=False),
        "jump": build_shot(folder / "jump.blend", teleport_at=4),
    }
    # The two good shots really differ (otherwise 'both caches match' could hide a mix-up).
    assert np.abs(expected["shot_a"][-1] - expected["shot_b"][-1]).max() > 0.05
    return folder, expected


def run_cli(args, cwd, module=False, pythonpath=None):
    command = [sys.executable, "-m", "cli"] if module else [sys.executable, str(CLI)]
    env = dict(os.environ)
    env.pop("NUMBA_NUM_THREADS", None)
    if pythonpath is not None:  # in front of everything, workers included
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), *filter(None, [env.get("PYTHONPATH")])])
    proc = subprocess.run(command + args, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    print(proc.stdout[-4000:], proc.stderr[-2000:])
    return proc


def summary_rows(stdout):
    """{shot: status} from the summary table the CLI prints last."""
    rows = {}
    for line in stdout[stdout.rindex("Selvedge bake summary") :].splitlines()[3:]:
        if line.startswith("FAILED ") or "shot(s) baked" in line:
            break
        rows[line.split()[0]] = line.split()[1]
    return rows


def test_two_shots_in_a_pool_of_two_workers_match_a_direct_solver_run(shots):
    folder, expected = shots
    summary = folder / "good.json"
    proc = run_cli(
        [
            "shot_a.blend",
            "shot_b.blend",
            *FLAGS,
            "--out",
            "//cache/{shot}",
            "--jobs",
            "2",
            "--save",
            "--summary-json",
            str(summary),
        ],
        cwd=folder,
    )
    assert proc.returncode == 0, proc.stderr

    # The summary lists both shots; the JSON form says what the table says.
    rows = summary_rows(proc.stdout)
    assert rows == {"shot_a": "OK", "shot_b": "OK"}
    doc = json.loads(summary.read_text())
    assert doc["ok"] and [s["shot"] for s in doc["shots"]] == ["shot_a", "shot_b"]
    for shot in doc["shots"]:
        assert shot["frames"] == [FIRST, LAST] and shot["objects"] == ["Cloth"] and shot["saved"]
        assert shot["caches"] == [f"//cache/{shot['shot']}/Cloth.pc2"]
        assert shot["threads"] == 1  # NUMBA_NUM_THREADS reached the worker before Numba was imported
    # Two workers at once: the second shot started before the first one finished its frames.
    out = proc.stdout.splitlines()
    assert out.index(next(x for x in out if x.startswith("shot_b | started"))) < out.index(
        next(x for x in out if x.startswith("shot_a | Cloth | frame 6 of 6"))
    )
    # One progress line per frame and object: shot, object, frame, ms/frame, max strain.
    lines = [line for line in proc.stdout.splitlines() if re.match(r"shot_a \| Cloth \| frame \d+ of 6", line)]
    assert len(lines) == LAST - FIRST and "ms/frame" in lines[-1] and "max strain" in lines[-1]

    errors = {}
    for name in ("shot_a", "shot_b"):
        cache = folder / "cache" / name
        assert sorted(p.name for p in cache.iterdir()) == ["Cloth.json", "Cloth.pc2"]
        frames, header = read_pc2(cache / "Cloth.pc2")
        assert (header.start_frame, header.num_samples, header.num_points) == (FIRST, LAST - FIRST + 1, 25)
        errors[name] = float(np.abs(frames - expected[name]).max())
        sidecar = read_sidecar(cache / "Cloth.json")
        assert sidecar["settings"]["scene"]["substeps"] == SUBSTEPS
        log = (folder / "cache" / f"{name}.selvedge.log").read_text()
        assert f"{name} | Cloth | frame 6 of 6" in log and '"event": "result"' in log
    print("max |CLI cache - direct solver| (m):", errors)
    assert max(errors.values()) <= ATOL

    # --save: the reopened file plays the cache back through Blender's Mesh Cache modifier.
    bpy.ops.wm.read_factory_settings(use_empty=True)
    selvedge.register()
    try:
        bpy.ops.wm.open_mainfile(filepath=str(folder / "shot_b.blend"))
        obj = bpy.data.objects["Cloth"]
        mod = obj.modifiers["Selvedge Cache"]
        assert (mod.type, mod.filepath) == ("MESH_CACHE", "//cache/shot_b/Cloth.pc2")
        assert bpy.context.scene.selvedge.substeps == SUBSTEPS
        played = {}
        for frame in (2, 4, LAST):
            bpy.context.scene.frame_set(frame)
            obj_eval = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
            played[frame] = float(np.abs(mesh_co(obj_eval.to_mesh()) - expected["shot_b"][frame - FIRST]).max())
            obj_eval.to_mesh_clear()
    finally:
        selvedge.unregister()
        bpy.ops.wm.read_factory_settings(use_empty=True)
    print("max |Mesh Cache playback of the saved shot - direct solver| (m):", played)
    assert max(played.values()) <= ATOL


def test_a_missing_blend_fails_the_run_and_the_good_shot_keeps_its_cache(shots, tmp_path):
    """Also: the coordinator runs as ``python -m cli`` and starts its worker the way it starts a Blender
    (``--blender``): a stand-in executable records its arguments and runs the script as Blender would."""
    folder, expected = shots
    fake = tmp_path / "blender"
    fake.write_text(
        f'#!/bin/sh\necho "$@" > {tmp_path / "argv.txt"}\n'
        f'[ "$1 $2 $3 $4" = "-b --python-exit-code 1 -P" ] || exit 99\n'
        f'script=$5; shift 5\nexec {sys.executable} "$script" "$@"\n'
    )
    fake.chmod(0o755)
    proc = run_cli(
        [
            str(folder / "missing.blend"),
            str(folder / "shot_a.blend"),
            *FLAGS,
            "--out",
            "//missing_run/{shot}",
            "--blender",
            str(fake),
        ],
        cwd=ROOT,
        module=True,
    )
    assert proc.returncode == 1
    worker_argv = (tmp_path / "argv.txt").read_text().split()
    assert worker_argv[:6] == ["-b", "--python-exit-code", "1", "-P", str(CLI), "--"]
    assert worker_argv[6:9] == [str(folder / "shot_a.blend"), "--worker", "--shot-name"]
    missing = folder / "missing.blend"
    assert f"FAILED missing ({missing}): {missing}: no such .blend file" in proc.stdout
    assert summary_rows(proc.stdout) == {"missing": "FAILED", "shot_a": "OK"}
    frames, _ = read_pc2(folder / "missing_run" / "shot_a" / "Cloth.pc2")
    error = float(np.abs(frames - expected["shot_a"]).max())
    print("max |cache of the good shot - direct solver| (m):", error)
    assert error <= ATOL
    assert not (folder / "missing_run" / "missing").exists()


def test_bad_shots_fail_clearly_and_leave_no_partial_cache(shots):
    folder, _ = shots
    shutil.copy(folder / "shot_b.blend", folder / "blocked.blend")
    (folder / "bad").mkdir()
    (folder / "bad" / "blocked").write_text("a file where the cache folder should be")
    summary = folder / "bad.json"
    proc = run_cli(
        [
            "nocloth.blend",
            "blocked.blend",
            "jump.blend",
            *FLAGS,
            "--out",
            "//bad/{shot}",
            "--jobs",
            "2",
            "--summary-json",
            str(summary),
        ],
        cwd=folder,
    )
    assert proc.returncode == 1
    results = {s["shot"]: s for s in json.loads(summary.read_text())["shots"]}
    assert {k: v["status"] for k, v in results.items()} == {"nocloth": "failed", "blocked": "failed", "jump": "failed"}
    assert "no object has the Selvedge role 'Cloth'" in results["nocloth"]["message"]
    assert f"cannot write to the cache folder '{folder / 'bad' / 'blocked'}'" in results["blocked"]["message"]
    assert re.search(r"Cloth, frame 4: pin target .* jumps", results["jump"]["message"])
    for shot in results.values():
        assert f"FAILED {shot['shot']} " in proc.stdout
    # The teleporting shot baked frames 2 and 3 before failing at 4: nothing of it is left.
    progress = [line for line in proc.stdout.splitlines() if line.startswith("jump | Cloth | frame")]
    assert len(progress) == 2
    assert sorted(p.name for p in (folder / "bad").iterdir()) == [
        "blocked",
        "blocked.selvedge.log",
        "jump",
        "jump.selvedge.log",
        "nocloth.selvedge.log",
    ]
    assert list((folder / "bad" / "jump").iterdir()) == []  # no cache, no temporary file
    assert (folder / "bad" / "blocked").read_text() == "a file where the cache folder should be"


def test_a_solver_that_does_not_load_fails_the_shot_with_one_message(shots, tmp_path):
    """numba missing in the worker (a package in front of the real one that raises as a missing one
    does): the shot fails with the loader's message, which names what to install, no traceback
    reaches the log, and nothing is written."""
    folder, _ = shots
    mask = tmp_path / "mask"
    (mask / "numba").mkdir(parents=True)
    (mask / "numba" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'numba'\", name='numba')\n"
    )
    summary = tmp_path / "summary.json"
    out = tmp_path / "out"
    proc = run_cli(
        ["shot_a.blend", *FLAGS, "--out", f"{out}/{{shot}}", "--jobs", "1", "--summary-json", str(summary)],
        cwd=folder,
        pythonpath=mask,
    )
    assert proc.returncode == 1
    (shot,) = json.loads(summary.read_text())["shots"]
    assert shot["status"] == "failed"
    message = shot["message"]
    assert message.startswith("Selvedge cannot run its solver: numba is not installed"), message
    assert "pip install numba==0.68.1 llvmlite==0.50.0" in message and "\n" not in message
    assert "FAILED shot_a " in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr + "".join(p.read_text() for p in out.glob("*.log"))
    assert not (out / "shot_a").exists() or list((out / "shot_a").iterdir()) == []


def test_argument_errors_exit_2_before_any_bake(shots):
    folder, _ = shots
    proc = run_cli(["shot_a.blend", "shot_b.blend", "--out", "//same"], cwd=folder)
    assert proc.returncode == 2 and "would both write into" in proc.stderr and "{shot}" in proc.stderr
    proc = run_cli(["shot_a.blend", "--frames", "5", "2"], cwd=folder)
    assert proc.returncode == 2 and "end frame must not precede the start" in proc.stderr
    proc = run_cli(["nothing*.blend"], cwd=folder)
    assert proc.returncode == 2 and "nothing*.blend: no file matches" in proc.stderr
    assert not (folder / "same").exists()


def test_inside_blender_the_open_file_bakes_in_process(shots, monkeypatch):
    """``blender -b shot.blend -P cli.py -- ...``: no .blend arguments, so the open file bakes here.
    --objects leaves the other cloth alone; --shape-keys works without --save in this form."""
    import importlib.util

    import numba

    folder, expected = shots
    spec = importlib.util.spec_from_file_location("selvedge_cli_in_blender", CLI)
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    monkeypatch.setattr(cli, "_IN_BLENDER", True)  # the bpy module has no Blender binary
    threads = numba.get_num_threads()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    selvedge.register()
    try:
        bpy.ops.wm.open_mainfile(filepath=str(folder / "shot_a.blend"))
        bpy.ops.mesh.primitive_grid_add(x_subdivisions=2, y_subdivisions=2, size=1.0, calc_uvs=True)
        other = bpy.context.object
        other.name = "Other"
        other.selvedge.role = "CLOTH"  # no pins: would fall and bake too without --objects
        argv = [
            "blender",
            "-b",
            "shot_a.blend",
            "-P",
            str(CLI),
            "--",
            *FLAGS[:-2],
            "--threads",
            str(threads),
            "--objects",
            "Cloth",
            "--out",
            "//inproc",
        ]
        assert cli.main(argv) == 0 and cli._KEEP_BLENDER_RUNNING
        assert sorted(p.name for p in (folder / "inproc").iterdir()) == ["Cloth.json", "Cloth.pc2"]
        assert other.selvedge.role == "CLOTH" and len(other.modifiers) == 0
        frames, _ = read_pc2(folder / "inproc" / "Cloth.pc2")
        error = float(np.abs(frames - expected["shot_a"]).max())

        assert cli.main(argv[:-2] + ["--shape-keys"]) == 0
        keys = [k.name for k in bpy.data.objects["Cloth"].data.shape_keys.key_blocks]
        assert keys == ["Basis"] + [f"Selvedge.{f:04d}" for f in range(FIRST, LAST + 1)]

        assert cli.main(argv[:-4] + ["--objects", "Nope"]) == 1 and not cli._KEEP_BLENDER_RUNNING
    finally:
        numba.set_num_threads(threads)
        selvedge.unregister()
        bpy.ops.wm.read_factory_settings(use_empty=True)
    print("max |in-process CLI cache - direct solver| (m):", error)
    assert error <= ATOL


# ----------------------------------------------------------------------------------------------
# The Blender-free half
def test_arguments_after_a_double_dash_and_defaults():
    assert cli_core.script_args(["blender", "-b", "x.blend", "-P", "cli.py", "--", "--jobs", "2"]) == ["--jobs", "2"]
    assert cli_core.script_args(["cli.py", "a.blend"]) == ["a.blend"]
    opts = cli_core.parse_args(["a.blend", "--jobs", "2"], cpu_count=8)
    assert (opts.jobs, opts.threads, opts.frames, opts.out) == (2, 4, None, None)
    assert cli_core.parse_args(["a.blend", "--jobs", "4"], cpu_count=2).threads == 1
    with pytest.raises(cli_core.UsageError, match="--jobs must be at least 1"):
        cli_core.parse_args(["a.blend", "--jobs", "0"])
    with pytest.raises(cli_core.UsageError, match="invalid choice"):
        cli_core.parse_args(["a.blend", "--mode", "fast"])
    assert cli_core.SOLVE_MODES == SOLVE_MODES  # kept as a literal there, so checked here
    assert cli_core.parse_args(["a.blend", "--mode", "auto"]).mode == "auto"
    args = cli_core.worker_args(cli_core.parse_args(["x", "--objects", "A", "B", "--out", "//c"]), "/s.blend", "s")
    assert args[0] == "/s.blend"  # before --objects, which takes every name after it
    assert cli_core.parse_args(args).objects == ["A", "B"]
    # Stretch Refinements: the shot's own unless given; 0 (off) is a value, not "unset"; a worker gets it
    assert cli_core.parse_args(["a.blend"]).stretch_refinements is None
    for n in (0, 2):
        opts = cli_core.parse_args(["a.blend", "--stretch-refinements", str(n)])
        assert opts.stretch_refinements == n
        assert cli_core.parse_args(cli_core.worker_args(opts, "/s.blend", "s")).stretch_refinements == n
    with pytest.raises(cli_core.UsageError, match="--stretch-refinements must be from 0 to 4, got 5"):
        cli_core.parse_args(["a.blend", "--stretch-refinements", "5"])


def test_stretch_refinements_from_the_command_line_reach_the_solver():
    """The worker's scene takes --stretch-refinements, and the bake's solver settings follow it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("selvedge_cli_settings", CLI)
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    selvedge.register()
    try:
        scene = bpy.context.scene
        assert scene.selvedge.stretch_refinements == 0
        cli._apply_settings(bpy, cli_core.parse_args(["a.blend", "--stretch-refinements", "3"]), None, "a")
        assert scene.selvedge.stretch_refinements == 3
        settings = s2s.solver_settings_from_scene(scene.selvedge, 24.0)
        assert settings.stretch_refinements == 3
        cli._apply_settings(bpy, cli_core.parse_args(["a.blend"]), None, "a")  # unset: the shot's own
        assert scene.selvedge.stretch_refinements == 3
    finally:
        selvedge.unregister()
        bpy.ops.wm.read_factory_settings(use_empty=True)


def test_shot_paths_logs_and_temporary_file_cleanup(tmp_path):
    for name in ("b.blend", "a.blend"):
        (tmp_path / name).write_bytes(b"")
    shots, problems = cli_core.expand_shots([str(tmp_path / "*.blend"), str(tmp_path / "a.blend"), "none*.blend"])
    assert [s.name for s in shots] == ["a", "b"] and problems == ["none*.blend: no file matches this pattern"]
    cli_core.plan_logs(shots, "//cache/{shot}", None)
    assert shots[0].cache_folder == str(tmp_path / "cache" / "a")
    assert shots[0].log == str(tmp_path / "cache" / "a.selvedge.log")
    assert cli_core.shared_cache_folders(shots) == []
    cli_core.plan_logs(shots, str(tmp_path / "one"), None)
    assert "put {shot} in --out" in cli_core.shared_cache_folders(shots)[0]

    folder = tmp_path / "cache"
    folder.mkdir()
    for name in (".Cloth.pc2.abc123.tmp", ".Cloth.json.x.tmp", ".Other.pc2.y.tmp", "Cloth.pc2"):
        (folder / name).write_bytes(b"")
    removed = cli_core.remove_temporary_files({"cache_folder": str(folder), "stems": ["Cloth"]})
    assert len(removed) == 2
    assert sorted(p.name for p in folder.iterdir()) == [".Other.pc2.y.tmp", "Cloth.pc2"]


def test_the_coordinator_stops_hung_workers_with_a_clear_message(tmp_path):
    """A worker that never finishes fails its shot after --worker-timeout; one that reported its result
    and hangs at exit (the 4.x bpy modules' teardown, see module_exit.py) is stopped after the exit
    grace and keeps its result. The workers are plain Python processes standing in for Blender."""
    import time

    result_line = cli_core.event_line("result", status="ok", message="baked 6 frames", frames=[1, 6])
    hang = "import time\nwhile True: time.sleep(1)\n"
    workers = {
        "never_finishes": f"print('frame 1', flush=True)\n{hang}",
        "hangs_at_exit": f"print({result_line!r}, flush=True)\n{hang}",
        "exits": f"print({result_line!r}, flush=True)\n",
    }
    shots = [cli_core.Shot(name=name, blend=str(tmp_path / f"{name}.blend")) for name in workers]
    said = []
    pool = cli_core.Pool(
        lambda shot: [sys.executable, "-c", workers[shot.name]],
        lambda shot: dict(os.environ),
        echo=said.append,
        timeout=10.0,
        exit_grace=3.0,
    )
    t0 = time.perf_counter()
    results = {r.shot: r for r in pool.run(shots, jobs=3)}
    seconds = time.perf_counter() - t0
    print({k: (r.status, r.message, round(r.seconds, 1)) for k, r in results.items()}, f"{seconds:.1f} s")
    never = results["never_finishes"]
    assert never.status == "failed"
    assert never.message == "the worker did not finish within --worker-timeout 10 s and was stopped; see the log"
    assert never.seconds >= 10.0
    hung = results["hangs_at_exit"]
    assert hung.ok and hung.message.startswith(
        "baked 6 frames; the worker reported its result but did not exit within 3 s and was stopped"
    )
    assert 3.0 <= hung.seconds < 10.0
    assert results["exits"].ok and results["exits"].message == "baked 6 frames" and results["exits"].returncode == 0
    assert any(line.startswith("hangs_at_exit | note: the worker reported its result") for line in said)
    assert cli_core.parse_args(["a.blend", "--worker-timeout", "3600"]).worker_timeout == 3600.0
    with pytest.raises(cli_core.UsageError, match="--worker-timeout must be 0"):
        cli_core.parse_args(["a.blend", "--worker-timeout", "-1"])


def test_summary_table_and_overwritten_caches():
    ok = cli_core.ShotResult(
        "a", "/p/a.blend", status="ok", frames=[1, 6], objects=["Cloth"], seconds=2.0, caches=["//cache/Cloth.pc2"]
    )
    clash = cli_core.ShotResult(
        "b", "/p/b.blend", status="ok", frames=[1, 6], objects=["Cloth"], caches=["//cache/Cloth.pc2"]
    )
    failed = cli_core.ShotResult("c", "/p/c.blend", status="failed", message="boom")
    text = cli_core.summary_table([ok, failed])
    assert "a     OK      1-6" in text and "FAILED c (/p/c.blend): boom" in text and "1 of 2 shot(s) baked" in text
    cli_core.overwritten_caches([ok, clash])
    assert not ok.ok and not clash.ok and "both wrote /p/cache/Cloth.pc2" in clash.message
