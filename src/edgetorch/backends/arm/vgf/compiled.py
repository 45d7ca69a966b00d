"""The TOSA graph of each VGF blob ``VgfBackend.preprocess`` made in this process, by the blob's
sha256: a VGF holds SPIR-V, so without the ML SDK the runtime simulates the delegate from the
TOSA it was converted from. Standard library only: the runtime reads it."""

from __future__ import annotations

import hashlib

#: sha256(VGF blob) -> TOSA flatbuffer
COMPILED: dict[str, bytes] = {}


def blob_key(blob: bytes | memoryview) -> str:
    return hashlib.sha256(bytes(blob)).hexdigest()
