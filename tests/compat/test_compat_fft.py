"""FFT programs both ways with ExecuTorch 1.5.1: edgetorch's rfft/irfft .pte (complex64
tensors, _fft_r2c/_fft_c2r) runs in ExecuTorch's runtime equal to eager. (ExecuTorch's own
FFT .pte runs in ours: tests/runtime/test_executorch_programs.py, fixture et_rfft.pte.)"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from refenv import ref_available, ref_run  # noqa: E402

from edgetorch.exir import to_edge  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]


class Spectral(torch.nn.Module):
    def forward(self, x):
        y = torch.fft.rfft(x, dim=-1, norm="ortho")
        return y, torch.fft.irfftn(torch.fft.rfftn(x, dim=(0, 1)), s=x.shape, dim=(0, 1)) + 1


def test_edgetorch_fft_program_runs_in_executorch(tmp_path):
    model = Spectral()
    x = torch.randn(4, 10)
    pte = tmp_path / "fft.pte"
    pte.write_bytes(to_edge(torch.export.export(model, (x,))).to_executorch().buffer)
    got = ref_run(pte, [x.numpy()])
    want = model(x)
    assert got[0].dtype == np.complex64 and got[1].dtype == np.float32
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)
