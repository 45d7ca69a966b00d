"""``XnnpackPartitioner``: tags the float32 subgraphs XNNPACK runs (ExecuTorch's name and
arguments).

Every operator with an XNNPACK lowering whose checks pass is supported; the supported nodes
are grouped into maximal subgraphs without cycles (``CapabilityBasedPartitioner``), one
delegate each, and the weights that only a subgraph uses go into it. Each node left out is
recorded with its reason (``Partitioner.reject``) and logged after partitioning.

Under ``to_edge_transform_and_lower``, ``linear``, ``max_pool2d``, ``hardswish``,
``upsample_bilinear2d`` and ``prelu`` are kept from decomposition when XNNPACK can take them
(``ops_to_not_decompose``), so they reach XNNPACK whole, as with ExecuTorch.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from enum import Enum

import torch
from torch._ops import OpOverload
from torch.export import ExportedProgram
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner, Partition
from torch.fx.passes.operator_support import OperatorSupportBase

from ....errors import ExportError
from ....exir.backend import DelegationSpec, Partitioner, PartitionResult
from ....exir.backend.partitioner import TAG
from ....exir.backend.utils import tag_constant_data
from ..aot.builder import OP_RULES
from ..aot.quant import (
    AFFINE_CHOOSE,
    AFFINE_DQ,
    AFFINE_Q,
    DQ_CHANNEL,
    DQ_STATIC,
    GEMM_ARGS,
    Q_STATIC,
    QDQ_OPS,
    QuantPlan,
    is_dynamic_act,
)
from .support import is_getitem_of, quant_dependency, why_not

aten = torch.ops.aten
BACKEND_ID = "XnnpackBackend"

# Operators the core-ATen decomposition would take apart but XNNPACK runs whole.
KEEP_WHOLE: tuple[OpOverload, ...] = (
    aten.linear.default,
    aten.max_pool2d.default,
    aten.hardswish.default,
    aten.upsample_bilinear2d.vec,
    aten.prelu.default,
)


class ConfigPrecisionType(Enum):
    """The precisions ExecuTorch's partitioner configs know: float32 operators, static int8
    (PT2E static quantization) and dynamic int8 activations (PT2E dynamic, torchao 8da4w)."""

    FP32 = 1
    STATIC_QUANT = 2
    DYNAMIC_QUANT = 3


def _has_cycle(nodes: set[torch.fx.Node]) -> bool:
    """Does a path leave ``nodes`` and come back (so they cannot be one delegate)?"""
    todo = [u for n in nodes for u in n.users if u not in nodes]
    seen: set[torch.fx.Node] = set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        for u in n.users:
            if u in nodes:
                return True
            todo.append(u)
    return False


def _split_from(node: torch.fx.Node, group: dict[torch.fx.Node, int]) -> str | None:
    """Why a dequantize cannot be delegated apart from its quantize (None when together)."""
    if node.target in QDQ_OPS and node.args and isinstance(node.args[0], torch.fx.Node):
        src = node.args[0]
        if src.op == "call_function" and src.target in QDQ_OPS \
                and group.get(src) != group.get(node):
            return f"its quantize %{src.name} went to another delegate"
    return None


def _affine_linears(node: torch.fx.Node) -> list[torch.fx.Node] | None:
    """The linears a torchao affine node (or a linear with an affine weight) feeds."""
    t = node.target
    if t in GEMM_ARGS:
        w = node.args[1]
        return [node] if isinstance(w, torch.fx.Node) and w.target == AFFINE_DQ else None
    if t not in (AFFINE_CHOOSE, AFFINE_Q, AFFINE_DQ) or t is None:
        return None
    todo, out = list(node.users), []
    while todo:
        u = todo.pop()
        if u.target in GEMM_ARGS:
            out.append(u)
        elif u.target in (operator.getitem, AFFINE_Q, AFFINE_DQ):
            todo.extend(u.users)
        else:
            out.append(u)  # anything else: not an 8da4w linear
    return out


def _affine_linear_ok(linear: torch.fx.Node) -> bool:
    """Is this an 8da4w linear XNNPACK takes: int8 per-token activations, int4 weights in
    groups of a multiple of 32 dividing the input channels?"""
    if linear.target != torch.ops.aten.linear.default:
        return False
    act, w = linear.args[0], linear.args[1]
    if not (isinstance(act, torch.fx.Node) and act.target == AFFINE_DQ and is_dynamic_act(act)):
        return False
    if not (isinstance(w, torch.fx.Node) and w.target == AFFINE_DQ):
        return False
    shape = list(w.args[0].meta["val"].shape)
    block = list(w.args[1])
    return (len(shape) == 2 and len(block) == 2 and block[0] == 1 and block[1] % 32 == 0
            and shape[1] % block[1] == 0 and (w.args[5], w.args[6]) == (-8, 7))


def _precision(node: torch.fx.Node, plan: QuantPlan) -> ConfigPrecisionType:
    """The precision a node is delegated in (ExecuTorch's config precisions)."""
    t = node.target
    if t in GEMM_ARGS and isinstance(node.args[1], torch.fx.Node) \
            and node.args[1].target in QDQ_OPS:
        return ConfigPrecisionType.DYNAMIC_QUANT if is_dynamic_act(node.args[0]) \
            else ConfigPrecisionType.STATIC_QUANT
    if t in (DQ_CHANNEL, DQ_STATIC, AFFINE_DQ) and node.args[0].op == "placeholder":
        users = [u for u in node.users if u.target in GEMM_ARGS]
        return _precision(users[0], plan) if users else ConfigPrecisionType.STATIC_QUANT
    if t in (Q_STATIC, DQ_STATIC) or node in plan.quantized:
        return ConfigPrecisionType.STATIC_QUANT
    if t in QDQ_OPS:
        return ConfigPrecisionType.DYNAMIC_QUANT
    return ConfigPrecisionType.FP32


class _Supported(OperatorSupportBase):
    def __init__(self, nodes: set[torch.fx.Node]) -> None:
        self.nodes = nodes

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node in self.nodes or is_getitem_of(node, self.nodes)


class XnnpackPartitioner(Partitioner):
    """Delegates float32 subgraphs to ``XnnpackBackend``.

    ``config_precisions``: the precisions to delegate (default: all three). Quantized
    operators are delegated with their quantize/dequantize nodes; a quantized linear or
    convolution is never delegated as float32 (its weight would be computed outside).
    ``per_op_mode``: one delegate per operator instead of maximal
    subgraphs. ``verbose``: log the operators left out (INFO on
    ``edgetorch.exir.backend.partitioner``). ``configs`` and other keyword arguments of
    ExecuTorch's partitioner are accepted and ignored.
    """

    def __init__(self, configs: object = None,
                 config_precisions: ConfigPrecisionType | list[ConfigPrecisionType] | None = None,
                 per_op_mode: bool = False, verbose: bool = False, **kwargs: object) -> None:
        super().__init__()
        self.delegation_spec = DelegationSpec(BACKEND_ID, [])
        if isinstance(config_precisions, ConfigPrecisionType):
            config_precisions = [config_precisions]
        self.precisions = set(ConfigPrecisionType) if config_precisions is None \
            else set(config_precisions)
        self.fp32 = ConfigPrecisionType.FP32 in self.precisions
        self.per_op_mode = per_op_mode
        if verbose:  # print the report even when the application configured no logging
            logging.getLogger("edgetorch.exir.backend.partitioner").setLevel(logging.INFO)
            if not logging.getLogger().handlers:
                logging.basicConfig()

    def supported_nodes(self, ep: ExportedProgram) -> set[torch.fx.Node]:
        """The operator calls XNNPACK can take (the others are rejected with a reason)."""
        nodes = set()
        plan = QuantPlan(ep)
        for node in ep.graph.nodes:
            if node.op != "call_function" or node.target is operator.getitem:
                continue
            precision = _precision(node, plan)
            why = why_not(node, ep) if precision in self.precisions \
                else f"{precision.name} is not among config_precisions"
            if why is None:
                nodes.add(node)
            else:
                self.reject(node, why)
        self._prune_quantized(ep.graph, nodes)
        return nodes

    def _prune_quantized(self, graph: torch.fx.Graph, nodes: set[torch.fx.Node],
                         group: dict[torch.fx.Node, int] | None = None) -> None:
        """Quantized pieces are delegated whole or not at all; with ``group`` (node ->
        partition), also within one delegate."""
        changed = True
        while changed:
            changed = False
            for node in [n for n in graph.nodes if n in nodes]:
                why = quant_dependency(node, nodes)
                if why is None and group is not None:
                    why = _split_from(node, group)
                if why:
                    nodes.discard(node)
                    self.reject(node, why)
                    changed = True

    def ops_to_not_decompose(
        self, ep: ExportedProgram
    ) -> tuple[list[OpOverload], Callable[[torch.fx.Node], bool] | None]:
        if not self.precisions:
            return ([], None)

        def keep(node: torch.fx.Node) -> bool:
            # The filter sees the program after a first decomposition (torchao's weights
            # unwrapped into new placeholders that ``ep`` does not know): judge 8da4w pieces
            # by their shapes.
            if _affine_linears(node) is not None:
                return all(_affine_linear_ok(n) for n in _affine_linears(node))
            # A kept node must be delegated later; one whose weight is shared might not be.
            return why_not(node, ep) is None and all(
                len(w.users) == 1 for w in OP_RULES[node.target].statics(node))

        ops = list(KEEP_WHOLE)
        if ConfigPrecisionType.DYNAMIC_QUANT in self.precisions:  # torchao's 8da4w chain
            ops += [op for op in (AFFINE_CHOOSE, AFFINE_Q, AFFINE_DQ) if op is not None]
        return (ops, keep)

    def _propose(self, gm: torch.fx.GraphModule,
                 supported: set[torch.fx.Node]) -> list[Partition]:
        if self.per_op_mode:
            ops = [n for n in gm.graph.nodes if n in supported]
            return [Partition(id=i, nodes=[n, *(u for u in n.users if is_getitem_of(u, {n}))])
                    for i, n in enumerate(ops)]
        return CapabilityBasedPartitioner(
            gm, _Supported(supported), allows_single_node_partition=True).propose_partitions()

    def _grouped(self, gm: torch.fx.GraphModule,
                 supported: set[torch.fx.Node]) -> list[Partition]:
        """The delegates' node groups; a node whose constant weights are also used outside its
        group (so they could not become the delegate's constants) is left out, and the
        grouping redone."""
        while True:
            partitions = self._propose(gm, supported)
            group = {n: p.id for p in partitions for n in p.nodes}
            if self._merge_dynamic_chains(partitions, group, supported):
                self._prune_quantized(gm.graph, supported)
                continue
            shared = {(n, w) for n in supported if n in group
                      for w in OP_RULES[n.target].statics(n)
                      if any(group.get(u) != group[n] for u in w.users)}
            if not shared:
                return partitions
            for n, w in shared:
                supported.discard(n)
                self.reject(n, f"its weight %{w.name} is also used outside its delegate "
                               "(XNNPACK needs it as a constant of one delegate)")

    def _merge_dynamic_chains(self, partitions: list[Partition],
                              group: dict[torch.fx.Node, int],
                              supported: set[torch.fx.Node]) -> bool:
        """A dynamically quantized activation read by linears of several partitions: merge
        them (its ``qdint8`` value cannot leave a delegate). Returns True when a merge would
        make a cycle: the users outside the chain's partition are then left out."""
        by_id = {p.id: p for p in partitions}
        for dq in [n for n in group if is_dynamic_act(n)]:
            ids = {group[u] for u in dq.users if u in group} | {group[dq]}
            if len(ids) == 1:
                continue
            merged = {n for i in ids for n in by_id[i].nodes}
            if _has_cycle(merged):
                raise ExportError(
                    f"XnnpackPartitioner: the dynamically quantized activation %{dq.name} is "
                    f"read by {len(dq.users)} operators that cannot share one delegate, and its "
                    "int8 value cannot leave one. Run DuplicateDynamicQuantChainPass "
                    "(edgetorch.backends.transforms.duplicate_dynamic_quant_chain) on the "
                    "converted module before torch.export, as ExecuTorch's LLM export does")
            keep = by_id[group[dq]]
            for i in ids - {keep.id}:
                for n in by_id[i].nodes:
                    keep.add_node(n)
                    group[n] = keep.id
                partitions.remove(by_id[i])
        return False

    def partition(self, exported_program: ExportedProgram) -> PartitionResult:
        gm = exported_program.graph_module
        supported = self.supported_nodes(exported_program)
        partitions = self._grouped(gm, supported)
        position = {n: i for i, n in enumerate(gm.graph.nodes)}
        partitions.sort(key=lambda p: min(position[n] for n in p.nodes))
        tags = {}
        for i, partition in enumerate(partitions):
            tag = f"tag{i}"
            for node in partition.nodes:
                node.meta[TAG] = tag
            tags[tag] = self.delegation_spec
        tag_constant_data(exported_program)
        return PartitionResult(tagged_exported_program=exported_program, partition_tags=tags)



class XnnpackDynamicallyQuantizedPartitioner(XnnpackPartitioner):
    """Only dynamically quantized operators (int8 activations quantized at run time)."""

    def __init__(self, **kwargs: object) -> None:
        if "config_precisions" in kwargs:
            raise ValueError("XnnpackDynamicallyQuantizedPartitioner pins config_precisions to "
                             "DYNAMIC_QUANT; drop the config_precisions argument")
        super().__init__(config_precisions=ConfigPrecisionType.DYNAMIC_QUANT, **kwargs)


class XnnpackFloatingPointPartitioner(XnnpackPartitioner):
    """Only float (fp32/fp16) operators."""

    def __init__(self) -> None:
        super().__init__(config_precisions=ConfigPrecisionType.FP32)


class XnnpackQuantizedPartitioner(XnnpackPartitioner):
    """Only statically quantized operators."""

    def __init__(self) -> None:
        super().__init__(config_precisions=ConfigPrecisionType.STATIC_QUANT)
