"""Errors the solver raises; the Blender side turns them into operator reports."""


class SelvedgeError(Exception):
    """Base class of every error the solver raises on purpose."""


class ClothInputError(SelvedgeError, ValueError):
    """The mesh, weights, targets or settings given to the solver are unusable as they are."""


class SimulationError(SelvedgeError, RuntimeError):
    """A frame produced a non-finite or exploding state; the frame was rolled back."""
