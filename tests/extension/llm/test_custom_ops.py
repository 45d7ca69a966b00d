"""ExecuTorch's llama:: custom ops: the torch definitions (schemas, CPU and Meta kernels) and
the runtime's NumPy kernels, both against torch's own scaled_dot_product_attention."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import edgetorch.extension.llm.custom_ops.custom_ops  # noqa: F401
from edgetorch.errors import KernelError
from edgetorch.kernels import get_kernel

# ExecuTorch 1.5.1's schemas, printed from libcustom_ops_aot_lib.so.
SCHEMAS = {
    "sdpa_with_kv_cache": "llama::sdpa_with_kv_cache(Tensor query, Tensor key, Tensor value, "
    "Tensor(a!) key_cache, Tensor(b!) value_cache, SymInt start_pos, SymInt seq_len, "
    "Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, float? scale=None) "
    "-> Tensor",
    "custom_sdpa": "llama::custom_sdpa(Tensor query, Tensor key, Tensor value, SymInt "
    "start_pos, Tensor? attn_mask=None, float drpout_p=0., bool is_causal=False, "
    "float? scale=None) -> Tensor",
    "update_cache": "llama::update_cache(Tensor value, Tensor(a!) cache, SymInt start_pos) "
    "-> Tensor",
    "update_cache.out": "llama::update_cache.out(Tensor value, Tensor(a!) cache, SymInt "
    "start_pos, *, Tensor(b!) out) -> Tensor(b!)",
}


@pytest.mark.parametrize("name", SCHEMAS)
def test_schemas_are_executorchs(name):
    packet, _, overload = name.partition(".")
    op = getattr(getattr(torch.ops.llama, packet), overload or "default")
    assert str(op._schema) == SCHEMAS[name]


def reference(q, k_cache, v_cache, start_pos, mask, is_causal, scale):
    """torch SDPA over cache rows, GQA by repeating KV heads, in [B, H, S, D]."""
    s = q.shape[1]
    n = k_cache.shape[1] if mask is not None else start_pos + s
    rep = q.shape[2] // k_cache.shape[2]
    qh = q.transpose(1, 2)
    kh = k_cache[:, :n].transpose(1, 2).repeat_interleave(rep, 1)
    vh = v_cache[:, :n].transpose(1, 2).repeat_interleave(rep, 1)
    if is_causal:
        mask = torch.zeros(s, n).masked_fill(
            torch.arange(n)[None] > start_pos + torch.arange(s)[:, None], float("-inf"))
    y = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, scale=scale)
    return y.transpose(1, 2)


# (batch, seq, q heads, kv heads, head dim, cache len, start_pos, mask?, causal, scale)
CASES = [
    (1, 5, 4, 4, 8, 16, 0, False, True, None),
    (1, 1, 4, 2, 8, 16, 7, False, True, None),  # decode step, GQA
    (2, 3, 6, 2, 16, 12, 4, False, True, 0.3),
    (1, 4, 9, 3, 64, 32, 10, False, False, None),  # no causal: every row up to start+S
    (1, 3, 4, 1, 8, 10, 2, True, False, None),  # float mask over the whole cache
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_custom_sdpa_torch_and_numpy_equal_torch_sdpa(case):
    b, s, hq, hkv, d, ctx, start, use_mask, causal, scale = case
    g = torch.Generator().manual_seed(0)
    q = torch.randn(b, s, hq, d, generator=g)
    kc = torch.randn(b, ctx, hkv, d, generator=g)
    vc = torch.randn(b, ctx, hkv, d, generator=g)
    mask = torch.randn(s, ctx, generator=g) if use_mask else None
    want = reference(q, kc, vc, start, mask, causal, scale)
    got = torch.ops.llama.custom_sdpa(q, kc, vc, start, mask, 0.0, causal, scale)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    out = np.zeros(q.shape, np.float32)
    fn = get_kernel("llama::custom_sdpa.out").fn
    res = fn(q.numpy(), kc.numpy(), vc.numpy(), start, None if mask is None else mask.numpy(),
             0.0, causal, scale, out)
    np.testing.assert_allclose(res, want.numpy(), rtol=1e-5, atol=1e-5)


def test_update_cache_writes_in_place_at_start_pos():
    cache = torch.zeros(1, 8, 2, 4)
    value = torch.randn(1, 3, 2, 4)
    torch.ops.llama.update_cache(value, cache, 2)
    assert torch.equal(cache[:, 2:5], value) and not cache[:, :2].any() and not cache[:, 5:].any()
    np_cache = np.zeros((1, 8, 2, 4), np.float32)
    get_kernel("llama::update_cache.out").fn(value.numpy(), np_cache, 2, np.zeros(1, np.float32))
    np.testing.assert_array_equal(np_cache, cache.numpy())


def test_sdpa_with_kv_cache_is_update_then_custom_sdpa():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 4, 8, generator=g), torch.randn(1, 2, 2, 8, generator=g),
               torch.randn(1, 2, 2, 8, generator=g))
    kc, vc = torch.randn(1, 10, 2, 8, generator=g), torch.randn(1, 10, 2, 8, generator=g)
    kc2, vc2 = kc.clone(), vc.clone()
    npk, npv = kc.numpy().copy(), vc.numpy().copy()
    got = torch.ops.llama.sdpa_with_kv_cache(q, k, v, kc, vc, 3, 2, None, 0.0, True)
    torch.ops.llama.update_cache(k, kc2, 3)
    torch.ops.llama.update_cache(v, vc2, 3)
    want = torch.ops.llama.custom_sdpa(q, kc2, vc2, 3, None, 0.0, True)
    torch.testing.assert_close(got, want) and torch.testing.assert_close(kc, kc2)
    res = get_kernel("llama::sdpa_with_kv_cache.out").fn(
        q.numpy(), k.numpy(), v.numpy(), npk, npv, 3, 2, None, 0.0, True, None,
        np.zeros(q.shape, np.float32))
    np.testing.assert_allclose(res, want.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(npk, kc2.numpy())


def test_meta_kernels_give_shapes():
    q = torch.empty(1, 3, 4, 8, device="meta")
    kc = torch.empty(1, 16, 2, 8, device="meta")
    assert torch.ops.llama.custom_sdpa(q, kc, kc, 0, None, 0.0, True).shape == q.shape
    assert torch.ops.llama.update_cache(torch.empty(1, 3, 2, 8, device="meta"), kc, 0).shape \
        == (1,)


@pytest.mark.parametrize("args, match", [
    (dict(start=14, s=3), "does not fit a cache"),
    (dict(mask=True, causal=True), "cannot be set at the same time"),
    (dict(hq=3), "not a multiple"),
])
def test_numpy_kernels_refuse_bad_arguments(args, match):
    s, hq = args.get("s", 1), args.get("hq", 4)
    q = np.zeros((1, s, hq, 8), np.float32)
    cache = np.zeros((1, 16, 2, 8), np.float32)
    mask = np.zeros((s, 16), np.float32) if args.get("mask") else None
    with pytest.raises(KernelError, match=match):
        get_kernel("llama::sdpa_with_kv_cache.out").fn(
            q, q[:, :, :2], q[:, :, :2], cache, cache.copy(), args.get("start", 0), s, mask,
            0.0, args.get("causal", False), None, np.zeros_like(q))
