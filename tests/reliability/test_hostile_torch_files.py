"""Files that carry torch artifacts never run code (issue 28, item 1).

Each payload is a real attack: a ``torch.save`` zip whose pickle calls ``open(marker, "w")``
when unpickled without ``weights_only`` -- exactly what torch's own readers do on their
fallback path. The test fails if the marker file appears, or if the reader raises anything but
an edgetorch error.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from edgetorch.devtools import Inspector, generate_etrecord
from edgetorch.devtools.etrecord import parse_etrecord
from edgetorch.errors import EdgeTorchError, ETRecordError, UnsafeFileError
from edgetorch.exir import to_edge
from edgetorch.util.torch_files import load_exported_program, load_tensors


class _Payload:
    """Unpickling this creates the marker file."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _evil_torch_file(marker: Path) -> bytes:
    buf = io.BytesIO()
    torch.save({"w": _Payload(marker)}, buf)
    return buf.getvalue()


class _Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.lin(x))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[bytes, Path]:
    """A good ETRecord's bytes, and the ETDump of a run of its program."""
    import copy

    from edgetorch.runtime import Runtime

    folder = tmp_path_factory.mktemp("etr")
    path = folder / "good.etrecord"
    x = torch.randn(2, 4)
    ep = torch.export.export(_Net().eval(), (x,))
    edge = to_edge(ep)
    edge_copy = copy.deepcopy(edge)
    et = edge.to_executorch()
    generate_etrecord(path, edge_copy, et, exported_program=ep)
    program = Runtime.get().load_program(et.buffer, enable_etdump=True)
    program.load_method("forward").execute([x])
    program.write_etdump_result_to_file(str(folder / "run.etdp"))
    return path.read_bytes(), folder / "run.etdp"


@pytest.fixture(scope="module")
def etrecord_bytes(recorded) -> bytes:
    return recorded[0]


def _rewrite(data: bytes, out: Path, replace: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, replace.get(name, src.read(name)))
        for name, blob in replace.items():
            if name not in src.namelist():
                dst.writestr(name, blob)
    return out


ENTRIES = ["exported_program_state_dict", "exported_program_constants",
           "exported_program_example_inputs", "edge_dialect_exported_program/forward_state_dict",
           "edge_dialect_exported_program/forward_constants", "reference_outputs",
           "representative_inputs"]


@pytest.mark.parametrize("entry", ENTRIES)
def test_a_pickle_in_any_etrecord_entry_never_runs(entry, recorded, tmp_path):
    marker = tmp_path / "pwned"
    path = _rewrite(recorded[0], tmp_path / "evil.etrecord", {entry: _evil_torch_file(marker)})
    with pytest.raises(UnsafeFileError, match="weights_only"):
        parse_etrecord(path)
    with pytest.raises(UnsafeFileError):
        Inspector(etdump_path=str(recorded[1]), etrecord=str(path))
    assert not marker.exists()


def test_the_inspector_cli_refuses_it_too(recorded, tmp_path):
    marker = tmp_path / "pwned"
    path = _rewrite(recorded[0], tmp_path / "evil.etrecord",
                    {"exported_program_state_dict": _evil_torch_file(marker)})
    done = subprocess.run([sys.executable, "-m", "edgetorch.cli", "inspector", "--etdump_path",
                           str(recorded[1]), "--etrecord_path", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert not marker.exists()


def test_a_graph_that_calls_something_other_than_an_operator_is_refused(etrecord_bytes, tmp_path):
    with zipfile.ZipFile(io.BytesIO(etrecord_bytes)) as z:
        program = json.loads(z.read("exported_program"))
    nodes = program["graph_module"]["graph"]["nodes"]
    relu = next(n for n in nodes if "relu" in n["target"])
    relu["target"] = "torch.os.system"
    path = _rewrite(etrecord_bytes, tmp_path / "evil.etrecord",
                    {"exported_program": json.dumps(program).encode()})
    with pytest.raises(EdgeTorchError) as info:
        parse_etrecord(path)
    assert isinstance(info.value, (UnsafeFileError, ETRecordError))


def test_an_edge_operator_name_cannot_reach_other_objects(etrecord_bytes, tmp_path):
    key = "edge_dialect_exported_program/forward"
    with zipfile.ZipFile(io.BytesIO(etrecord_bytes)) as z:
        program = json.loads(z.read(key))
    node = next(n for n in program["graph_module"]["graph"]["nodes"]
                if n["target"].startswith("executorch.exir.dialects.edge.ops."))
    node["target"] = "executorch.exir.dialects.edge.ops.__class__.__init__.__globals__"
    path = _rewrite(etrecord_bytes, tmp_path / "evil.etrecord",
                    {key: json.dumps(program).encode()})
    with pytest.raises(UnsafeFileError, match="Edge operator"):
        parse_etrecord(path)


@pytest.mark.parametrize("blob, message", [
    (b"\x80\x04cbuiltins\nopen\n.", "torch's zip format"),
    (b"PK\x03\x04garbage", "weights_only"),
])
def test_load_tensors_refuses_bare_pickles_and_garbage(blob, message):
    with pytest.raises(UnsafeFileError, match=message):
        load_tensors(blob, "test entry")


def test_malformed_etrecords_are_typed_errors(etrecord_bytes, tmp_path):
    cases = {
        "not a zip": b"hello",
        "no identifier": _zip_bytes({"debug_handle_map": b"{}"}),
        "bad json": _zip_bytes({"ETRECORD_V0": b"", "debug_handle_map": b"{"}),
        "deep json": _zip_bytes({"ETRECORD_V0": b"", "debug_handle_map": b"[" * 100000}),
        "wrong map type": _zip_bytes({"ETRECORD_V0": b"", "debug_handle_map": b"[1, 2]"}),
        "missing suffix entry": _zip_bytes({"ETRECORD_V0": b"", "exported_program": b"{}"}),
        "garbage program": _zip_bytes({"ETRECORD_V0": b"", "exported_program": b"{\"a\": 1}",
                                       "exported_program_state_dict": b"",
                                       "exported_program_constants": b"",
                                       "exported_program_example_inputs": b""}),
    }
    for name, blob in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.etrecord"
        path.write_bytes(blob)
        with pytest.raises(EdgeTorchError):
            parse_etrecord(path)


def test_a_zip_bomb_is_refused_before_it_is_decompressed(tmp_path):
    path = tmp_path / "bomb.etrecord"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("ETRECORD_V0", "")
        z.writestr("debug_handle_map", b" " * (64 << 20))  # 64 MiB of spaces -> ~64 KiB
    with pytest.raises(ETRecordError, match="max_bytes"):
        parse_etrecord(path, max_bytes=16 << 20)


def _understate_size(data: bytes, name: bytes, size: int) -> bytes:
    """The zip with ``name``'s uncompressed size set to ``size`` in its local header and the
    central directory (what a bomb does to slip past a check of the declared sizes)."""
    out = bytearray(data)
    for sig, size_at, name_len_at, name_at in ((b"PK\x03\x04", 22, 26, 30),
                                               (b"PK\x01\x02", 24, 28, 46)):
        i = out.find(sig)
        while i != -1:
            n = int.from_bytes(out[i + name_len_at:i + name_len_at + 2], "little")
            if bytes(out[i + name_at:i + name_at + n]) == name:
                out[i + size_at:i + size_at + 4] = size.to_bytes(4, "little")
            i = out.find(sig, i + 4)
    return bytes(out)


def test_a_bomb_that_understates_its_size_is_not_inflated(tmp_path):
    import tracemalloc

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("ETRECORD_V0", "")
        z.writestr(zipfile.ZipInfo("debug_handle_map"), b" " * (64 << 20),
                   compress_type=zipfile.ZIP_DEFLATED)
    path = tmp_path / "bomb.etrecord"
    path.write_bytes(_understate_size(buf.getvalue(), b"debug_handle_map", 100))
    tracemalloc.start()
    try:
        with pytest.raises(ETRecordError):
            parse_etrecord(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # z.read would have inflated all 64 MiB


def test_entries_compressed_with_bzip2_or_lzma_are_refused(tmp_path):
    """zipfile inflates those a whole chunk at a time (4 KB of bzip2 can be gigabytes)."""
    for method in (zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        path = tmp_path / f"{method}.etrecord"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("ETRECORD_V0", "")
            z.writestr(zipfile.ZipInfo("debug_handle_map"), b"{}", compress_type=method)
        with pytest.raises(ETRecordError, match="compression method"):
            parse_etrecord(path)


def _zip_bytes(entries: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for k, v in entries.items():
            z.writestr(k, v)
    return buf.getvalue()


class _WithConstant(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.ones(3))

    def forward(self, x):
        return x * self.scale + torch.ones(3)


def test_a_saved_exported_program_loads_without_unpickling_objects(tmp_path):
    ep = torch.export.export(_WithConstant(), (torch.randn(3),))
    good = tmp_path / "good.pt2"
    torch.export.save(ep, good)
    loaded = load_exported_program(good)
    x = torch.randn(3)
    torch.testing.assert_close(loaded.module()(x), ep.module()(x))


def test_a_pickled_payload_in_a_pt2_never_runs(tmp_path):
    ep = torch.export.export(_WithConstant(), (torch.randn(3),))
    good = tmp_path / "good.pt2"
    torch.export.save(ep, good)
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt2"
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(evil, "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if "weights_config" in info.filename or "constants_config" in info.filename:
                config = json.loads(data)
                for meta in config["config"].values():
                    meta["use_pickle"] = True
                data = json.dumps(config).encode()
            elif "/data/weights/" in info.filename or "/data/constants/" in info.filename:
                if not info.filename.endswith(".json"):
                    data = _evil_torch_file(marker)
            dst.writestr(info, data)
    with pytest.raises(UnsafeFileError):
        load_exported_program(evil)
    assert not marker.exists()
    # and through the recipes API, which takes a path to a saved program
    from edgetorch.export import export

    with pytest.raises(UnsafeFileError):
        export(str(evil))
    assert not marker.exists()
