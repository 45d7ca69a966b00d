"""edgetorch's progress bars (util/progress.py): drawn on a terminal only, forced on or off with
EDGETORCH_PROGRESS, and an export draws its stages."""

import io

import pytest

from edgetorch.util import progress


class _Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("env,tty,shown", [("", False, False), ("", True, True),
                                           ("1", False, True), ("0", True, False),
                                           ("off", True, False), ("yes", False, True)])
def test_bars_show_on_a_terminal_or_when_forced(monkeypatch, env, tty, shown):
    pytest.importorskip("tqdm")
    monkeypatch.setenv(progress.ENV, env)
    stream = _Tty() if tty else io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    assert progress.enabled() is shown
    assert list(progress.bar(range(3), desc="counting")) == [0, 1, 2]
    with progress.steps("job", ["one", "two"]) as s:
        s.next()
        s.next()
    assert ("counting" in stream.getvalue() and "job: two" in stream.getvalue()) is shown


def test_without_a_bar_the_loop_is_untouched(monkeypatch):
    monkeypatch.setenv(progress.ENV, "0")
    items = [1, 2]
    assert progress.bar(items, desc="x") is items
    progress.bar(desc="x", total=2).update()  # a counter without an iterable: a no-op


def test_cli_export_draws_its_stages_only_when_asked(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    from edgetorch.cli import main

    monkeypatch.setenv(progress.ENV, "1")
    assert main(["export", "mlp", "--delegate", "xnnpack", "-o", str(tmp_path / "a.pte")]) == 0
    err = capsys.readouterr().err
    for stage in ("export mlp: exporting", "lowering to xnnpack", "planning memory and emitting",
                  "writing", "lowering (XnnpackPartitioner)"):
        assert stage in err, stage
    monkeypatch.delenv(progress.ENV)  # captured stderr is not a terminal: nothing drawn
    assert main(["export", "mlp", "-o", str(tmp_path / "b.pte")]) == 0
    assert capsys.readouterr().err == ""


def test_aot_arm_compiler_draws_its_stages_and_prints_above_them(tmp_path, capsys,
                                                                  monkeypatch):
    pytest.importorskip("torchao")
    from edgetorch.backends.arm.scripts import aot_arm_compiler

    monkeypatch.setenv(progress.ENV, "1")
    result = aot_arm_compiler.main(["--model_name=add", "--quantize", "--output", str(tmp_path)])
    captured = capsys.readouterr()
    assert "PTE file saved as" in captured.out and result.output.endswith(".pte")
    for stage in ("aot_arm_compiler: loading the model", "aot_arm_compiler: exporting",
                  "aot_arm_compiler: quantizing", "calibrating", "aot_arm_compiler: lowering",
                  "aot_arm_compiler: emitting", "aot_arm_compiler: writing"):
        assert stage in captured.err, stage
    assert "triton" not in captured.err.lower()
