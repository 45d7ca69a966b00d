"""``ConfigerationBasedPartitioner`` (per-operator configs) and ExecuTorch's step-by-step
subgraph API (``_get_node_list_with_same_tag``, ``create_submodule_from_nodes``,
``create_exported_program_from_submodule``)."""

from __future__ import annotations

import pytest
import torch
from torch.export.graph_signature import InputKind

from edgetorch.errors import ExportError, InvalidArgumentError
from edgetorch.exir import to_edge
from edgetorch.exir.backend.backend_api import _get_node_list_with_same_tag
from edgetorch.exir.backend.canonical_partitioners.config_partitioner import (
    ConfigerationBasedPartitioner,
    PartitionerConfig,
    format_target_name,
)
from edgetorch.exir.backend.partitioner import DelegationSpec
from edgetorch.exir.lowered_backend_module import (
    create_exported_program_from_submodule,
    create_submodule_from_nodes,
)


class _Linears(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))) + 1


def _edge():
    return to_edge(torch.export.export(_Linears().eval(), (torch.rand(2, 4),))).exported_program()


class _AddmmConfig(PartitionerConfig):
    """addmm with its weight and bias placeholders (the permute of the weight goes along)."""

    target_name = "addmm.default"

    def check_constraints(self, node, ep):
        return True

    def get_original_aten(self):
        return torch.ops.aten.linear.default

    def get_partition(self, node, ep):
        weight = node.args[2]
        return [node, node.args[0], weight, weight.args[0]]


def test_format_target_name_drops_the_dialect():
    assert format_target_name("aten.linear.default") == "linear.default"
    assert format_target_name("quantized_decomposed.quantize_per_tensor.default") == \
        "quantize_per_tensor.default"
    assert format_target_name("linear.default") == "linear.default"


def test_config_partitioner_tags_each_accepted_node_with_its_dependencies():
    ep = _edge()
    part = ConfigerationBasedPartitioner(DelegationSpec("X", []), [_AddmmConfig()])
    ops, keep = part.ops_to_not_decompose(ep)
    assert ops == [torch.ops.aten.linear.default]
    tags = part.partition(ep).partition_tags
    tagged = {n.name: n.meta["delegation_tag"] for n in ep.graph.nodes
              if "delegation_tag" in n.meta}
    addmms = [n for n in ep.graph.nodes if "addmm" in n.name]
    assert len(addmms) == 2 and all(n.name in tagged for n in addmms)
    # relu between the two linears is not accepted: two partitions, weights in each
    assert len(tags) == 2 and tagged[addmms[0].name] != tagged[addmms[1].name]
    params = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in tagged]
    assert len(params) == 4
    assert not any("relu" in name or "add" == name[:3] for name in tagged)


def test_config_partitioner_refuses_two_configs_for_one_operator():
    with pytest.raises(InvalidArgumentError, match="addmm.default"):
        ConfigerationBasedPartitioner(DelegationSpec("X", []), [_AddmmConfig(), _AddmmConfig()])


def _tag(ep, names, tag="t"):
    for n in ep.graph.nodes:
        if n.name in names:
            n.meta["delegation_tag"] = tag


def test_step_by_step_cut_gives_a_program_owning_its_weights():
    ep = _edge()
    first = next(n for n in ep.graph.nodes if "addmm" in n.name)
    weight, bias = first.args[2].args[0], first.args[0]
    names = {first.name, first.args[2].name, weight.name, bias.name}
    _tag(ep, names)
    nodes = _get_node_list_with_same_tag(ep.graph_module, "t", ep)
    assert {n.name for n in nodes} == names
    sub, call = create_submodule_from_nodes(ep.graph_module, nodes, "t")
    assert call.op == "call_module" and call.target == "fused_t"
    assert not any(n.name in names for n in ep.graph.nodes)
    sub_ep, inputs_taken, outputs_taken = create_exported_program_from_submodule(
        sub, ep, "t", call, False)
    assert set(inputs_taken) == {weight.name, bias.name}
    assert outputs_taken == {}
    kinds = [s.kind for s in sub_ep.graph_signature.input_specs]
    assert kinds == [InputKind.PARAMETER, InputKind.PARAMETER, InputKind.USER_INPUT]
    x = torch.rand(2, 4)
    # the graph computes addmm(bias, x, permute_copy(weight)): the same calls, the same bits
    expected = torch.addmm(ep.state_dict["a.bias"], x, ep.state_dict["a.weight"].t().contiguous())
    assert set(sub_ep.state_dict) == {"a.weight", "a.bias"}
    torch.testing.assert_close(sub_ep.module()(x)[0], expected, rtol=0, atol=0)


def test_node_list_refuses_a_tagged_user_input_and_a_shared_weight():
    ep = _edge()
    x = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name == "x")
    _tag(ep, {x.name})
    with pytest.raises(ExportError, match="user input"):
        _get_node_list_with_same_tag(ep.graph_module, "t", ep)
    ep = _edge()
    first = next(n for n in ep.graph.nodes if "addmm" in n.name)
    _tag(ep, {first.args[0].name})  # the bias, its addmm left untagged
    with pytest.raises(ExportError, match="outside the partition"):
        _get_node_list_with_same_tag(ep.graph_module, "t", ep)
