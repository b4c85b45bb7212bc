"""The runtime's CUDA path without a GPU: provider choice, the fallback and its message, and the I/O
binding the CUDA path uses, driven through a stand-in onnxruntime whose provider list says CUDA.

The stand-in wraps the real (CPU) onnxruntime: sessions really run, only the providers a session
reports, the device an input is copied to and the CUDA library preload are played."""

from __future__ import annotations

import types

import numpy as np
import onnxruntime
import pytest

from selvedge.models import runtime
from selvedge.models.coupling import LearnedCoupling
from selvedge.models.graph import SPHERE, ColliderState, graph_from_cloth, model_inputs, world_edges
from selvedge.models.runtime import CPU_PROVIDER, CUDA_PROVIDER, LearnedModel, choose_providers
from selvedge.solver import Cloth, grid_mesh

CUDA_AND_CPU = [CUDA_PROVIDER, CPU_PROVIDER]


def stand_in_ort(available, cuda_starts: bool, preload_error: Exception | None = None):
    """An onnxruntime look-alike: ``available`` providers; a session asked for CUDA reports it only when
    ``cuda_starts`` (real onnxruntime silently drops a provider that failed to load)."""
    log = {"requested": [], "uploads": [], "preloaded": 0}

    class Session(onnxruntime.InferenceSession):
        def __init__(self, path, sess_options=None, providers=None):
            log["requested"].append(list(providers))
            super().__init__(path, sess_options=sess_options, providers=[CPU_PROVIDER])
            self._reported = [p for p in providers if p != CUDA_PROVIDER or cuda_starts]

        def get_providers(self):
            return list(self._reported)

    class OrtValue:
        @staticmethod
        def ortvalue_from_numpy(array, device="cpu", device_id=0):
            log["uploads"].append(device)
            return onnxruntime.OrtValue.ortvalue_from_numpy(array, "cpu", 0)

    def preload_dlls():
        log["preloaded"] += 1
        if preload_error is not None:
            raise preload_error

    module = types.SimpleNamespace(
        __name__="onnxruntime",
        __version__="1.31.1",
        get_available_providers=lambda: list(available),
        InferenceSession=Session,
        SessionOptions=onnxruntime.SessionOptions,
        OrtValue=OrtValue,
        preload_dlls=preload_dlls,
    )
    return module, log


def feed_for(nx=9, ny=7, with_world=True):
    pos, faces, uv = grid_mesh(nx, ny, 0.8, 0.6)
    cloth = Cloth(pos, faces, uvs=uv, pin_weights=(pos[:, 1] == pos[:, 1].max()).astype(float))
    rng = np.random.default_rng(nx)
    x, v = cloth.x + rng.normal(0, 0.01, cloth.x.shape), rng.normal(0, 0.5, cloth.x.shape)
    graph = graph_from_cloth(cloth)
    world = None
    if with_world:
        centre = np.array([[0.4, 0.3, -0.1]])
        ball = ColliderState(
            np.array([SPHERE]),
            np.array([[0.12, 0, 0]]),
            centre,
            np.array([[1.0, 0, 0, 0]]),
            centre,
            np.array([[1.0, 0, 0, 0]]),
            np.array([0.004]),
        )
        world = world_edges(ball, x, v, 1 / 24, graph.free)
        assert world[0].size > 0
    return cloth, model_inputs(graph, x, v, 1 / 24, world=world)


def test_provider_choice_prefers_cuda_only_when_present_and_wanted():
    assert choose_providers(CUDA_AND_CPU) == [CUDA_PROVIDER, CPU_PROVIDER]
    assert choose_providers(["TensorrtExecutionProvider", CUDA_PROVIDER, CPU_PROVIDER]) == [CUDA_PROVIDER, CPU_PROVIDER]
    assert choose_providers(CUDA_AND_CPU, prefer_gpu=False) == [CPU_PROVIDER]
    assert choose_providers([CPU_PROVIDER]) == [CPU_PROVIDER]
    assert choose_providers(["AzureExecutionProvider", CPU_PROVIDER]) == [CPU_PROVIDER]


def test_cuda_provider_that_starts_runs_through_io_binding(monkeypatch):
    ort, log = stand_in_ort(CUDA_AND_CPU, cuda_starts=True)
    monkeypatch.setattr(runtime, "_onnxruntime", lambda: ort)
    model = LearnedModel()
    assert log["requested"] == [[CUDA_PROVIDER, CPU_PROVIDER]] and log["preloaded"] == 1
    assert model.provider == CUDA_PROVIDER and model.io_binding and model.device == "cuda"
    assert model.provider_message.startswith("learned network runs on the GPU (CUDAExecutionProvider")
    reference = LearnedModel(prefer_gpu=False)  # the real CPU session, plain session.run
    _, feed = feed_for()
    for _ in range(3):  # frames of one mesh: the mesh inputs are copied to the device once
        out = model.run(feed)
        assert np.array_equal(out, reference.run(feed))
    assert log["uploads"] == ["cuda"] * len(runtime.STATIC_INPUTS)
    _, other = feed_for(6, 5, with_world=False)  # another mesh (and W = 0): uploaded again
    assert np.array_equal(model.run(other), reference.run(other))
    assert len(log["uploads"]) == 2 * len(runtime.STATIC_INPUTS)


def test_cuda_provider_that_fails_to_start_falls_back_to_the_cpu_and_says_why(monkeypatch):
    ort, log = stand_in_ort(
        CUDA_AND_CPU, cuda_starts=False, preload_error=OSError("libcudnn.so.9: cannot open shared object file")
    )
    monkeypatch.setattr(runtime, "_onnxruntime", lambda: ort)
    model = LearnedModel(threads=2)
    assert log["requested"] == [[CUDA_PROVIDER, CPU_PROVIDER]]
    assert model.provider == CPU_PROVIDER and not model.io_binding
    msg = model.provider_message
    assert msg.startswith(
        "learned network runs on the CPU (CPUExecutionProvider, 2 threads): the CUDA provider failed to start"
    )
    assert "libcudnn.so.9" in msg and "onnxruntime-gpu" in msg and "docs/design/network.md" in msg
    _, feed = feed_for()
    assert np.array_equal(model.run(feed), LearnedModel(prefer_gpu=False).run(feed))


def test_no_cuda_provider_names_what_to_install_and_the_bake_reports_it(monkeypatch):
    ort, log = stand_in_ort([CPU_PROVIDER], cuda_starts=False)
    monkeypatch.setattr(runtime, "_onnxruntime", lambda: ort)
    model = LearnedModel(threads=2)
    assert log["requested"] == [[CPU_PROVIDER]] and log["preloaded"] == 0  # nothing to preload for the CPU
    assert model.provider_message == (
        "learned network runs on the CPU (CPUExecutionProvider, 2 threads): onnxruntime has no CUDA provider here "
        "(onnxruntime 1.31.1 is a CPU build); " + runtime.GPU_INSTALL_HINT
    )
    cloth, _ = feed_for()
    coupling = LearnedCoupling(cloth, model, "B")
    assert coupling.events == [model.provider_message]
    # asking for the CPU says no more than that
    assert LearnedModel(threads=2, prefer_gpu=False).provider_message == (
        "learned network runs on the CPU (CPUExecutionProvider, 2 threads)"
    )


def test_io_binding_on_the_cpu_gives_the_same_bits_as_session_run():
    plain, bound = LearnedModel(prefer_gpu=False), LearnedModel(prefer_gpu=False, io_binding=True)
    for nx, ny, world in ((9, 7, True), (9, 7, False), (5, 4, True)):
        _, feed = feed_for(nx, ny, world)
        assert np.array_equal(bound.run(feed), plain.run(feed))


def test_the_installed_build_is_named():
    assert runtime.cuda_build(onnxruntime).startswith(f"onnxruntime {onnxruntime.__version__}")


@pytest.mark.bench
@pytest.mark.slow
def test_gpu_bench_dry_run_end_to_end_on_the_cpu(tmp_path, capsys, monkeypatch):
    """bench/bench_network_gpu.py --dry-run --torch-standin here: every row, the stand-in agreeing with
    onnxruntime (two implementations of one network), and the matrix's headline for the stand-in."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "bench" / "bench_network_gpu.py"
    spec = importlib.util.spec_from_file_location("bench_network_gpu", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.main(["--dry-run", "--torch-standin", "--sides", "8", "--repeats", "3", "--out", str(tmp_path)])
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    env = next(x for x in lines if x["case"] == "environment")
    assert "NO CUDA PROVIDER" in env["note"] or CUDA_PROVIDER in env["available_providers"]
    modes = {r["mode"] for r in result["latency"]}
    assert {"cpu", "cpu-iobinding", "cpu-resident", "torch-cpu", "torch-cpu-resident"} <= modes
    assert {r["world"] for r in result["latency"]} == {True, False}
    for r in result["latency"]:
        assert r["ms"] > 0 and r["vertices"] == 64
        if "max_abs_diff_vs_cpu" in r:
            assert r["max_abs_diff_vs_cpu"] < 1e-4, r  # outputs are up to 50 m/s^2
    assert all(r["stand_in"] for r in result["latency"] if r["mode"].startswith("torch"))
    headlines = [x for x in lines if x.get("bench") == "network" and x["case"] == "headline"]
    assert [h["device"] for h in headlines] == ["CPU (PyTorch stand-in)"] * 2
    assert result["matrix"]["device"] == "CPU (PyTorch stand-in)"
    assert json.loads((tmp_path / "latency.json").read_text())["latency_table"].startswith("| vertices |")

    # the tables for docs/benchmarks.md, from the files the run left (as after a device run)
    import _docs_table
    import bench_network

    docs = tmp_path / "benchmarks.md"
    monkeypatch.setattr(_docs_table.write_section, "__defaults__", (docs,))
    bench.main(["--from-json", str(tmp_path / "latency.json"), "--write-docs"])
    text = docs.read_text()
    assert "python bench/bench_network_gpu.py --dry-run --torch-standin --sides 8 --repeats 3\n" in text
    assert result["latency_table"] in text and result["matrix"]["headline"]["err_50_mm"]["line"] in text
    matrix = json.loads((tmp_path / "matrix" / "results.json").read_text())
    bench_network.write_docs(matrix, ["--quick"], path=docs)
    text = docs.read_text()
    assert "<!-- bench:bench_network_gpu -->" in text  # the other section stays
    section = text.split("<!-- bench:bench_network -->")[1]
    assert "python bench/bench_network.py --quick" in section
    assert sum(line.startswith("| 4 | 1 | ") for line in section.splitlines()) == len(matrix["cells"]) - 1
