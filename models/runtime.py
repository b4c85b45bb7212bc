"""onnxruntime session for the learned network: load, check, pick a provider, run.

No PyTorch here. The model file carries its own normalisation statistics as graph constants
(inputs are raw physical features, the output is a bounded pair of residuals in m/s^2 with
the kinematic rows already zeroed), and its metadata names the feature layout it was trained on, so
a file from another feature version is refused instead of giving plausible-looking nonsense.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from .graph import EDGE_FEATURES, N_EDGE, N_NODE, N_WORLD, NODE_FEATURES, WORLD_EDGE_FEATURES

#: The shipped model, written by ``python -m models.training.train``.
DEFAULT_MODEL_PATH = Path(__file__).resolve().parent / "selvedge_gnn.onnx"
MODEL_FORMAT = "selvedge-gnn-3"
#: Thread count the model is shipped and checked with (ONNX vs PyTorch agreement is measured here).
DEFAULT_THREADS = 2
EXPECTED_INPUTS = {
    "node_features": ("float32", ("N", N_NODE)),
    "edge_features": ("float32", ("E", N_EDGE)),
    "senders": ("int64", ("E",)),
    "receivers": ("int64", ("E",)),
    "incidence": ("int64", ("N", "K")),
    "free_mask": ("float32", ("N", 1)),
    "world_edge_features": ("float32", ("W", N_WORLD)),
    "world_receivers": ("int64", ("W",)),
    "world_incidence": ("int64", ("N", "KW")),
}
OUTPUT_NAME = "residual"
#: Output columns: r_x (position residual / dt^2) and r_v (velocity residual / dt), both m/s^2.
N_OUT = 6


def expected_inputs_text() -> str:
    return ", ".join(f"{name} {dtype}[{','.join(map(str, shape))}]" for name, (dtype, shape) in EXPECTED_INPUTS.items())


class ModelError(RuntimeError):
    """The model file is missing, unreadable or does not match what this runtime feeds it."""


def _onnxruntime():
    try:
        import onnxruntime as ort
    except ImportError as exc:  # pragma: no cover - onnxruntime is a runtime requirement
        raise ModelError("the learned network needs the onnxruntime package (pip install onnxruntime==1.32.0)") from exc
    return ort


class LearnedModel:
    """One onnxruntime session. ``provider`` says where it runs; ``provider_message`` why."""

    def __init__(self, path: str | os.PathLike | None = None, *, threads: int = DEFAULT_THREADS,
                 prefer_gpu: bool = True):
        self.path = Path(path) if path is not None else DEFAULT_MODEL_PATH
        if not self.path.is_file():
            raise ModelError(f"learned-network model file not found: {self.path}. Expected an ONNX file "
                             f"(format {MODEL_FORMAT}) with inputs {expected_inputs_text()} and output "
                             f"{OUTPUT_NAME} float32[N,{N_OUT}]; train one with `python -m models.training.train`.")
        ort = _onnxruntime()
        available = ort.get_available_providers()
        providers = ["CPUExecutionProvider"]
        if prefer_gpu and "CUDAExecutionProvider" in available:
            providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # the solver runs right after every inference on the same cores: idle ORT threads must not spin
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self.session = ort.InferenceSession(str(self.path), sess_options=options, providers=providers)
        except Exception as exc:
            raise ModelError(f"cannot load learned-network model {self.path}: {exc}. Expected an ONNX file "
                             f"(format {MODEL_FORMAT}) with inputs {expected_inputs_text()}") from exc
        self.provider = self.session.get_providers()[0]
        if self.provider == "CUDAExecutionProvider":
            self.provider_message = "learned network runs on the GPU (CUDAExecutionProvider)"
        elif prefer_gpu:
            why = ("onnxruntime has no CUDA provider here" if "CUDAExecutionProvider" not in available
                   else "the CUDA provider failed to start")
            self.provider_message = f"learned network runs on the CPU (CPUExecutionProvider, {threads} threads): {why}"
        else:
            self.provider_message = f"learned network runs on the CPU (CPUExecutionProvider, {threads} threads)"
        self.threads = int(threads)
        self.metadata = dict(self.session.get_modelmeta().custom_metadata_map)
        self._check_signature()
        self.protocol = json.loads(self.metadata.get("protocol", "{}"))
        self.accel_bound = float(self.metadata.get("accel_bound_m_s2", "nan"))
        self.last_ms = 0.0

    def _check_signature(self) -> None:
        problems = []
        fmt = self.metadata.get("format")
        if fmt != MODEL_FORMAT:
            problems.append(f"metadata format is {fmt!r}, expected {MODEL_FORMAT!r}")
        got = {i.name: i for i in self.session.get_inputs()}
        for name, (dtype, shape) in EXPECTED_INPUTS.items():
            if name not in got:
                problems.append(f"input {name!r} missing")
                continue
            if got[name].type != f"tensor({'float' if dtype == 'float32' else dtype})":
                problems.append(f"input {name!r} has type {got[name].type}, expected {dtype}")
            last = shape[-1]
            if isinstance(last, int) and len(got[name].shape) == len(shape) and got[name].shape[-1] not in (last, None) \
                    and not isinstance(got[name].shape[-1], str):
                problems.append(f"input {name!r} has shape {got[name].shape}, expected {list(shape)}")
        extra = set(got) - set(EXPECTED_INPUTS)
        if extra:
            problems.append(f"unexpected inputs {sorted(extra)}")
        outs = [o.name for o in self.session.get_outputs()]
        if OUTPUT_NAME not in outs:
            problems.append(f"output {OUTPUT_NAME!r} missing (outputs: {outs})")
        if self.metadata.get("node_features") not in (None, ",".join(NODE_FEATURES)):
            problems.append("node feature layout differs from this runtime's models.graph.NODE_FEATURES")
        if self.metadata.get("edge_features") not in (None, ",".join(EDGE_FEATURES)):
            problems.append("edge feature layout differs from this runtime's models.graph.EDGE_FEATURES")
        if self.metadata.get("world_edge_features") not in (None, ",".join(WORLD_EDGE_FEATURES)):
            problems.append("world-edge feature layout differs from this runtime's models.graph.WORLD_EDGE_FEATURES")
        if problems:
            raise ModelError(f"learned-network model {self.path} does not match this runtime: " + "; ".join(problems)
                             + f". Expected inputs {expected_inputs_text()}, output {OUTPUT_NAME} float32[N,{N_OUT}], "
                             f"metadata format={MODEL_FORMAT}")

    def run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        """(N,6) float64 residuals r_x, r_v in m/s^2 (bounded; kinematic rows zero)."""
        t0 = time.perf_counter()
        out = self.session.run([OUTPUT_NAME], feed)[0]
        self.last_ms = 1e3 * (time.perf_counter() - t0)
        return np.asarray(out, dtype=np.float64)
