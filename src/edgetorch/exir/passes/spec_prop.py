"""Give every tensor-valued node a ``TensorSpec`` (``node.meta["spec"]``), as ExecuTorch does.

Out-variant calls share the spec of the buffer they write; ``memory.view`` gets its own spec
that aliases its base's memory; symbolic sizes get no spec (they are Int values at run time).
"""

from __future__ import annotations

import operator

import sympy
import torch
from torch._ops import OpOverload
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind
from torch.fx.passes.infra.pass_base import PassResult

from ...schema.program import TensorShapeDynamism
from .. import memory
from ..ops import body_attrs, is_cond, is_map, is_out_variant, out_arg_names
from ..signature import constant_value, placeholder_infos
from ..sym_util import eval_expr
from ..tensor import TensorSpec, dim_order_of


def upper_bound(size: int | torch.SymInt) -> int:
    """The largest value a (possibly symbolic) size can take. A size the export constraints
    leave unbounded takes its value in the traced example, as ExecuTorch's
    ``eval_upper_bound`` does (larger inputs are then refused at run time); one that has no
    such value either (data-dependent) is an error."""
    if isinstance(size, int):
        return size
    node = size.node
    if node.is_constant() or not node.expr.free_symbols:
        return int(size)
    bound = node.shape_env.bound_sympy(node.expr).upper
    if isinstance(bound, sympy.Integer):
        return int(bound)
    hint = eval_expr(size)
    if hint is None:
        raise ValueError(
            f"size {node.expr} has no upper bound; give its torch.export.Dim a max=..."
        )
    return hint


def spec_of(val: torch.Tensor, **kw) -> TensorSpec:
    shape = tuple(upper_bound(s) for s in val.shape)
    dynamic = any(not isinstance(s, int) and s.node.expr.free_symbols for s in val.shape)
    return TensorSpec(
        dtype=val.dtype,
        shape=shape,
        dim_order=dim_order_of(val),
        dynamism=TensorShapeDynamism.DYNAMIC_BOUND if dynamic else TensorShapeDynamism.STATIC,
        requires_grad=bool(getattr(val, "requires_grad", False)),
        **kw,
    )


def root(spec: TensorSpec) -> TensorSpec:
    while spec.alias_of is not None:
        spec = spec.alias_of
    return spec


def propagate_specs(ep: ExportedProgram) -> bool:
    propagate_graph_specs(ep.graph_module, ep)
    return True


def propagate_graph_specs(gm: torch.fx.GraphModule, ep: ExportedProgram | None = None) -> None:
    """Specs for ``gm``'s nodes; with ``ep``, weights and buffers are marked constant (with
    their bytes) or named (mutable buffers), as the emitter needs."""
    infos = placeholder_infos(ep) if ep is not None else {}
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if node.op == "placeholder":
            if not isinstance(val, torch.Tensor):
                node.meta["spec"] = None
                continue
            info = infos.get(node)
            const = info is not None and info.kind != InputKind.USER_INPUT and not info.mutable
            spec = spec_of(val, const=const, fqn=info.fqn if info else None)
            if info is not None and info.fqn is not None:
                # Weights' bytes; for a mutable buffer, its initial state.
                spec.storage = constant_value(ep, info)
            node.meta["spec"] = spec
        elif node.op == "call_function":
            node.meta["spec"] = _call_spec(node, val)
            _propagate_requires_grad(node)
            _propagate_branches(gm, node)
        elif node.op == "output":
            node.meta["spec"] = _output_spec(node)


class SpecPropPass:
    """ExecuTorch's graph-module pass: a ``TensorSpec`` on every tensor-valued node."""

    def __call__(self, graph_module: torch.fx.GraphModule) -> PassResult:
        propagate_graph_specs(graph_module)
        return PassResult(graph_module, True)

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        return self(graph_module)

    def update_placeholder_tensor_specs(self, exported_program: ExportedProgram,
                                        graph_module: torch.fx.GraphModule) -> None:
        """Mark the placeholders of weights, constants and non-mutated buffers constant."""
        infos = placeholder_infos(exported_program)
        for node in graph_module.graph.nodes:
            info, spec = infos.get(node), node.meta.get("spec")
            if node.op == "placeholder" and isinstance(spec, TensorSpec) and info is not None \
                    and info.kind != InputKind.USER_INPUT and not info.mutable:
                spec.const = True


def _output_spec(node: torch.fx.Node) -> tuple:
    """The output node's specs are its arguments' (the same objects), as in ExecuTorch."""
    def spec(a: object) -> object:
        return a.meta.get("spec") if isinstance(a, torch.fx.Node) else None

    outs = node.args[0]
    if isinstance(outs, (list, tuple)):
        return tuple(spec(a) for a in outs)
    return torch.utils._pytree.tree_map(spec, outs)


def _propagate_branches(root_gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
    """A control-flow body's nodes (``cond``'s branches, ``map``'s body) get specs as usual;
    its placeholders get specs of their own, as in ExecuTorch (the emitter binds them to the
    operands' values -- but for ``map``'s slice of the mapped tensor, a tensor of the body's own
    -- and the planner plans each body on its own)."""
    for attr in body_attrs(node):
        branch = getattr(root_gm, attr.target)
        for inner in branch.graph.nodes:
            if inner.op == "placeholder":
                val = inner.meta.get("val")
                inner.meta["spec"] = spec_of(val) if isinstance(val, torch.Tensor) else None
            if inner.op == "call_function":
                inner.meta["spec"] = _call_spec(inner, inner.meta.get("val"))
                _propagate_requires_grad(inner)
                _propagate_branches(branch, inner)
            if inner.op == "output":
                inner.meta["spec"] = _output_spec(inner)
    _bodies_require_grad(root_gm, node)


def _bodies_require_grad(root_gm: torch.fx.GraphModule, node: torch.fx.Node) -> None:
    """ExecuTorch's grad-mode re-trace runs a control-flow body on the operands it is bound to
    (``map``: the mapped slices and the extra operands), so a body computed from a parameter
    (a closed-over ``nn.Linear``) has ``requires_grad`` results. Same here: the body's inputs
    take the flag of what they are bound to and its nodes follow; an output requires grad when
    a body's result for it does."""
    if is_cond(node):
        bound = list(node.args[3])
    elif is_map(node):
        bound = [*node.args[1], *node.args[2]]
    else:
        return
    for attr in body_attrs(node):
        body = getattr(root_gm, attr.target)
        placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
        changed = False
        for ph, arg in zip(placeholders, bound):
            spec = ph.meta.get("spec")
            outer = arg.meta.get("spec") if isinstance(arg, torch.fx.Node) else None
            if isinstance(spec, TensorSpec) and isinstance(outer, TensorSpec) \
                    and outer.requires_grad and not spec.requires_grad:
                spec.requires_grad = changed = True
        if changed:
            for inner in body.graph.nodes:
                if inner.op == "call_function":
                    _propagate_requires_grad(inner)
                    _bodies_require_grad(body, inner)
        results = [a.meta.get("spec") if isinstance(a, torch.fx.Node) else None
                   for a in body.graph.output_node().args[0]]
        for out, res in zip(_specs(node), results):
            if isinstance(res, TensorSpec) and res.requires_grad:
                out.requires_grad = True


def _propagate_requires_grad(node: torch.fx.Node) -> None:
    """ExecuTorch re-traces the graph with grad mode on before making specs, so a floating
    point result computed from a parameter has ``requires_grad`` set (the emitter writes it
    into the ``.pte``); our graphs' values lost it. Same rule: any tensor input requiring grad."""
    if node.target in (memory.alloc, operator.getitem) or is_cond(node) or is_map(node):
        return
    inputs = [s for a in node.all_input_nodes if a.target is not memory.alloc for s in _specs(a)]
    if not any(s.requires_grad for s in inputs):
        return
    flags = _differentiable_outputs(node)
    for i, spec in enumerate(_specs(node)):
        if any(spec is s for s in inputs):
            continue  # an in-place op's result is its input: that spec is not ours to change
        if (spec.dtype.is_floating_point or spec.dtype.is_complex) and \
                (flags is None or i >= len(flags) or flags[i]):
            spec.requires_grad = True


def _meta_arg(a: object) -> object:
    if not isinstance(a, torch.fx.Node):
        return a
    val, spec = a.meta.get("val"), a.meta.get("spec")
    if not isinstance(val, torch.Tensor):
        return val
    t = torch.empty(tuple(upper_bound(d) for d in val.shape), dtype=val.dtype, device="meta")
    rg = isinstance(spec, TensorSpec) and spec.requires_grad
    return t.requires_grad_() if rg and (t.is_floating_point() or t.is_complex()) else t


def _differentiable_outputs(node: torch.fx.Node) -> list[bool] | None:
    """Which results of ``node``'s operator autograd tracks (some, like batch norm's saved
    statistics, never are): the operator run on meta tensors in grad mode. None: unknown."""
    op = node.meta.get("functional_target", node.target)
    if not isinstance(op, OpOverload) or is_out_variant(op):
        return None
    names = {a.name for a in op._schema.arguments}
    try:
        args = torch.fx.node.map_aggregate(node.args, _meta_arg)
        kwargs = {k: torch.fx.node.map_aggregate(v, _meta_arg) for k, v in node.kwargs.items()
                  if k in names}
        with torch.enable_grad():
            out = op(*args, **kwargs)
    except Exception:  # an op without a meta kernel: assume every result is tracked
        return None
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    return [isinstance(o, torch.Tensor) and o.requires_grad for o in outs]


def _specs(node: torch.fx.Node) -> list[TensorSpec]:
    spec = node.meta.get("spec")
    if isinstance(spec, TensorSpec):
        return [spec]
    return [s for s in spec if isinstance(s, TensorSpec)] if isinstance(spec, (tuple, list)) else []


def _call_spec(node: torch.fx.Node, val: object):
    target = node.target
    if target is memory.alloc:
        return spec_of(val)
    if target is memory.view:
        base = node.args[0].meta["spec"]
        return spec_of(val, alias_of=root(base))
    if target is operator.getitem:
        parent = node.args[0].meta.get("spec")
        return parent[node.args[1]] if isinstance(parent, (tuple, list)) else None
    if isinstance(target, OpOverload) and is_out_variant(target):
        outs = []
        for name in out_arg_names(target):
            arg = node.kwargs[name]
            if isinstance(arg, (list, tuple)):  # a Tensor[] out: a spec per element
                return tuple(a.meta["spec"] for a in arg)
            outs.append(arg.meta["spec"] if isinstance(arg, torch.fx.Node) else None)
        return outs[0] if len(outs) == 1 else tuple(outs)
    if isinstance(target, OpOverload) and target._schema.is_mutable:
        i = next((i for i, a in enumerate(target._schema.arguments)
                  if a.alias_info is not None and a.alias_info.is_write), None)
        if i is not None and i < len(node.args) and isinstance(node.args[i], torch.fx.Node):
            return node.args[i].meta["spec"]  # writes into (and returns) that argument
    if isinstance(val, torch.Tensor):
        return spec_of(val)
    if isinstance(val, (tuple, list)) and val and all(isinstance(v, torch.Tensor) for v in val):
        return tuple(spec_of(v) for v in val)
    return None
