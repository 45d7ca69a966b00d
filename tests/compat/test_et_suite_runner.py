"""The ExecuTorch test-suite runner's pieces that need no ExecuTorch tree: the rename, what
counts as test code, the staged-tests finder, and crash recovery in a pytest batch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

from et_suite.execute import batch_name, run_batch  # noqa: E402
from et_suite.staging import is_test_code, rename_imports, write_boot  # noqa: E402


def test_rename_touches_imports_dotted_paths_and_mangled_names_only():
    src = ("from executorch.exir import to_edge\nimport executorch.runtime as rt\n"
           "mock.patch('executorch.exir.program._program.x')\n"
           "check('executorch_exir_dialects_edge__ops_aten_add_Tensor')\n"
           "torch.ops.executorch_prim.add\nlibexecutorch.so\npath = 'executorch/exir/x.py'\n")
    out = rename_imports(src)
    assert "from edgetorch.exir import to_edge" in out
    assert "import edgetorch.runtime as rt" in out
    assert "'edgetorch.exir.program._program.x'" in out
    assert "edgetorch_exir_dialects_edge__ops_aten_add_Tensor" in out
    for kept in ("executorch_prim", "libexecutorch", "'executorch/exir/x.py'"):
        assert kept in out


def test_only_test_code_is_staged():
    assert is_test_code(Path("exir/tests/models.py"))
    assert is_test_code(Path("backends/xnnpack/test/tester/tester.py"))
    assert is_test_code(Path("devtools/bundled_program/util/test_util.py"))
    assert is_test_code(Path("conftest.py"))
    assert not is_test_code(Path("exir/program/_program.py"))
    assert not is_test_code(Path("backends/xnnpack/partition/xnnpack_partitioner.py"))


def _stage(tmp_path: Path, files: dict[str, str]) -> tuple[Path, dict[str, str]]:
    tree = tmp_path / "tree"
    for rel, text in files.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    boot = write_boot(tmp_path, "edgetorch")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(boot), str(REPO / "src")]))
    return tree, env


def test_finder_adds_staged_test_packages_behind_the_installed_ones(tmp_path):
    tree, env = _stage(tmp_path, {
        "exir/tests/helper.py": "VALUE = 7\n",
        "backends/test/harness/__init__.py": "NAME = 'harness'\n",
        "exir/__init__.py": "raise RuntimeError('staged library code must never win')\n",
    })
    code = ("import edgetorch.exir, edgetorch.exir.tests.helper as h, "
            "edgetorch.backends.test.harness as t\n"
            "print(h.VALUE, t.NAME, edgetorch.exir.to_edge.__module__)")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tree, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["7", "harness", "edgetorch.exir.program._program"]


def test_a_crashing_test_is_recorded_and_the_batch_goes_on(tmp_path):
    tree, env = _stage(tmp_path, {"t/test_x.py": (
        "import os\n"
        "def test_a():\n    pass\n"
        "def test_crash():\n    os.abort()\n"
        "def test_b():\n    assert 1 == 2\n")})
    results = run_batch(sys.executable, tree, ["t/test_x.py"], env, stall=120,
                        test_timeout=None, log_dir=tmp_path / "logs", name="b")
    outcomes = {k.split("::")[1]: v["outcome"] for k, v in results["t/test_x.py"].tests.items()}
    assert outcomes == {"test_a": "passed", "test_crash": "crashed", "test_b": "failed"}
    assert json.dumps(results["t/test_x.py"].to_json())


def test_batch_logs_are_named_after_their_files():
    # two runs of one area on different files at once must not share a log
    one = batch_name("vulkan", ["backends/vulkan/test/test_vulkan_passes.py"])
    two = batch_name("vulkan", ["backends/vulkan/test/test_vulkan_delegate.py"])
    assert one != two and "/" not in one
    assert batch_name("exir", ["exir/tests/a.py", "exir/tests/b.py"]) == "exir-exir__tests__a+1"


def _section(areas: dict[str, str]) -> list[str]:
    from et_suite import report

    lines = ["", f"Source commit `abc`; `python scripts/run_executorch_tests.py --areas "
             f"{','.join(areas)}` (see the runner's docstring).", "",
             *report.summary_table([])]
    lines += [f"| {a} | 1 | 2 | 2 | 2 | 100 % |" for a in areas]
    for area, cell in areas.items():
        lines += ["", f"### {area}: `{area}/test`", "", "| test file | edgetorch | "
                  "ExecuTorch 1.5.1 | why |", "|---|---|---|---|", f"| `t.py` | {cell} | 2/2 | |"]
    return lines


def test_report_of_some_areas_keeps_the_others(tmp_path):
    from et_suite import report

    doc = tmp_path / "compat.md"
    doc.write_text("# title\n\n" + "\n".join([report.BEGIN, *_section(
        {"exir": "1/2", "xnnpack": "2/2"}), report.END]) + "\n\nafter\n")
    report.write_section(doc, _section({"vulkan": "3/3", "exir": "2/2"}),
                         ["exir", "xnnpack", "vulkan"])
    text = doc.read_text()
    assert text.startswith("# title") and text.endswith("after\n")
    body = text.split(report.BEGIN)[1].split(report.END)[0]
    assert "--areas exir,xnnpack,vulkan`" in body
    assert [ln.split("|")[1].strip() for ln in body.splitlines()
            if ln.startswith("| ") and ln.endswith("100 % |")] == ["exir", "xnnpack", "vulkan"]
    # exir's table is the new one, xnnpack's the old one, vulkan's added
    assert "| `t.py` | 2/2 |" in body.split("### exir")[1].split("###")[0]
    assert "| `t.py` | 3/3 |" in body.split("### vulkan")[1]
    assert "### xnnpack" in body and "1/2" not in body
