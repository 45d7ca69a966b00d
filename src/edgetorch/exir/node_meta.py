"""Provenance carried by graph nodes, in one place.

Every pass that replaces a node with one or more new nodes calls :func:`copy_provenance` so
that the user's source line (``stack_trace``), the module path (``nn_module_stack``,
``source_fn_stack``), the original ATen op (``original_aten``, ``from_node``) and the debug
handle that joins a runtime event back to the user's model travel with it. Hand-copying single
keys in each pass is what this replaces.
"""

from __future__ import annotations

import torch

#: Node metadata that describes where a node came from (never its value or tensor spec).
PROVENANCE_KEYS: tuple[str, ...] = (
    "stack_trace",
    "nn_module_stack",
    "source_fn_stack",
    "original_aten",
    "from_node",
    "torch_fn",
    "debug_handle",
)


def copy_provenance(src: torch.fx.Node, *dsts: torch.fx.Node, overwrite: bool = False) -> None:
    """Copy ``src``'s provenance metadata onto each of ``dsts``.

    Keys already present on a destination are kept unless ``overwrite`` is true, so a node
    built from several sources keeps the first provenance it was given.
    """
    for dst in dsts:
        for key in PROVENANCE_KEYS:
            if key in src.meta and (overwrite or key not in dst.meta):
                dst.meta[key] = src.meta[key]
