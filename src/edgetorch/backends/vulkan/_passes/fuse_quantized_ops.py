"""``FuseQuantizedOpsTransform``: a linear on a weight dequantized per channel (weight-only
PT2E quantization) becomes the delegate's weight-only quantized linear:
``aten._weight_int8pack_mm`` for 8-bit symmetric weights, ``et_vk.linear_qcs4w`` for 4-bit
symmetric ones (two values packed per byte), plus an ``add`` for the bias."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.export import ExportedProgram

from ....exir.dialects._ops import ops as exir_ops
from ....exir.pass_base import ExportPass, PassResult
from ....exir.passes import dead_code_elimination_pass
from ...transforms.utils import get_param_tensor, is_param_node
from .. import utils


def _is_linear(node: torch.fx.Node) -> bool:
    return utils._short_name(node) == "linear.default"


def _is_dequant_per_channel(node: torch.fx.Node) -> bool:
    return utils._short_name(node) == "dequantize_per_channel.default"


def matches_linear_qcnw_pattern(program: ExportedProgram,
                                node: torch.fx.Node) -> tuple[torch.qscheme, int] | None:
    """``(scheme, bits)`` when ``node`` is a linear on a constant int8 weight dequantized
    per channel (and its input is not itself dequantized: that is a dynamically quantized
    linear); bits is 4 when every value fits in [-8, 7]."""
    if not _is_linear(node):
        return None
    x, w = node.args[0], node.args[1]
    if not isinstance(w, torch.fx.Node) or not isinstance(x, torch.fx.Node):
        return None
    if utils.is_dequant_node(x) or not _is_dequant_per_channel(w):
        return None
    weight, zeros = w.args[0], w.args[2]
    for n in (weight, zeros):
        if not isinstance(n, torch.fx.Node) or not is_param_node(program, n):
            return None
    zeros_t = get_param_tensor(program, zeros)
    if not isinstance(zeros_t, torch.Tensor):
        return None
    scheme = torch.per_channel_symmetric if torch.all(zeros_t == 0) \
        else torch.per_channel_affine
    weight_t = get_param_tensor(program, weight)
    if not isinstance(weight_t, torch.Tensor) or weight_t.dtype != torch.int8:
        return None
    lo, hi = weight_t.min().item(), weight_t.max().item()
    if lo >= -8 and hi <= 7:
        return scheme, 4
    if lo >= -128 and hi <= 127:
        return scheme, 8
    return None


def pack_4bit_weight_tensor(w: torch.Tensor) -> torch.Tensor:
    """[M, K] int8 values in [-8, 7] to [M, ceil(K/2)] bytes: each value + 8, the even
    column in the high nibble."""
    lo, hi = w.min().item(), w.max().item()
    assert -8 <= lo and hi <= 7, f"convert_to_qc4w: [min,max] out of [-8, 7] range, got " \
                                 f"[{lo}, {hi}]"
    if w.ndim != 2:
        w = w.squeeze()
    assert w.ndim == 2, f"convert_to_qc4w: expecting input tensor to be 2d, got {w.ndim}"
    if w.shape[-1] % 2:
        w = F.pad(input=w, pad=(0, 1, 0, 0), mode="constant", value=0)
    oc, ic = w.shape
    flat = (w.to(dtype=torch.uint8) + 8).contiguous().view(-1)
    return (flat[::2] << 4 | flat[1::2]).view(oc, ic // 2)


def update_program_state_dict(program: ExportedProgram, name: str,
                              tensor: torch.Tensor) -> None:
    """Replace the parameter or buffer of placeholder ``name`` by ``tensor``."""
    from torch.export.graph_signature import InputKind, TensorArgument

    spec = next((s for s in program.graph_signature.input_specs
                 if s.kind in (InputKind.BUFFER, InputKind.PARAMETER)
                 and isinstance(s.arg, TensorArgument) and s.arg.name == name), None)
    assert spec is not None, f"could not find {name} in source program signature"
    assert spec.target in program.state_dict, f"could not find {spec.target}"
    if spec.kind == InputKind.PARAMETER:
        tensor = torch.nn.Parameter(tensor, requires_grad=False)
    program.state_dict[spec.target] = tensor


def fuse_into_linear_qcnw_node(program: ExportedProgram, graph_module: torch.fx.GraphModule,
                               linear: torch.fx.Node, scheme: torch.qscheme, bits: int) -> None:
    x, dq = linear.args[0], linear.args[1]
    bias = linear.args[2] if len(linear.args) > 2 else None
    weight, scale = dq.args[0], dq.args[1]
    if bits == 4:
        packed = pack_4bit_weight_tensor(get_param_tensor(program, weight))
        update_program_state_dict(program, weight.name, packed)
        weight.meta["val"] = weight.meta["val"][:, ::2].to(torch.uint8)
    if scheme != torch.per_channel_symmetric or bits not in (4, 8):
        raise NotImplementedError(
            "only 4 and 8 bits per channel symmetric quant supported for linear_qcnw")
    target = (exir_ops.edge.aten._weight_int8pack_mm.default if bits == 8
              else exir_ops.edge.et_vk.linear_qcs4w.default)
    graph = graph_module.graph
    with graph.inserting_before(linear):
        out = graph.create_node("call_function", target, (x, weight, scale))
        if bias:
            out = graph.create_node("call_function", exir_ops.edge.aten.add.Tensor, (out, bias))
        linear.replace_all_uses_with(out)
        graph.erase_node(linear)
        graph.erase_node(dq)


class FuseQuantizedOpsTransform(ExportPass):
    def __init__(self) -> None:
        super().__init__()
        self._exported_program: ExportedProgram | None = None

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        assert self._exported_program is not None, "set _exported_program before running"
        for node in graph_module.graph.nodes:
            found = matches_linear_qcnw_pattern(self._exported_program, node)
            if found is not None:
                fuse_into_linear_qcnw_node(self._exported_program, graph_module, node, *found)
        graph_module.recompile()
        dead_code_elimination_pass(graph_module)
        return PassResult(super().call(graph_module).graph_module, True)  # re-trace
