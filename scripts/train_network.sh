#!/usr/bin/env bash
# Train the learned network from scratch (teacher data, training, ONNX export, checks, model card).
# Needs the training requirements (torch CPU, onnx); bounded time: 14 min training + data (~1 min) + checks.
source "$(dirname "$0")/_venv.sh" requirements/train.txt
exec .venv/bin/python -m models.training.train "$@"
