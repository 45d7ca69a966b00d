"""Extensions with ExecuTorch's module paths (``executorch.extension.*``)."""
