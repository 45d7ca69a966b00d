"""What ``EthosUBackend.preprocess`` compiled in this process, by the blob's sha256.

Vela's estimates exist only at compile time, and the TOSA graph a delegate needs to be simulated
is not in the ``.pte``; both are kept here so ``vela_estimates(manager)`` and the runtime (a
program compiled and run in the same process, no intermediates folder needed) find them.
Standard library only: the runtime reads it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any


@dataclass
class CompiledPartition:
    tag: str
    target: str
    result: Any  # vela.VelaResult: blob, summary, per-layer rows, Vela's report
    tosa: bytes = b""
    tosa_path: str | None = None


#: sha256(processed_bytes) -> the partition's compilation, filled by ``preprocess``
COMPILED: dict[str, CompiledPartition] = {}


def blob_key(processed_bytes: bytes | memoryview) -> str:
    return hashlib.sha256(bytes(processed_bytes)).hexdigest()
