"""``GenerationConfig`` and ``Stats``: ExecuTorch's runner types (``extension/llm/runner/irunner.h``,
``stats.h``) as dataclasses, with the same fields, defaults and JSON report."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, fields


@dataclass(kw_only=True)
class GenerationConfig:
    """How one ``generate`` call runs. The first seven fields are ExecuTorch's (same defaults);
    ``top_p``, ``seed`` and ``ignore_eos`` are edgetorch's sampling controls."""

    echo: bool = True  #: pass the prompt to the token callback first
    max_new_tokens: int = -1  #: -1: up to the context length
    warming: bool = False  #: a warm-up run (the CLI prints nothing for it)
    seq_len: int = -1  #: cap on prompt + generated positions; -1: the context length
    temperature: float = 0.8  #: 0 is greedy
    num_bos: int = 0  #: BOS tokens put before the prompt
    num_eos: int = 0  #: EOS tokens put after the prompt
    top_p: float = 0.9  #: nucleus sampling mass (ExecuTorch's sampler uses 0.9)
    seed: int | None = None  #: seed the sampler at the start of each call (None: keep its state)
    ignore_eos: bool = False  #: keep generating past EOS

    def resolve_max_new_tokens(self, max_context_len: int, num_tokens_occupied: int) -> int:
        """How many tokens this call may generate, given the context already used
        (ExecuTorch's rule: the tightest of max_new_tokens, seq_len and the context length)."""
        room = max_context_len - num_tokens_occupied
        if self.seq_len != -1:
            room = min(self.seq_len, max_context_len) - num_tokens_occupied
        if self.max_new_tokens != -1:
            room = min(room, self.max_new_tokens)
        return max(0, room)


def time_in_ms() -> int:
    """Wall-clock milliseconds, ExecuTorch's ``time_in_ms`` (CLOCK_REALTIME)."""
    return time.time_ns() // 1_000_000


# stats_to_json_string's order (token_encode_end_ms is not in ExecuTorch's JSON).
_JSON_MS_FIELDS = ("model_load_start_ms", "model_load_end_ms", "inference_start_ms",
                   "inference_end_ms", "model_execution_start_ms", "model_execution_end_ms",
                   "prompt_eval_end_ms", "first_token_ms", "aggregate_sampling_time_ms",
                   "aggregate_model_execution_time_ms")


@dataclass
class Stats:
    """Timings and token counts of the last ``generate`` (ExecuTorch's ``Stats``).

    The ``*_ms`` fields are ExecuTorch's integer milliseconds (``to_json_string`` gives its exact
    keys and formulas). Millisecond stamps round a fast model's phases to 0, so the
    ``*_per_second`` / ``*_s`` properties use the same phases measured with ``perf_counter``.
    ``num_generated_tokens`` counts the decode loop's tokens: the first token comes from prefill.
    """

    SCALING_FACTOR_UNITS_PER_SECOND: int = 1000
    model_load_start_ms: int = 0
    model_load_end_ms: int = 0
    inference_start_ms: int = 0
    token_encode_end_ms: int = 0
    model_execution_start_ms: int = 0
    model_execution_end_ms: int = 0
    prompt_eval_end_ms: int = 0
    first_token_ms: int = 0
    inference_end_ms: int = 0
    aggregate_sampling_time_ms: int = 0
    aggregate_model_execution_time_ms: int = 0
    num_prompt_tokens: int = 0
    num_generated_tokens: int = 0
    #: perf_counter seconds of the phases: load, prefill (encode + prompt), decode, first token
    seconds: dict[str, float] = field(default_factory=dict, repr=False)
    _sampling_start: int = field(default=0, repr=False)

    def on_sampling_begin(self) -> None:
        self._sampling_start = time_in_ms()

    def on_sampling_end(self) -> None:
        self.aggregate_sampling_time_ms += time_in_ms() - self._sampling_start
        self._sampling_start = 0

    def on_model_execution_begin(self) -> None:
        self.model_execution_start_ms = time_in_ms()

    def on_model_execution_end(self) -> None:
        self.model_execution_end_ms = time_in_ms()
        self.aggregate_model_execution_time_ms += (self.model_execution_end_ms
                                                   - self.model_execution_start_ms)

    def reset(self, all_stats: bool = False) -> None:
        """Clear the run's numbers; the model load times survive unless ``all_stats``."""
        keep = {} if all_stats else {k: getattr(self, k) for k in
                                     ("model_load_start_ms", "model_load_end_ms")}
        load_s = None if all_stats else self.seconds.get("load")
        for f in fields(self):
            if f.name.endswith("_ms") or f.name.startswith("num_"):
                setattr(self, f.name, 0)
        self.seconds = {} if load_s is None else {"load": load_s}
        self._sampling_start = 0
        for k, v in keep.items():
            setattr(self, k, v)

    # ---- derived numbers ------------------------------------------------------------------

    @property
    def prefill_tokens_per_second(self) -> float:
        s = self.seconds.get("prefill", 0.0)
        return self.num_prompt_tokens / s if s > 0 else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        s = self.seconds.get("decode", 0.0)
        return self.num_generated_tokens / s if s > 0 else 0.0

    @property
    def time_to_first_token_s(self) -> float:
        return self.seconds.get("first_token", 0.0)

    @property
    def model_load_s(self) -> float:
        return self.seconds.get("load", 0.0)

    def to_json_string(self) -> str:
        """ExecuTorch's ``stats_to_json_string``: the same keys, order and formulas (the rates
        from the millisecond stamps, left out when their interval is 0 ms)."""
        parts = []
        prefill_ms = self.prompt_eval_end_ms - self.inference_start_ms
        if prefill_ms > 0:
            parts.append(f'"prefill_token_per_sec":'
                         f'{_g(self.num_prompt_tokens / prefill_ms * 1000)}')
        decode_ms = self.inference_end_ms - self.prompt_eval_end_ms
        if decode_ms > 0:
            parts.append(f'"decode_token_per_sec":'
                         f'{_g(self.num_generated_tokens / decode_ms * 1000)}')
        parts.append(f'"prompt_tokens":{self.num_prompt_tokens}')
        parts.append(f'"generated_tokens":{self.num_generated_tokens}')
        parts += [f'"{name}":{getattr(self, name)}' for name in _JSON_MS_FIELDS]
        parts.append(f'"SCALING_FACTOR_UNITS_PER_SECOND":{self.SCALING_FACTOR_UNITS_PER_SECOND}')
        return "{" + ",".join(parts) + "}"

    def to_dict(self) -> dict:
        return json.loads(self.to_json_string())

    def report(self) -> str:
        """ExecuTorch's ``print_report`` text (PyTorchObserver line + summary), with this
        runtime's precise rates."""
        return "\n".join([
            f"PyTorchObserver {self.to_json_string()}",
            f"\tPrompt Tokens: {self.num_prompt_tokens}    "
            f"Generated Tokens: {self.num_generated_tokens}",
            f"\tModel Load Time:\t\t{self.model_load_s:f} (seconds)",
            f"\t\tPrompt evaluation:\t{self.seconds.get('prefill', 0.0):f} (seconds)\t\t "
            f"Rate: \t{self.prefill_tokens_per_second:f} (tokens/second)",
            f"\t\tGenerated {self.num_generated_tokens} tokens:\t"
            f"{self.seconds.get('decode', 0.0):f} (seconds)\t\t "
            f"Rate: \t{self.decode_tokens_per_second:f} (tokens/second)",
            f"\tTime to first generated token:\t{self.time_to_first_token_s:f} (seconds)",
            f"\tSampling time over {self.num_prompt_tokens + self.num_generated_tokens} tokens:"
            f"\t{self.aggregate_sampling_time_ms / 1000:f} (seconds)",
        ])

    def __repr__(self) -> str:
        return (f"<Stats num_prompt_tokens={self.num_prompt_tokens} "
                f"num_generated_tokens={self.num_generated_tokens} "
                f"prefill_tokens_per_second={self.prefill_tokens_per_second:.1f} "
                f"decode_tokens_per_second={self.decode_tokens_per_second:.1f}>")


def _g(x: float) -> str:
    """A double as C++'s default ostream writes it (6 significant digits)."""
    return f"{x:.6g}"
