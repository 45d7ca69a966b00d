"""Operators whose portable kernels in ExecuTorch 1.5.1 take only the default dim order
(mean, sum, avg_pool2d, adaptive_avg_pool2d, expand_copy) get a contiguous copy before a
channels-last input (``LegalizePortableDimOrderPass``, as ExecuTorch's to_executorch inserts
it): without it ExecuTorch's runtime refused edgetorch's file with InvalidArgument (0x12)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from refenv import ref_available, ref_run  # noqa: E402

from edgetorch.exir import to_edge_transform_and_lower  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]


class Reductions(torch.nn.Module):
    # the input is contiguous (the reference tool passes arrays, which carry no dim order);
    # the reductions read a channels-last copy of it
    def forward(self, x):
        x = x.to(memory_format=torch.channels_last)
        pooled = torch.nn.functional.avg_pool2d(x, 2)
        adaptive = torch.nn.functional.adaptive_avg_pool2d(x, 1)
        return (torch.mean(x, dim=[2, 3], keepdim=True).reshape([-1, 2]),
                torch.sum(x, dim=[1]), pooled, adaptive)


def test_channels_last_inputs_run_in_executorch(tmp_path):
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 6)
    model = Reductions().eval()
    et = to_edge_transform_and_lower(torch.export.export(model, (x,)), partitioner=[]
                                     ).to_executorch()
    ops = [str(n.target) for n in et.exported_program().graph.nodes if n.op == "call_function"]
    assert "dim_order_ops._to_dim_order_copy.out" in ops
    (tmp_path / "m.pte").write_bytes(et.buffer)
    want = model(x)
    ours = Runtime.get().load_program(et.buffer).load_method("forward").execute([x])
    theirs = ref_run(tmp_path / "m.pte", [x.numpy()])
    for w, o, t in zip(want, ours, theirs):
        # sums of at most 24 float32 values: a few ulps; both runtimes run the same kernels' math
        torch.testing.assert_close(o, w, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(torch.from_numpy(t), w, rtol=1e-5, atol=1e-6)
