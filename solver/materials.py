"""Fabric materials: presets, a 0-1 stiffness slider on a log scale, and physical entry.

Everything is stored as XPBD compliance (alpha, the inverse of stiffness) in SI units, which is
what the solver consumes (001 sec. 3.4):

* stretch / shear compliance, m/N. A woven sheet's per-edge stiffness is about E*t on a
  regular mesh whatever the edge length, so ``alpha = 1 / (E t)`` (001 sec. 3.4).
* bending compliance, 1/(N m): the inverse of the plate bending stiffness
  ``D = E t^3 / (12 (1 - nu^2))``. The solver turns it into per-hinge compliances scaled by
  edge length and area, so the drape does not change with mesh resolution (001 sec. 5.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from .errors import ClothInputError

#: Slider end points (s = 0 soft, s = 1 stiff), 001 sec. 3.4: alpha = 10^(-8 + 6 (1 - s)).
STRETCH_COMPLIANCE_RANGE = (1e-2, 1e-8)  # m/N
BEND_COMPLIANCE_RANGE = (1e7, 1e1)  # 1/(N m)


def compliance_from_slider(stiffness_01: float, compliance_range: tuple[float, float]) -> float:
    """Map a 0-1 artist slider to a compliance, logarithmically so every part of it matters."""
    if not 0.0 <= stiffness_01 <= 1.0:
        raise ClothInputError(f"stiffness slider must be within 0..1, got {stiffness_01}")
    soft, stiff = compliance_range
    return 10.0 ** (math.log10(soft) + stiffness_01 * (math.log10(stiff) - math.log10(soft)))


def slider_from_compliance(compliance: float, compliance_range: tuple[float, float]) -> float:
    """Inverse of :func:`compliance_from_slider`, clamped to 0..1 (for showing presets on a slider)."""
    soft, stiff = compliance_range
    s = (math.log10(max(compliance, 1e-30)) - math.log10(soft)) / (math.log10(stiff) - math.log10(soft))
    return min(1.0, max(0.0, s))


def stretch_compliance_from_youngs(youngs_modulus_pa: float, thickness_m: float) -> float:
    """Membrane compliance per edge, m/N: ``1 / (E t)``."""
    if youngs_modulus_pa <= 0 or thickness_m <= 0:
        raise ClothInputError("Young's modulus and thickness must be positive")
    return 1.0 / (youngs_modulus_pa * thickness_m)


def bend_compliance_from_youngs(youngs_modulus_pa: float, thickness_m: float, poisson_ratio: float = 0.3) -> float:
    """Plate bending compliance, 1/(N m): ``12 (1 - nu^2) / (E t^3)``."""
    if youngs_modulus_pa <= 0 or thickness_m <= 0 or not -1.0 < poisson_ratio < 0.5:
        raise ClothInputError("need E > 0, t > 0 and -1 < Poisson ratio < 0.5")
    return 12.0 * (1.0 - poisson_ratio**2) / (youngs_modulus_pa * thickness_m**3)


@dataclass(frozen=True)
class Material:
    """How a fabric feels. Compliances are per unit (see module docstring); damping in seconds."""

    name: str = "custom"
    density_kg_m2: float = 0.15
    thickness_m: float = 0.002
    stretch_compliance_warp: float = 2e-4
    stretch_compliance_weft: float = 2.5e-4
    stretch_compliance_bias: float = 1e-3
    shear_compliance: float = 1e-3
    bend_compliance: float = 2e5
    #: XPBD constraint damping beta (s), along each constraint's own direction (XPBD eq. 26).
    stretch_damping_s: float = 1e-4
    bend_damping_s: float = 1e-3
    #: Linear air drag rate (1/s): velocity relative to the air decays as exp(-rate * t).
    air_drag_per_s: float = 0.2
    friction_static: float = 0.6
    friction_kinetic: float = 0.4
    #: Largest warp strain (0.001 = 0.1 %) any coarse span of the cloth may reach (Provot 1995; a strain-limit
    #: inequality on the levels of :mod:`.multilevel`); below it the compliances above decide.
    stretch_limit: float = 0.001

    def validate(self) -> None:
        for key in ("density_kg_m2", "thickness_m"):
            if not getattr(self, key) > 0:
                raise ClothInputError(f"material {key} must be positive, got {getattr(self, key)}")
        for key in (
            "stretch_compliance_warp",
            "stretch_compliance_weft",
            "stretch_compliance_bias",
            "shear_compliance",
            "bend_compliance",
            "stretch_damping_s",
            "bend_damping_s",
            "air_drag_per_s",
            "friction_static",
            "friction_kinetic",
            "stretch_limit",
        ):
            value = getattr(self, key)
            if not (value >= 0 and math.isfinite(value)):
                raise ClothInputError(f"material {key} must be finite and >= 0, got {value}")

    def with_stiffness(self, stretch_01: float | None = None, bend_01: float | None = None) -> Material:
        """Return a copy whose stretch (all three classes, ratios kept) and/or bending come from sliders."""
        changes: dict = {}
        if stretch_01 is not None:
            target = compliance_from_slider(stretch_01, STRETCH_COMPLIANCE_RANGE)
            scale = target / self.stretch_compliance_warp
            changes.update(
                stretch_compliance_warp=target,
                stretch_compliance_weft=self.stretch_compliance_weft * scale,
                stretch_compliance_bias=self.stretch_compliance_bias * scale,
                shear_compliance=self.shear_compliance * scale,
            )
        if bend_01 is not None:
            changes["bend_compliance"] = compliance_from_slider(bend_01, BEND_COMPLIANCE_RANGE)
        return replace(self, **changes)

    @classmethod
    def from_youngs(
        cls,
        youngs_modulus_pa: float,
        thickness_m: float,
        density_kg_m3: float,
        poisson_ratio: float = 0.3,
        name: str = "physical",
    ) -> Material:
        """An isotropic sheet from Young's modulus (Pa), thickness (m) and volume density (kg/m^3)."""
        stretch = stretch_compliance_from_youngs(youngs_modulus_pa, thickness_m)
        shear_modulus_ratio = 2.0 * (1.0 + poisson_ratio)  # G = E / (2 (1 + nu))
        return cls(
            name=name,
            density_kg_m2=density_kg_m3 * thickness_m,
            thickness_m=thickness_m,
            stretch_compliance_warp=stretch,
            stretch_compliance_weft=stretch,
            stretch_compliance_bias=stretch,
            shear_compliance=stretch * shear_modulus_ratio,
            bend_compliance=bend_compliance_from_youngs(youngs_modulus_pa, thickness_m, poisson_ratio),
        )


def _fabric(
    name,
    density,
    warp_n_m,
    weft_n_m,
    bias_n_m,
    bend_n_m,
    thickness,
    drag,
    mu_s,
    mu_k,
    damping=1e-4,
    stretch_limit=0.001,
):
    return Material(
        stretch_limit=stretch_limit,
        name=name,
        density_kg_m2=density,
        thickness_m=thickness,
        stretch_compliance_warp=1.0 / warp_n_m,
        stretch_compliance_weft=1.0 / weft_n_m,
        stretch_compliance_bias=1.0 / bias_n_m,
        shear_compliance=1.0 / bias_n_m,
        bend_compliance=1.0 / bend_n_m,
        stretch_damping_s=damping,
        bend_damping_s=10 * damping,
        air_drag_per_s=drag,
        friction_static=mu_s,
        friction_kinetic=mu_k,
    )


#: Presets: areal density kg/m^2, membrane stiffness E*t per grain (N/m), bending stiffness (N m), and the
#: warp stretch limit (weft and bias scale with their compliance, see ``Cloth._link_limits``): woven fabrics
#: 0.1 % (cotton at 5000 N/m reaches it at 5 N/m, over three times the 1.5 N/m its own weight puts into
#: a 1 m drop), leather 0.3 %, jersey knit 2 % and rubber 5 % (their own weight strains them 0.3-1 %).
#: Orders of magnitude follow measured fabric data (Kawabata-style tests as used by ARCSim):
#: woven fabrics are far stiffer along warp/weft than on the bias; knits stretch most along the weft.
PRESETS: dict[str, Material] = {
    m.name: m
    for m in (
        _fabric("cotton", 0.15, 5.0e3, 4.0e3, 8.0e2, 5.0e-6, 0.0015, 0.3, 0.6, 0.45),
        _fabric("silk", 0.06, 2.0e3, 1.8e3, 2.5e2, 5.0e-7, 0.0005, 0.8, 0.35, 0.25),
        _fabric("denim", 0.40, 2.0e4, 1.5e4, 2.0e3, 5.0e-5, 0.003, 0.1, 0.7, 0.55),
        _fabric(
            "leather", 0.90, 5.0e4, 5.0e4, 2.5e4, 5.0e-4, 0.0015, 0.05, 0.8, 0.6, damping=3e-4, stretch_limit=0.003
        ),
        _fabric("jersey_knit", 0.20, 6.0e2, 2.0e2, 1.5e2, 2.0e-6, 0.002, 0.3, 0.6, 0.5, stretch_limit=0.02),
        _fabric("rubber", 1.00, 2.0e3, 2.0e3, 2.0e3, 1.7e-4, 0.001, 0.05, 0.9, 0.8, damping=5e-5, stretch_limit=0.05),
    )
}


def preset(name: str) -> Material:
    """Look a preset up by name (``cotton``, ``silk``, ``denim``, ``leather``, ``jersey_knit``, ``rubber``)."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ClothInputError(f"unknown material preset {name!r}; choose one of {sorted(PRESETS)}") from None
