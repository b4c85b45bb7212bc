#!/usr/bin/env bash
# The main job, headless (sets up .venv with pinned versions on first use): builds a rigged body
# dressed in two cloth layers pinned at their necklines (a tube-like shirt and a cape over it),
# bakes them with the Selvedge operators, saves out/demo_blender/demo.blend with the Mesh Cache
# modifiers, writes the PC2s + JSON sidecars, renders preview.png and preview_back.png with Cycles
# on the CPU and prints a summary.
# Options: --frames N --resolution N --substeps N --layers 1|2 --out DIR.
source "$(dirname "$0")/_venv.sh" requirements/demo.txt
exec .venv/bin/python scripts/demo_blender.py "$@"
