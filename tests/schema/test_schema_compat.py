"""Our files through the real ExecuTorch 1.5.1 (reference venv, in a subprocess).

Skipped unless the reference python exists (``EDGETORCH_REF_PYTHON`` or ``<repo>/.venv-ref``).
"""

from __future__ import annotations

import json
import textwrap

import pytest
import ref_process

from edgetorch.schema.ptd import PtdFile, serialize_ptd
from edgetorch.schema.pte import PteFile, serialize_pte
from edgetorch.schema.scalar_type import ScalarType

pytestmark = pytest.mark.compat


def _run(ref_python: str, script: str, *args: str) -> dict:
    proc = ref_process.run(
        [ref_python, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        pytest.fail(f"reference script failed:\n{proc.stderr[-4000:]}")
    # The last stdout line is the JSON result; libraries may print before it.
    return json.loads(proc.stdout.strip().splitlines()[-1])


_PTE_SCRIPT = """
import json, sys
from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
from executorch.exir.schema import Tensor
from executorch.runtime import Runtime, Verification

data = open(sys.argv[1], "rb").read()
options = json.loads(sys.argv[2])
pte = deserialize_pte_binary(data)
program = pte.program
summary = {
    "plans": [p.name for p in program.execution_plan],
    "values": [[type(v.val).__name__ for v in p.values] for p in program.execution_plan],
    "instructions": [[type(i.instr_args).__name__ for c in p.chains for i in c.instructions]
                     for p in program.execution_plan],
    "constants": [bytes(b.storage).hex() for b in program.constant_buffer],
    "mutable": [bytes(b.storage).hex() for b in (pte.mutable_data or [])],
    "delegates": [bytes(d.data).hex() for d in program.backend_delegate_data],
    "named": sorted(pte.named_data.pte_data) if pte.named_data else [],
}
# ExecuTorch's own writer, given what it read, must reproduce our bytes.
out = serialize_pte_binary(pte, **options)
summary["identical"] = bytes(out) == data
rt = Runtime.get().load_program(data, verification=Verification.InternalConsistency)
summary["methods"] = sorted(rt.method_names)
print(json.dumps(summary))
"""


@pytest.mark.parametrize(
    "options",
    [
        {
            "extract_delegate_segments": True,
            "segment_alignment": 128,
            "constant_tensor_alignment": 16,
            "delegate_alignment": None,
        },
        {
            "extract_delegate_segments": False,
            "segment_alignment": 1024,
            "constant_tensor_alignment": 32,
            "delegate_alignment": 64,
        },
    ],
)
def test_executorch_reads_and_rewrites_our_pte(ref_python, rich, tmp_path, options):
    program, kwargs = rich
    data = serialize_pte(program, **kwargs, **options)
    path = tmp_path / "rich.pte"
    path.write_bytes(data)
    got = _run(ref_python, _PTE_SCRIPT, str(path), json.dumps(options))

    ours = PteFile.parse(data)
    p = ours.program
    assert got["identical"], "ExecuTorch re-serialized our file to different bytes"
    assert got["methods"] == sorted(plan.name for plan in p.execution_plan)
    assert got["plans"] == [plan.name for plan in p.execution_plan]
    assert got["values"] == [
        [type(v.val).__name__ for v in plan.values] for plan in p.execution_plan
    ]
    assert got["instructions"] == [
        [type(i.instr_args).__name__ for c in plan.chains for i in c.instructions]
        for plan in p.execution_plan
    ]
    n = len(p.constant_segment.offsets)
    assert got["constants"] == [bytes(ours.constant_bytes(i)).hex() for i in range(n)]
    assert got["mutable"] == [
        bytes(ours.mutable_bytes(i)).hex() for i in range(len(p.mutable_data_segments[0].offsets))
    ]
    assert sorted(got["named"]) == sorted(kwargs["named_data"])
    restored = {
        bytes(ours.delegate_bytes(d)).hex() for plan in p.execution_plan for d in plan.delegates
    }
    assert set(got["delegates"]) == restored


_RUN_SCRIPT = """
import json, sys
import torch
from executorch.runtime import Runtime, Verification

torch.manual_seed(0)
x = torch.randn(1, 20)
outputs = []
for path in sys.argv[1:]:
    program = Runtime.get().load_program(open(path, "rb").read(),
                                         verification=Verification.InternalConsistency)
    outputs.append(program.load_method("forward").execute([x])[0].flatten().tolist())
print(json.dumps(outputs))
"""


def test_executorch_runs_our_file_with_other_alignments(ref_python, et_pte, tmp_path):
    args = PteFile.parse(et_pte).to_serialize_args()
    data = serialize_pte(**{**args, "constant_tensor_alignment": 64, "segment_alignment": 4096})
    assert data != et_pte
    pte = PteFile.parse(data)
    assert pte.segment_base % 4096 == 0 and data[8:12] == b"eh00"
    assert all(o % 64 == 0 for o in pte.program.constant_segment.offsets)
    (tmp_path / "ref.pte").write_bytes(et_pte)
    (tmp_path / "ours.pte").write_bytes(data)
    ref_out, our_out = _run(
        ref_python, _RUN_SCRIPT, str(tmp_path / "ref.pte"), str(tmp_path / "ours.pte")
    )
    assert len(ref_out) == 4 and our_out == ref_out


_PTD_SCRIPT = """
import json, sys
from executorch.extension.flat_tensor.serialize.serialize import (
    FlatTensorConfig, FlatTensorSerializer)
from executorch.exir._serialize.data_serializer import DataPayload, DataEntry
from executorch.exir.tensor_layout import TensorLayout
from executorch.exir.scalar_type import ScalarType

spec = json.load(open(sys.argv[1]))
buffers, named = [], {}
for key, (hexdata, st, sizes, dim_order, alignment) in spec["tensors"].items():
    data = bytes.fromhex(hexdata)
    if data not in buffers:
        buffers.append(data)
    layout = None if st is None else TensorLayout(ScalarType(st), sizes, dim_order)
    named[key] = DataEntry(buffers.index(data), alignment, layout)
config = FlatTensorConfig(segment_alignment=spec["segment_alignment"])
out = bytes(FlatTensorSerializer(config).serialize(DataPayload(buffers=buffers, named_data=named)))
back = FlatTensorSerializer().deserialize(open(sys.argv[2], "rb").read())
read = {k: [bytes(back.buffers[e.buffer_index]).hex(),
            None if e.tensor_layout is None else int(e.tensor_layout.scalar_type),
            None if e.tensor_layout is None else list(e.tensor_layout.sizes)]
        for k, e in back.named_data.items()}
print(json.dumps({"bytes": out.hex(), "read": read}))
"""


def test_ptd_matches_executorch(ref_python, tmp_path):
    tensors = {
        "enc.weight": (bytes(range(48)), ScalarType.FLOAT, [3, 4], [0, 1], 1),
        "enc.bias": (bytes(6), ScalarType.HALF, [3], [0], 32),
        "enc.idx": (bytes(range(16)), ScalarType.LONG, [2], [0], 1),
        "dup": (bytes(range(48)), ScalarType.INT, [12], [0], 256),
        "nchw": (bytes(range(24)), ScalarType.CHAR, [1, 2, 3, 4], [0, 2, 3, 1], 1),
        "raw": (b"\xff" * 33, None, None, None, 8),
    }
    data = serialize_ptd(tensors, segment_alignment=64)
    (tmp_path / "ours.ptd").write_bytes(data)
    spec = {
        "segment_alignment": 64,
        "tensors": {
            k: [v[0].hex(), None if v[1] is None else int(v[1]), v[2], v[3], v[4]]
            for k, v in tensors.items()
        },
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    got = _run(ref_python, _PTD_SCRIPT, str(tmp_path / "spec.json"), str(tmp_path / "ours.ptd"))
    assert bytes.fromhex(got["bytes"]) == data
    ptd = PtdFile.parse(data)
    for key, (hexdata, st, sizes) in got["read"].items():
        view, layout = ptd.get(key)
        assert bytes(view).hex() == hexdata
        assert (None if layout is None else [int(layout.scalar_type), layout.sizes]) == (
            None if st is None else [st, sizes]
        )
