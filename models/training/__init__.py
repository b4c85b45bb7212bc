"""Dev-time training pipeline for the learned network (needs requirements/train.txt: torch, onnx).

Never imported by the runtime. ``python -m models.training.train`` (from the repository's parent
package, see scripts/train_network.sh) generates teacher data, trains, exports and validates.
"""
