"""Writes the ExecuTorch-made fixtures et_map / et_scan / et_rfft (runs ONLY in the reference venv).

    /work/main/.venv-ref/bin/python tests/compat/ref_loop_fft_fixtures.py   # from tests/fixtures/

ExecuTorch emits ``executorch_prim::et_copy_index`` without a return slot for ``map`` and
``scan`` loops, and COMPLEX64 tensors for ``torch.fft.rfft``; ``tests/runtime/
test_executorch_programs.py`` runs these files in our runtime without torch. Each ``.io.npz``
holds the inputs then the eager outputs, positionally.
"""

import numpy as np
import torch
from executorch import exir
from executorch.exir import to_edge
from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer
from torch._higher_order_ops.map import map as torch_map
from torch._higher_order_ops.scan import scan


class MapMulAdd(torch.nn.Module):
    def forward(self, x, y):
        return torch_map(lambda a, b: a * 2 + b, x, y)

class ScanCumSum(torch.nn.Module):
    def forward(self, xs):
        def combine_fn(carry, x):
            new_carry = carry + x
            return new_carry, new_carry.clone()
        return scan(combine_fn, torch.zeros_like(xs[0]), xs)

class RfftIrfft(torch.nn.Module):
    def forward(self, x):
        y = torch.fft.rfft(x, dim=-1, norm="ortho")
        return y, torch.fft.irfft(y, n=x.shape[-1], dim=-1, norm="ortho")

torch.manual_seed(0)
cases = {
    "et_map": (MapMulAdd(), (torch.randn(4, 3), torch.randn(3)), False),
    "et_scan": (ScanCumSum(), (torch.randn(5, 3),), False),
    "et_rfft": (RfftIrfft(), (torch.randn(3, 8),), True),
}
for name, (m, inputs, check) in cases.items():
    ep = torch.export.export(m, inputs, strict=True)
    cfg = exir.EdgeCompileConfig(_check_ir_validity=check)
    buf = to_edge(ep, compile_config=cfg).to_executorch().buffer
    open(f"{name}.pte", "wb").write(buf)
    outs = _load_for_executorch_from_buffer(buf).forward(inputs)
    eager = m(*inputs)
    eager = list(eager) if isinstance(eager, (tuple, list)) else [eager]
    for o, e in zip(outs, eager):
        assert torch.allclose(o, e, atol=1e-5), (name, o, e)
    np.savez(f"{name}.io.npz", *[t.numpy() for t in inputs], *[t.detach().numpy() for t in eager])
    print(name, len(buf), [o.dtype for o in outs])
