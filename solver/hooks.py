"""Extension points inside the substep: contacts (collision layer) and learned predictors.

The solver calls them in the order of 002 sec. 3::

    contact_handler.begin_frame           once per frame (broad phase over the frame's travel)
    per substep:
        acceleration_hook -> a_learned    added to gravity in the prediction (architecture B)
        predict x~ = x + h v + h^2 a      kinematic vertices at their substep-end targets
        proposal_hook -> x proposal       replaces x~ of free vertices (architecture A)
        contact_handler.begin_substep     narrow phase on the broad-phase candidates
        iterations x: stretch, shear, bend, tethers, soft pins, contact_handler.project
        v = (x - x_n) / h
        contact_handler.end_substep       velocity-level work (restitution, friction)
    contact_handler.end_frame             after a successful (not rolled-back) frame
"""
from __future__ import annotations

from typing import Protocol

import numpy as np


class ContactHandler:
    """Base class of contact layers; every method is a no-op here.

    ``project`` must treat contacts as inequality constraints whose accumulated multiplier only
    pushes (002 sec. 3), write corrections into ``x`` in place and never touch vertices with
    ``inv_mass == 0``.
    """

    def begin_frame(self, x: np.ndarray, v: np.ndarray, inv_mass: np.ndarray, frame_dt: float) -> None:
        pass

    def begin_substep(self, x_substep_start: np.ndarray, x_predicted: np.ndarray, t_start: float, t_end: float,
                      h: float) -> None:
        pass

    def project(self, x: np.ndarray, x_substep_start: np.ndarray, inv_mass: np.ndarray, h: float) -> None:
        pass

    def end_substep(self, x: np.ndarray, v: np.ndarray, inv_mass: np.ndarray, h: float) -> None:
        pass

    def end_frame(self) -> None:
        """Called once after a frame succeeded (not after a rolled-back one): commit per-frame state,
        e.g. the colliders' end poses become the next frame's start poses."""
        pass

    def diagnostics(self) -> dict:
        return {}


class AccelerationHook(Protocol):
    """Returns an (n,3) acceleration in m/s^2 added to gravity for free vertices, or None."""

    def __call__(self, x: np.ndarray, v: np.ndarray, h: float, t_start: float) -> np.ndarray | None: ...


class ProposalHook(Protocol):
    """Returns (n,3) proposed positions replacing the inertial prediction of free vertices, or None."""

    def __call__(self, x_substep_start: np.ndarray, x_predicted: np.ndarray, v: np.ndarray,
                 h: float) -> np.ndarray | None: ...
