"""The cloth contacts' solve skips the pairs it can prove still apart, and the proof holds.

Two layered tubes hang around a body swaying from side to side, as a shirt under a jacket, 6 mm
apart (4 mm thick: 2 mm beyond their contact distance; they never touch) or 4.5 mm (the body
presses them together here and there): with the narrow phase's reach slack fixed at the margin
(``adaptive_slack=False``), every pair of the two layers is within reach at every substep. The solve skips a pair that started its substep clear by more than its
vertices have moved since (:func:`selvedge.solver.collisions.cloth_contacts._still_apart`); at
every pass, every pair it skips has its constraint computed here in NumPy from the positions of
that moment, and it must hold (C > 0: the solve would have read the pair and done nothing).
"""

import numpy as np
import pytest
from garment_scene import tube_mesh
from intersection_reference import crossing_count

from selvedge.solver import Cloth, SolverSettings
from selvedge.solver.collisions import Colliders, TriangleMesh
from selvedge.solver.collisions import cloth_contacts as cc
from selvedge.solver.collisions.world import ClothCollision, CollisionWorld
from selvedge.solver.mesh import uv_ellipsoid_mesh


def _skipped(rows, clearance, first_moved, second_moved):
    """The rows the solve's rule skips (written out here in NumPy)."""
    return clearance[rows] > first_moved + second_moved


def _unit(v):
    return v / np.linalg.norm(v, axis=1)[:, None]


def _vt_constraints(x, i, t, side, contact):
    """C = side n . (p - a) - d of vertex-triangle pairs: the height over the face's plane."""
    n = _unit(np.cross(x[t[:, 1]] - x[t[:, 0]], x[t[:, 2]] - x[t[:, 0]]))
    return side * np.einsum("ij,ij->i", n, x[i] - x[t[:, 0]]) - contact


def _ee_constraints(x, a, b, side, contact):
    """C = n . (a0 - b0) - d of edge-edge pairs, n the unit common normal turned along the pair's
    remembered side: the distance between the edges' lines."""
    n = _unit(np.cross(x[a[:, 1]] - x[a[:, 0]], x[b[:, 1]] - x[b[:, 0]]))
    n *= np.where(np.einsum("ij,ij->i", n, side) >= 0.0, 1.0, -1.0)[:, None]
    return np.einsum("ij,ij->i", n, x[a[:, 0]] - x[b[:, 0]]) - contact


def _layered_tubes(gap_m, sway_m):
    body_v, body_t = uv_ellipsoid_mesh(np.array([0.18, 0.12, 0.35]), 30, 31, np.array([0.0, 0.0, 1.0]))
    cloths, handlers = [], []
    for k in range(2):
        pos, faces = tube_mesh(48, 30, 0.192 + gap_m * k, 0.132 + gap_m * k, 0.85, 1.25)
        pins = (pos[:, 2] > 1.25 - 1e-9).astype(float)
        handler = Colliders([TriangleMesh(body_v, body_t, name="body")], cloth_thickness=0.004)
        cloths.append(
            Cloth(pos, faces, settings=SolverSettings(substeps=20), pin_weights=pins, contact_handler=handler)
        )
        handlers.append(handler)
    # the fixed reach slack (the margin): every pair of the two layers stays within reach
    world = CollisionWorld(cloths, [ClothCollision(layer=k) for k in range(2)], adaptive_slack=False)
    pinned = [c.rest_positions[c.pinned_vertices] for c in cloths]

    def step(f):
        shift = np.array([sway_m * np.sin(2.0 * np.pi * (f + 1) / 12.0), 0.0, 0.0])
        for h in handlers:
            h.set_mesh_positions("body", body_v + shift)
        world.step([p + shift for p in pinned])

    return world, step


@pytest.mark.parametrize("gap_m, sway_m", [(0.006, 0.02), (0.0045, 0.03)])
def test_every_pair_the_solve_skips_holds_its_constraint(monkeypatch, gap_m, sway_m):
    world, step = _layered_tubes(gap_m, sway_m)
    world.skip_unmoved = False  # the clearance rule alone (the skips of what did not move: below)
    counts = {"vt_rows": 0, "vt_skipped": 0, "ee_rows": 0, "ee_skipped": 0, "vt_pushed": 0}
    least = []  # per pass, the smallest constraint of a skipped pair (m)
    solve_vt, solve_ee = cc.solve_vertex_triangle, cc.solve_edge_edge

    def checked_vt(x, x_start, inv_mass, tris, thickness, *rest):
        cv, ct, side, rows = rest[4], rest[5], rest[6], rest[9]
        clearance, moved = rest[-5:-3]
        i, t = cv[rows], tris[ct[rows]]
        skip = _skipped(rows, clearance, moved[i], moved[t].max(axis=1))
        C = _vt_constraints(x, i[skip], t[skip], side[rows][skip], 0.5 * (thickness[i] + thickness[t[:, 0]])[skip])
        least.append(C.min(initial=np.inf))
        counts["vt_rows"] += rows.shape[0]
        counts["vt_skipped"] += int(skip.sum())
        pushed = solve_vt(x, x_start, inv_mass, tris, thickness, *rest)
        counts["vt_pushed"] += pushed
        return pushed

    def checked_ee(x, x_start, inv_mass, edges, thickness, *rest):
        ea, eb, side, rows = rest[4], rest[5], rest[6], rest[9]
        clearance, moved = rest[-5:-3]
        a, b = edges[ea[rows]], edges[eb[rows]]
        skip = _skipped(rows, clearance, moved[a].max(axis=1), moved[b].max(axis=1))
        C = _ee_constraints(
            x, a[skip], b[skip], side[rows][skip], 0.5 * (thickness[a[:, 0]] + thickness[b[:, 0]])[skip]
        )
        least.append(C.min(initial=np.inf))
        counts["ee_rows"] += rows.shape[0]
        counts["ee_skipped"] += int(skip.sum())
        return solve_ee(x, x_start, inv_mass, edges, thickness, *rest)

    monkeypatch.setattr(cc, "solve_vertex_triangle", checked_vt)
    monkeypatch.setattr(cc, "solve_edge_edge", checked_ee)
    tris = np.concatenate([c.topology.triangles + world.offsets[k] for k, c in enumerate(world.cloths)])
    for f in range(3):
        step(f)
        assert crossing_count(world.x, tris) == 0
    assert min(least) > 0.0, f"a skipped pair's constraint was {min(least):.2e} m"
    assert counts["vt_rows"] > 1e6 and counts["ee_rows"] > 1e6, counts  # the layers lie within reach
    if gap_m == 0.006:
        # none touch: most pairs are skipped (measured: 65 % vertex-triangle, 63 % edge-edge)
        assert counts["vt_pushed"] == 0, counts
        assert counts["vt_skipped"] > 0.5 * counts["vt_rows"] and counts["ee_skipped"] > 0.5 * counts["ee_rows"], counts
    else:
        # pressed together: pairs push, and pairs close to pushing were skipped (the smallest
        # constraint of a skipped pair, measured: 0.3 mm; 9 % and 7.5 % of the pairs skipped)
        assert counts["vt_pushed"] > 1000 and min(least) < 0.5e-3, (counts, min(least))
        assert counts["vt_skipped"] > 0.03 * counts["vt_rows"] and counts["ee_skipped"] > 0.03 * counts["ee_rows"], (
            counts
        )


def test_pairs_and_passes_with_nothing_moved_are_skipped_exactly(monkeypatch):
    """A pass skips the pairs none of whose vertices moved since the pass before it began, and a
    whole pass when the one before pushed nothing and nothing moved since (the rounds after a
    substep's first). Exact: the layers pressed together (pairs push) end every frame at the same
    positions, bit for bit, as with the skips off; the skipped pairs, found here from the stamps,
    are most of the later rounds' reads."""
    runs = {}
    for skip in (False, True):
        world, step = _layered_tubes(0.0045, 0.03)
        world.skip_unmoved = skip
        reads = {"rows": 0, "unmoved": 0}
        solve_vt = cc.solve_vertex_triangle

        def counted_vt(x, x_start, inv_mass, tris, thickness, *rest, reads=reads, solve_vt=solve_vt):
            cv, ct, rows = rest[4], rest[5], rest[9]
            stamp, this_pass = rest[-2], rest[-1]
            verts = np.column_stack([cv[rows], tris[ct[rows]]])
            reads["rows"] += rows.shape[0]
            reads["unmoved"] += int((stamp[verts].max(axis=1) < this_pass - 1).sum())
            return solve_vt(x, x_start, inv_mass, tris, thickness, *rest)

        monkeypatch.setattr(cc, "solve_vertex_triangle", counted_vt)
        frames, stats = [], []
        for f in range(3):
            step(f)
            frames.append(world.x.copy())
            stats.append(dict(world.last_stats))
        monkeypatch.undo()
        runs[skip] = frames, stats, reads
    (off, off_stats, off_reads), (on, on_stats, on_reads) = runs[False], runs[True]
    for f, (a, b) in enumerate(zip(off, on)):
        assert np.array_equal(a, b), (f, np.abs(a - b).max())
    assert [s["pushes"] for s in on_stats] == [s["pushes"] for s in off_stats]
    assert all(s["pushes"] > 100 for s in on_stats), on_stats  # pressed: pairs push in every frame
    assert off_reads["unmoved"] == 0 and all(s["passes_skipped"] == 0 for s in off_stats)
    # 4 rounds x 20 substeps x 3 frames = 240 passes; measured: 52 skipped whole, and 64 % of the
    # vertex-triangle pairs read in the others skipped as unmoved
    assert sum(s["passes_skipped"] for s in on_stats) > 30, on_stats
    assert on_reads["unmoved"] > 0.4 * on_reads["rows"], on_reads
