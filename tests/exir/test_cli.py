"""The ``edgetorch`` command: export, run, inspect (run and inspect need no torch)."""

import re
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("torch")

from edgetorch.cli import main  # noqa: E402


def test_export_run_inspect(tmp_path, capsys):
    pte = tmp_path / "tiny.pte"
    assert main(["export", "tiny_classifier", "-o", str(pte)]) == 0
    assert "wrote" in capsys.readouterr().out and pte.stat().st_size > 0

    x = np.random.default_rng(0).standard_normal((1, 20)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(pte), "--inputs", str(tmp_path / "x.npy"), "--repeat", "2",
                 "--save", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "output 0: float32[1, 4]" in out and "latency" in out
    assert np.load(tmp_path / "out_0.npy").shape == (1, 4)

    assert main(["inspect", str(pte)]) == 0
    text = capsys.readouterr().out
    for needle in ("method forward", "input  0: float[1, 20]", "aten::addmm.out",
                   "instructions:", "planned arenas", "size breakdown"):
        assert needle in text, needle


def test_export_user_file(tmp_path, capsys):
    src = tmp_path / "mymodel.py"
    src.write_text(
        "import torch\n"
        "def make():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh()), (torch.randn(1, 3),)\n"
    )
    pte = tmp_path / "m.pte"
    assert main(["export", f"{src}:make", "-o", str(pte)]) == 0
    assert main(["run", str(pte), "--repeat", "1"]) == 0
    assert "output 0: float32[1, 2]" in capsys.readouterr().out


def test_errors_are_reported_not_raised(tmp_path, capsys):
    bad = tmp_path / "bad.pte"
    bad.write_bytes(b"not a program at all")
    assert main(["inspect", str(bad)]) == 2
    assert "edgetorch: error:" in capsys.readouterr().err


def test_console_script_entry_point():
    proc = subprocess.run([sys.executable, "-m", "edgetorch.cli", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "export" in proc.stdout


def test_save_pte_program(tmp_path):
    import torch

    from edgetorch.exir import to_edge
    from edgetorch.extension.export_util.utils import save_pte_program
    from edgetorch.runtime import Runtime

    et = to_edge(torch.export.export(torch.nn.ReLU(), (torch.randn(3),))).to_executorch()
    path = save_pte_program(et, "relu", str(tmp_path / "out"))
    assert path.endswith("relu.pte")
    out = Runtime.get().load_program(path).load_method("forward").execute([torch.tensor([-1.0, 0.0, 2.0])])
    assert out[0].tolist() == [0.0, 0.0, 2.0]


def test_run_reports_median_p90_and_writes_an_etdump(tmp_path, capsys):
    from edgetorch.devtools import Inspector

    pte, etdump = tmp_path / "tiny.pte", tmp_path / "run.etdp"
    assert main(["export", "tiny_classifier", "-o", str(pte)]) == 0
    capsys.readouterr()
    assert main(["run", str(pte), "--repeat", "4", "--etdump", str(etdump),
                 "--debug-buffer-size", "100000"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"latency: median [\d.]+ ms, p90 [\d.]+ ms, min [\d.]+ ms, mean [\d.]+ ms "
                     r"over 4 runs \(after 2 untimed runs\)", out), out
    debug = tmp_path / "run.etdp.debug_buffer.bin"
    assert f"wrote {etdump} (6 runs) and {debug}" in out
    assert etdump.stat().st_size > 0 and debug.stat().st_size > 0
    inspector = Inspector(etdump_path=str(etdump), debug_buffer_path=str(debug))
    (run,) = [b for b in inspector.event_blocks if b.name == "Execute"]
    calls = [e for e in run.events if e.name == "Method::execute"]
    assert calls and len(calls[0].perf_data.raw) == 6  # every execute, the untimed ones too
    assert any(e.debug_data for e in run.events)  # the operators' outputs


def test_debug_buffer_size_needs_an_etdump(tmp_path, capsys):
    pte = tmp_path / "tiny.pte"
    assert main(["export", "tiny_classifier", "-o", str(pte)]) == 0
    assert main(["run", str(pte), "--debug-buffer-size", "100"]) == 2
    assert "--debug-buffer-size needs --etdump PATH" in capsys.readouterr().err


def _help(capsys, *argv):
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def test_help_lists_every_command_in_plain_text(capsys):
    from edgetorch.cli import build_parser

    text = _help(capsys)
    commands = build_parser()._subparsers._group_actions[0].choices
    assert sorted(commands) == sorted(["arm", "demo", "export", "inspect", "inspector", "llm", "oplist", "quant",
                                       "run", "visualize"]), sorted(commands)
    for name in commands:  # each on its own line with its help, in one column
        assert re.search(rf"^    {name} +\S", text, re.M), (name, text)
        sub = _help(capsys, name)
        assert "`" not in sub, (name, sub)
    assert "`" not in text and "edgetorch COMMAND --help" in text
    assert "`" not in _help(capsys, "arm", "run") and "`" not in _help(capsys, "llm", "chat")


def test_version(capsys):
    import edgetorch

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"edgetorch {edgetorch.__version__} (") and "torch " in out
    assert out.count("\n") == 1


def test_demo_says_how_the_speed_up_was_measured(capsys):
    assert main(["demo", "tiny_classifier", "--rounds", "4"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"latency +[\d.]+ ms edgetorch runtime, [\d.]+ ms eager PyTorch: "
                     r"[\d.]+x (faster|slower) than eager", out), out
    assert re.search(r"measured +in this process, medians of 4 interleaved rounds \(one call of "
                     r"each per round, after one untimed call of each\) on the example inputs; "
                     r"(\d+ BLAS thread\(s\) under NumPy|NumPy's BLAS at its default thread "
                     r"count), torch \d+ thread\(s\)", out), out
