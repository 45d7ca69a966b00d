"""The tap operator, ``executorch_devtools::tap.Tensor(Tensor x, str reducer_name)`` (ExecuTorch's
name and schema): a placeholder the tap pass puts after a node. Eagerly it computes its
reducer, so the tapped program's own outputs are what the runtime will report; no partitioner
takes it, and ``strip_taps_`` replaces it by the reducer's operators before ``to_executorch``.
Importing this module defines it."""

from __future__ import annotations

import torch

lib = torch.library.Library("executorch_devtools", "DEF")  # noqa: TOR901 (ExecuTorch's namespace)
lib.define("tap.Tensor(Tensor x, str reducer_name) -> Tensor")


def _tap(x: torch.Tensor, reducer_name: str) -> torch.Tensor:
    from ._reducers import get_reducer  # the reducers import the Edge dialect, which is heavy

    return get_reducer(reducer_name).eager(x)


lib.impl("tap.Tensor", _tap, "CompositeExplicitAutograd")
