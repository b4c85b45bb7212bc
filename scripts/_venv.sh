# Sourced by the README commands: create .venv with Python 3.11 and install pinned requirements.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "Selvedge needs Python 3.11 (what Blender 4.2-5.0 ship)")'
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
REQ="$1"
STAMP=".venv/.installed-$(basename "$REQ")-$(cat requirements/*.txt | sha1sum | cut -c1-12)"
if [ ! -f "$STAMP" ]; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$REQ"
  touch "$STAMP"
fi
