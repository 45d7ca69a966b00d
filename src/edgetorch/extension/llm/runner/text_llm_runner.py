"""``TextLLMRunner``: prompt in, text out, on edgetorch's torch-free runtime.

The flow is ExecuTorch's (``extension/llm/runner/text_llm_runner.cpp``): read the metadata, load
``forward`` on the first call, prefill the prompt (in ``max_seq_len`` chunks with dynamic shapes,
else one token per call), then decode one token per call until EOS, the token budget or
``stop()``. ``forward(tokens [1, S], input_pos [1]) -> logits [1, V] or [1, S, V]``; a method
with one input runs without a KV cache on the whole sequence each call.

Where it deliberately differs from ExecuTorch 1.5.1:
- pieces never split a UTF-8 character (1.5.1 raises UnicodeDecodeError);
- ``stream()`` is a Python iterator over the same loop as ``generate``;
- the first token is sampled with the config's temperature (1.5.1 always takes the argmax), and
  a first token that is EOS ends the generation;
- temperatures above 1 are accepted and ``top_p``/``seed`` are configurable;
- the prompt must fit the KV cache whatever max_seq_len is (1.5.1 skips that check when
  max_seq_len < max_context_len, assuming a ring-buffer cache);
- prefill chunks are also capped at the tokens input's declared upper bound;
- nothing is printed (the ``edgetorch llm`` command prints);
- ``generate`` returns the generated text.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np

from ....errors import InvalidArgumentError, InvalidProgramError, InvalidStateError
from ....runtime import Runtime
from ....schema.scalar_type import to_numpy_dtype
from ..tokenizers.loader import TextTokenizer, load_tokenizer
from . import metadata as M
from .config import GenerationConfig, Stats, time_in_ms
from .sampler import Sampler
from .text_stream import TextStream


class TextLLMRunner:
    """ExecuTorch's ``TextLLMRunner(model_path, tokenizer_path, data_path=None)``."""

    def __init__(self, model_path: str | os.PathLike, tokenizer_path: str | os.PathLike,
                 data_path: str | os.PathLike | None = None, *,
                 method_name: str = "forward") -> None:
        self.tokenizer: TextTokenizer = load_tokenizer(tokenizer_path)
        self.program = Runtime.get().load_program(model_path, data_path=data_path)
        if method_name not in self.program.method_names:
            raise InvalidProgramError(
                f"{model_path} has no method {method_name!r} (its methods: "
                f"{sorted(self.program.method_names)}); pass method_name=")
        self.method_name = method_name
        self.metadata: dict[str, int] = M.read_llm_metadata(self.program, self.tokenizer)
        self.eos_ids: set[int] = M.read_eos_ids(self.program, self.tokenizer)
        self.stats = Stats()
        self._method = None
        self._pos = 0  # positions of the KV cache already written
        self._history: list[int] = []  # tokens fed so far: the KV cache's rows 0.._pos-1
        self._prefill_next: int | None = None
        #: token ids the last generate/stream produced (the one from prefill first)
        self.generated_ids: list[int] = []
        self._stop = threading.Event()
        meta = self.program.metadata(method_name)
        self._use_kv_cache = meta.num_inputs() > 1  # as TextDecoderRunner decides
        tokens_info = meta.input_tensor_meta(0)
        self._token_dtype = to_numpy_dtype(tokens_info.dtype())
        declared = int(tokens_info.sizes()[-1]) if tokens_info.sizes() else 1
        self.prefill_chunk = (min(self.max_seq_len, declared)
                              if self.metadata[M.ENABLE_DYNAMIC_SHAPE] else 1)
        if self._use_kv_cache:
            pos_info = meta.input_tensor_meta(1)
            self._pos_numel = int(np.prod(pos_info.sizes(), dtype=np.int64))
            self._pos_dtype = to_numpy_dtype(pos_info.dtype())

    # ---- metadata --------------------------------------------------------------------------

    @property
    def max_seq_len(self) -> int:
        return self.metadata[M.MAX_SEQ_LEN]

    @property
    def max_context_len(self) -> int:
        return self.metadata[M.MAX_CONTEXT_LEN]

    @property
    def pos(self) -> int:
        """KV-cache positions used so far (prompts and generated tokens of this conversation)."""
        return self._pos

    def get_vocab_size(self) -> int:
        return self.metadata[M.VOCAB_SIZE]

    # ---- lifecycle -------------------------------------------------------------------------

    def is_loaded(self) -> bool:
        return self._method is not None

    def load(self) -> None:
        if self._method is None:
            self._method = self.program.load_method(self.method_name)

    def stop(self) -> None:
        """Ask a running ``generate``/``stream`` to stop after its current token (any thread)."""
        self._stop.set()

    def reset(self) -> None:
        """Forget the conversation: the next prompt starts at position 0."""
        self.stats.reset()
        self._pos = 0
        self._history = []
        self._prefill_next = None

    # ---- model calls -----------------------------------------------------------------------

    def _forward(self, tokens: list[int]) -> np.ndarray:
        """One ``forward`` call on ``tokens`` at the current position; logits of the last one."""
        self._history.extend(tokens)
        if self._use_kv_cache:
            pos = (np.array([self._pos]) if self._pos_numel == 1
                   else np.arange(self._pos, self._pos + len(tokens)))
            inputs = [np.array([tokens], dtype=self._token_dtype), pos.astype(self._pos_dtype)]
        else:
            inputs = [np.array([self._history], dtype=self._token_dtype)]
        self.stats.on_model_execution_begin()
        outputs = self._method.execute(inputs)
        self.stats.on_model_execution_end()
        if len(outputs) != 1 or not isinstance(outputs[0], np.ndarray):
            raise InvalidProgramError(
                f"method {self.method_name!r} returned {len(outputs)} outputs; an LLM's forward "
                "must return exactly one logits tensor")
        self._pos += len(tokens)
        logits = outputs[0]
        return logits.reshape(-1, logits.shape[-1])[-1].astype(np.float32)

    def _prefill_ids(self, ids: list[int]) -> np.ndarray:
        if self._pos + len(ids) >= self.max_context_len:
            raise InvalidArgumentError(
                f"position {self._pos} + {len(ids)} prompt tokens >= max_context_len "
                f"{self.max_context_len}: the prompt does not fit the KV cache; shorten it, "
                "reset() the conversation, or export with a larger max_context_length")
        self.load()
        logits = None
        for i in range(0, len(ids), self.prefill_chunk):
            logits = self._forward(ids[i:i + self.prefill_chunk])
        return logits

    def _encode(self, prompt: str, config: GenerationConfig) -> list[int]:
        ids = self.tokenizer.encode(prompt, bos=config.num_bos, eos=config.num_eos)
        if not ids:
            raise InvalidArgumentError("the prompt encodes to 0 tokens; expected at least 1")
        return ids

    def prefill(self, prompt: str, config: GenerationConfig | None = None) -> int:
        """Feed ``prompt`` into the KV cache without generating (e.g. chat history); a following
        ``generate("")`` starts from the token predicted here, which is returned."""
        config = config or GenerationConfig()
        sampler = Sampler(config.temperature, config.top_p, config.seed)
        self._prefill_next = sampler.sample(self._prefill_ids(self._encode(prompt, config)))
        return self._prefill_next

    # ---- generation ------------------------------------------------------------------------

    def generate(self, prompt: str, config: GenerationConfig | None = None,
                 token_callback: Callable[[str], None] | None = None,
                 stats_callback: Callable[[Stats], None] | None = None, *,
                 reuse_prefix: bool = False) -> str:
        """Generate from ``prompt``: ``token_callback`` gets the prompt (with ``echo``) and then
        each piece of text, ``stats_callback`` the :class:`Stats` at the end. Returns the
        generated text.

        ``reuse_prefix=True`` treats ``prompt`` as the whole conversation so far (a chat
        re-rendered by its template each turn): the KV-cache rows of the longest token prefix it
        shares with what was already fed are kept and only the rest is prefilled. Rows past
        that prefix are overwritten before they are read (attention at a position only reads
        rows up to it), so the result equals ``reset()`` + ``generate(prompt)``."""
        out = []
        for piece, generated in self._run(prompt, config or GenerationConfig(), reuse_prefix):
            if generated:
                out.append(piece)
            if token_callback is not None:
                token_callback(piece)
        if stats_callback is not None:
            stats_callback(self.stats)
        return "".join(out)

    def stream(self, prompt: str, config: GenerationConfig | None = None) -> Iterator[str]:
        """``for piece in runner.stream(prompt): ...`` — the generated text piece by piece
        (without the prompt unless ``config.echo``); ``runner.stats`` is filled at the end."""
        config = config or GenerationConfig(echo=False)
        for piece, _ in self._run(prompt, config):
            yield piece

    def _rewind_to_shared_prefix(self, ids: list[int]) -> list[int]:
        """Keep the cached positions ``ids`` starts with (at least one token is left to
        prefill, for its logits); returns the ids still to feed."""
        keep = 0
        limit = min(len(self._history), len(ids) - 1)
        while keep < limit and self._history[keep] == ids[keep]:
            keep += 1
        self._pos = keep
        del self._history[keep:]
        self._prefill_next = None
        return ids[keep:]

    def _run(self, prompt: str, config: GenerationConfig,
             reuse_prefix: bool = False) -> Iterator[tuple[str, bool]]:
        """The generation loop shared by generate and stream: yields (piece, is_generated)."""
        st = self.stats
        if not self.is_loaded():
            t0 = time.perf_counter()
            st.model_load_start_ms = time_in_ms()
            self.load()
            st.model_load_end_ms = time_in_ms()
            st.seconds["load"] = time.perf_counter() - t0
        sampler = Sampler(config.temperature, config.top_p, config.seed)
        self._stop.clear()
        t_start = time.perf_counter()
        st.inference_start_ms = time_in_ms()
        st.model_execution_start_ms = st.model_execution_end_ms = 0
        st.aggregate_sampling_time_ms = st.aggregate_model_execution_time_ms = 0
        if prompt:
            ids = self._encode(prompt, config)
            if reuse_prefix:
                ids = self._rewind_to_shared_prefix(ids)
            st.token_encode_end_ms = time_in_ms()
            if config.echo:
                yield prompt, False
            logits = self._prefill_ids(ids)
            st.on_sampling_begin()
            cur = sampler.sample(logits)
            st.on_sampling_end()
        elif self._prefill_next is not None:
            ids, cur = [], self._prefill_next
        else:
            raise InvalidStateError("generate('') needs a prior prefill(); pass a prompt")
        self._prefill_next = None
        max_new = config.resolve_max_new_tokens(self.max_context_len, self._pos)
        if max_new <= 0:
            raise InvalidArgumentError(
                f"no room to generate: {self._pos} of max_context_len {self.max_context_len} "
                f"positions are used (seq_len {config.seq_len}, max_new_tokens "
                f"{config.max_new_tokens}); reset() or shorten the prompt")
        st.first_token_ms = st.prompt_eval_end_ms = time_in_ms()
        t_first = time.perf_counter()
        st.seconds.update(prefill=t_first - t_start, first_token=t_first - t_start, decode=0.0)
        text = TextStream(self.tokenizer.decode, ids[-4:])
        generated = 0
        self.generated_ids = [cur]
        try:
            piece = text.push(cur)
            if piece:
                yield piece, True
            stop_at_eos = not config.ignore_eos
            while generated < max_new - 1 and not (stop_at_eos and cur in self.eos_ids):
                logits = self._forward([cur])
                st.on_sampling_begin()
                cur = sampler.sample(logits)
                st.on_sampling_end()
                generated += 1
                self.generated_ids.append(cur)
                piece = text.push(cur)
                if piece:
                    yield piece, True
                if self._stop.is_set():
                    break
            piece = text.flush()
            if piece:
                yield piece, True
        finally:
            st.inference_end_ms = time_in_ms()
            st.seconds["decode"] = time.perf_counter() - t_first
            st.num_prompt_tokens = len(ids) if prompt else self._pos  # as ExecuTorch counts
            st.num_generated_tokens = generated

    def __repr__(self) -> str:
        m = self.metadata
        return (f"<TextLLMRunner {self.method_name} max_seq_len={m[M.MAX_SEQ_LEN]} "
                f"max_context_len={m[M.MAX_CONTEXT_LEN]} vocab={m[M.VOCAB_SIZE]} "
                f"kv_cache={self._use_kv_cache} pos={self._pos}>")
