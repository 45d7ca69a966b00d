"""Signature-aware graph edits shared by backend passes (``backends.transforms.utils``): the
placeholder, its spec and its tensor change together, and the program still computes."""

from __future__ import annotations

import pytest
import torch
from torch.export.graph_signature import InputKind

from edgetorch.backends.transforms.utils import (
    create_constant_placeholder,
    create_mutable_buffer,
    delete_constant_placeholder,
    get_param_tensor,
    set_param_tensor,
)
from edgetorch.errors import GraphSignatureError
from edgetorch.exir import to_edge
from edgetorch.exir.dialects._ops import ops as exir_ops


class Identity(torch.nn.Module):
    def forward(self, x):
        return x


def _edge():
    return to_edge(torch.export.export(Identity(), (torch.zeros(2),))).exported_program()


@pytest.mark.parametrize("kind,persistent", [(InputKind.PARAMETER, None),
                                             (InputKind.BUFFER, True),
                                             (InputKind.BUFFER, False),
                                             (InputKind.CONSTANT_TENSOR, None)])
def test_constant_placeholder_round_trip(kind, persistent):
    ep = _edge()
    graph = ep.graph_module.graph
    x = next(iter(graph.nodes))
    with graph.inserting_before(x):
        c = create_constant_placeholder(ep, graph, "w", kind, torch.full((2,), 3.0), persistent)
    assert create_constant_placeholder(ep, graph, "w", kind, torch.ones(2), persistent) is c
    with graph.inserting_after(x):
        add = graph.create_node("call_function", exir_ops.edge.aten.add.Tensor, (x, c))
    graph.output_node().replace_input_with(x, add)
    ep.graph_module.recompile()
    assert ep.module()(torch.ones(2)).tolist() == [4.0, 4.0]
    assert get_param_tensor(ep, c).tolist() == [3.0, 3.0]
    set_param_tensor(ep, c, torch.full((2,), 5.0))
    assert ep.module()(torch.ones(2)).tolist() == [6.0, 6.0]
    with pytest.raises(GraphSignatureError, match="still has users"):
        delete_constant_placeholder(ep, c)
    graph.output_node().replace_input_with(add, x)
    graph.erase_node(add)
    delete_constant_placeholder(ep, c)
    assert [s.arg.name for s in ep.graph_signature.input_specs] == ["x"]
    assert not ep.state_dict and not ep.constants


def test_constant_placeholder_must_precede_user_inputs():
    ep = _edge()
    graph = ep.graph_module.graph
    with graph.inserting_after(next(iter(graph.nodes))), pytest.raises(
            GraphSignatureError, match="before the user inputs"):
        create_constant_placeholder(ep, graph, "w", InputKind.PARAMETER, torch.ones(2))
    assert len(ep.graph_signature.input_specs) == 1 and not ep.state_dict


def test_mutable_buffer_is_an_input_and_a_mutation():
    ep = _edge()
    node = create_mutable_buffer(ep, "b_cache", torch.ones(2))
    sig = ep.graph_signature
    assert sig.inputs_to_buffers[node.name] == "cache" == sig.buffers_to_mutate[node.name]
    assert [n.name for n in ep.graph.nodes if n.op == "placeholder"] == [node.name, "x"]
    assert ep.graph.output_node().args[0][0] is node  # mutations come first
    assert torch.equal(ep.state_dict["cache"], torch.ones(2))
    with pytest.raises(GraphSignatureError, match="already exists"):
        create_mutable_buffer(ep, "b_cache", torch.ones(2))
    with pytest.raises(GraphSignatureError, match="mutable buffer"):
        with ep.graph.inserting_before(node):
            create_constant_placeholder(ep, ep.graph, "b_cache", InputKind.PARAMETER,
                                        torch.ones(2))
