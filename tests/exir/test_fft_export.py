"""torch.fft.rfft / irfft export through to_edge (``_fft_r2c`` / ``_fft_c2r`` survive the
core-ATen decompositions, complex64 tensors are planned and emitted) and run equal to eager."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from edgetorch.exir import to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402


class Spectral(torch.nn.Module):
    def forward(self, x):
        y = torch.fft.rfft(x, dim=-1)
        return y, torch.fft.irfft(y, n=x.shape[-1], dim=-1) * 2


class Spectral2d(torch.nn.Module):
    def forward(self, x):
        return torch.fft.irfftn(torch.fft.rfftn(x, dim=(1, 2), norm="forward"), s=x.shape[1:],
                                dim=(1, 2), norm="forward")


@pytest.mark.parametrize("model, shape, dtype", [
    (Spectral(), (3, 8), torch.float32), (Spectral(), (2, 9), torch.float64),
    (Spectral2d(), (2, 6, 5), torch.float32),
])
def test_fft_model_exports_and_runs_like_eager(model, shape, dtype):
    x = torch.randn(*shape, dtype=dtype)
    edge = to_edge(torch.export.export(model, (x,)))
    targets = {str(n.target) for n in edge.exported_program().graph.nodes if n.op == "call_function"}
    assert {"aten._fft_r2c.default", "aten._fft_c2r.default"} <= targets
    program = Runtime.get().load_program(edge.to_executorch().buffer)
    outs = program.load_method("forward").execute([x])
    eager = model(x)
    eager = eager if isinstance(eager, tuple) else (eager,)
    for got, want in zip(outs, eager):
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
