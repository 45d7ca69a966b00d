"""A llama-family decoder with static KV caches (ExecuTorch's ``examples/models/llama``)."""

from .llama_transformer import Transformer
from .model_args import ModelArgs

__all__ = ["ModelArgs", "Transformer"]
