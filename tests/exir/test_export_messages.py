"""What edgetorch's own export prints: the result line and nothing from torch/torchao's internals
(exir/foreign_warnings.py), and a data-dependent branch as a short typed error pointing to
torch.cond with the user's line (exir/torch_export.py)."""

import logging
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")

from edgetorch.errors import DataDependentControlFlowError  # noqa: E402
from edgetorch.exir import foreign_warnings  # noqa: E402
from edgetorch.exir.torch_export import export_program  # noqa: E402

BRANCHY = '''\
import torch


class Branchy(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def make():
    return Branchy(), (torch.randn(3),)
'''


def _cli(*argv, cwd):
    return subprocess.run([sys.executable, "-m", "edgetorch.cli", *argv], capture_output=True,
                          text=True, timeout=600, cwd=cwd)


def test_xnnpack_export_prints_its_result_line_and_nothing_else(tmp_path):
    """In a fresh process: torchao's import (CUDA libraries it cannot load on CPU, a deprecated
    pytree call) and torch's decompositions (a FutureWarning of its own) used to add 9 lines."""
    proc = _cli("export", "tiny_classifier", "--delegate", "xnnpack", "-o",
                str(tmp_path / "t.pte"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert len(proc.stdout.splitlines()) == 1 and proc.stdout.startswith("wrote ")


def test_data_dependent_branch_is_a_short_error_naming_the_line(tmp_path):
    (tmp_path / "branchy.py").write_text(BRANCHY)
    proc = _cli("export", "branchy.py:make", "-o", str(tmp_path / "b.pte"), cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    err = proc.stderr.splitlines()
    assert len(err) <= 6, proc.stderr  # was 201 lines
    assert err[0].startswith("edgetorch: error: torch.export cannot follow a branch on a "
                             "tensor's values")
    assert "branchy.py, line 6:" in proc.stderr and "if x.sum() > 0:" in proc.stderr
    assert "torch.cond(pred, true_fn, false_fn" in proc.stderr
    assert "Traceback" not in proc.stderr and "def forward" not in proc.stderr


@pytest.mark.parametrize("strict", [False, True])
def test_export_program_raises_the_typed_error(tmp_path, capsys, strict):
    sys.path.insert(0, str(tmp_path))
    try:
        (tmp_path / "branchy_mod.py").write_text(BRANCHY)
        import branchy_mod

        with pytest.raises(DataDependentControlFlowError, match="torch.cond") as e:
            export_program(*branchy_mod.make(), strict=strict)
    finally:
        sys.path.remove(str(tmp_path))
    assert "branchy_mod.py, line 6:" in str(e.value)
    assert "def forward" not in capsys.readouterr().err  # torch's partial graph held back


def test_export_program_passes_other_errors_and_output_through(capsys):
    class Bad(torch.nn.Module):
        def forward(self, x):
            return x @ torch.ones(5, 2)

    with pytest.raises(Exception) as e:
        export_program(Bad(), (torch.randn(3, 4),))
    assert not isinstance(e.value, DataDependentControlFlowError)
    ep = export_program(torch.nn.ReLU(), (torch.randn(3),))
    assert "relu" in str(ep.graph)


def test_only_the_listed_messages_are_dropped(caplog):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with foreign_warnings.filtered():
            warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated, use ...",
                          FutureWarning, stacklevel=1)
            warnings.warn("my model's own warning", FutureWarning, stacklevel=1)
            warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated", UserWarning,
                          stacklevel=1)
    assert [str(w.message) for w in seen] == [
        "my model's own warning", "`isinstance(treespec, LeafSpec)` is deprecated"]
    log = logging.getLogger("torchao")
    with caplog.at_level(logging.WARNING, logger="torchao"):
        with foreign_warnings.filtered():
            log.warning("Failed to load /x/site-packages/torchao/_C_mxfp8.cpython-310-x86_64"
                        "-linux-gnu.so: Could not load this library")
            log.warning("Failed to load my_weights.bin")
        log.warning("Failed to load /x/site-packages/torchao/_C_cutlass_90a.abi3.so: ...")
    assert [r.getMessage()[:24] for r in caplog.records] == [
        "Failed to load my_weight", "Failed to load /x/site-p"]  # the last: outside filtered()
