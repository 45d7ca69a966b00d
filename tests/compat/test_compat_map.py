"""Control flow (``torch.map``, ``torch.cond``) against ExecuTorch 1.5.1: given ExecuTorch's
values for the options whose defaults differ (``fold_constants=False``, ``fuse_batch_norm=False``,
``emit_mutable_buffer_names=False``), our ``.pte`` is ExecuTorch's byte for byte -- the loop,
the body's plan, the ``requires_grad`` flags of a body computed from a parameter. Both
runtimes running each other's files = eager is in test_compat_features.py (``map_loop``,
``control_flow``)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from feature_models import FEATURES  # noqa: E402
from refenv import ref_available, ref_feature_export, ref_run  # noqa: E402

from edgetorch.exir import ExecutorchBackendConfig, to_edge  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]


@pytest.mark.parametrize("name", ["map_loop", "control_flow"])
def test_control_flow_pte_bytes_equal_executorch(name, tmp_path):
    feature = FEATURES[name]()
    assert not feature.config  # ExecuTorch's side exports with its defaults
    config = ExecutorchBackendConfig(fold_constants=False, fuse_batch_norm=False,
                                     emit_mutable_buffer_names=False)
    ours = to_edge(feature.programs).to_executorch(config).buffer
    assert ours == ref_feature_export(name, tmp_path).read_bytes()


def test_dynamic_map_runs_in_executorch(tmp_path):
    """A map over a dynamic dim, planned at the Dim's bound: ExecuTorch's runtime runs it at
    every size up to the bound (ExecuTorch's own export plans it at the example's size)."""
    from torch._higher_order_ops.map import map as torch_map

    class MapScale(torch.nn.Module):
        def forward(self, x, y):
            return torch_map(lambda a, b: torch.tanh(a * b.sum()) + a, x, y)

    model = MapScale()
    ep = torch.export.export(model, (torch.randn(6, 3), torch.randn(2)),
                             dynamic_shapes=({0: torch.export.Dim("n", max=8)}, None))
    pte = tmp_path / "map_dynamic.pte"
    pte.write_bytes(to_edge(ep).to_executorch().buffer)
    for n in (8, 3):
        x, y = torch.randn(n, 3), torch.randn(2)
        got = ref_run(pte, [x.numpy(), y.numpy()])
        np.testing.assert_allclose(got[0], model(x, y).numpy(), atol=1e-5, rtol=0)
