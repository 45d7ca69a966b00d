"""``CompileSpec(key: str, value: bytes)``: one backend option, stored as is in the ``.pte``.

It is the schema's own dataclass (``program.fbs``'s ``CompileSpec``), so what a partitioner
puts in a ``DelegationSpec`` is exactly what the emitter writes and the runtime hands to
``init``.
"""

from ...schema.program import CompileSpec

__all__ = ["CompileSpec"]
