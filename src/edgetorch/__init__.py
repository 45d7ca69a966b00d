"""edgetorch: ExecuTorch in Python.

The compiler (``edgetorch.exir``) needs torch; the runtime (``edgetorch.runtime``) needs only
NumPy and flatbuffers. Importing this package imports neither half.
"""

__version__ = "0.1.0"
