"""LLM support: custom ops, export (``export_llm``), tokenizers and runner."""
