"""``TapSpec``: what one tap records, so the runtime's flat outputs can be matched back to the
nodes they came from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TapSpec:
    """One tap: the tapped node (``node_name``, ``op_target`` as ``str(node.target)``), where its
    value lands in the program's flat outputs (``output_index``, stable through ``to_edge``,
    lowering and ``to_executorch`` because taps are only ever appended), the reducer's name and
    fields (``()``: the whole tensor), and the node's source line and innermost module (its
    path, e.g. ``layers.1.attention``, and class name) when export recorded them."""

    node_name: str
    op_target: str
    output_index: int
    reducer_name: str
    fields: tuple[str, ...]
    stack_trace: str | None = None
    module_path: str | None = None
    module_class: str | None = None
