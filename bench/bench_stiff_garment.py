"""Stiff fabric on a body: edge strain of a cotton sheet draping over a head and shoulders, solver only.

Scene (the garment case of ``bench_vs_blender_cloth.py --scene garment`` without bpy): a closed
body mesh of a capped cylinder torso (radius 0.2 m, 0.7-1.3 m, 32 segments) and a UV-sphere
head (radius 0.12 m at 1.45 m, 32 x 16), a ``TriangleMesh`` collider with the add-on's defaults
(thickness 5 mm, friction 0.5 combined with the cloth's); a horizontal 1 m cotton sheet of
``--grid`` vertices a side (quads, as Blender's grid), 0.08 m above the head, unpinned, falling
onto it at 24 fps, Selvedge defaults (10 x 1, serial).

Strain: every quad edge's (L - L0) / L0 after each frame (the fan diagonals left out, as the
Blender bench measures); ``strain_p95_worst`` is the worst frame's 95th percentile (the landing),
``strain_p95_last`` the last frame's (at rest), ``compression_p95_worst`` the worst frame's
95th percentile of -strain; ``inside_body_max``: most vertices inside the head or torso in a
frame. ``cpu_ms_per_frame``: median ``time.thread_time`` of ``Cloth.step`` (the machine is
shared: compare ratios inside one run), ``cpu_ms_per_frame_mean`` its mean, which counts the
frames run again with more substeps (``substeps_mean``, ``frames_refined``; see
``SolverSettings.stretch_refinements``); ``cost_vs_first``: the mean against the first variant's.

Variants (``--variants``): ``defaults``; ``substeps12`` / ``substeps14`` / ``substeps20``: more
substeps (the reference at about equal cost for a candidate), ``substeps40``; ``refine2``: a frame
that ends stretched is run again with 2x, then 4x the substeps (``SolverSettings.stretch_refinements``); ``limit_contacts``:
``ClothOptions.stretch_limit_contacts``; ``fine_projection1`` / ``2`` / ``3``: that many Newton
steps of ``ClothOptions.fine_projection``, ``fine_projection2_compression`` with its compression
limit, ``fine_projection<n>_cg<k>``: n Newton steps of k CG iterations. The coarse-pass candidates measured with this scene and
not kept are in docs/design/stiff_fabric.md ("Garment: what was tried").

    .venv/bin/python bench/bench_stiff_garment.py --grid 48 --frames 60 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "devtools"))
sys.path.insert(0, str(ROOT / "bench"))
from selvedge_import import import_selvedge

import_selvedge()
from selvedge import solver
from selvedge.solver.collisions import Colliders, TriangleMesh, combined_friction
from selvedge.solver.mesh import uv_ellipsoid_mesh

TORSO_RADIUS, TORSO_Z0, TORSO_Z1 = 0.2, 0.7, 1.3
HEAD_RADIUS, HEAD_Z = 0.12, 1.45
GARMENT_GAP = 0.08

#: variant -> (what it is, ClothOptions overrides, SolverSettings overrides)
VARIANTS = {
    "defaults": ("Selvedge defaults (10 x 1, serial)", {}, {}),
    "substeps12": ("12 substeps", {}, dict(substeps=12)),
    "substeps14": ("14 substeps", {}, dict(substeps=14)),
    "substeps20": ("20 substeps", {}, dict(substeps=20)),
    "limit_contacts": ("stretch limit respecting the contacts", dict(stretch_limit_contacts=True), {}),
    "refine2": (
        "stretched frames run again, up to twice (stretch_refinements=2)",
        {},
        dict(stretch_refinements=2),
    ),
}
VARIANTS["substeps40"] = ("40 substeps", {}, dict(substeps=40))
VARIANTS["aggregates"] = (
    "coarse links halfway to their aggregates' centres",
    dict(coarse_links_between_aggregates=True),
    {},
)
VARIANTS["members"] = (
    "coarse links at their members (Settle at Rest Off)",
    dict(coarse_links_between_aggregates=False),
    {},
)
#: the fine level's fast projection (ClothOptions.fine_projection; docs/design/stiff_fabric.md)
for _n in (1, 2, 3):
    VARIANTS[f"fine_projection{_n}"] = (f"fine projection, {_n} Newton steps x 5 CG", dict(fine_projection=_n), {})
#: fewer CG iterations a Newton step (``fine_projection_cg_iterations``): more steps for the same time
for _n, _cg in ((1, 1), (1, 2), (2, 1), (2, 2), (3, 1)):
    VARIANTS[f"fine_projection{_n}_cg{_cg}"] = (
        f"fine projection, {_n} Newton steps x {_cg} CG",
        dict(fine_projection=_n, fine_projection_cg_iterations=_cg),
        {},
    )
VARIANTS["fine_projection2_compression"] = (
    "fine projection, 2 x 5, stretch and compression",
    dict(fine_projection=2, fine_projection_compression=True),
    {},
)


def body_mesh(segments: int = 32):
    """(vertices, triangles) of the capped cylinder torso and the UV-sphere head (one closed mesh each)."""
    a = np.linspace(0.0, 2.0 * np.pi, segments, endpoint=False)
    ring = np.stack([TORSO_RADIUS * np.cos(a), TORSO_RADIUS * np.sin(a)], axis=1)
    low = np.column_stack([ring, np.full(segments, TORSO_Z0)])
    high = np.column_stack([ring, np.full(segments, TORSO_Z1)])
    v = np.concatenate([low, high, [[0.0, 0.0, TORSO_Z0], [0.0, 0.0, TORSO_Z1]]])
    k = np.arange(segments)
    k1 = (k + 1) % segments
    c0, c1 = 2 * segments, 2 * segments + 1
    tris = np.concatenate(
        [
            np.stack([k, k1, segments + k1], 1),
            np.stack([k, segments + k1, segments + k], 1),
            np.stack([np.full(segments, c0), k1, k], 1),
            np.stack([np.full(segments, c1), segments + k, segments + k1], 1),
        ]
    )
    hv, ht = uv_ellipsoid_mesh(np.full(3, HEAD_RADIUS), segments, 16, (0.0, 0.0, HEAD_Z))
    return np.concatenate([v, hv]), np.concatenate([tris, ht + v.shape[0]]).astype(np.int64)


def inside_body(x: np.ndarray) -> int:
    head = np.linalg.norm(x - [0.0, 0.0, HEAD_Z], axis=1) < HEAD_RADIUS
    torso = (np.hypot(x[:, 0], x[:, 1]) < TORSO_RADIUS) & (x[:, 2] > TORSO_Z0) & (x[:, 2] < TORSO_Z1)
    return int((head | torso).sum())


def run(grid: int, frames: int, variant: str) -> dict:
    _, options, settings = VARIANTS[variant]
    size = 1.0
    z = HEAD_Z + HEAD_RADIUS + GARMENT_GAP
    pos, faces, uv = solver.grid_mesh(grid, grid, size, size, origin=(-size / 2, -size / 2, z), quads=True)
    material = solver.preset("cotton")
    mu_s, mu_k = combined_friction(0.5, material.friction_static, material.friction_kinetic)
    bv, bt = body_mesh()
    body = TriangleMesh(bv, bt, name="body", thickness=0.005, friction_static=mu_s, friction_kinetic=mu_k)
    cloth = solver.Cloth(
        pos,
        faces,
        uvs=uv,
        material=material,
        options=solver.ClothOptions(**options),
        settings=solver.SolverSettings(**settings),
        contact_handler=Colliders([body], cloth_thickness=material.thickness_m),
    )
    e = cloth.topology.edges
    quad = np.isclose(uv[e[:, 0], 0], uv[e[:, 1], 0]) | np.isclose(uv[e[:, 0], 1], uv[e[:, 1], 1])
    cpu, worst, comp, inside, substeps = [], 0.0, 0.0, 0, []
    worst_frame = 0
    for frame in range(frames):
        t0 = time.thread_time()
        diag = cloth.step()
        cpu.append(time.thread_time() - t0)
        substeps.append(diag.substeps)
        s = cloth.edge_strain()[quad]
        p95 = float(np.percentile(s, 95))
        if p95 > worst:
            worst, worst_frame = p95, frame + 1
        comp = max(comp, float(np.percentile(-s, 95)))
        inside = max(inside, inside_body(cloth.positions))
    return {
        "case": "garment",
        "variant": variant,
        "what": VARIANTS[variant][0],
        "vertices": len(pos),
        "substeps": cloth.settings.substeps,
        "cpu_ms_per_frame": 1e3 * statistics.median(cpu),
        "cpu_ms_per_frame_mean": 1e3 * statistics.fmean(cpu),  # refined frames (more substeps) count here
        "substeps_mean": statistics.fmean(substeps),
        "frames_refined": sum(n > cloth.settings.substeps for n in substeps),
        "strain_p95_worst": worst,
        "worst_frame": worst_frame,
        "strain_p95_last": p95,
        "compression_p95_worst": comp,
        "inside_body_max": inside,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=int, default=48)
    parser.add_argument("--frames", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=1, help="interleaved runs of every variant (median CPU time)")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--write-docs", action="store_true", help="write the table into docs/benchmarks.md")
    args = parser.parse_args(argv)
    for name in args.variants:  # compile / load the kernels (landing included) outside the timings
        run(args.grid, 14, name)  # at the timed size: some kernels compile again for it (a mean caught one)
    results: dict[str, list[dict]] = {}
    for _ in range(args.repeat):
        for name in args.variants:
            results.setdefault(name, []).append(run(args.grid, args.frames, name))
    first = None
    table = []
    for name in args.variants:
        rows = results[name]
        line = dict(
            rows[-1],
            cpu_ms_per_frame=statistics.median(r["cpu_ms_per_frame"] for r in rows),
            cpu_ms_per_frame_mean=statistics.median(r["cpu_ms_per_frame_mean"] for r in rows),
        )
        # the mean frame: a frame run again with more substeps costs what it costs
        first = first or line["cpu_ms_per_frame_mean"]
        line["cost_vs_first"] = line["cpu_ms_per_frame_mean"] / first
        print(json.dumps({k: round(v, 5) if isinstance(v, float) else v for k, v in line.items()}), flush=True)
        table.append(
            [
                line["what"],
                f"{line['cost_vs_first']:.2f}",
                f"{100 * line['strain_p95_worst']:.2f} % (frame {line['worst_frame']})",
                f"{100 * line['strain_p95_last']:.2f} %",
                f"{100 * line['compression_p95_worst']:.1f} %",
                line["inside_body_max"],
            ]
        )
    if args.write_docs:
        from _docs_table import markdown_table, write_section

        header = ["variant", f"CPU time vs {args.variants[0]}", "P95 (worst frame)", "P95 (last frame)"]
        header += ["compression P95 (worst)", "vertices inside the body (most)"]
        command = "bench/bench_stiff_garment.py " + " ".join(argv if argv is not None else sys.argv[1:])
        write_section(
            "bench_stiff_garment",
            command.strip(),
            f"{args.grid} x {args.grid} quad sheet on the body, {args.frames} frames, median of {args.repeat} "
            "interleaved run(s).\n\n" + markdown_table(header, table),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
