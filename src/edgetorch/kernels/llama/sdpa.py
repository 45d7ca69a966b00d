"""Attention over a static KV cache in ExecuTorch's ``[B, S, H, D]`` layout (sequence at dim 1).

Semantics of ExecuTorch's ``op_sdpa.cpp`` / ``op_update_cache.cpp``:

* ``update_cache(value, cache, start_pos)`` writes ``cache[:, start_pos:start_pos+S] = value``
  in place; its output is a 1-element dummy that nobody reads (left untouched).
* ``custom_sdpa(q, k_cache, v_cache, start_pos, attn_mask, dropout_p, is_causal, scale)``:
  without a mask only cache rows ``0 .. start_pos+S-1`` take part, and ``is_causal`` lets query
  row ``i`` (absolute position ``start_pos+i``) see rows ``0 .. start_pos+i``. With a 2-D float
  mask ``[S, cache_len]`` every row takes part, the mask is added to the scores, and
  ``is_causal`` must be False (ExecuTorch refuses both at once).
* Grouped-query attention is native: query head ``h`` reads KV head ``h // (Hq / Hkv)``.
* ``scale`` defaults to ``1/sqrt(D)``; ``dropout_p`` is ignored (inference), as in ExecuTorch.
* ``sdpa_with_kv_cache`` is both cache updates followed by ``custom_sdpa``.

Scores and softmax are computed in float32 (ExecuTorch's accumulation type for float32,
float16 and bfloat16 inputs).
"""

from __future__ import annotations

import numpy as np

from ..portable._util import FLOAT32, finish, invalid
from ..registry import kernel

# dtype.name is slow (it formats a string); compare dtypes instead (bfloat16 when available)
_FLOAT_DTYPES = {np.dtype(np.float32), np.dtype(np.float16)}
try:
    import ml_dtypes as _ml

    _FLOAT_DTYPES.add(np.dtype(_ml.bfloat16))
except ImportError:  # pragma: no cover - the minimal runtime environment
    pass


def _check_4d(op: str, **tensors: np.ndarray) -> None:
    for name, t in tensors.items():
        if t.ndim != 4:
            raise invalid(f"{op}: {name} must be 4-D [B, S, H, D], got shape {list(t.shape)}; "
                          "export the model with ExecuTorch's [batch, seq, heads, head_dim] "
                          "layout")


def _check_cache_range(op: str, cache: np.ndarray, start_pos: int, seq_len: int) -> None:
    if not 0 <= start_pos < cache.shape[1] or start_pos + seq_len > cache.shape[1]:
        raise invalid(f"{op}: start_pos {start_pos} + seq_len {seq_len} does not fit a cache "
                      f"of {cache.shape[1]} positions (shape {list(cache.shape)}); keep "
                      "input_pos + tokens within the model's max_context_length")


def update(op: str, value: np.ndarray, cache: np.ndarray, start_pos: int) -> None:
    _check_4d(op, value=value, cache=cache)
    if (value.shape[0], value.shape[2], value.shape[3]) != (cache.shape[0], cache.shape[2],
                                                             cache.shape[3]):
        raise invalid(f"{op}: value {list(value.shape)} and cache {list(cache.shape)} differ "
                      "outside dim 1 (batch, heads and head_dim must match)")
    if value.dtype.itemsize != cache.dtype.itemsize:
        raise invalid(f"{op}: value is {value.dtype} but the cache is {cache.dtype}")
    _check_cache_range(op, cache, start_pos, value.shape[1])
    cache[:, start_pos:start_pos + value.shape[1]] = value


def attention(op: str, q: np.ndarray, k: np.ndarray, v: np.ndarray, start_pos: int,
              mask: np.ndarray | None, is_causal: bool, scale: float | None) -> np.ndarray:
    _check_4d(op, query=q, key=k, value=v)
    if q.dtype not in _FLOAT_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise invalid(f"{op}: query, key and value must share one float dtype, got "
                      f"{q.dtype}, {k.dtype}, {v.dtype}")
    b, s, hq, d = q.shape
    hkv = k.shape[2]
    if k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        raise invalid(f"{op}: key {list(k.shape)} / value {list(v.shape)} do not match "
                      f"query {list(q.shape)}")
    if hkv > hq or hq % hkv:
        raise invalid(f"{op}: {hq} query heads are not a multiple of {hkv} KV heads")
    if mask is not None and is_causal:
        raise invalid(f"{op}: attn_mask and is_causal cannot be set at the same time; pass "
                      "one of them")
    if mask is not None:
        if mask.ndim != 2 or mask.dtype != FLOAT32:
            raise invalid(f"{op}: attn_mask must be a 2-D float32 tensor, got "
                          f"{mask.dtype} {list(mask.shape)}")
        n_keys = k.shape[1]
        if mask.shape != (s, n_keys):
            raise invalid(f"{op}: attn_mask {list(mask.shape)} must be [{s}, {n_keys}] "
                          "(query length x cache length)")
    else:
        n_keys = start_pos + s
        if not 0 <= start_pos or n_keys > k.shape[1]:
            raise invalid(f"{op}: start_pos {start_pos} + seq_len {s} exceeds the "
                          f"{k.shape[1]} cached positions")
    rep = hq // hkv
    # [B, Hkv, rep, S, D] queries against [B, Hkv, 1, L, D] keys: GQA without copying K/V.
    # float32 inputs are used in place (views of the cache, no copies)
    qh = q.astype(FLOAT32, copy=False).transpose(0, 2, 1, 3).reshape(b, hkv, rep, s, d)
    kh = k[:, :n_keys].astype(FLOAT32, copy=False).transpose(0, 2, 1, 3)[:, :, None]
    vh = v[:, :n_keys].astype(FLOAT32, copy=False).transpose(0, 2, 1, 3)[:, :, None]
    factor = np.float32(1.0 / np.sqrt(d) if scale is None else scale)
    scores = qh @ kh.swapaxes(-1, -2)
    scores *= factor
    if mask is not None:
        scores += mask
    if is_causal and s > 1:  # one query row at the end sees every cached row anyway
        rows = start_pos + np.arange(s)[:, None]
        scores = np.where(np.arange(n_keys)[None, :] > rows, -np.inf, scores)
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores /= scores.sum(axis=-1, keepdims=True)
    y = (scores @ vh).reshape(b, hq, s, d).transpose(0, 2, 1, 3)
    return y.astype(q.dtype, copy=False)


@kernel("llama::update_cache.out")
def update_cache_out(value, cache, start_pos, out):
    update("llama::update_cache.out", value, cache, int(start_pos))
    return out


@kernel("llama::custom_sdpa.out")
def custom_sdpa_out(query, key, value, start_pos, attn_mask, drpout_p, is_causal, scale, out):
    y = attention("llama::custom_sdpa.out", query, key, value, int(start_pos), attn_mask,
                  bool(is_causal), scale)
    return finish(y, out)


@kernel("llama::sdpa_with_kv_cache.out")
def sdpa_with_kv_cache_out(query, key, value, key_cache, value_cache, start_pos, seq_len,
                           attn_mask, drpout_p, is_causal, scale, out):
    op = "llama::sdpa_with_kv_cache.out"
    start = int(start_pos)
    _check_cache_range(op, key_cache, start, int(seq_len))
    update(op, key, key_cache, start)
    update(op, value, value_cache, start)
    y = attention(op, query, key_cache, value_cache, start, attn_mask, bool(is_causal), scale)
    return finish(y, out)
