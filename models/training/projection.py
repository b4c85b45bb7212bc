"""XPBD stretch projection in PyTorch (Jacobi), matching the solver's Numba kernels exactly.

One iteration = ``kernels.solve_distance_jacobi`` (bilateral distance constraints, accumulated
multipliers, no damping) followed by ``kernels.apply_jacobi`` (averaging by hit count with
over-relaxation omega). Used to train with the projection in the loop (002 sec. 5 stage two)
and, with the same iterations and omega, by the runtime's residual mode
(``models.coupling.LearnedCoupling``), so training and run time project the same way.
Tested against the Numba kernels in tests/models/test_training.py.
"""

from __future__ import annotations

import torch

from ..coupling import RESIDUAL_ITERATIONS as ITERATIONS
from ..coupling import RESIDUAL_OMEGA as OMEGA


def project_stretch(x, edges, rest_length, compliance, inv_mass, h, iterations=ITERATIONS, omega=OMEGA):
    """Differentiable Jacobi projection of (N,3) ``x`` onto distance constraints ``edges`` (C,2)."""
    i, j = edges[:, 0], edges[:, 1]
    wi, wj = inv_mass[i], inv_mass[j]
    w_sum = wi + wj
    alpha_tilde = compliance / (h * h)
    lam = torch.zeros_like(rest_length)
    hits = torch.zeros(x.shape[0], dtype=x.dtype)
    active = (w_sum > 0).to(x.dtype)
    hits = hits.index_add(0, i, active).index_add(0, j, active)
    scale = torch.where(hits > 0, omega / hits.clamp(min=1.0), torch.zeros_like(hits))[:, None]
    for _ in range(iterations):
        d = x[i] - x[j]
        length = torch.linalg.norm(d, dim=1)
        ok = (w_sum > 0) & (length >= 1e-12)
        n = d / length.clamp(min=1e-12)[:, None]
        c = length - rest_length
        denom = w_sum + alpha_tilde
        dlam = torch.where(
            ok & (denom >= 1e-20), (-c - alpha_tilde * lam) / denom.clamp(min=1e-20), torch.zeros_like(c)
        )
        lam = lam + dlam
        corr_i = (wi * dlam)[:, None] * n
        corr_j = -(wj * dlam)[:, None] * n
        dx = torch.zeros_like(x).index_add(0, i, corr_i).index_add(0, j, corr_j)
        x = x + scale * dx
    return x
