"""ExecuTorch's demo-backend paths under ``exir.backend.test.demos``."""
