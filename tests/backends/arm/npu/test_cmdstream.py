"""The command-stream decoder: the ``COP1`` driver payload, cmd0/cmd1 words, and a listing that
equals Vela's own ``--verbose-register-command-stream`` output word for word (Vela's ``//``
comment lines describe its graph, not the stream, and are left out)."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from npu_util import compile_pte, vela_blob

from edgetorch.backends.arm.ethosu.compile_spec import EthosUCompileSpec
from edgetorch.backends.arm.runtime.npu.cmdstream import parse_driver_payload
from edgetorch.backends.arm.runtime.npu.listing import listing
from edgetorch.errors import InvalidProgramError

LISTED = ["conv3x3_s2", "conv3x3_dil2", "depthwise_mult2", "conv1x1_wide", "avgpool3x3_s2",
          "add_bcast", "conv_relu_add"]
_LINE = re.compile(r"0x[0-9a-f]{6}: |Register command stream: |  Offset: ")


def vela_listing(tosa: bytes, target: str, tmp_path) -> list[str]:
    """Vela's printed register command stream (its C++ back end prints to the process's
    stdout, so Vela runs in a subprocess)."""
    path = tmp_path / "g.tosa"
    path.write_bytes(tosa)
    flags = EthosUCompileSpec(target).compiler_flags
    proc = subprocess.run([sys.executable, "-m", "ethosu.vela", *flags,
                           "--verbose-register-command-stream",
                           f"--output-dir={tmp_path / 'vela_out'}", str(path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [line for line in proc.stdout.splitlines() if _LINE.match(line)]


def test_driver_payload_from_vela():
    """Vela's own driver-payload writer: config/ID words, NOP alignment, stream length."""
    from ethosu.vela.api import NpuAccelerator
    from ethosu.vela.driver_actions import npu_create_driver_payload

    words = [0x0001010F, 0x00004000, 0x00000300, 0x00050005, 0xFFFF0000]  # region, base0, pool, stop
    for acc, macs in ((NpuAccelerator.Ethos_U55_64, 64), (NpuAccelerator.Ethos_U65_512, 512)):
        raw = npu_create_driver_payload(words, acc)
        p = parse_driver_payload(raw)
        assert p.fourcc == "COP1" and p.stream_words == len(words)
        assert p.macs_per_cc == macs
        assert p.product == ("Ethos-U65" if macs == 512 else "Ethos-U55")
        assert raw.index(np.array(words[:1], "<u4").tobytes()) % 16 == 0  # stream 16-aligned
        assert [c.name for c in p.commands] == ["NPU_SET_IFM_REGION", "NPU_SET_IFM_BASE0",
                                                "NPU_OP_POOL", "NPU_OP_STOP"]
        assert p.commands[1].data == 0x300 and p.commands[2].param == 5
        assert [c.word for c in p.commands] == [words[0], words[1], words[3], words[4]]


def test_corrupt_payloads_are_typed_errors():
    good = bytes(parse_driver_payload.__module__, "ascii")  # any bytes, not COP1
    with pytest.raises(InvalidProgramError, match="COP1"):
        parse_driver_payload(good[:8])
    with pytest.raises(InvalidProgramError, match="32-bit words"):
        parse_driver_payload(b"COP1\x00")
    # a command-stream action longer than the data
    with pytest.raises(InvalidProgramError, match="claims 9 words"):
        parse_driver_payload(b"COP1" + np.array([0x00090002, 1], "<u4").tobytes())
    # a cmd1 word without its payload word
    with pytest.raises(InvalidProgramError, match="no payload"):
        parse_driver_payload(b"COP1" + np.array([0x00010002, 0x4000], "<u4").tobytes())


@pytest.mark.parametrize("target", ["ethos-u55-64", "ethos-u65-512"])
@pytest.mark.parametrize("name", LISTED)
def test_listing_equals_vela(our_tosa, tmp_path, name, target):
    for tosa in our_tosa(name):
        ours = listing(parse_driver_payload(vela_blob(tosa, target).cmd_data)).splitlines()
        assert ours == vela_listing(tosa, target, tmp_path)


@pytest.mark.compat
@pytest.mark.parametrize("name", ["maxpool3x3_pad", "sub_bcast_c", "mul_scalar", "minimum",
                                  "abs", "sigmoid", "leaky_relu", "cat", "linear"])
def test_listing_equals_vela_executorch_tosa(et_ops, tmp_path, name):
    for tosa in sorted((et_ops(name) / "inter").glob("output_*.tosa")):
        data = tosa.read_bytes()
        ours = listing(parse_driver_payload(vela_blob(data, "ethos-u55-128").cmd_data))
        assert ours.splitlines() == vela_listing(data, "ethos-u55-128", tmp_path)


def test_cli_inspect_and_run(tmp_path, capsys, monkeypatch):
    """``edgetorch inspect --ethosu`` lists the stream; ``edgetorch run`` says what ran."""
    from ethosu_models import MODELS

    from edgetorch.cli import main

    model, example = MODELS["convnet"]()
    path = tmp_path / "convnet.pte"
    path.write_bytes(compile_pte(model, example, "ethos-u55-128"))
    assert main(["inspect", "--ethosu", str(path)]) == 0
    text = capsys.readouterr().out
    assert "Register command stream:" in text and "NPU_OP_CONV" in text
    monkeypatch.setenv("EDGETORCH_ETHOSU_SIMULATION", "npu")
    assert main(["run", str(path), "--repeat", "0"]) == 0
    text = capsys.readouterr().out
    assert "simulated from its command stream on ethos-u55-128" in text
    assert re.search(r"NPU operations per run: .*conv x2", text)
