"""Learned network runtime (onnxruntime only); training code lives apart. See the network issue."""
