"""Which ``nn.Linear`` layers 8da4w (torchao's ``Int8DynamicActivationIntxWeightConfig``) can take.

torchao swaps a Linear's weight for a quantized tensor subclass that supports the Linear's own
``F.linear`` call and little else. A weight that something else reads fails at export
(``NotImplementedError: IntxUnpackedToInt8Tensor ... aten.t``): ``nn.MultiheadAttention`` passes
``out_proj.weight`` to ``multi_head_attention_forward`` itself, a tied embedding reads the
output layer's weight, a module may compute with ``self.proj.weight.T``. Such layers are found
by running the model once, noting every torch call that reads a Linear's weight outside that
Linear's own forward, and stay in float.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree

# Reading a weight's metadata is fine: the quantized subclass has it. (``.T`` or ``.data`` are
# reads of the values.)
_METADATA = {"shape", "dtype", "device", "layout", "ndim", "requires_grad", "is_cuda", "size",
             "dim", "numel", "is_floating_point", "is_contiguous"}


def _call_name(func) -> str:
    name = getattr(func, "__name__", str(func))
    if name == "__get__":  # a property: Tensor.T.__get__ is bound to the descriptor named T
        name = "." + getattr(getattr(func, "__self__", None), "__name__", name)
    return name


@dataclass(frozen=True)
class LinearChoice:
    name: str
    quantize: bool
    reason: str = ""  # why not, when not


def choose_linears(model: nn.Module, example: tuple, group_size: int) -> list[LinearChoice]:
    """Every ``nn.Linear`` of ``model`` with whether 8da4w quantizes it, and why not."""
    linears = {name: m for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    elsewhere = weights_read_elsewhere(model, example, linears)
    choices = []
    for name, m in linears.items():
        if name in elsewhere:
            choices.append(LinearChoice(name, False, elsewhere[name]))
        elif m.in_features % group_size:
            choices.append(LinearChoice(name, False, f"input size {m.in_features} is not a "
                                        f"multiple of the group size {group_size}"))
        else:
            choices.append(LinearChoice(name, True))
    return choices


def weights_read_elsewhere(model: nn.Module, example: tuple,
                           linears: dict[str, nn.Linear]) -> dict[str, str]:
    """``{linear name: what reads its weight}`` for weights some torch call reads outside
    that Linear's own forward (one eager run of ``model`` on ``example``, no grad)."""
    owner = {id(m.weight): name for name, m in linears.items()}
    running: list[tuple[str, nn.Module]] = []  # the modules whose forward is on the stack
    found: dict[str, str] = {}

    class _Reads(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            call = _call_name(func)
            if call.lstrip(".") not in _METADATA:
                for leaf in pytree.tree_leaves((args, kwargs)):
                    name = owner.get(id(leaf)) if isinstance(leaf, torch.Tensor) else None
                    if name is None or name in found:
                        continue
                    inner_name, inner = running[-1] if running else ("", model)
                    if inner_name != name:
                        where = f" ({inner_name})" if inner_name else ""
                        found[name] = (f"{type(inner).__name__}{where} reads its weight "
                                       f"directly ({call})")
            return func(*args, **kwargs)

    def enter(name):
        return lambda module, args: running.append((name, module))

    def leave(module, args, output):
        running.pop()

    handles = []
    for name, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(enter(name)))
        handles.append(module.register_forward_hook(leave))
    try:
        with torch.no_grad(), _Reads():
            model(*example)
    finally:
        for h in handles:
            h.remove()
    return found
