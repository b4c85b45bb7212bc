# Sourced by scripts/check_blender_42.sh and check_blender_45.sh (their headers say how to run them):
# `source scripts/_check_blender.sh LABEL REQUIREMENTS VENV [pytest arguments]`.
#
# Creates VENV (Python 3.11) from REQUIREMENTS through scripts/_venv.sh, then runs pytest with the
# options of scripts/test.sh on the given test files (default: every Blender-layer test, tests/blender,
# and the docs' Blender examples, the `blender`-marked tests of tests/docs/test_readme_examples.py)
# in-process, and leaves through module_exit.exit_process: the 4.x bpy modules crash (4.2) or hang
# (4.5) in their own C++ teardown at interpreter exit once classes were registered, after pytest
# has finished and reported (see module_exit.py). A per-file summary (passed failed skipped
# errors) is printed at the end; the exit status is pytest's.
set -euo pipefail
CHECK_LABEL="$1" CHECK_REQ="$2" CHECK_VENV="$3"
shift 3
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh" "$CHECK_REQ" 3.11 "$CHECK_VENV"
"$VENV/bin/python" -c 'import sys, bpy, numpy, numba, llvmlite; print("'"$CHECK_LABEL"': Blender", bpy.app.version_string, "| Python", sys.version.split()[0], "| numpy", numpy.__version__, "| numba", numba.__version__, "| llvmlite", llvmlite.__version__)'

if [ "$#" -gt 0 ]; then
  TESTS=("$@")
else  # the Blender layer, and the docs' Blender examples (one runs as a script that must end on 4.x)
  TESTS=(-m blender tests/blender tests/docs/test_readme_examples.py)
fi
REPORT="$(mktemp -t selvedge-check-XXXXXX.txt)"
set +e
"$VENV/bin/python" - -q -rA -p no:cacheprovider --import-mode=importlib --durations=10 "${TESTS[@]}" <<'PY' 2>&1 | tee "$REPORT"
import importlib.util, os, sys
import pytest
status = int(pytest.main(sys.argv[1:]))
spec = importlib.util.spec_from_file_location("selvedge_module_exit", os.path.join(os.getcwd(), "module_exit.py"))
module_exit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module_exit)
module_exit.exit_process(status)
PY
STATUS=${PIPESTATUS[0]}
set -e
echo
echo "== $CHECK_LABEL summary (per file: passed failed skipped errors) =="
awk '/^(PASSED|FAILED|SKIPPED|ERROR) /{f = ($2 ~ /^\[/) ? $3 : $2; sub(/::.*/, "", f); sub(/:.*/, "", f);
       n[f, $1]++; files[f] = 1}
     END{for (f in files) if (f ~ /\.py$/) printf "%-44s %4d %4d %4d %4d\n", f, n[f,"PASSED"], n[f,"FAILED"], n[f,"SKIPPED"], n[f,"ERROR"]}' \
  "$REPORT" | sort
grep -E '^(FAILED|ERROR) tests/' "$REPORT" || true
tail -n 1 "$REPORT"
rm -f "$REPORT"
echo "$CHECK_LABEL: pytest exit status $STATUS"
exit "$STATUS"
