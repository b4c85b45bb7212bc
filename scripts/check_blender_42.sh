#!/usr/bin/env bash
# Blender 4.2 LTS check: run the Blender-layer tests against the bpy 4.2 module in a separate venv.
#
#   scripts/check_blender_42.sh                 # newest bpy 4.2.x on PyPI, default test files
#   BPY42=4.2.23 scripts/check_blender_42.sh    # a given 4.2 release
#   scripts/check_blender_42.sh tests/blender/test_sidebar_panels.py -k panel   # other pytest arguments
#
# The venv is .venv42 (ignored by git), created with Python 3.11 (what Blender 4.2 ships) and
# holding bpy 4.2.x, numpy<2 (Blender 4.2 ships numpy 1.26) and the numba/llvmlite pins of
# requirements/solver.txt, plus pytest. The tests run with the same options as scripts/test.sh;
# a per-file summary (passed/failed/skipped/errors) is printed at the end and the exit status is
# pytest's.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VENV42:-.venv42}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else "bpy 4.2 needs Python 3.11")'
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

# Newest 4.2.x release of bpy on the index unless BPY42 names one.
if [ -z "${BPY42:-}" ]; then
  BPY42="$("${PIP[@]}" index versions bpy 2>/dev/null | sed -n 's/^Available versions: //p' | tr ',' '\n' \
           | tr -d ' ' | grep -E '^4\.2\.[0-9]+$' | sort -t. -k3,3n | tail -1 || true)"
  [ -n "$BPY42" ] || { echo "check_blender_42: no bpy 4.2.x found on the package index" >&2; exit 2; }
fi
pin() { sed -n "s/^$1==//p" requirements/solver.txt; }
NUMBA="$(pin numba)"; LLVMLITE="$(pin llvmlite)"
STAMP="$VENV/.installed-bpy$BPY42-numba$NUMBA-llvmlite$LLVMLITE"
if [ ! -f "$STAMP" ]; then
  echo "check_blender_42: installing bpy==$BPY42 numpy<2 numba==$NUMBA llvmlite==$LLVMLITE pytest into $VENV"
  "${PIP[@]}" install --quiet "bpy==$BPY42" "numpy<2" "numba==$NUMBA" "llvmlite==$LLVMLITE" "pytest==8.3.4"
  touch "$STAMP"
fi
"$VENV/bin/python" -c 'import bpy, numpy, numba; print("check_blender_42: Blender", bpy.app.version_string, "| Python", __import__("sys").version.split()[0], "| numpy", numpy.__version__, "| numba", numba.__version__)'

if [ "$#" -gt 0 ]; then
  TESTS=("$@")
else
  TESTS=(tests/blender/test_bake_operators.py tests/blender/test_scene_properties.py tests/blender/test_colliders_in_bakes.py tests/blender/test_sidebar_panels.py)
fi
REPORT="$(mktemp -t selvedge-bpy42-XXXXXX.txt)"
# The bpy 4.2 module segfaults when the interpreter exits after any class with a Python callback
# (an operator, a property update function) has been registered, even once unregistered (bpy 5.0
# does not): `python -c "import bpy; bpy.utils.register_class(SomeOperator)"` exits 139 (gdb: the
# C++ static destructor of the SpaceType registry calls bpy_class_free -> PyGILState_Ensure after
# Python is finalized). That crash comes after pytest has finished and reported, so pytest runs here in-process and the
# interpreter leaves with os._exit(pytest's status), skipping the teardown that crashes.
set +e
"$VENV/bin/python" - -q -rA -p no:cacheprovider --import-mode=importlib "${TESTS[@]}" <<'PY' 2>&1 | tee "$REPORT"
import os, sys
import pytest
status = int(pytest.main(sys.argv[1:]))
sys.stdout.flush(); sys.stderr.flush()
os._exit(status)
PY
STATUS=${PIPESTATUS[0]}
set -e
echo
echo "== Blender $BPY42 summary (per file: passed failed skipped errors) =="
awk '/^(PASSED|FAILED|SKIPPED|ERROR) /{f = ($2 ~ /^\[/) ? $3 : $2; sub(/::.*/, "", f); sub(/:.*/, "", f);
       n[f, $1]++; files[f] = 1}
     END{for (f in files) if (f ~ /\.py$/) printf "%-40s %4d %4d %4d %4d\n", f, n[f,"PASSED"], n[f,"FAILED"], n[f,"SKIPPED"], n[f,"ERROR"]}' \
  "$REPORT" | sort
grep -E '^(FAILED|ERROR) tests/' "$REPORT" || true
tail -n 1 "$REPORT"
rm -f "$REPORT"
echo "check_blender_42: pytest exit status $STATUS (Blender $BPY42)"
exit "$STATUS"
