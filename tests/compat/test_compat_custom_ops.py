"""A custom op named in ``ExecutorchBackendConfig.target_runtime_operators``: the file edgetorch
writes is one ExecuTorch 1.5.1's runtime loads exactly as edgetorch's does -- both refuse it
at ``load_method`` with OperatorMissing (0x14), naming the operator, because neither links a
kernel for it (the deployment's runtime, which does, runs it)."""

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from refenv import RefToolError, ref_available, ref_run  # noqa: E402

from edgetorch.errors import ErrorCode, OperatorMissingError  # noqa: E402
from edgetorch.exir import ExecutorchBackendConfig, to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]

_lib = torch.library.Library("edgetorch_compat", "DEF")
_lib.define("twice(Tensor x) -> Tensor")
_lib.define("twice.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
_lib.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")
_lib.impl("twice.out", lambda x, *, out: out.copy_(x * 2), "CompositeExplicitAutograd")


class UsesTwice(torch.nn.Module):
    def forward(self, x):
        return torch.ops.edgetorch_compat.twice(x + 1)


def test_both_runtimes_refuse_a_target_runtime_operator_at_load(tmp_path):
    x = torch.randn(2, 3)
    config = ExecutorchBackendConfig(target_runtime_operators=["edgetorch_compat::twice.out"])
    pte = tmp_path / "twice.pte"
    pte.write_bytes(to_edge(torch.export.export(UsesTwice(), (x,))).to_executorch(config).buffer)
    with pytest.raises(OperatorMissingError, match="edgetorch_compat::twice.out") as ours:
        Runtime.get().load_program(pte.read_bytes()).load_method("forward")
    assert ours.value.code == ErrorCode.OperatorMissing
    with pytest.raises(RefToolError) as theirs:
        ref_run(pte, [np.asarray(x)])
    message = str(theirs.value)
    assert "edgetorch_compat::twice.out" in message  # ExecuTorch logs the missing operator
    # and fails load_method with it (its message prints the code as "0x:14")
    assert re.search(rf"Failed to load method forward, error: 0x:?{int(ErrorCode.OperatorMissing):x}\b",
                     message)
