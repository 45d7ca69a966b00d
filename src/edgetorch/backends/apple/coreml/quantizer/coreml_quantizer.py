"""``CoreMLQuantizer``: coremltools' PT2E quantizer, at ExecuTorch 1.5.1's name.

coremltools 9.0 ships the quantizer Core ML wants
(``coremltools.optimize.torch.quantization._coreml_quantizer``: the conv / linear / batch-norm /
activation patterns Core ML fuses, annotated from a ``LinearQuantizerConfig``), written against
``torch.ao.quantization``'s PT2E API. torch 2.13 no longer has that API: it moved to torchao
(``torchao.quantization.pt2e``, the same classes under new module names), so coremltools'
module does not import, and ExecuTorch 1.5.1 carries a copy of it with the imports renamed.
edgetorch copies nothing: it imports coremltools' own modules with the names they import from
the removed ``torch.ao.quantization.quantizer`` / ``pt2e`` modules answered by torchao's (only
while they import; nothing stays in ``sys.modules``), and has the annotation config build
torchao's fake-quantizers and observers, which torchao's ``prepare_pt2e`` / ``convert_pt2e``
recognise (torch.ao's are other classes to them). The result is ExecuTorch's quantizer: the
same patterns, specs and observers, so the same quantize/dequantize parameters.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager

import torchao.quantization.pt2e as _pt2e
import torchao.quantization.pt2e.quantizer.quantizer as _quantizer
import torchao.quantization.pt2e.utils as _pt2e_utils
from torchao.quantization.pt2e.quantizer.utils import get_module_name_filter

from ....xnnpack.quantizer.xnnpack_quantizer_utils import _is_annotated, _mark_annotated

_CT = "coremltools.optimize.torch.quantization"


def _module(name: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    return m


# What coremltools' quantizer imports from torch.ao, and where torchao keeps it now.
_MOVED = {
    "torch.ao.quantization.quantizer": _module(
        "torch.ao.quantization.quantizer", quantizer=_quantizer),
    "torch.ao.quantization.quantizer.quantizer": _quantizer,
    "torch.ao.quantization.quantizer.xnnpack_quantizer": _module(
        "torch.ao.quantization.quantizer.xnnpack_quantizer",
        _get_module_name_filter=get_module_name_filter),
    "torch.ao.quantization.quantizer.xnnpack_quantizer_utils": _module(
        "torch.ao.quantization.quantizer.xnnpack_quantizer_utils",
        _is_annotated=_is_annotated, _mark_nodes_as_annotated=_mark_annotated),
    "torch.ao.quantization.pt2e": _module("torch.ao.quantization.pt2e", utils=_pt2e_utils),
    "torch.ao.quantization.pt2e.utils": _pt2e_utils,
}


@contextmanager
def _moved_modules() -> Iterator[None]:
    taken = {name: sys.modules[name] for name in _MOVED if name in sys.modules}
    sys.modules.update(_MOVED)
    try:
        yield
    finally:
        for name in _MOVED:
            sys.modules.pop(name, None)
        sys.modules.update(taken)


class _TorchaoObservers:
    """``ObserverType.get_observer`` answering with torchao's observer classes."""

    _BY_NAME = {"min_max": _pt2e.MinMaxObserver,
                "moving_average_min_max": _pt2e.MovingAverageMinMaxObserver,
                "min_max_per_channel": _pt2e.PerChannelMinMaxObserver,
                "moving_average_min_max_per_channel": _pt2e.MovingAveragePerChannelMinMaxObserver}

    @classmethod
    def get_observer(cls, observer_type, is_per_channel: bool):
        name = observer_type.value + ("_per_channel" if is_per_channel else "")
        if name not in cls._BY_NAME:
            raise ValueError(f"CoreMLQuantizer: observer {name!r} has no torchao counterpart "
                             f"(ExecuTorch 1.5.1 refuses it too); use one of "
                             f"{sorted({n.removesuffix('_per_channel') for n in cls._BY_NAME})}")
        return cls._BY_NAME[name]


def _load_coremltools_quantizer() -> types.ModuleType:
    if f"{_CT}._coreml_quantizer" in sys.modules:
        return sys.modules[f"{_CT}._coreml_quantizer"]
    with _moved_modules():
        import coremltools.optimize.torch.quantization._annotation_config as annotation_config
        import coremltools.optimize.torch.quantization._coreml_quantizer as module
    annotation_config._aoquant = _pt2e  # its FakeQuantize.with_args(...): torchao's
    annotation_config._ObserverType = _TorchaoObservers
    return module


CoreMLQuantizer = _load_coremltools_quantizer().CoreMLQuantizer

__all__ = ["CoreMLQuantizer"]
