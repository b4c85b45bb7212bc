import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "devtools"))
# Shared helpers of the tests (blender_scenes.py): importable as top-level modules.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from selvedge_import import import_selvedge  # noqa: E402

import_selvedge()
