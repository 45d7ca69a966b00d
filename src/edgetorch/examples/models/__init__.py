"""Example models by ExecuTorch's names (``examples/models``: ``MODEL_NAME_TO_MODEL``).

The scripts (``edgetorch.examples.portable.scripts.export``,
``edgetorch.examples.xnnpack.aot_compiler``) take ``--model_name`` from here: ExecuTorch's toy
models (``add``, ``add_mul``, ``mul``, ``linear``, ``softmax``, ``conv1d``), ``mv2`` /
``mv2_untrained`` and ``resnet18`` mapped to the built-in examples of the same architecture
(seeded random weights: ExecuTorch downloads torchvision's pretrained ones), and every built-in
example under its own name. torch only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .. import EXAMPLES, get_example
from . import toy_model

ModelFactory = Callable[[], tuple[torch.nn.Module, tuple[Any, ...]]]


def _toy(cls: type) -> ModelFactory:
    def build() -> tuple[torch.nn.Module, tuple[Any, ...]]:
        torch.manual_seed(0)
        model = cls().eval()
        return model, model.get_example_inputs()

    return build


def _example(name: str) -> ModelFactory:
    return lambda: get_example(name).build()


MODEL_NAME_TO_MODEL: dict[str, ModelFactory] = {
    "mul": _toy(toy_model.MulModule),
    "linear": _toy(toy_model.LinearModule),
    "add": _toy(toy_model.AddModule),
    "add_mul": _toy(toy_model.AddMulModule),
    "softmax": _toy(toy_model.SoftmaxModule),
    "conv1d": _toy(toy_model.Conv1dModule),
    "mv2": _example("mobilenet_v2"),
    "mv2_untrained": _example("mobilenet_v2"),
    "resnet18": _example("resnet18"),
    **{name: _example(name) for name in EXAMPLES},
}


class UnknownModelError(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def create_model(model_name: str) -> tuple[torch.nn.Module, tuple[Any, ...], dict | None, Any]:
    """``(model, example_inputs, example_kwarg_inputs, dynamic_shapes)`` as ExecuTorch's
    ``EagerModelFactory.create_model`` returns them."""
    try:
        factory = MODEL_NAME_TO_MODEL[model_name]
    except KeyError:
        raise UnknownModelError(f"Model {model_name} is not a valid name. Available models are "
                                f"{sorted(MODEL_NAME_TO_MODEL)}.") from None
    model, inputs = factory()
    return model.eval(), tuple(inputs), None, None
