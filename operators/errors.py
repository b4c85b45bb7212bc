"""The errors an operator reports to the user, defined once (imports neither bpy nor Numba).

Everything Selvedge raises on purpose derives from :class:`~..solver.errors.SelvedgeError`
(the solver's :class:`ClothInputError`, :class:`SimulationError`, the PC2 reader's ``CacheError``,
and the Blender side's :class:`BakeError`); with :class:`OSError` (a disk or a folder that refuses
a write) these are :data:`EXPECTED_ERRORS`, the only exceptions an operator turns into a report.
Anything else (a ``ValueError`` or ``TypeError`` from a bug) propagates with its traceback.
"""

from ..solver.errors import SelvedgeError


class BakeError(SelvedgeError):
    """The scene cannot be baked as it is; the message says what to change."""


class SceneSettingsError(BakeError, ValueError):
    """A scene or object setting is out of its valid range (a reversed frame range, ...)."""


#: What an operator's ``except`` catches and reports; no bare ``ValueError``: programming errors are not
#: user reports.
EXPECTED_ERRORS = (SelvedgeError, OSError)


def failure_message(prefix: str, error: BaseException) -> str:
    """One report line: ``"<prefix>: <what>"``, naming the file for an :class:`OSError`."""
    if isinstance(error, OSError):
        return f"{prefix}: {error.strerror or error} ({error.filename or 'file'})"
    return f"{prefix}: {error}"
