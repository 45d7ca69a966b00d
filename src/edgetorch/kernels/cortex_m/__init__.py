"""Kernels for ExecuTorch's ``cortex_m::`` operators, with CMSIS-NN's integer arithmetic.

ExecuTorch runs these on a Cortex-M through CMSIS-NN (``backends/cortex_m/ops/*.cpp``); its
Python runtime has no kernels for them. Here every operator is NumPy code that replays the
C arithmetic of CMSIS-NN's portable build (``cmsis``: requantization, rounding shifts, the
fixed-point exp of softmax) on the bytes as the device lays them out, so a Cortex-M ``.pte``
gives here the integers it gives on the device. ``tests/backends/cortex_m`` checks each kernel
against CMSIS-NN itself, built for the host.
"""

from . import conv, elementwise, layout, matmul, pool, qdq, softmax  # noqa: F401 (registers)
