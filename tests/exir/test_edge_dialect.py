"""Edge-dialect operators (``exir_ops.edge.*``): names, equality with ATen, ``allowed_types``,
their use in ``to_edge`` graphs, backend ops, and the verifier's Edge dtype error."""

from __future__ import annotations

import copy
import json
import pathlib
import pickle

import pytest
import torch
from torch.library import Library

from edgetorch.errors import UnsupportedOperatorError
from edgetorch.exir import EdgeCompileConfig, to_edge
from edgetorch.exir.dialects._ops import bind_pattern_to_op
from edgetorch.exir.dialects._ops import ops as exir_ops
from edgetorch.exir.dialects.backend._ops import BackendOpOverload
from edgetorch.exir.dialects.edge._ops import EdgeOpOverload, EdgeOpOverloadPacket
from edgetorch.runtime import Runtime

aten = torch.ops.aten
EDGE_YAML_JSON = (pathlib.Path(__file__).resolve().parents[2]
                  / "src/edgetorch/exir/dialects/edge/dtypes.json")


def test_edge_op_names_and_schema():
    add = exir_ops.edge.aten.add.Tensor
    assert isinstance(add, EdgeOpOverload)
    assert isinstance(exir_ops.edge.aten.add, EdgeOpOverloadPacket)
    assert add is exir_ops.edge.aten.add.Tensor  # one object per overload
    assert add.name() == "aten::add.Tensor"
    assert add.__name__ == "aten.add.Tensor"
    assert add.namespace == "aten"
    assert add._op is aten.add.Tensor
    assert add._schema.name == "aten::add"
    assert add._schema.overload_name == "Tensor"
    assert str(add._schema) == str(aten.add.Tensor._schema)
    assert [a.name for a in add._schema.arguments] == ["self", "other", "alpha"]
    assert "EdgeOpOverload" in repr(add)
    assert str(exir_ops.edge.aten.add) == "aten.add"
    with pytest.raises(AttributeError, match="overloads: .*Tensor"):
        exir_ops.edge.aten.add.NoSuchOverload  # noqa: B018


def test_edge_op_calls_the_aten_op():
    x, y = torch.randn(3), torch.randn(3)
    assert torch.equal(exir_ops.edge.aten.add.Tensor(x, y, alpha=2), x + 2 * y)
    assert torch.equal(exir_ops.edge.aten.add(x, y), x + y)  # the packet dispatches too


def test_edge_op_equals_and_hashes_like_its_aten_op():
    edge, op = exir_ops.edge.aten.add.Tensor, aten.add.Tensor
    assert edge == op and op == edge and not (edge != op)
    assert edge != aten.add.Scalar and edge != exir_ops.edge.aten.mul.Tensor
    assert hash(edge) == hash(op)
    assert {op: "aten"}[edge] == "aten" and {edge: "edge"}[op] == "edge"
    assert edge in {op} and op in {edge}
    assert copy.deepcopy(edge) is edge
    assert pickle.loads(pickle.dumps(edge)) is edge


def test_allowed_types_follow_edge_yaml():
    table = json.loads(EDGE_YAML_JSON.read_text())
    names = {"Bool": torch.bool, "Byte": torch.uint8, "Float": torch.float32,
             "Double": torch.float64, "Half": torch.float16, "BFloat16": torch.bfloat16,
             "Char": torch.int8, "Short": torch.int16, "Int": torch.int32,
             "Long": torch.int64, "UInt16": torch.uint16}
    rule = table["aten::sigmoid"]
    expected = set()
    for constraint in rule["rules"]:
        expected |= {names[t] for t in rule["aliases"][constraint["self"]]}
    sigmoid = exir_ops.edge.aten.sigmoid.default._schema
    assert sigmoid.arguments[0].allowed_types == expected
    assert sigmoid.returns[0].allowed_types == {torch.float16, torch.bfloat16,
                                                torch.float32, torch.float64}
    # edge.yaml also types some scalars (add's alpha); other non-tensor arguments are plain
    # schema arguments, and an op edge.yaml does not list accepts any dtype independently.
    alpha = exir_ops.edge.aten.add.Tensor._schema.arguments[2]
    assert alpha.name == "alpha" and alpha.allowed_types == {torch.bool, torch.int32,
                                                             torch.float32}
    assert "aten::upsample_bilinear2d.vec" not in table
    upsample = exir_ops.edge.aten.upsample_bilinear2d.vec._schema
    assert not hasattr(upsample.arguments[2], "allowed_types")  # align_corners
    assert {torch.float32, torch.int8, torch.bool} <= upsample.arguments[0].allowed_types


def test_dtype_constraint_binds_aliases():
    c = exir_ops.edge.aten.add.Tensor._schema.dtype_constraint
    f32, f16, bf16 = torch.float32, torch.float16, torch.bfloat16
    assert c.validate({"self": f32, "other": f32, "__ret_0": f32})
    assert c.validate({"self": f16, "other": f16, "__ret_0": f16})
    assert not c.validate({"self": f16, "other": bf16, "__ret_0": f32})
    assert c.allowed_given("self", {"other": bf16, "__ret_0": f32}) == {f32}


class AddRelu(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y) * 2


def test_to_edge_graph_holds_edge_ops_that_user_passes_match():
    edge = to_edge(torch.export.export(AddRelu(), (torch.randn(2, 3), torch.randn(2, 3))))
    gm = edge.exported_program().graph_module
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert all(isinstance(t, EdgeOpOverload) for t in targets)
    # `* 2`: the 2 is a lifted int64 constant cast to float32 first, as in ExecuTorch
    assert targets == [exir_ops.edge.aten.add.Tensor, exir_ops.edge.aten.relu.default,
                       exir_ops.edge.dim_order_ops._to_dim_order_copy.default,
                       exir_ops.edge.aten.mul.Tensor]
    assert targets[0] == aten.add.Tensor  # code comparing with torch.ops.aten.* still matches
    assert "edgetorch.exir.dialects.edge._ops.aten.add.Tensor" in str(gm.graph)


def test_edge_program_emits_aten_out_variants():
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    et = to_edge(torch.export.export(AddRelu(), (x, y))).to_executorch()
    ops = [(o.name, o.overload) for o in et.executorch_program.execution_plan[0].operators]
    # the cast of the lifted 2 is folded into a float32 constant (fold_constants=True)
    assert ops == [("aten::add", "out"), ("aten::relu", "out"), ("aten::mul", "out")]
    out = Runtime.get().load_program(et.buffer).load_method("forward").execute([x, y])
    torch.testing.assert_close(out[0], torch.relu(x + y) * 2, rtol=1e-5, atol=1e-5)


class HalfFmodBFloat(torch.nn.Module):
    def forward(self, x, y):
        return torch.fmod(x, y)  # float16, bfloat16: torch promotes, ExecuTorch's fmod refuses


def test_verifier_names_op_argument_dtype_node_and_line():
    # (x + y would be cast first: to_edge casts the operands of add/sub/mul/div/minimum to
    # the promoted dtype, as ExecuTorch's RemoveMixedTypeOperators does.)
    ep = torch.export.export(HalfFmodBFloat(), (torch.ones(2, dtype=torch.float16),
                                                torch.ones(2, dtype=torch.bfloat16)))
    with pytest.raises(UnsupportedOperatorError) as info:
        to_edge(ep)
    msg = str(info.value)
    assert "aten::fmod.Tensor" in msg
    assert "argument 'self'" in msg and "float16" in msg
    assert "with other=bfloat16, out=float32 it accepts float32" in msg
    assert "node %aten_fmod_tensor" in msg
    assert "test_edge_dialect.py" in msg and "return torch.fmod(x, y)" in msg
    assert "Try:" in msg
    # The same program exports when the user opts out of IR checks, as in ExecuTorch.
    to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))


_LIB = Library("edgetorch_test_backend", "DEF")


@bind_pattern_to_op(_LIB, "add_relu(Tensor x, Tensor y) -> Tensor")
def add_relu(x, y):
    return torch.relu(x + y)


def test_bind_pattern_to_op_makes_a_backend_op():
    op = exir_ops.backend.edgetorch_test_backend.add_relu.default
    assert isinstance(op, BackendOpOverload)
    assert op._equivalent_callable is add_relu
    assert op.name() == "edgetorch_test_backend::add_relu"
    assert op == torch.ops.edgetorch_test_backend.add_relu.default
    x, y = torch.randn(4), torch.randn(4)
    assert torch.equal(op(x, y), torch.relu(x + y))
    with pytest.raises(RuntimeError, match="not a backend op library"):
        exir_ops.backend.aten  # noqa: B018
