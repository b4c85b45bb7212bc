"""Checks on cloth played back in Blender (bpy and mathutils, no Selvedge code): the evaluated
world positions, the crossing triangle pairs by Blender's own ``BVHTree.overlap``, and the
distance to a body made of capsules and spheres. Used by scripts/demo_blender.py to measure its
bake independently of the solver's own diagnostics.
"""

import numpy as np


def distance_to_body(points, shapes):
    """Smallest distance from each point to the surface of the capsules/sphere (negative: inside)."""
    best = np.full(points.shape[0], np.inf)
    for a, b, radius in shapes:
        ab = b - a
        t = np.clip(np.einsum("ij,j->i", points - a, ab) / max(float(ab @ ab), 1e-300), 0.0, 1.0)
        best = np.minimum(best, np.linalg.norm(points - (a + t[:, None] * ab), axis=1) - radius)
    return best


def crossing_pairs(cloths, depsgraph) -> int:
    """Triangle pairs of the played-back cloths that cross (Blender's ``BVHTree.overlap`` on the loop
    triangles): between two layers, and within a layer for triangles sharing no vertex."""
    from mathutils.bvhtree import BVHTree

    trees, tris = [], []
    for obj in cloths:
        obj.data.calc_loop_triangles()
        t = [tuple(lt.vertices) for lt in obj.data.loop_triangles]
        trees.append(BVHTree.FromPolygons([tuple(p) for p in cloth_world(obj, depsgraph)], t, all_triangles=True))
        tris.append(t)
    count = 0
    for i, (tree, t) in enumerate(zip(trees, tris)):
        count += sum(1 for a, b in tree.overlap(tree) if a < b and not set(t[a]) & set(t[b]))
        count += sum(len(tree.overlap(other)) for other in trees[i + 1 :])
    return count


def cloth_world(obj, depsgraph):
    """(n, 3) world positions of ``obj``'s evaluated mesh (modifiers applied: a Mesh Cache plays the bake)."""
    obj_eval = obj.evaluated_get(depsgraph)
    mesh = obj_eval.to_mesh()
    try:
        co = np.empty(3 * len(mesh.vertices), dtype=np.float32)
        mesh.vertices.foreach_get("co", co)
    finally:
        obj_eval.to_mesh_clear()
    m = np.array(obj_eval.matrix_world)
    return co.reshape(-1, 3).astype(np.float64) @ m[:3, :3].T + m[:3, 3]
