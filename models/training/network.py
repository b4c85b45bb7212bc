"""Encode-process-decode graph network (MeshGraphNets style, 004) in PyTorch, and its ONNX export.

Message passing sums incoming edge latents with a Gather over a padded per-node incidence table
followed by a sum over the slot axis (ONNX Gather + ReduceSum): deterministic and fast in
onnxruntime on CPU. No index_add_/scatter (ScatterND(add) is non-deterministic and wrong with
2 intra-op threads in onnxruntime 1.32; see the network issue).
"""
from __future__ import annotations

import json

import numpy as np
import torch
from torch import nn

from ..graph import EDGE_FEATURES, N_EDGE, N_NODE, NODE_FEATURES
from ..runtime import MODEL_FORMAT, N_OUT, OUTPUT_NAME

INPUT_NAMES = ["node_features", "edge_features", "senders", "receivers", "incidence", "free_mask"]


def mlp(n_in: int, width: int, n_out: int, layer_norm: bool = True) -> nn.Sequential:
    layers = [nn.Linear(n_in, width), nn.ReLU(), nn.Linear(width, n_out)]
    if layer_norm:
        layers.append(nn.LayerNorm(n_out))
    return nn.Sequential(*layers)


class GraphNet(nn.Module):
    """Inputs are raw physical features; normalisation statistics are buffers (ONNX constants)."""

    def __init__(self, latent: int = 16, steps: int = 2, accel_bound: float = 50.0):
        super().__init__()
        self.latent, self.steps = latent, steps
        self.accel_bound = float(accel_bound)
        self.encode_node = mlp(N_NODE, latent, latent)
        self.encode_edge = mlp(N_EDGE, latent, latent)
        self.edge_blocks = nn.ModuleList([mlp(3 * latent, latent, latent) for _ in range(steps)])
        self.node_blocks = nn.ModuleList([mlp(2 * latent, latent, latent) for _ in range(steps)])
        self.decode = mlp(latent, latent, N_OUT, layer_norm=False)
        for name, size in (("node_mean", N_NODE), ("edge_mean", N_EDGE), ("out_mean", N_OUT)):
            self.register_buffer(name, torch.zeros(size))
        for name, size in (("node_std", N_NODE), ("edge_std", N_EDGE), ("out_std", N_OUT)):
            self.register_buffer(name, torch.ones(size))

    def set_stats(self, node_mean, node_std, edge_mean, edge_std, out_mean, out_std) -> None:
        for name, value in (("node_mean", node_mean), ("node_std", node_std), ("edge_mean", edge_mean),
                            ("edge_std", edge_std), ("out_mean", out_mean), ("out_std", out_std)):
            getattr(self, name).copy_(torch.as_tensor(np.asarray(value), dtype=torch.float32))

    def forward_normalised(self, node_features, edge_features, senders, receivers, incidence):
        """The network's output in normalised units (the training loss is taken here)."""
        h = self.encode_node((node_features - self.node_mean) / self.node_std)
        g = self.encode_edge((edge_features - self.edge_mean) / self.edge_std)
        pad = torch.zeros_like(g[:1])
        for edge_block, node_block in zip(self.edge_blocks, self.node_blocks):
            g = g + edge_block(torch.cat([g, h.index_select(0, receivers), h.index_select(0, senders)], dim=1))
            padded = torch.cat([g, pad], dim=0)
            gathered = padded.index_select(0, incidence.reshape(-1)).reshape(incidence.shape[0], incidence.shape[1], -1)
            agg = gathered.sum(dim=1)  # Gather + ReduceSum
            h = h + node_block(torch.cat([h, agg], dim=1))
        return self.decode(h)

    def denormalise(self, out_normalised, free_mask):
        a = out_normalised * self.out_std + self.out_mean
        return self.accel_bound * torch.tanh(a / self.accel_bound) * free_mask

    def forward(self, node_features, edge_features, senders, receivers, incidence, free_mask):
        out = self.forward_normalised(node_features, edge_features, senders, receivers, incidence)
        return self.denormalise(out, free_mask)


STAT_NAMES = ("node_mean", "node_std", "edge_mean", "edge_std", "out_mean", "out_std")


def stats_sha256(arrays) -> str:
    """Hash of the normalisation statistics (float32 bytes in STAT_NAMES order), as stamped in the metadata."""
    import hashlib
    return hashlib.sha256(b"".join(np.asarray(a, dtype=np.float32).tobytes() for a in arrays)).hexdigest()


def onnx_stats_sha256(proto) -> str:
    """The same hash recomputed from the statistics constants inside an ONNX model."""
    from onnx import numpy_helper
    init = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    return stats_sha256([init[name] for name in STAT_NAMES])


def torch_feed(feed: dict) -> tuple:
    return tuple(torch.as_tensor(feed[name]) for name in INPUT_NAMES)


def export_onnx(model: GraphNet, example_feed: dict, path, metadata: dict) -> None:
    """Export with opset 18 and dynamic N, E, K; stamp the metadata the runtime checks."""
    import onnx

    model = model.eval()
    args = torch_feed(example_feed)
    n, e, k = (torch.export.Dim("N", min=2), torch.export.Dim("E", min=2), torch.export.Dim("K", min=1))
    dynamic = {"node_features": {0: n}, "edge_features": {0: e}, "senders": {0: e}, "receivers": {0: e},
               "incidence": {0: n, 1: k}, "free_mask": {0: n}}
    program = torch.onnx.export(model, args, dynamo=True, opset_version=18, input_names=INPUT_NAMES,
                                output_names=[OUTPUT_NAME], dynamic_shapes=dynamic, optimize=True,
                                external_data=False)
    proto = program.model_proto
    meta = {"format": MODEL_FORMAT, "node_features": ",".join(NODE_FEATURES), "edge_features": ",".join(EDGE_FEATURES),
            "accel_bound_m_s2": repr(model.accel_bound), "latent": str(model.latent), "steps": str(model.steps)}
    meta.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()})
    del proto.metadata_props[:]
    for key, value in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))
