"""Extension points of the solver: contacts (collision layer), observers and learned predictors.

The solver calls them in the order of 002 sec. 3::

    observer.begin_frame                  once per frame attempt (FrameState: the frame-start state)
    contact_handler.begin_frame           once per frame (broad phase over the frame's travel)
    per substep:
        acceleration_hook -> a_learned    added to gravity in the prediction (architecture B)
        observer.substep_acceleration     -> a, summed with the hook's and the other observers'
        predict x~ = x + h v + h^2 a      kinematic vertices at their substep-end targets
        proposal_hook -> x proposal       replaces x~ of free vertices (architecture A)
        contact_handler.begin_substep     narrow phase on the broad-phase candidates
        iterations x: stretch, shear, bend, tethers, soft pins, contact_handler.project
        v = (x - x_n) / h
        contact_handler.end_substep       velocity-level work (restitution, friction)
        observer.end_substep              SubstepState with the substep's start, proposal and result
    contact_handler.end_frame             after a successful (not rolled-back) frame
    observer.end_frame                    after a successful frame (FrameState: the frame-end state)

Observers (:class:`StepObserver`, ``Cloth.add_observer``) are the public plug for learned models,
recorders and controllers: any number may be attached, each sees read-only views of the solver's
state and may only *propose* an acceleration; the solver owns ``x`` and ``v``. A change proposed
after the frame (architecture "residual", 001 sec. 9.4) goes through ``Cloth.apply_correction``,
which adds it to the free vertices, projects it (stretch, contacts) and can be taken back with
``Cloth.revert_correction``. The two single-slot hooks (``acceleration_hook``, ``proposal_hook``)
remain for scripts; an observer never replaces them.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np


class ContactHandler:
    """Base class of contact layers; every method is a no-op here.

    ``project`` must treat contacts as inequality constraints whose accumulated multiplier only
    pushes (002 sec. 3), write corrections into ``x`` in place and never touch vertices with
    ``inv_mass == 0``.
    """

    def begin_frame(self, x: np.ndarray, v: np.ndarray, inv_mass: np.ndarray, frame_dt: float) -> None:
        pass

    def begin_substep(
        self, x_substep_start: np.ndarray, x_predicted: np.ndarray, t_start: float, t_end: float, h: float
    ) -> None:
        pass

    def project(self, x: np.ndarray, x_substep_start: np.ndarray, inv_mass: np.ndarray, h: float) -> None:
        pass

    def end_substep(self, x: np.ndarray, v: np.ndarray, inv_mass: np.ndarray, h: float) -> None:
        pass

    def add_push_normals(self, x: np.ndarray, push: np.ndarray) -> None:
        """Optional: add to ``push[i]`` (N, 3) the outward normal of each contact vertex i touches at
        the end of the substep just ended (``x``; any length, summed over contacts). The
        hierarchical stretch limit then never presses that vertex into the contact."""
        pass

    def add_touching_normals(self, x: np.ndarray, out: np.ndarray) -> None:
        """Optional: add to ``out[i]`` (N, 3) the outward normal of each contact vertex i touches or
        lies inside at ``x``. A :class:`~.collisions.world.CollisionWorld` then never lets a cloth
        contact push that vertex further into the contact."""
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

    def __call__(
        self, x_substep_start: np.ndarray, x_predicted: np.ndarray, v: np.ndarray, h: float
    ) -> np.ndarray | None: ...


def read_only(a: np.ndarray) -> np.ndarray:
    """A view of ``a`` that raises on writes: what observers receive of the solver's arrays."""
    view = a.view()
    view.flags.writeable = False
    return view


class FrameState(NamedTuple):
    """Read-only state at a frame boundary, passed to :meth:`StepObserver.begin_frame` / ``end_frame``."""

    #: frames completed so far (``Cloth.frame``): the frame being stepped is ``frame + 1``
    frame: int
    frame_dt: float
    #: (N,3) positions in metres and velocities in m/s, read-only views
    x: np.ndarray
    v: np.ndarray
    #: (N,) inverse masses (0: kinematic), read-only
    inv_mass: np.ndarray
    #: True while the solver replays a failed frame to name its first bad phase (the frame is then
    #: rolled back and ``Cloth.step`` raises); the replay calls the per-substep methods again.
    replay: bool = False


class SubstepState(NamedTuple):
    """Read-only state of one substep, passed to :meth:`StepObserver.substep_acceleration` and ``end_substep``."""

    #: 0-based substep index and the frame's substep count
    substep: int
    substeps: int
    #: substep length in seconds (frame_dt / substeps)
    h: float
    #: the substep's start as a fraction of the frame, substep / substeps
    t_start: float
    #: (N,3) positions: at ``substep_acceleration`` the substep's start, at ``end_substep`` its result
    #: (after the constraints, the contacts and the contacts' velocity pass)
    x: np.ndarray
    #: (N,3) velocities, m/s: the substep's start, at ``end_substep`` its result
    v: np.ndarray
    #: (N,3) positions at the substep's start (``end_substep`` only, else None)
    x_substep_start: np.ndarray | None = None
    #: (N,3) positions the constraints started from: the prediction x~, or the proposal hook's
    #: replacement (``end_substep`` only, else None)
    x_proposal: np.ndarray | None = None
    replay: bool = False


class StepObserver:
    """Base class of observers: every method is a no-op here; override the ones you need.

    Observers never write the solver's arrays (they get read-only views) and may be attached in any
    number (``Cloth.add_observer``); they run in the order they were added. An observer makes a
    coloured frame take the per-phase path (Python runs between the phases; same bits).
    """

    def begin_frame(self, state: FrameState) -> None:
        """Before the frame's first substep (and again before a failed frame's replay, or before a
        frame run again with more substeps: ``SolverSettings.stretch_refinements``, a collision
        world's ``crossing_refinements``)."""

    def substep_acceleration(self, state: SubstepState) -> np.ndarray | None:
        """An (N,3) acceleration in m/s^2 added to gravity in this substep's prediction (architecture B,
        002 sec. 2.2), or None. Kinematic vertices ignore it; XPBD then projects as usual, so the
        velocities stay consistent with the positions (v = (x - x_n) / h)."""
        return None

    def end_substep(self, state: SubstepState) -> None:
        """After the substep's velocity update (e.g. to measure what the projection undid, 002 sec. 2.1)."""

    def end_frame(self, state: FrameState) -> None:
        """After a successful frame (not after a rolled-back one), before ``Cloth.step`` returns."""


class CorrectionResult(NamedTuple):
    """What :meth:`Cloth.apply_correction` did."""

    #: False when the projected state was non-finite: the cloth was left as it was
    applied: bool
    #: (N,3) the proposed positions x + dx (kinematic vertices unchanged), read-only
    proposal: np.ndarray
