"""A change proposed after the frame, applied to the free vertices and projected (001 sec. 9.4).

Used by the learned network's residual mode: the solver runs its own budget, a caller proposes
position and velocity changes ``dx``, ``dv`` for the frame-end state, and the cheap projection
below puts the proposal back onto the constraints:

    x_p = x + dx                             (free vertices; kinematic ones stay)
    x   = project(x_p)                       ``iterations`` x (Jacobi stretch, then contacts)
    v   = v + dv + (x - x_p) / frame_dt      what the projection moved counts as velocity

The stretch pass is ``kernels.solve_distance_jacobi`` + ``kernels.apply_jacobi`` with accumulated
multipliers from 0 and no damping, at the substep length h = frame_dt / substeps; the training code
(models/training/projection.py) reproduces exactly this projection.
"""

from __future__ import annotations

import numpy as np

from . import kernels as kn
from .constraints import ConstraintSet, step_coefficients
from .hooks import ContactHandler


def project_stretch_and_contacts(
    x: np.ndarray,
    inv_mass: np.ndarray,
    stretch: ConstraintSet,
    contact_handler: ContactHandler | None,
    h: float,
    iterations: int,
    omega: float,
) -> None:
    """Project ``x`` (N,3, in place) ``iterations`` times onto the stretch constraints (Jacobi,
    over-relaxation ``omega``) and the contact handler's current contacts; ``x``'s value on entry is
    the reference the contacts measure travel from."""
    x0 = x.copy()
    dx, hits = np.zeros_like(x), np.zeros(x.shape[0])
    k = step_coefficients(stretch, inv_mass, h, damping=False)
    for iteration in range(int(iterations)):
        kn.solve_distance_jacobi(
            x,
            x0,
            inv_mass,
            stretch.vertices,
            k.distance_rows,
            stretch.unilateral,
            iteration == 0,
            True,
            stretch.lam,
            dx,
            hits,
        )
        kn.apply_jacobi(x, dx, hits, float(omega))
        if contact_handler is not None:
            contact_handler.project(x, x0, inv_mass, h)


def corrected_state(
    x: np.ndarray, v: np.ndarray, inv_mass: np.ndarray, dx: np.ndarray, dv: np.ndarray, frame_dt: float, project
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(proposal, x_new, v_new) of the formulas above; ``project(x)`` projects in place. Nothing is
    written to ``x`` or ``v``."""
    kinematic = ~(inv_mass > 0)
    proposal = x + dx
    proposal[kinematic] = x[kinematic]
    x_new = np.ascontiguousarray(proposal).copy()
    project(x_new)
    x_new[kinematic] = x[kinematic]
    v_new = v + dv + (x_new - proposal) / frame_dt
    v_new[kinematic] = v[kinematic]
    return proposal, x_new, v_new
