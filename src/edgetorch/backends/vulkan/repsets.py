"""``OpRepSets``: the representations every tensor of one operator call may use, and the
narrowing that keeps them consistent (ExecuTorch 1.5.1's ``utils.OpRepSets``).

Three synchronisation rules come from the operator's registration: one repset for all
inputs means they must share a representation; one for all outputs, likewise; and when the
primary input's repset equals the first output's, those two must match. Constraining one
tensor's repset propagates along these rules through packed-dim compatibility.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

from . import utils as u


class OpRepSets:
    """Input and output repsets of ``op_node`` within ``texture_limits``."""

    def __init__(self, inputs_repsets: u.TensorRepSetList, outputs_repsets: u.TensorRepSetList,
                 op_node: torch.fx.Node, texture_limits: u.ImageExtents) -> None:
        self.op_node = op_node
        self.sync_args_repr = len(inputs_repsets) <= 1
        self.sync_outs_repr = len(outputs_repsets) <= 1

        # The primary argument: the first tensor argument with a non-empty repset.
        self.primary_arg_idx: int | None = None
        for i, arg in enumerate(op_node.args):
            rs = inputs_repsets[i]
            if not u.is_tensor_arg_node(arg) or rs is None or rs.is_empty():
                continue
            self.primary_arg_idx = i
            break
        self.sync_primary_io_repr = (self.primary_arg_idx is not None
                                     and inputs_repsets[self.primary_arg_idx]
                                     == outputs_repsets[0])

        args = u.TensorRepSetList([])
        common_arg = u.ANY_STORAGE_INCL_PACKED_INT8
        for i, arg in enumerate(op_node.args):
            rs = inputs_repsets[i]
            # Non-tensor arguments and weights the op prepacks itself (NO_STORAGE) must not
            # make the op look unrepresentable.
            if not u.is_tensor_arg_node(arg) or rs.is_empty():
                args.append(u.ANY_STORAGE_INCL_PACKED_INT8)
                continue
            rs = self.filter_invalid_reprs_for_arg(rs, arg, texture_limits)
            args.append(rs)
            common_arg = common_arg.make_intersect(rs)

        outs = u.TensorRepSetList([])
        common_out = u.ANY_STORAGE_INCL_PACKED_INT8
        if u.num_tensors_in_node(op_node) == 1:
            common_out = u.filter_invalid_reprs(op_node.meta["val"], outputs_repsets[0],
                                                texture_limits)
            outs.append(common_out)
        else:
            for i, val in enumerate(op_node.meta["val"]):
                assert isinstance(val, FakeTensor)
                rs = u.filter_invalid_reprs(val, outputs_repsets[i], texture_limits)
                outs.append(rs)
                common_out = common_out.make_intersect(rs)

        primary = u.NO_STORAGE
        if self.sync_primary_io_repr:
            p_in = common_arg if self.sync_args_repr else args[self.primary_arg_idx]
            p_out = common_out if self.sync_outs_repr else outs[0]
            primary = p_in.make_intersect(p_out)
            args[self.primary_arg_idx] = primary.copy()
            outs[0] = primary.copy()
        if self.sync_args_repr:
            common = primary if self.sync_primary_io_repr else common_arg
            for i in range(len(args)):
                args[i] = common.copy()
        if self.sync_outs_repr:
            common = primary if self.sync_primary_io_repr else common_out
            for i in range(len(outs)):
                outs[i] = common.copy()

        self.args_repset_list = args
        self.outs_repset_list = outs
        self.assert_sync_contraints()

    def __str__(self) -> str:
        return f"OpRepSets(ins={self.args_repset_list}, outs={self.outs_repset_list})"

    def filter_invalid_reprs_for_arg(self, repset: u.TensorRepSet, arg: Any,
                                     limits: u.ImageExtents) -> u.TensorRepSet:
        if isinstance(arg, torch.fx.Node) and u.is_single_tensor_node(arg):
            return u.filter_invalid_reprs(arg.meta["val"], repset, limits)
        if isinstance(arg, list) and all(u.is_single_tensor_node(n) for n in arg):
            return u.filter_invalid_reprs_for_node_list(repset, arg, limits)
        # getitem: the repset of the tensor it takes out of the list.
        if self.op_node.target == operator.getitem and arg == self.op_node.args[0]:
            return u.filter_invalid_reprs(arg.meta["val"][self.op_node.args[1]], repset,
                                          limits)
        raise NotImplementedError(f"Unhandled node type {arg}")

    def _assert_pairwise(self, sets: list) -> None:
        for i in range(len(sets)):
            for j in range(i + 1, len(sets)):
                if not sets[i].is_empty() and not sets[j].is_empty():
                    assert sets[i].has_compatible_packed_dim_info_set(sets[j]), (
                        f"synced repsets {i} and {j} have incompatible packed dims: "
                        f"{sets[i]} vs {sets[j]}")

    def assert_sync_contraints(self) -> None:
        if self.sync_args_repr:
            self._assert_pairwise(list(self.args_repset_list))
        if self.sync_outs_repr:
            self._assert_pairwise(list(self.outs_repset_list))
        if self.sync_primary_io_repr:
            a = self.args_repset_list[self.primary_arg_idx]
            o = self.outs_repset_list[0]
            if not a.is_empty() and not o.is_empty():
                assert a.has_compatible_packed_dim_info_set(o), (
                    f"primary arg and out repsets have incompatible packed dims: {a} vs {o}")

    def any_is_empty(self) -> bool:
        return self.args_repset_list.any_is_empty() or self.outs_repset_list.any_is_empty()

    def get_arg_repset(self, i: int) -> u.TensorRepSet:
        return self.args_repset_list[i]

    def get_out_repset(self, i: int) -> u.TensorRepSet:
        return self.outs_repset_list[i]

    def _propagate_to_args(self, source: u.TensorRepSet, skip: int | None) -> None:
        for i in range(len(self.args_repset_list)):
            if i != skip:
                self.args_repset_list[i] = self.args_repset_list[
                    i].constrain_to_compatible_packed_dim(source)

    def _propagate_to_outs(self, source: u.TensorRepSet) -> None:
        for i in range(1, len(self.outs_repset_list)):
            self.outs_repset_list[i] = self.outs_repset_list[
                i].constrain_to_compatible_packed_dim(source)

    def try_constrain_with_arg_repset(self, arg_i: int, source: u.TensorRepSet) -> bool:
        """Narrow argument ``arg_i`` to what it already is (``source``: a representation
        chosen earlier, or its producer's output repset) when that is compatible, and
        propagate along the sync rules. Keeping a representation avoids a transition."""
        current = self.args_repset_list[arg_i]
        if current == source or not current.any_in_common(source):
            return False
        narrowed = current.make_intersect(source)
        if self.sync_primary_io_repr and not self.get_out_repset(
                0).has_compatible_packed_dim_info_set(narrowed):
            return False
        self.args_repset_list[arg_i] = narrowed
        if self.sync_args_repr:
            self._propagate_to_args(narrowed, arg_i)
        if self.sync_primary_io_repr and (arg_i == self.primary_arg_idx or self.sync_args_repr):
            self.outs_repset_list[0] = self.outs_repset_list[
                0].constrain_to_compatible_packed_dim(narrowed)
            if self.sync_outs_repr:
                self._propagate_to_outs(self.outs_repset_list[0])
        self.assert_sync_contraints()
        return True

    def try_constrain_with_out_repset(self, required: u.TensorRepSet) -> bool:
        """Narrow the first output to what a downstream operator requires, and propagate."""
        current = self.outs_repset_list[0]
        if current == required or not current.any_in_common(required):
            return False
        narrowed = current.make_intersect(required)
        self.outs_repset_list[0] = narrowed
        if self.sync_outs_repr:
            self._propagate_to_outs(narrowed)
        if self.sync_primary_io_repr:
            p = self.primary_arg_idx
            self.args_repset_list[p] = self.args_repset_list[
                p].constrain_to_compatible_packed_dim(narrowed)
            if self.sync_args_repr:
                self._propagate_to_args(self.args_repset_list[p], p)
        self.assert_sync_contraints()
        return True

    def pick_representations(self) -> tuple[u.TensorReprList, u.TensorReprList]:
        """One representation per argument position and per output tensor."""
        args = u.TensorReprList([])
        for i in range(len(self.op_node.args)):
            args.append(self.args_repset_list[i].make_tensor_repr())
        outs = u.TensorReprList([])
        for i in range(u.num_tensors_in_node(self.op_node)):
            outs.append(self.outs_repset_list[i].make_tensor_repr())
        return args, outs
