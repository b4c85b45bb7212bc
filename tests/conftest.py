import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "devtools"))
# Shared helpers of the tests (blender_scenes.py): importable as top-level modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from selvedge_import import import_selvedge

import_selvedge()


def pytest_collection_modifyitems(config, items):
    """Markers by room: every test under tests/blender/ needs the real bpy module (``-m "not blender"``
    runs the Blender-free rest); tests that build or run Blender-wide machinery carry ``slow`` by hand."""
    import pytest

    for item in items:
        if "blender" in Path(str(item.fspath)).parts[-2:-1]:
            item.add_marker(pytest.mark.blender)
