"""``export_llm``: ExecuTorch's LLM export flow (``LlmConfig`` -> ``.pte``)."""
