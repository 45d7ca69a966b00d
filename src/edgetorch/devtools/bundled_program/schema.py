"""The ``.bpte`` schema dataclasses (``executorch.devtools.bundled_program.schema``)."""

from ...schema.bundled_program import (  # noqa: F401  (re-exported names)
    BUNDLED_PROGRAM_SCHEMA_VERSION,
    Bool,
    BundledMethodTestCase,
    BundledMethodTestSuite,
    BundledProgram,
    Double,
    Int,
    Tensor,
    Value,
)
