"""How the Vulkan tests lower a model with edgetorch (the same calls ExecuTorch's users make),
and the tolerances they compare with."""

from __future__ import annotations

import numpy as np
import torch

from edgetorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
from edgetorch.exir import to_edge_transform_and_lower
from edgetorch.runtime import Runtime

QUANT = {"w8": (False, 8), "w4": (False, 4), "dyn8": (True, 8)}
FP16_UNIT_ROUNDOFF = 2.0 ** -11


def quantize(model: torch.nn.Module, inputs: tuple, mode: str) -> torch.export.ExportedProgram:
    """PT2E with ``VulkanQuantizer``, calibrated on ``inputs``: the converted program."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from edgetorch.backends.vulkan.quantizer.vulkan_quantizer import (
        VulkanQuantizer,
        get_symmetric_quantization_config,
    )

    dynamic, bits = QUANT[mode]
    quantizer = VulkanQuantizer().set_global(
        get_symmetric_quantization_config(is_dynamic=dynamic, weight_bits=bits))
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)
    return torch.export.export(convert_pt2e(prepared), inputs)


def lower(model: torch.nn.Module, inputs: tuple, options: dict | None = None,
          quant: str | None = None) -> bytes:
    ep = quantize(model, inputs, quant) if quant else torch.export.export(model, inputs)
    return to_edge_transform_and_lower(
        ep, partitioner=[VulkanPartitioner(options)]).to_executorch().buffer


def run(pte: bytes, inputs: tuple) -> tuple[list[np.ndarray], list]:
    """Outputs of ``forward`` in edgetorch's runtime, and the delegates' handles."""
    method = Runtime.get().load_program(pte).load_method("forward")
    outs = method.execute([t.numpy() for t in inputs])
    return list(outs), [h for _, h in method._delegate_handles]


def eager(model: torch.nn.Module, inputs: tuple) -> list[np.ndarray]:
    with torch.no_grad():
        out = model(*inputs)
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


def fp16_tolerance(reference: np.ndarray, rounding_ops: int) -> float:
    """fp16 storage rounds every operator's result (relative error <= 2**-11); through
    ``rounding_ops`` operators whose gains stay near one that bounds the output's error by
    ``rounding_ops * 2**-11 * max|output|``."""
    return rounding_ops * FP16_UNIT_ROUNDOFF * float(np.abs(reference).max())
