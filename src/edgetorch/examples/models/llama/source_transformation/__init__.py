"""Module swaps for the llama example (ExecuTorch's
``examples/models/llama/source_transformation``)."""
