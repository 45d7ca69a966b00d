"""ExecuTorch's ``exir.passes._quant_patterns_and_replacements`` path: importing it defines the
``quantized_decomposed`` operators torch lacks (``add``, ``mixed_mm``, ``mixed_linear``,
``embedding_*``) and every ``.out`` overload, as ExecuTorch's module does; edgetorch's
definitions live in ``edgetorch.kernels.quantized.aot``. ``quantized_decomposed_lib`` is
torch's library of that namespace."""

from torch.ao.quantization.fx._decomposed import quantized_decomposed_lib

from ...kernels.quantized import aot as _aot  # noqa: F401  (defines the operators)

__all__ = ["quantized_decomposed_lib"]
