"""The ``cortex_m`` quantize/dequantize ops and ExecuTorch's ``ReplaceQuantNodesPass``.

ExecuTorch's ``aot_arm_compiler`` turns the int8/int16 ``quantize_per_tensor`` /
``dequantize_per_tensor`` left on the CPU (around the Ethos-U delegates) into
``cortex_m::`` ops, which its bare-metal runner implements with CMSIS-NN. We do the same so the
``.pte`` matches; edgetorch's runtime has kernels for both (``edgetorch/kernels/cortex_m.py``).
"""

from __future__ import annotations

import torch
from torch.fx.passes.infra.pass_base import PassResult

_ARGS = "Tensor input, float scale, int zero_point, int quant_min, int quant_max, ScalarType dtype"
_LIB = torch.library.Library("cortex_m", "FRAGMENT")
_DEFINED = False


def define_ops() -> None:
    """Define the four ``cortex_m`` schemas once (ExecuTorch's, argument for argument)."""
    global _DEFINED
    if _DEFINED or hasattr(torch.ops.cortex_m, "quantize_per_tensor"):
        _DEFINED = True
        return
    qd = torch.ops.quantized_decomposed
    for name, ref in (("quantize_per_tensor", qd.quantize_per_tensor.default),
                      ("dequantize_per_tensor", qd.dequantize_per_tensor.default)):
        _LIB.define(f"{name}({_ARGS}) -> Tensor")
        _LIB.define(f"{name}.out({_ARGS}, *, Tensor(a!) out) -> Tensor(a!)")

        def impl(input, scale, zero_point, quant_min, quant_max, dtype, _ref=ref):
            return _ref(input, scale, zero_point, quant_min, quant_max, dtype)

        def impl_out(input, scale, zero_point, quant_min, quant_max, dtype, *, out, _ref=ref):
            out.copy_(_ref(input, scale, zero_point, quant_min, quant_max, dtype))
            return out

        _LIB.impl(name, impl, "CompositeExplicitAutograd")
        _LIB.impl(f"{name}.out", impl_out, "CompositeExplicitAutograd")
    _DEFINED = True


def _qualified(args: tuple) -> bool:
    dtype, qmin, qmax = args[5], args[3], args[4]
    if dtype not in (torch.int8, torch.int16):
        return False
    info = torch.iinfo(dtype)
    return qmin >= info.min and qmax <= info.max


def replace_quant_nodes(gm: torch.fx.GraphModule) -> PassResult:
    """Retarget the top-level graph's int8/int16 per-tensor Q/DQ to ``cortex_m::``."""
    define_ops()
    qd = torch.ops.quantized_decomposed
    swap = {qd.quantize_per_tensor.default: torch.ops.cortex_m.quantize_per_tensor.default,
            qd.dequantize_per_tensor.default: torch.ops.cortex_m.dequantize_per_tensor.default}
    modified = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in swap and _qualified(node.args):
            node.target = swap[node.target]
            modified = True
    if modified:
        gm.recompile()
    return PassResult(gm, modified)
