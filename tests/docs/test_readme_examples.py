"""The README's Python examples run as written (from a copy of the repository layout they expect)."""
import os
import re
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_python_examples_run(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 3, "the README has the API example, the bake example and the collision example"
    (tmp_path / "devtools").symlink_to(ROOT / "devtools", target_is_directory=True)
    monkeypatch.chdir(tmp_path)  # the examples use paths relative to the repository root
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    namespace = {"__name__": "readme_example"}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)
    out = capsys.readouterr().out
    # Collision example (last block): the sheet rests on the moving ball at the contact gap, 4 mm.
    gap = namespace["gap"]
    assert 0.004 - 1e-3 <= gap <= 0.004 + 1e-3, gap
    assert f"closest cloth vertex {1000 * gap:.1f} mm from the ball" in out
    exec(compile(blocks[0], "README.md", "exec"), namespace)  # the API example's names again
    cloth, diag = namespace["cloth"], namespace["diag"]
    assert diag.frame == 24 and cloth.frame == 24
    # The slid corner is exactly at its last target (hard pins are kinematic).
    corner = cloth.pinned_vertices[1]
    assert abs(cloth.positions[corner, 0] - (namespace["start"][1, 0] - 0.3)) < 1e-12
    assert f"frame 24: max strain {diag.strain_max:.3f}" in out
    data = (tmp_path / "out" / "cloth.pc2").read_bytes()
    assert struct.unpack("<12siiffi", data[:32]) == (b"POINTCACHE2\x00", 1, 32 * 32, 1.0, 1.0, 1)
    frames, header = namespace["frames"], namespace["header"]
    assert frames.shape == (1, 32 * 32, 3) and header.num_samples == 1
    assert sorted(os.listdir(tmp_path / "out")) == ["cloth.json", "cloth.pc2"]
