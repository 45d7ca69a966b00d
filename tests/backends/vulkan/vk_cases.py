"""How the Vulkan tests lower a model with edgetorch (the same calls ExecuTorch's users make),
and the tolerances they compare with."""

from __future__ import annotations

import copy

import numpy as np
import torch
from delegate_checks import eager, fp16_tolerance, run  # noqa: F401 (tests/support)

from edgetorch.backends.vulkan.partitioner.vulkan_partitioner import VulkanPartitioner
from edgetorch.exir import to_edge_transform_and_lower

QUANT = {"w8": (False, 8), "w4": (False, 4), "dyn8": (True, 8)}


def quantize(model: torch.nn.Module, inputs: tuple, mode: str) -> torch.export.ExportedProgram:
    """PT2E with ``VulkanQuantizer``, calibrated on ``inputs``: the converted program (torchao's
    ``quantize_`` for ``vk_models.TORCHAO_QUANT``'s modes)."""
    from vk_models import TORCHAO_QUANT, torchao_quantize

    if mode in TORCHAO_QUANT:
        return torch.export.export(torchao_quantize(model, mode), inputs)
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


def successive_calls(pte: bytes, model: torch.nn.Module, inputs: tuple, calls: int = 4):
    """``(got, want)`` per call for ``calls`` successive ``forward`` calls of one loaded method
    and of a fresh copy of the eager model (both start from the buffers' initial values), on
    the example inputs scaled by 1, 2, ...; and the delegates' handles."""
    from edgetorch.runtime import Runtime

    method = Runtime.get().load_program(pte).load_method("forward")
    eager_model = copy.deepcopy(model)
    pairs = []
    for k in range(1, calls + 1):
        args = tuple(t * k for t in inputs)
        (got,) = method.execute([t.numpy() for t in args])
        with torch.no_grad():
            want = eager_model(*args).numpy()
        pairs.append((np.asarray(got).copy(), want))
    return pairs, [h for _, h in method._delegate_handles]
