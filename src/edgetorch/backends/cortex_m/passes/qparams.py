"""``FoldAndAnnotateQParamsPass``: quantize/dequantize folded into the ops they surround.

After PT2E every quantized op sits between dequantize nodes (its inputs) and quantize nodes
(its output). For each op the quantizer marked quantized, the pass records the qparams as
``node.meta["input_qparams"][arg_index]`` / ``["output_qparams"][user_index]``, removes those
Q/DQ nodes (the op now reads and writes integers) and re-traces the graph so every value has
its integer dtype. ExecuTorch's Arm pass of the same name, as the Cortex-M flow uses it.
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import torch
from torch.fx import GraphModule, Node
from torch.fx.passes.infra.pass_base import PassResult

from ....exir.dialects._ops import ops as exir_ops
from ....exir.pass_base import ExportPass
from .graph_utils import get_param_tensor, is_param_node

# node.meta["custom"][QUANTIZED_KEY]: the quantizer's verdict (kept by torch.export).
QUANTIZED_KEY = "cortex_m_quantized"

Q_PER_TENSOR = {exir_ops.edge.quantized_decomposed.quantize_per_tensor.default,
                exir_ops.edge.cortex_m.quantize_per_tensor.default}
DQ_PER_TENSOR = {exir_ops.edge.quantized_decomposed.dequantize_per_tensor.default,
                 exir_ops.edge.cortex_m.dequantize_per_tensor.default}
Q_PER_CHANNEL = {exir_ops.edge.quantized_decomposed.quantize_per_channel.default}
DQ_PER_CHANNEL = {exir_ops.edge.quantized_decomposed.dequantize_per_channel.default}
Q_OPS = Q_PER_TENSOR | Q_PER_CHANNEL
DQ_OPS = DQ_PER_TENSOR | DQ_PER_CHANNEL


class QuantArgs(NamedTuple):
    scale: list[float] | float
    zp: list[int] | int
    qmin: int
    qmax: int
    dtype: torch.dtype
    axis: int = 0
    per_channel: bool = False

    @classmethod
    def from_operator(cls, op: object, args: tuple) -> QuantArgs:
        if op in Q_PER_TENSOR or op in DQ_PER_TENSOR:
            return cls(args[1], args[2], args[3], args[4], args[5])
        if op in Q_PER_CHANNEL or op in DQ_PER_CHANNEL:
            return cls(args[1].tolist(), args[2].tolist(), args[4], args[5], args[6],
                       axis=args[3], per_channel=True)
        raise NotImplementedError(f"not a quantize/dequantize operator: {op}")


def is_quantized(node: Node) -> bool:
    return bool(node.meta.get("custom", {}).get(QUANTIZED_KEY, False))


def _input_qparams(ep, args: list) -> tuple[QuantArgs | None, set[Node]]:
    found: QuantArgs | None = None
    dqs: set[Node] = set()
    for arg in args:
        if not isinstance(arg, Node):
            return None, set()
        if arg.target in DQ_OPS:
            a = list(arg.args)
            for i in (1, 2):  # per-channel scales/zero points are constant inputs
                if isinstance(a[i], Node) and ep is not None and is_param_node(ep, a[i]):
                    a[i] = get_param_tensor(ep, a[i])
            qa = QuantArgs.from_operator(arg.target, tuple(a))
            dqs.add(arg)
            if found is None:
                found = qa
            elif found.dtype != qa.dtype:
                raise RuntimeError(f"cannot merge qparams of {found.dtype} and {qa.dtype}")
    return found, dqs


def _arg_qparams(ep, arg: object) -> tuple[QuantArgs | None, set[Node]]:
    if isinstance(arg, (list, tuple)):
        return _input_qparams(ep, list(arg))
    if isinstance(arg, Node):
        return _input_qparams(ep, [arg])
    return None, set()


# add/sub with exactly one dequantized tensor operand keep their Q/DQ (mixed float/int).
_PARTIAL_BINARY = {exir_ops.edge.aten.add.Tensor, exir_ops.edge.aten.sub.Tensor}
# A fill shaped like a quantized tensor (a clamp's tensor bounds) always folds, quantized or not,
# as in ExecuTorch: its value stays the float fill, which the clamp pass reads and quantizes.
_CONSTANT_FILLS = {exir_ops.edge.aten.full_like.default}


class FoldAndAnnotateQParamsPass(ExportPass):
    def __init__(self, exported_program=None):
        super().__init__()
        self.exported_program = exported_program

    def call(self, graph_module: GraphModule) -> PassResult:  # noqa: C901
        graph = graph_module.graph
        changed = touched = False
        for n in graph.nodes:
            if n.op != "call_function" or n.target in Q_OPS | DQ_OPS:
                continue
            if not (is_quantized(n) or n.target in _CONSTANT_FILLS):
                continue
            if "input_qparams" in n.meta or "output_qparams" in n.meta:
                raise RuntimeError(f"{n.name} already carries qparams; run the fold once")
            found: dict[int, tuple[QuantArgs, set[Node]]] = {}
            seen: set[Node] = set()
            for i, arg in enumerate(n.args):
                qa, dqs = _arg_qparams(self.exported_program, arg)
                if qa is not None:
                    found[i] = (qa, dqs - seen)
                    seen |= dqs
            keep = (n.target in _PARTIAL_BINARY and len(n.args) > 1
                    and all(isinstance(a, Node) for a in n.args[:2])
                    and (0 in found) != (1 in found))
            changed = changed or not keep
            touched = True
            n.meta["input_qparams"] = {}
            n.meta["output_qparams"] = {}
            for i, (qa, dqs) in found.items():
                n.meta["input_qparams"][i] = qa
                if keep:
                    continue
                for dq in dqs:
                    n.replace_input_with(dq, dq.args[0])
                    if not dq.users:
                        graph.erase_node(dq)
            for i, user in enumerate(copy.copy(n.users)):
                if user.target not in Q_OPS:
                    continue
                n.meta["output_qparams"][i] = QuantArgs.from_operator(user.target, user.args)
                if not keep:
                    user.replace_all_uses_with(n)
                    graph.erase_node(user)
        if changed:
            graph_module = super().call(graph_module).graph_module
        return PassResult(graph_module, touched or changed)


def get_output_qparams(node: Node) -> dict[int, QuantArgs]:
    qparams = node.meta.get("output_qparams")
    if not qparams:
        raise ValueError(f"no output qparams on {node.name}")
    return qparams
