#!/usr/bin/env bash
# Headless demo bake (sets up .venv with pinned versions on first use): writes out/demo/cloth.pc2
# and out/demo/cloth.json and prints a summary. Options: --frames N --resolution N --out DIR.
source "$(dirname "$0")/_venv.sh" requirements/solver.txt
exec .venv/bin/python scripts/demo_bake.py "$@"
