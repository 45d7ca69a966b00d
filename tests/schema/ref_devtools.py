"""ExecuTorch side of the ETDump / BundledProgram format tests. Runs INSIDE the reference venv.

    python ref_devtools.py PTE IO.npz OUTDIR OUR.etdp OUR.bpte

Writes, with ExecuTorch 1.5.1's own code: ``OUTDIR/et.etdp`` + ``et.debug`` (a run of PTE with
ETDump and a debug buffer, through the pybindings) and ``OUTDIR/et.bpte`` (PTE bundled with one
test case by ``serialize_from_bundled_program_to_flatbuffer``). Then ``OUTDIR/result.json``
holds ExecuTorch's deserialization of those two and of our two files, ExecuTorch's
re-serialization of our .bpte, and its bundled-program runtime's verdict on our .bpte.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import sys
from pathlib import Path

import numpy as np
import torch

_BYTES_FIELDS = {"delegate_debug_metadata", "data", "program"}


def jsonable(obj, name: str = ""):
    """ExecuTorch's schema dataclasses as plain JSON: enums by value, byte vectors as hex."""
    if dataclasses.is_dataclass(obj):
        return {f.name: jsonable(getattr(obj, f.name), f.name) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (bytes, bytearray)):
        return bytes(obj).hex()
    if isinstance(obj, list):
        if name in _BYTES_FIELDS:
            return bytes(obj).hex()
        return [jsonable(v) for v in obj]
    return obj


def main() -> int:
    pte, io_npz, outdir, our_etdp, our_bpte = sys.argv[1:6]
    out = Path(outdir)
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.devtools.bundled_program.serialize import (
        _bundled_program_schema_to_flatbuffer,
        deserialize_from_flatbuffer_to_bundled_program,
        serialize_from_bundled_program_to_flatbuffer,
    )
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc
    from executorch.extension.pybindings import portable_lib

    io = np.load(io_npz)
    x = torch.from_numpy(io["input_0"])
    module = portable_lib._load_for_executorch(pte, enable_etdump=True, debug_buffer_size=1 << 16)
    for _ in range(2):
        module.forward((x,))
    module.write_etdump_result_to_file(str(out / "et.etdp"), str(out / "et.debug"))

    expected = torch.from_numpy(io["output_0"])
    suite = MethodTestSuite("forward", [MethodTestCase(inputs=[x], expected_outputs=[expected])])
    bundled = BundledProgram(None, [suite], pte_file_path=pte)
    (out / "et.bpte").write_bytes(serialize_from_bundled_program_to_flatbuffer(bundled))

    ours_bpte = Path(our_bpte).read_bytes()
    ours_read = deserialize_from_flatbuffer_to_bundled_program(ours_bpte)
    bm = portable_lib._load_bundled_program_from_buffer(ours_bpte)
    verified = [
        np.asarray(o).tolist() for o in bm.verify_result_with_bundled_expected_output("forward", 0)
    ]
    result = {
        "et_etdump": jsonable(deserialize_from_etdump_flatcc((out / "et.etdp").read_bytes())),
        "et_bpte": jsonable(deserialize_from_flatbuffer_to_bundled_program(
            (out / "et.bpte").read_bytes())),
        "our_etdump": jsonable(deserialize_from_etdump_flatcc(Path(our_etdp).read_bytes())),
        "our_bpte": jsonable(ours_read),
        "our_bpte_reserialized": bytes(_bundled_program_schema_to_flatbuffer(ours_read)).hex(),
        "our_bpte_verified_outputs": verified,
    }
    (out / "result.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
