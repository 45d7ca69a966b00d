"""Crafted ``.bpte`` and ETDump files: every defect is one of edgetorch's typed errors (never
IndexError, ValueError, AttributeError, an out-of-bounds read, or work quadratic in the file).
Torch-free: the files are the fuzz seeds, edited through the schema dataclasses."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from edgetorch.devtools.inspector import Inspector
from edgetorch.errors import BundledVerificationError, EdgeTorchError, FormatError
from edgetorch.runtime.bundled import load_bundled_program
from edgetorch.schema import bundled_program as B
from edgetorch.schema import etdump as E
from edgetorch.schema.scalar_type import ScalarType

FUZZ = Path(__file__).resolve().parents[1] / "fixtures" / "fuzz"
BPTE = (FUZZ / "bpte" / "seed-simple_model.bpte").read_bytes()
ETDUMP = (FUZZ / "etdump" / "seed-simple_model-debug.etdp").read_bytes()


def _bundled_with(edit) -> bytes:
    bp = B.deserialize_from_flatbuffer_to_bundled_program(BPTE)  # fresh dataclasses each time
    edit(bp.method_test_suites[0].test_cases[0])
    return B.serialize_from_bundled_program_to_flatbuffer(bp)


def _input(edit):
    def apply(case):
        edit(case.inputs[0].val)
    return apply


def _expected(edit):
    def apply(case):
        edit(case.expected_outputs[0].val)
    return apply


BUNDLES = {
    "negative size": _input(lambda t: setattr(t, "sizes", [-1, *t.sizes[1:]])),
    "sizes overflowing int64": _input(lambda t: setattr(t, "sizes", [1 << 30] * 3)),
    "dim_order out of range": _input(lambda t: setattr(t, "dim_order", [0, 7][:len(t.sizes)])),
    "dim_order repeated": _expected(lambda t: setattr(t, "dim_order", [0] * len(t.sizes))),
    "dim_order too short": _expected(lambda t: setattr(t, "dim_order", [0])),
    "dtype NumPy lacks": _expected(lambda t: setattr(t, "scalar_type", ScalarType.QUINT4X2)),
    "data too short": _expected(lambda t: setattr(t, "data", b"\0" * 3)),
    "input of another kind": lambda case: setattr(case.inputs[0], "val", B.Bool(True)),
}


@pytest.mark.parametrize("name", sorted(BUNDLES))
def test_corrupted_bundled_tensors_are_typed_errors(name):
    assert len(B.deserialize_from_flatbuffer_to_bundled_program(BPTE).method_test_suites[0]
               .test_cases[0].inputs[0].val.sizes) == 2  # the seed's first input is a matrix
    bundled = load_bundled_program(_bundled_with(BUNDLES[name]))
    with pytest.raises(EdgeTorchError) as info:
        bundled.verify_result_with_bundled_expected_output("forward", 0)
    if name != "input of another kind":  # that one is the runtime's input check
        assert isinstance(info.value, BundledVerificationError)
        assert "corrupted" in str(info.value)
    bundled.verify_result_with_bundled_expected_output("forward", 1)  # the other case is fine


def test_every_truncation_of_a_bpte_is_a_typed_error():
    for n in range(0, len(BPTE), 7):
        with pytest.raises(EdgeTorchError):
            load_bundled_program(BPTE[:n]).verify_all()


# ---- ETDump ------------------------------------------------------------------------------


def _debug_tensors(etdump: E.ETDump) -> list[E.Tensor]:
    return [e.debug_event.debug_entry.tensor for r in etdump.run_data for e in r.events or []
            if e.debug_event is not None and e.debug_event.debug_entry.tensor is not None]


def _etdump_with(edit) -> bytes:
    etdump = E.deserialize_from_etdump_flatcc(ETDUMP)
    edit(etdump)
    return E.serialize_to_etdump_flatcc(etdump)


def _first_tensor(**fields):
    def edit(etdump):
        for k, v in fields.items():
            setattr(_debug_tensors(etdump)[0], k, v)
    return edit


def _all_at_the_start(etdump):
    for t in _debug_tensors(etdump):
        t.offset = 0
        t.sizes, t.strides = [1 << 14], [1]  # the whole 64 KB buffer, every time


ETDUMPS = {
    "strides past the data": (_first_tensor(sizes=[2, 2], strides=[1 << 40, 1]), "strides"),
    "negative strides": (_first_tensor(sizes=[2, 2], strides=[-4, 1]), "strides"),
    "negative size": (_first_tensor(sizes=[-1, -1], strides=[]), "negative sizes"),
    "sizes overflowing int64": (_first_tensor(sizes=[(1 << 31) - 1] * 3, strides=[]), "outside"),
    "sizes past int32": (_first_tensor(sizes=[0, 1 << 40], strides=[]), "no runtime logs"),
    "65 dimensions": (_first_tensor(sizes=[1] * 65, strides=[]), "no runtime logs"),
    "offset past the buffer": (_first_tensor(offset=1 << 40), "outside"),
    "negative offset": (_first_tensor(offset=-8), "outside"),
    "every event copies the whole buffer": (_all_at_the_start, "twice"),
}


@pytest.mark.parametrize("name", sorted(ETDUMPS))
def test_hostile_logged_tensors_are_format_errors(name, tmp_path):
    edit, says = ETDUMPS[name]
    (tmp_path / "run.etdp").write_bytes(_etdump_with(edit))
    if name == "every event copies the whole buffer":  # one copy is legitimate, thousands not
        etdump = E.deserialize_from_etdump_flatcc(_etdump_with(edit))
        etdump.run_data = etdump.run_data * 8
        (tmp_path / "run.etdp").write_bytes(E.serialize_to_etdump_flatcc(etdump))
    with pytest.raises(FormatError, match=says):
        Inspector(etdump_path=str(tmp_path / "run.etdp"),
                  debug_buffer_path=str(FUZZ / "etdump_debug_buffer.bin"))
    Inspector(etdump_path=str(tmp_path / "run.etdp"))  # without a buffer nothing is read


def _run(name: str, values: list[float], debug_first: bool) -> E.RunData:
    profile = E.Event(profile_event=E.ProfileEvent("op", 0, 3, start_time=10, end_time=20))
    debug = [E.Event(debug_event=E.DebugEvent(0, 3, E.Value(E.ValueType.DOUBLE,
                                                            double_value=E.Double(v))))
             for v in values]
    return E.RunData(name, -1, None, [*debug, profile] if debug_first else [profile, *debug])


def test_a_size_1_dimension_may_have_any_stride():
    """It never steps (a huge one overflowed NumPy's as_strided, and the view it left made
    closing the mapped buffer fail with BufferError: a fuzz finding)."""
    from edgetorch.devtools.inspector import _runs

    buffer = np.arange(6, dtype=np.float32).tobytes()
    t = E.Tensor(ScalarType.FLOAT, sizes=[1, 2, 3], strides=[1 << 62, 3, 1], offset=0)
    assert np.array_equal(_runs._tensor(t, buffer), np.arange(6, dtype=np.float32).reshape(1, 2, 3))
    t.strides = [1 << 62, 1, 2]  # transposed inner dimensions still read as strided
    assert np.array_equal(_runs._tensor(t, buffer)[0], np.arange(6).reshape(3, 2).T)


def test_repeats_whose_events_interleave_differently_are_joined():
    """Two runs of one block: the same profile events and values, the debug events logged
    before the profile event in one and after it in the other (this used to pair a profile
    event with a debug event and fail with AttributeError)."""
    etdump = E.ETDump(0, [_run("forward", [1.5], True), _run("forward", [1.5], False)])
    inspector = Inspector(etdump_data=E.serialize_to_etdump_flatcc(etdump))
    (block,) = inspector.event_blocks
    (event,) = block.events
    assert event.debug_data == [1.5] and len(event.perf_data.raw) == 2


def test_runs_group_by_events_and_values_however_many_there_are():
    runs = [_run("forward", [float(i % 3)], False) for i in range(3000)]
    runs += [_run(f"m{i}", [0.0], False) for i in range(3000)]  # distinct names: distinct blocks
    inspector = Inspector(etdump_data=E.serialize_to_etdump_flatcc(E.ETDump(0, runs)))
    names = [b.name for b in inspector.event_blocks]
    assert names[:3] == ["forward", "forward_1", "forward_2"] and len(names) == 3003
    assert [len(b.events[0].perf_data.raw) for b in inspector.event_blocks[:3]] == [1000] * 3
    nan = E.ETDump(0, [_run("f", [float("nan")], False)] * 2)
    assert len(Inspector(etdump_data=E.serialize_to_etdump_flatcc(nan)).event_blocks) == 1


def test_an_oversized_etdump_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from edgetorch.devtools.inspector import _inspector, _inspector_utils

    (tmp_path / "big.etdp").write_bytes(ETDUMP)
    monkeypatch.setattr(_inspector_utils, "MAX_ETDUMP_BYTES", 100)
    with pytest.raises(_inspector.InspectorError, match="more than the 100"):
        Inspector(etdump_path=str(tmp_path / "big.etdp"))


def test_the_debug_buffer_is_mapped_and_released(tmp_path):
    buffer = tmp_path / "b.bin"
    buffer.write_bytes((FUZZ / "etdump_debug_buffer.bin").read_bytes())
    inspector = Inspector(etdump_data=ETDUMP, debug_buffer_path=str(buffer))
    values = [v for b in inspector.event_blocks for e in b.events for v in e.debug_data]
    assert values and all(isinstance(v, (np.ndarray, torch.Tensor)) for v in values)
    maps = Path("/proc/self/maps")
    if maps.exists():  # the logged values were copied out and the mapping is gone
        assert str(buffer) not in maps.read_text()


# ---- ETRecord maps as the Inspector reads them --------------------------------------------

ETRECORD = FUZZ / "etrecord" / "seed-simple_model.etrecord"


@pytest.mark.parametrize("entry, value", [
    ("debug_handle_map", {"forward": {"0": [[1]], "1": 2}}),
    ("debug_handle_map", {"forward": {"0": "7"}}),
    ("delegate_map", {"forward": {"0": 5}}),
    ("delegate_map", {"forward": {"0": {"delegate_map": {"1": {"x": 1}}}}}),
    ("instruction_id_to_num_outs_map", {"forward": {"0": "x"}}),
])
def test_odd_etrecord_map_values_are_etrecord_errors(entry, value, tmp_path):
    """Values of the right maps with the wrong types: an unhashable handle was a TypeError, a
    delegate entry that is not a map an AttributeError, inside the Inspector."""
    import io
    import json
    import zipfile

    pytest.importorskip("torch")
    from edgetorch.errors import ETRecordError

    src = zipfile.ZipFile(io.BytesIO(ETRECORD.read_bytes()))
    path = tmp_path / "odd.etrecord"
    with zipfile.ZipFile(path, "w") as z:
        for info in src.infolist():
            z.writestr(info.filename, json.dumps(value) if info.filename == entry
                       else src.read(info))
    with pytest.raises(ETRecordError, match=entry):
        Inspector(etdump_data=(FUZZ / "etdump" / "seed-simple_model-profile.etdp").read_bytes(),
                  etrecord=str(path))
