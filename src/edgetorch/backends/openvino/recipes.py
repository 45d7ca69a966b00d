"""One-call export recipes for the OpenVINO backend (what ``edgetorch export --delegate
openvino [--quantize]`` runs)."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from ...exir.torch_export import export_program


def default_calibration(inputs: tuple[torch.Tensor, ...], n: int = 16
                        ) -> list[tuple[torch.Tensor, ...]]:
    """``n`` seeded standard-normal draws shaped like the float inputs (others kept as is):
    enough for NNCF's statistics on an example; real data calibrates better."""
    gen = torch.Generator().manual_seed(1000)
    return [tuple(torch.randn(t.shape, generator=gen, dtype=t.dtype)
                  if t.is_floating_point() else t for t in inputs) for _ in range(n)]


def quantize_for_openvino(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...],
                          calibration: Iterable[tuple[torch.Tensor, ...]] | None = None,
                          ) -> torch.export.ExportedProgram:
    """``model`` quantized to int8 by ``OpenVINOQuantizer`` (INT8_SYM), exported again."""
    from .quantizer import quantize_model

    samples = list(calibration) if calibration is not None else default_calibration(inputs)
    captured = export_program(model.eval(), inputs).module()
    quantized = quantize_model(captured, samples, subset_size=len(samples),
                               transform_fn=tuple)
    return export_program(quantized, inputs)
