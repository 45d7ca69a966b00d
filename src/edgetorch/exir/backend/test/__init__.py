"""ExecuTorch's demo-backend import paths (``executorch.exir.backend.test.*``), for scripts
ported from ExecuTorch; the code lives in ``edgetorch.backends.demo``."""
