"""``.bpte`` bytes from a BundledProgram and back (``executorch...bundled_program.serialize``)."""

from __future__ import annotations

from ...schema import bundled_program as B
from .core import BundledProgram


def serialize_from_bundled_program_to_flatbuffer(bundled_program: BundledProgram) -> bytes:
    """The ``.bpte`` bytes: identifier ``BP08``, not size-prefixed, the ``.pte`` embedded verbatim."""
    return B.serialize_from_bundled_program_to_flatbuffer(bundled_program.serialize_to_schema())


def deserialize_from_flatbuffer_to_bundled_program(flatbuffer: bytes) -> B.BundledProgram:
    """The schema dataclass (``schema.BundledProgram``), as ExecuTorch returns, not ``core``'s."""
    return B.deserialize_from_flatbuffer_to_bundled_program(flatbuffer)
