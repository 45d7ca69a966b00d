"""Built-in example models, plus loading of user models from ``file.py:factory`` specs.

Every example is deterministic: its factory seeds torch (``torch.manual_seed(0)``) before
building, returns the module in eval mode, and its inputs come from a dedicated seeded
generator. This package imports only torch and the standard library -- never other edgetorch
modules -- so the ExecuTorch reference venv can import it with just ``src/`` on ``sys.path``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import ModelSpecError, UnknownExampleError
from .bert import bert_encoder, bert_inputs
from .classifiers import mlp, simple_model, tiny_classifier
from .cnn import cnn
from .llama import llama_decoder, token_inputs
from .mobilenet_v2 import mobilenet_v2
from .resnet import resnet18
from .shape_ops import shape_ops
from .transformer import transformer_encoder

__all__ = [
    "EXAMPLES",
    "ExampleSpec",
    "ModelSpecError",
    "UnknownExampleError",
    "get_example",
    "load_function_spec",
    "load_model_spec",
]


@dataclass(frozen=True)
class ExampleSpec:
    """A named example model: how to build it and what it is called with.

    ``factory`` builds a fresh eval-mode module with the same weights every call;
    ``input_shapes`` gives one shape per positional input: standard-normal float32, unless
    ``make_inputs(generator)`` builds the inputs (token ids, masks...) itself.
    """

    name: str
    factory: Callable[[], nn.Module]
    input_shapes: tuple[tuple[int, ...], ...]
    description: str
    seed: int = 0
    make_inputs: Callable[[torch.Generator], tuple[torch.Tensor, ...]] | None = None

    def example_inputs(self, seed: int | None = None) -> tuple[torch.Tensor, ...]:
        """The inputs, identical on every call (own generator, not global); ``seed`` draws
        another set of the same shapes and dtypes."""
        gen = torch.Generator().manual_seed(self.seed if seed is None else seed)
        if self.make_inputs is not None:
            return tuple(self.make_inputs(gen))
        return tuple(torch.randn(shape, generator=gen) for shape in self.input_shapes)

    def build(self) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        """Return ``(model, example_inputs)``."""
        return self.factory(), self.example_inputs()


def _spec(name, factory, shapes, description, make_inputs=None) -> tuple[str, ExampleSpec]:
    return name, ExampleSpec(name, factory, shapes, description, make_inputs=make_inputs)


EXAMPLES: dict[str, ExampleSpec] = dict(
    [
        _spec("tiny_classifier", tiny_classifier, ((1, 20),), "Tutorial MLP 20-64-32-4, ReLU"),
        _spec("simple_model", simple_model, ((1, 10),), "Tutorial Linear(10,32)-ReLU-Linear(32,5)"),
        _spec("mlp", mlp, ((4, 784),), "MLP 784-256-128-10 with ReLU and GELU"),
        _spec(
            "cnn",
            cnn,
            ((2, 3, 32, 32),),
            "Conv+BN+ReLU blocks with max/avg/adaptive-avg pooling and a Linear head",
        ),
        _spec(
            "mobilenet_v2",
            mobilenet_v2,
            ((1, 3, 224, 224),),
            "MobileNetV2 1.0, depthwise convs, ReLU6, 1000 classes",
        ),
        _spec(
            "transformer_encoder",
            transformer_encoder,
            ((2, 16, 64),),
            "nn.TransformerEncoderLayer d_model=64 nhead=4 ffn=128, batch-first",
        ),
        _spec(
            "resnet18",
            resnet18,
            ((1, 3, 224, 224),),
            "ResNet-18 with BasicBlocks, 1000 classes",
        ),
        _spec(
            "llama_decoder",
            llama_decoder,
            ((1, 16),),
            "Llama-style decoder: dim 64, 2 layers, 4 heads, RMSNorm, RoPE, causal SDPA, "
            "SwiGLU; int64 token ids in, logits over 256 tokens out",
            token_inputs,
        ),
        _spec(
            "bert_encoder",
            bert_encoder,
            ((2, 16), (2, 16)),
            "BERT-style encoder: embeddings + 2 layers (dim 64, 4 heads, GELU FFN 128); "
            "int64 input_ids and attention_mask (second sequence padded)",
            bert_inputs,
        ),
        _spec(
            "shape_ops",
            shape_ops,
            ((2, 4, 8, 8),),
            "Shape and indexing ops: cat, split, gather, index, index_select, where, cumsum, "
            "pad, nearest/bilinear upsampling, topk, sort, repeat, flip, roll, masked_fill, "
            "clamp, pow, argmin/argmax, var/std",
        ),
    ]
)


def get_example(name: str) -> ExampleSpec:
    """Return the built-in example called ``name``; the error lists the available names."""
    try:
        return EXAMPLES[name]
    except KeyError:
        available = ", ".join(sorted(EXAMPLES))
        raise UnknownExampleError(
            f"unknown example model {name!r}; available: {available}"
        ) from None


def load_model_spec(spec: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Build a model and its example inputs from a spec string.

    ``spec`` is either

    * the name of a built-in example (a key of :data:`EXAMPLES`), or
    * ``path/to/file.py:factory`` (split at the last ``:``): the file is imported and
      ``factory()`` is called with no arguments. It must return either

      - a ``(module, inputs)`` pair, or
      - just the ``nn.Module``; the file must then also define a module-level
        ``example_inputs()`` function returning the inputs.

      ``inputs`` is a tensor or a tuple/list of tensors: the positional arguments of
      ``forward``, with the shapes and dtypes the exported program will take.

    The module is put in eval mode and, for a file spec, run once on its inputs (no grad), so
    that inputs that do not fit the model fail here, naming the factory. Returns ``(module,
    inputs_tuple)``; raises :class:`UnknownExampleError` for an unknown name and
    :class:`ModelSpecError` for a file spec that cannot be honoured (a missing file or
    factory, a factory or forward that raises, a result of another shape).
    """
    path_str, sep, factory_name = spec.rpartition(":")
    if not sep:
        return get_example(spec).build()
    if not path_str or not factory_name:
        raise ModelSpecError(f"model spec {spec!r} must look like 'path/to/file.py:factory'")

    path = Path(path_str)
    user_module = _user_call(spec, path, "importing the file raised", _import_file, path)
    factory = getattr(user_module, factory_name, None)
    if not callable(factory):
        raise ModelSpecError(f"{path_str} defines no callable {factory_name!r}; "
                             f"{FACTORY_CONTRACT}")
    result = _user_call(spec, path, f"{factory_name}() raised", factory)

    if isinstance(result, nn.Module):
        make_inputs = getattr(user_module, "example_inputs", None)
        if not callable(make_inputs):
            raise ModelSpecError(
                f"{spec}: the factory returned only a module, so {path_str} must define "
                "example_inputs(); or return (module, inputs) from the factory"
            )
        model = result
        inputs = _user_call(spec, path, "example_inputs() raised", make_inputs)
    elif isinstance(result, (tuple, list)) and len(result) == 2 and isinstance(result[0],
                                                                                nn.Module):
        model, inputs = result
    else:
        raise ModelSpecError(f"{spec}: the factory returned {_describe(result)}; "
                             f"{FACTORY_CONTRACT}")
    inputs = _as_input_tuple(inputs, spec)
    model.eval()
    with torch.no_grad():
        _user_call(spec, path, "the model's forward on the example inputs "
                   f"({', '.join(_describe(t) for t in inputs)}) raised", model, *inputs)
    return model, inputs


def load_function_spec(spec: str) -> Callable[..., Any]:
    """The function ``fn`` of ``path/to/file.py:fn`` (the file imported as for
    :func:`load_model_spec`, nothing called); :class:`ModelSpecError` when the file or the
    function is missing."""
    path_str, sep, name = spec.rpartition(":")
    if not sep or not path_str or not name:
        raise ModelSpecError(f"function spec {spec!r} must look like 'path/to/file.py:function'")
    path = Path(path_str)
    user_module = _user_call(spec, path, "importing the file raised", _import_file, path)
    fn = getattr(user_module, name, None)
    if not callable(fn):
        raise ModelSpecError(f"{path_str} defines no function {name!r}")
    return fn


FACTORY_CONTRACT = ("a factory takes no arguments and returns (model, inputs) or the model "
                    "alone (with example_inputs() defined in its file); inputs: a tensor or a "
                    "tuple of tensors, forward's positional arguments")


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{str(value.dtype).removeprefix('torch.')}{list(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


def _user_call(spec: str, path: Path, what: str, fn, *args):
    """``fn(*args)``, running the user's code: an exception becomes a ModelSpecError naming the
    spec, the exception and the deepest line of the user's file it passed through."""
    try:
        return fn(*args)
    except ModelSpecError:
        raise
    except Exception as e:
        where = ""
        frames = traceback.extract_tb(e.__traceback__)
        mine = [f for f in frames if Path(f.filename).resolve() == path.resolve()]
        if isinstance(e, SyntaxError) and e.lineno:
            where = f" ({path}, line {e.lineno})"
        elif mine:
            f = mine[-1]
            where = f" ({path}, line {f.lineno}: {f.line})" if f.line else \
                f" ({path}, line {f.lineno})"
        message = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise ModelSpecError(f"{spec}: {what} {type(e).__name__}: {message}{where}; "
                             f"{FACTORY_CONTRACT}") from e


def _import_file(path: Path):
    if not path.is_file():
        raise ModelSpecError(f"model file not found: {path}")
    # A path-derived name keeps two user files with the same stem from clobbering each other.
    digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
    mod_name = f"_edgetorch_user_model_{path.stem}_{digest}"
    mod_spec = importlib.util.spec_from_file_location(mod_name, path)
    if mod_spec is None or mod_spec.loader is None:
        raise ModelSpecError(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(mod_spec)
    # Registered before exec so dataclasses, pickling and self-imports inside the file work.
    sys.modules[mod_name] = module
    # The file's directory goes on sys.path so it can import its sibling modules.
    parent = str(path.resolve().parent)
    sys.path.insert(0, parent)
    try:
        mod_spec.loader.exec_module(module)
    except Exception:
        del sys.modules[mod_name]
        raise
    finally:
        sys.path.remove(parent)
    return module


def _as_input_tuple(inputs, spec: str) -> tuple[torch.Tensor, ...]:
    if isinstance(inputs, torch.Tensor):
        return (inputs,)
    if isinstance(inputs, (tuple, list)) and all(isinstance(t, torch.Tensor) for t in inputs):
        return tuple(inputs)
    raise ModelSpecError(
        f"{spec}: example inputs must be a tensor or a tuple/list of tensors, "
        f"got {type(inputs).__name__}"
    )
