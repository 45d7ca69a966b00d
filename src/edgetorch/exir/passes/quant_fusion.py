"""``do_quant_fusion_and_const_prop``: weight-only quantized embeddings become one
``quantized_decomposed::embedding_byte`` / ``embedding_4bit`` / ``embedding_2bit`` kernel with
packed constant weights, as ExecuTorch 1.5.1's ``QuantFusionPass`` + constant propagation do.

ExecuTorch matches ``torchao.dequantize_affine(qdata, [1, group], scale, zero_point, int8,
qmin, qmax) -> aten.embedding`` before decomposition. Our ``to_edge`` decomposes
``dequantize_affine`` into core ATen (so the program also runs without this pass), so the pass
finds the nodes that came from one ``dequantize_affine`` through their ``from_node``
provenance, and only fuses when

- the group reads three (or two: no zero point) constants and feeds only ``aten.embedding``
  weights, and
- evaluating the group on those constants gives exactly ``(qdata - zero_point) * scale`` in
  float32 -- the fused kernel's arithmetic -- so the rewrite cannot change a single bit.

The decomposition drops ``dequantize_affine``'s quant range, which is how ExecuTorch picks the
kernel; here the narrowest kernel holding the stored values is chosen instead (torchao's int4
weights lie in [-8, 7], its int8 weights reach +-127), which is lossless either way. A zero
point of all zeros is dropped (``None``), as ExecuTorch's filter does.
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.fx.passes.infra.pass_base import PassResult

from ..dialects._ops import ops as exir_ops
from ..node_meta import copy_provenance
from ..signature import constant_placeholders
from .constant_fold import _fresh_name, _remove_constant, add_constant, fold_constants

_SOURCE = "torchao.dequantize_affine.default"
_EMBEDDING = torch.ops.aten.embedding.default  # (Edge ops compare equal to their ATen op)
_KERNELS = {2: "embedding_2bit", 4: "embedding_4bit", 8: "embedding_byte"}


def _source(node: torch.fx.Node) -> tuple[str, int] | None:
    """The ``dequantize_affine`` node ``node`` was decomposed from, if any."""
    todo = list(node.meta.get("from_node") or [])
    while todo:
        src = todo.pop()
        if getattr(src, "target", None) == _SOURCE:
            return src.name, src.graph_id
        todo.extend(getattr(src, "from_node", None) or [])
    return None


def _groups(gm: torch.fx.GraphModule) -> dict[tuple[str, int], list[torch.fx.Node]]:
    groups: dict[tuple[str, int], list[torch.fx.Node]] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function" and (key := _source(node)) is not None:
            groups.setdefault(key, []).append(node)
    return groups


def _evaluate(nodes: list[torch.fx.Node], consts: dict) -> torch.Tensor:
    values = dict(consts)
    for node in nodes:  # graph order is topological
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: values[n])
        with torch.no_grad():
            values[node] = node.target(*args, **kwargs)
    return values[nodes[-1]]


def _roles(inputs: list[torch.fx.Node], consts: dict, out_numel: int):
    """(qdata, scale, zero_point) among the group's constant inputs, or None."""
    ints = [n for n in inputs if not consts[n].is_floating_point() and consts[n].numel() == out_numel]
    if len(ints) != 1:
        return None
    qdata = ints[0]
    rest = [n for n in inputs if n is not qdata]
    # the zero point is subtracted, the scale multiplied (try both ways; evaluation decides)
    if len(rest) == 1:
        return [(qdata, rest[0], None)]
    if len(rest) == 2:
        return [(qdata, rest[0], rest[1]), (qdata, rest[1], rest[0])]
    return None


def _bits(q: torch.Tensor) -> int:
    lo, hi = int(q.min()), int(q.max())
    dim = q.shape[-1]
    for nbit in (2, 4):
        if -(1 << (nbit - 1)) <= lo and hi < (1 << (nbit - 1)) and dim % (8 // nbit) == 0:
            return nbit
    return 8


def pack(q: torch.Tensor, nbit: int) -> torch.Tensor:
    """ExecuTorch's embedding packing: ``value + 2**(nbit-1)`` as uint8; 4-bit puts the even
    column in the high nibble, 2-bit puts column 4k+i in bits 2i..2i+1."""
    if nbit == 8:
        return q
    u = (q.to(torch.int32) + (1 << (nbit - 1))).to(torch.uint8)
    if nbit == 4:
        return (u[:, 0::2] << 4) | u[:, 1::2]
    return u[:, 0::4] | (u[:, 1::4] << 2) | (u[:, 2::4] << 4) | (u[:, 3::4] << 6)


def _fuse_group(ep: ExportedProgram, nodes: list[torch.fx.Node], consts: dict) -> bool:
    members = set(nodes)
    outs = [n for n in nodes if any(u not in members for u in n.users)]
    if len(outs) != 1:
        return False
    out = outs[0]
    users = list(out.users)
    if not users or any(u.target != _EMBEDDING or u.args[0] is not out for u in users):
        return False
    inputs = list(dict.fromkeys(i for n in nodes for i in n.all_input_nodes if i not in members))
    if not all(i in consts for i in inputs):
        return False
    table = _evaluate(nodes, {i: consts[i] for i in inputs})
    if table.dim() != 2 or table.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return False
    for qdata, scale, zp in _roles(inputs, consts, table.numel()) or []:
        rows, dim = table.shape
        q = consts[qdata].reshape(rows, dim)
        s = consts[scale]
        if s.dim() != 2 or s.shape[0] != rows or dim % s.shape[1]:
            s = s.reshape(rows, -1)
        z = None if zp is None else consts[zp].reshape(s.shape).to(s.dtype)
        group = dim // s.shape[1]
        zz = torch.zeros_like(s) if z is None else z
        fused = ((q.float() - zz.float().repeat_interleave(group, 1))
                 * s.float().repeat_interleave(group, 1)).to(table.dtype)
        if torch.equal(fused, table):
            break
    else:
        return False
    nbit = _bits(q)
    if z is not None and not bool(z.any()):
        z = None
    graph = ep.graph
    weight = pack(q, nbit).contiguous()
    params = [add_constant(ep, _fresh_name(ep, f"_{_KERNELS[nbit]}_weight"), weight, weight)]
    params.append(add_constant(ep, _fresh_name(ep, f"_{_KERNELS[nbit]}_scales"), s, s))
    params.append(None if z is None else add_constant(
        ep, _fresh_name(ep, f"_{_KERNELS[nbit]}_zero_points"), z, z))
    qmin, qmax = -(1 << (nbit - 1)), (1 << (nbit - 1)) - 1
    packet = getattr(exir_ops.edge.quantized_decomposed, _KERNELS[nbit])
    for emb in users:
        kwargs = {}
        target = packet.default
        if table.dtype != s.dtype:  # an output dtype other than the scales'
            target, kwargs = packet.dtype, {"dtype": table.dtype}
        with graph.inserting_before(emb):
            new = graph.call_function(target, (*params, qmin, qmax, emb.args[1]), kwargs)
        new.meta["val"] = emb.meta["val"]
        copy_provenance(emb, new)
        emb.replace_all_uses_with(new)
        graph.erase_node(emb)
    for node in reversed(nodes):
        graph.erase_node(node)
    for node in inputs:
        if not node.users:
            _remove_constant(ep, node)
    return True


def fuse_quantized_embeddings(ep: ExportedProgram) -> PassResult:
    """Rewrite every fusable weight-only quantized embedding (see the module docstring)."""
    consts = constant_placeholders(ep)
    changed = False
    for nodes in _groups(ep.graph_module).values():
        changed |= _fuse_group(ep, nodes, consts)
    if changed:
        ep.graph.lint()
        ep.graph_module.recompile()
    return PassResult(ep.graph_module, changed)


def quant_fusion_and_const_prop(ep: ExportedProgram) -> PassResult:
    """ExecuTorch's ``quant_fusion_and_const_prop_pass``: fuse, then fold constant subgraphs
    (e.g. a ``quantize_per_channel`` of a float weight) into constants."""
    fused = fuse_quantized_embeddings(ep)
    folded = fold_constants(ep)
    return PassResult(ep.graph_module, fused.modified or folded)
