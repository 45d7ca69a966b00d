"""Source transforms that quantize the decoder before export, as ExecuTorch's
``export_llama`` does:

* ``quantization.qmode``: ``8da4w`` is torchao's ``Int8DynamicActivationIntxWeightConfig``
  (int4 weights in groups of ``group_size``, int8 per-token dynamic activations; XNNPACK runs
  it as qdint8 x qbint4), ``int8`` is int8 weight-only per output channel
  (``IntxWeightOnlyConfig``). Linears whose input width the group size does not divide stay
  float, like ExecuTorch's filter.
* ``quantization.embedding_quantize="<bits>,<group>"``: the embedding becomes a call to
  ``quantized_decomposed::embedding_{byte,4bit,2bit}`` on a packed table with symmetric
  per-group scales (ExecuTorch's ``EmbeddingQuantHandler``); group 0 means one group per row.
  A tied LM head is untied first, and keeps a float copy of the table.
"""

from __future__ import annotations

import torch
from torch import nn

from ....errors import ExportError
from ....util import progress

QMODES = ("8da4w", "int8")
_OPS = {8: "embedding_byte", 4: "embedding_4bit", 2: "embedding_2bit"}


class QuantizedEmbedding(nn.Module):
    """An embedding table stored as packed ``bits``-bit integers and float32 group scales."""

    def __init__(self, weight: torch.Tensor, bits: int, group_size: int) -> None:
        super().__init__()
        rows, dim = weight.shape
        group = group_size or dim
        if dim % group:
            raise ExportError(f"embedding_quantize group size {group} does not divide the "
                              f"embedding dim {dim}; pick a divisor or 0 (per row)")
        self.bits, self.qmax = bits, 2 ** (bits - 1) - 1
        self.qmin = -self.qmax - 1
        w = weight.detach().float().reshape(rows, dim // group, group)
        scales = w.abs().amax(-1).clamp(min=1e-9) / self.qmax
        q = torch.clamp(torch.round(w / scales[..., None]), self.qmin, self.qmax).to(torch.int32)
        q = q.reshape(rows, dim)
        self.register_buffer("weight", _pack(q, bits))
        self.register_buffer("scales", scales if group_size else scales[:, 0].contiguous())

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        op = getattr(torch.ops.quantized_decomposed, _OPS[self.bits]).default
        return op(self.weight, self.scales, None, self.qmin, self.qmax, indices)


def _pack(q: torch.Tensor, bits: int) -> torch.Tensor:
    """The byte layout of ExecuTorch's kernels: values offset by 2**(bits-1); 4-bit puts the
    even column in the high nibble, 2-bit puts column 4k+i in bits 2i..2i+1."""
    if bits == 8:
        return q.to(torch.int8)
    u = q + (1 << (bits - 1))
    if bits == 4:
        return ((u[:, 0::2] << 4) | u[:, 1::2]).to(torch.uint8)
    return (u[:, 0::4] | (u[:, 1::4] << 2) | (u[:, 2::4] << 4) | (u[:, 3::4] << 6)).to(
        torch.uint8)


def quantize(model, cfg) -> None:
    """Apply ``cfg.quantization`` to the eager ``model`` in place."""
    q = cfg.quantization
    if q.embedding_quantize is not None:
        bits, group = _embedding_spec(q.embedding_quantize)
        model.untie()
        import edgetorch.kernels.quantized.aot  # noqa: F401  (defines embedding_4bit & co.)

        model.tok_embeddings = QuantizedEmbedding(model.tok_embeddings.weight, bits, group)
    if q.qmode is None:
        return
    if q.qmode not in QMODES:
        raise ExportError(f"quantization.qmode {q.qmode!r} is not supported; choose one of "
                          f"{', '.join(QMODES)}")
    from torchao.quantization import (
        Int8DynamicActivationIntxWeightConfig,
        IntxWeightOnlyConfig,
    )
    from torchao.quantization.granularity import PerAxis, PerGroup

    if q.qmode == "8da4w":
        gs = q.group_size or 128
        config = Int8DynamicActivationIntxWeightConfig(
            weight_dtype=torch.int4, weight_granularity=PerGroup(gs),
            intx_choose_qparams_algorithm="hqq_scale_only" if q.use_hqq else "affine")
        _per_layer(model, config, lambda m: m.in_features % gs == 0)
    else:
        _per_layer(model, IntxWeightOnlyConfig(weight_dtype=torch.int8,
                                               granularity=PerAxis(0)), lambda m: True)


def _per_layer(model, config, takes) -> None:
    """``quantize_`` the Linear layers ``takes`` accepts, one decoder layer at a time (a
    progress bar counts them), then the rest (the output layer)."""
    from torchao.quantization import quantize_

    layers = getattr(model, "layers", None)
    layers = list(layers) if isinstance(layers, nn.ModuleList) else []
    for layer in progress.bar(layers, desc=f"quantizing ({type(config).__name__})",
                              unit="layer"):
        quantize_(layer, config, filter_fn=lambda m, fqn: isinstance(m, nn.Linear) and takes(m))
    quantize_(model, config, filter_fn=lambda m, fqn: isinstance(m, nn.Linear) and takes(m)
              and not (layers and fqn.startswith("layers.")))


def _embedding_spec(spec: str) -> tuple[int, int]:
    try:
        bits, group = (int(x) for x in str(spec).split(","))
    except ValueError:
        raise ExportError(f"quantization.embedding_quantize {spec!r} must be '<bits>,<group "
                          "size>' such as '4,32' or '8,0' (0: one group per row)") from None
    if bits not in _OPS:
        raise ExportError(f"embedding_quantize bits must be 2, 4 or 8, got {bits}")
    return bits, group
