"""The Edge dialect against ExecuTorch 1.5.1: every operator's ``allowed_types`` equal
ExecuTorch's, and the documentation's passes (tests/support/doc_passes.py) run unchanged under
ExecuTorch (``edgetorch`` -> ``executorch`` in the imports) with the same Edge graph and the same
outputs as in edgetorch."""

import json
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import doc_passes  # noqa: E402  (tests/support)
from refenv import EXPORT_TIMEOUT_S, _run_tool, ref_available  # noqa: E402

from edgetorch.exir import to_edge  # noqa: E402
from edgetorch.exir.dialects._ops import ops as exir_ops  # noqa: E402
from edgetorch.exir.dialects.edge._ops import _table  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

pytestmark = [
    pytest.mark.compat,
    pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available"),
]

TOOL = pathlib.Path(__file__).resolve().with_name("ref_edge_ops.py")
# Ops edge.yaml does not list (any dtype allowed) and custom ones, besides all it lists.
EXTRA = ["aten::upsample_bilinear2d.vec", "aten::_native_batch_norm_legit_no_training",
         "aten::max_pool2d_with_indices", "dim_order_ops::_clone_dim_order"]


def _ours(name: str) -> dict[str, list[str]]:
    ns, rest = name.split("::")
    op, _, overload = rest.partition(".")
    schema = getattr(getattr(getattr(exir_ops.edge, ns), op), overload or "default")._schema
    entry = {}
    for i, a in enumerate(list(schema.arguments) + list(schema.returns)):
        if hasattr(a, "allowed_types"):
            key = a.name if i < len(schema.arguments) else f"__ret_{i - len(schema.arguments)}"
            entry[key] = sorted(str(d) for d in a.allowed_types)
    return entry


def test_allowed_types_equal_executorchs(tmp_path):
    names = sorted(_table()) + EXTRA
    out = tmp_path / "allowed.json"
    _run_tool(["allowed-types", str(out), *names], EXPORT_TIMEOUT_S, tool=TOOL)
    theirs = json.loads(out.read_text())
    mismatched = [n for n in names if _ours(n) != theirs[n]]
    assert not mismatched, f"{len(mismatched)} ops differ, e.g. {mismatched[:5]}"


def test_documentation_passes_run_unchanged_in_executorch(tmp_path):
    source = pathlib.Path(doc_passes.__file__).read_text().replace("edgetorch", "executorch")
    (tmp_path / "passes.py").write_text(source)
    out = tmp_path / "result.json"
    _run_tool(["passes", str(tmp_path / "passes.py"), str(out)], EXPORT_TIMEOUT_S, tool=TOOL)
    theirs = json.loads(out.read_text())
    for name, (model, inputs, make_passes) in doc_passes.CASES.items():
        edge = to_edge(torch.export.export(model, inputs)).transform(make_passes())
        gm = edge.exported_program().graph_module
        targets = [n.target.__name__ for n in gm.graph.nodes if n.op == "call_function"]
        assert targets == theirs[name]["targets"], name
        method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
        ours = method.execute(list(inputs))
        for got, want in zip(ours, theirs[name]["outputs"]):
            np.testing.assert_allclose(got.numpy(), np.asarray(want), rtol=1e-5, atol=1e-5,
                                       err_msg=name)
