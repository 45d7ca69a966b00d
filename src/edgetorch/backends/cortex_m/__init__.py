"""Arm Cortex-M (CMSIS-NN): PT2E quantization and ``cortex_m::`` operators, no delegate.

The ahead-of-time half (``quantizer``, ``passes``, ``ops``) follows ExecuTorch 1.5.1's
``backends/cortex_m``; the runtime's kernels for the ``cortex_m::`` operators are in
``edgetorch.kernels.cortex_m``.
"""
