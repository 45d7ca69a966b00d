"""The LLM metadata a ``.pte`` carries as constant methods, read as ExecuTorch's runner reads it
(``llm_runner_helper.cpp``: ``get_llm_metadata``, ``get_eos_ids``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import InvalidProgramError

ENABLE_DYNAMIC_SHAPE = "enable_dynamic_shape"
BOS_ID = "get_bos_id"
EOS_IDS = "get_eos_ids"
MAX_SEQ_LEN = "get_max_seq_len"
MAX_CONTEXT_LEN = "get_max_context_len"
N_LAYERS = "get_n_layers"
VOCAB_SIZE = "get_vocab_size"
USE_KV_CACHE = "use_kv_cache"
USE_SDPA_WITH_KV_CACHE = "use_sdpa_with_kv_cache"

#: ExecuTorch's defaults for a method the .pte lacks (get_max_seq_len itself is required).
DEFAULTS = {ENABLE_DYNAMIC_SHAPE: 0, MAX_SEQ_LEN: 128, MAX_CONTEXT_LEN: 128, USE_KV_CACHE: 1,
            USE_SDPA_WITH_KV_CACHE: 0}


def constant_values(program: Any, name: str) -> list[int]:
    """The integers a constant method returns (each output read as a scalar)."""
    try:
        outputs = program.load_method(name).execute([])
    except Exception as e:  # any failure of a metadata method makes the file unusable here
        raise InvalidProgramError(f"metadata method {name!r} could not run: {e}; re-export the "
                                  "model with its metadata as constant methods") from e
    values = []
    for out in outputs:
        arr = np.asarray(out)
        if arr.size != 1:
            raise InvalidProgramError(f"metadata method {name!r} returned a value of shape "
                                      f"{arr.shape}; every output must be one scalar")
        values.append(int(arr.reshape(()).item()))
    return values


def read_llm_metadata(program: Any, tokenizer: Any) -> dict[str, int]:
    """ExecuTorch's metadata dict: the constant methods present, the defaults for the rest, the
    context length falling back to max_seq_len. Two deliberate differences: ``get_bos_id`` and
    ``get_vocab_size`` come from the .pte when it has them (ExecuTorch always asks the
    tokenizer, whose tokenizer.json BOS is 0), and ``get_n_layers`` is kept when present."""
    names = program.method_names
    if MAX_SEQ_LEN not in names:
        raise InvalidProgramError(
            f"the model has no {MAX_SEQ_LEN!r} method, so the runner cannot know how many "
            f"tokens one forward call takes (its methods: {sorted(names)}); re-export with the "
            "metadata constant methods (export_llm writes them)")
    meta = dict(DEFAULTS)
    for name in (*DEFAULTS, N_LAYERS, BOS_ID, VOCAB_SIZE):
        if name in names:
            meta[name] = constant_values(program, name)[0]
    if MAX_CONTEXT_LEN not in names:
        meta[MAX_CONTEXT_LEN] = meta[MAX_SEQ_LEN]
    if BOS_ID not in meta and tokenizer.bos_id is not None:
        meta[BOS_ID] = int(tokenizer.bos_id)
    if VOCAB_SIZE not in meta:
        meta[VOCAB_SIZE] = int(tokenizer.vocab_size)
    return meta


def read_eos_ids(program: Any, tokenizer: Any) -> set[int]:
    """The .pte's ``get_eos_ids`` when present, else the tokenizer's EOS ids (from its
    tokenizer_config.json / generation_config.json for a tokenizer.json)."""
    if EOS_IDS in program.method_names:
        return set(constant_values(program, EOS_IDS))
    return set(tokenizer.eos_ids)
