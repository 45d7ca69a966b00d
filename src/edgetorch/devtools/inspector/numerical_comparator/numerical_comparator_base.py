"""``NumericalComparatorBase`` (``executorch.devtools.inspector.numerical_comparator``): how
``Inspector.calculate_numeric_gap`` turns matched AOT and runtime outputs into gap rows.

Subclass it and implement ``element_compare(a, b) -> float`` for a metric of your own;
override ``preprocessing(mapping)`` to transform outputs first (dequantize, change layout).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from .._inspector_utils import DebugHandle

if TYPE_CHECKING:
    from .._inspector import Inspector

# (AOT debug handle, AOT output) -> (runtime debug handle, runtime output)
IntermediateOutputMapping = dict[tuple[DebugHandle, Any], tuple[DebugHandle, Any]]

GAP_COLUMNS = ["aot_debug_handle", "aot_ops", "aot_intermediate_output", "runtime_ops",
               "runtime_debug_handle", "runtime_intermediate_output", "gap"]


class NumericalComparatorBase(ABC):
    def __init__(self, inspector: Inspector | None = None) -> None:
        self._inspector = inspector

    @property
    def inspector(self) -> Inspector | None:
        return self._inspector

    @inspector.setter
    def inspector(self, value: Inspector | None) -> None:
        self._inspector = value

    def preprocessing(self, mapping: IntermediateOutputMapping) -> IntermediateOutputMapping:
        """Transform the matched outputs before comparing them (identity by default)."""
        return mapping

    @abstractmethod
    def element_compare(self, a: Any, b: Any) -> float:
        """Distance between one AOT output ``a`` and the runtime's ``b``."""

    @staticmethod
    def _validate_preprocessing_output(mapping: IntermediateOutputMapping) -> None:
        if not isinstance(mapping, dict):
            raise TypeError(f"preprocessing() must return a dict, got {type(mapping).__name__}: "
                            "{(aot_debug_handle, aot_output): (runtime_debug_handle, output)}")
        for side, pairs in (("key", mapping.keys()), ("value", mapping.values())):
            for pair in pairs:
                if not isinstance(pair, tuple) or len(pair) != 2:
                    raise ValueError(f"Invalid {side} format: preprocessing() returned "
                                     f"{pair!r}; each must be a (debug_handle, output) pair")
                handle = pair[0]
                if not isinstance(handle, tuple) or not all(isinstance(h, int) for h in handle):
                    which = "AOT" if side == "key" else "runtime"
                    raise ValueError(f"Invalid {which} debug handle {handle!r} returned by "
                                     "preprocessing(); a debug handle is a tuple of ints")

    def _compare_intermediate_outputs(self, a: Any, b: Any) -> list[float]:
        a_seq = isinstance(a, Sequence) and not isinstance(a, torch.Tensor)
        b_seq = isinstance(b, Sequence) and not isinstance(b, torch.Tensor)
        if a_seq and b_seq:
            if len(a) != len(b):
                raise ValueError(f"cannot compare {len(a)} AOT outputs with {len(b)} runtime "
                                 "outputs")
            return [self.element_compare(x, y) for x, y in zip(a, b)]
        if a_seq or b_seq:
            raise ValueError("cannot compare a sequence of outputs with a single output")
        return [self.element_compare(a, b)]

    def compare(self, mapping: IntermediateOutputMapping,
                aot_debug_handle_to_op_names: dict[DebugHandle, list[str]],
                runtime_debug_handle_to_op_names: dict[DebugHandle, list[str]]):
        """Preprocess, compare each matched pair, and return one row per pair."""
        import pandas as pd

        from .._inspector_utils import find_op_names

        mapping = self.preprocessing(mapping)
        self._validate_preprocessing_output(mapping)
        rows = []
        for (aot_handle, aot_out), (runtime_handle, runtime_out) in mapping.items():
            if aot_out is None or runtime_out is None:
                continue
            # An AOT node with several outputs (an undecomposed unbind in the ATen graph) has
            # no single runtime counterpart.
            if isinstance(aot_out, Sequence) and len(aot_out) > 1:
                continue
            rows.append({
                "aot_debug_handle": aot_handle,
                "aot_ops": find_op_names(aot_handle, aot_debug_handle_to_op_names),
                "aot_intermediate_output": aot_out,
                "runtime_ops": find_op_names(runtime_handle, runtime_debug_handle_to_op_names),
                "runtime_debug_handle": runtime_handle,
                "runtime_intermediate_output": runtime_out,
                "gap": self._compare_intermediate_outputs(aot_out, runtime_out),
            })
        return pd.DataFrame(rows, columns=GAP_COLUMNS)
