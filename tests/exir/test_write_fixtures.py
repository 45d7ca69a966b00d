"""Write example programs, inputs and eager outputs for the torch-free runtime job.

Runs only when ``$EDGETORCH_FIXTURES`` is set (``make test`` sets it); the torch-free job then
checks the runtime against these eager outputs without torch installed.
"""

import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from edgetorch.examples import get_example  # noqa: E402
from edgetorch.exir import to_edge  # noqa: E402

NAMES = ["tiny_classifier", "simple_model", "mlp", "cnn", "transformer_encoder", "mobilenet_v2"]


@pytest.mark.skipif(not os.environ.get("EDGETORCH_FIXTURES"), reason="EDGETORCH_FIXTURES not set")
@pytest.mark.parametrize("name", NAMES)
def test_write_fixture(name):
    root = Path(os.environ["EDGETORCH_FIXTURES"])
    root.mkdir(parents=True, exist_ok=True)
    ex = get_example(name)
    model, inputs = ex.factory(), ex.example_inputs()
    et = to_edge(torch.export.export(model, inputs)).to_executorch()
    (root / f"{name}.pte").write_bytes(et.buffer)
    with torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    arrays = {f"input_{i}": x.numpy() for i, x in enumerate(inputs)}
    arrays.update({f"output_{i}": o.numpy() for i, o in enumerate(outs)})
    np.savez(root / f"{name}.npz", **arrays)
