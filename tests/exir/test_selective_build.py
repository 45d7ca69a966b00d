"""Selective build over every built-in example: the oplist is exactly the operators its .pte
calls, a runtime restricted to it runs the example equal to eager and refuses another example
naming the operators it lacks; ExecuTorch's gen_oplist writes the same YAML (compat)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from refenv import ref_available, ref_gen_oplist  # noqa: E402

from edgetorch.cli import main as cli_main  # noqa: E402
from edgetorch.errors import OperatorMissingError  # noqa: E402
from edgetorch.examples import EXAMPLES, get_example  # noqa: E402
from edgetorch.exir import to_edge  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402
from edgetorch.runtime import _mini_yaml as mini_yaml  # noqa: E402
from edgetorch.schema.pte import PteFile  # noqa: E402

NAMES = sorted(EXAMPLES)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("oplist")
    cache = {}

    def get(name):
        if name not in cache:
            model, inputs = get_example(name).build()
            et = to_edge(torch.export.export(model, inputs)).to_executorch()
            pte = root / f"{name}.pte"
            pte.write_bytes(et.buffer)
            sel = root / f"{name}.yaml"
            assert cli_main(["oplist", str(pte), "-o", str(sel)]) == 0
            cache[name] = (model, inputs, pte, sel)
        return cache[name]

    return get


def _called_operators(pte) -> set[str]:
    """Operators the instructions call, read independently of the oplist code."""
    program = PteFile.parse(memoryview(pte.read_bytes())).program
    names = set()
    for plan in program.execution_plan:
        for ins in plan.chains[0].instructions:
            if hasattr(ins.instr_args, "op_index"):
                names.add(plan.operators[ins.instr_args.op_index].qualified_name)
    return names


@pytest.mark.parametrize("name", NAMES)
def test_oplist_is_the_operators_of_the_program(name, exported):
    _, _, pte, sel = exported(name)
    oplist = mini_yaml.load(sel.read_text())
    assert set(oplist["operators"]) == _called_operators(pte)
    assert set(oplist["et_kernel_metadata"]) == _called_operators(pte)
    for keys in oplist["et_kernel_metadata"].values():
        assert keys == sorted(keys) and all(k.startswith("v1") for k in keys)


@pytest.mark.parametrize("name", NAMES)
def test_restricted_runtime_runs_the_example_and_refuses_another(name, exported):
    model, inputs, pte, sel = exported(name)
    method = Runtime.get().load_program(pte, selected_ops=sel).load_method("forward")
    outputs = method.execute(list(inputs))
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, want in zip(outputs, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # the example whose operators this one lacks most
    other = max((n for n in NAMES if n != name),
                key=lambda n: len(_called_operators(exported(n)[2]) - _called_operators(pte)))
    lacking = sorted(_called_operators(exported(other)[2]) - _called_operators(pte))
    assert lacking, f"{other} needs nothing {name} lacks"
    program = Runtime.get().load_program(exported(other)[2], selected_ops=sel)
    with pytest.raises(OperatorMissingError) as err:
        program.load_method("forward")
    for op in lacking:
        assert op in str(err.value)


@pytest.mark.compat
@pytest.mark.skipif(not ref_available(), reason="reference ExecuTorch env not available")
@pytest.mark.parametrize("name", NAMES)
def test_executorch_writes_the_same_oplist(name, exported, tmp_path):
    _, _, pte, sel = exported(name)
    assert ref_gen_oplist(pte, tmp_path / "et.yaml") == sel.read_text()
