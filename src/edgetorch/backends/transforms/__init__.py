"""Graph transforms shared by backends (ExecuTorch's ``backends/transforms``)."""
