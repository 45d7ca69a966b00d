"""ExecuTorch's ``examples/portable``: scripts that export models for the portable runtime."""
