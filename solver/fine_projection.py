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
``(1 - limit) L0`` are pushed back out the same way (``FineEdges.low``).

* Warp and weft only, as in the paper: with a triangle mesh's bias edges as well the constraints
  outnumber the free coordinates where the mesh is taut, and the converged solve diverged.
* The damping (Levenberg-Marquardt on the dual system) keeps a step bounded where the limits
  cannot all be met (a sheet pinned at two corners: its top row is a taut string between the
  pins; undamped, Newton stretched it to 46-68 %).
* The linear system is solved matrix-free by conjugate gradients, warm-started from the last
  solve's multipliers, preconditioned by the thread lines: the edges are visited along their warp
  or weft line (:func:`fine_edges`), so the active rows come numbered chain by chain (a run of
  consecutive active edges of one line), and the tridiagonal part of the matrix along each chain
  is factored exactly while the rows are chosen. On a flat quad grid the perpendicular edges
  decouple (``n_a . n_b = 0``) and this is nearly the whole matrix: the same strain as Jacobi at
  half the iterations or fewer.
* Cost, counted in passes over arrays (that is where the time goes): per Newton step one over the
  edges (the rows chosen and factored) and one over the vertices (x moved); per CG iteration
  three for the product (J^T p scattered as p is updated, W at every vertex, J gathered) and two
  for the line solve (its forward pass fused with the residual's update). Only the first Newton
  step's warm start costs a product; the last CG step is taken in the update's pass. A closed
  line (a sleeve's weft) is cut where it is stored to begin: a run of active edges across that
  point is two chains.

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


def thread_lines(edges, grain):
    """(sweep, link): every edge once, line by line (each open line from one end, each closed one
    from its lowest edge, cut there), and ``link[s]`` the vertex ``sweep[s]`` shares with
    ``sweep[s - 1]`` where that is its neighbour on the line, -1 where a line starts."""
    nbr = line_neighbours(edges, grain)
    n = len(edges)
    seen = np.zeros(n, bool)
    sweep, link = [], []
    for cycles in (False, True):  # lines with ends first; what is left are closed loops
        for k0 in range(n):
            if seen[k0] or (not cycles and nbr[k0, 0] >= 0 and nbr[k0, 1] >= 0):
                continue
            k, prev = k0, -1
            while k >= 0 and not seen[k]:
                seen[k] = True
                shared = -1
                if prev >= 0:
                    shared = int(edges[k, 0]) if edges[k, 0] in (edges[prev, 0], edges[prev, 1]) else int(edges[k, 1])
                sweep.append(k)
                link.append(shared)
                nxt = -1
                for side in range(2):
                    m = nbr[k, side]
                    if m >= 0 and m != prev and not seen[m]:
                        nxt = m
                        break
                prev, k = k, nxt
    return np.array(sweep, np.int64), np.array(link, np.int64)


class FineEdges(NamedTuple):
    """What is projected (:func:`fine_edges`, built once per cloth), one row per edge in the order
    they are visited (line by line, :func:`thread_lines`): ``edges`` (E, 2); the limits ``high *
    rest_length[rest_index]`` (longest) and ``low * rest_length[rest_index]`` (shortest; zeros: no
    compression limit), read from the caller's rest lengths at every call (shrink); ``link``: the
    vertex an edge shares with the one before it on its line, -1 where a chain cannot continue
    (a line starts; every edge without lines: Jacobi)."""

    edges: np.ndarray
    rest_index: np.ndarray
    high: np.ndarray
    low: np.ndarray
    link: np.ndarray


def fine_edges(edges, rest_index, high, low, grain=None) -> FineEdges:
    """The rows of ``edges`` (and their ``rest_index``, ``high``, ``low``) reordered along their
    thread lines; ``grain``: each edge's (warp 0, weft 1), None for the Jacobi preconditioner.
    The multipliers :func:`fast_projection` keeps are in this order."""
    edges = np.asarray(edges, dtype=np.int64)
    if grain is None:
        sweep, link = np.arange(len(edges), dtype=np.int64), np.full(len(edges), -1, np.int64)
    else:
        sweep, link = thread_lines(edges, grain)
    f64 = np.float64
    return FineEdges(
        np.ascontiguousarray(edges[sweep]),
        np.ascontiguousarray(np.asarray(rest_index, dtype=np.int64)[sweep]),
        np.ascontiguousarray(np.asarray(high, dtype=f64)[sweep]),
        np.ascontiguousarray(np.asarray(low, dtype=f64)[sweep]),
        link,
    )


class Workspace(NamedTuple):
    """The scratch arrays of :func:`fast_projection` (:func:`workspace`, allocated once per cloth);
    per active row unless said."""

    active: np.ndarray  # its edge
    ends: np.ndarray  # (E, 2) that edge's vertices
    dirs: np.ndarray  # (E, 3) its unit direction
    c: np.ndarray  # its constraint value
    diag: np.ndarray  # the damped system's diagonal
    dl: np.ndarray  # the multipliers of this Newton step
    r: np.ndarray
    z: np.ndarray
    p: np.ndarray
    ap: np.ndarray
    sub: np.ndarray  # the line factor: multipliers of L (0 where a chain starts)
    piv: np.ndarray  # inverse pivots
    tmp: np.ndarray  # the line solve's forward pass
    y: np.ndarray  # (N, 3) J^T p, kept zero between uses
    wy: np.ndarray  # (N, 3) W J^T p


def workspace(n_vertices, n_edges) -> Workspace:
    e = [np.empty(n_edges) for _ in range(10)]
    return Workspace(
        np.empty(n_edges, np.int64),
        np.empty((n_edges, 2), np.int64),
        np.empty((n_edges, 3)),
        *e,
        np.zeros((n_vertices, 3)),
        np.zeros((n_vertices, 3)),
    )


@njit(inline="always", **_JIT)
def _scatter(y, q, a, i, j, dirs):
    """y += J_a^T q: active row a (edge i-j, unit direction dirs[a]) times q."""
    y[i, 0] += q * dirs[a, 0]
    y[i, 1] += q * dirs[a, 1]
    y[i, 2] += q * dirs[a, 2]
    y[j, 0] -= q * dirs[a, 0]
    y[j, 1] -= q * dirs[a, 1]
    y[j, 2] -= q * dirs[a, 2]


@njit(inline="always", **_JIT)
def _apply_w(y, out, inv_mass, normal, subtract):
    """out <- W y over every vertex (inverse mass, the contact normal's component removed), or
    out -= W y with ``subtract``; y <- 0."""
    for v in range(y.shape[0]):
        w = inv_mass[v]
        c0, c1, c2 = normal[v, 0], normal[v, 1], normal[v, 2]
        d = y[v, 0] * c0 + y[v, 1] * c1 + y[v, 2] * c2
        w0, w1, w2 = w * (y[v, 0] - d * c0), w * (y[v, 1] - d * c1), w * (y[v, 2] - d * c2)
        if subtract:
            out[v, 0] -= w0
            out[v, 1] -= w1
            out[v, 2] -= w2
        else:
            out[v, 0] = w0
            out[v, 1] = w1
            out[v, 2] = w2
        y[v, 0] = 0.0
        y[v, 1] = 0.0
        y[v, 2] = 0.0


@njit(inline="always", **_JIT)
def _gather(p, ends, n_active, dirs, wy, out, diag, relative):
    """out = J wy + relative diag p (the damping); returns p . out."""
    pap = 0.0
    for a in range(n_active):
        i, j = ends[a, 0], ends[a, 1]
        acc = (
            dirs[a, 0] * (wy[i, 0] - wy[j, 0]) + dirs[a, 1] * (wy[i, 1] - wy[j, 1]) + dirs[a, 2] * (wy[i, 2] - wy[j, 2])
        )
        acc += diag[a] * relative * p[a]
        out[a] = acc
        pap += p[a] * acc
    return pap


@njit(inline="always", **_JIT)
def _backward(r, z, n_active, sub, piv, tmp):
    """The line solve's backward pass (L^T, D), z = T^-1 r from the forward pass's ``tmp``; returns r . z."""
    nxt = 0.0
    rz = 0.0
    for t in range(n_active - 1, -1, -1):
        l_next = sub[t + 1] if t + 1 < n_active else 0.0
        nxt = tmp[t] * piv[t] - l_next * nxt
        z[t] = nxt
        rz += r[t] * nxt
    return rz


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
    edges, rest_index, high, low, link = problem
    active, ends, dirs, c, diag, dl, r, z, p, ap, sub, piv, tmp, y, wy = ws
    relative = damping / (1.0 + damping)
    first_active = 0
    total_cg = 0
    for step in range(newton_steps):
        # the active rows, chain by chain, and the LDL^T factor of each chain's tridiagonal
        n_active = 0
        chained = False  # the last edge visited is an active row
        last = 0.0  # the last inverse pivot
        for k in range(edges.shape[0]):
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
                    chained = False
                    continue
            length = sqrt(length_sq)
            inv = 1.0 / length
            d0, d1, d2 = dx * inv, dy * inv, dz * inv
            ci = normal[i, 0] * d0 + normal[i, 1] * d1 + normal[i, 2] * d2
            cj = normal[j, 0] * d0 + normal[j, 1] * d1 + normal[j, 2] * d2
            dg = inv_mass[i] * (1.0 - ci * ci) + inv_mass[j] * (1.0 - cj * cj)
            if dg <= 1e-12 * (inv_mass[i] + inv_mass[j]) or dg <= 0.0:
                chained = False
                continue  # both ends held against the pull
            a = n_active
            active[a] = k
            ends[a, 0] = i
            ends[a, 1] = j
            dirs[a, 0] = d0
            dirs[a, 1] = d1
            dirs[a, 2] = d2
            c[a] = length - limit
            diag[a] = dg * (1.0 + damping)
            dl[a] = lam[k] if step == 0 else 0.0
            d = diag[a]
            off = 0.0
            v = link[k]
            if chained and v >= 0:
                # the entry of J W J^T between this row and the last (their shared vertex v)
                kp = active[a - 1]
                sa = 1.0 if i == v else -1.0
                sb = 1.0 if edges[kp, 0] == v else -1.0
                c0, c1, c2 = normal[v, 0], normal[v, 1], normal[v, 2]
                da = d0 * c0 + d1 * c1 + d2 * c2
                db = dirs[a - 1, 0] * c0 + dirs[a - 1, 1] * c1 + dirs[a - 1, 2] * c2
                dot = d0 * dirs[a - 1, 0] + d1 * dirs[a - 1, 1] + d2 * dirs[a - 1, 2]
                off = sa * sb * inv_mass[v] * (dot - da * db)
                if off != 0.0:
                    d -= off * off * last
            if d <= 1e-6 * diag[a]:  # nearly singular chain: cut it here
                off = 0.0
                d = diag[a]
            sub[a] = off * last  # l_a = off / pivot_{a-1}
            last = 1.0 / d
            piv[a] = last
            chained = True
            n_active += 1
        if step == 0:
            first_active = n_active
        if n_active == 0:
            break
        # preconditioned CG on (J W J^T + damping) dl = c, from the warm start (later Newton
        # steps start from 0: no product)
        if step == 0:
            for a in range(n_active):
                _scatter(y, dl[a], a, ends[a, 0], ends[a, 1], dirs)
            _apply_w(y, wy, inv_mass, normal, False)
            _gather(dl, ends, n_active, dirs, wy, ap, diag, relative)
        rr0 = 0.0
        rr = 0.0
        fwd = 0.0
        for a in range(n_active):
            r[a] = c[a] - ap[a] if step == 0 else c[a]
            rr0 += c[a] * c[a]
            rr += r[a] * r[a]
            fwd = r[a] - sub[a] * fwd
            tmp[a] = fwd
        rz = _backward(r, z, n_active, sub, piv, tmp)
        tol_sq = cg_tolerance * cg_tolerance * rr0
        beta = 0.0
        alpha = 0.0
        fold = False
        for it in range(cg_iterations):
            if rr <= tol_sq:
                break
            total_cg += 1
            for a in range(n_active):  # p = z + beta p, and J^T p
                p[a] = z[a] + beta * p[a] if it > 0 else z[a]
                _scatter(y, p[a], a, ends[a, 0], ends[a, 1], dirs)
            _apply_w(y, wy, inv_mass, normal, False)
            pap = _gather(p, ends, n_active, dirs, wy, ap, diag, relative)
            if pap <= 0.0:
                break
            alpha = rz / pap
            if it == cg_iterations - 1:  # the last step, taken with the update below: no residual
                fold = True
                break
            rr = 0.0
            fwd = 0.0
            for a in range(n_active):  # the step, the residual, the line solve's forward pass
                dl[a] += alpha * p[a]
                r[a] -= alpha * ap[a]
                rr += r[a] * r[a]
                fwd = r[a] - sub[a] * fwd
                tmp[a] = fwd
            rz_new = _backward(r, z, n_active, sub, piv, tmp)
            beta = rz_new / rz
            rz = rz_new
        # x <- x - W J^T dl
        for a in range(n_active):
            if fold:
                dl[a] += alpha * p[a]
            k = active[a]
            _scatter(y, dl[a], a, ends[a, 0], ends[a, 1], dirs)
            if step == 0:
                lam[k] = dl[a]
            else:
                lam[k] += dl[a]
        _apply_w(y, x, inv_mass, normal, True)
    return first_active, total_cg
