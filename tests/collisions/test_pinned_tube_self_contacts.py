"""Issue 21: a fine garment hanging from a pinned ring, with self-collision, stretches no more than
the same garment without it.

The scene is the layered-garments case of bench/bench_collisions.py, one layer: a closed tube of
84 x 60 vertices (12.6 mm around, 6.8 mm down: edges about the size of the contact distance plus
margin, so many pairs of neighbouring edges are candidates), pinned at its top ring, around a
body ellipsoid swaying 2 cm each side. There is no real self-contact to resolve. The only
difference between the two runs is the world's cloth contacts; the reference is the plain cloth's
own strain, and the crossings are counted by the independent reference
(tests/intersection_reference.py).

Before the fix the world's run stretched an edge next to the ring to 843 % by frame 13, then
stopped with a SimulationError (1397 %). An edge pair with one end pinned and its closest point
next to that end threw its free end by C / (1 - s). Nearly parallel neighbouring edges read their
side off a common normal that had swung, and pulled each other "back" through the sheet by up to
19 mm.
"""

import numpy as np
from garment_scene import tube_mesh
from intersection_reference import crossing_count

from selvedge.solver import Cloth, SolverSettings
from selvedge.solver.collisions import Colliders, TriangleMesh
from selvedge.solver.collisions.world import ClothCollision, CollisionWorld
from selvedge.solver.mesh import uv_ellipsoid_mesh

FRAMES = 16


def _hang(self_collision: bool):
    body_v, body_t = uv_ellipsoid_mesh(np.array([0.18, 0.12, 0.35]), 50, 51, np.array([0.0, 0.0, 1.0]))
    pos, faces = tube_mesh(84, 60, 0.192, 0.132, 0.85, 1.25)
    pins = (pos[:, 2] > 1.25 - 1e-9).astype(float)
    handler = Colliders([TriangleMesh(body_v, body_t, name="body")], cloth_thickness=0.004)
    cloth = Cloth(pos, faces, settings=SolverSettings(substeps=20), pin_weights=pins, contact_handler=handler)
    world = CollisionWorld([cloth], [ClothCollision()]) if self_collision else None
    pinned = cloth.rest_positions[cloth.pinned_vertices]
    edges = cloth.topology.edges
    rest = np.linalg.norm(pos[edges[:, 0]] - pos[edges[:, 1]], axis=1)
    strain, crossings = [], []
    for f in range(FRAMES):
        shift = np.array([0.02 * np.sin(2.0 * np.pi * (f + 1) / 48.0), 0.0, 0.0])
        handler.set_mesh_positions("body", body_v + shift)
        if world is None:
            cloth.step(pinned + shift)
        else:
            world.step([pinned + shift])
        x = cloth.x
        strain.append(float(np.max(np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1) / rest - 1.0)))
        crossings.append(crossing_count(x, cloth.topology.triangles))
    return strain, crossings


def test_self_contacts_next_to_a_pinned_ring_do_not_tear_a_fine_tube():
    plain, _ = _hang(self_collision=False)
    colliding, crossings = _hang(self_collision=True)
    print("max edge strain per frame, plain:", np.round(plain, 3), "self-collision:", np.round(colliding, 3))
    assert max(crossings) == 0, f"crossing triangle pairs per frame: {crossings}"
    # the plain tube's worst edge (next to the moving ring) is 1-3 % (30-40 % while the row under
    # the ring was thrown about: tests/solver/test_pinned_ring.py); a torn one was 843 %
    assert max(colliding) < 3.0 * max(plain), (max(colliding), max(plain))
    # and most frames look like the plain cloth's: no edge held stretched frame after frame
    assert np.median(colliding) < 1.5 * np.median(plain), (np.median(colliding), np.median(plain))
