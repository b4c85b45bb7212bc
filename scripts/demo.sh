#!/usr/bin/env bash
# The main job, headless (sets up .venv with pinned versions on first use): builds a rigged body
# with a sheet pinned on it, bakes it with the Selvedge operators, saves out/demo_blender/demo.blend
# with the Mesh Cache modifier, writes the PC2 + JSON sidecar, renders preview.png with Cycles on
# the CPU and prints a summary. Options: --frames N --resolution N --substeps N --out DIR.
source "$(dirname "$0")/_venv.sh" requirements/demo.txt
exec .venv/bin/python scripts/demo_blender.py "$@"
