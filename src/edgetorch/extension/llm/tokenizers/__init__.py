"""Tokenizers for LLMs: ExecuTorch's ``pytorch-tokenizers`` package, re-exported under
``edgetorch.extension.llm.tokenizers`` (ExecuTorch ships a copy at
``executorch.extension.llm.tokenizers``), plus what the runner adds on top:

- :func:`load_tokenizer` opens a tokenizer.json (with its tokenizer_config.json), a
  SentencePiece model, a tiktoken file or a llama2c ``tokenizer.bin`` behind one small interface;
- :func:`gguf_to_tokenizer_json` writes a tokenizer.json from a GGUF file's vocabulary and merges.

Install with ``pip install 'edgetorch[llm]'``. Nothing here imports torch.
"""

from .gguf import gguf_to_tokenizer_json
from .loader import TextTokenizer, load_tokenizer

try:
    from pytorch_tokenizers import (
        CppHFTokenizer,
        CppLlama2cTokenizer,
        CppSPTokenizer,
        CppTiktoken,
        HuggingFaceTokenizer,
        Llama2cTokenizer,
        TiktokenTokenizer,
        get_tokenizer,
    )
except ImportError as e:  # the runner's own pieces work without it for tokenizer.json files
    _MISSING = e

    def __getattr__(name: str):
        raise ImportError(f"edgetorch.extension.llm.tokenizers.{name} comes from the "
                          f"pytorch-tokenizers package ({_MISSING}); install it with "
                          "pip install 'edgetorch[llm]'")

__all__ = [
    "CppHFTokenizer",
    "CppLlama2cTokenizer",
    "CppSPTokenizer",
    "CppTiktoken",
    "HuggingFaceTokenizer",
    "Llama2cTokenizer",
    "TextTokenizer",
    "TiktokenTokenizer",
    "get_tokenizer",
    "gguf_to_tokenizer_json",
    "load_tokenizer",
]
