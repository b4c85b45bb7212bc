"""The Flamenco 3 job type (farm/flamenco/selvedge_bake_render.js), checked without a Manager.

No Flamenco Manager can be installed here, so this checks what can be checked with Node (v20):

* ``node --check``: the file parses as JavaScript.
* ``JOB_TYPE`` against Flamenco's documented job-type API: a ``label``, and settings whose fields
  are those of the Manager's ``AvailableJobSetting`` (OpenAPI model: key, type, subtype, choices,
  propargs, description, default, eval, evalInfo, visible, required, editable) with the
  documented enum values (type string/int32/float/bool; subtype file_path/dir_path/file_name/
  hashed_file_path; visible visible/hidden/submission/web), defaults of the declared type,
  ``choices`` only on strings, and the keys the Blender add-on and this job type rely on.
* ``compileJob(job)`` run under Node with stand-ins for what a Manager provides (``author.Task``,
  ``author.Command``, ``task.addCommand``, ``task.addDependency``, ``job.addTask``, ``path``,
  ``frameChunker``, ``formatTimestampLocal``, ``print``): one bake task running the Selvedge CLI
  in Blender, render tasks in chunks, each depending on the bake task.

Not checked: that a real Manager accepts the script, that its ``frameChunker`` splits frames the
way the stand-in does, and that a real Worker runs the commands (see docs/user/farm.md).
"""

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from selvedge.solver.settings import SOLVE_MODES

ROOT = Path(__file__).resolve().parents[2]
JOB_TYPE_FILE = ROOT / "farm" / "flamenco" / "selvedge_bake_render.js"
NODE = shutil.which("node")


def test_node_is_available_to_check_the_job_type():
    """Every check below runs the job type under Node.js (Flamenco's own job compiler is JavaScript)."""
    assert NODE is not None, "Node.js (node) is needed to check farm/flamenco/selvedge_bake_render.js"


#: Fields of Flamenco's AvailableJobSetting (Manager OpenAPI model) and their enum values.
SETTING_FIELDS = {
    "key",
    "type",
    "subtype",
    "choices",
    "propargs",
    "description",
    "default",
    "eval",
    "evalInfo",
    "visible",
    "required",
    "editable",
}
SETTING_TYPES = {"string": str, "int32": int, "float": (int, float), "bool": bool}
SUBTYPES = {"file_path", "dir_path", "file_name", "hashed_file_path"}
VISIBILITY = {"visible", "hidden", "submission", "web"}
EVAL_INFO_FIELDS = {"showLinkButton", "description"}

#: Loads the job type in a fresh context with stand-ins for the Manager's globals, runs
#: compileJob on the settings given as argv[3] (JSON), prints {jobType, tasks} or {error}.
HARNESS = r"""
const fs = require("fs"), vm = require("vm"), nodePath = require("path");
const source = fs.readFileSync(process.argv[2], "utf8");
const settings = JSON.parse(process.argv[3]);

function frameChunker(frames, chunkSize) {  // stand-in: consecutive runs, at most chunkSize frames
  const list = [];
  for (const part of String(frames).split(",")) {
    const [a, b] = part.trim().split("-").map((s) => parseInt(s, 10));
    for (let f = a; f <= (isNaN(b) ? a : b); f++) list.push(f);
  }
  const chunks = [];
  let start = 0;
  for (let i = 1; i <= list.length; i++) {
    if (i == list.length || list[i] != list[i - 1] + 1 || i - start == chunkSize) {
      const first = list[start], last = list[i - 1];
      chunks.push(first == last ? `${first}` : `${first}-${last}`);
      start = i;
    }
  }
  return chunks;
}
const author = {
  Task(name, type) {
    return { name, type, commands: [], dependencies: [],
             addCommand(c) { this.commands.push(c); }, addDependency(t) { this.dependencies.push(t.name); } };
  },
  Command(type, parameters, totalFrames) { return { type, parameters, totalFrames }; },
};
const context = vm.createContext({
  author, frameChunker, print: (...a) => console.error(...a),
  formatTimestampLocal: (d) => "2026-01-02_03.04.05",
  path: { basename: nodePath.posix.basename, dirname: nodePath.posix.dirname, join: nodePath.posix.join },
});
const { JOB_TYPE, compileJob } = vm.runInContext(source + "\n;({ JOB_TYPE, compileJob })", context);
const job = { settings, created: new Date(0), tasks: [], addTask(t) { this.tasks.push(t); } };
let result;
try {
  compileJob(job);
  result = { jobType: JOB_TYPE, settings: job.settings, tasks: job.tasks.map(
      (t) => ({ name: t.name, type: t.type, commands: t.commands, dependencies: t.dependencies })) };
} catch (error) {
  result = { jobType: JOB_TYPE, error: String(error) };
}
console.log(JSON.stringify(result));
"""


def compile_job(tmp_path, **overrides):
    settings = {
        "frames": "1-10",
        "chunk_size": 4,
        "cloth_objects": "",
        "cache_folder": "//cache/{shot}",
        "substeps": 0,
        "iterations": 0,
        "solve_mode": "scene",
        "threads": 0,
        "selvedge_cli": "",
        "render_output_root": "/render",
        "add_path_components": 0,
        "render_output_path": "/render/shot_a/{timestamp}/######",
        "blendfile": "/jobs/shot_a-x1/shot_a.blend",
        "format": "PNG",
        "image_file_extension": ".png",
        "scene": "Scene",
    }
    settings.update(overrides)
    harness = tmp_path / "harness.js"
    harness.write_text(HARNESS)
    proc = subprocess.run(
        [NODE, str(harness), str(JOB_TYPE_FILE), json.dumps(settings)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_node_check_parses_the_job_type():
    proc = subprocess.run([NODE, "--check", str(JOB_TYPE_FILE)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_job_type_settings_follow_flamencos_job_setting_model(tmp_path):
    job_type = compile_job(tmp_path)["jobType"]
    assert set(job_type) <= {"label", "description", "settings"} and job_type["label"]
    keys = [s["key"] for s in job_type["settings"]]
    assert len(keys) == len(set(keys))
    for setting in job_type["settings"]:
        assert set(setting) <= SETTING_FIELDS, setting["key"]
        assert re.fullmatch(r"[a-z][a-z0-9_]*", setting["key"])
        assert setting["type"] in SETTING_TYPES, setting["key"]
        assert setting.get("subtype", "file_path") in SUBTYPES, setting["key"]
        assert setting.get("visible", "visible") in VISIBILITY, setting["key"]
        assert set(setting.get("evalInfo", {})) <= EVAL_INFO_FIELDS, setting["key"]
        if "default" in setting:
            assert isinstance(setting["default"], SETTING_TYPES[setting["type"]]), setting["key"]
        if "choices" in setting:
            assert setting["type"] == "string" and setting.get("default") in setting["choices"]
        assert isinstance(setting.get("eval", ""), str) and isinstance(setting.get("propargs", {}), dict)
    # What the issue asks for (frames, objects, cache folder), what the Flamenco add-on fills in
    # itself (blendfile) and what the render tasks need (format, render output).
    for key in (
        "frames",
        "chunk_size",
        "cloth_objects",
        "cache_folder",
        "blendfile",
        "format",
        "render_output_root",
        "render_output_path",
    ):
        assert key in keys
    # the solve modes offered are the solver's, after the shot's own setting
    solve_mode = next(s for s in job_type["settings"] if s["key"] == "solve_mode")
    assert solve_mode["choices"] == ["scene", *SOLVE_MODES]


def test_compile_job_bakes_once_then_renders_chunks_that_depend_on_the_bake(tmp_path):
    result = compile_job(tmp_path)
    assert "error" not in result, result.get("error")
    tasks = result["tasks"]
    assert [t["name"] for t in tasks] == ["bake-1-10", "render-1-4", "render-5-8", "render-9-10"]
    assert {t["type"] for t in tasks} == {"blender"}
    bake, renders = tasks[0], tasks[1:]
    assert bake["dependencies"] == [] and all(t["dependencies"] == ["bake-1-10"] for t in renders)

    (command,) = bake["commands"]
    assert command["type"] == "blender-render"
    params = command["parameters"]
    assert params["exe"] == "{blender}" and params["blendfile"] == "/jobs/shot_a-x1/shot_a.blend"
    args = params["args"]
    assert args[:4] == ["--scene", "Scene", "--python-exit-code", "1"]
    assert args[4] == "--python-expr" and "cli.py" in args[5] and "addon_utils" in args[5]
    assert args[6:] == ["--", "--frames", "1", "10", "--out", "//cache/shot_a", "--save"]

    frames = [t["commands"][0]["parameters"]["args"] for t in renders]
    assert [a[a.index("--render-frame") + 1] for a in frames] == ["1..4", "5..8", "9..10"]
    assert [t["commands"][0]["totalFrames"] for t in renders] == [4, 4, 2]
    assert all(a[a.index("--render-output") + 1] == "/render/shot_a/2026-01-02_03.04.05/######" for a in frames)
    assert all(a[a.index("--render-format") + 1] == "PNG" for a in frames)


def test_compile_job_passes_the_bake_settings_to_the_cli(tmp_path):
    result = compile_job(
        tmp_path,
        frames="3-5, 9-12",
        chunk_size=10,
        cloth_objects="Shirt, Skirt",
        substeps=8,
        iterations=3,
        solve_mode="colored",
        threads=2,
        selvedge_cli="/opt/selvedge/cli.py",
        cache_folder="//caches/{shot}_v2",
    )
    args = result["tasks"][0]["commands"][0]["parameters"]["args"]
    assert args[args.index("--python") + 1] == "/opt/selvedge/cli.py" and "--python-expr" not in args
    cli = args[args.index("--") + 1 :]
    assert cli == [
        "--frames",
        "3",
        "12",
        "--out",
        "//caches/shot_a_v2",
        "--save",
        "--objects",
        "Shirt",
        "Skirt",
        "--substeps",
        "8",
        "--iterations",
        "3",
        "--mode",
        "colored",
        "--threads",
        "2",
    ]
    assert [t["name"] for t in result["tasks"]] == ["bake-3-12", "render-3-5", "render-9-12"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"frames": "1-x"}, "Cannot read the frame range"),
        ({"format": "FFMPEG"}, "renders images"),
    ],
)
def test_compile_job_refuses_bad_settings(tmp_path, overrides, message):
    result = compile_job(tmp_path, **overrides)
    assert message in result["error"]
