# Sourced by the scripts: `source scripts/_venv.sh REQUIREMENTS [PYTHON_VERSION [VENV_FOLDER]]` creates
# (once) the venv for that Python, installs REQUIREMENTS into it when any requirements file changed,
# and sets VENV to its folder. The folder defaults by Python:
#   3.11 (default)  .venv     Blender 4.2-5.0's Python (bpy 5.0.1, NumPy 1.26)
#   3.13            .venv313  Blender 5.1+'s Python (bpy 5.3.0, NumPy 2.x)
# (scripts/check_blender_42.sh and _45.sh use .venv42 / .venv45, Python 3.11.)
# The interpreter is $PYTHON (for 3.11) / $PYTHON313 (for 3.13) if set, else pythonX.Y on the PATH,
# else pyenv's X.Y; it must be that exact Python version.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

selvedge_python() {  # print the path of a working Python $1 (e.g. 3.13), or fail with a message
  local want="$1" candidate
  local explicit="PYTHON"; [ "$want" = 3.11 ] || explicit="PYTHON${want//./}"
  local candidates=("${!explicit:-}")
  [ -n "${candidates[0]}" ] || candidates=(
    "$(command -v "python$want" || true)"
    "$(pyenv prefix "$want" 2>/dev/null | head -1)/bin/python$want"
    /root/.pyenv/versions/"$want".*/bin/python"$want" /usr/local/bin/python"$want" /usr/bin/python"$want")
  for candidate in "${candidates[@]}"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ] &&
       "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$want'.split('.'))))" 2>/dev/null; then
      echo "$candidate"
      return 0
    fi
  done
  echo "Selvedge: no Python $want found (set $explicit=/path/to/python$want); Blender 4.2-5.0 ship 3.11, 5.1+ 3.13" >&2
  return 2
}

selvedge_free_space() {  # fail with one clear line when the venv's disk cannot hold an install
  local need_mib="${SELVEDGE_VENV_MIN_FREE_MIB:-3500}" free_mib  # .venv with torch and bpy: ~2.4 GiB
  free_mib="$(df -Pm "$1" 2>/dev/null | awk 'NR == 2 {print $4}')"
  if [ -n "$free_mib" ] && [ "$free_mib" -lt "$need_mib" ]; then
    echo "Selvedge: only $free_mib MiB free where $1 lives; installing its packages needs about $need_mib MiB (free some disk, or set SELVEDGE_VENV_MIN_FREE_MIB)" >&2
    return 28
  fi
}

selvedge_venv() {  # selvedge_venv REQUIREMENTS [3.11|3.13 [VENV_FOLDER]]
  local req="$1" want="${2:-3.11}" python stamp
  case "$want" in
    3.11) VENV=.venv ;;
    3.13) VENV=.venv313 ;;
    *) echo "Selvedge: Python $want is not one of Blender's (3.11 for 4.2-5.0, 3.13 for 5.1+)" >&2; return 2 ;;
  esac
  VENV="${3:-$VENV}"
  if [ ! -x "$VENV/bin/python" ]; then
    python="$(selvedge_python "$want")"
    "$python" -m venv "$VENV"
  fi
  "$VENV/bin/python" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$want'.split('.'))))" ||
    { echo "Selvedge: $VENV is not Python $want; delete it and run again" >&2; return 2; }
  stamp="$VENV/.installed-$(basename "$req")-$(cat requirements/*.txt | sha1sum | cut -c1-12)"
  if [ ! -f "$stamp" ]; then
    selvedge_free_space "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    touch "$stamp"
  fi
}

selvedge_venv "$@"
