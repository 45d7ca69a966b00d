"""From an FX node's metadata to TOSA's tensor description: ``map_dtype`` (torch dtype to
tosa-tools' ``DType``) and ``extract_tensor_meta`` (dtype and shape), ExecuTorch's names."""

from __future__ import annotations

from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

from ....errors import InvalidArgumentError
from ..runtime.tosa_tools import require_tosa_tools

# torch dtype -> name of tosa-tools' DType (TOSA has no 64-bit or complex tensors; uint8
# travels as INT8, as ExecuTorch maps it)
TOSA_DTYPE_NAMES = {
    torch.float32: "FP32", torch.float16: "FP16", torch.bfloat16: "BF16",
    torch.float8_e4m3fn: "FP8E4M3", torch.float8_e5m2: "FP8E5M2",
    torch.int8: "INT8", torch.uint8: "INT8", torch.int16: "INT16", torch.int32: "INT32",
    torch.bool: "BOOL",
}


def map_dtype(data_type: torch.dtype) -> Any:
    """The tosa-tools ``DType`` of ``data_type``."""
    name = TOSA_DTYPE_NAMES.get(data_type)
    if name is None:
        raise InvalidArgumentError(
            f"TOSA has no tensor type for {data_type}; supported: "
            f"{', '.join(sorted({str(d) for d in TOSA_DTYPE_NAMES}))}")
    return getattr(require_tosa_tools("tosa_serializer").DType, name)


def extract_tensor_meta(meta: dict) -> tuple[Any, tuple[int, ...]]:
    """``(DType, shape)`` of the value in a node's ``meta["val"]`` (the first one of a
    multi-output node)."""
    val = meta.get("val")
    if isinstance(val, (tuple, list)):
        if not val:
            raise InvalidArgumentError("node.meta['val'] is an empty sequence; expected a "
                                       "FakeTensor to describe")
        val = val[0]
    if not isinstance(val, FakeTensor):
        raise InvalidArgumentError(f"expected node.meta['val'] to be a FakeTensor, got "
                                   f"{type(val).__name__}; run the node through export first")
    return map_dtype(val.dtype), tuple(val.size())
