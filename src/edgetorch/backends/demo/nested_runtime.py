"""Runtime half of ``ExecutorBackend`` (ExecuTorch's test backend of that name): the delegate
blob is a whole ``.pte`` whose ``forward`` runs in a nested method of this runtime. It shows
that a delegate may be anything the runtime can execute; the blob is checked like any file
(``load_program``). NumPy only: no torch.
"""

from __future__ import annotations

from typing import Any

from ...errors import InvalidProgramError
from ...runtime.backends import BackendExecutionContext, BackendInitContext, backend
from .runtime import store_outputs

BACKEND_ID = "ExecutorBackend"


@backend(BACKEND_ID)
class NestedProgramBackend:
    def is_available(self) -> bool:
        return True

    def init(self, blob: memoryview, compile_specs: dict[str, bytes],
             context: BackendInitContext | None = None) -> Any:
        from ...runtime.runtime import Runtime  # the runtime package imports the backends

        return Runtime.get().load_program(bytes(blob)).load_method("forward")

    def execute(self, method: Any, values: list[Any], args: list[int],
                context: BackendExecutionContext | None = None) -> None:
        meta = method.metadata
        n_in, n_out = meta.num_inputs(), meta.num_outputs()
        if len(args) != n_in + n_out:
            raise InvalidProgramError(
                f"{BACKEND_ID}: called with {len(args)} values; the nested program takes "
                f"{n_in} inputs and {n_out} outputs")
        results = method.execute([values[i] for i in args[:n_in]])
        store_outputs(values, args[n_in:], results, context)

    def destroy(self, method: Any) -> None:
        pass
