"""Each body's collider data is built once for every cloth over it (issue 21).

Three cloths over one mesh body share its data (``TriangleMesh.body``: the triangles' spheres and
hash grids, a standing body's certificates, distance bounds and cell lists), and each moves exactly
as it does over a body built for it alone: the reference is three separate runs, each with its
own proxy and so its own build.
"""

import numpy as np

from selvedge.solver import Cloth, SolverSettings, grid_mesh
from selvedge.solver.collisions import Colliders, SDFGrid, TriangleMesh
from selvedge.solver.mesh import uv_ellipsoid_mesh

# (origin, friction static, kinetic): three sheets landing on different parts of the ball
SHEETS = (((-0.15, -0.15, 0.27), 0.6, 0.4), ((-0.3, -0.05, 0.24), 0.2, 0.1), ((0.0, -0.2, 0.3), 0.9, 0.7))


def body_shift(frame):
    """Stands for 10 frames, slides 1 cm a frame for 6, stands again."""
    return np.array([0.01 * min(max(frame - 9, 0), 6), 0.0, 0.0])


def run(proxies, body_v, frames=26):
    """The three sheets stepped in turn, frame by frame (as a bake does), each over its own proxy."""
    cloths, handlers = [], []
    for (origin, _, _), proxy in zip(SHEETS, proxies):
        pos, faces, _ = grid_mesh(10, 10, 0.3, 0.3, origin=origin)
        handlers.append(Colliders([proxy], cloth_thickness=0.004))
        cloths.append(Cloth(pos, faces, settings=SolverSettings(substeps=8), contact_handler=handlers[-1]))
    paths = [[] for _ in cloths]
    for f in range(frames):
        for cloth, handler, path in zip(cloths, handlers, paths):
            handler.set_mesh_positions("ball", body_v + body_shift(f))
            cloth.step()
            path.append(cloth.positions.copy())
    return [np.array(p) for p in paths], handlers


def test_three_cloths_over_one_body_build_its_data_once_and_move_as_if_each_were_alone():
    body_v, body_t = uv_ellipsoid_mesh(0.25, 24, 12, np.array([0.0, 0.0, 0.0]))
    alone = [TriangleMesh(body_v, body_t, name="ball", friction_static=s, friction_kinetic=k) for _, s, k in SHEETS]
    base = TriangleMesh(body_v, body_t, name="ball")
    shared = [base.with_friction(s, k) for _, s, k in SHEETS]
    ref, _ = run(alone, body_v)
    got, handlers = run(shared, body_v)

    one = alone[0].body.builds
    print(f"\n[shared body] builds {base.body.builds}; each separate body {one}")
    assert all(p.body is base.body for p in shared)
    # one build for the three cloths: what one separate body built, once (two standing poses, a
    # pose a frame while it slides); hash grids once per cell size some cloth asked for
    for kind in ("standing_data", "triangle_spheres"):
        assert base.body.builds[kind] == one[kind] and all(p.body.builds[kind] == one[kind] for p in alone)
    assert one["standing_data"] == 2 and one["triangle_spheres"] == 7  # the start and the six slid positions
    assert base.body.builds["triangle_grids"] <= sum(p.body.builds["triangle_grids"] for p in alone)
    # the standing data are the same arrays in every cloth's handler
    assert handlers[0].meshes[0].standing_data is handlers[2].meshes[0].standing_data
    for r, g in zip(ref, got):
        assert np.array_equal(r, g)
        assert np.abs(g[-1] - g[0]).max() > 0.02  # it fell and slid
    # each keeps its own friction
    assert [h.meshes[0].mesh.friction_static for h in handlers] == [s for _, s, _ in SHEETS]


def test_a_signed_distance_grid_made_for_another_cloth_shares_its_distances():
    body_v, body_t = uv_ellipsoid_mesh(0.25, 24, 12, np.array([0.0, 0.0, 0.0]))
    grid = SDFGrid(body_v, body_t, 0.02, name="ball", friction_static=0.5, friction_kinetic=0.3)
    other = grid.with_friction(0.1, 0.05)
    assert other.phi is grid.phi and other.origin is grid.origin
    assert (other.friction_static, other.friction_kinetic) == (0.1, 0.05)
    assert (grid.friction_static, grid.friction_kinetic) == (0.5, 0.3)
