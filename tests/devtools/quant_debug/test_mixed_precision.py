"""Automatic mixed precision on the digits CNN with one planted bad layer: a 1-point top-1
target is met by keeping only that layer float, checked in edgetorch's runtime and again
here with torch, and the printed quantizer calls build that quantizer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from edgetorch.devtools.quant_debug import mixed_precision
from edgetorch.devtools.quant_debug.data import load_samples
from edgetorch.devtools.quant_debug.metrics import top1
from edgetorch.devtools.quant_debug.recipes import Recipe, quantize

sys.path.insert(0, str(Path(__file__).parent))
import digits  # noqa: E402


@pytest.fixture(scope="module")
def result():
    return mixed_precision(digits.planted_cnn(), digits.example_inputs(), digits.test_loader(),
                           "top1_drop<=1", "xnnpack:static")


def test_keeps_only_the_planted_layer_float(result):
    assert result.ranking[0] == "conv2"
    assert result.float_modules == ("conv2",)
    assert result.met and result.float_value - result.value <= 1.0
    # all-int8 misses the target by far (conv2's weights round to zero)
    first = result.trials[0]
    assert first.float_modules == () and not first.met and first.value < result.float_value - 20
    assert result.trials[-1].where == "runtime" and result.trials[-1].met
    text = str(result).splitlines()
    assert "keep float conv2" in text[0] and "meets the target" in text[0]
    assert text[1].split()[:3] == ["fake_quant", "float:", "-"] and text[1].endswith("(misses)")


def test_the_answer_holds_in_torch(result):
    """The same recipe, fake-quantized in torch on the same 360 test images: top-1 within one
    point of the float model's (which is the trained CNN's: the plant keeps float outputs)."""
    model, example = digits.planted_cnn(), digits.example_inputs()
    samples = load_samples(digits.test_loader(), example)
    assert len(samples) == 45
    quantized = quantize(result.recipe, model, example, samples[:32])
    with torch.no_grad():
        outs = [quantized.exported.module()(*s.inputs).numpy() for s in samples]
    accuracy = top1(outs, samples, outs)
    assert result.float_value == pytest.approx(digits.accuracy(model))
    assert result.float_value - accuracy <= 1.0
    assert abs(accuracy - result.value) <= 100 / 360 * 2  # the runtime: at most two images apart


def test_printed_calls_reproduce_the_quantizer(result):
    assert result.code.splitlines()[-2:] == [
        "quantizer.set_module_type(torch.nn.Conv2d, None)",
        "quantizer.set_module_name('conv1', config)",
    ]
    assert Recipe.parse("xnnpack:static").with_float_modules(["conv2"]) == result.recipe
