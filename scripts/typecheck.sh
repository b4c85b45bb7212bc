#!/usr/bin/env bash
# Type check: pyright over operators/, panels/ and __init__.py against fake-bpy-module's stubs of the
# Blender 5.0 API (sets up .venvtypes from requirements/typecheck.txt on first use). The settings are
# pyproject.toml's [tool.pyright]. Selvedge's own registered properties (obj.selvedge, scene.selvedge)
# are declared on a copy of the stubs in .typings/ by scripts/typecheck_stubs.py, typed by the
# PropertyGroup classes of operators/properties.py and operators/scene_properties.py.
#
#   scripts/typecheck.sh                  # the check CI runs (scripts/test.sh): see the ratchet below
#   scripts/typecheck.sh operators/bake   # pyright's own report on some files (exit status: pyright's)
#
# operators/, panels/ and __init__.py have no errors and must keep none (MAX_OPERATOR_ERRORS=0).
MAX_OPERATOR_ERRORS=0
source "$(dirname "$0")/_venv.sh" requirements/typecheck.txt 3.11 .venvtypes
"$VENV/bin/python" scripts/typecheck_stubs.py
export PYRIGHT_PYTHON_FORCE_VERSION="$(sed -n 's/^pyright==//p' requirements/typecheck.txt)"
if [ "$#" -gt 0 ]; then
  exec "$VENV/bin/pyright" --pythonpath "$VENV/bin/python" "$@"
fi
REPORT="$(mktemp -t selvedge-pyright-XXXXXX.json)"
"$VENV/bin/pyright" --pythonpath "$VENV/bin/python" --outputjson > "$REPORT" || true  # its status: errors or not
set +e
"$VENV/bin/python" - "$REPORT" "$MAX_OPERATOR_ERRORS" "$ROOT" <<'PY'
import collections, json, os, sys
report, limit, root = json.load(open(sys.argv[1])), int(sys.argv[2]), sys.argv[3]
errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
by_area = collections.Counter(os.path.relpath(d["file"], root).split(os.sep)[0] for d in errors)
for d in errors:
    if not os.path.relpath(d["file"], root).startswith("operators"):
        print(f"{os.path.relpath(d['file'], root)}:{d['range']['start']['line'] + 1}: {d['message']}")
operators = by_area.pop("operators", 0)
print(f"typecheck: {operators} error(s) in operators/ (at most {limit}), {sum(by_area.values())} elsewhere (none allowed)")
sys.exit(0 if operators <= limit and not by_area else 1)
PY
STATUS=$?
rm -f "$REPORT"
exit "$STATUS"
