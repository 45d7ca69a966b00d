"""``devtools.etdump.serialize`` (ExecuTorch's import path) writes the bytes ExecuTorch's
Python writer writes: identifier ``ED00``, no size prefix; the reader takes them back."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import ref_process

from edgetorch.devtools.etdump import schema_flatcc as f
from edgetorch.devtools.etdump.serialize import (
    deserialize_from_etdump_flatcc,
    serialize_to_etdump_flatcc,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))

_SAMPLE = '''
f.ETDumpFlatCC(version=0, run_data=[f.RunData(name="run", bundled_input_index=-1,
    allocators=[f.Allocator(name="planned")], events=[f.Event(
        profile_event=f.ProfileEvent(name="op", chain_index=0, instruction_id=3,
            delegate_debug_id_int=-1, delegate_debug_id_str=None,
            delegate_debug_metadata=None, start_time=10, end_time=25),
        allocation_event=None, debug_event=None)])])
'''


def _ours() -> f.ETDumpFlatCC:
    return f.ETDumpFlatCC(version=0, run_data=[f.RunData(
        name="run", bundled_input_index=-1, allocators=[f.Allocator(name="planned")],
        events=[f.Event(profile_event=f.ProfileEvent(name="op", chain_index=0, instruction_id=3,
                                                     delegate_debug_id_int=-1,
                                                     delegate_debug_id_str=None,
                                                     delegate_debug_metadata=None,
                                                     start_time=10, end_time=25))])])


def test_layout_and_roundtrip():
    data = serialize_to_etdump_flatcc(_ours())
    assert data[4:8] == b"ED00"  # root offset first, then the identifier: no size prefix
    back = deserialize_from_etdump_flatcc(data, size_prefixed=False)
    assert back.run_data[0].events[0].profile_event.end_time == 25
    prefixed = serialize_to_etdump_flatcc(_ours(), size_prefixed=True)
    assert prefixed[8:12] == b"ED00"


def test_bytes_match_executorch():
    from refenv import _clean_env, ref_available, ref_python

    if not ref_available():
        pytest.skip("reference environment missing")
    script = ("import sys\nimport executorch.devtools.etdump.schema_flatcc as f\n"
              "from executorch.devtools.etdump.serialize import serialize_to_etdump_flatcc\n"
              f"sys.stdout.write(serialize_to_etdump_flatcc({_SAMPLE.strip()}).hex())\n")
    theirs = ref_process.run([str(ref_python()), "-c", script], env=_clean_env(), check=True,
                             capture_output=True, text=True, timeout=600).stdout.strip()
    assert serialize_to_etdump_flatcc(_ours()).hex() == theirs
