"""Self-collision (001 sec. 6.4, M8): a strip folded onto itself on the ground.

A 1 m x 0.2 m strip lies on the ground with its last 0.4 m standing up (an L); the standing
flap is flung over onto the flat part. Measured: for every flap vertex above the flat part,
its height minus the height of the flat layer under it (barycentric interpolation of the
flat layer's triangles, away from the crease). Passing through the other layer makes this
negative; without self-collision the flap lands inside the flat layer (gap 0).
"""

import numpy as np

from selvedge.solver import Cloth, SolverSettings, grid_mesh
from selvedge.solver.collisions import Colliders, Plane, SelfCollision

GROUND = 0.004
SELF = 0.005


def layer_gap(p, upper, lower_tris):
    """z of each ``upper`` vertex minus z of the lower layer's triangles under it (nan where none)."""
    a, b, c = p[lower_tris[:, 0]], p[lower_tris[:, 1]], p[lower_tris[:, 2]]
    q = p[upper][:, None, :2]
    v0, v1, v2 = (b - a)[None, :, :2], (c - a)[None, :, :2], q - a[None, :, :2]
    d00, d01, d11 = (v0 * v0).sum(-1), (v0 * v1).sum(-1), (v1 * v1).sum(-1)
    d20, d21 = (v2 * v0).sum(-1), (v2 * v1).sum(-1)
    den = d00 * d11 - d01 * d01
    bv = (d11 * d20 - d01 * d21) / den
    bw = (d00 * d21 - d01 * d20) / den
    bu = 1.0 - bv - bw
    inside = (bu >= 0) & (bv >= 0) & (bw >= 0)
    zb = np.where(inside, bu * a[None, :, 2] + bv * b[None, :, 2] + bw * c[None, :, 2], -np.inf)
    under = zb.max(axis=1)
    return np.where(np.isfinite(under), p[upper, 2] - under, np.nan)


def fold(self_collision, frames=48, substeps=20):
    crease = 0.6
    pos, faces, _ = grid_mesh(41, 9, 1.0, 0.2)
    u = pos[:, 0].copy()
    flap = u > crease + 1e-9
    x = pos.copy()
    x[:, 2] = GROUND
    x[flap, 0] = crease
    x[flap, 2] = GROUND + (u[flap] - crease)
    v = np.zeros_like(x)
    v[flap, 0] = -4.0 * (u[flap] - crease)  # flung over about the crease
    contacts = Colliders(
        [Plane(friction_static=0.5, friction_kinetic=0.4)],
        cloth_thickness=GROUND,
        self_collision=SelfCollision(thickness=SELF) if self_collision else None,
        cloth_triangles=faces,
    )
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=substeps), contact_handler=contacts)
    cloth.set_positions(x, v)
    lower_tris = faces[(u[faces] < crease - 0.1).all(axis=1)]  # the flat part, away from the crease loop
    upper = u > crease + 0.1
    worst, covered = np.inf, 0
    for _ in range(frames):
        cloth.step()
        gap = layer_gap(cloth.positions, upper, lower_tris)
        over = np.isfinite(gap)
        covered = max(covered, int(over.sum()))
        if over.any():
            worst = min(worst, float(np.nanmin(gap)))
    return worst, covered, cloth


def test_fold_no_vertex_passes_through_the_other_layer():
    worst, covered, cloth = fold(True)
    assert covered >= 60, "most of the flap must land over the flat part"
    # measured ~0.0047 m: the flap stays above the flat layer by about the self thickness
    assert worst > 0.5 * SELF, f"a flap vertex came to {worst:.4f} m of the layer under it (passing through < 0)"
    assert cloth.last_diagnostics.contacts["self_triangle_pairs_max"] > 0


def test_fold_without_self_collision_lands_inside_the_other_layer():
    """The control: the same fold with self-collision off puts the flap in the flat layer (gap ~ 0)."""
    worst, covered, _ = fold(False, frames=24)
    assert covered >= 60
    assert worst < 1e-4


def test_self_collision_is_off_by_default():
    contacts = Colliders([Plane()])
    assert contacts.self_collision is None


def test_two_hop_exclusion_lists_match_the_squared_adjacency_matrix():
    """The vertices excluded from self-collision with vertex i are exactly those reachable in one
    or two mesh hops: the nonzeros of row i of A + A^2 (scipy sparse), i itself left out."""
    from scipy.sparse import coo_matrix

    from selvedge.solver.collisions.self_contact import two_hop_lists

    rng = np.random.default_rng(3)
    pos, faces, _ = grid_mesh(9, 7, 1.0, 1.0)
    faces = np.asarray(faces)
    faces = faces[rng.permutation(len(faces))[: len(faces) - 5]]  # holes and boundary vertices
    n = len(pos)
    e = np.unique(np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1), axis=0)
    adjacency = coo_matrix(
        (np.ones(2 * len(e)), (np.r_[e[:, 0], e[:, 1]], np.r_[e[:, 1], e[:, 0]])), shape=(n, n)
    ).tocsr()
    reach = (adjacency + adjacency @ adjacency).tolil()
    offsets, flat = two_hop_lists(n, np.ascontiguousarray(e))
    for i in range(n):
        expected = sorted(set(reach.rows[i]) - {i})
        assert list(flat[offsets[i] : offsets[i + 1]]) == expected


def test_vertex_triangle_pairs_do_not_depend_on_the_chunks():
    """The vertex-triangle pair search runs in parallel chunks of vertices, each into its own
    buffers, concatenated in vertex order. On the folded strip (flap over the flat part, pairs
    across the two layers) 1, 2 and 3 chunks must give the same pairs in the same order, and
    each pair must pass the serial rule: the vertex is not part of the triangle nor within two
    hops of its corners."""
    from selvedge.solver.collisions import self_contact

    _, _, cloth = fold(True, frames=12)
    contacts = cloth.contact_handler
    x = cloth.positions.copy()
    x_pred = x + 0.002 * np.random.default_rng(3).normal(size=x.shape)
    args = (
        x,
        x_pred,
        cloth.inv_mass,
        contacts._self_tris,
        SELF,
        contacts._self_cell,
        contacts._self_table,
        contacts._excl_offsets,
        contacts._excl,
    )
    runs = [self_contact.self_triangle_contacts(*args, chunks) for chunks in (1, 2, 3)]
    cv, ct, _ = runs[0]
    assert len(cv) > 20  # the layers are in contact
    assert np.all(np.diff(cv) >= 0)
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert np.array_equal(a, b)
    tris = contacts._self_tris
    for i, t in zip(cv, ct):
        ring = set(contacts._excl[contacts._excl_offsets[i] : contacts._excl_offsets[i + 1]].tolist()) | {int(i)}
        assert not ring & set(tris[t].tolist())


def test_particle_pairs_match_brute_force_for_any_chunk_count():
    """Particle-particle pairs from the spatial hash, in 1, 2 or 3 parallel chunks, against every
    pair (i < j) checked directly: closer than 2 r + both substep travels, not within two mesh
    hops, not both pinned; each listed once, in the same order whatever the chunks."""
    from selvedge.solver.collisions import self_contact

    _, _, cloth = fold(True, frames=12)
    contacts = cloth.contact_handler
    x = cloth.positions.copy()
    x_pred = x + 0.002 * np.random.default_rng(5).normal(size=x.shape)
    runs = [
        self_contact.self_particle_pairs(
            x, x_pred, cloth.inv_mass, SELF, contacts._excl_offsets, contacts._excl, contacts._self_table, chunks
        )
        for chunks in (1, 2, 3)
    ]
    for other in runs[1:]:
        assert all(np.array_equal(a, b) for a, b in zip(runs[0], other))
    travel = np.linalg.norm(x_pred - x, axis=1)
    dist = np.linalg.norm(x_pred[:, None] - x_pred[None], axis=2)
    reach = 2 * SELF + travel[:, None] + travel[None]
    i, j = np.nonzero(np.triu(dist <= reach, k=1))
    excluded = [
        j_ in set(contacts._excl[contacts._excl_offsets[i_] : contacts._excl_offsets[i_ + 1]].tolist())
        for i_, j_ in zip(i, j)
    ]
    both_pinned = (cloth.inv_mass[i] == 0) & (cloth.inv_mass[j] == 0)
    expected = {(a, b) for a, b, e, p in zip(i.tolist(), j.tolist(), excluded, both_pinned) if not e and not p}
    got = list(zip(runs[0][0].tolist(), runs[0][1].tolist()))
    assert len(expected) > 10  # the layers touch
    assert len(got) == len(set(got)) and set(got) == expected
