"""Serialization helpers of the compiler that backends use (ExecuTorch's ``exir._serialize``).

The file formats themselves live in ``edgetorch.schema``.
"""
