"""``ScalarToTensorPass``: a Python scalar given where the operator's schema says ``Tensor``
becomes a constant tensor (ExecuTorch's ``exir.passes.ScalarToTensorPass``)."""

from __future__ import annotations

from typing import Any

import torch

from ..pass_base import ExportPass, PassResult


class ScalarToTensorPass(ExportPass):
    def __init__(self) -> None:
        super().__init__()
        self._modified = False

    def call_operator(self, op: Any, args: tuple, kwargs: dict, meta: Any) -> Any:
        schema = getattr(op, "_schema", None)
        if schema is not None:
            args, kwargs = self._coerce(schema, args, kwargs)
        return super().call_operator(op, args, kwargs, meta)

    def _coerce(self, schema: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        new_args, new_kwargs = list(args), dict(kwargs)
        for i, arg in enumerate(schema.arguments):
            if i < len(new_args):
                new_args[i] = self._tensor_if_needed(new_args[i], arg)
            elif arg.name in new_kwargs:
                new_kwargs[arg.name] = self._tensor_if_needed(new_kwargs[arg.name], arg)
        return tuple(new_args), new_kwargs

    def _tensor_if_needed(self, value: Any, arg: Any) -> Any:
        if isinstance(value, (bool, int, float)) and isinstance(arg.type, torch.TensorType):
            self._modified = True
            # A real constant, not a fake tensor of the tracing mode.
            with torch.utils._python_dispatch._disable_current_modes():
                return torch.tensor(value)
        return value

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        self._modified = False
        result = super().call(graph_module)
        return PassResult(result.graph_module, self._modified)
