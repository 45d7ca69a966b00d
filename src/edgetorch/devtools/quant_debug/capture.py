"""The torch-side stages: the float program, the fake-quantized one (as is, and with every
layer fed float inputs), and the Edge program, each run on one sample keeping the values the
debugger compares."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import torch

from ...errors import QuantDebugError
from ..inspector._inspector_utils import DEBUG_HANDLE


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    return None


class _Keep(torch.fx.Interpreter):
    """Runs a graph and keeps the outputs of the nodes named in ``wanted``; the outputs of
    the nodes named in ``replace`` are swapped for the given tensors after being kept (so the
    rest of the graph sees them instead)."""

    def __init__(self, gm: torch.fx.GraphModule, wanted: Collection[str],
                 replace: Mapping[str, torch.Tensor] | None = None) -> None:
        super().__init__(gm)
        self.wanted = set(wanted)
        self.replace = replace or {}
        self.values: dict[str, torch.Tensor] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        value = super().run_node(n)
        if n.name in self.wanted:
            tensor = _first_tensor(value)
            if tensor is not None:
                self.values[n.name] = tensor.detach().clone()
        swap = self.replace.get(n.name)
        if swap is not None and isinstance(value, torch.Tensor):
            return swap.to(value.dtype).reshape(value.shape)
        return value


def capture(gm: torch.fx.GraphModule, inputs: Sequence[torch.Tensor], wanted: Collection[str],
            replace: Mapping[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    """Outputs of the ``wanted`` nodes of ``gm`` on ``inputs`` (see :class:`_Keep`)."""
    runner = _Keep(gm, wanted, replace)
    with torch.no_grad():
        runner.run(*inputs)
    return runner.values


def capture_handles(gm: torch.fx.GraphModule, inputs: Sequence[torch.Tensor],
                    handles: Collection[int]) -> dict[int, torch.Tensor]:
    """Each wanted debug handle's value: the output of the last node carrying it."""
    last: dict[int, str] = {}
    for node in gm.graph.nodes:
        handle = node.meta.get(DEBUG_HANDLE)
        if handle in handles and node.op == "call_function" and "getitem" not in node.name:
            last[handle] = node.name
    values = capture(gm, inputs, set(last.values()))
    return {h: values[name] for h, name in last.items() if name in values}


def model_output(gm: torch.fx.GraphModule | torch.nn.Module,
                 inputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """The first output of the model (the one the metrics read)."""
    with torch.no_grad():
        out = gm(*inputs)
    while isinstance(out, (tuple, list)):
        out = out[0]
    if not isinstance(out, torch.Tensor):  # a ModelOutput: its first tensor field
        hidden = getattr(out, "last_hidden_state", None)
        out = hidden if isinstance(hidden, torch.Tensor) else next(
            (v for v in vars(out).values() if isinstance(v, torch.Tensor)), None)
        if out is None:
            raise QuantDebugError("the model's output holds no tensor; return a tensor (or a "
                                  "tuple whose first item is one)")
    return out.detach()
