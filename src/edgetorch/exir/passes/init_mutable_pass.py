"""``InitializedMutableBufferPass``: mark mutable buffers whose initial state the program
must carry even when it is all zeros.

edgetorch writes the initial state of every mutable buffer whose bytes are not all zero (so a
program computes what eager computes); an all-zero state is left out, because edgetorch's
runtime starts its arenas zeroed. ExecuTorch's C++ runtime does not promise zeroed arenas, so
a buffer whose zeros matter on a device (a cache position, a counter) is marked here by name
and its zeros are then written to the mutable data segment too (``meta["et_init_buffer"]``,
ExecuTorch's key, read by the emitter).
"""

from __future__ import annotations

from ..pass_base import ExportPass


class InitializedMutableBufferPass(ExportPass):
    def __init__(self, patterns: list[str]) -> None:
        super().__init__()
        self.patterns = list(patterns)

    def placeholder(self, name: str, arg, meta):  # type: ignore[no-untyped-def]
        if any(pattern in name for pattern in self.patterns):
            meta["et_init_buffer"] = True
        return super().placeholder(name, arg, meta)
