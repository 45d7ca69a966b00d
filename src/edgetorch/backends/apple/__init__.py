"""Apple backends, at ExecuTorch's paths (``executorch.backends.apple``)."""
