"""QAT in a recipe sweep: the ``qat`` recipe exports the model for training, prepares it with
``prepare_qat_pt2e`` (fake quantizers with observers), hands it to the user's fine-tune
function, converts it and scores the program in edgetorch's runtime -- on the digits CNN, with
``digits.qat_fine_tune`` as the user's function."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch

from edgetorch.devtools.quant_debug import sweep
from edgetorch.devtools.quant_debug.data import load_samples
from edgetorch.devtools.quant_debug.metrics import top1

sys.path.insert(0, str(Path(__file__).parent))
import digits  # noqa: E402

IMAGES = 160  # 20 batches of 8


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    calls = []

    def fine_tune(prepared, samples):
        before = [p.detach().clone() for p in prepared.parameters()]
        modules = {type(m).__name__ for m in prepared.modules()}
        digits.qat_fine_tune(prepared, samples)
        changed = any(not torch.equal(a, b) for a, b in zip(before, prepared.parameters()))
        calls.append((prepared.training, modules, len(samples), changed))

    result = sweep(digits.trained_cnn(), digits.example_inputs(), digits.test_loader(IMAGES),
                   ["xnnpack:qat"], out_dir=tmp_path_factory.mktemp("qat"), workers=0,
                   latency_repeat=1, qat_train=fine_tune, show_progress=False)
    return result, calls


def test_the_fine_tune_runs_between_prepare_and_convert(swept):
    result, calls = swept
    row = result.table.set_index("key").loc["xnnpack/qat/pc"]
    assert row.status == "ok", row.error
    # once, on the training-mode graph prepare_qat_pt2e made (fake quantizers observing), with
    # the calibration samples (the first 32 batches of the data by default: all 20 here)
    assert len(calls) == 1
    training, modules, n_samples, changed = calls[0]
    assert training and "FusedMovingAvgObsFakeQuantize" in modules
    assert n_samples == IMAGES // digits.BATCH and changed
    # a short, gentle fine-tune keeps the trained CNN within a point of float
    assert row.float_metric == pytest.approx(digits.accuracy_on(digits.trained_cnn(), IMAGES))
    assert row.metric_drop <= 1.0


def test_the_qat_score_is_torchs(swept):
    """The same QAT done by hand with torchao (prepare_qat_pt2e, the fine-tune, the switch to
    inference, convert_pt2e), run eagerly: the runtime's top-1 is torch's up to two images
    (an int8 rounding tie broken the other way can flip a close call)."""
    from torchao.quantization.pt2e import move_exported_model_to_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_qat_pt2e

    from edgetorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )

    result, _ = swept
    model, example = digits.trained_cnn(), digits.example_inputs()
    samples = load_samples(digits.test_loader(IMAGES), example)
    quantizer = XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_qat=True))
    prepared = prepare_qat_pt2e(
        torch.export.export(copy.deepcopy(model).train(), example).module(), quantizer)
    digits.qat_fine_tune(prepared, samples[:32])
    move_exported_model_to_eval(prepared)
    converted = convert_pt2e(prepared)
    with torch.no_grad():
        outs = [converted(*s.inputs).numpy() for s in samples]
    by_hand = top1(outs, samples, outs)
    assert abs(result.table.set_index("key").loc["xnnpack/qat/pc", "metric"] - by_hand) \
        <= 2 * 100 / IMAGES
