"""Every XNNPACK node type on small graphs: our NumPy backend against torch (the semantics
ExecuTorch lowers from) and, in the compat run, against the real XNNPACK in ExecuTorch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import ref_process
from refenv import _clean_env, ref_available, ref_python
from xnn_cases import CASES
from xnn_helpers import graph_program

from edgetorch.backends.xnnpack import XnnpackBackend
from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.runtime.nodes import NODE_RULES as RULES
from edgetorch.backends.xnnpack.serialization import serialize_xnnpack_binary

REF_SCRIPT = Path(__file__).with_name("xnn_ref.py")
IDS = [c.name for c in CASES]


class _Context:
    def __init__(self, named: dict[str, bytes]) -> None:
        self.named_data = named.__getitem__


def run_ours(b, inputs: list[np.ndarray]) -> list[np.ndarray]:
    backend = XnnpackBackend()
    handle = backend.init(serialize_xnnpack_binary(b.build()), {}, _Context(b.named))
    outs = [np.zeros(d, t) for d, t in zip(b.output_dims, b.output_dtypes)]
    values = list(inputs) + outs
    backend.execute(handle, values, list(range(len(values))))
    return outs


def test_every_supported_node_type_has_a_case():
    covered = set()
    for c in CASES:
        b, _, _ = c.build()
        covered |= {type(n.xnode_union) for n in b.nodes}
    untested = set(RULES) - covered - {x.XNNConvert}  # needs fp16 tensors: runtime tests
    assert not untested, sorted(t.__name__ for t in untested)


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_node_matches_torch(c):
    torch = pytest.importorskip("torch")
    b, inputs, meta = c.build()
    got = run_ours(b, inputs)
    with torch.no_grad():
        want = c.reference(torch, [torch.from_numpy(a) for a in inputs], meta)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w.numpy(), atol=c.atol, rtol=1e-5, err_msg=c.name)
        assert g.dtype == w.numpy().dtype, c.name


@pytest.fixture(scope="module")
def executorch_results(tmp_path_factory):
    """Every case run by ExecuTorch's runtime with its real XNNPACK, in one subprocess."""
    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    d = tmp_path_factory.mktemp("xnnpack-nodes")
    built = {}
    for c in CASES:
        b, inputs, _ = c.build()
        (d / f"{c.name}.pte").write_bytes(graph_program(b))
        np.savez(d / f"{c.name}.in.npz", *inputs)
        built[c.name] = (b, inputs)
    ref_process.run([str(ref_python()), str(REF_SCRIPT), "run", str(d)], env=_clean_env(),
                    check=True, capture_output=True, timeout=900)
    return d, built


@pytest.mark.compat
@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_node_matches_executorch_xnnpack(c, executorch_results):
    d, built = executorch_results
    err = d / f"{c.name}.err.txt"
    if err.exists():
        pytest.fail(f"ExecuTorch failed to run the {c.name} graph:\n{err.read_text()[-3000:]}")
    b, inputs = built[c.name]
    with np.load(d / f"{c.name}.out.npz") as f:
        want = [f[f"arr_{i}"] for i in range(len(f.files))]
    got = run_ours(b, inputs)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=max(c.atol, 1e-4), rtol=1e-4, err_msg=c.name)
