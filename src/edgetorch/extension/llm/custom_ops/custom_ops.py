"""ExecuTorch's LLM custom operators for torch: ``llama::sdpa_with_kv_cache``,
``llama::custom_sdpa`` and ``llama::update_cache`` (+ ``.out``), with ExecuTorch 1.5.1's exact
schemas, CPU kernels (torch reference implementations) and Meta kernels.

Importing this module is what ExecuTorch users do before exporting (or running eagerly) a
model that calls ``torch.ops.llama.*``. When ExecuTorch's own library is already loaded in the
process (it defines the same operators), nothing is redefined. The runtime kernels are the
NumPy ones in :mod:`edgetorch.kernels.llama`, always registered.
"""

from __future__ import annotations

import math

import torch

_NS = "llama"

SCHEMAS = {
    "sdpa_with_kv_cache": "(Tensor query, Tensor key, Tensor value, Tensor(a!) key_cache, "
    "Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len, Tensor? attn_mask=None, "
    "float drpout_p=0., bool is_causal=False, float? scale=None) -> Tensor",
    "sdpa_with_kv_cache.out": "(Tensor query, Tensor key, Tensor value, Tensor(a!) key_cache, "
    "Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len, Tensor? attn_mask=None, "
    "float drpout_p=0., bool is_causal=False, float? scale=None, *, Tensor(c!) out) "
    "-> Tensor(c!)",
    "custom_sdpa": "(Tensor query, Tensor key, Tensor value, SymInt start_pos, "
    "Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None) "
    "-> Tensor",
    "custom_sdpa.out": "(Tensor query, Tensor key, Tensor value, SymInt start_pos, "
    "Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None, *, "
    "Tensor(a!) out) -> Tensor(a!)",
    "update_cache": "(Tensor value, Tensor(a!) cache, SymInt start_pos) -> Tensor",
    "update_cache.out": "(Tensor value, Tensor(a!) cache, SymInt start_pos, *, "
    "Tensor(b!) out) -> Tensor(b!)",
}


# ---- reference implementations (torch) ----------------------------------------------------


def _check_sdpa(query, key, value, attn_mask, is_causal) -> None:
    for name, t in (("query", query), ("key", key), ("value", value)):
        torch._check(t.dim() == 4, lambda n=name, t=t: f"llama sdpa: {n} must be 4-D "
                     f"[B, S, H, D], got {t.dim()}-D")
    torch._check(query.dtype in (torch.float32, torch.float16, torch.bfloat16),
                 lambda: f"llama sdpa: query must be a float tensor, got {query.dtype}")
    torch._check(key.dtype == query.dtype and value.dtype == query.dtype,
                 lambda: "llama sdpa: query, key and value must share one dtype")
    torch._check(attn_mask is None or not is_causal,
                 lambda: "llama sdpa: attn_mask and is_causal cannot be set at the same time")
    if attn_mask is not None:
        torch._check(attn_mask.dim() == 2 and attn_mask.dtype in (torch.float32, torch.float16),
                     lambda: "llama sdpa: attn_mask must be a 2-D float tensor")


def _check_update(value, cache, start_pos) -> None:
    torch._check(value.dim() == 4 and cache.dim() == 4,
                 lambda: "llama::update_cache: value and cache must be 4-D [B, S, H, D]")
    torch._check(value.dtype == cache.dtype,
                 lambda: f"llama::update_cache: value is {value.dtype}, cache {cache.dtype}")
    for i in (0, 2, 3):
        torch._check(value.size(i) == cache.size(i), lambda i=i: "llama::update_cache: value "
                     f"and cache differ in dim {i}")
    torch._check(start_pos >= 0)
    torch._check(start_pos < cache.size(1))
    torch._check(start_pos + value.size(1) <= cache.size(1))


def _attention(query, key, value, start_pos, attn_mask, is_causal, scale):
    """Attention of ``query`` [B, S, Hq, D] over cache rows of key/value [B, L, Hkv, D]."""
    s, hq, d = query.shape[1], query.shape[2], query.shape[3]
    n_keys = key.shape[1] if attn_mask is not None else start_pos + s
    rep = hq // key.shape[2]
    q = query.float().transpose(1, 2)
    k = key[:, :n_keys].float().transpose(1, 2).repeat_interleave(rep, dim=1)
    v = value[:, :n_keys].float().transpose(1, 2).repeat_interleave(rep, dim=1)
    scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(d) if scale is None else scale)
    if attn_mask is not None:
        scores = scores + attn_mask.float()
    if is_causal:
        rows = start_pos + torch.arange(s)[:, None]
        scores = scores.masked_fill(torch.arange(n_keys)[None, :] > rows, float("-inf"))
    return (scores.softmax(-1) @ v).transpose(1, 2).to(query.dtype).contiguous()


def custom_sdpa(query, key, value, start_pos, attn_mask=None, drpout_p=0.0, is_causal=False,
                scale=None):
    _check_sdpa(query, key, value, attn_mask, is_causal)
    return _attention(query, key, value, int(start_pos), attn_mask, is_causal, scale)


def update_cache(value, cache, start_pos):
    _check_update(value, cache, start_pos)
    cache[:, start_pos:start_pos + value.shape[1]] = value
    return torch.zeros((1,), dtype=value.dtype)


def sdpa_with_kv_cache(query, key, value, key_cache, value_cache, start_pos, seq_len,
                       attn_mask=None, drpout_p=0.0, is_causal=False, scale=None):
    update_cache(key, key_cache, start_pos)
    update_cache(value, value_cache, start_pos)
    return custom_sdpa(query, key_cache, value_cache, start_pos, attn_mask, drpout_p, is_causal,
                       scale)


def _custom_sdpa_meta(query, key, value, start_pos, attn_mask=None, drpout_p=0.0,
                      is_causal=False, scale=None):
    _check_sdpa(query, key, value, attn_mask, is_causal)
    return torch.empty_like(query)


def _update_cache_meta(value, cache, start_pos):
    _check_update(value, cache, start_pos)
    return torch.empty((1,), dtype=value.dtype, device="meta")


def _sdpa_with_kv_cache_meta(query, key, value, key_cache, value_cache, start_pos, seq_len,
                             attn_mask=None, drpout_p=0.0, is_causal=False, scale=None):
    _check_sdpa(query, key, value, attn_mask, is_causal)
    return torch.empty_like(query)


_IMPLS = {
    "custom_sdpa": (custom_sdpa, _custom_sdpa_meta),
    "update_cache": (update_cache, _update_cache_meta),
    "sdpa_with_kv_cache": (sdpa_with_kv_cache, _sdpa_with_kv_cache_meta),
}


def _out_variant(fn, meta: bool):
    def impl(*args, out, **kwargs):
        result = fn(*args, **kwargs)
        if not meta:
            out.resize_(result.shape).copy_(result)
        return out

    return impl


def _overload_defined(qualified: str) -> bool:
    name, _, overload = qualified.partition(".")
    try:
        return (overload or "default") in getattr(getattr(torch.ops, _NS), name).overloads()
    except (AttributeError, RuntimeError):
        return False


_LIB: torch.library.Library | None = None


def define() -> None:
    """Define the operators unless they exist (ExecuTorch's library may already be loaded)."""
    global _LIB
    if all(_overload_defined(q) for q in SCHEMAS):
        return
    _LIB = torch.library.Library(_NS, "FRAGMENT")
    for qualified, tail in SCHEMAS.items():
        if _overload_defined(qualified):
            continue
        _LIB.define(qualified + tail)
        name = qualified.partition(".")[0]
        ref, meta = _IMPLS[name]
        if qualified.endswith(".out"):
            ref, meta = _out_variant(ref, False), _out_variant(meta, True)
        _LIB.impl(qualified, ref, "CompositeExplicitAutograd")
        _LIB.impl(qualified, meta, "Meta")


define()
