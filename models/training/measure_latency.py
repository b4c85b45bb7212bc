"""Measure onnxruntime CPU latency of the network for a few (latent, steps) sizes on a large grid.

``python -m models.training.measure_latency`` (repository root, training requirements): exports
randomly initialised networks (latency does not depend on the weights) and times them with the
shipped thread count on a 65x65 (4,225-vertex) grid; the result goes into models/metrics.json
under "latency_sweep". This is the measurement behind the shipped size (see models/README.md).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, "", "models.training"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "devtools"))
    from selvedge_import import import_selvedge

    import_selvedge()
    __package__ = "selvedge.models.training"

import numpy as np

from ...solver.cloth import Cloth
from ...solver.mesh import grid_mesh
from ..graph import graph_from_cloth, model_inputs
from ..runtime import DEFAULT_THREADS, LearnedModel
from .network import GraphNet, export_onnx

SIZES = ((8, 2), (16, 2), (16, 3), (32, 3), (32, 5))


def main():
    pos, faces, uv = grid_mesh(65, 65, 1.0, 1.0, plane="xz")
    cloth = Cloth(pos, faces, uvs=uv, pin_weights=(pos[:, 2] == pos[:, 2].max()).astype(float))
    feed = model_inputs(graph_from_cloth(cloth), cloth.x, np.zeros_like(cloth.x), 1 / 24)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for latent, steps in SIZES:
            path = Path(tmp) / f"m{latent}_{steps}.onnx"
            export_onnx(GraphNet(latent, steps).eval(), feed, path, {})
            rt = LearnedModel(path, threads=DEFAULT_THREADS, prefer_gpu=False)
            for _ in range(3):
                rt.run(feed)
            times = []
            for _ in range(15):
                t0 = time.perf_counter()
                rt.run(feed)
                times.append(1e3 * (time.perf_counter() - t0))
            out[f"latent{latent}_steps{steps}"] = round(float(np.median(times)), 2)
            print(f"latent {latent}, {steps} steps: {out[f'latent{latent}_steps{steps}']} ms (4225 vertices)")
    metrics_path = Path(__file__).resolve().parents[1] / "metrics.json"
    metrics = json.loads(metrics_path.read_text())
    metrics["latency_sweep"] = {"vertices": 4225, "threads": DEFAULT_THREADS, "median_ms": out}
    metrics_path.write_text(json.dumps(metrics, indent=1))


if __name__ == "__main__":
    main()
