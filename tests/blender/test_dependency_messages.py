"""Every way the solver's or the network's packages can fail to load ends in one readable message.

Each case runs in a child process whose ``sys.path`` holds a folder made here:

- numba missing: only NumPy (a link to this environment's) and nothing else (``python -S``);
- numba too old for the NumPy: a numba 0.62.1 whose import raises numba 0.62's own NumPy check
  (``Numba needs NumPy 2.3 or less``), as it does under NumPy 2.4+;
- llvmlite mismatch: the real numba with an llvmlite 0.45.1 in front of the real one (numba
  0.68 fails on it before its own version check: ``No module named 'llvmlite.binding'``);
- onnxruntime missing: NumPy only, the network asked for.

The Blender-free half checks :mod:`dependencies` directly (the message names the pins, what to
install and which build of the extension to use); the Blender half goes through the UI in a bpy
child (the sidebar panels, a preset, Simulate (Preview), Bake to Cache) and reads what the
operators reported: one line, no traceback, the same message.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = {(3, 11): "blender4.2-5.0", (3, 13): "blender5.1-5.x"}[sys.version_info[:2]]


def solver_pins():
    pins = {}
    for line in (ROOT / "requirements" / "solver.txt").read_text().splitlines():
        requirement = line.split("#", 1)[0].split(";", 1)[0].strip()
        if "==" in requirement:
            name, version = requirement.split("==")
            pins[name.strip()] = version.strip()
    return pins


PINS = solver_pins()


def link_numpy(site: Path):
    """Links to this environment's NumPy (and its bundled libraries folder, where wheels have one)."""
    numpy_dir = Path(np.__file__).resolve().parent
    for path in numpy_dir.parent.iterdir():
        if (
            path.name == "numpy"
            or path.name.startswith("numpy.libs")
            or (path.name.startswith("numpy-") and path.name.endswith(".dist-info"))
        ):
            (site / path.name).symlink_to(path)


def write_package(site: Path, name: str, version: str, body: str):
    (site / name).mkdir()
    (site / name / "__init__.py").write_text(textwrap.dedent(body))
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def make_site(tmp_path: Path, case: str) -> tuple[Path, bool]:
    """The child's package folder for ``case`` and whether the child keeps its normal site-packages."""
    site = tmp_path / "site"
    site.mkdir()
    if case in ("numba_missing", "onnxruntime_missing"):
        link_numpy(site)
        return site, False
    if case == "numba_too_old":
        # numba's own check, as an old numba words it under a NumPy newer than it knows
        # (numba 0.62.1 under NumPy 2.4+: "Numba needs NumPy 2.3 or less. Got NumPy 2.5.")
        write_package(
            site,
            "numba",
            "0.62.1",
            """
            import numpy
            major, minor = map(int, numpy.__version__.split(".")[:2])
            raise ImportError(f"Numba needs NumPy {major}.{minor - 1} or less. Got NumPy {major}.{minor}.")
        """,
        )
        return site, True
    if case == "llvmlite_mismatch":
        write_package(site, "llvmlite", "0.45.1", '__version__ = "0.45.1"\n')
        return site, True
    raise AssertionError(case)


EXPECTED = {
    # case: (which check, words the message must hold)
    "numba_missing": (
        "solver",
        [
            "numba is not installed",
            f"numba {PINS['numba']}",
            f"llvmlite {PINS['llvmlite']}",
            f"pip install numba=={PINS['numba']} llvmlite=={PINS['llvmlite']}",
            BUILD,
        ],
    ),
    "numba_too_old": (
        "solver",
        [
            f"numba 0.62.1 does not support NumPy {np.__version__}",
            "Numba needs NumPy",
            f"needs numba {PINS['numba']}",
            "1.22 to 2.5",
            BUILD,
        ],
    ),
    "llvmlite_mismatch": (
        "solver",
        [
            "llvmlite 0.45.1 does not match numba",
            f"numba {PINS['numba']} with llvmlite {PINS['llvmlite']}",
            f"pip install numba=={PINS['numba']} llvmlite=={PINS['llvmlite']}",
            BUILD,
        ],
    ),
    "onnxruntime_missing": (
        "network",
        [
            "needs onnxruntime 1.32.0",
            "onnxruntime is not installed",
            "Set Network to Off",
            "pip install onnxruntime==1.32.0",
            BUILD,
        ],
    ),
}

CHILD_CHECK = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[2])  # devtools/: the repository imported as the package `selvedge`
from selvedge_import import import_selvedge
dependencies = importlib.import_module(import_selvedge().__name__ + ".dependencies")
try:
    getattr(dependencies, "require_" + sys.argv[3])()
    print(json.dumps({"raised": None}))
except Exception as error:
    print(json.dumps({"raised": type(error).__name__, "message": str(error),
                      "cause": repr(error.__cause__), "suppress": error.__suppress_context__}))
"""


def child_env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "NUMBA_", "SELVEDGE_"))}


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_the_loader_names_what_to_install_for_each_failure(tmp_path, case):
    site, keep_site = make_site(tmp_path, case)
    check, words = EXPECTED[case]
    flags = [] if keep_site else ["-S"]
    child = subprocess.run(
        [sys.executable, *flags, "-c", CHILD_CHECK, str(site), str(ROOT / "devtools"), check],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=300,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    got = json.loads(child.stdout.strip().splitlines()[-1])
    print(case, "->", got.get("message"))
    assert got["raised"] == "DependencyError", got
    message = got["message"]
    assert "\n" not in message and "Traceback" not in message
    missing = [w for w in words if w not in message]
    assert not missing, (missing, message)
    assert got["cause"] == "None" and got["suppress"]  # `from None`: no chained traceback behind it


def test_the_loader_passes_on_the_real_environment(tmp_path):
    """Not vacuous: with this environment's packages the same checks pass (and load the real pins)."""
    code = CHILD_CHECK + "\nimport numba, llvmlite, onnxruntime\nprint(numba.__version__, llvmlite.__version__)\n"
    for check in ("solver", "network"):
        child = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path), str(ROOT / "devtools"), check],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=300,
        )
        assert child.returncode == 0, child.stderr[-3000:]
        lines = child.stdout.strip().splitlines()
        assert json.loads(lines[0]) == {"raised": None}
        assert lines[1].split() == [PINS["numba"], PINS["llvmlite"]]


CHILD_UI = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(1, sys.argv[2])  # devtools/
sys.path.insert(2, sys.argv[3])  # tests/
sys.path.insert(3, sys.argv[3] + "/blender")  # the sidebar test's recording layout
from selvedge_import import import_selvedge
import bpy
selvedge = import_selvedge()
from blender_scenes import grid_cloth
from test_sidebar_panels import draw
overlay = importlib.import_module(selvedge.__name__ + ".operators.overlay")
materials = importlib.import_module(selvedge.__name__ + ".solver.materials")
bpy.ops.wm.read_factory_settings(use_empty=True)
selvedge.register()
obj, _ = grid_cloth(1, 4)
scene = bpy.context.scene
scene.selvedge.cache_folder = sys.argv[4]
scene.selvedge.network_mode = sys.argv[5]
out = {"frame_before": scene.frame_current}

def run(name, *args):
    try:
        return {"result": sorted(getattr(bpy.ops.selvedge, name)(*args))}
    except RuntimeError as error:
        return {"error": str(error)}

# The sidebar: every panel draws, and picking a preset sets the sliders (plain Python, no numba).
out["panels"] = {cls.__name__: draw(cls, obj) is not None for cls in selvedge.panels.CLASSES}
obj.selvedge.material_preset = "denim"
out["density"] = [obj.selvedge.density_kg_m2, materials.preset("denim").density_kg_m2, materials.preset("cotton").density_kg_m2]
# Simulate (Preview), as its button calls it; then Bake to Cache, in the same session (a second click).
out["preview"] = run("simulate_preview", "INVOKE_DEFAULT")
out["preview_shape_keys"] = obj.data.shape_keys is not None
out["preview_overlay"] = overlay._RECORDS.get(obj.name) is not None
out["frame_after"] = scene.frame_current
out["bake"] = run("bake_cache")
out["files"] = sorted(p.name for p in __import__("pathlib").Path(sys.argv[4]).glob("*"))
out["modifiers"] = [m.type for m in obj.modifiers]
selvedge.unregister()
print("RESULT " + json.dumps(out))
sys.stdout.flush()
importlib.import_module(selvedge.__name__ + ".module_exit").exit_process(0)
"""


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_the_preview_and_a_bake_report_the_failure_as_one_message(tmp_path, case):
    """Through the UI's paths in one session: the sidebar panels draw and a preset applies; Simulate
    (Preview), then Bake to Cache, each report that one message (Blender's report: what the status
    bar, the Info log and a script's RuntimeError show), change nothing, and no traceback reaches
    the output."""
    site, keep_site = make_site(tmp_path, case)
    if not keep_site:  # the bpy child needs bpy and its packages: mask the missing one in front of them
        site = tmp_path / "mask"
        site.mkdir()
        name = "onnxruntime" if case == "onnxruntime_missing" else "numba"
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n"
        )
    check, words = EXPECTED[case]
    mode = "ACCELERATION" if check == "network" else "OFF"
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD_UI,
            str(site),
            str(ROOT / "devtools"),
            str(ROOT / "tests"),
            str(tmp_path / "cache"),
            mode,
        ],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=600,
    )
    output = child.stdout + child.stderr
    assert child.returncode == 0, output[-4000:]
    got = json.loads(next(line for line in child.stdout.splitlines() if line.startswith("RESULT "))[7:])
    print(case, "->", got)
    # every panel a cloth object shows was drawn (a failing draw would have ended the child)
    assert {name for name, drawn in got["panels"].items() if not drawn} == {"SELVEDGE_PT_collider"}, got["panels"]
    picked, denim, cotton = got["density"]
    assert picked == pytest.approx(denim, rel=1e-6) and denim != cotton  # the preset applied
    for operator, prefix in (("preview", "Selvedge preview failed"), ("bake", "Selvedge bake failed")):
        assert "error" in got[operator], (operator, got)
        error = got[operator]["error"]
        assert error.startswith(f"Error: {prefix}: Selvedge") and error.count("\n") <= 1, error
        missing = [w for w in words if w not in error]
        assert not missing, (operator, missing, error)
    assert got["preview"]["error"].split(": ", 2)[2] == got["bake"]["error"].split(": ", 2)[2]  # the same words
    assert "Traceback" not in output, output[-4000:]
    # Nothing written, the scene as it was: no preview key or overlay, the frame, no cache, no modifier.
    assert not got["preview_shape_keys"] and not got["preview_overlay"]
    assert got["frame_after"] == got["frame_before"]
    assert got["files"] == [] and got["modifiers"] == []


def test_the_messages_name_the_pins_the_build_bundles():
    """dependencies.py's versions are requirements/solver.txt's and scripts/build_extension.py's."""
    import re

    from selvedge import dependencies

    build_script = (ROOT / "scripts" / "build_extension.py").read_text()
    onnxruntime = re.search(r'^ONNXRUNTIME = "onnxruntime==([^"]+)"', build_script, re.M).group(1)
    assert (
        PINS["numba"],
        PINS["llvmlite"],
        onnxruntime,
    ) == (dependencies.NUMBA, dependencies.LLVMLITE, dependencies.ONNXRUNTIME)
