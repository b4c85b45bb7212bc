"""Selvedge's XPBD cloth solver: NumPy + Numba, no Blender imports (runs anywhere Python does).

The public names are imported on first use (PEP 562), so ``solver.errors`` and ``solver.transforms``
(pure NumPy) can be imported without loading Numba: an operator's ``except`` clause names the
solver's error classes without compiling anything.
"""

import importlib

__version__ = "0.1.0"

#: public name -> the submodule defining it
_EXPORTS = {
    "Cloth": "cloth",
    "BENDING_MODELS": "settings",
    "SOLVE_MODES": "settings",
    "ClothOptions": "settings",
    "SolverSettings": "settings",
    "ConstraintStats": "diagnostics",
    "FrameDiagnostics": "diagnostics",
    "ClothInputError": "errors",
    "SelvedgeError": "errors",
    "SimulationError": "errors",
    "ContactHandler": "hooks",
    "PRESETS": "materials",
    "Material": "materials",
    "compliance_from_slider": "materials",
    "preset": "materials",
    "grid_mesh": "mesh",
    "triangulate": "mesh",
    "Aerodynamics": "aerodynamics",
    "ForceField": "forces",
    "Pressure": "volume",
    "Sewing": "sewing",
    "loose_edges": "sewing",
    "Shrink": "shrink",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS])
