"""Loading weights into the decoder: a Meta ``.pth`` + ``params.json``, or a GGUF file.

GGUF (llama.cpp's format) is read with the ``gguf`` package; quantized tensors (Q4_1, Q8_0,
...) are dequantized to float32 with its ``quants`` module. llama.cpp stores ``wq``/``wk`` in
Meta's interleaved rotary layout, which is the decoder's, so no permutation is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ....errors import ExportError
from ....util import progress

# GGUF tensor name (after "blk.N.") -> Meta name (after "layers.N.")
_GGUF_LAYER = {
    "attn_q": "attention.wq", "attn_k": "attention.wk", "attn_v": "attention.wv",
    "attn_output": "attention.wo", "ffn_gate": "feed_forward.w1",
    "ffn_down": "feed_forward.w2", "ffn_up": "feed_forward.w3",
    "attn_norm": "attention_norm", "ffn_norm": "ffn_norm",
}
_GGUF_TOP = {"token_embd": "tok_embeddings", "output_norm": "norm", "output": "output"}


def _field(reader: Any, key: str, default: Any = None) -> Any:
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def read_gguf(path: str | Path) -> tuple[dict[str, Any], dict[str, torch.Tensor], dict]:
    """``(params, state_dict, tokenizer_info)`` of a llama-architecture GGUF file."""
    try:
        import gguf
        from gguf.quants import dequantize
    except ImportError:
        raise ExportError("reading a GGUF checkpoint needs the 'gguf' package; "
                          "pip install 'edgetorch[llm]'") from None
    reader = gguf.GGUFReader(str(path))
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise ExportError(f"{path}: GGUF architecture {arch!r} is not supported; only 'llama' "
                          "(llama, SmolLM, TinyLlama ...) maps onto the decoder")
    p = f"{arch}."
    n_heads = int(_field(reader, p + "attention.head_count"))
    params: dict[str, Any] = {
        "dim": int(_field(reader, p + "embedding_length")),
        "n_layers": int(_field(reader, p + "block_count")),
        "n_heads": n_heads,
        "n_kv_heads": int(_field(reader, p + "attention.head_count_kv", n_heads)),
        "hidden_dim": int(_field(reader, p + "feed_forward_length")),
        "norm_eps": float(_field(reader, p + "attention.layer_norm_rms_epsilon", 1e-5)),
        "rope_theta": float(_field(reader, p + "rope.freq_base", 10000.0)),
    }
    state: dict[str, torch.Tensor] = {}
    for t in progress.bar(reader.tensors, desc=f"reading {Path(path).name}", unit="tensor"):
        name = _meta_name(t.name)
        if name is None:
            continue
        values = np.array(dequantize(t.data, t.tensor_type), dtype=np.float32)  # writable
        state[name] = torch.from_numpy(values)
    params["vocab_size"] = int(state["tok_embeddings.weight"].shape[0])
    params["tie_word_embeddings"] = "output.weight" not in state
    tokenizer = {"bos_id": _field(reader, "tokenizer.ggml.bos_token_id"),
                 "eos_id": _field(reader, "tokenizer.ggml.eos_token_id")}
    return params, state, tokenizer


def _meta_name(gguf_name: str) -> str | None:
    base, _, kind = gguf_name.rpartition(".")
    if base.startswith("blk."):
        _, layer, part = base.split(".", 2)
        meta = _GGUF_LAYER.get(part)
        return None if meta is None else f"layers.{layer}.{meta}.{kind}"
    meta = _GGUF_TOP.get(base)
    return None if meta is None else f"{meta}.{kind}"


def read_pth(checkpoint: str | Path, params_path: str | Path | None
             ) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """A Meta-layout state dict and its ``params.json`` (required with a .pth)."""
    if params_path is None:
        raise ExportError(f"checkpoint {checkpoint} needs base.params=<params.json> (Meta's "
                          "hyperparameters: dim, n_layers, n_heads, ...)")
    params = json.loads(Path(params_path).read_text())
    state = torch.load(str(checkpoint), map_location="cpu", weights_only=True, mmap=True)
    if "model" in state and isinstance(state["model"], dict):
        state = state["model"]
    state = {k.removeprefix("model."): v.float() for k, v in state.items()}
    if "vocab_size" not in params or int(params["vocab_size"]) <= 0:
        params["vocab_size"] = int(state["tok_embeddings.weight"].shape[0])
    if "output.weight" not in state:
        params["tie_word_embeddings"] = True
    return params, state
