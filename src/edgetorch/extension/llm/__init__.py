"""LLM support with ExecuTorch's module paths (``executorch.extension.llm.*``): custom ops and
export (``export_llm``) need torch; tokenizers and the text runner do not."""
