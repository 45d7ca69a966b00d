"""The Ethos-U blob: ours equals ExecuTorch's byte for byte for the same TOSA, and parses."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from edgetorch.backends.arm.ethosu.compile_spec import EthosUCompileSpec
from edgetorch.backends.arm.ethosu.vela import vela_compile
from edgetorch.backends.arm.ethosu.vela_bin import (
    BLOCK_HEADER,
    BLOCK_ORDER,
    VelaIO,
    parse_vela_bin,
    write_vela_bin,
)
from edgetorch.errors import InvalidProgramError
from edgetorch.schema.pte import PteFile

CASES = [("add", "ethos-u55-128"), ("add", "ethos-u85-256"),
         ("convnet", "ethos-u55-128"), ("convnet", "ethos-u85-256")]


def _delegate_blob(pte_path):
    pte = PteFile.parse(pte_path.read_bytes())
    (delegate,) = pte.program.execution_plan[0].delegates
    return delegate, bytes(pte.delegate_bytes(delegate))


def _block_names(blob: bytes) -> list[str]:
    names, pos = [], 0
    while pos < len(blob):
        name, size, _, reserved = BLOCK_HEADER.unpack_from(blob, pos)
        assert reserved == bytes(11)
        names.append(name.rstrip(b"\0").decode())
        pos += 32 + size + (-size % 16)
    assert pos == len(blob)
    return names


def test_write_parse_roundtrip():
    ios = [VelaIO((1, 1, 1, 3, 8, 8), 1, 0, 1), VelaIO((1, 1, 1, 1, 1, 4), 4, 192, 1)]
    blob, ext = write_vela_bin(b"COP1" + bytes(13), b"\0", 384, ios, ios[:1])
    assert ext == [] and len(blob) % 16 == 0
    assert _block_names(blob) == list(BLOCK_ORDER)
    vb = parse_vela_bin(blob)
    assert (vb.cmd_data, vb.weight_data, vb.scratch_size) == (b"COP1" + bytes(13), b"\0", 384)
    assert vb.inputs == ios and vb.outputs == ios[:1]


def test_external_block_is_sha256_key():
    import hashlib

    blob, (ext,) = write_vela_bin(b"COP1", b"weights!", 16, [], [], {"weight_data": "npu_w"})
    assert ext.key == hashlib.sha256(b"npu_w\0weights!").hexdigest() and ext.alignment == 16
    vb = parse_vela_bin(blob, {ext.key: ext.payload}.__getitem__)
    assert vb.weight_data == b"weights!" and vb.external == {"weight_data": ext.key}


@pytest.mark.parametrize("cut", [5, 40, 100])
def test_truncated_blob_is_refused(cut):
    blob, _ = write_vela_bin(b"COP1" * 8, b"\0", 16, [VelaIO((1,) * 6, 1, 0, 1)], [])
    with pytest.raises(InvalidProgramError):
        parse_vela_bin(blob[:cut])


def test_bad_io_count_is_refused():
    blob, _ = write_vela_bin(b"COP1", b"\0", 16, [VelaIO((1,) * 6, 1, 0, 1)], [])
    pos = blob.index(b"inputs\0") + 32
    bad = blob[:pos] + struct.pack("<i", 1000) + blob[pos + 4:]
    with pytest.raises(InvalidProgramError, match="inputs block says 1000"):
        parse_vela_bin(bad)


@pytest.mark.compat
@pytest.mark.parametrize("model,target", CASES)
def test_blob_equals_executorch(ref_arm, model, target):
    """Vela on ExecuTorch's own .tosa gives ExecuTorch's delegate blob exactly."""
    out = ref_arm(model, target)
    delegate, et_blob = _delegate_blob(out / "model.pte")
    (tosa,) = (out / "inter").glob("output_tag0_*.tosa")
    cs = EthosUCompileSpec(target)
    assert tosa.name == f"output_tag0_{cs.tosa_spec}.tosa"
    ours = vela_compile(tosa.read_bytes(), cs.compiler_flags)
    assert ours.processed_bytes == et_blob
    assert _block_names(et_blob) == list(BLOCK_ORDER)
    vb = parse_vela_bin(et_blob)
    assert vb.cmd_data[:4] == b"COP1"
    npz = np.load(out / "inter/output/out_vela.npz")
    assert vb.scratch_size == int(npz["scratch_shape"][0])
    assert [io.shape for io in vb.inputs] == [tuple(s) for s in npz["input_shape"]]


@pytest.mark.compat
def test_external_weights_equal_executorch(ref_arm):
    out = ref_arm("convnet", "ethos-u85-256", "weight_data=npu_weights")
    delegate, et_blob = _delegate_blob(out / "model.pte")
    specs = {c.key: bytes(c.value) for c in delegate.compile_specs}
    assert specs["external_block_placements"] == b'{"weight_data":"npu_weights"}'
    (tosa,) = (out / "inter").glob("output_tag0_*.tosa")
    ours = vela_compile(tosa.read_bytes(), EthosUCompileSpec("ethos-u85-256").compiler_flags,
                        placements={"weight_data": "npu_weights"})
    assert ours.processed_bytes == et_blob
    (ext,) = ours.external_blocks
    assert (out / "npu_weights.ptd").exists()
    assert ext.payload in (out / "npu_weights.ptd").read_bytes()
