"""The runtime ``TOSABackend``: a TOSA delegate's blob is the ``.tosa`` flatbuffer itself, so
it runs directly in tosa-tools' reference model (``tosa_sim``). Registered with the built-in
backends; tosa-tools is imported only when a TOSA delegate is loaded (``edgetorch[arm]``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import InvalidProgramError
from ....runtime.backends import BackendExecutionContext, BackendInitContext, backend
from .tosa_sim import TosaGraphRunner

BACKEND_ID = "TOSABackend"


def write_outputs(outs: list[np.ndarray], values: list[Any], out_args: list[int],
                  context: BackendExecutionContext | None, where: str) -> None:
    """Copy delegate results into the method's output slots (planned memory when it fits)."""
    if len(outs) != len(out_args):
        raise InvalidProgramError(f"{where}: the graph has {len(outs)} outputs, the program "
                                  f"expects {len(out_args)}; re-export the program")
    for idx, result in zip(out_args, outs):
        slot = values[idx]
        if isinstance(slot, np.ndarray) and slot.shape == result.shape:
            np.copyto(slot, result.astype(slot.dtype, copy=False))
        elif isinstance(slot, np.ndarray) and slot.size == result.size:
            np.copyto(slot, result.reshape(slot.shape).astype(slot.dtype, copy=False))
        elif context is not None and isinstance(slot, np.ndarray):
            np.copyto(context.resize(idx, result.shape), result)
        else:
            values[idx] = result


@backend(BACKEND_ID)
class TOSABackendRuntime:
    def is_available(self) -> bool:
        return True  # init says which extra to install when tosa-tools is missing

    def init(self, blob: memoryview, compile_specs: dict[str, bytes],
             context: BackendInitContext | None = None) -> TosaGraphRunner:
        fmt = compile_specs.get("output_format", b"tosa")
        if bytes(fmt) != b"tosa":
            raise InvalidProgramError(f"{BACKEND_ID}: output_format is {bytes(fmt)!r}, expected "
                                      "b'tosa'; this delegate was not made by TOSABackend")
        return TosaGraphRunner(bytes(blob), where=f"{BACKEND_ID} delegate")

    def execute(self, handle: TosaGraphRunner, values: list[Any], args: list[int],
                context: BackendExecutionContext | None = None) -> None:
        n_in = len(handle.input_specs)
        inputs = [np.asarray(values[i]) for i in args[:n_in]]
        tracer = getattr(context, "event_tracer", None)  # per-operator values, when asked
        write_outputs(handle.run(inputs, tracer), values, args[n_in:], context, handle.where)

    def destroy(self, handle: TosaGraphRunner) -> None:
        return None
