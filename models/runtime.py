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
CUDA_PROVIDER, CPU_PROVIDER = "CUDAExecutionProvider", "CPUExecutionProvider"
#: What a user needs for the GPU path (docs/design/network.md, section GPU, says how to install it).
GPU_INSTALL_HINT = (
    "for the GPU, install onnxruntime-gpu and its CUDA and cuDNN libraries (the nvidia-* wheels it "
    "names) next to Blender's Python: docs/design/network.md, section GPU"
)
#: Inputs that depend only on the mesh: with I/O binding they are copied to the device once, not every frame.
STATIC_INPUTS = ("senders", "receivers", "incidence")


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


def choose_providers(available, prefer_gpu: bool = True) -> list[str]:
    """The execution providers to ask onnxruntime for, best first: CUDA (then CPU for the nodes CUDA
    does not take) when it is available and wanted, else the CPU alone."""
    if prefer_gpu and CUDA_PROVIDER in available:
        return [CUDA_PROVIDER, CPU_PROVIDER]
    return [CPU_PROVIDER]


def cuda_build(ort) -> str:
    """'onnxruntime-gpu 1.31.1 built for CUDA 13.0' (or without the CUDA part where the build does not say)."""
    import importlib

    try:
        cuda = getattr(importlib.import_module(f"{ort.__name__}.capi.build_and_package_info"), "cuda_version", None)
    except (ImportError, AttributeError):
        cuda = None
    return f"onnxruntime {getattr(ort, '__version__', '?')}" + (f" built for CUDA {cuda}" if cuda else "")


def preload_cuda_libraries(ort) -> str | None:
    """Load the CUDA and cuDNN libraries of the nvidia-* wheels installed beside onnxruntime-gpu
    (``onnxruntime.preload_dlls``, onnxruntime >= 1.21), so no LD_LIBRARY_PATH / PATH is needed inside
    Blender. Returns the error text when that failed (the CUDA provider will then not start), else None."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return None
    try:
        preload()
    except Exception as exc:  # any failure means: the CUDA provider will not start, the CPU takes over
        return f"{type(exc).__name__}: {exc}"
    return None


def provider_message(
    used: str, available, prefer_gpu: bool, threads: int, build: str = "onnxruntime", cuda_error: str | None = None
) -> str:
    """The sentence the bake reports: where the network runs and, on the CPU, why not on the GPU."""
    if used == CUDA_PROVIDER:
        return f"learned network runs on the GPU ({CUDA_PROVIDER}, {build})"
    cpu = f"learned network runs on the CPU ({CPU_PROVIDER}, {threads} threads)"
    if not prefer_gpu:
        return cpu
    if CUDA_PROVIDER not in available:
        return f"{cpu}: onnxruntime has no CUDA provider here ({build} is a CPU build); {GPU_INSTALL_HINT}"
    detail = f": {cuda_error}" if cuda_error else ""
    return (
        f"{cpu}: the CUDA provider failed to start ({build}; its CUDA or cuDNN libraries are missing, do not "
        f"match that CUDA version, or no GPU is visible{detail}); {GPU_INSTALL_HINT}"
    )


class LearnedModel:
    """One onnxruntime session. ``provider`` says where it runs; ``provider_message`` why.

    On the CUDA provider, :meth:`run` uses I/O binding: the mesh-only inputs (:data:`STATIC_INPUTS`)
    are copied to the GPU once and stay there between frames; the per-frame features go up and the
    residuals come back every frame (the solver runs on the CPU). ``io_binding`` forces it on or off.
    """

    def __init__(
        self,
        path: str | os.PathLike | None = None,
        *,
        threads: int = DEFAULT_THREADS,
        prefer_gpu: bool = True,
        io_binding: bool | None = None,
        enable_profiling: bool = False,
    ):
        self.path = Path(path) if path is not None else DEFAULT_MODEL_PATH
        if not self.path.is_file():
            raise ModelError(
                f"learned-network model file not found: {self.path}. Expected an ONNX file "
                f"(format {MODEL_FORMAT}) with inputs {expected_inputs_text()} and output "
                f"{OUTPUT_NAME} float32[N,{N_OUT}]; train one with `python -m models.training.train`."
            )
        ort = _onnxruntime()
        available = list(ort.get_available_providers())
        providers = choose_providers(available, prefer_gpu)
        cuda_error = preload_cuda_libraries(ort) if CUDA_PROVIDER in providers else None
        options = ort.SessionOptions()
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # the solver runs right after every inference on the same cores: idle ORT threads must not spin
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.enable_profiling = bool(enable_profiling)
        try:
            self.session = ort.InferenceSession(str(self.path), sess_options=options, providers=providers)
        except Exception as exc:
            raise ModelError(
                f"cannot load learned-network model {self.path}: {exc}. Expected an ONNX file "
                f"(format {MODEL_FORMAT}) with inputs {expected_inputs_text()}"
            ) from exc
        self.provider = self.session.get_providers()[0]
        self.available_providers = available
        self.provider_message = provider_message(
            self.provider, available, prefer_gpu, threads, cuda_build(ort), cuda_error
        )
        self._ort = ort
        self.io_binding = self.provider == CUDA_PROVIDER if io_binding is None else bool(io_binding)
        self._binding = None
        self._bound_static: dict[str, tuple] = {}
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
            if (
                isinstance(last, int)
                and len(got[name].shape) == len(shape)
                and got[name].shape[-1] not in (last, None)
                and not isinstance(got[name].shape[-1], str)
            ):
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
            raise ModelError(
                f"learned-network model {self.path} does not match this runtime: "
                + "; ".join(problems)
                + f". Expected inputs {expected_inputs_text()}, output {OUTPUT_NAME} float32[N,{N_OUT}], "
                f"metadata format={MODEL_FORMAT}"
            )

    def run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        """(N,6) float64 residuals r_x, r_v in m/s^2 (bounded; kinematic rows zero)."""
        t0 = time.perf_counter()
        out = self._run_bound(feed) if self.io_binding else self.session.run([OUTPUT_NAME], feed)[0]
        self.last_ms = 1e3 * (time.perf_counter() - t0)
        return np.asarray(out, dtype=np.float64)

    @property
    def device(self) -> str:
        """onnxruntime's name of the memory the session's inputs live in: 'cuda' or 'cpu'."""
        return "cuda" if self.provider == CUDA_PROVIDER else "cpu"

    def _run_bound(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        """One inference through I/O binding. A static input is uploaded again only when the caller
        passes another array for it (another mesh); the output is bound to host memory, so onnxruntime
        copies it back once, straight into the array returned."""
        if self._binding is None:
            self._binding = self.session.io_binding()
        binding, device = self._binding, self.device
        for name, value in feed.items():
            if name in STATIC_INPUTS:
                held = self._bound_static.get(name)
                if held is None or held[0] is not value:
                    on_device = self._ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(value), device, 0)
                    self._bound_static[name] = (value, on_device)
                    binding.bind_ortvalue_input(name, on_device)
            else:
                binding.bind_cpu_input(name, np.ascontiguousarray(value))
        binding.bind_output(OUTPUT_NAME, "cpu")
        self.session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()[0]
