"""The ahead-of-time half of the XNNPACK backend: ``XnnpackBackend.preprocess``.

``XnnpackBackend`` is a ``BackendDetails`` (the class name is the backend id stored in the
``.pte``). It turns a delegated Edge subgraph into ExecuTorch 1.5's XNNPACK blob: the
``XH00`` header, the ``XN01`` ``XNNGraph`` flatbuffer and an empty constant region, with the
weights in the program's named data (``PreprocessResult.data_store_output``). The runtime half
is ``edgetorch.backends.xnnpack.runtime.XnnpackBackend`` (same id, no torch); the rules that
turn each operator into XNNPACK nodes are in ``aot/``; ExecuTorch's own
runtime with the real XNNPACK reads the same blobs.

The delegate's arguments are its user inputs in placeholder order, then its outputs
(``external_id`` ``0..n-1`` and ``n..``), as ExecuTorch numbers them.
"""

from __future__ import annotations

from torch.export import ExportedProgram

from ...exir._serialize._named_data_store import NamedDataStore
from ...exir.backend import BackendDetails, CompileSpec, PreprocessResult
from .aot import nn, ops  # noqa: F401  (register the operator rules)
from .aot.builder import OP_RULES, Builder
from .serialization import serialize_xnnpack_binary

__all__ = ["OP_RULES", "XnnpackBackend"]


class XnnpackBackend(BackendDetails):
    """Compiles float32 Edge subgraphs to ExecuTorch's XNNPACK delegate format."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        store = NamedDataStore()
        graph = Builder(edge_program, store).build()
        return PreprocessResult(
            processed_bytes=serialize_xnnpack_binary(graph, b""),
            debug_handle_map={},
            data_store_output=store.get_named_data_store_output(),
        )
