"""ExecuTorch's ``devtools.etdump.serialize`` names, over ``edgetorch.schema.etdump``."""

from ...schema.etdump import deserialize_from_etdump_flatcc, serialize_to_etdump_flatcc

__all__ = ["deserialize_from_etdump_flatcc", "serialize_to_etdump_flatcc"]
