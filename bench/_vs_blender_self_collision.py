"""The self-collision comparison of ``bench_vs_blender_cloth.py --self-collision``: summary lines and table.

Each scene was run by both solvers with self-collision off (``<scene>``) and on (``<scene>_self``),
in one process; the crossing triangle pairs of every frame were counted on each solver's evaluated
mesh by ``devtools/cloth_checks.crossing_pairs`` (Blender's ``BVHTree.overlap``, pairs sharing a
vertex left out), not by either solver. A summary line per scene gives:

* ``selvedge_over_blender_ms``: Selvedge's ms/frame over Blender Cloth's, both with self-collision
  on (``selvedge_over_blender_ms_without``: both off);
* ``self_collision_overhead``: per solver, its ms/frame with self-collision over its own without;
* per solver and case, ``crossings_max`` (most crossing pairs in a frame) and
  ``frames_with_crossings``.

Only ratios are reported: the milliseconds depend on the host and its load.
"""

from __future__ import annotations

SOLVERS = {"blender_cloth": "Blender Cloth", "selvedge": "Selvedge"}


def self_collision_summaries(lines: list[dict]) -> list[dict]:
    """One ``"case": "self_collision_summary"`` line per scene run by both solvers, off and on."""
    out = []
    for scene in dict.fromkeys(line["scene"] for line in lines if not line["scene"].endswith("_self")):
        off = {line["solver"]: line for line in lines if line["scene"] == scene}
        on = {line["solver"]: line for line in lines if line["scene"] == scene + "_self"}
        if set(off) != set(SOLVERS) or set(on) != set(SOLVERS):
            continue
        summary = {
            "case": "self_collision_summary",
            "scene": scene,
            "vertices": on["selvedge"]["vertices"],
            "frames": on["selvedge"]["frames"],
            "selvedge_over_blender_ms": on["selvedge"]["ms_per_frame"] / on["blender_cloth"]["ms_per_frame"],
            "selvedge_over_blender_ms_without": off["selvedge"]["ms_per_frame"] / off["blender_cloth"]["ms_per_frame"],
            "self_collision_overhead": {s: on[s]["ms_per_frame"] / off[s]["ms_per_frame"] for s in SOLVERS},
            # The same from the medians of the timed frames: a single slow frame cannot move them.
            "selvedge_over_blender_ms_median": on["selvedge"]["ms_per_frame_median"]
            / on["blender_cloth"]["ms_per_frame_median"],
            "self_collision_overhead_median": {
                s: on[s]["ms_per_frame_median"] / off[s]["ms_per_frame_median"] for s in SOLVERS
            },
        }
        for s in SOLVERS:
            for case, by in (("on", on), ("off", off)):
                summary[f"{s}_crossings_max_{case}"] = by[s]["crossings_max"]
                summary[f"{s}_frames_with_crossings_{case}"] = by[s]["frames_with_crossings"]
        summary["selvedge_solver_reported_crossings_max_on"] = on["selvedge"].get("solver_reported_crossings_max")
        summary["selvedge_frames_run_again_on"] = on["selvedge"].get("frames_run_again")
        summary["selvedge_frames_untangled_on"] = on["selvedge"].get("frames_untangled")
        summary["blender_self_settings"] = {
            k: v for k, v in on["blender_cloth"]["settings"].items() if k.startswith(("self", "collision"))
        }
        out.append(summary)
    return out


def write_self_collision_docs(lines: list[dict], summaries: list[dict], argv) -> None:
    """Section ``bench_vs_blender_cloth_self_collision`` of docs/benchmarks.md."""
    from _docs_table import markdown_table, write_section

    measured = len(lines[0]["crossings_per_frame"]) if lines else 0
    by = {(line["scene"], line["solver"]): line for line in lines}
    rows = []
    for s in summaries:
        for solver, name in SOLVERS.items():
            off, on = by[(s["scene"], solver)], by[(s["scene"] + "_self", solver)]
            rows.append(
                [
                    s["scene"],
                    name,
                    f"{s['self_collision_overhead'][solver]:.2f} ({s['self_collision_overhead_median'][solver]:.2f})",
                    f"{off['crossings_max']} / {off['frames_with_crossings']}",
                    f"{on['crossings_max']} / {on['frames_with_crossings']}",
                    ratio(on, by[(s["scene"] + "_self", "blender_cloth")]),
                ]
            )
    body = markdown_table(
        [
            "scene",
            "solver",
            "ms/frame self-collision on / off: means (medians)",
            "crossing pairs off: max / frames with any",
            "crossing pairs on: max / frames with any",
            "ms/frame (on) / Blender Cloth's (on): mean (median)",
        ],
        rows,
    )
    body += (
        f"\n\nCrossings: triangle pairs of the evaluated mesh that cross (sharing no vertex), by Blender's "
        f"`BVHTree.overlap` at each of the {measured} frames after the first."
    )
    for s in summaries:
        blender = s["blender_self_settings"]
        body += (
            f"\n\n{s['scene']}: with self-collision on, Selvedge takes {s['selvedge_over_blender_ms']:.3f} of Blender "
            f"Cloth's mean ms/frame (median {s['selvedge_over_blender_ms_median']:.3f}; both off: "
            f"{s['selvedge_over_blender_ms_without']:.3f}); Blender's self-collision at its "
            f"defaults (distance {blender.get('self_distance_min_m', 0):.3f} m, collision quality "
            f"{blender.get('collision_quality')})."
        )
    write_section("bench_vs_blender_cloth_self_collision", "bench/bench_vs_blender_cloth.py " + " ".join(argv), body)


def ratio(line: dict, blender: dict) -> str:
    mean = line["ms_per_frame"] / blender["ms_per_frame"]
    return f"{mean:.3f} ({line['ms_per_frame_median'] / blender['ms_per_frame_median']:.3f})"
