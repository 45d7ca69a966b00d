"""What the example scripts write runs in ExecuTorch 1.5.1's runtime equal to eager: the
portable export (with ExecuTorch's iOS segment alignment) and the XNNPACK aot_compiler."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from refenv import ref_available, ref_run  # noqa: E402

from edgetorch.examples.models import create_model  # noqa: E402
from edgetorch.examples.portable.scripts import export as portable_export  # noqa: E402
from edgetorch.examples.xnnpack import aot_compiler  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]


@pytest.mark.parametrize("script, name", [
    ("portable", "add_mul"), ("portable", "conv1d"), ("xnnpack", "linear"), ("xnnpack", "cnn"),
])
def test_script_output_runs_in_executorch(script, name, tmp_path):
    if script == "portable":
        pte = portable_export.main([f"--model_name={name}", "-a", "0x4000", "-o", str(tmp_path)])
    else:
        pte = aot_compiler.main([f"--model_name={name}", "--delegate", "-o", str(tmp_path)])
    model, inputs, _, _ = create_model(name)
    got = ref_run(pte, [t.numpy() for t in inputs])
    with torch.no_grad():
        want = model(*inputs)
    np.testing.assert_allclose(got[0], want.numpy(), rtol=1e-5, atol=1e-5)
