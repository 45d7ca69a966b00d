"""Quantizing a model for XNNPACK in one call: what ``edgetorch export --quantize`` runs.

``static``: PT2E with ``XNNPACKQuantizer`` (per-channel int8 weights, int8 activations
calibrated on the samples). ``dynamic``: the same with activations quantized at run time.
``8da4w``: torchao's ``Int8DynamicActivationIntxWeightConfig`` (int4 weights in groups of 32,
int8 per-token activations) on every ``nn.Linear`` whose input size is a multiple of 32, as
ExecuTorch's LLM export does, except those whose weight something else reads
(``nn.MultiheadAttention``'s ``out_proj``, tied weights: :mod:`.int4_linears`).
The result is an ``ExportedProgram`` ready for
``to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])``; the summary of what
was quantized and what stayed float is :func:`quantize_with_summary`'s second result.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from ....errors import ExportError
from ....exir.torch_export import export_program
from ....util import progress
from .int4_linears import choose_linears
from .summary import NOT_TAKEN, SCHEMES, Layer, QuantizationSummary, pt2e_summary

logger = logging.getLogger(__name__)
MODES = ("static", "dynamic", "8da4w")
GROUP_SIZE = 32


def load_calibration(directory: str | Path, example: Sequence[torch.Tensor]
                     ) -> list[tuple[torch.Tensor, ...]]:
    """Calibration samples from ``.npy`` files in ``directory`` (sorted by name).

    A model with one input takes one file per sample; with ``k`` inputs, files are grouped
    ``k`` at a time in name order (``0_x.npy, 0_mask.npy, 1_x.npy, ...``). Each array must
    have the shape and dtype of the example input it stands for (the exported graph is
    specialised to those shapes)."""
    files = sorted(Path(directory).glob("*.npy"))
    k = len(example)
    if not files or len(files) % k:
        raise ExportError(f"--calibration {directory}: found {len(files)} .npy file(s); the "
                          f"model takes {k} input(s) per sample, so give a positive multiple of "
                          f"{k} files")
    samples = []
    for i in range(0, len(files), k):
        sample = []
        for f, ex in zip(files[i:i + k], example):
            arr = torch.from_numpy(np.load(f))
            if tuple(arr.shape) != tuple(ex.shape) or arr.dtype != ex.dtype:
                raise ExportError(f"--calibration: {f.name} is {arr.dtype}{list(arr.shape)} but "
                                  f"the example input is {ex.dtype}{list(ex.shape)}; the "
                                  "exported graph only takes that shape")
            sample.append(arr)
        samples.append(tuple(sample))
    return samples


def quantize_for_xnnpack(model: torch.nn.Module, example: tuple[torch.Tensor, ...], mode: str,
                         calibration: Iterable[tuple[torch.Tensor, ...]] | None = None
                         ) -> torch.export.ExportedProgram:
    """``model`` quantized for XNNPACK (``mode`` in :data:`MODES`), exported. What was
    quantized and what stayed float is logged (INFO); :func:`quantize_with_summary` returns
    it."""
    program, summary = quantize_with_summary(model, example, mode, calibration)
    logger.info("%s", summary)
    return program


def quantize_with_summary(model: torch.nn.Module, example: tuple[torch.Tensor, ...], mode: str,
                          calibration: Iterable[tuple[torch.Tensor, ...]] | None = None
                          ) -> tuple[torch.export.ExportedProgram, QuantizationSummary]:
    """:func:`quantize_for_xnnpack` and its :class:`QuantizationSummary`."""
    if mode not in MODES:
        raise ExportError(f"unknown quantization {mode!r}; choose one of {', '.join(MODES)}")
    model = model.eval()
    if mode == "8da4w":
        return _8da4w(model, example)

    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from .xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    config = get_symmetric_quantization_config(is_per_channel=True,
                                               is_dynamic=mode == "dynamic")
    prepared = prepare_pt2e(export_program(model, example).module(),
                            XNNPACKQuantizer().set_global(config))
    if mode == "dynamic":  # activations are quantized per call: one run sets the weights'
        samples = [example]  # observers, the calibration samples would change nothing
    else:
        samples = list(calibration) if calibration is not None else [example]
    with torch.no_grad():
        runs = samples if mode == "dynamic" else progress.bar(
            samples, desc="calibrating", unit="sample")
        for sample in runs:
            prepared(*sample)
    converted = convert_pt2e(prepared)
    summary = pt2e_summary(converted, mode, len(samples))
    if mode == "dynamic":
        from ...transforms.duplicate_dynamic_quant_chain import DuplicateDynamicQuantChainPass

        DuplicateDynamicQuantChainPass()(converted)
    return export_program(converted, example), summary


def _8da4w(model: torch.nn.Module, example: tuple[torch.Tensor, ...]
           ) -> tuple[torch.export.ExportedProgram, QuantizationSummary]:
    """torchao's 8da4w on the Linear layers that can take it (:mod:`.int4_linears`)."""
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    choices = choose_linears(model, example, GROUP_SIZE)
    chosen = {c.name for c in choices if c.quantize}
    quantize_(model, Int8DynamicActivationIntxWeightConfig(
        weight_dtype=torch.int4, weight_granularity=PerGroup(GROUP_SIZE)),
        filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear) and fqn in chosen)
    summary = QuantizationSummary("8da4w", SCHEMES["8da4w"].format(group=GROUP_SIZE))
    for c in choices:
        if c.quantize:
            summary.quantized.append(Layer(c.name, "Linear"))
        else:
            summary.kept_float.append(Layer(c.name, "Linear", c.reason))
    for name, m in model.named_modules():
        kind = type(m).__name__
        if isinstance(m, (torch.nn.modules.conv._ConvNd)):
            summary.kept_float.append(Layer(name, kind, NOT_TAKEN["8da4w"]))
    return export_program(model, example), summary
