"""The Inspector's table (print_data_tabular, ``edgetorch inspector``) fits the terminal: cells of
lists (one start time per run, op types, stack traces) are cut, columns continue below."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from edgetorch.devtools import Inspector
from edgetorch.devtools.inspector._table import fit_table
from edgetorch.exir import to_edge
from edgetorch.runtime import Runtime


@pytest.fixture(scope="module")
def etdump(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("width")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 8, 8)
    et = to_edge(torch.export.export(model, (x,)), generate_etrecord=True).to_executorch()
    et.get_etrecord().save(tmp / "debug.etrecord")
    program = Runtime.get().load_program(et.buffer, enable_etdump=True)
    method = program.load_method("forward")
    for _ in range(300):  # 300 start times a row
        method.execute([x.numpy()])
    program.write_etdump_result_to_file(tmp / "run.etdp")
    return tmp / "run.etdp", tmp / "debug.etrecord"


@pytest.fixture(scope="module")
def inspector(etdump):
    return Inspector(etdump_path=str(etdump[0]), etrecord=str(etdump[1]))


@pytest.mark.parametrize("columns", [80, 120, 200])
def test_table_lines_fit_the_terminal(inspector, capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    inspector.print_data_tabular()
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= columns, max(lines, key=len)
    text = "\n".join(lines)
    for needle in ("native_call_convolution.out", "Method::execute", "p50 (ms)", "start_time",
                   "..."):  # every column is shown; the start times are cut
        assert needle in text, needle
    whole = inspector.to_dataframe()  # the values themselves stay whole
    assert max(len(t) for t in whole["start_time"]) == 300


def test_short_tables_are_left_alone():
    df = pd.DataFrame({"event_name": ["a", "b"], "avg (ms)": [1.5, float("nan")]})
    assert fit_table(df, 80) == "  event_name avg (ms)\n0          a      1.5\n1          b         "


def test_inspector_cli_fits_too(etdump, capsys, monkeypatch):
    from edgetorch.cli import main

    monkeypatch.setenv("COLUMNS", "100")
    assert main(["inspector", "--etdump_path", str(etdump[0]), "--etrecord_path",
                 str(etdump[1])]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 100 and "start_time" in out
