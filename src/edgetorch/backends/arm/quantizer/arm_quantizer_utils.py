"""Quantizer helpers the Arm and Cortex-M quantizers share (ExecuTorch's
``arm_quantizer_utils`` names): marking nodes annotated, and ``SharedQspecQuantizer``, by which
ops that only move or select values take their neighbours' qparams (each connected cluster of
them shares one spec, seeded by the first adjacent annotated spec found)."""

from __future__ import annotations

import operator
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    QuantizationAnnotation,
    Quantizer,
    SharedQuantizationSpec,
)
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

from ...cortex_m.passes.qparams import QUANTIZED_KEY


def _stack_entries(node: Node) -> list[tuple[str, Any]]:
    return list(node.meta.get("nn_module_stack", {}).values())


def module_name_filter(name: str) -> Callable[[Node], bool]:
    """Accepts the nodes traced inside the submodule ``name`` (a dotted path) or its children."""
    def accepts(node: Node) -> bool:
        for path, _ in _stack_entries(node):
            path = path.replace("L['self'].", "").replace("L__self___", "")
            if path == name or path.startswith(name + "."):
                return True
        return False
    return accepts


def module_type_filter(tp: type) -> Callable[[Node], bool]:
    """Accepts the nodes traced inside a module of class ``tp``."""
    qualname = f"{tp.__module__}.{tp.__qualname__}"

    def accepts(node: Node) -> bool:
        return any((t if isinstance(t, str) else f"{t.__module__}.{t.__qualname__}") == qualname
                   for _, t in _stack_entries(node))
    return accepts


class PatternCheck:
    """What a quantizer pattern must satisfy beyond its operators: ``check_pattern`` on the
    matched nodes, ``check_quantization_config`` on the config that would annotate them."""

    @classmethod
    def check_pattern(cls, pattern: list[Node]) -> bool:
        return True

    @classmethod
    def check_quantization_config(cls, pattern: list[Node], quantization_config: Any) -> bool:
        return True


class NodeFinder(ABC):
    """Picks the nodes of a graph a quantization config applies to."""

    @abstractmethod
    def find_nodes(self, model: GraphModule) -> Iterator[Node]:
        """The nodes of ``model`` this finder selects, in graph order."""


aten = torch.ops.aten
SHARED_QSPEC_OPS = [
    aten.clone.default, aten.lift_fresh_copy.default, aten.detach_.default, aten.alias.default,
    aten.alias_copy.default, aten.copy_.default, aten.detach_copy.default,
    aten.unfold_copy.default, aten.unbind.int, aten.minimum.default, aten.maximum.default,
    aten.min.dim, aten.max.dim, aten.amin.default, aten.amax.default, aten.permute.default,
    aten.permute_copy.default, aten.transpose.int, aten.transpose_copy.int,
    aten.t_copy.default, aten.t.default, aten.repeat.default, aten.repeat_interleave.self_int,
    aten.expand_copy.default, aten.expand.default, aten.select.int, aten.select_copy.int,
    aten.slice.Tensor, aten.slice_copy.Tensor, aten.split.Tensor,
    aten.split_with_sizes.default, aten.split_copy.Tensor, aten.tile.default,
    aten.flip.default, aten.index_select.default, aten.index_put.default,
    aten.index_put_.default, aten.index_copy.default, aten.index_copy_.default,
    aten.contiguous.default, aten.as_strided_copy.default, aten.pixel_shuffle.default,
    aten.pixel_unshuffle.default, aten.cat.default, aten.concat.default,
    aten.concatenate.default, aten.stack.default, aten.dropout.default, aten.dropout_.default,
    aten.chunk.default, aten.index.Tensor, aten.gather.default, operator.getitem,
    aten.squeeze.default, aten.squeeze_copy.default, aten.squeeze_copy.dim, aten.squeeze.dim,
    aten.squeeze.dims, aten.squeeze_.dim, aten.unsqueeze.default, aten.unsqueeze_copy.default,
    aten.reshape.default, aten.view.default, aten.view_as.default, aten.view_copy.default,
    aten._unsafe_view.default, aten.unflatten.int, aten.flatten.using_ints, aten.pad.default,
    aten.constant_pad_nd.default, aten.clamp.default, aten.clamp.Tensor, aten.hardtanh.default,
    aten.hardtanh_.default, aten.relu.default, aten.relu_.default, aten.eq.Tensor,
    aten.eq.Scalar, aten.ne.Tensor, aten.ne.Scalar, aten.ge.Tensor, aten.ge.Scalar,
    aten.gt.Tensor, aten.gt.Scalar, aten.le.Tensor, aten.le.Scalar, aten.lt.Tensor,
    aten.lt.Scalar, aten.where.self, aten.where.default,
    torch.ops.higher_order.while_loop, torch.ops.higher_order.cond,
]


def has_float_output(node: Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point


def mark_quantized(node: Node, inputs: dict, output, quantized: bool) -> None:
    node.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation(inputs, output, _annotated=True)
    if node.op == "call_function":
        node.meta.setdefault("custom", {})[QUANTIZED_KEY] = quantized


def mark_node_as_annotated(node: Node) -> None:
    """Mark ``node`` annotated and quantized, keeping any annotation it already has."""
    if Q_ANNOTATION_KEY not in node.meta:
        node.meta[Q_ANNOTATION_KEY] = QuantizationAnnotation()
    node.meta[Q_ANNOTATION_KEY]._annotated = True
    if node.op == "call_function":
        node.meta.setdefault("custom", {})[QUANTIZED_KEY] = True


class SharedQspecQuantizer(Quantizer):
    SHARED_QSPEC_OPS_DEFAULT: list = SHARED_QSPEC_OPS

    def __init__(self, targets: list | None = None) -> None:
        super().__init__()
        self.targets = self.SHARED_QSPEC_OPS_DEFAULT if targets is None else targets

    @staticmethod
    def _annotated(node: Node) -> bool:
        return Q_ANNOTATION_KEY in node.meta

    def _cluster(self, root: Node) -> tuple[set[Node], list]:
        members: set[Node] = set()
        queue, adjacent = [root], []
        while queue:
            node = queue.pop(0)
            members.add(node)
            for x in node.all_input_nodes:
                if x.target in self.targets and x not in members and not self._annotated(x):
                    queue.append(x)
                ann = x.meta.get(Q_ANNOTATION_KEY)
                if ann is not None and ann.output_qspec is not None \
                        and not (x.op in ("placeholder", "output")
                                 and ann.output_qspec.dtype == torch.uint8):
                    adjacent.append(ann.output_qspec)
            for u in node.users:
                if u.target in self.targets and u not in members and not self._annotated(u):
                    queue.append(u)
                ann = u.meta.get(Q_ANNOTATION_KEY)
                q = ann.input_qspec_map.get(node) if ann is not None else None
                if q is not None and not (u.op in ("placeholder", "output")
                                          and q.dtype == torch.uint8):
                    adjacent.append(q)
        return members, adjacent

    def _annotate_cluster(self, root: Node) -> None:
        float_in = [n for n in root.all_input_nodes if has_float_output(n)]
        if not float_in and not (root.users and has_float_output(root)):
            mark_quantized(root, {}, None, True)
            return
        members, adjacent = self._cluster(root)
        order = {n: i for i, n in enumerate(root.graph.nodes)}
        first = sorted(members, key=lambda n: order.get(n, 0))[0]
        first_in = [n for n in first.all_input_nodes if has_float_output(n)]
        if not adjacent or not first_in:
            return  # every neighbour is float: the cluster stays float
        shared = SharedQuantizationSpec((first_in[0], first))
        for node in members:
            inputs = {n: shared for n in node.all_input_nodes if has_float_output(n)}
            output = shared if node.users and has_float_output(node) else None
            mark_quantized(node, inputs, output, True)
        first.meta[Q_ANNOTATION_KEY].input_qspec_map[first_in[0]] = adjacent[0]

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.target in self.targets and not self._annotated(node):
                self._annotate_cluster(node)
        return model

    def validate(self, model: GraphModule) -> None:
        return None
