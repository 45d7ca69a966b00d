"""Tapping intermediate values of an exported graph (ExecuTorch's
``devtools.intermediate_output_tap``).

Present so far: :mod:`._selectors` (which nodes to tap) and :mod:`._reducers` (what a tap
keeps of a value). The tap and strip passes and the AOT-vs-runtime comparison helpers of
ExecuTorch's package are not written yet, so this package re-exports nothing of them.
"""

from ._reducers import FULL_TENSOR, STATS, StatReducer, get_reducer
from ._selectors import (
    NodeSelector,
    select_all,
    select_all_call_function,
    select_any,
    select_by_module_class,
    select_by_module_path,
    select_by_op_type,
    select_not,
)

__all__ = ["FULL_TENSOR", "STATS", "NodeSelector", "StatReducer", "get_reducer", "select_all", "select_all_call_function", "select_any", "select_by_module_class",
           "select_by_module_path", "select_by_op_type", "select_not"]
