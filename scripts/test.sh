#!/usr/bin/env bash
# The test command (CI runs exactly this). Each venv is set up with pinned versions on first use:
#   1. .venv    Python 3.11, bpy 5.0.1, NumPy 1.26.4 (Blender 4.2-5.0's stack): every test, tests/
#   2. .venv313 Python 3.13, bpy 5.3.0, NumPy 2.x   (Blender 5.1+'s stack): the Blender-layer and
#               package tests, tests/blender (the solver's tests do not depend on the stack beyond
#               NumPy/numba, which the Blender-layer bakes exercise)
#   3. scripts/typecheck.sh: pyright over operators/, panels/, __init__.py against fake-bpy-module
#   4. lint: `ruff format --check` and `ruff check` (pyproject.toml's rule set) over the repository
# Arguments go to both pytest runs (`./scripts/test.sh -k shape_key`, `-x`, `-m "not slow"`).
# SELVEDGE_STACKS="3.11" (or "3.13", "types", any space-separated subset) runs only those parts.
# Every part runs even when an earlier one fails; the exit status is 0 only if all passed.
# On a machine with two or more cores the 3.13 part runs alongside the others (its output is
# printed when it ends; about a third off the wall time on two cores); SELVEDGE_PARALLEL=0 runs
# the parts one after the other.
set -uo pipefail
cd "$(dirname "$0")/.."
STACKS="${SELVEDGE_STACKS:-3.11 3.13 types lint}"
PYTEST=(-m pytest -q -p no:cacheprovider --import-mode=importlib --durations=15)
STATUS=0
SUMMARY=()
run_part() {  # run_part LABEL COMMAND...
  local label="$1" start=$SECONDS rc
  shift
  echo "== $label =="
  "$@"
  rc=$?
  SUMMARY+=("$label: exit $rc, $((SECONDS - start)) s")
  [ "$rc" -eq 0 ] || STATUS=1
}
pytest_on() {  # pytest_on REQUIREMENTS PYTHON TESTS [args]
  local req="$1" python="$2" tests="$3"
  shift 3
  ( source scripts/_venv.sh "$req" "$python" && exec "$VENV/bin/python" "${PYTEST[@]}" "$tests" "$@" )
}
BACKGROUND=()
run_part_alongside() {  # run_part_alongside LABEL COMMAND...: run_part in the background, output kept
  local label="$1" log
  shift
  log="$(mktemp)"
  ( start=$(date +%s); "$@" >"$log" 2>&1; echo "$? $(($(date +%s) - start))" >"$log.rc" ) &
  BACKGROUND+=("$!|$label|$log")
}
finish_alongside() {  # wait for the background parts, print their output, add them to the summary
  local entry pid label log rc secs
  for entry in "${BACKGROUND[@]}"; do
    IFS='|' read -r pid label log <<<"$entry"
    wait "$pid"
    echo "== $label (ran alongside the others) =="
    cat "$log"
    read -r rc secs <"$log.rc" || { rc=1; secs=0; }
    SUMMARY+=("$label: exit $rc, $secs s (alongside)")
    [ "$rc" -eq 0 ] || STATUS=1
    rm -f "$log" "$log.rc"
  done
}
trap 'jobs -p | xargs -r kill 2>/dev/null' INT TERM
PARALLEL="${SELVEDGE_PARALLEL:-1}"
[ "$(nproc 2>/dev/null || echo 1)" -ge 2 ] || PARALLEL=0
lint() {  # ruff from .venv (requirements/test.txt pins it)
  ( source scripts/_venv.sh requirements/test.txt 3.11 && "$VENV/bin/ruff" format --check . && "$VENV/bin/ruff" check . )
}
for part in $STACKS; do  # the part that runs alongside starts first
  [ "$part" = 3.13 ] && [ "$PARALLEL" = 1 ] && run_part_alongside "Python 3.13 / bpy 5.3.0: tests/blender" \
    pytest_on requirements/blender313.txt 3.13 tests/blender "$@"
done
for part in $STACKS; do
  case "$part" in
    3.11) run_part "Python 3.11 / bpy 5.0.1: tests/" pytest_on requirements/test.txt 3.11 tests "$@" ;;
    3.13) [ "$PARALLEL" = 1 ] || run_part "Python 3.13 / bpy 5.3.0: tests/blender" \
      pytest_on requirements/blender313.txt 3.13 tests/blender "$@" ;;
    types) run_part "pyright (fake-bpy-module)" ./scripts/typecheck.sh ;;
    lint) run_part "ruff (format and lint)" lint ;;
    *) echo "test.sh: unknown part '$part' in SELVEDGE_STACKS (3.11, 3.13, types, lint)" >&2; exit 2 ;;
  esac
done
finish_alongside
echo
printf '%s\n' "${SUMMARY[@]}"
exit "$STATUS"
