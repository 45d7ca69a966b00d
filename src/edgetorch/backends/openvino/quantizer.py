"""``OpenVINOQuantizer``, ``QuantizationMode`` and ``quantize_model`` at ExecuTorch's names, on NNCF.

NNCF (``nncf==3.1.0``, the ``edgetorch[openvino-quantizer]`` extra) decides where quantizers
go for OpenVINO (its MinMax algorithm with OpenVINO's patterns) and annotates the graph for
torchao's PT2E flow; ``quantize_model`` runs NNCF's ``quantize_pt2e`` (calibration, then
fast bias correction). The quantized graph keeps ``quantize``/``dequantize`` pairs, which
``OpenvinoPartitioner`` delegates and OpenVINO turns into int8 kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum
from typing import Any

import torch

from ...errors import FeatureNotAvailableError

_HINT = "pip install 'edgetorch[openvino-quantizer]' (nncf==3.1.0)"


def _nncf():
    try:
        import nncf
        import nncf.experimental.torch.fx as nncf_fx
    except ImportError as e:
        raise FeatureNotAvailableError(f"OpenVINOQuantizer needs NNCF ({e}); {_HINT}") from None
    return nncf, nncf_fx


class QuantizationMode(Enum):
    """ExecuTorch's modes. ``INT8_SYM``: symmetric int8 weights and activations;
    ``INT8_MIXED``: asymmetric activations; ``INT8_TRANSFORMER``: NNCF's transformer patterns.
    The weight-only modes (``INT8WO_*``, ``INT4WO_*``) are named but not implemented here."""

    INT8_SYM = "int8_sym"
    INT8_MIXED = "int8_mixed"
    INT8_TRANSFORMER = "int8_transformer"
    INT8WO_SYM = "int8wo_sym"
    INT8WO_ASYM = "int8wo_asym"
    INT4WO_SYM = "int4wo_sym"
    INT4WO_ASYM = "int4wo_asym"


_WEIGHT_ONLY = {QuantizationMode.INT8WO_SYM, QuantizationMode.INT8WO_ASYM,
                QuantizationMode.INT4WO_SYM, QuantizationMode.INT4WO_ASYM}


def _nncf_quantizer_class():
    nncf, nncf_fx = _nncf()

    class _Quantizer(nncf_fx.OpenVINOQuantizer):
        """NNCF's annotating quantizer configured from a ``QuantizationMode``."""

        def __init__(self, *, mode: QuantizationMode = QuantizationMode.INT8_SYM,
                     **kwargs: Any) -> None:
            if mode in _WEIGHT_ONLY:
                raise FeatureNotAvailableError(
                    f"OpenVINOQuantizer: {mode} (weight-only compression) is not implemented in "
                    "edgetorch; use INT8_SYM, INT8_MIXED or INT8_TRANSFORMER")
            presets = nncf.QuantizationPreset
            if mode is QuantizationMode.INT8_SYM:
                kwargs.setdefault("preset", presets.PERFORMANCE)
            elif mode is QuantizationMode.INT8_MIXED:
                kwargs.setdefault("preset", presets.MIXED)
            else:
                kwargs.setdefault("model_type", nncf.ModelType.TRANSFORMER)
            super().__init__(**kwargs)
            self.mode = mode

        def set_ignored_scope(self, names: list[str] | None = None,
                              patterns: list[str] | None = None,
                              types: list[str] | None = None,
                              subgraphs: list[tuple[list[str], list[str]]] | None = None,
                              validate: bool = True) -> None:
            """Keep nodes out of quantization (ExecuTorch's signature)."""
            super().set_ignored_scope(
                names=names, patterns=patterns, types=types, validate=validate,
                subgraphs=[nncf.Subgraph(inputs=i, outputs=o) for i, o in subgraphs or []])

    _Quantizer.__name__ = _Quantizer.__qualname__ = "OpenVINOQuantizer"
    return _Quantizer


def __getattr__(name: str):
    # NNCF's class is the base, so it is built on first use (importing this module stays
    # cheap and works without NNCF until the quantizer is asked for).
    if name == "OpenVINOQuantizer":
        cls = _nncf_quantizer_class()
        globals()["OpenVINOQuantizer"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def quantize_model(captured_model: torch.fx.GraphModule, calibration_dataset: Iterable, *,
                   mode: QuantizationMode = QuantizationMode.INT8_SYM, subset_size: int = 300,
                   fast_bias_correction: bool | None = True, smooth_quant: bool = False,
                   transform_fn: Callable[[Any], Any] | None = None,
                   extra_quantizer_options: dict[str, Any] | None = None,
                   **kwargs: Any) -> torch.fx.GraphModule:
    """Quantize ``torch.export.export(...).module()`` with NNCF for OpenVINO (ExecuTorch's
    ``quantize_model``): ``calibration_dataset`` yields model inputs (after ``transform_fn``);
    the first ``subset_size`` calibrate. Returns the quantized ``GraphModule``; export it again
    and lower with ``OpenvinoPartitioner``."""
    nncf, nncf_fx = _nncf()
    options = dict(extra_quantizer_options or {})
    options.pop("mode", None)  # the ``mode`` argument wins, as in ExecuTorch
    quantizer = __getattr__("OpenVINOQuantizer")(mode=mode, **options)
    kwargs.setdefault("fold_quantize", False)
    return nncf_fx.quantize_pt2e(
        captured_model, quantizer, subset_size=subset_size,
        calibration_dataset=nncf.Dataset(calibration_dataset, transform_fn),
        fast_bias_correction=fast_bias_correction, smooth_quant=smooth_quant, **kwargs)
