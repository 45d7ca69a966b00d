"""The compiler half of the quantized library: torch operator definitions (imports torch).

What ExecuTorch's ``libquantized_ops_aot_lib`` and ``exir/passes/_quant_patterns_and_
replacements.py`` give torch, written here in Python: the ``.out`` overloads of torch's own
``quantized_decomposed`` ops (``to_executorch`` retargets nodes to them), and the ops torch
lacks -- ``embedding_byte/4bit/2bit`` (+ ``.dtype``), ``mixed_mm``, ``mixed_linear`` and ``add``
-- with reference implementations in torch (used by eager calls, tracing and tests) and meta
kernels. ``edgetorch.exir`` imports this module; the runtime never does.
"""

from __future__ import annotations

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401  (defines quantized_decomposed)

_NS = "quantized_decomposed"
_LIB = torch.library.Library(_NS, "FRAGMENT")

_EMBEDDING_ARGS = ("Tensor weight, Tensor weight_scales, Tensor? weight_zero_points, "
                   "int weight_quant_min, int weight_quant_max, Tensor indices")
_ADD_ARGS = ("Tensor a, float a_scale, int a_zero_point, int a_quant_min, int a_quant_max, "
             "Tensor b, float b_scale, int b_zero_point, int b_quant_min, int b_quant_max, "
             "float out_scale, int out_zero_point, int out_quant_min, int out_quant_max")

# name.overload -> schema tail, in quantized.yaml's argument order.
SCHEMAS = {
    "quantize_per_tensor.out": "(Tensor input, float scale, int zero_point, int quant_min, "
    "int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "quantize_per_tensor.Tensor_out": "(Tensor input, Tensor scale, Tensor zero_point, "
    "int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_tensor.out": "(Tensor input, float scale, int zero_point, int quant_min, "
    "int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, Tensor(a!) out) "
    "-> Tensor(a!)",
    "dequantize_per_tensor.Tensor_out": "(Tensor input, Tensor scale, Tensor zero_point, "
    "int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, "
    "Tensor(a!) out) -> Tensor(a!)",
    "quantize_per_channel.out": "(Tensor input, Tensor scales, Tensor zero_points, int axis, "
    "int quant_min, int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_channel.out": "(Tensor input, Tensor scales, Tensor? zero_points, int axis, "
    "int quant_min, int quant_max, ScalarType dtype, *, ScalarType? out_dtype=None, "
    "Tensor(a!) out) -> Tensor(a!)",
    "choose_qparams.Tensor_out": "(Tensor input, int quant_min, int quant_max, float eps, "
    "ScalarType dtype, *, Tensor(a!) scale_out, Tensor(b!) zero_point_out) "
    "-> (Tensor(a!), Tensor(b!))",
    "choose_qparams_per_token_asymmetric.out": "(Tensor input, ScalarType dtype, *, "
    "Tensor(a!) scale_out, Tensor(b!) zero_point_out) -> (Tensor(a!), Tensor(b!))",
    "quantize_per_token.out": "(Tensor input, Tensor scales, Tensor zero_points, int quant_min, "
    "int quant_max, ScalarType dtype, *, Tensor(a!) out) -> Tensor(a!)",
    "dequantize_per_token.out": "(Tensor input, Tensor scales, Tensor zero_points, "
    "int quant_min, int quant_max, ScalarType dtype, ScalarType output_dtype, *, "
    "Tensor(a!) out) -> Tensor(a!)",
    "mixed_mm": "(Tensor input, Tensor weight, Tensor weight_scales, "
    "Tensor? weight_zero_points) -> Tensor",
    "mixed_mm.out": "(Tensor input, Tensor weight, Tensor weight_scales, "
    "Tensor? weight_zero_points, *, Tensor(a!) out) -> Tensor(a!)",
    "mixed_linear": "(Tensor input, Tensor weight, Tensor weight_scales, "
    "Tensor? weight_zero_points, ScalarType? dtype=None) -> Tensor",
    "mixed_linear.out": "(Tensor input, Tensor weight, Tensor weight_scales, "
    "Tensor? weight_zero_points, ScalarType? dtype=None, *, Tensor(a!) out) -> Tensor(a!)",
    "add": f"({_ADD_ARGS}) -> Tensor qc",
    "add.out": f"({_ADD_ARGS}, *, Tensor(a!) out) -> Tensor(a!)",
}
for _name in ("embedding_byte", "embedding_4bit", "embedding_2bit"):
    SCHEMAS[_name] = f"({_EMBEDDING_ARGS}) -> Tensor"
    SCHEMAS[f"{_name}.dtype"] = f"({_EMBEDDING_ARGS}, *, ScalarType? dtype=None) -> Tensor"
    SCHEMAS[f"{_name}.out"] = f"({_EMBEDDING_ARGS}, *, Tensor(a!) out) -> Tensor(a!)"
    SCHEMAS[f"{_name}.dtype_out"] = (f"({_EMBEDDING_ARGS}, *, ScalarType? dtype=None, "
                                     "Tensor(a!) out) -> Tensor(a!)")


def _op(qualified: str):
    name, _, overload = qualified.partition(".")
    packet = getattr(getattr(torch.ops, _NS), name, None)
    return None if packet is None else getattr(packet, overload or "default", None)


def _defined(qualified: str) -> bool:
    name, _, overload = qualified.partition(".")
    try:
        return (overload or "default") in getattr(getattr(torch.ops, _NS), name).overloads()
    except (AttributeError, RuntimeError):
        return False


# ---- reference implementations (torch) ----------------------------------------------------


def _unpack(weight: torch.Tensor, nbit: int) -> torch.Tensor:
    if nbit == 8:
        return weight.to(torch.int32)
    w = weight.to(torch.int32)
    parts = [(w >> 4) & 0xF, w & 0xF] if nbit == 4 else [(w >> (2 * i)) & 3 for i in range(4)]
    return torch.stack(parts, dim=-1).reshape(w.shape[0], -1) - (1 << (nbit - 1))


def _embedding(nbit, weight, scales, zero_points, qmin, qmax, indices, dtype=None):
    values = _unpack(weight, nbit).to(torch.float32)
    groups = scales.shape[1] if scales.dim() == 2 else 1
    s = scales.reshape(scales.shape[0], groups).to(torch.float32)
    s = s.repeat_interleave(values.shape[1] // groups, dim=1)
    if zero_points is not None:
        zp = zero_points.reshape(scales.shape[0], groups).to(torch.float32)
        values = values - zp.repeat_interleave(values.shape[1] // groups, dim=1)
    table = (values * s).to(dtype or scales.dtype)
    return torch.nn.functional.embedding(indices, table)


def _embedding_meta(nbit, weight, scales, zero_points, qmin, qmax, indices, dtype=None):
    dim = weight.shape[1] * (8 // nbit)
    return weight.new_empty((*indices.shape, dim), dtype=dtype or scales.dtype)


def _mixed_mm(input, weight, weight_scales, weight_zero_points):
    return input @ (weight.to(input.dtype) * weight_scales[:, None])


def _mixed_linear(input, weight, weight_scales, weight_zero_points, dtype=None):
    s = weight_scales.reshape(weight.shape[0], -1)
    g = -(-weight.shape[1] // s.shape[1])
    w = weight.to(input.dtype) * s.repeat_interleave(g, dim=1)[:, : weight.shape[1]]
    return (input @ w.t()).to(dtype or input.dtype)


def _add(a, a_scale, a_zp, a_qmin, a_qmax, b, b_scale, b_zp, b_qmin, b_qmax, out_scale, out_zp,
         out_qmin, out_qmax):
    ops = torch.ops.quantized_decomposed
    x = ops.dequantize_per_tensor(a, a_scale, a_zp, a_qmin, a_qmax, a.dtype)
    y = ops.dequantize_per_tensor(b, b_scale, b_zp, b_qmin, b_qmax, b.dtype)
    return ops.quantize_per_tensor(x + y, out_scale, out_zp, out_qmin, out_qmax, a.dtype)


def _functional(qualified: str):
    """The functional op an ``.out``-style overload computes."""
    name, _, overload = qualified.partition(".")
    base = {"Tensor_out": "tensor", "out": "default", "dtype_out": "dtype"}[overload]
    return getattr(getattr(torch.ops, _NS), name).__getattr__(base)


def _out_impl(qualified: str, n_outs: int):
    """An out variant runs its functional op and copies the result(s) into the outs."""
    functional = _functional(qualified)

    def impl(*args, **kwargs):
        outs = [kwargs.pop(k) for k in list(kwargs)[-n_outs:]]
        result = functional(*args, **kwargs)
        results = result if isinstance(result, tuple) else (result,)
        for o, r in zip(outs, results):
            o.resize_(r.shape).copy_(r)
        return outs[0] if n_outs == 1 else tuple(outs)

    return impl


def _out_meta(n_outs: int):
    def meta(*args, **kwargs):
        outs = list(kwargs.values())[-n_outs:]
        return outs[0] if n_outs == 1 else tuple(outs)

    return meta


_FUNCTIONAL_IMPLS = {
    "mixed_mm": (_mixed_mm, lambda i, w, s, z: i.new_empty((i.shape[0], w.shape[1]))),
    "mixed_linear": (_mixed_linear, lambda i, w, s, z, dtype=None: i.new_empty(
        (i.shape[0], w.shape[0]), dtype=dtype or i.dtype)),
    "add": (_add, lambda a, *rest: torch.empty_like(a)),
}
for _name, _nbit in (("embedding_byte", 8), ("embedding_4bit", 4), ("embedding_2bit", 2)):
    for _overload in ("", ".dtype"):
        _FUNCTIONAL_IMPLS[_name + _overload] = (
            (lambda nbit: lambda *a, dtype=None: _embedding(nbit, *a, dtype=dtype))(_nbit),
            (lambda nbit: lambda *a, dtype=None: _embedding_meta(nbit, *a, dtype=dtype))(_nbit),
        )


def define() -> None:
    """Define every missing operator (idempotent; ExecuTorch's library may be loaded too).

    Defining an overload makes torch build a new packet (and new ``OpOverload`` objects) for
    that op name, while torchao's PT2E keeps the old objects in lists it matches nodes
    against; so the packets that existed before are put back afterwards (they resolve the
    new overloads too), and torchao keeps recognising the ops whichever was imported first.
    """
    namespace = getattr(torch.ops, _NS)
    before = {name: packet for name in {q.partition(".")[0] for q in SCHEMAS}
              if (packet := getattr(namespace, name, None)) is not None}
    overloads = {(name, ov): getattr(packet, ov) for name, packet in before.items()
                 for ov in packet.overloads()}
    _define_missing()
    for name, packet in before.items():
        setattr(namespace, name, packet)
    for (name, ov), op in overloads.items():
        setattr(before[name], ov, op)


def _define_missing() -> None:
    for qualified, tail in SCHEMAS.items():
        if _defined(qualified):
            continue
        name, _, overload = qualified.partition(".")
        _LIB.define(f"{name}{'.' + overload if overload else ''}{tail}")
        if qualified in _FUNCTIONAL_IMPLS:
            ref, meta = _FUNCTIONAL_IMPLS[qualified]
            _LIB.impl(qualified, ref, "CompositeExplicitAutograd")
            _LIB.impl(qualified, meta, "Meta")
    for qualified in SCHEMAS:  # out variants, once every functional op exists
        if not qualified.endswith("out") or _op(qualified) is None:
            continue
        n_outs = sum(1 for a in _op(qualified)._schema.arguments if a.is_out)
        if not torch._C._dispatch_has_kernel_for_dispatch_key(
                f"{_NS}::{qualified}", "CompositeExplicitAutograd"):
            _LIB.impl(qualified, _out_impl(qualified, n_outs), "CompositeExplicitAutograd")
            _LIB.impl(qualified, _out_meta(n_outs), "Meta")


define()
