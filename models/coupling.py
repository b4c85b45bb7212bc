"""Per-substep coupling of the learned network with the XPBD solver, diagnostics and anomaly guard.

The network predicts, from the frame-start state, two residuals in m/s^2: ``r_x`` with
``r_x dt^2`` the difference between the teacher's frame-end positions and those of the cheap
XPBD budget it was trained against, and ``r_v`` with ``r_v dt`` the same for velocities
(models/README.md). Both are scaled by ``strength`` (guidance strength), r_v also by
``velocity_gain`` (default 0: see the model card). Two coupling modes (002):

* ``"B"`` (acceleration residual, 002 sec. 2.2/3): the coupling is one of the cloth's observers
  (solver/hooks.py, ``Cloth.add_observer``); its ``substep_acceleration`` adds a learned
  acceleration to gravity in every substep's prediction, then XPBD projects as usual.
  The network runs once per frame (its world edges come from the cloth's contact handler, queried
  at the frame start: ``models.graph.world_edges``); the per-substep accelerations follow a linear ramp
  (:func:`substep_schedule`) whose integral over the frame is exactly ``r_x dt^2`` in position
  and ``r_v dt`` in velocity. Velocities come from positions, so they stay consistent (002 sec. 3).
* ``"residual"`` (001 sec. 9.4): XPBD runs the cheap budget untouched, then the solver's
  ``Cloth.apply_correction`` adds ``strength r_x dt^2`` to free vertices and runs a cheap projection
  (hard pins are never moved, stretch constraints, and contacts when a contact handler is present);
  velocities get ``strength r_v dt`` plus the projection's displacement divided by dt.

The coupling never writes the cloth's state and never replaces its hooks or other observers: it
proposes accelerations and corrections, and the solver applies and projects them.

Every frame records r_proj = |x_final - x_proposal| / (|x_proposal - x_t| + eps) (002 sec. 2.1;
in mode B and "off" with x_proposal the inertial prediction of each substep, norms summed over
the frame's substeps; in residual mode over the frame),
network time and solver time, next to the solver's own diagnostics. The guard switches the
object back to pure XPBD for the rest of the bake (and says so) when the network output is
non-finite, the frame fails (rolled back and re-run on pure XPBD), or strain, kinetic energy
or r_proj pass their thresholds. In residual mode a frame that trips the guard keeps the cheap
XPBD result (the correction is undone); in mode B it keeps the projected result (XPBD already
enforced the constraints) unless the frame failed outright, in which case it is re-run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..solver.errors import SimulationError
from ..solver.hooks import StepObserver, SubstepState
from .graph import collider_state, graph_from_cloth, model_inputs, world_edges
from .runtime import LearnedModel

MODES = ("off", "B", "residual")
#: The residual mode's cheap projection: Jacobi stretch iterations and over-relaxation. Training
#: uses the same numbers (models/training/projection.py), so the network learns for this projection.
RESIDUAL_ITERATIONS = 2
RESIDUAL_OMEGA = 1.0
EPS_M = 1e-9


@dataclass
class GuardSettings:
    #: Edge strain (L/L0 - 1) beyond which the network is blamed and switched off.
    strain_max: float = 0.25
    #: r_proj above this for ``patience`` frames in a row switches the network off.
    r_proj_max: float = 50.0
    patience: int = 3
    #: Kinetic energy may not jump above factor x frame-start value + floor (floor: 0.5 mass (floor speed)^2).
    energy_factor: float = 4.0
    energy_floor_speed_m_s: float = 2.0


@dataclass
class FrameRecord:
    frame: int
    mode: str
    network_active: bool
    r_proj: float
    network_ms: float
    solver_ms: float
    strain_max: float
    strain_p95: float
    kinetic_energy_j: float
    solver: dict = field(default_factory=dict)
    #: world edges (collider surface -> vertex) the network saw this frame
    world_edges: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class LearnedCoupling(StepObserver):
    """Attach a learned model to one cloth (as one of its observers); call :meth:`step` instead of
    ``cloth.step``, and :meth:`detach` to take the network off the cloth."""

    def __init__(
        self,
        cloth,
        model: LearnedModel | None,
        mode: str = "B",
        *,
        strength: float = 1.0,
        velocity_gain: float = 0.0,
        guard: GuardSettings | None = None,
        residual_iterations: int = RESIDUAL_ITERATIONS,
    ):
        if mode not in MODES:
            raise ValueError(f"learned-network mode must be one of {MODES}, got {mode!r}")
        if mode != "off" and model is None:
            raise ValueError(f"learned-network mode {mode!r} needs a model")
        self.cloth, self.model, self.mode = cloth, model, mode
        self.strength = float(strength)
        #: Scale of the velocity residual r_v on top of ``strength``. Default 0: on held-out rollouts the
        #: shipped model's r_v made the error grow (bench/bench_network.py rows with vg=1); see models/README.md.
        self.velocity_gain = float(velocity_gain)
        self.guard = guard or GuardSettings()
        self.residual_iterations = int(residual_iterations)
        self.graph = graph_from_cloth(cloth)
        self.active = mode != "off"
        self.events: list[str] = []
        self.history: list[FrameRecord] = []
        self._free = cloth.inv_mass > 0
        self._ke_floor = 0.5 * float(cloth.mass[self._free].sum()) * self.guard.energy_floor_speed_m_s**2
        self._r_high = 0
        self._frame_accel = None
        self._network_ms = 0.0
        self._r_num = self._r_den = 0.0
        self._corrected = False  # residual mode: this frame's correction was applied (and may be reverted)
        self._world = None  # this frame's world edges (collider query at the frame start)
        self.fault_injection = None  # tests: callable(np.ndarray) -> np.ndarray applied to raw outputs
        cloth.add_observer(self)
        if model is not None and mode != "off":
            self.events.append(model.provider_message)

    def detach(self) -> None:
        """Take the network off the cloth: it steps as pure XPBD (with its other observers) again."""
        self.cloth.remove_observer(self)

    # -- observer (called by the solver inside every substep) -----------------------------------
    def substep_acceleration(self, state: SubstepState):
        """Mode B: the frame's learned residual as this substep's share of the schedule (None otherwise)."""
        if not (self.active and self.mode == "B"):
            return None
        substeps = state.substeps
        if state.substep == 0 or self._frame_accel is None:
            r = self._predict(state.x, state.v, state.h * substeps)
            if r is None:
                return None
            self._frame_accel = substep_schedule(
                self.strength * r[:, :3], self.strength * self.velocity_gain * r[:, 3:], substeps
            )
        alpha, beta = self._frame_accel
        return alpha + beta * (state.substep - 0.5 * (substeps - 1))

    def end_substep(self, state: SubstepState) -> None:
        """r_proj's sums over the frame: what the projection undid of each substep's proposal."""
        f = self._free
        self._r_num += float(np.linalg.norm(state.x[f] - state.x_proposal[f]))
        self._r_den += float(np.linalg.norm(state.x_proposal[f] - state.x_substep_start[f]))

    # -- network ------------------------------------------------------------------------------
    def _predict(self, x, v, frame_dt):
        t0 = time.perf_counter()
        world = self._world
        if world is None:
            world = world_edges(collider_state(self.cloth.contact_handler), x, v, frame_dt, self._free)
        feed = model_inputs(self.graph, x, v, frame_dt, world=world)
        r = self.model.run(feed)
        if self.fault_injection is not None:
            r = self.fault_injection(r)
        self._network_ms += 1e3 * (time.perf_counter() - t0)
        if not np.isfinite(r).all():
            self._disable(f"the network returned {int((~np.isfinite(r)).sum())} non-finite values")
            return None
        r[~self._free] = 0.0
        return r

    def _disable(self, reason: str) -> None:
        if self.active:
            self.active = False
            self._frame_accel = None
            msg = (
                f"frame {self.cloth.frame + 1}: learned network ({self.mode}) switched off for this object: "
                f"{reason}; the rest of the bake runs on pure XPBD"
            )
            self.events.append(msg)
            self.cloth.warnings.append(msg)

    # -- frame --------------------------------------------------------------------------------
    def step(self, pin_targets=None, frame_dt=None) -> FrameRecord:
        cloth = self.cloth
        fdt = 1.0 / cloth.settings.fps if frame_dt is None else float(frame_dt)
        x_t, v_t = cloth.positions.copy(), cloth.velocities.copy()
        ke_prev = float(0.5 * np.sum(cloth.mass[self._free] * np.sum(v_t[self._free] ** 2, axis=1)))
        was_active = self.active
        self._network_ms, self._r_num, self._r_den, self._frame_accel = 0.0, 0.0, 0.0, None
        self._corrected = False
        t0 = time.perf_counter()
        # world edges from the frame-start state and the colliders' frame-start/end poses (after cloth.step
        # the handler's start pose has moved on to the frame end, so the query is taken now)
        self._world = None
        if self.active and self.mode != "off":
            tw = time.perf_counter()
            self._world = world_edges(collider_state(cloth.contact_handler), x_t, v_t, fdt, self._free)
            self._network_ms += 1e3 * (time.perf_counter() - tw)  # feature building counts as network time
        try:
            diag = cloth.step(pin_targets, frame_dt)
        except SimulationError as exc:
            if not self.active:
                raise
            self._disable(f"the frame failed with the network on ({exc})")
            self._network_ms, self._r_num, self._r_den = 0.0, 0.0, 0.0
            self._world = None
            t0 = time.perf_counter()
            diag = cloth.step(pin_targets, frame_dt)
        r_proj = self._r_num / (self._r_den + EPS_M)
        if self.active and self.mode == "residual":
            r_proj = self._residual_correction(x_t, v_t, fdt)
        solver_ms = 1e3 * (time.perf_counter() - t0) - self._network_ms
        strain = cloth.edge_strain()
        strain_max = float(strain.max()) if strain.size else 0.0
        v = cloth.velocities
        ke = float(0.5 * np.sum(cloth.mass[self._free] * np.sum(v[self._free] ** 2, axis=1)))
        rec = FrameRecord(
            frame=cloth.frame,
            mode=self.mode,
            network_active=was_active and self.active,
            r_proj=r_proj,
            network_ms=self._network_ms,
            solver_ms=solver_ms,
            strain_max=strain_max,
            strain_p95=float(np.percentile(strain, 95)) if strain.size else 0.0,
            kinetic_energy_j=ke,
            solver=diag.to_dict(),
            world_edges=0 if self._world is None else int(self._world[0].shape[0]),
        )
        if self.active:
            self._check_anomalies(rec, ke_prev)
            if not self.active and self._corrected:
                # residual mode: the correction is undone, the frame keeps the solver's own result
                cloth.revert_correction()
                strain = cloth.edge_strain()
                rec.strain_max = float(strain.max()) if strain.size else 0.0
                rec.strain_p95 = float(np.percentile(strain, 95)) if strain.size else 0.0
                rec.network_active = False
        self.history.append(rec)
        return rec

    def _residual_correction(self, x_t, v_t, fdt) -> float:
        cloth = self.cloth
        r = self._predict(x_t, v_t, fdt)
        if r is None:
            return float("nan")
        # velocity: the cheap solver's, plus the predicted velocity residual, plus what the projection moved
        result = cloth.apply_correction(
            self.strength * r[:, :3] * fdt * fdt,
            self.strength * self.velocity_gain * r[:, 3:] * fdt,
            fdt,
            iterations=self.residual_iterations,
            omega=RESIDUAL_OMEGA,
        )
        if not result.applied:
            self._disable("the residual correction produced non-finite positions")
            return float("nan")
        self._corrected = True
        x, proposal, f = cloth.positions, result.proposal, self._free
        return float(np.linalg.norm(x[f] - proposal[f]) / (np.linalg.norm(proposal[f] - x_t[f]) + EPS_M))

    def _check_anomalies(self, rec: FrameRecord, ke_prev: float) -> None:
        g = self.guard
        if rec.strain_max > g.strain_max:
            self._disable(f"strain {100 * rec.strain_max:.0f} % exceeds the guard's {100 * g.strain_max:.0f} %")
        elif rec.kinetic_energy_j > g.energy_factor * ke_prev + self._ke_floor:
            self._disable(f"kinetic energy jumped from {ke_prev:.3g} J to {rec.kinetic_energy_j:.3g} J")
        else:
            self._r_high = self._r_high + 1 if rec.r_proj > g.r_proj_max else 0
            if self._r_high >= g.patience:
                self._disable(
                    f"projection ratio r_proj stayed above {g.r_proj_max} for {g.patience} frames "
                    f"(now {rec.r_proj:.3g}): XPBD is undoing the network"
                )


def substep_schedule(r_x, r_v, substeps):
    """Per-substep accelerations a_k = alpha + beta (k - (S-1)/2), k = 0..S-1, whose effect on a free
    particle over the frame (semi-implicit Euler, dt = S h) is exactly dx = r_x dt^2 and dv = r_v dt.

    With v_S = h sum a_k and x_S = h^2 sum (S - k) a_k: alpha = r_v, and
    beta = (alpha S (S+1) / 2 - r_x S^2) / C with C = S (S^2 - 1) / 12. With one substep only the
    position can be matched (a = r_x).
    """
    s = int(substeps)
    if s == 1:
        return r_x, np.zeros_like(r_x)
    c = s * (s * s - 1) / 12.0
    alpha = r_v
    beta = (alpha * s * (s + 1) / 2.0 - r_x * s * s) / c
    return alpha, beta


def attach(cloth, mode: str = "B", model_path=None, **kwargs) -> LearnedCoupling:
    """Convenience: load the (shipped) model and couple it to ``cloth``."""
    model = None if mode == "off" else LearnedModel(model_path)
    return LearnedCoupling(cloth, model, mode, **kwargs)
