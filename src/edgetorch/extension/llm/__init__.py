"""LLM support with ExecuTorch's module paths (``executorch.extension.llm.*``): tokenizers and a
torch-free text runner here; the export flow lives with the compiler."""
