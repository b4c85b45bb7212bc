#!/usr/bin/env bash
# Run the whole test suite (sets up .venv with pinned versions on first use).
source "$(dirname "$0")/_venv.sh" requirements/test.txt
exec .venv/bin/python -m pytest -q -p no:cacheprovider --import-mode=importlib --durations=15 tests "$@"
