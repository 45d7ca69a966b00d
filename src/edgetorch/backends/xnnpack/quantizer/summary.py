"""What a ``--quantize`` run quantized, and what it left in float and why.

For the PT2E modes (static, dynamic) it is read off the converted graph: a convolution or
linear whose weight comes through a dequantize node is quantized. For 8da4w it is the choice
:mod:`.int4_linears` made per ``nn.Linear``. Layers are named by their module path.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch

SCHEMES = {
    "static": "int8 per-channel weights, int8 activations calibrated on {samples}",
    "dynamic": "int8 per-channel weights, int8 activations quantized at each call",
    "8da4w": "int4 weights in groups of {group}, int8 activations quantized per token at each "
             "call",
}
# Why a weighted layer stays float when the quantizer did not take it.
NOT_TAKEN = {
    "static": "the quantizer has no pattern for it here",
    "dynamic": "dynamic quantization covers Linear layers only (XNNPACK's dynamic int8 GEMM); "
               "use --quantize static for convolutions",
    "8da4w": "8da4w quantizes Linear layers only",
}
_WEIGHTED = {"conv1d": "Conv1d", "conv2d": "Conv2d", "conv3d": "Conv3d", "linear": "Linear",
             "conv_transpose1d": "ConvTranspose1d", "conv_transpose2d": "ConvTranspose2d"}
NAMES_SHOWN = 4


@dataclass(frozen=True)
class Layer:
    name: str  # module path ("" for the top-level module)
    kind: str  # Conv2d, Linear, ...
    reason: str = ""  # why it stays float


@dataclass
class QuantizationSummary:
    mode: str
    scheme: str
    quantized: list[Layer] = field(default_factory=list)
    kept_float: list[Layer] = field(default_factory=list)

    def lines(self) -> list[str]:
        total = len(self.quantized) + len(self.kept_float)
        counts = Counter(layer.kind for layer in self.quantized)
        what = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "nothing"
        out = [f"quantized ({self.mode}: {self.scheme}): {what} of {total} weighted layers"]
        groups: dict[tuple[str, str], list[str]] = {}
        for layer in self.kept_float:
            groups.setdefault((layer.kind, layer.reason), []).append(layer.name or "(top)")
        for (kind, reason), names in groups.items():
            shown = ", ".join(names[:NAMES_SHOWN]) + (", ..." if len(names) > NAMES_SHOWN else "")
            out.append(f"  left in float: {len(names)} {kind} ({shown}): {reason}")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def pt2e_summary(converted: torch.fx.GraphModule, mode: str, samples: int) -> QuantizationSummary:
    """The summary of a ``convert_pt2e`` result."""
    summary = QuantizationSummary(mode, SCHEMES[mode].format(
        samples=f"{samples} sample{'s' if samples != 1 else ''}"))
    seen: Counter = Counter()
    for node in converted.graph.nodes:
        kind = _weighted_kind(node)
        if kind is None:
            continue
        name = _module_name(node)
        seen[name] += 1
        if seen[name] > 1:
            name = f"{name} #{seen[name]}"
        weight = node.args[1] if len(node.args) > 1 else None
        if isinstance(weight, torch.fx.Node) and "dequantize" in str(weight.target):
            summary.quantized.append(Layer(name, kind))
        else:
            summary.kept_float.append(Layer(name, kind, NOT_TAKEN[mode]))
    return summary


def _weighted_kind(node: torch.fx.Node) -> str | None:
    if node.op != "call_function":
        return None
    packet = getattr(node.target, "_opname", None) or getattr(node.target, "__name__", "")
    return _WEIGHTED.get(str(packet).split(".")[0])


def _module_name(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path, cls = list(stack.values())[-1]
    cls_name = cls.rsplit(".", 1)[-1] if isinstance(cls, str) else getattr(cls, "__name__", "")
    if cls_name in _WEIGHTED.values():
        return path
    return f"{path} ({cls_name})"  # e.g. MultiheadAttention's in/out projections
