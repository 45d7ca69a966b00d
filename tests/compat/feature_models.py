"""Whole-program features as small modules, shared by edgetorch's tests and the ExecuTorch
reference tool (this file imports only torch and numpy, so both environments can load it).

Each feature gives: the exported programs (one or several methods), constant methods, the
``ExecutorchBackendConfig`` options it needs, and a *scenario*: a sequence of method calls
whose outputs (in order) must equal eager PyTorch, call after call (state persists).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.export import Dim, ExportedProgram, export


@dataclass
class Feature:
    programs: dict[str, ExportedProgram]
    calls: list[tuple[str, list[torch.Tensor]]]
    eager: dict[str, Callable[..., Any]]
    constant_methods: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def expected(self) -> list[np.ndarray]:
        """Eager outputs of the scenario, flattened in call order."""
        outs = []
        with torch.no_grad():
            for method, inputs in self.calls:
                outs.extend(flatten(self.eager[method](*inputs)))
        return outs


def flatten(value: Any) -> list[np.ndarray]:
    if isinstance(value, (tuple, list)):
        return [np.asarray(v.detach().numpy() if isinstance(v, torch.Tensor) else v) for v in value]
    if isinstance(value, torch.Tensor):
        return [value.detach().numpy()]
    return [np.asarray(value)]


def run_scenario(feature: Feature, load_method: Callable[[str], Any]) -> list[np.ndarray]:
    """Run the scenario's calls through ``load_method(name).execute(inputs)`` (either runtime)."""
    methods: dict[str, Any] = {}
    outs = []
    for name, inputs in feature.calls:
        if name not in methods:
            methods[name] = load_method(name)
        outs.extend(flatten(list(methods[name].execute(list(inputs)))))
    return outs


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---- multiple methods ---------------------------------------------------------------------


class Encoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.proj = torch.nn.Linear(8, 16)

    def forward(self, x):
        return torch.tanh(self.proj(x))


class Decoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(2)
        self.out = torch.nn.Linear(16, 4)

    def forward(self, h):
        return torch.softmax(self.out(h), dim=-1)


def multi_method() -> Feature:
    enc, dec = Encoder().eval(), Decoder().eval()
    g = _gen(0)
    x, h = torch.randn(2, 8, generator=g), torch.randn(2, 16, generator=g)
    return Feature(
        programs={"encode": export(enc, (x,)), "decode": export(dec, (h,))},
        calls=[("encode", [x]), ("decode", [h]), ("encode", [x * 2])],
        eager={"encode": enc, "decode": dec},
    )


# ---- constant methods ---------------------------------------------------------------------

CONSTANTS = {"get_max_seq_len": 128, "get_eos_ids": [2, 3], "get_temperature": 0.5,
             "use_kv_cache": True}


def constant_methods() -> Feature:
    model = Decoder().eval()
    h = torch.randn(1, 16, generator=_gen(3))
    eager: dict[str, Callable[..., Any]] = {"forward": model}
    for name, value in CONSTANTS.items():
        eager[name] = lambda value=value: value
    return Feature(
        programs={"forward": export(model, (h,))},
        calls=[("forward", [h])] + [(name, []) for name in CONSTANTS],
        eager=eager,
        constant_methods=dict(CONSTANTS),
    )


# ---- dynamic shapes -----------------------------------------------------------------------


class Dynamic(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = torch.relu(self.lin(x))
        return y.reshape(-1) * 2, torch.cat([y, x], dim=0).sum(dim=1)


DYN_MAX = 16


def dynamic_shapes() -> Feature:
    model = Dynamic().eval()
    g = _gen(5)
    ep = export(model, (torch.randn(4, 8, generator=g),),
                dynamic_shapes={"x": {0: Dim("batch", min=1, max=DYN_MAX)}})
    calls = [("forward", [torch.randn(n, 8, generator=g)]) for n in (4, 1, 7, DYN_MAX, 2)]
    return Feature(programs={"forward": ep}, calls=calls, eager={"forward": model})


# ---- mutable state ------------------------------------------------------------------------


class KVCache(torch.nn.Module):
    """A counter and a tiny ring of cached rows, updated in place every call."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(1, dtype=torch.int64))
        self.register_buffer("cache", torch.zeros(4, 3))

    def forward(self, x):
        self.count.add_(1)
        self.cache.copy_(torch.cat([self.cache[1:], x], dim=0))
        return self.cache.sum(dim=0) * self.count.to(torch.float32)


def mutable_state() -> Feature:
    model = KVCache()
    eager_model = KVCache()
    g = _gen(6)
    ep = export(model, (torch.randn(1, 3, generator=g),))
    calls = [("forward", [torch.randn(1, 3, generator=g)]) for _ in range(5)]
    return Feature(programs={"forward": ep}, calls=calls, eager={"forward": eager_model})


# ---- control flow -------------------------------------------------------------------------


class Branchy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(7)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        def true_fn(x, y):
            return (self.lin(x) + y).relu()

        def false_fn(x, y):
            return torch.cond(y.sum() > 0, lambda a, b: a - b, lambda a, b: a * b, (x, y))

        return torch.cond(x.sum() > 0, true_fn, false_fn, (x, y))


def control_flow() -> Feature:
    model = Branchy().eval()
    g = _gen(8)
    base = torch.randn(2, 4, generator=g).abs(), torch.randn(2, 4, generator=g).abs()
    ep = export(model, base)
    calls = [("forward", [base[0] * sx, base[1] * sy]) for sx, sy in ((1, 1), (-1, 1), (-1, -1))]
    return Feature(programs={"forward": ep}, calls=calls, eager={"forward": model})


class MapRows(torch.nn.Module):
    """``torch.map`` twice: a closed-over Linear and an extra operand in the first body, the
    first map's rows mapped again (a loop feeding a loop), then an ordinary op."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(11)
        self.lin = torch.nn.Linear(3, 4)

    def forward(self, x, scale):
        from torch._higher_order_ops.map import map as torch_map

        rows = torch_map(lambda row, s: torch.relu(self.lin(row) * s), x, scale)
        rows = torch_map(lambda row, s: row - row.mean() + s[0], rows, scale)
        return torch.tanh(rows)


def map_loop() -> Feature:
    model = MapRows().eval()
    g = _gen(12)
    x, scale = torch.randn(5, 3, generator=g), torch.randn(4, generator=g)
    ep = export(model, (x, scale), strict=True)
    calls = [("forward", [x, scale]),
             ("forward", [torch.randn(5, 3, generator=g), torch.randn(4, generator=g)])]
    return Feature(programs={"forward": ep}, calls=calls, eager={"forward": model})


class AddTwice(torch.nn.Module):
    def forward(self, x, y):
        return x + y + y


class AddOnce(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def device_programs() -> dict[str, ExportedProgram]:
    """Two methods; ``forward2``'s adds go to a delegate on ``cuda:0`` (ExecuTorch's
    DeviceAwarePartitioner), so only it is device planned. Adds only: no Python scalar."""
    inputs = (torch.ones(2, 2), torch.ones(2, 2))
    return {"forward": export(AddOnce(), inputs, strict=True),
            "forward2": export(AddTwice(), inputs, strict=True)}


# ---- external weights ---------------------------------------------------------------------


class TwoLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(9)
        self.a = torch.nn.Linear(6, 12)
        self.b = torch.nn.Linear(12, 3)

    def forward(self, x):
        return self.b(torch.nn.functional.gelu(self.a(x)))


def external_weights() -> Feature:
    model = TwoLayer().eval()
    x = torch.randn(2, 6, generator=_gen(10))
    return Feature(programs={"forward": export(model, (x,))}, calls=[("forward", [x])],
                   eager={"forward": model}, config={"external_constants": True})


FEATURES: dict[str, Callable[[], Feature]] = {
    "multi_method": multi_method,
    "constant_methods": constant_methods,
    "dynamic_shapes": dynamic_shapes,
    "mutable_state": mutable_state,
    "control_flow": control_flow,
    "map_loop": map_loop,
    "external_weights": external_weights,
}
