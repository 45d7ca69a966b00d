"""The runtime half of the XNNPACK backend: ExecuTorch's XNNPACK delegate blobs run with NumPy
(no torch). ``backend.py`` has ``XnnpackBackend`` (``init``: parse the blob, load the
constants, compile each node by its rule in ``nodes*.py``; ``execute``), ``kernels*.py`` the
numerics the rules call, and the backend plan: ``plan.py`` (a graph called again with the same
input shapes runs one generated function), ``fusions.py`` (chains of nodes as one step in a
plan), ``arena.py`` (the convolutions' outputs in one arena) and the clamps folded into int8
producers (``nodes_quant.fold_clamps``), each a load pass of ``runtime.optimize``."""

from .backend import CompiledGraph, XnnpackBackend

__all__ = ["CompiledGraph", "XnnpackBackend"]
