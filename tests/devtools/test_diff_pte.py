"""diff_pte: the report on two real ``.pte`` files (edgetorch's exports) is ExecuTorch 1.5.1's
report, text for text; and the result fields on a weight change are the element arithmetic."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import ref_process
import torch

from edgetorch.devtools.pte_tool.diff_pte import diff_pte, format_diff_result
from edgetorch.exir import to_edge

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))


class _Lin(torch.nn.Module):
    def __init__(self, act: bool) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)
        self.act = act

    def forward(self, x):
        y = self.lin(x)
        return torch.relu(y) if self.act else torch.sigmoid(y)


def _pte(model: torch.nn.Module) -> bytes:
    ep = torch.export.export(model.eval(), (torch.randn(1, 3),))
    return to_edge(ep).to_executorch().buffer


@pytest.fixture(scope="module")
def ptes(tmp_path_factory):
    torch.manual_seed(0)
    base = _Lin(True)
    changed = _Lin(True)
    changed.load_state_dict(base.state_dict())
    with torch.no_grad():
        changed.lin.weight[1, 2] += 0.5
        changed.lin.weight[0, 0] -= 0.25
    other_op = _Lin(False)
    other_op.load_state_dict(base.state_dict())
    folder = tmp_path_factory.mktemp("ptes")
    paths = {}
    for name, model in (("base", base), ("changed", changed), ("other_op", other_op)):
        paths[name] = folder / f"{name}.pte"
        paths[name].write_bytes(_pte(model))
    return paths, base, changed


def test_weight_change_is_measured(ptes):
    paths, base, changed = ptes
    result = diff_pte(paths["base"].read_bytes(), paths["changed"].read_bytes())
    assert not result.bitwise_equal and result.error is None
    (plan,) = result.plan_diffs
    (td,) = plan.tensor_diffs
    a = base.lin.weight.detach().flatten()
    b = changed.lin.weight.detach().flatten()
    gaps = (a - b).abs()
    assert td.num_elements == 6 and td.num_differing == 2
    assert td.max_abs_diff == pytest.approx(gaps.max().item())
    assert td.mean_abs_diff == pytest.approx(gaps[gaps > 0].mean().item())
    # the stored weight may be laid out transposed (a folded permute): index into its sizes
    assert [e.flat_index for e in td.element_diffs] == [0, 5]
    rows, cols = td.tensor_a.sizes
    assert td.element_diffs[1].multi_index == divmod(5, cols) and rows * cols == 6
    assert td.tensor_a.operator_usages  # the weight feeds a kernel


def test_equal_and_unreadable():
    assert diff_pte(b"abc", b"abc").bitwise_equal
    result = diff_pte(b"not a pte", b"also not")
    assert result.error and result.error.startswith("Deserialization failed")
    assert "NOT bitwise equal" in format_diff_result(result)


_REF = '''
import sys
from executorch.devtools.pte_tool.diff_pte import diff_pte, format_diff_result
a, b = (open(p, "rb").read() for p in sys.argv[1:3])
print(format_diff_result(diff_pte(a, b, "a.pte", "b.pte"), verbose=True))
'''


@pytest.mark.parametrize("pair", [("base", "changed"), ("base", "other_op")])
def test_report_matches_executorch(ptes, pair):
    from refenv import _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference environment missing")
    paths, _, _ = ptes
    a, b = (paths[p] for p in pair)
    theirs = ref_process.run([str(ref_python()), "-c", _REF, str(a), str(b)], env=_clean_env(),
                             check=True, capture_output=True, text=True, timeout=600).stdout
    ours = format_diff_result(diff_pte(a.read_bytes(), b.read_bytes(), "a.pte", "b.pte"),
                              verbose=True)
    assert ours == theirs.rstrip("\n")
