"""Sewing: vertex pairs between pattern pieces pulled shut over a set time, then welded or kept as
stiff seams, with bending continuous across each closed seam.

The pairs come from Blender Cloth's convention (loose edges, edges in no face, between the
pieces: :func:`loose_edges`) or from a seam list. Each pair (i, j) is an XPBD distance constraint
that may only pull (lambda <= 0), with a rest length that shrinks from its rest distance L0 to
zero over ``closing_time_s``: ``L(t) = L0 max(0, 1 - t / T)``, compliance ``sewing_compliance``
(m/N). Blender's Max Sewing Force (``sewing_force_max``, N; 0: no limit) caps the pull:
``|lambda| <= F_max h^2`` (lambda / h^2 is the constraint force). A pair is closed once t >= T and its
gap is under ``closed_gap_m`` (checked at each substep's start; it stays closed):
``seam="weld"`` holds the pair together exactly (compliance 0, no cap: the vertices stay two,
since the bake keeps the mesh's vertex count), ``"stiff"`` with ``seam_compliance``.

Bending across a closed seam: each mesh boundary edge (a, b) whose ends are sewn to the ends
of another boundary edge (c, d) gets a dihedral hinge between its face's third vertex p and the
other face's third vertex q, around (a, b), rest angle 0 (the panels' flat rest continued),
compliance from the material's bending as in ``constraints.build_bending``. It acts only after
closure; before that the hinge spans an open gap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from . import _numba_setup  # noqa: F401
from . import kernels as kn
from .errors import ClothInputError
from .kernels import _JIT

SEAM_KINDS = ("weld", "stiff")


@dataclass
class Sewing:
    """Seams of one cloth: ``pairs`` (S, 2) vertex indices, and how they close (module docstring)."""

    pairs: np.ndarray
    closing_time_s: float = 1.0
    sewing_compliance: float = 1e-6
    #: Blender's Max Sewing Force (N); 0: no limit
    sewing_force_max: float = 0.0
    seam: str = "weld"
    seam_compliance: float = 1e-7
    seam_bending: bool = True
    #: a pair counts as closed when t >= closing_time_s and its gap is below this (m)
    closed_gap_m: float = 1e-3

    def validate(self, n_vertices: int) -> np.ndarray:
        """The pairs as (S, 2) int32, checked; raises ClothInputError naming the first bad pair."""
        pairs = np.asarray(self.pairs)
        if pairs.size == 0:
            return np.zeros((0, 2), np.int32)
        if pairs.ndim != 2 or pairs.shape[1] != 2 or not np.issubdtype(pairs.dtype, np.integer):
            raise ClothInputError(f"sewing pairs must be an (S, 2) array of vertex indices, got shape {pairs.shape}")
        out_of_range = np.flatnonzero((pairs < 0).any(axis=1) | (pairs >= n_vertices).any(axis=1))
        if out_of_range.size:
            k = int(out_of_range[0])
            raise ClothInputError(
                f"sewing edge {k} ({pairs[k, 0]}-{pairs[k, 1]}) names a vertex outside the mesh (0..{n_vertices - 1})"
            )
        self_loops = np.flatnonzero(pairs[:, 0] == pairs[:, 1])
        if self_loops.size:
            k = int(self_loops[0])
            raise ClothInputError(
                f"sewing edge {k} connects vertex {pairs[k, 0]} to itself "
                f"({self_loops.size} such edges); a seam joins two different vertices"
            )
        for name in ("closing_time_s", "sewing_compliance", "sewing_force_max", "seam_compliance", "closed_gap_m"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ClothInputError(f"sewing {name} must be finite and >= 0, got {value}")
        if self.seam not in SEAM_KINDS:
            raise ClothInputError(f"seam must be one of {SEAM_KINDS}, got {self.seam!r}")
        return np.ascontiguousarray(np.unique(np.sort(pairs, axis=1), axis=0), dtype=np.int32)


def loose_edges(edges, faces) -> np.ndarray:
    """Blender's sewing convention: the mesh edges that belong to no face (S, 2)."""
    edges = np.sort(np.asarray(edges, dtype=np.int64).reshape(-1, 2), axis=1)
    face_edges = set()
    for f in faces:
        f = list(f)
        for k in range(len(f)):
            a, b = f[k], f[(k + 1) % len(f)]
            face_edges.add((min(a, b), max(a, b)))
    keep = [k for k, (a, b) in enumerate(edges.tolist()) if (a, b) not in face_edges]
    return edges[keep].reshape(-1, 2)


@njit(**_JIT)
def solve_sewing(
    x, inv_mass, pairs, rest_length, closed, alpha_tilde, closed_alpha_tilde, max_lambda, reset_lambda, lam
):
    """C = |x_i - x_j| - L(t), pull only (lambda <= 0); an open pair (``closed[k] == 0``) has
    compliance ``alpha_tilde`` and |lambda| <= max_lambda (when > 0), a closed one
    ``closed_alpha_tilde`` and no cap."""
    for k in range(pairs.shape[0]):
        if reset_lambda:
            lam[k] = 0.0
        i, j = pairs[k, 0], pairs[k, 1]
        w_sum = inv_mass[i] + inv_mass[j]
        if w_sum == 0.0:
            continue
        dx, dy, dz = x[i, 0] - x[j, 0], x[i, 1] - x[j, 1], x[i, 2] - x[j, 2]
        length = math.sqrt(dx * dx + dy * dy + dz * dz)
        if length < 1e-9:
            continue
        c = length - rest_length[k]
        a_t = closed_alpha_tilde if closed[k] else alpha_tilde
        dlam = (-c - a_t * lam[k]) / (w_sum + a_t)
        new_lam = min(lam[k] + dlam, 0.0)
        if not closed[k] and max_lambda > 0.0 and new_lam < -max_lambda:
            new_lam = -max_lambda
        dlam = new_lam - lam[k]
        lam[k] = new_lam
        s = dlam / length
        for d, comp in ((0, dx), (1, dy), (2, dz)):
            x[i, d] += inv_mass[i] * s * comp
            x[j, d] -= inv_mass[j] * s * comp


class SewingConstraints:
    """The seams of one cloth (init apart from solve)."""

    def __init__(self, rest: np.ndarray, topology, material, sewing: Sewing):
        n = rest.shape[0]
        self.pairs = sewing.validate(n)
        self.sewing = sewing
        e = topology.edges
        face_edge = set(map(tuple, e[topology.edge_triangle_count > 0].tolist()))
        on_face = [k for k, (a, b) in enumerate(self.pairs.tolist()) if (a, b) in face_edge]
        if on_face:
            a, b = self.pairs[on_face[0]]
            raise ClothInputError(
                f"sewing edge {a}-{b} is an edge of a face: sewing it would collapse the face; "
                "sew loose edges between separate pieces"
            )
        self.rest_distance = np.linalg.norm(rest[self.pairs[:, 0]] - rest[self.pairs[:, 1]], axis=1)
        self.rest_length = self.rest_distance.copy()
        self.lam = np.zeros(self.pairs.shape[0])
        self.closed = np.zeros(self.pairs.shape[0], dtype=np.uint8)
        self.hinges, self.hinge_compliance, self.hinge_pairs = self._seam_hinges(rest, topology, material)
        self._active_hinges = np.zeros((0, 4), np.int32)
        self._hinge_alpha = np.zeros(0)
        self.hinge_lam = np.zeros(0)
        self._zero = np.zeros(self.hinges.shape[0])
        self._one = np.ones(self.hinges.shape[0])

    def _seam_hinges(self, rest, topology, material):
        boundary = topology.edges[topology.edge_triangle_count == 1]
        if not self.sewing.seam_bending or boundary.size == 0 or self.pairs.size == 0:
            return np.zeros((0, 4), np.int32), np.zeros(0), np.zeros((0, 2), np.int64)
        opposite = {}
        for t in topology.triangles.tolist():
            for k in range(3):
                a, b, c = t[k], t[(k + 1) % 3], t[(k + 2) % 3]
                opposite.setdefault((min(a, b), max(a, b)), c)
        partner, pair_of = {}, {}
        for k, (a, b) in enumerate(self.pairs.tolist()):
            partner.setdefault(a, b)
            partner.setdefault(b, a)
            pair_of.setdefault(a, k)
            pair_of.setdefault(b, k)
        boundary_set = set(map(tuple, boundary.tolist()))
        hinges, compliance, hinge_pairs = [], [], []
        for a, b in boundary.tolist():
            if a not in partner or b not in partner:
                continue
            c, d = partner[a], partner[b]
            key = (min(c, d), max(c, d))
            if key not in boundary_set or key <= (a, b):
                continue
            p, q = opposite[(a, b)], opposite[key]
            edge = np.linalg.norm(rest[b] - rest[a])
            area0 = 0.5 * np.linalg.norm(np.cross(rest[b] - rest[a], rest[p] - rest[a]))
            area1 = 0.5 * np.linalg.norm(np.cross(rest[d] - rest[c], rest[q] - rest[c]))
            hinges.append((p, q, a, b))
            hinge_pairs.append((pair_of[a], pair_of[b]))
            compliance.append(material.bend_compliance * (area0 + area1) / (6.0 * edge**2))
        return (
            np.array(hinges, dtype=np.int32).reshape(-1, 4),
            np.array(compliance, dtype=np.float64),
            np.array(hinge_pairs, dtype=np.int64).reshape(-1, 2),
        )

    @property
    def count(self) -> int:
        return int(self.pairs.shape[0])

    @property
    def closed_fraction(self) -> float:
        return float(self.closed.mean()) if self.count else 1.0

    def gaps(self, x) -> np.ndarray:
        return np.linalg.norm(x[self.pairs[:, 0]] - x[self.pairs[:, 1]], axis=1)

    def begin_substep(self, x, time_s) -> None:
        """Rest lengths at ``time_s`` (s since the first frame) and the pairs that closed."""
        s = self.sewing
        if not self.closed.all() and time_s >= s.closing_time_s:
            newly = (self.gaps(x) < s.closed_gap_m) & ~self.closed.astype(bool)
            if newly.any():
                self.closed[newly] = 1
                done = self.closed[self.hinge_pairs].all(axis=1) if self.hinges.size else np.zeros(0, bool)
                self._active_hinges = np.ascontiguousarray(self.hinges[done])
                self._hinge_alpha = np.ascontiguousarray(self.hinge_compliance[done])
                self.hinge_lam = np.zeros(self._active_hinges.shape[0])
        ramp = 0.0 if s.closing_time_s == 0 else max(0.0, 1.0 - time_s / s.closing_time_s)
        self.rest_length[:] = self.rest_distance * ramp

    def project(self, x, x_substep_start, inv_mass, h, reset_lambda) -> None:
        """One pass over the seams, then over the closed seams' bending hinges."""
        s = self.sewing
        h2 = h * h
        closed_alpha = 0.0 if s.seam == "weld" else s.seam_compliance
        solve_sewing(
            x,
            inv_mass,
            self.pairs,
            self.rest_length,
            self.closed,
            s.sewing_compliance / h2,
            closed_alpha / h2,
            s.sewing_force_max * h2,
            reset_lambda,
            self.lam,
        )
        m = self._active_hinges.shape[0]
        if m:
            kn.solve_bend_dihedral_serial(
                x,
                x_substep_start,
                inv_mass,
                self._active_hinges,
                self._one[:m],
                self._zero[:m],
                self._hinge_alpha / h2,
                self._zero[:m],
                reset_lambda,
                True,
                self.hinge_lam,
            )
