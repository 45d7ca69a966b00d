"""ExecuTorch's LLM runner API (``executorch.extension.llm.runner``) on edgetorch's torch-free
runtime::

    from edgetorch.extension.llm.runner import GenerationConfig, TextLLMRunner

    runner = TextLLMRunner("model.pte", "tokenizer.json")
    runner.generate("Once upon a time", GenerationConfig(max_new_tokens=32, temperature=0),
                    token_callback=lambda s: print(s, end=""))
    for piece in runner.stream("Hello"):
        print(piece, end="")
"""

from .config import GenerationConfig, Stats
from .sampler import Sampler
from .text_llm_runner import TextLLMRunner
from .text_stream import TextStream

__all__ = ["GenerationConfig", "Sampler", "Stats", "TextLLMRunner",
           "TextStream"]
