"""Tapping intermediate values of an exported graph (ExecuTorch's
``devtools.intermediate_output_tap``): backend-agnostic, because a tap is one more user output.

    ep, specs = tap_intermediate_outputs_(export(model, inputs), rules)   # ._tap_pass
    edge = to_edge_transform_and_lower(ep, partitioner=[...])
    strip_taps_(edge)                                                    # ._strip_pass
    outputs = run(edge.to_executorch())        # outputs[spec.output_index] for each tap
    compare_aot_runtime_dataframe(specs, aot_outputs, outputs)           # ._convenience

:mod:`._selectors` say which nodes to tap, :mod:`._reducers` what a tap keeps of a value;
``tap_compare`` does all of the above in one call.
"""

from . import custom_ops_lib  # noqa: F401  (defines executorch_devtools::tap.Tensor)
from ._convenience import compare_aot_runtime_dataframe, tap_compare
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
from ._spec import TapSpec
from ._strip_pass import strip_taps_
from ._tap_pass import TapRule, find_tap_nodes, is_tap_node, tap_intermediate_outputs_

__all__ = ["FULL_TENSOR", "STATS", "NodeSelector", "StatReducer", "TapRule", "TapSpec",
           "compare_aot_runtime_dataframe", "find_tap_nodes", "get_reducer", "is_tap_node", "select_all",
           "select_all_call_function", "select_any", "select_by_module_class",
           "select_by_module_path", "select_by_op_type", "select_not", "strip_taps_",
           "tap_compare", "tap_intermediate_outputs_"]
