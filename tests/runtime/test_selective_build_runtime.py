"""Selective build without torch: ExecuTorch's selected_operators.yaml for ExecuTorch-written
programs, and a runtime restricted to a selection (option and environment variable)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from edgetorch.cli import main as cli_main
from edgetorch.errors import InvalidArgumentError, OperatorMissingError
from edgetorch.runtime import Runtime
from edgetorch.runtime import _mini_yaml as mini_yaml
from edgetorch.runtime.selective_build import ENV_VAR, SelectedOperators, gen_oplist
from edgetorch.schema.pte import PteFile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TINY = FIXTURES / "et_tiny_classifier.pte"
MAP = FIXTURES / "et_map.pte"

# What ExecuTorch 1.5.1's codegen/tools/gen_oplist.py writes for et_tiny_classifier.pte
# (debug_info is the path it was given).
ET_TINY_YAML = """build_features: []
custom_classes: []
et_kernel_metadata:
  aten::addmm.out:
  - v1/6;0|6;0,1|6;0,1|6;0,1|6;0,1
  aten::permute_copy.out:
  - v1/6;0,1|6;0,1|6;0,1
  aten::relu.out:
  - v1/6;0,1|6;0,1|6;0,1
include_all_non_op_selectives: false
include_all_operators: false
kernel_metadata: {}
operators:
  aten::addmm.out:
    debug_info:
    - et_tiny_classifier.pte
    include_all_overloads: false
    is_root_operator: true
    is_used_for_training: true
  aten::permute_copy.out:
    debug_info:
    - et_tiny_classifier.pte
    include_all_overloads: false
    is_root_operator: true
    is_used_for_training: true
  aten::relu.out:
    debug_info:
    - et_tiny_classifier.pte
    include_all_overloads: false
    is_root_operator: true
    is_used_for_training: true
"""


def _program(path: Path):
    return PteFile.parse(memoryview(path.read_bytes())).program


def test_oplist_is_executorchs_yaml_byte_for_byte(tmp_path, monkeypatch):
    monkeypatch.chdir(FIXTURES)
    out = tmp_path / "selected_operators.yaml"
    assert cli_main(["oplist", "et_tiny_classifier.pte", "-o", str(out)]) == 0
    assert out.read_text() == ET_TINY_YAML


def test_oplist_of_several_programs_is_the_union(tmp_path):
    oplist = gen_oplist([("tiny", _program(TINY)), ("map", _program(MAP))])
    assert set(oplist["operators"]) == {
        "aten::addmm.out", "aten::permute_copy.out", "aten::relu.out", "aten::sym_size.int",
        "aten::select_copy.int_out", "dim_order_ops::_to_dim_order_copy.out", "aten::mul.out",
        "aten::add.out", "executorch_prim::et_copy_index.tensor", "executorch_prim::add.Scalar",
        "executorch_prim::eq.Scalar", "executorch_prim::sub.Scalar"}
    assert oplist["operators"]["aten::relu.out"]["debug_info"] == ["tiny"]
    # scalar-only prim ops have the bare "v1" key; et_copy_index's three arguments give two tensors
    assert oplist["et_kernel_metadata"]["executorch_prim::add.Scalar"] == ["v1"]
    assert oplist["et_kernel_metadata"]["executorch_prim::et_copy_index.tensor"] == ["v1/6;0,1|6;0"]
    assert cli_main(["oplist", str(TINY), str(MAP), "-o", str(tmp_path)]) == 0
    written = mini_yaml.load((tmp_path / "selected_operators.yaml").read_text())
    assert written == gen_oplist([(str(TINY), _program(TINY)), (str(MAP), _program(MAP))])


def test_restricted_runtime_runs_its_program_and_refuses_another(tmp_path):
    sel = tmp_path / "tiny.yaml"
    cli_main(["oplist", str(TINY), "-o", str(sel)])
    method = Runtime.get().load_program(TINY, selected_ops=sel).load_method("forward")
    with np.load(FIXTURES / "et_tiny_classifier.io.npz") as io:
        got = method.execute([io["input_0"]])[0]
        np.testing.assert_allclose(got, io["output_0"], atol=1e-5, rtol=1e-5)
    program = Runtime.get().load_program(MAP, selected_ops=sel)  # loading the file is fine
    with pytest.raises(OperatorMissingError) as err:
        program.load_method("forward")
    for name in ("aten::mul.out", "aten::add.out", "executorch_prim::et_copy_index.tensor",
                 "aten::sym_size.int", "executorch_prim::sub.Scalar"):
        assert name in str(err.value)
    assert "aten::relu.out" not in str(err.value)


def test_dtype_selective_build_names_the_missing_dtype():
    oplist = gen_oplist([("tiny", _program(TINY))])
    oplist["et_kernel_metadata"]["aten::relu.out"] = ["v1/7;0,1|7;0,1|7;0,1"]  # double only
    program = Runtime.get().load_program(TINY, selected_ops=oplist)
    with pytest.raises(OperatorMissingError, match=r"aten::relu.out \(float\)") as err:
        program.load_method("forward")
    assert "addmm" not in str(err.value)
    oplist["et_kernel_metadata"]["aten::relu.out"] = ["default"]  # any dtype again
    Runtime.get().load_program(TINY, selected_ops=oplist).load_method("forward")


def test_operator_names_and_overloads():
    names = ["aten::addmm.out", "aten::permute_copy.out", "aten::relu.out"]
    Runtime.get().load_program(TINY, selected_ops=names).load_method("forward")
    with pytest.raises(OperatorMissingError, match="aten::relu.out"):
        Runtime.get().load_program(TINY, selected_ops=names[:2]).load_method("forward")
    sel = SelectedOperators.from_dict(
        {"operators": {"aten::relu": {"include_all_overloads": True},
                       "aten::addmm.out": {}, "aten::permute_copy.out": {}}})
    Runtime.get().load_program(TINY, selected_ops=sel).load_method("forward")


def test_environment_variable_restricts_every_program(tmp_path):
    sel = tmp_path / "map.yaml"
    cli_main(["oplist", str(MAP), "-o", str(sel)])
    code = ("import sys; from edgetorch.runtime import Runtime; from edgetorch.errors import "
            "OperatorMissingError\n"
            f"Runtime.get().load_program({str(MAP)!r}).load_method('forward')\n"
            f"Runtime.get().load_program({str(TINY)!r}, selected_ops=False).load_method('forward')\n"
            "try:\n"
            f"    Runtime.get().load_program({str(TINY)!r}).load_method('forward')\n"
            "except OperatorMissingError as e:\n"
            "    print(e); sys.exit(0)\n"
            "sys.exit(1)\n")
    env = {**os.environ, ENV_VAR: str(sel)}
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "aten::addmm.out" in res.stdout and ENV_VAR in res.stdout


def test_unreadable_selection_is_a_clear_error(tmp_path):
    with pytest.raises(InvalidArgumentError, match="edgetorch oplist"):
        Runtime.get().load_program(TINY, selected_ops=tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("operators:\n  aten::add.out: {a: 1}\n")
    with pytest.raises(InvalidArgumentError, match="bad.yaml:2"):
        Runtime.get().load_program(TINY, selected_ops=bad)


def test_mini_yaml_reads_hand_written_selections():
    text = ("# comment\ninclude_all_operators: No\noperators:\n  aten::add.out:\n"
            "    is_root_operator: Yes  # note\n    debug_info: [a, b]\n  'aten::mul.out': {}\n"
            "et_kernel_metadata:\n  aten::add.out:\n    - v1/6;0,1|6;0,1\n")
    assert mini_yaml.load(text) == {
        "include_all_operators": False,
        "operators": {"aten::add.out": {"is_root_operator": True, "debug_info": ["a", "b"]},
                      "aten::mul.out": {}},
        "et_kernel_metadata": {"aten::add.out": ["v1/6;0,1|6;0,1"]}}
