"""The Cortex-M side of ``aot_arm_compiler``: ExecuTorch's ``ReplaceQuantNodesPass`` for the
CPU-side Q/DQ around Ethos-U delegates, and the whole ``--target=cortex-m*`` flow.

ExecuTorch's ``aot_arm_compiler`` turns the int8/int16 ``quantize_per_tensor`` /
``dequantize_per_tensor`` left on the CPU into ``cortex_m::`` ops, which its bare-metal runner
implements with CMSIS-NN. For a ``cortex-m*`` target nothing is delegated: the model is
quantized with ``CortexMQuantizer`` and ``CortexMPassManager`` turns the quantized Edge program
into ``cortex_m::`` calls. The operators and passes live in ``edgetorch.backends.cortex_m``.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch.fx.passes.infra.pass_base import PassResult

logger = logging.getLogger(__name__)


def replace_quant_nodes(gm: torch.fx.GraphModule) -> PassResult:
    """Retarget the top-level graph's int8/int16 per-tensor Q/DQ to ``cortex_m::``."""
    from ...cortex_m.passes.replace_quant_nodes_pass import SWAP, qualified

    modified = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in SWAP and qualified(node.args):
            node.target = SWAP[node.target]
            modified = True
    if modified:
        gm.recompile()
    return PassResult(gm, modified)


def channels_last(x: Any) -> Any:
    """4-D tensors (also inside tuples) in channels-last memory format, as the CMSIS-NN
    kernels read them; other values as they are."""
    if isinstance(x, torch.Tensor):
        if x.dim() != 4:
            return x
        cl = x.to(memory_format=torch.channels_last)
        if cl.stride() != x.stride():
            logger.warning("Converting input tensor with shape %s to channels_last",
                           list(x.shape))
        return cl
    if isinstance(x, tuple):
        return tuple(channels_last(t) for t in x)
    return x


def to_edge_cortex_m(model: torch.nn.Module, example_inputs: tuple, target: str,
                     quantize: bool = True, samples: list[tuple] | None = None,
                     strict: bool = True,
                     exported: torch.export.ExportedProgram | None = None):
    """``model`` (an exported program's module) to an Edge program of ``cortex_m::`` calls for
    ``target`` (``cortex-m55``, ...). Returns ``(quantized_model, edge, example_inputs)``, the
    inputs channels-last. Without ``quantize`` the float ``exported`` program is lowered
    (CMSIS-NN has no float kernels, so little changes)."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from ....exir import to_edge_transform_and_lower
    from ....exir.torch_export import export_program
    from ...cortex_m.edge_compile_config import cortex_m_edge_compile_config
    from ...cortex_m.passes import CortexMPassManager
    from ...cortex_m.quantizer import CortexMQuantizer
    from ...cortex_m.target_config import CortexMTargetConfig

    config = CortexMTargetConfig.from_target_string(target)
    logger.info("Using Cortex-M/CMSIS-NN compilation path for cpu=%s backend=%s layout=dim-order",
                config.cpu.name, config.backend.name)
    quantized = None
    if not quantize:
        logger.warning("Quantization is DISABLED. Cortex-M typically requires quantization.")
        if exported is None:
            exported = export_program(model, example_inputs, strict=strict)
    else:
        model = model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
        example_inputs = channels_last(tuple(example_inputs))
        # re-export so the fake inputs the quantizer sees are channels-last too
        model = export_program(model, example_inputs, strict=strict).module()
        prepared = prepare_pt2e(model, CortexMQuantizer())
        for sample in samples or [example_inputs]:
            prepared(*channels_last(tuple(sample)))
        quantized = convert_pt2e(prepared)
        exported = export_program(quantized, example_inputs, strict=strict)
    edge = to_edge_transform_and_lower(exported, compile_config=cortex_m_edge_compile_config())
    manager = CortexMPassManager(edge.exported_program(), target_config=config)
    edge._edge_programs["forward"] = manager.transform()
    return quantized, edge, example_inputs
