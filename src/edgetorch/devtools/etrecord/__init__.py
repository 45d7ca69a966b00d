"""ETRecord (``executorch.devtools.etrecord``): the compiler's record for the Inspector."""

from ._etrecord import ETRecord, generate_etrecord, parse_etrecord

__all__ = ["ETRecord", "generate_etrecord", "parse_etrecord"]
