import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "devtools"))
from selvedge_import import import_selvedge  # noqa: E402

import_selvedge()
