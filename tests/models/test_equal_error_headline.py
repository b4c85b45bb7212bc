"""The evaluation bench's headline logic (bench/bench_network.py) on synthetic cells: equal-error
comparison on pure XPBD's error-vs-time frontier, and a plain NO when pure XPBD wins outright."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_network", ROOT / "bench" / "bench_network.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def cell(mode, substeps, err, ms, net_ms=0.0):
    return {
        "mode": mode,
        "substeps": substeps,
        "iterations": 1,
        "strength": 1.0,
        "velocity_gain": 0.0,
        "err_50_mm": err,
        "total_ms": ms + net_ms,
        "network_ms": net_ms,
        "solver_ms": ms,
        "failed_scenes": 0,
        "guard_off_scenes": 0,
    }


PURE = [cell("off", 4, 40.0, 1.0), cell("off", 8, 20.0, 2.0), cell("off", 16, 10.0, 4.0), cell("off", 64, 0.0, 16.0)]


def test_pure_time_is_interpolated_on_the_frontier():
    pure = [dict(c, err=c["err_50_mm"]) for c in PURE + [cell("off", 6, 45.0, 3.0)]]  # dominated point ignored
    assert bench.pure_time_at_error(pure, 30.0) == 1.5
    assert bench.pure_time_at_error(pure, 5.0) == 10.0
    assert bench.pure_time_at_error(pure, 50.0) is None  # the cheapest pure config is already better


def test_headline_yes_only_when_faster_at_equal_error():
    fast = bench.equal_error_comparison(PURE + [cell("B", 4, 10.0, 1.0, net_ms=1.0)], "err_50_mm")
    assert fast["faster"] and fast["line"].startswith("YES") and abs(fast["ratio"] - 2.0) < 1e-12
    slow = bench.equal_error_comparison(PURE + [cell("B", 8, 18.0, 2.0, net_ms=1.5)], "err_50_mm")
    assert not slow["faster"] and slow["line"].startswith("NO")
    worse = bench.equal_error_comparison(PURE + [cell("residual", 4, 60.0, 1.0, net_ms=1.0)], "err_50_mm")
    assert not worse["faster"] and "less accurate than the cheapest pure XPBD" in worse["line"]
