"""``IntermediateOutputCapturer`` (ExecuTorch 1.5.1's
``devtools.inspector._intermediate_output_capturer``): runs a graph module eagerly and keeps
each operator's output under its debug handle, the AOT side of a numeric gap."""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule
from torch.fx.interpreter import Interpreter

from ._inspector_utils import DEBUG_HANDLE, DebugHandle, NodeFilter, as_debug_handle


class IntermediateOutputCapturer(Interpreter):
    """``run_and_capture(*inputs)`` returns {debug handle: output} for the nodes every one of
    ``node_filters`` matches; when several nodes share a handle, the last one's output stands
    (a decomposed op's result). Tensors are detached copies."""

    def __init__(self, module: GraphModule) -> None:
        super().__init__(module)
        self.node_filters = [NodeFilter(DEBUG_HANDLE, "call_function", exclude_ops=["getitem"])]
        self._captured: dict[DebugHandle, Any] | None = None

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        if self._captured is not None and all(f.matches(n) for f in self.node_filters):
            self._captured[as_debug_handle(n.meta[DEBUG_HANDLE])] = _detached(result)
        return result

    def run_and_capture(self, *args: Any, **kwargs: Any) -> dict[DebugHandle, Any]:
        self._captured = captured = {}
        try:
            self.run(*args, **kwargs)
        finally:
            self._captured = None
        return captured


def _detached(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in value]
    return value
