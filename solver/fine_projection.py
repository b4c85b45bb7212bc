"""Fast projection of the fine level (Goldenthal et al. 2007, "Efficient simulation of inextensible
cloth"), as an inequality: a global solve of the warp and weft edges' stretch limit.

Why: one Gauss-Seidel sweep of the XPBD edge constraints per substep does not converge against
the body contacts (docs/design/stiff_fabric.md, "Garment: what was tried"). Here every warp or
weft mesh edge longer than ``(1 + limit) L0`` (the active set; slack edges are never pulled, so
folding and compression stay free) is projected back onto its limit by Newton steps on the
constraints ``C_k(x) = |x_i - x_j| - L_max,k``:

    (J W J^T + damping diag(J W J^T)) dlambda = C(x),    x <- x - W J^T dlambda

with ``J`` the active rows (unit edge directions) and ``W`` the inverse masses (0 for pins). A
vertex in contact with a body (unit push normal ``c_i``) has ``W_i = w_i (I - c_i c_i^T)``: the
projection slides it along the surface, never into it (or off it). Optionally edges shorter than
``(1 - limit) L0`` are pushed back out the same way (``min_length``).

* Warp and weft only, as in the paper: with a triangle mesh's bias edges as well the constraints
  outnumber the free coordinates where the mesh is taut, and the converged solve diverged.
* The damping (Levenberg-Marquardt on the dual system) keeps a step bounded where the limits
  cannot all be met (a sheet pinned at two corners: its top row is a taut string between the
  pins; undamped, Newton stretched it to 46-68 %).
* The linear system is solved matrix-free by conjugate gradients, warm-started from the last
  solve's multipliers, preconditioned by the thread lines: the active edges ordered along their
  warp or weft line (``line_neighbours``), and the tridiagonal part of the matrix along each line
  factored exactly. On a flat quad grid the perpendicular edges decouple (``n_a . n_b = 0``) and
  this is nearly the whole matrix: the same strain as Jacobi at half the iterations or fewer.

Fixed loop order: bit-reproducible. Measured in docs/design/stiff_fabric.md ("Fine level: fast
projection").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from . import _numba_setup  # noqa: F401  (cache directory before any compilation)
from ._intrinsics import sqrt
from .kernels import _JIT


@njit(inline="always", **_JIT)
def _apply_w(y, inv_mass, normal, v):
    """y[v] <- W_v y[v] (inverse mass, with the contact normal's component removed)."""
    w = inv_mass[v]
    c0, c1, c2 = normal[v, 0], normal[v, 1], normal[v, 2]
    d = y[v, 0] * c0 + y[v, 1] * c1 + y[v, 2] * c2
    y[v, 0] = w * (y[v, 0] - d * c0)
    y[v, 1] = w * (y[v, 1] - d * c1)
    y[v, 2] = w * (y[v, 2] - d * c2)


@njit(inline="always", **_JIT)
def _add_jt(y, p, a, i, j, dirs):
    """y += J_a^T p[a]: active row a (edge i-j, unit direction dirs[a]) times its multiplier."""
    y[i, 0] += p[a] * dirs[a, 0]
    y[i, 1] += p[a] * dirs[a, 1]
    y[i, 2] += p[a] * dirs[a, 2]
    y[j, 0] -= p[a] * dirs[a, 0]
    y[j, 1] -= p[a] * dirs[a, 1]
    y[j, 2] -= p[a] * dirs[a, 2]


@njit(**_JIT)
def _matvec(p, active, n_active, edges, dirs, inv_mass, normal, y, touched, out, diag, damping):
    """out = J W J^T p over the active rows; ``y`` (N, 3) must be zero on entry and is left zero."""
    for a in range(n_active):
        k = active[a]
        _add_jt(y, p, a, edges[k, 0], edges[k, 1], dirs)
    for t in range(touched.shape[0]):
        _apply_w(y, inv_mass, normal, touched[t])
    for a in range(n_active):
        k = active[a]
        i, j = edges[k, 0], edges[k, 1]
        out[a] = dirs[a, 0] * (y[i, 0] - y[j, 0]) + dirs[a, 1] * (y[i, 1] - y[j, 1]) + dirs[a, 2] * (y[i, 2] - y[j, 2])
        if damping > 0.0:
            out[a] += diag[a] * (damping / (1.0 + damping)) * p[a]
    for t in range(touched.shape[0]):
        v = touched[t]
        y[v, 0] = 0.0
        y[v, 1] = 0.0
        y[v, 2] = 0.0


def line_neighbours(edges, grain):
    """(E, 2) the edge that continues edge k's thread line through its vertex 0 / vertex 1 (same
    grain, the only other edge of that grain there), -1 where none or ambiguous."""
    out = np.full((len(edges), 2), -1, np.int64)
    by = {}
    for k, (i, j) in enumerate(edges):
        by.setdefault((int(i), int(grain[k])), []).append(k)
        by.setdefault((int(j), int(grain[k])), []).append(k)
    for k, (i, j) in enumerate(edges):
        for side, v in enumerate((i, j)):
            group = by[(int(v), int(grain[k]))]
            if len(group) == 2:
                out[k, side] = group[0] if group[1] == k else group[1]
    return out


class ThreadLines(NamedTuple):
    """The warp and weft lines of a mesh, for the preconditioner (built once: :func:`thread_lines`).

    ``nbr``: :func:`line_neighbours`; ``edges``: every edge once, line by line, each open line from
    one end, each closed one from its lowest edge towards that edge's ``nbr[k, 0]``; ``start``:
    (lines + 1) offsets into ``edges``; ``closed``: per line. No rows: Jacobi (:func:`no_lines`)."""

    nbr: np.ndarray
    edges: np.ndarray
    start: np.ndarray
    closed: np.ndarray


def thread_lines(edges, grain) -> ThreadLines:
    nbr = line_neighbours(edges, grain)
    n = len(edges)
    seen = np.zeros(n, bool)
    order, start, closed = [], [0], []
    for cycles in (False, True):  # lines with ends first; what is left are closed loops
        for k0 in range(n):
            if seen[k0] or (not cycles and nbr[k0, 0] >= 0 and nbr[k0, 1] >= 0):
                continue
            k, prev = k0, -1
            while k >= 0 and not seen[k]:
                seen[k] = True
                order.append(k)
                nxt = -1
                for side in range(2):
                    m = nbr[k, side]
                    if m >= 0 and m != prev and not seen[m]:
                        nxt = m
                        break
                prev, k = k, nxt
            start.append(len(order))
            closed.append(cycles)
    return ThreadLines(
        nbr, np.array(order, np.int64), np.array(start, np.int64), np.array(closed, np.bool_).reshape(-1)
    )


def no_lines() -> ThreadLines:
    """The Jacobi preconditioner instead of the thread lines."""
    return ThreadLines(np.zeros((0, 2), np.int64), np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.bool_))


@njit(inline="always", **_JIT)
def _chain_link(a, prev, active, edges, dirs, inv_mass, normal):
    """The entry of J W J^T between active rows a and prev, consecutive on a thread line (through
    the vertex they share)."""
    k = active[a]
    kp = active[prev]
    v = edges[k, 0] if (edges[k, 0] == edges[kp, 0] or edges[k, 0] == edges[kp, 1]) else edges[k, 1]
    sa = 1.0 if edges[k, 0] == v else -1.0
    sb = 1.0 if edges[kp, 0] == v else -1.0
    c0, c1, c2 = normal[v, 0], normal[v, 1], normal[v, 2]
    da = dirs[a, 0] * c0 + dirs[a, 1] * c1 + dirs[a, 2] * c2
    db = dirs[prev, 0] * c0 + dirs[prev, 1] * c1 + dirs[prev, 2] * c2
    dot = dirs[a, 0] * dirs[prev, 0] + dirs[a, 1] * dirs[prev, 1] + dirs[a, 2] * dirs[prev, 2]
    return sa * sb * inv_mass[v] * (dot - da * db)


@njit(**_JIT)
def _line_factor(lines, pos, active, edges, dirs, diag, inv_mass, normal, order, sub, piv):
    """Order the active rows along the thread lines (chains of consecutive active edges; each from
    its lower-numbered end, a wholly active closed line from its stored start) and factor the
    tridiagonal part of J W J^T along them (LDL^T: ``sub`` the multipliers, ``piv`` the inverse
    pivots; 0 between chains). One pass over the lines."""
    line_edges, start, closed = lines.edges, lines.start, lines.closed
    t = 0
    for line in range(closed.shape[0]):
        s = start[line]
        n = start[line + 1] - s
        first = 0  # a closed line is read from just after an inactive edge (runs do not wrap)
        whole = False
        if closed[line]:
            whole = True
            for u in range(n):
                if pos[line_edges[s + u]] < 0:
                    first = u + 1
                    whole = False
                    break
        q = 0
        while q < n:
            u0 = s + first + q
            if u0 >= s + n:
                u0 -= n
            if pos[line_edges[u0]] < 0:
                q += 1
                continue
            u1 = u0  # the run of active edges u0..u1
            length = 1
            while q + length < n:
                u = u1 + 1
                if u >= s + n:
                    u -= n
                if pos[line_edges[u]] < 0:
                    break
                u1 = u
                length += 1
            step = 1
            u = u0
            if not whole and line_edges[u1] < line_edges[u0]:
                step = -1
                u = u1
            prev = -1
            last = 0.0
            for _ in range(length):
                a = pos[line_edges[u]]
                order[t] = a
                d = diag[a]
                off = 0.0
                if prev >= 0:
                    off = _chain_link(a, prev, active, edges, dirs, inv_mass, normal)
                    if off != 0.0:
                        d -= off * off * last
                if d <= 1e-6 * diag[a]:  # nearly singular chain: cut it here
                    off = 0.0
                    d = diag[a]
                sub[t] = off * last  # l_t = off / pivot_{t-1}
                last = 1.0 / d
                piv[t] = last
                prev = a
                t += 1
                u += step
                if u >= s + n:
                    u -= n
                elif u < s:
                    u += n
            q += length
    return t


@njit(**_JIT)
def _line_solve(r, z, n_active, order, sub, piv, tmp):
    """z = T^-1 r for the factored tridiagonal T (:func:`_line_factor`): L D L^T z = r."""
    prev = 0.0
    for t in range(n_active):
        prev = r[order[t]] - sub[t] * prev
        tmp[t] = prev
    nxt = 0.0
    for t in range(n_active - 1, -1, -1):
        l_next = sub[t + 1] if t + 1 < n_active else 0.0
        nxt = tmp[t] * piv[t] - l_next * nxt
        z[order[t]] = nxt


@njit(inline="always", **_JIT)
def _precondition(r, z, n_active, lines, order, sub, piv, tmp, diag):
    """z = M^-1 r: the thread lines' tridiagonal solve, or Jacobi without lines."""
    if lines:
        _line_solve(r, z, n_active, order, sub, piv, tmp)
    else:
        for a in range(n_active):
            z[a] = r[a] / diag[a]


class FineEdges(NamedTuple):
    """What is projected (built once per cloth): ``edges`` (E, 2); the limits ``high[k] *
    rest_length[rest_index[k]]`` (longest) and ``low[k] * rest_length[rest_index[k]]`` (shortest;
    zeros: no compression limit), read from the cloth's rest lengths at every call (shrink);
    ``lines``: :func:`thread_lines` or :func:`no_lines`."""

    edges: np.ndarray
    rest_index: np.ndarray
    high: np.ndarray
    low: np.ndarray
    lines: ThreadLines


class Workspace(NamedTuple):
    """The scratch arrays of :func:`fast_projection` (:func:`workspace`, allocated once per cloth)."""

    active: np.ndarray  # (E,) edge of each active row
    dirs: np.ndarray  # (E, 3) its unit direction
    c: np.ndarray  # constraint values
    diag: np.ndarray  # diagonal of the damped system
    dl: np.ndarray  # multipliers of this Newton step
    r: np.ndarray
    z: np.ndarray
    p: np.ndarray
    ap: np.ndarray
    y: np.ndarray  # (N, 3), kept zero between uses
    mark: np.ndarray  # (N,), kept False
    touched: np.ndarray  # (N,)
    pos: np.ndarray  # (E,) active row of each edge, kept -1
    order: np.ndarray  # the line factor's
    sub: np.ndarray
    piv: np.ndarray
    tmp: np.ndarray


def workspace(n_vertices, n_edges) -> Workspace:
    e, n = n_edges, n_vertices
    return Workspace(
        np.empty(e, np.int64),
        np.empty((e, 3)),
        np.empty(e),
        np.empty(e),
        np.empty(e),
        np.empty(e),
        np.empty(e),
        np.empty(e),
        np.empty(e),
        np.zeros((n, 3)),
        np.zeros(n, np.bool_),
        np.empty(n, np.int64),
        np.full(e, -1, np.int64),
        np.empty(e, np.int64),
        np.empty(e),
        np.empty(e),
        np.empty(e),
    )


@njit(**_JIT)
def fast_projection(
    x, inv_mass, normal, lam, rest_length, problem, newton_steps, cg_iterations, cg_tolerance, damping, ws
):
    """Project the active edges of ``problem`` (:class:`FineEdges`) onto their longest length
    (module docstring), in place; edges shorter than their shortest length are pushed back onto it
    the same way.

    ``normal``: (N, 3) unit contact normals (zero rows: free vertices); ``lam``: (E,) the
    multipliers of the last solve per edge (warm start; updated; pass zeros for a cold start);
    ``rest_length``: indexed by ``problem.rest_index``; ``damping``: added to the system's
    diagonal, relative; ``ws``: :func:`workspace`.
    Returns (active edges in the first Newton step, CG iterations in all).
    """
    edges, rest_index, high, low, lines = problem
    n_edges = edges.shape[0]
    active, dirs, c, diag, dl, r, z, p, ap, y, mark, touched_all = ws[:12]
    pos, order, sub, piv, tmp = ws[12:]
    use_lines = lines.nbr.shape[0] == n_edges
    first_active = 0
    total_cg = 0
    for step in range(newton_steps):
        n_active = 0
        n_touched = 0
        for k in range(n_edges):
            i, j = edges[k, 0], edges[k, 1]
            dx = x[i, 0] - x[j, 0]
            dy = x[i, 1] - x[j, 1]
            dz = x[i, 2] - x[j, 2]
            length_sq = dx * dx + dy * dy + dz * dz
            rest = rest_length[rest_index[k]]
            limit = high[k] * rest
            if length_sq <= limit * limit:
                limit = low[k] * rest
                if length_sq >= limit * limit or length_sq == 0.0:
                    lam[k] = 0.0
                    continue
            length = sqrt(length_sq)
            d0, d1, d2 = dx / length, dy / length, dz / length
            ci = normal[i, 0] * d0 + normal[i, 1] * d1 + normal[i, 2] * d2
            cj = normal[j, 0] * d0 + normal[j, 1] * d1 + normal[j, 2] * d2
            dg = inv_mass[i] * (1.0 - ci * ci) + inv_mass[j] * (1.0 - cj * cj)
            if dg <= 1e-12 * (inv_mass[i] + inv_mass[j]) or dg <= 0.0:
                continue  # both ends held against the pull
            active[n_active] = k
            dirs[n_active, 0] = d0
            dirs[n_active, 1] = d1
            dirs[n_active, 2] = d2
            c[n_active] = length - limit
            diag[n_active] = dg * (1.0 + damping)
            pos[k] = n_active
            dl[n_active] = lam[k] if step == 0 else 0.0
            n_active += 1
            for v in (i, j):
                if not mark[v]:
                    mark[v] = True
                    touched_all[n_touched] = v
                    n_touched += 1
        touched = touched_all[:n_touched]
        if step == 0:
            first_active = n_active
        if n_active == 0:
            break
        # preconditioned CG on (J W J^T) dl = c: Jacobi, or the thread lines' tridiagonal
        if use_lines:
            _line_factor(lines, pos, active, edges, dirs, diag, inv_mass, normal, order, sub, piv)
        _matvec(dl, active, n_active, edges, dirs, inv_mass, normal, y, touched, ap, diag, damping)
        rr0 = 0.0
        for a in range(n_active):
            r[a] = c[a] - ap[a]
            rr0 += c[a] * c[a]
        _precondition(r, z, n_active, use_lines, order, sub, piv, tmp, diag)
        rz = 0.0
        for a in range(n_active):
            p[a] = z[a]
            rz += r[a] * z[a]
        tol_sq = cg_tolerance * cg_tolerance * rr0
        for _ in range(cg_iterations):
            rr = 0.0
            for a in range(n_active):
                rr += r[a] * r[a]
            if rr <= tol_sq:
                break
            total_cg += 1
            _matvec(p, active, n_active, edges, dirs, inv_mass, normal, y, touched, ap, diag, damping)
            pap = 0.0
            for a in range(n_active):
                pap += p[a] * ap[a]
            if pap <= 0.0:
                break
            alpha = rz / pap
            for a in range(n_active):
                dl[a] += alpha * p[a]
                r[a] -= alpha * ap[a]
            _precondition(r, z, n_active, use_lines, order, sub, piv, tmp, diag)
            rz_new = 0.0
            for a in range(n_active):
                rz_new += r[a] * z[a]
            beta = rz_new / rz
            rz = rz_new
            for a in range(n_active):
                p[a] = z[a] + beta * p[a]
        # x <- x - W J^T dl
        for a in range(n_active):
            k = active[a]
            _add_jt(y, dl, a, edges[k, 0], edges[k, 1], dirs)
            if step == 0:
                lam[k] = dl[a]
            else:
                lam[k] += dl[a]
            pos[k] = -1
        for t in range(n_touched):
            v = touched[t]
            _apply_w(y, inv_mass, normal, v)
            x[v, 0] -= y[v, 0]
            x[v, 1] -= y[v, 1]
            x[v, 2] -= y[v, 2]
            y[v, 0] = 0.0
            y[v, 1] = 0.0
            y[v, 2] = 0.0
            mark[v] = False
    return first_active, total_cg
