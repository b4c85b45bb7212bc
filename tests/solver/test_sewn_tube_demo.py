"""The sewing demo (scripts/demo_sewn_tube.py): two flat panels sewn into a skirt that grips the body.

Measured from the written cache against the scene: every seam shut, no vertex inside the body
capsule (its radius plus the cloth thickness), the waistband holding within 5 cm once gravity is on.
"""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from selvedge.solver.io_pc2 import read_pc2

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_sewn_skirt_closes_and_holds_on_the_body(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("demo_sewn_tube", ROOT / "scripts" / "demo_sewn_tube.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    assert demo.main(["--out", str(tmp_path), "--frames", "40"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    frames, header = read_pc2(tmp_path / "sewn_tube.pc2")
    assert frames.shape == (41, summary["vertices"], 3)
    pos, faces, pairs, waist = demo.panels(21, 13, 0.5, 0.36, 0.18)
    last = frames[-1]
    assert np.linalg.norm(last[pairs[:, 0]] - last[pairs[:, 1]], axis=1).max() < 2e-3
    inside_height = np.abs(last[:, 2]) <= demo.BODY_HALF_LENGTH
    radius = np.hypot(last[inside_height, 0], last[inside_height, 1])
    assert radius.min() > demo.BODY_RADIUS + 0.004 - 1e-3
    assert pos[waist > 0, 2].mean() - last[waist > 0, 2].mean() < 0.05
