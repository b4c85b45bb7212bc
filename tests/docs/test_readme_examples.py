"""Every Python example in README.md and docs/ runs as written, and gives what its text says.

Two kinds of blocks: ```` ```python ```` is plain Python (the solver, no Blender): the blocks of one
file run in order in one namespace, from an empty folder (they write ``out/...``), with
``selvedge`` importable as ``pip install -e .`` makes it. ```` ```py ```` is Blender Python: each
such block is listed in :data:`BLENDER_EXAMPLES` with the way it is run (a new one fails
:func:`test_every_blender_example_is_run` until it is). docs/history/ is a log, not run.
"""

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def doc_files():
    """README.md and docs/**/*.md, without the history."""
    files = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
    return [f for f in files if "history" not in f.relative_to(ROOT).parts]


def blocks(path: Path, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(path.read_text(encoding="utf-8")) if lang == language]


def block_under(path: Path, heading: str, language: str = "py") -> str:
    """The first ``language`` block after the heading ``heading``."""
    text = path.read_text(encoding="utf-8")
    section = text[re.search(rf"^#+ {re.escape(heading)}$", text, re.M).end() :]
    return next(body for lang, body in FENCE.findall(section) if lang == language)


def importable_selvedge(tmp_path: Path) -> Path:
    """A folder holding ``selvedge`` -> the repository, as an (editable) install puts it on the path."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "selvedge").symlink_to(ROOT, target_is_directory=True)
    return site


def run_python_blocks(path: Path, tmp_path, monkeypatch) -> dict:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # the examples write out/... relative to where they run
    namespace = {"__name__": "doc_example"}
    for block in blocks(path, "python"):
        exec(compile(block, str(path.relative_to(ROOT)), "exec"), namespace)
    return namespace


@pytest.mark.parametrize(
    "path", [p for p in doc_files() if blocks(p, "python")], ids=lambda p: str(p.relative_to(ROOT))
)
def test_python_examples_run(path, tmp_path, monkeypatch, capsys):
    run_python_blocks(path, tmp_path, monkeypatch)
    assert capsys.readouterr().out.strip(), "an example prints what it shows"


def test_readme_example_hangs_a_sheet_from_its_pins(tmp_path, monkeypatch, capsys):
    ns = run_python_blocks(ROOT / "README.md", tmp_path, monkeypatch)
    cloth, diag, start = ns["cloth"], ns["diag"], ns["positions"]
    assert diag.frame == 24
    pinned = cloth.pinned_vertices
    np.testing.assert_array_equal(cloth.positions[pinned], start[pinned])  # hard pins are kinematic
    assert start[:, 2].mean() - cloth.positions[:, 2].mean() > 0.1  # the free part fell, held by the pins
    # The printed strain is the largest edge strain, measured here from the positions and the faces.
    tri = ns["faces"]
    edges = np.unique(np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]]), axis=1), axis=0)
    length = np.linalg.norm(np.diff(cloth.positions[edges], axis=1)[:, 0], axis=1)
    rest = np.linalg.norm(np.diff(start[edges], axis=1)[:, 0], axis=1)
    assert abs((length / rest - 1).max() - diag.strain_max) < 1e-9
    assert f"after 24 frames: max strain {diag.strain_max:.1%}" in capsys.readouterr().out


def test_api_examples_slide_a_pin_and_rest_a_sheet_on_a_ball(tmp_path, monkeypatch, capsys):
    ns = run_python_blocks(ROOT / "docs" / "user" / "python_api.md", tmp_path, monkeypatch)
    out = capsys.readouterr().out
    # Collision example: the sheet rests on the moving ball at the contact gap, 4 mm.
    gap = ns["gap"]
    assert 0.004 - 1e-3 <= gap <= 0.004 + 1e-3, gap
    assert f"closest cloth vertex {1000 * gap:.1f} mm from the ball" in out
    # The API example (its names were overwritten by the collision example: run the first block again).
    first = blocks(ROOT / "docs" / "user" / "python_api.md", "python")[0]
    exec(compile(first, "python_api.md", "exec"), ns)
    cloth, diag = ns["cloth"], ns["diag"]
    assert diag.frame == 24 and cloth.frame == 24
    corner = cloth.pinned_vertices[1]  # the slid corner is exactly at its last target
    assert abs(cloth.positions[corner, 0] - (ns["start"][1, 0] - 0.3)) < 1e-12
    assert f"frame 24: max strain {diag.strain_max:.3f}" in capsys.readouterr().out
    work = tmp_path / "work" / "out"
    data = (work / "cloth.pc2").read_bytes()
    assert struct.unpack("<12siiffi", data[:32]) == (b"POINTCACHE2\x00", 1, 32 * 32, 1.0, 1.0, 1)
    assert ns["frames"].shape == (1, 32 * 32, 3) and ns["header"].num_samples == 1
    assert sorted(os.listdir(work)) == ["cloth.json", "cloth.pc2"]


# ----------------------------------------------------------------------------------------------
# Blender examples
def run_script_in_child(path: Path, heading: str, tmp_path) -> subprocess.CompletedProcess:
    """A whole script: run as ``python script.py -- OUT`` with the bpy module, as the text says."""
    script = tmp_path / "example.py"
    script.write_text(block_under(path, heading), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=str(importable_selvedge(tmp_path)))
    proc = subprocess.run(
        [sys.executable, str(script), "--", str(tmp_path / "example")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(proc.stdout[-3000:], proc.stderr[-2000:])
    assert proc.returncode == 0, proc.stderr
    return proc


#: (file, heading of the section holding the ```py block) of every Blender example, with its test.
BLENDER_EXAMPLES = {
    ("README.md", "Quick start"): "test_readme_script_bakes_a_shirt_on_a_body",
    ("docs/user/python_api.md", "Scripting inside Blender"): "test_api_script_builds_and_bakes_a_scene",
}


def test_every_blender_example_is_run():
    found = set()
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) == "py":
                heading = re.findall(r"^#+ (.+)$", text[: match.start()], re.M)[-1]
                found.add((str(path.relative_to(ROOT)), heading))
    assert found == set(BLENDER_EXAMPLES), "add each ```py block to BLENDER_EXAMPLES with a test that runs it"


@pytest.mark.blender
def test_readme_script_bakes_a_shirt_on_a_body(tmp_path):
    """The README's script in a scene that has what it names: a 'Shirt' with a 'Waist' group, a 'Body'."""
    import bpy
    from blender_scenes import factory_scene

    from selvedge.solver.io_pc2 import read_pc2, read_sidecar

    with factory_scene() as scene:
        scene.frame_start, scene.frame_end = 1, 6
        bpy.ops.mesh.primitive_grid_add(
            x_subdivisions=9, y_subdivisions=9, size=0.6, location=(0, 0, 1.0), calc_uvs=True
        )
        shirt = bpy.context.object
        shirt.name = "Shirt"
        waist = [v.index for v in shirt.data.vertices if v.co.y > 0.29]
        shirt.vertex_groups.new(name="Waist").add(waist, 1.0, "REPLACE")
        bpy.ops.mesh.primitive_uv_sphere_add(radius=0.2, location=(0, 0, 0.6))
        bpy.context.object.name = "Body"
        scene.selvedge.cache_folder = str(tmp_path / "cache")
        exec(compile(block_under(ROOT / "README.md", "Quick start"), "README.md", "exec"), {"__name__": "example"})
        assert shirt.modifiers[-1].name == "Selvedge Cache"
        frames, header = read_pc2(tmp_path / "cache" / "Shirt.pc2")
        sidecar = read_sidecar(tmp_path / "cache" / "Shirt.json")
    assert header.num_samples == 6 and header.num_points == 100
    assert sidecar["settings"]["scene"]["substeps"] == 30
    assert sidecar["settings"]["object"]["material_preset"] == "denim"
    rest = frames[0]
    np.testing.assert_allclose(frames[:, waist], np.broadcast_to(rest[waist], (6, len(waist), 3)), atol=1e-6)
    assert rest[:, 2].mean() - frames[-1][:, 2].mean() > 0.01  # the free part fell (object space)


@pytest.mark.blender
def test_api_script_builds_and_bakes_a_scene(tmp_path):
    from selvedge.solver.io_pc2 import read_pc2, read_sidecar

    proc = run_script_in_child(ROOT / "docs" / "user" / "python_api.md", "Scripting inside Blender", tmp_path)
    frames, header = read_pc2(tmp_path / "example" / "cache" / "Sheet.pc2")
    assert (header.start_frame, header.num_samples, header.num_points) == (1, 24, 16 * 16)
    sidecar = read_sidecar(tmp_path / "example" / "cache" / "Sheet.json")
    assert sidecar["frame_end"] == 24 and len(sidecar["frames"]) == 23
    assert (tmp_path / "example" / "scene.blend").is_file()
    drop = float(frames[0, :, 2].max() - frames[-1, :, 2].min())
    assert drop > 0.1  # the free edge fell
    assert "Sheet.pc2: 256 points, 24 samples from frame 1" in proc.stdout
