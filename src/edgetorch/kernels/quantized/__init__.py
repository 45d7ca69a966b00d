"""ExecuTorch's quantized kernel library (``kernels/quantized/quantized.yaml``): the 19
``quantized_decomposed::*`` kernels that non-delegated quantized programs call.

They are part of the runtime (``edgetorch.kernels`` registers them), so a ``.pte`` that uses
them loads with no extra import -- unlike ExecuTorch, whose pybindings need
``import executorch.kernels.quantized``. Importing this package is still the way to say "I use
quantized kernels"; the compiler half (the torch operator definitions ``to_executorch`` needs)
lives in :mod:`edgetorch.kernels.quantized.aot` and is loaded by ``edgetorch.exir``.

NumPy only, like every kernel. Numerics follow ExecuTorch bit for bit (``_common``).
"""

from . import arith  # noqa: F401, I001  (one line per family, on purpose)
from . import embedding  # noqa: F401
from . import qdq  # noqa: F401

OPERATORS = (
    "quantized_decomposed::add.out",
    "quantized_decomposed::choose_qparams.Tensor_out",
    "quantized_decomposed::choose_qparams_per_token_asymmetric.out",
    "quantized_decomposed::dequantize_per_channel.out",
    "quantized_decomposed::dequantize_per_tensor.out",
    "quantized_decomposed::dequantize_per_tensor.Tensor_out",
    "quantized_decomposed::dequantize_per_token.out",
    "quantized_decomposed::embedding_2bit.dtype_out",
    "quantized_decomposed::embedding_2bit.out",
    "quantized_decomposed::embedding_4bit.dtype_out",
    "quantized_decomposed::embedding_4bit.out",
    "quantized_decomposed::embedding_byte.dtype_out",
    "quantized_decomposed::embedding_byte.out",
    "quantized_decomposed::mixed_linear.out",
    "quantized_decomposed::mixed_mm.out",
    "quantized_decomposed::quantize_per_channel.out",
    "quantized_decomposed::quantize_per_tensor.out",
    "quantized_decomposed::quantize_per_tensor.Tensor_out",
    "quantized_decomposed::quantize_per_token.out",
)
