"""Serialization helpers of the compiler that backends use (ExecuTorch's ``exir._serialize``).

The file formats themselves live in ``edgetorch.schema``.
"""

from ._program import PTEFile as _PTEFile
from ._program import deserialize_pte_binary as _deserialize_pte_binary
from ._program import serialize_pte_binary as _serialize_pte_binary

__all__ = ["_PTEFile", "_deserialize_pte_binary", "_serialize_pte_binary"]
