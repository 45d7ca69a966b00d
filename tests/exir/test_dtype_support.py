"""Export-time dtype guarantee: an operator used with a dtype its kernel lacks is refused at
to_edge when ExecuTorch's Edge dialect rules refuse it too, else at to_executorch, naming the
op, the dtype, the node, the user's source line and what to try."""

import pytest

torch = pytest.importorskip("torch")

from edgetorch.errors import ErrorCode, UnsupportedOperatorError  # noqa: E402
from edgetorch.exir import EdgeCompileConfig, to_edge  # noqa: E402
from edgetorch.exir.dtype_support import dtype_problem  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402


class IntGelu(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        return torch.nn.functional.gelu(y)  # gelu has no integer kernel


class Bf16Pdist(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.pdist(x)


class Bf16Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.softmax(torch.nn.functional.gelu(self.fc(x)), -1)


def _refused(model, *inputs, at: str = "to_edge") -> UnsupportedOperatorError:
    """The error of ``to_edge`` (where ExecuTorch's Edge dtype rules refuse the node too) or of
    ``to_executorch`` (where only edgetorch's kernel lacks the dtype)."""
    ep = torch.export.export(model, inputs)
    with pytest.raises(UnsupportedOperatorError) as info:
        edge = to_edge(ep)
        assert at == "to_executorch", "to_edge accepted it"
        edge.to_executorch()
    return info.value


def test_integer_input_to_a_float_only_op():
    err = _refused(IntGelu(), torch.arange(6))
    msg = str(err)
    assert "aten::gelu.out" in msg and "int64" in msg and "'self'" in msg
    assert "float32, float64, float16, bfloat16" in msg  # what the kernel does support
    assert "%aten_gelu_default" in msg  # the node, named as ExecuTorch names Edge nodes
    assert "test_dtype_support.py" in msg and "gelu has no integer kernel" in msg  # the line
    assert "Try: cast that input to a floating dtype" in msg
    assert "docs/operators.md" in msg
    assert err.code == ErrorCode.NotSupported


def test_low_precision_input_to_an_op_without_that_kernel():
    msg = str(_refused(Bf16Pdist(), torch.randn(4, 3, dtype=torch.bfloat16), at="to_executorch"))
    assert "aten::_pdist_forward.out" in msg and "bfloat16" in msg
    assert "compute that op in float32" in msg


def test_supported_low_precision_model_exports_and_runs():
    model = Bf16Mlp().to(torch.bfloat16).eval()
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    et = to_edge(torch.export.export(model, (x,))).to_executorch()
    (out,) = Runtime.get().load_program(et.buffer).load_method("forward").execute([x])
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), model(x).float(), atol=2e-2, rtol=2e-2)


def test_every_node_of_a_supported_program_passes():
    ep = torch.export.export(Bf16Mlp().eval(), (torch.randn(2, 8),))
    nodes = list(ep.graph.nodes)
    assert all(dtype_problem(n) is None for n in nodes)


def test_the_check_is_skipped_with_check_ir_validity_false():
    ep = torch.export.export(IntGelu(), (torch.arange(6),))
    to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))
