"""Selvedge's XPBD cloth solver: NumPy + Numba, no Blender imports (runs anywhere Python does)."""
from .cloth import Cloth
from .settings import BENDING_MODELS, SOLVE_MODES, ClothOptions, SolverSettings
from .diagnostics import ConstraintStats, FrameDiagnostics
from .errors import ClothInputError, SelvedgeError, SimulationError
from .hooks import ContactHandler
from .materials import PRESETS, Material, compliance_from_slider, preset
from .mesh import grid_mesh, triangulate
from .aerodynamics import Aerodynamics
from .forces import ForceField
from .sewing import Sewing, loose_edges
from .shrink import Shrink
from .volume import Pressure

__version__ = "0.1.0"

__all__ = [
    "BENDING_MODELS", "SOLVE_MODES", "Cloth", "ClothOptions", "SolverSettings", "ConstraintStats",
    "FrameDiagnostics", "ClothInputError", "SelvedgeError", "SimulationError", "ContactHandler", "PRESETS",
    "Material", "compliance_from_slider", "preset", "grid_mesh", "triangulate", "__version__",
    "Aerodynamics", "ForceField", "Pressure", "Sewing", "Shrink", "loose_edges",
]
