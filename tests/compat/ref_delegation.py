"""ExecuTorch side of the delegation compat test. Runs INSIDE the reference venv.

    python ref_delegation.py export OUT.pte OUT.json

lowers ``AddMmModel`` with ExecuTorch's own ``AddMulPartitionerDemo`` (add + mm to
``BackendWithCompilerDemo``), writes the ``.pte`` and a JSON summary of how the delegates were
emitted (instructions, DelegateCall args, delegate entries, which values are planned).
The model is importable without ExecuTorch, so the edgetorch test lowers the same one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch


class AddMmModel(torch.nn.Module):
    """mm + add, then a sub the partitioner leaves out, then mm + add again."""

    def forward(self, a, x, b):
        y = torch.mm(a, x)
        z = y + b
        a = z - a
        y = torch.mm(a, x)
        return y + b


def example_inputs() -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 2, generator=g) for _ in range(3))


def summarize(program) -> dict:
    """What the delegation test compares, from a program.fbs-shaped object (theirs or ours)."""
    plan = next(p for p in program.execution_plan if p.name == "forward")
    instrs = []
    for ins in plan.chains[0].instructions:
        a = ins.instr_args
        kind = type(a).__name__
        entry = {"kind": kind}
        if kind == "DelegateCall":
            entry["delegate_index"] = a.delegate_index
            entry["args"] = [_value(plan, i) for i in a.args]
        instrs.append(entry)
    return {
        "inputs": [int(i) for i in plan.inputs],
        "outputs": [int(i) for i in plan.outputs],
        "instructions": instrs,
        "delegates": [
            {"id": d.id, "location": int(d.processed.location), "index": d.processed.index,
             "compile_specs": [[c.key, bytes(c.value).hex()] for c in d.compile_specs]}
            for d in plan.delegates
        ],
    }


def _value(plan, i: int) -> dict:
    v = plan.values[i].val
    out = {"index": int(i), "kind": type(v).__name__}
    if hasattr(v, "sizes"):
        out["sizes"] = list(v.sizes)
        out["planned"] = v.allocation_info is not None
        out["input"] = int(i) in [int(x) for x in plan.inputs]
        out["output"] = int(i) in [int(x) for x in plan.outputs]
    return out


def main() -> int:
    from executorch.exir import to_edge
    from executorch.exir.backend.test.op_partitioner_demo import AddMulPartitionerDemo

    pte, summary = Path(sys.argv[2]), Path(sys.argv[3])
    ep = torch.export.export(AddMmModel(), example_inputs(), strict=True)
    et = to_edge(ep).to_backend(AddMulPartitionerDemo()).to_executorch()
    pte.write_bytes(et.buffer)
    summary.write_text(json.dumps(summarize(et.executorch_program), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
