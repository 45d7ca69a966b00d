"""Which operators export accepts where (issue 30's decision).

``to_edge`` accepts what ExecuTorch's Edge verifier accepts: custom operators, and non-core ATen
operators that are preserved or excepted; it refuses other non-core ATen operators. Whether
edgetorch's runtime can run every operator is checked at ``to_executorch``, which names the op,
the node and the user's source line and says how to fix it: register a kernel, delegate, or
list the operator among those the target runtime provides.
"""

import pytest

torch = pytest.importorskip("torch")

from torch._export.verifier import SpecViolationError  # noqa: E402

from edgetorch.errors import (  # noqa: E402
    ErrorCode,
    ExportError,
    OperatorMissingError,
    UnsupportedOperatorError,
)
from edgetorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge  # noqa: E402
from edgetorch.exir.dialects._ops import ops as exir_ops  # noqa: E402
from edgetorch.exir.pass_base import ExportPass  # noqa: E402
from edgetorch.kernels import KERNELS, kernel  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

_lib = torch.library.Library("edgetorch_test", "DEF")
_lib.define("mystery(Tensor x) -> Tensor")  # no out variant: nothing can run it
_lib.impl("mystery", lambda x: x * 2, "CompositeExplicitAutograd")
_lib.impl("mystery", lambda x: torch.empty_like(x), "Meta")
# A custom op as a user library defines it for ExecuTorch: functional and .out overloads.
_lib.define("scale_shift(Tensor x, float s) -> Tensor")
_lib.define("scale_shift.out(Tensor x, float s, *, Tensor(a!) out) -> Tensor(a!)")
_lib.impl("scale_shift", lambda x, s: x * s + 1, "CompositeExplicitAutograd")
_lib.impl("scale_shift.out", lambda x, s, *, out: out.copy_(x * s + 1),
          "CompositeExplicitAutograd")

SCALE_SHIFT = "edgetorch_test::scale_shift.out"


class UsesMystery(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return torch.ops.edgetorch_test.mystery(y)  # the line the error must point at


class UsesScaleShift(torch.nn.Module):
    def forward(self, x):
        y = torch.sigmoid(x)
        return torch.ops.edgetorch_test.scale_shift(y, 3.0)  # the custom op's line


class MatrixRank(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.matrix_rank(x)  # decomposes to aten._linalg_svd (not core)


class Attention(torch.nn.Module):
    def forward(self, q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v)


class Replace(ExportPass):
    """A user's transform: calls to ``old`` become calls to ``new``."""

    def __init__(self, old, new):
        super().__init__()
        self.old, self.new = old, new

    def call_operator(self, op, args, kwargs, meta):
        return super().call_operator(self.new if op == self.old else op, args, kwargs, meta)


def SigmoidToTanh():  # noqa: N802 (reads as the pass it makes)
    return Replace(exir_ops.edge.aten.sigmoid.default, exir_ops.edge.aten.tanh.default)


@pytest.fixture
def scale_shift_kernel():
    """edgetorch's kernel for the custom op, registered as a user would, removed after."""
    @kernel(SCALE_SHIFT)
    def scale_shift_out(x, s, out):
        out[...] = x * out.dtype.type(s) + out.dtype.type(1)  # float32 steps, as eager's
        return out

    yield scale_shift_out
    del KERNELS[SCALE_SHIFT]


def _export(model, *inputs):
    return torch.export.export(model, inputs)


def test_to_edge_and_transform_accept_a_custom_op_without_kernel():
    edge = to_edge(_export(UsesScaleShift(), torch.randn(2, 3)))
    edge = edge.transform([SigmoidToTanh()])
    targets = [n.target for n in edge.exported_program().graph.nodes if n.op == "call_function"]
    assert exir_ops.edge.aten.tanh.default in targets
    assert exir_ops.edge.edgetorch_test.scale_shift.default in targets
    assert SCALE_SHIFT not in KERNELS  # accepted without any kernel
    to_edge(_export(UsesMystery(), torch.randn(2, 3)))  # even one with no out variant


def _refused_at_to_executorch(model, config=None) -> UnsupportedOperatorError:
    edge = to_edge(_export(model, torch.randn(2, 3)), compile_config=config)
    with pytest.raises(UnsupportedOperatorError) as info:
        edge.to_executorch()
    return info.value


def test_to_executorch_refuses_an_operator_without_kernel_naming_op_node_and_line():
    err = _refused_at_to_executorch(UsesScaleShift())
    msg = str(err)
    assert "operator edgetorch_test::scale_shift" in msg
    assert f"no kernel for {SCALE_SHIFT}" in msg
    assert "%edgetorch_test_scale_shift_default" in msg  # named as ExecuTorch names Edge nodes
    assert "test_export_errors.py" in msg and "the custom op's line" in msg
    assert f"@edgetorch.kernels.kernel('{SCALE_SHIFT}')" in msg
    assert "partitioner=" in msg
    assert f"target_runtime_operators=['{SCALE_SHIFT}']" in msg
    assert err.code == ErrorCode.NotSupported


def test_to_executorch_refuses_an_operator_without_out_variant():
    msg = str(_refused_at_to_executorch(UsesMystery()))
    assert "edgetorch_test::mystery has no out-variant overload" in msg
    assert "the line the error must point at" in msg
    # Without the Edge verifier nothing changes: the runtime check is not optional.
    unchecked = EdgeCompileConfig(_check_ir_validity=False)
    assert "mystery" in str(_refused_at_to_executorch(UsesMystery(), unchecked))


def test_a_registered_kernel_makes_the_custom_op_run_with_eagers_numbers(scale_shift_kernel):
    model, x = UsesScaleShift(), torch.randn(4, 5)
    et = to_edge(_export(model, x)).to_executorch()
    (out,) = Runtime.get().load_program(et.buffer).load_method("forward").execute([x])
    # The project's float32 bound: sigmoid's kernel is within float32 rounding of torch's;
    # the custom op's two steps (* 3, + 1) round in float32 on both sides.
    torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("provided", [[SCALE_SHIFT], ["edgetorch_test::scale_shift"],
                                      [torch.ops.edgetorch_test.scale_shift]],
                         ids=["out-name", "every-overload", "packet"])
def test_target_runtime_operators_writes_the_pte_and_edgetorch_refuses_it_at_load(provided):
    config = ExecutorchBackendConfig(target_runtime_operators=provided)
    et = to_edge(_export(UsesScaleShift(), torch.randn(2, 3))).to_executorch(config)
    operators = [f"{o.name}.{o.overload}" for o in et.executorch_program.execution_plan[0].operators]
    assert SCALE_SHIFT in operators  # the call the target runtime's kernel library answers
    program = Runtime.get().load_program(et.buffer)
    with pytest.raises(OperatorMissingError, match=SCALE_SHIFT) as info:
        program.load_method("forward")
    assert info.value.code == ErrorCode.OperatorMissing
    assert "@edgetorch.kernels.kernel" in str(info.value)


def test_target_runtime_operators_exempts_only_the_listed_operators():
    config = ExecutorchBackendConfig(target_runtime_operators=["edgetorch_test::other.out"])
    with pytest.raises(UnsupportedOperatorError, match="scale_shift"):
        to_edge(_export(UsesScaleShift(), torch.randn(2, 3))).to_executorch(config)
    with pytest.raises(ExportError, match="target_runtime_operators takes operator names"):
        to_edge(_export(UsesScaleShift(), torch.randn(2, 3))).to_executorch(
            ExecutorchBackendConfig(target_runtime_operators=[3]))


def test_a_non_core_aten_op_is_refused_at_to_edge_unless_excepted():
    ep = _export(MatrixRank(), torch.ones(3, 4, 4))
    with pytest.raises(SpecViolationError) as info:  # ExecuTorch's type, and edgetorch's
        to_edge(ep)
    assert isinstance(info.value, UnsupportedOperatorError)
    msg = str(info.value)
    assert "aten::_linalg_svd is not in the core ATen opset" in msg
    assert "%aten__linalg_svd_default" in msg and "decomposes to aten._linalg_svd" in msg
    assert "_core_aten_ops_exception_list=[torch.ops.aten._linalg_svd.default]" in msg
    config = EdgeCompileConfig(_core_aten_ops_exception_list=[torch.ops.aten._linalg_svd.default])
    edge = to_edge(ep, compile_config=config)
    # edgetorch's runtime has no SVD kernel: to_executorch says so.
    with pytest.raises(UnsupportedOperatorError, match="no kernel for aten::_linalg_svd.U"):
        edge.to_executorch()


def test_a_preserved_non_core_op_passes_to_edge_and_its_transforms():
    q = k = v = torch.randn(1, 2, 4, 8)
    ep = _export(Attention(), q, k, v)
    sdpa = torch.ops.aten.scaled_dot_product_attention.default
    edge = to_edge(ep, compile_config=EdgeCompileConfig(preserve_ops=[sdpa]))
    edge = edge.transform([SigmoidToTanh()])  # verified again with the same preserve_ops
    targets = [n.target for n in edge.exported_program().graph.nodes]
    assert exir_ops.edge.aten.scaled_dot_product_attention.default in targets
    with pytest.raises(UnsupportedOperatorError, match="scaled_dot_product_attention"):
        edge.to_executorch()


def test_a_pass_inserting_a_non_core_op_is_refused_at_transform():
    to_i1 = Replace(exir_ops.edge.aten.sigmoid.default, torch.ops.aten.special_i1.default)
    edge = to_edge(_export(UsesScaleShift(), torch.randn(2, 3)))
    with pytest.raises(UnsupportedOperatorError, match="special_i1 is not in the core ATen"):
        edge.transform([to_i1])


def test_non_exported_input_is_a_clear_type_error():
    with pytest.raises(TypeError, match="torch.export.export"):
        to_edge(UsesMystery())

