"""Programs crafted to hang, loop through their own values or smuggle wrong results are
refused as ExecuTorch 1.5.1 refuses them (issue 28, items 3 and 6). Torch-free.

Each case edits ExecuTorch's own tiny classifier (a checked-in file) at the schema level and
re-serializes it, so the rest of the file stays valid and only the one defect is tested.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from edgetorch.errors import ErrorCode, FormatError, InvalidProgramError, KernelError
from edgetorch.runtime import Runtime
from edgetorch.schema import program as s
from edgetorch.schema.pte import PteFile, serialize_pte
from edgetorch.schema.scalar_type import ScalarType

ET_TINY = Path(__file__).parents[1] / "fixtures" / "et_tiny_classifier.pte"


def _edit(change) -> bytes:
    pte = PteFile.parse(ET_TINY.read_bytes())
    args = pte.to_serialize_args()
    program = args.pop("program")
    change(program, program.execution_plan[0])
    return serialize_pte(program, **args)


def _input() -> np.ndarray:
    return np.load(ET_TINY.with_suffix(".io.npz"))["input_0"]


def _add_value(plan: s.ExecutionPlan, val) -> int:
    plan.values.append(s.EValue(val))
    return len(plan.values) - 1


def _jump_to_itself(program, plan) -> None:
    false = _add_value(plan, s.Bool(False))
    plan.chains[0].instructions.insert(0, s.Instruction(s.JumpFalseCall(false, 0)))


def test_a_jump_that_loops_forever_stops_at_the_instruction_budget():
    method = Runtime.get().load_program(_edit(_jump_to_itself)).load_method(
        "forward", max_instructions=10_000)
    with pytest.raises(InvalidProgramError, match="10000 instructions") as e:
        method.execute([_input()])
    assert e.value.code == ErrorCode.InvalidProgram


def test_the_default_budget_is_executorchs():
    method = Runtime.get().load_program(_edit(_jump_to_itself)).load_method("forward")
    assert method.max_instructions == 10_000_000


def test_a_traced_run_has_the_same_budget():
    program = Runtime.get().load_program(_edit(_jump_to_itself), enable_etdump=True)
    method = program.load_method("forward", max_instructions=1_000)
    with pytest.raises(InvalidProgramError, match="1000 instructions"):
        method.execute([_input()])


def test_a_bounded_loop_under_the_budget_runs():
    def jump_once(program, plan):
        true = _add_value(plan, s.Bool(True))
        plan.chains[0].instructions.insert(0, s.Instruction(s.JumpFalseCall(true, 0)))

    method = Runtime.get().load_program(_edit(jump_once)).load_method("forward")
    method.execute([_input()])


@pytest.mark.parametrize("kind", ["self", "cycle", "intlist"])
def test_lists_holding_lists_are_refused_at_load(kind):
    def change(program, plan):
        n = len(plan.values)
        if kind == "self":
            plan.values.append(s.EValue(s.TensorList([n])))
        elif kind == "cycle":
            plan.values.append(s.EValue(s.TensorList([n + 1])))
            plan.values.append(s.EValue(s.TensorList([n])))
        else:
            plan.values.append(s.EValue(s.IntList([n])))

    program = Runtime.get().load_program(_edit(change))
    with pytest.raises(InvalidProgramError, match="List item"):
        program.load_method("forward")


def test_a_free_of_a_value_that_does_not_exist_is_refused():
    def change(program, plan):
        plan.chains[0].instructions.append(s.Instruction(s.FreeCall(10**6)))

    with pytest.raises(InvalidProgramError, match="1000000"):
        Runtime.get().load_program(_edit(change)).load_method("forward")


def test_a_non_zero_storage_offset_is_refused():
    def change(program, plan):
        t = next(v.val for v in plan.values if isinstance(v.val, s.Tensor))
        t.storage_offset = 2**31 - 1

    with pytest.raises(InvalidProgramError, match="storage offset") as e:
        Runtime.get().load_program(_edit(change)).load_method("forward")
    assert e.value.code == ErrorCode.NotSupported


def test_an_unknown_program_version_is_refused():
    def change(program, plan):
        program.version = 999

    with pytest.raises(FormatError, match="version 999"):
        Runtime.get().load_program(_edit(change))


def test_an_output_declared_bool_does_not_receive_float_results():
    def change(program, plan):
        out = plan.values[int(plan.outputs[0])].val
        out.scalar_type = ScalarType.BOOL

    method = Runtime.get().load_program(_edit(change)).load_method("forward")
    with pytest.raises(KernelError, match="bool"):
        method.execute([_input()])
