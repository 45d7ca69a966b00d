"""ExecuTorch's ``devtools.etdump.serialize`` names, over ``edgetorch.schema.etdump``.

ExecuTorch's Python writer (flatc) writes an ETDump *without* the size prefix its runtime
writes (identifier ``ED00`` still at bytes 4..8), and its tests read it back with
``size_prefixed=False``; the writer here does the same. The runtime's ``.etdp`` files keep the
prefix (``edgetorch.runtime.etdump`` writes them through ``edgetorch.schema.etdump``)."""

from ...schema import etdump as _etdump
from ...schema.etdump import ETDump, deserialize_from_etdump_flatcc


def serialize_to_etdump_flatcc(etdump: ETDump, *, size_prefixed: bool = False) -> bytes:
    """``etdump`` as flatbuffer bytes, by default laid out as ExecuTorch's Python writer lays
    them out (no size prefix)."""
    return _etdump.serialize_to_etdump_flatcc(etdump, size_prefixed=size_prefixed)


__all__ = ["deserialize_from_etdump_flatcc", "serialize_to_etdump_flatcc"]
