"""ExecuTorch's LLM custom kernels (``extension/llm/custom_ops``): ``llama::sdpa_with_kv_cache``,
``llama::custom_sdpa`` and ``llama::update_cache`` (their ``.out`` variants, the strings a
``.pte`` stores), in NumPy.

Like the quantized library they are part of the runtime, so a ``.pte`` using them loads with no
extra import (ExecuTorch's pybindings need ``import executorch.extension.llm.custom_ops``).
The torch half (operator definitions for export) is
:mod:`edgetorch.extension.llm.custom_ops.custom_ops`.
"""

from . import sdpa  # noqa: F401  (registers the kernels)

OPERATORS = (
    "llama::custom_sdpa.out",
    "llama::sdpa_with_kv_cache.out",
    "llama::update_cache.out",
)
