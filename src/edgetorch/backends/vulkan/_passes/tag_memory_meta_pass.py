"""``TagMemoryMetaPass``: choose each tensor's representation (storage type and memory
layout) and insert a ``clone`` where an operator needs an argument in another one
(ExecuTorch 1.5.1's pass of this name).

Nodes are visited in graph order. For each operator call the repsets of its registration
(``OpRepSets``) are narrowed, argument by argument, first towards what downstream users
require (a breadth-first walk through users whose output follows that argument, bounded to
64 nodes), then towards the representation the argument already has; then the output
likewise. The first valid representation of each set is picked (texture over buffer). An
argument already holding another representation gets a transition ``clone`` (one per
source and representation, reused).
"""

from __future__ import annotations

import logging
import operator
from collections import deque
from typing import Any

import torch

from ....exir.dialects._ops import ops as exir_ops
from ....exir.pass_base import ExportPass, PassResult
from ....exir.tensor import TensorSpec
from .. import utils
from ..op_registry import get_op_features, has_impl
from ..serialization.vulkan_graph_schema import VkMemoryLayout, VkStorageType

logger = logging.getLogger(__name__)


def insert_transition_node(graph_module: torch.fx.GraphModule, node: torch.fx.Node,
                           arg: torch.fx.Node, arg_node_repr: utils.TensorRepr) -> torch.fx.Node:
    """A ``clone`` of ``arg`` in ``arg_node_repr`` before ``node``, which then reads it."""
    with graph_module.graph.inserting_before(node):
        clone = graph_module.graph.create_node("call_function",
                                               exir_ops.edge.aten.clone.default, (arg,))
        clone.meta["val"] = arg.meta["val"]
        clone.meta["spec"] = TensorSpec.from_tensor(clone.meta["val"])
        clone.meta["spec"].const = False
        utils.set_node_repr(clone, arg_node_repr)
        arg.replace_all_uses_with(clone, lambda user, n=node: user == n)
    return clone


def set_arg_node_repr_or_transition(graph_module: torch.fx.GraphModule, op_node: torch.fx.Node,
                                    arg_i: int, arg_node_repr: utils.TensorRepr, dirty: bool,
                                    transition_cache: dict | None = None) -> bool:
    """Give argument ``arg_i`` of ``op_node`` the representation ``arg_node_repr``: set it
    when the argument has none yet, else insert (or reuse) a transition clone when it
    differs. Returns whether a transition was used."""

    def one(node: torch.fx.Node) -> bool:
        if not utils.has_node_repr(node):
            utils.set_node_repr(node, arg_node_repr)
            return False
        current = utils.get_node_repr(node)
        assert isinstance(current, utils.TensorRepr)
        if current == arg_node_repr:
            return False
        assert utils.is_single_tensor_node(node)
        key = (node, arg_node_repr.storage_type, arg_node_repr.memory_layout)
        if transition_cache is not None and key in transition_cache:
            node.replace_all_uses_with(transition_cache[key],
                                       lambda user, n=op_node: user == n)
            logger.info("   arg %d (%s): reusing %s", arg_i, node, transition_cache[key])
            return True
        if not dirty:
            logger.info("[Vulkan Delegate] Inserting transition(s) for %s:",
                        op_node.format_node())
        clone = insert_transition_node(graph_module, op_node, node, arg_node_repr)
        if transition_cache is not None:
            transition_cache[key] = clone
        logger.info("   arg %d (%s): (%s) -> (%s)", arg_i, node, current, arg_node_repr)
        return True

    arg = op_node.args[arg_i]
    if isinstance(arg, torch.fx.Node):
        return one(arg)
    if isinstance(arg, (list, tuple)):
        used = False
        for n in arg:
            assert isinstance(n, torch.fx.Node) and utils.is_single_tensor_node(n)
            used = one(n) or used
        return used
    raise NotImplementedError(f"Unhandled node type {arg}")


class TagMemoryMetaPass(ExportPass):
    """Tag every tensor of the graph with its representation (``spec.etvk_node_repr``)."""

    def __init__(self, texture_limits: utils.ImageExtents,
                 default_storage_type: VkStorageType = VkStorageType.TEXTURE_3D,
                 default_memory_layout: VkMemoryLayout = VkMemoryLayout.TENSOR_WIDTH_PACKED,
                 force_fp16: bool = False) -> None:
        super().__init__()
        self.default_storage = default_storage_type
        self.default_layout = default_memory_layout
        self.texture_limits = texture_limits
        self.force_fp16 = force_fp16
        # Without a bound, walking users in transformer graphs blows up exponentially.
        self.max_trace_search_depth = 64

    def is_valid_op_node(self, node: Any) -> bool:
        """A registered operator producing (non-constant) tensors."""
        return (isinstance(node, torch.fx.Node) and utils.is_tensor_node(node)
                and not node.meta.get("etvk_tensorref", False) and has_impl(node.target))

    def is_non_constant_tensor_node(self, node: Any) -> bool:
        if isinstance(node, torch.fx.Node):
            return utils.is_tensor_node(node) and not node.meta.get("etvk_tensorref", False)
        if isinstance(node, (tuple, list)):
            return all(isinstance(n, torch.fx.Node) and self.is_non_constant_tensor_node(n)
                       for n in node)
        return False

    def get_node_cached_repsets(self, op_node: torch.fx.Node) -> utils.OpRepSets:
        """The node's registration repsets, computed once (a getitem: those of the tensor
        it takes out)."""
        assert self.is_valid_op_node(op_node)
        cached = op_node.meta.get("etvk_node_repsets")
        if cached is not None:
            return cached
        if op_node.target == operator.getitem:
            out = self.get_node_cached_repsets(op_node.args[0]).get_out_repset(op_node.args[1])
            repsets = utils.OpRepSets(utils.TensorRepSetList(out), utils.TensorRepSetList(out),
                                      op_node, self.texture_limits)
        else:
            repsets = get_op_features(op_node.target).make_op_repsets(op_node,
                                                                      self.texture_limits)
        op_node.meta["etvk_node_repsets"] = repsets
        return repsets

    def get_arg_tensor_source_repset(self, op_node: torch.fx.Node,
                                     arg_i: int) -> utils.TensorRepSet:
        """What argument ``arg_i`` already is: its chosen representation, or else its
        producer's output repset."""
        arg = op_node.args[arg_i]
        if not utils.is_tensor_arg_node(arg):
            return utils.ANY_STORAGE_INCL_PACKED_INT8
        if isinstance(arg, list):
            arg = arg[0]  # cat: the first tensor stands for all
        if utils.has_node_repr(arg):
            r = utils.get_node_repr(arg)
            assert isinstance(r, utils.TensorRepr)
            return utils.make_tensor_repset(r)
        if self.is_valid_op_node(arg):
            if op_node.target == operator.getitem:
                return self.get_node_cached_repsets(op_node.args[0]).get_out_repset(
                    op_node.args[1])
            return self.get_node_cached_repsets(arg).get_out_repset(0)
        return utils.ANY_STORAGE

    def constrain_repset_with_user(self, current_node: torch.fx.Node, arg_i: int,
                                   arg_repset: utils.TensorRepSet,
                                   search_depth: list[int] | None = None) -> utils.TensorRepSet:
        if arg_repset.is_constrained() or not self.is_valid_op_node(current_node):
            return arg_repset
        repsets = self.get_node_cached_repsets(current_node)
        required = repsets.get_arg_repset(arg_i)
        if not required.any_in_common(arg_repset):
            return arg_repset  # a transition is needed anyway
        arg_repset = arg_repset.make_intersect(required)
        if not (repsets.sync_primary_io_repr
                and (repsets.sync_args_repr or arg_i == repsets.primary_arg_idx)):
            return arg_repset
        return self.trace_node_users_to_constrain_repset(current_node, arg_repset, search_depth)

    def trace_node_users_to_constrain_repset(  # noqa: C901
            self, origin_node: torch.fx.Node, repset: utils.TensorRepSet,
            search_depth: list[int] | None = None) -> utils.TensorRepSet:
        """Narrow an ambiguous ``repset`` by the requirements of downstream users, breadth
        first, following users whose output follows the traced tensor, within the budget."""
        if self.max_trace_search_depth is not None and search_depth is None:
            search_depth = [self.max_trace_search_depth]
        queue = deque([origin_node])
        while queue:
            if repset.is_constrained():
                return repset
            if self.max_trace_search_depth is not None:
                search_depth[0] -= 1
                if search_depth[0] <= 0:
                    return repset
            node = queue.popleft()
            users = node.users
            sync_outs = (self.get_node_cached_repsets(node).sync_outs_repr
                         if self.is_valid_op_node(node) else True)
            if utils.num_tensors_in_node(node) > 1 and not sync_outs:
                users = [u for u in node.users
                         if u.target == operator.getitem and u.args[1] == 1]
            for user in users:
                if repset.is_constrained():
                    return repset
                arg_i = next((i for i in range(len(user.args)) if node == user.args[i]), None)
                if arg_i is None or not self.is_valid_op_node(user):
                    continue
                repsets = self.get_node_cached_repsets(user)
                required = repsets.get_arg_repset(arg_i)
                if not required.any_in_common(repset):
                    continue
                repset = repset.make_intersect(required)
                if repsets.sync_primary_io_repr and (repsets.sync_args_repr
                                                     or arg_i == repsets.primary_arg_idx):
                    queue.append(user)
        return repset

    def constrain_op_arg_repset(self, arg_i: int, op_repsets: utils.OpRepSets) -> None:
        """Prefer what downstream users need; fall back on what the argument already is."""
        if self.force_fp16:
            op_repsets.try_constrain_with_arg_repset(arg_i, utils.ANY_TEXTURE)
        arg = op_repsets.op_node.args[arg_i]
        if isinstance(arg, list):
            arg = arg[0]
        current = op_repsets.get_arg_repset(arg_i)
        if not current.is_constrained():
            downstream = self.trace_node_users_to_constrain_repset(arg, current)
            op_repsets.try_constrain_with_arg_repset(arg_i, downstream)
        if not op_repsets.get_arg_repset(arg_i).is_constrained():
            op_repsets.try_constrain_with_arg_repset(
                arg_i, self.get_arg_tensor_source_repset(op_repsets.op_node, arg_i))

    def constrain_op_out_repset(self, op_repsets: utils.OpRepSets) -> None:
        out = op_repsets.get_out_repset(0)
        if out.is_constrained():
            return
        op_repsets.try_constrain_with_out_repset(
            self.trace_node_users_to_constrain_repset(op_repsets.op_node, out))

    def constrain_op_repsets(self, op_repsets: utils.OpRepSets) -> None:
        for i, arg in enumerate(op_repsets.op_node.args):
            if utils.is_tensor_arg_node(arg):
                self.constrain_op_arg_repset(i, op_repsets)
        self.constrain_op_out_repset(op_repsets)

    def set_op_node_tensor_reprs(self, graph_module: torch.fx.GraphModule,
                                 op_node: torch.fx.Node,
                                 transition_cache: dict | None = None) -> None:
        if not self.is_valid_op_node(op_node):
            return
        if op_node.target == operator.getitem:  # the representation of the tensor it takes
            src_repr = utils.get_node_repr(op_node.args[0])
            assert isinstance(src_repr, list)
            utils.set_node_repr(op_node, src_repr[op_node.args[1]])
            return
        # A fresh OpRepSets: constraining modifies it, the cached one stays as registered.
        repsets = get_op_features(op_node.target).make_op_repsets(op_node, self.texture_limits)
        self.constrain_op_repsets(repsets)
        args_repr, outs_repr = repsets.pick_representations()
        utils.set_node_repr(op_node, outs_repr[0] if len(outs_repr) == 1 else outs_repr)
        dirty = False
        for i, arg in enumerate(op_node.args):
            if not self.is_non_constant_tensor_node(arg):
                continue
            if isinstance(arg, torch.fx.Node):
                dirty = set_arg_node_repr_or_transition(graph_module, op_node, i, args_repr[i],
                                                        dirty, transition_cache) or dirty
            elif isinstance(arg, (list, tuple)):
                for n in arg:
                    assert isinstance(n, torch.fx.Node) and utils.is_single_tensor_node(n)
                    dirty = set_arg_node_repr_or_transition(
                        graph_module, op_node, i, args_repr[i], dirty, transition_cache) or dirty

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        cache: dict = {}
        for node in graph_module.graph.nodes:
            self.set_op_node_tensor_reprs(graph_module, node, cache)
        return PassResult(graph_module, True)
