"""Models and calibration data for ``aot_arm_compiler`` (ExecuTorch's ``--model_name`` rules).

``--model_name`` is a name of ``edgetorch.examples.models`` (``add``, ``mv2``, ...), one of
the script's internal test models (``qadd``, ``qadd2``, ``qops``, ``qlinear``; seeded here, so
the output is reproducible -- ExecuTorch's use unseeded ``torch.rand``), a ``.py`` file defining
``ModelUnderTest`` and ``ModelInputs``, or a ``.pt``/``.pth`` file holding a whole module.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from ....errors import InvalidArgumentError

MAX_CALIBRATION_SAMPLES = 1000


class QuantAddTest(torch.nn.Module):
    def forward(self, a):
        return a + a


class QuantAddTest2(torch.nn.Module):
    def forward(self, a, b):
        p, q = a + a, b + b
        return p, q, p + q


class QuantOpTest(torch.nn.Module):
    def forward(self, w, x, y, z):
        o1 = w - x
        o2 = o1 + y
        return o1, o2, o2 * z


class QuantLinearTest(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(61, 37)

    def forward(self, x):
        return self.linear(x)


def _internal(name: str) -> tuple[torch.nn.Module, tuple]:
    torch.manual_seed(0)
    if name == "qadd":
        return QuantAddTest(), (torch.rand(13, 3),)
    if name == "qadd2":
        return QuantAddTest2(), (torch.randn(13, 7, 3), torch.randn(13, 7, 3))
    if name == "qops":
        return QuantOpTest(), (torch.randn(3, 1, 2), torch.randn(3, 5, 2),
                               torch.randn(3, 5, 1) * -0.000001, torch.randn(3, 5, 2) * 1000)
    return QuantLinearTest(), (torch.randn(8, 61),)


INTERNAL_MODELS = ("qadd", "qadd2", "qops", "qlinear")


def _as_tuple(value: Any) -> tuple:
    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(value)
    raise InvalidArgumentError(f"example inputs must be a tensor or a tuple of tensors, got "
                               f"{type(value).__name__}")


def _load_inputs(model_input: str | None, module: Any = None) -> tuple | None:
    if model_input is None:
        return None
    if model_input.endswith((".pt", ".pth")):
        return _as_tuple(torch.load(model_input, weights_only=True))  # tensors only
    if module is not None and hasattr(module, model_input):
        return _as_tuple(getattr(module, model_input))
    raise InvalidArgumentError(f"--model_input {model_input!r} is neither a .pt file nor a "
                               "variable of the model file")


def load_model(model_name: str, model_input: str | None = None) -> tuple[torch.nn.Module, tuple]:
    """``(model, example_inputs)`` for ``--model_name`` / ``--model_input``."""
    from ....examples import _import_file
    from ....examples.models import MODEL_NAME_TO_MODEL, create_model

    if model_name in INTERNAL_MODELS:
        model, inputs = _internal(model_name)
    elif model_name in MODEL_NAME_TO_MODEL:
        model, inputs, _, _ = create_model(model_name)
    elif model_name.endswith(".py"):
        module = _import_file(Path(model_name))
        if not hasattr(module, "ModelUnderTest"):
            raise InvalidArgumentError(f"{model_name} must define ModelUnderTest (a module) and "
                                       "ModelInputs (its example inputs)")
        model = module.ModelUnderTest
        model = model() if isinstance(model, type) else model
        inputs = _load_inputs(model_input, module) or _as_tuple(module.ModelInputs)
        return model, inputs
    elif model_name.endswith((".pt", ".pth")):
        model = torch.load(model_name, weights_only=False)  # nosec: the user's own file
        if hasattr(model, "module") and not isinstance(model, torch.nn.Module):
            model = model.module()
        inputs = _load_inputs(model_input)
        if inputs is None:
            raise InvalidArgumentError(f"{model_name}: give --model_input with example inputs")
        return model, inputs
    else:
        raise InvalidArgumentError(
            f"Model '{model_name}' is not a valid name. Use --help for a list of available "
            f"models: {sorted([*INTERNAL_MODELS, *MODEL_NAME_TO_MODEL])}, or a .py/.pt file")
    return model, _load_inputs(model_input) or tuple(inputs)


def load_calibration_samples(path: str | None, example_inputs: tuple) -> list[tuple] | None:
    """Samples from a .pt/.pth file (a tensor, a tuple, or a list of tuples) or a folder."""
    if path is None:
        return None
    if os.path.isdir(path):
        files = sorted(f for f in os.listdir(path) if f.endswith((".pt", ".pth")))
        samples = [_as_tuple(torch.load(os.path.join(path, f), weights_only=True))
                   for f in files[:MAX_CALIBRATION_SAMPLES]]
    else:
        data = torch.load(path, weights_only=True)
        if isinstance(data, list) and data and isinstance(data[0], (tuple, list)):
            samples = [tuple(s) for s in data[:MAX_CALIBRATION_SAMPLES]]
        else:
            samples = [_as_tuple(data)]
    if not samples:
        raise InvalidArgumentError(f"--calibration_data {path}: no .pt/.pth samples found")
    return samples
