"""Encode-process-decode graph network (MeshGraphNets style, 004) in PyTorch, and its ONNX export.

World edges (collider surface -> cloth vertex, models/graph.py) have their own encoder and
per-step update MLP (edge latent + receiver latent); their messages are summed onto the
receiving vertex the same way and fed to the node update next to the mesh messages.

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

from ..graph import EDGE_FEATURES, N_EDGE, N_NODE, N_WORLD, NODE_FEATURES, WORLD_EDGE_FEATURES
from ..runtime import MODEL_FORMAT, N_OUT, OUTPUT_NAME

INPUT_NAMES = [
    "node_features",
    "edge_features",
    "senders",
    "receivers",
    "incidence",
    "free_mask",
    "world_edge_features",
    "world_receivers",
    "world_incidence",
]


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
        self.encode_world = mlp(N_WORLD, latent, latent)  # separate encoder for collider -> vertex edges
        self.edge_blocks = nn.ModuleList([mlp(3 * latent, latent, latent) for _ in range(steps)])
        self.world_blocks = nn.ModuleList([mlp(2 * latent, latent, latent) for _ in range(steps)])
        self.node_blocks = nn.ModuleList([mlp(3 * latent, latent, latent) for _ in range(steps)])
        self.decode = mlp(latent, latent, N_OUT, layer_norm=False)
        for name, size in (("node_mean", N_NODE), ("edge_mean", N_EDGE), ("world_mean", N_WORLD), ("out_mean", N_OUT)):
            self.register_buffer(name, torch.zeros(size))
        for name, size in (("node_std", N_NODE), ("edge_std", N_EDGE), ("world_std", N_WORLD), ("out_std", N_OUT)):
            self.register_buffer(name, torch.ones(size))

    def set_stats(
        self, node_mean, node_std, edge_mean, edge_std, out_mean, out_std, world_mean=None, world_std=None
    ) -> None:
        values = [
            ("node_mean", node_mean),
            ("node_std", node_std),
            ("edge_mean", edge_mean),
            ("edge_std", edge_std),
            ("out_mean", out_mean),
            ("out_std", out_std),
        ]
        if world_mean is not None:
            values += [("world_mean", world_mean), ("world_std", world_std)]
        for name, value in values:
            getattr(self, name).copy_(torch.as_tensor(np.asarray(value), dtype=torch.float32))

    def forward_normalised(
        self,
        node_features,
        edge_features,
        senders,
        receivers,
        incidence,
        world_edge_features,
        world_receivers,
        world_incidence,
    ):
        """The network's output in normalised units (the training loss is taken here)."""
        h = self.encode_node((node_features - self.node_mean) / self.node_std)
        g = self.encode_edge((edge_features - self.edge_mean) / self.edge_std)
        gw = self.encode_world((world_edge_features - self.world_mean) / self.world_std)
        pad = torch.zeros((1, self.latent), dtype=g.dtype, device=g.device)
        for edge_block, world_block, node_block in zip(self.edge_blocks, self.world_blocks, self.node_blocks):
            g = g + edge_block(torch.cat([g, h.index_select(0, receivers), h.index_select(0, senders)], dim=1))
            gw = gw + world_block(torch.cat([gw, h.index_select(0, world_receivers)], dim=1))
            agg = self._sum_incoming(g, pad, incidence)  # Gather + ReduceSum
            agg_world = self._sum_incoming(gw, pad, world_incidence)
            h = h + node_block(torch.cat([h, agg, agg_world], dim=1))
        return self.decode(h)

    @staticmethod
    def _sum_incoming(values, pad, table):
        padded = torch.cat([values, pad], dim=0)
        return padded.index_select(0, table.reshape(-1)).reshape(table.shape[0], table.shape[1], -1).sum(dim=1)

    def denormalise(self, out_normalised, free_mask):
        a = out_normalised * self.out_std + self.out_mean
        return self.accel_bound * torch.tanh(a / self.accel_bound) * free_mask

    def forward(
        self,
        node_features,
        edge_features,
        senders,
        receivers,
        incidence,
        free_mask,
        world_edge_features,
        world_receivers,
        world_incidence,
    ):
        out = self.forward_normalised(
            node_features,
            edge_features,
            senders,
            receivers,
            incidence,
            world_edge_features,
            world_receivers,
            world_incidence,
        )
        return self.denormalise(out, free_mask)


STAT_NAMES = ("node_mean", "node_std", "edge_mean", "edge_std", "out_mean", "out_std", "world_mean", "world_std")


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
    # torch.export specialises dimensions whose example size is 0 or 1: trace with a synthetic world-edge
    # part (3 edges, 2 on node 0, so W = 3 and KW = 2); the values only drive the trace
    from ..graph import incidence_table

    example_feed = dict(example_feed)
    w_rcv = np.array([0, 0, 1], dtype=np.int64)
    example_feed["world_receivers"] = w_rcv
    example_feed["world_edge_features"] = np.linspace(-1.0, 1.0, 3 * N_WORLD, dtype=np.float32).reshape(3, N_WORLD)
    example_feed["world_incidence"] = incidence_table(w_rcv, example_feed["node_features"].shape[0])
    args = torch_feed(example_feed)
    n, e, k = (torch.export.Dim("N", min=2), torch.export.Dim("E", min=2), torch.export.Dim("K", min=1))
    w, kw = torch.export.Dim("W", min=0), torch.export.Dim("KW", min=1)
    dynamic = {
        "node_features": {0: n},
        "edge_features": {0: e},
        "senders": {0: e},
        "receivers": {0: e},
        "incidence": {0: n, 1: k},
        "free_mask": {0: n},
        "world_edge_features": {0: w},
        "world_receivers": {0: w},
        "world_incidence": {0: n, 1: kw},
    }
    program = torch.onnx.export(
        model,
        args,
        dynamo=True,
        opset_version=18,
        input_names=INPUT_NAMES,
        output_names=[OUTPUT_NAME],
        dynamic_shapes=dynamic,
        optimize=True,
        external_data=False,
    )
    proto = program.model_proto
    meta = {
        "format": MODEL_FORMAT,
        "node_features": ",".join(NODE_FEATURES),
        "edge_features": ",".join(EDGE_FEATURES),
        "world_edge_features": ",".join(WORLD_EDGE_FEATURES),
        "accel_bound_m_s2": repr(model.accel_bound),
        "latent": str(model.latent),
        "steps": str(model.steps),
    }
    meta.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in metadata.items()})
    del proto.metadata_props[:]
    for key, value in meta.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(proto)
    onnx.save(proto, str(path))
