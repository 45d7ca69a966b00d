"""``LlmConfig``: the configuration of ``export_llm``."""
