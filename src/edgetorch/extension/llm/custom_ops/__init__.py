"""``import edgetorch.extension.llm.custom_ops.custom_ops`` defines the ``llama::`` operators."""
