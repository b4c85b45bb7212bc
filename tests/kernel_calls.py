"""The solver kernels called with physical inputs (compliance in its units, damping in s, h in s).

The kernels take per-substep factors (alpha~, gamma, 1/denominator); these wrappers form them
with the solver's own :func:`selvedge.solver.constraints.step_coefficients`, so every kernel test
checks that step too. The multipliers are the caller's to reset (``reset_lambda=False``), so a
test can write out any multiplier lifecycle.
"""

import numpy as np

from selvedge.solver import kernels as kn
from selvedge.solver.collisions import cloth_contacts as cc
from selvedge.solver.constraints import ConstraintSet, step_coefficients


def _coefficients(kind, vertices, inv_mass, h, **params):
    return step_coefficients(ConstraintSet("test", kind, vertices, params), np.asarray(inv_mass, float), h)


def distance_serial(x, x0, inv_mass, vertices, rest_length, compliance, damping_s, unilateral, h, lam):
    k = _coefficients(
        "distance", vertices, inv_mass, h, rest_length=rest_length, compliance=compliance, damping_s=damping_s
    )
    kn.solve_distance_serial(x, x0, inv_mass, vertices, k.distance_rows, unilateral, False, True, lam)


def distance_jacobi(x, x0, inv_mass, vertices, rest_length, compliance, damping_s, unilateral, h, lam, dx, hits):
    k = _coefficients(
        "distance", vertices, inv_mass, h, rest_length=rest_length, compliance=compliance, damping_s=damping_s
    )
    kn.solve_distance_jacobi(x, x0, inv_mass, vertices, k.distance_rows, unilateral, False, True, lam, dx, hits)


def dihedral_serial(x, x0, inv_mass, vertices, rest_cos, rest_sin, compliance, damping_s, h, lam):
    k = _coefficients("dihedral", vertices, inv_mass, h, compliance=compliance, damping_s=damping_s)
    kn.solve_bend_dihedral_serial(
        x, x0, inv_mass, vertices, rest_cos, rest_sin, k.alpha_tilde, k.gamma, False, True, lam
    )


def isometric_serial(x, x0, inv_mass, vertices, stencil, compliance, damping_s, h, lam):
    k = _coefficients("isometric", vertices, inv_mass, h, stencil=stencil, compliance=compliance, damping_s=damping_s)
    kn.solve_bend_isometric_serial(
        x, x0, inv_mass, vertices, stencil, k.alpha_tilde, k.gamma, k.inv_denominator, False, True, lam
    )


def soft_pin_serial(x, inv_mass, vertex, target, compliance, h, lam):
    k = _coefficients("soft_pin", vertex, inv_mass, h, compliance=compliance)
    kn.solve_soft_pin_serial(x, inv_mass, vertex, target, k.alpha_tilde, k.inv_denominator, False, True, lam)


def dihedral(points):
    """Kernel dihedral angle of (wing 1, wing 2, hinge a, hinge b), ok flag and its (4,3) gradient."""
    theta, ok, *grad = kn.dihedral_angle_and_gradient(np.ascontiguousarray(points, dtype=np.float64), 0, 1, 2, 3)
    return theta, ok, np.array(grad, dtype=np.float64)


def _one_pair(first, second, side, held, start, body_normal):
    """The pair's own arguments: its two primitives' numbers, its narrow-phase state, its row
    (the only one) and multiplier, and the body normals (zeros when None)."""
    return (
        np.array([first], dtype=np.int64),
        np.array([second], dtype=np.int64),
        side,
        held,
        start,
        np.array([0], dtype=np.int64),
        np.zeros(1),
        np.zeros((4, 3)) if body_normal is None else body_normal,
        np.full(1, -1.0),  # no clearance: the pair is always read
        np.zeros(4),
        np.zeros(3),
        np.zeros(4, dtype=np.int64),  # moved stamps, and pass 0: nothing is skipped as unmoved
        0,
    )


def _one_layer(contact_distance, depenetration):
    """Four vertices of one layer, each ``contact_distance`` thick (so the pair keeps that
    distance), no friction, no layer scaling."""
    return (np.full(4, contact_distance), np.zeros(4, dtype=np.int64), np.zeros(4), 1.0, depenetration)


def vertex_triangle_pair(
    x, x_start, inv_mass, side, held, start, contact_distance, depenetration=0.0, body_normal=None
):
    """One pass of :func:`cloth_contacts.solve_vertex_triangle` over one pair, vertex 3 against the
    triangle (0, 1, 2); ``side`` (1,), ``held`` and ``start`` as the narrow phase leaves them;
    ``body_normal`` (4, 3) or None (no vertex on a body). Returns the number of pairs that pushed."""
    tris = np.array([[0, 1, 2]], dtype=np.int64)
    w = np.asarray(inv_mass, dtype=np.float64)
    layer = _one_layer(contact_distance, depenetration)
    return cc.solve_vertex_triangle(x, x_start, w, tris, *layer, *_one_pair(3, 0, side, held, start, body_normal))


def edge_edge_pair(x, x_start, inv_mass, side, held, start, contact_distance, depenetration=0.0, body_normal=None):
    """One pass of :func:`cloth_contacts.solve_edge_edge` over one pair, edge 0-1 against edge 2-3;
    ``side`` (1, 3), as for :func:`vertex_triangle_pair` otherwise."""
    edges = np.array([[0, 1], [2, 3]], dtype=np.int64)
    w = np.asarray(inv_mass, dtype=np.float64)
    layer = _one_layer(contact_distance, depenetration)
    return cc.solve_edge_edge(x, x_start, w, edges, *layer, *_one_pair(0, 1, side, held, start, body_normal))
