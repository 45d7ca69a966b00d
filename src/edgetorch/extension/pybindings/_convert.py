"""Values crossing the pybindings boundary, the way ExecuTorch's C++ pybindings convert them.

ExecuTorch's portable pybindings accept a flat sequence of torch tensors, ``None``, bools, ints
and floats; a tensor must be contiguous or (4-D) channels-last and live on the CPU (or CUDA);
tensor outputs come back as torch tensors laid out in the output's dim order. Everything else
is a ``RuntimeError`` whose message ExecuTorch's users already grep for, so the wording of
those messages is kept.

torch is imported lazily: this layer sits on the compiler side, the runtime stays torch-free.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from ...errors import EdgeTorchError
from ...runtime.interop import to_numpy

F = TypeVar("F", bound=Callable[..., Any])

# ExecuTorch's ``toString(ScalarType)`` spellings, used in ``TensorInfo.__repr__``.
SCALAR_TYPE_NAMES = {
    0: "Byte", 1: "Char", 2: "Short", 3: "Int", 4: "Long", 5: "Half", 6: "Float", 7: "Double",
    8: "ComplexHalf", 9: "ComplexFloat", 10: "ComplexDouble", 11: "Bool", 12: "QInt8",
    13: "QUInt8", 14: "QInt32", 15: "BFloat16", 16: "QUInt4x2", 17: "QUInt2x4",
    18: "Bits1x8", 19: "Bits2x4", 20: "Bits4x2", 21: "Bits8", 22: "Bits16",
    23: "Float8_e5m2", 24: "Float8_e4m3fn", 25: "Float8_e5m2fnuz", 26: "Float8_e4m3fnuz",
    27: "UInt16", 28: "UInt32", 29: "UInt64",
}

CHANNELS_LAST = (0, 2, 3, 1)


def _torch() -> Any:
    import torch

    return torch


def as_runtime_error(fn: F) -> F:
    """Re-raise edgetorch's typed errors as ``RuntimeError`` (what pybind11 turns a C++
    ``std::runtime_error`` into), keeping the typed error as ``__cause__`` and its message."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except EdgeTorchError as e:
            raise RuntimeError(str(e)) from e

    return wrapper  # type: ignore[return-value]


def as_sequence(inputs: Any) -> Sequence[Any]:
    """ExecuTorch overloads ``__call__``/``call`` with a single-tensor form: a bare tensor is
    one input, not a sequence of rows."""
    torch = _torch()
    if isinstance(inputs, torch.Tensor):
        return [inputs]
    if isinstance(inputs, (list, tuple)):
        return inputs
    raise RuntimeError(
        f"inputs must be a list or tuple of tensors and scalars, got {type(inputs).__name__}; "
        "pass e.g. module.forward([x, y])")


def input_to_runtime(i: int, x: Any, method_name: str) -> Any:
    """One Python input to what ``edgetorch.runtime.Method.execute`` takes."""
    torch = _torch()
    if isinstance(x, torch.Tensor):
        if not (x.is_contiguous() or (x.dim() == 4 and x.is_contiguous(
                memory_format=torch.channels_last))):
            raise RuntimeError(f"Input {i} for method {method_name} should be contiguous or "
                               "channels-last.")
        if x.device.type not in ("cpu", "cuda") and x.numel() != 0:
            raise RuntimeError(
                f"Input {i} for method {method_name} is on device {x.device}, and only CPU and "
                "CUDA tensors can be passed to a method.")
        # NumPy keeps the strides, so a channels-last tensor reaches the runtime as a view
        # of its logical shape and is copied into the method's planned layout there.
        return to_numpy(x)
    if x is None or isinstance(x, (bool, int, float)):
        return x
    raise RuntimeError(f"Unsupported python type {type(x)}. Ensure that inputs are passed as a "
                       "flat list of tensors.")


def inputs_to_runtime(inputs: Any, method_name: str) -> list[Any]:
    return [input_to_runtime(i, x, method_name) for i, x in enumerate(as_sequence(inputs))]


def output_to_python(value: Any, dim_order: tuple[int, ...] | None, clone: bool = True) -> Any:
    """A runtime output as ExecuTorch returns it: tensors as torch tensors in the output's dim
    order (channels-last stays channels-last), scalars and strings as Python values. With
    ``clone=False`` a tensor is a zero-copy view of the method's output memory (ExecuTorch's
    ``clone_outputs=False``): the next run overwrites it."""
    if isinstance(value, np.ndarray):
        torch = _torch()
        from ...runtime.interop import to_torch

        # np.require, not np.ascontiguousarray: that one turns a 0-dim output into shape (1,)
        t = to_torch(value if not clone else np.require(value, requirements="C"))
        if dim_order == CHANNELS_LAST and t.dim() == 4:
            t = t.contiguous(memory_format=torch.channels_last)
        elif not clone and not t.is_contiguous():
            t = t.contiguous()
        return t
    if isinstance(value, np.generic):
        return value.item()
    return value
