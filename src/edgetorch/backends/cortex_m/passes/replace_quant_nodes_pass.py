"""``ReplaceQuantNodesPass``: int8/int16 per-tensor quantize/dequantize -> ``cortex_m::``."""

from __future__ import annotations

import torch
from torch.fx import GraphModule
from torch.fx.passes.infra.pass_base import PassResult

from ....errors import InvalidArgumentError
from ....exir.dialects._ops import ops as exir_ops
from ....exir.pass_base import ExportPass

qd, cm = exir_ops.edge.quantized_decomposed, exir_ops.edge.cortex_m
SWAP = {qd.quantize_per_tensor.default: cm.quantize_per_tensor.default,
        qd.dequantize_per_tensor.default: cm.dequantize_per_tensor.default}


def qualified(args: tuple) -> bool:
    dtype, lo, hi = args[5], args[3], args[4]
    if dtype not in (torch.int8, torch.int16):
        return False
    info = torch.iinfo(dtype)
    return lo >= info.min and hi <= info.max


# The ATen operators of a program not yet in the Edge dialect: the pass runs after to_edge.
ATEN_QDQ = (torch.ops.quantized_decomposed.quantize_per_tensor.default,
            torch.ops.quantized_decomposed.dequantize_per_tensor.default)


class ReplaceQuantNodesPass(ExportPass):
    def call(self, graph_module: GraphModule) -> PassResult:
        modified = False
        for node in graph_module.graph.nodes:
            if node.op != "call_function":
                continue
            if any(node.target is op for op in ATEN_QDQ):  # Edge operators compare equal
                raise InvalidArgumentError(
                    f"ReplaceQuantNodesPass found the ATen operator {node.target} (node "
                    f"{node.name}); run the pass after to_edge, on the Edge program")
            if node.target in SWAP and qualified(node.args):
                node.target = SWAP[node.target]
                modified = True
        if modified:
            graph_module = super().call(graph_module).graph_module
        return PassResult(graph_module, modified)
