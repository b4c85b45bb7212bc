#!/usr/bin/env bash
# Blender 4.2 LTS check: tests/blender and the docs' Blender examples against the pip bpy 4.2 module.
#
#   scripts/check_blender_42.sh                                        # tests/blender and the docs' Blender examples
#   scripts/check_blender_42.sh tests/blender/test_sidebar_panels.py -k panel   # other pytest arguments
#
# The venv is .venv42 (ignored by git), Python 3.11 (what Blender 4.2 ships), from
# requirements/blender42.txt: bpy 4.2.x (the pin there says which), NumPy 1.26.4 and the
# numba/llvmlite pins of requirements/solver.txt, pytest, onnxruntime. The bpy 4.2 module segfaults
# at interpreter exit once a class was registered; the run ends through module_exit.exit_process
# (see scripts/_check_blender.sh). Exit status: pytest's.
source "$(dirname "$0")/_check_blender.sh" "Blender 4.2 check" requirements/blender42.txt .venv42 "$@"
