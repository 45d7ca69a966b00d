"""An operator the runtime cannot run fails at export, naming the op, node and source line."""

import pytest

torch = pytest.importorskip("torch")

from edgetorch.errors import ErrorCode, UnsupportedOperatorError  # noqa: E402
from edgetorch.exir import EdgeCompileConfig, to_edge  # noqa: E402

_lib = torch.library.Library("edgetorch_test", "DEF")
_lib.define("mystery(Tensor x) -> Tensor")
_lib.impl("mystery", lambda x: x * 2, "CompositeExplicitAutograd")
_lib.impl("mystery", lambda x: torch.empty_like(x), "Meta")


class UsesMystery(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return torch.ops.edgetorch_test.mystery(y)  # the line the error must point at


def test_unsupported_op_names_op_node_and_line():
    ep = torch.export.export(UsesMystery(), (torch.randn(2, 3),))
    with pytest.raises(UnsupportedOperatorError) as info:
        to_edge(ep)
    msg = str(info.value)
    assert "edgetorch_test::mystery" in msg
    assert "%edgetorch_test_mystery_default" in msg  # named as ExecuTorch names Edge nodes
    assert "test_export_errors.py" in msg and "the line the error must point at" in msg
    assert "Try:" in msg
    assert info.value.code == ErrorCode.NotSupported


def test_check_can_be_disabled_but_emission_still_refuses():
    from edgetorch.errors import ExportError
    from edgetorch.runtime import Runtime

    ep = torch.export.export(UsesMystery(), (torch.randn(2, 3),))
    edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))
    with pytest.raises(ExportError, match="mystery"):
        # No out variant exists, so even emission must refuse, naming the op.
        buf = edge.to_executorch().buffer
        Runtime.get().load_program(buf).load_method("forward")


def test_non_exported_input_is_a_clear_type_error():
    with pytest.raises(TypeError, match="torch.export.export"):
        to_edge(UsesMystery())
