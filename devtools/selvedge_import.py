"""Import the repository as the package ``selvedge`` whatever its folder is called.

The repository root is the Blender extension folder and uses relative imports only, so it
must be loaded as a package; a clone named ``selvedge-main`` is not a valid module name.
"""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def import_selvedge(name: str = "selvedge"):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "__init__.py", submodule_search_locations=[str(ROOT)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
