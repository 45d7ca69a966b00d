"""Quantizing a model for XNNPACK in one call: what ``edgetorch export --quantize`` runs.

``static``: PT2E with ``XNNPACKQuantizer`` (per-channel int8 weights, int8 activations
calibrated on the samples). ``dynamic``: the same with activations quantized at run time.
``8da4w``: torchao's ``Int8DynamicActivationIntxWeightConfig`` (int4 weights in groups of 32,
int8 per-token activations) on every ``nn.Linear`` whose input size is a multiple of 32, as
ExecuTorch's LLM export does. The result is an ``ExportedProgram`` ready for
``to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from ....errors import ExportError
from ....exir.torch_export import export_program

MODES = ("static", "dynamic", "8da4w")
GROUP_SIZE = 32


def progress_bar(done: int, total: int, what: str = "calibrating", width: int = 30,
                 stream=None) -> None:
    """Draw ``what [#####.....] done/total`` on one terminal line (stderr)."""
    stream = stream or sys.stderr
    filled = width * done // max(total, 1)
    stream.write(f"\r{what} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done >= total:
        stream.write("\n")
    stream.flush()


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
                         calibration: Iterable[tuple[torch.Tensor, ...]] | None = None,
                         progress: Callable[[int, int], None] | None = None
                         ) -> torch.export.ExportedProgram:
    """``model`` quantized for XNNPACK (``mode`` in :data:`MODES`), exported."""
    if mode not in MODES:
        raise ExportError(f"unknown quantization {mode!r}; choose one of {', '.join(MODES)}")
    model = model.eval()
    if mode == "8da4w":
        from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
        from torchao.quantization.granularity import PerGroup

        quantize_(model, Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=PerGroup(GROUP_SIZE)),
            filter_fn=lambda m, fqn: isinstance(m, torch.nn.Linear)
            and m.in_features % GROUP_SIZE == 0)
        return export_program(model, example)

    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from .xnnpack_quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

    config = get_symmetric_quantization_config(is_per_channel=True,
                                               is_dynamic=mode == "dynamic")
    prepared = prepare_pt2e(export_program(model, example).module(),
                            XNNPACKQuantizer().set_global(config))
    samples = list(calibration) if calibration is not None else [example]
    with torch.no_grad():
        for i, sample in enumerate(samples):
            prepared(*sample)
            if progress is not None:
                progress(i + 1, len(samples))
    converted = convert_pt2e(prepared)
    if mode == "dynamic":
        from ...transforms.duplicate_dynamic_quant_chain import DuplicateDynamicQuantChainPass

        DuplicateDynamicQuantChainPass()(converted)
    return export_program(converted, example)
