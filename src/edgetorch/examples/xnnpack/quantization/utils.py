"""``quantize(model, example_inputs, quant_type)``: PT2E quantization with the XNNPACK quantizer
(ExecuTorch's ``examples/xnnpack/quantization/utils.py``)."""

from __future__ import annotations

import logging
from typing import Any

from ....errors import FeatureNotAvailableError
from .. import QuantType

logger = logging.getLogger(__name__)


def _xnnpack_quantizer() -> tuple[Any, Any]:
    try:
        from ....backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )
    except ImportError as e:
        raise FeatureNotAvailableError(
            "quantization is not available yet: edgetorch.backends.xnnpack.quantizer."
            f"xnnpack_quantizer.XNNPACKQuantizer cannot be imported ({e}); export without "
            "--quantize (fp32) until the XNNPACK quantizer lands") from e
    return XNNPACKQuantizer, get_symmetric_quantization_config


def quantize(model: Any, example_inputs: tuple, quant_type: QuantType = QuantType.STATIC_PER_TENSOR
             ) -> Any:
    """prepare_pt2e -> one calibration run on ``example_inputs`` -> convert_pt2e."""
    XNNPACKQuantizer, get_symmetric_quantization_config = _xnnpack_quantizer()
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    quantizer = XNNPACKQuantizer()
    per_channel = quant_type in (QuantType.STATIC_PER_CHANNEL, QuantType.DYNAMIC_PER_CHANNEL)
    dynamic = quant_type == QuantType.DYNAMIC_PER_CHANNEL
    quantizer.set_global(get_symmetric_quantization_config(is_per_channel=per_channel,
                                                           is_dynamic=dynamic))
    prepared = prepare_pt2e(model, quantizer)
    prepared(*example_inputs)
    converted = convert_pt2e(prepared)
    logger.info("Quantized model: %s", converted)
    return converted
