"""A tiny random-weight llama checkpoint (Meta .pth + params.json, or GGUF) for the tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from edgetorch.examples.models.llama import ModelArgs, Transformer

PARAMS = dict(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=160, hidden_dim=128,
              norm_eps=1e-5, rope_theta=10000.0)
MAX_SEQ, MAX_CTX = 8, 32


def tiny_state() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    model = Transformer(ModelArgs.from_params(PARAMS, tie_word_embeddings=True))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    return dict(model.state_dict())


def write_pth(directory: Path) -> tuple[Path, Path]:
    ckpt, params = directory / "tiny.pth", directory / "params.json"
    torch.save(tiny_state(), ckpt)
    params.write_text(json.dumps(PARAMS))
    return ckpt, params


_TO_GGUF = {"attention.wq": "attn_q", "attention.wk": "attn_k", "attention.wv": "attn_v",
            "attention.wo": "attn_output", "feed_forward.w1": "ffn_gate",
            "feed_forward.w2": "ffn_down", "feed_forward.w3": "ffn_up",
            "attention_norm": "attn_norm", "ffn_norm": "ffn_norm"}


def write_gguf(path: Path, q8_embedding: bool = True) -> dict[str, torch.Tensor]:
    """The tiny model as a llama GGUF (token_embd in Q8_0, the rest F32); returns the state
    dict the file holds, dequantized."""
    import gguf
    from gguf.quants import dequantize, quantize

    state = tiny_state()
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(PARAMS["n_layers"])
    w.add_context_length(MAX_CTX)
    w.add_embedding_length(PARAMS["dim"])
    w.add_feed_forward_length(PARAMS["hidden_dim"])
    w.add_head_count(PARAMS["n_heads"])
    w.add_head_count_kv(PARAMS["n_kv_heads"])
    w.add_rope_freq_base(PARAMS["rope_theta"])
    w.add_layer_norm_rms_eps(PARAMS["norm_eps"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    held = {}
    for name, t in state.items():
        arr = t.numpy().astype(np.float32)
        if name == "tok_embeddings.weight" and q8_embedding:
            qt = gguf.GGMLQuantizationType.Q8_0
            data = quantize(arr, qt)
            w.add_tensor("token_embd.weight", data, raw_shape=data.shape, raw_dtype=qt)
            held[name] = torch.from_numpy(dequantize(data, qt).reshape(arr.shape))
            continue
        if name == "tok_embeddings.weight":
            gname = "token_embd.weight"
        elif name == "norm.weight":
            gname = "output_norm.weight"
        else:
            _, layer, rest = name.split(".", 2)
            part, _, kind = rest.rpartition(".")
            gname = f"blk.{layer}.{_TO_GGUF[part]}.{kind}"
        w.add_tensor(gname, arr)
        held[name] = t
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return held
