"""Shrinking: a per-object rest-length scale with an optional vertex-group map (Blender's Shrinking).

Blender Cloth > Shape > Shrinking has ``Shrinking Factor`` (``shrink_min``), ``Max Shrinking``
(``shrink_max``) and a ``Shrinking Group`` vertex group. Blender's cloth (``cloth_shrink_factor``
in ``cloth.cc``) scales a spring between vertices i and j by ``sqrt(k_i k_j)`` with
``k = 1 - shrink_min + (shrink_min - shrink_max) w`` (w the vertex's group weight), and by
``1 - shrink_min`` everywhere without a group. Selvedge applies the same scale to the rest length
of every distance constraint (stretch, shear, cross-edge bending, tethers); a negative factor grows
the cloth. The scale is animatable: :meth:`Cloth.set_shrink` rescales from the unshrunk lengths
between frames, so a garment can be tightened onto a body over a few frames.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import ClothInputError

#: A scale below this would collapse an edge to nothing (shrink factor 1 = zero length).
MIN_SCALE = 0.05


@dataclass
class Shrink:
    """Blender's Shrinking: ``shrink_min`` (Shrinking Factor), ``shrink_max`` (Max Shrinking, used with a
    group), ``weights`` (N,) the Shrinking Group's weights in [0, 1] or None."""

    shrink_min: float = 0.0
    shrink_max: float = 0.0
    weights: np.ndarray | None = None

    def validate(self, n_vertices: int) -> None:
        for name in ("shrink_min", "shrink_max"):
            value = getattr(self, name)
            if not (math.isfinite(value) and 1.0 - value >= MIN_SCALE):
                raise ClothInputError(
                    f"{name} must be finite and at most {1 - MIN_SCALE:g} (1 shrinks an edge to nothing), got {value}"
                )
        if self.weights is not None:
            w = np.asarray(self.weights, dtype=np.float64)
            if w.shape != (n_vertices,) or not np.isfinite(w).all() or w.min() < 0.0 or w.max() > 1.0:
                raise ClothInputError(f"shrinking group weights must be {n_vertices} values in [0, 1]")

    @property
    def is_identity(self) -> bool:
        return self.shrink_min == 0.0 and (self.weights is None or self.shrink_max == 0.0)

    def vertex_scale(self, n_vertices: int) -> np.ndarray:
        """k_i = 1 - shrink_min + (shrink_min - shrink_max) w_i (Blender's ``cloth_shrink_factor``)."""
        base = np.full(n_vertices, 1.0 - self.shrink_min)
        if self.weights is None:
            return base
        return base + (self.shrink_min - self.shrink_max) * np.asarray(self.weights, dtype=np.float64)

    def pair_scale(self, pairs: np.ndarray, n_vertices: int) -> np.ndarray:
        """sqrt(k_i k_j) of every vertex pair (m, 2)."""
        k = self.vertex_scale(n_vertices)
        return np.sqrt(k[pairs[:, 0]] * k[pairs[:, 1]])
