"""Round trips through Vela's own encoders: random weights and scales encoded by
``ethosu.vela.weight_compressor`` (the MLW reorder + codec and the 10-byte bias entries), decoded
by ``npu.weights``, equal to the originals bit for bit, for every U55/U65 MAC config."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ethosu.mlw_codec", reason="the NPU weight tests need ethos-u-vela (make test-arm)")

from ethosu.vela.api import NpuBlockTraversal  # noqa: E402
from ethosu.vela.architecture_features import Accelerator  # noqa: E402
from ethosu.vela.weight_compressor import encode_bias, encode_weights  # noqa: E402

from edgetorch.backends.arm.runtime.npu import weights as W  # noqa: E402
from edgetorch.errors import InvalidArgumentError, InvalidProgramError  # noqa: E402

CONFIGS = ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256",
           "ethos-u65-512"]


def vela_encode(w: np.ndarray, acc: str, block: int, depthwise: bool, part_kernel: bool,
                bits: int, dilation: tuple[int, int]) -> list[bytes]:
    """Vela's encoding of one operation's OHWI weights: one stream per core (its
    ``encode_weight_and_scale_tensor`` split, without the scales)."""
    cores = W.npu_config(acc).cores
    traversal = NpuBlockTraversal.PART_KERNEL_FIRST if part_kernel else NpuBlockTraversal.DEPTH_FIRST
    streams = []
    for core in range(min(cores, w.shape[0])):
        enc, _ = encode_weights(Accelerator(acc), w[core::cores], (dilation[1], dilation[0]), bits,
                                (block + cores - 1 - core) // cores, depthwise, traversal)
        streams.append(bytes(enc))
    return streams


def random_case(rng: np.random.Generator, k: int) -> dict:
    depthwise = k % 3 == 0
    part_kernel = not depthwise and k % 2 == 0
    return dict(ofm_depth=int(rng.integers(1, 80)),
                ifm_depth=1 if depthwise else int(rng.integers(1, 80)),
                kernel_h=int(rng.integers(1, 12)), kernel_w=int(rng.integers(1, 12)),
                depthwise=depthwise, part_kernel_first=part_kernel,
                ofm_block_depth=int(rng.choice([4, 8, 16, 24, 32, 64])),
                ifm_bits=16 if k % 5 == 0 else 8,
                dilation=(int(rng.integers(1, 3)), int(rng.integers(1, 3))))


@pytest.mark.parametrize("acc", CONFIGS)
def test_weights_roundtrip_vela_encoder(acc):
    rng = np.random.default_rng(CONFIGS.index(acc))
    kinds = set()
    for k in range(30):
        p = random_case(rng, k)
        shape = (p["ofm_depth"], p["kernel_h"], p["kernel_w"], p["ifm_depth"])
        # Zero-point-corrected weights span 9 bits (int8 minus a zero point in -128..127).
        w = rng.integers(-255, 256, size=shape).astype(np.int16)
        streams = vela_encode(w, acc, p["ofm_block_depth"], p["depthwise"],
                              p["part_kernel_first"], p["ifm_bits"], p["dilation"])
        got = W.decode_weights(streams, accelerator=acc, **p)
        assert got.shape == shape and got.dtype == np.int32
        np.testing.assert_array_equal(got, w, err_msg=f"{acc} {p}")
        kinds.add((p["depthwise"], p["part_kernel_first"], p["ifm_bits"]))
    assert len(kinds) >= 4  # depthwise, depth-first and part-kernel-first, 8 and 16 bit


def test_weights_single_stream_bytes_and_fully_connected():
    """A FULLY_CONNECTED is a 1x1 conv; one core's stream may be passed as plain bytes."""
    rng = np.random.default_rng(7)
    w = rng.integers(-128, 128, size=(10, 1, 1, 100)).astype(np.int16)
    (stream,) = vela_encode(w, "ethos-u55-128", 16, False, False, 8, (1, 1))
    got = W.decode_weights(stream, accelerator="ethos-u55-128", ofm_depth=10, ifm_depth=100,
                           kernel_h=1, kernel_w=1, depthwise=False, part_kernel_first=False,
                           ofm_block_depth=16)
    np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("acc", ["ethos-u55-128", "ethos-u65-512"])
def test_scales_roundtrip_vela_encoder(acc):
    rng = np.random.default_rng(3)
    cores = W.npu_config(acc).cores
    for depth in (1, 2, 7, 33):
        bias = rng.integers(-(1 << 39), 1 << 39, size=depth)
        bias[:2] = [-(1 << 39), (1 << 39) - 1][: min(2, depth)]
        scale = rng.integers(0, 1 << 32, size=depth)
        shift = rng.integers(0, 64, size=depth)
        streams = []
        for core in range(min(cores, depth)):
            data = b"".join(bytes(encode_bias(np.int64(b), int(s), int(h)))
                            for b, s, h in zip(bias[core::cores], scale[core::cores],
                                               shift[core::cores]))
            streams.append(data + bytes(-len(data) % 16))  # Vela pads each stream to 16
        got = W.decode_scales(streams, ofm_depth=depth, accelerator=acc)
        np.testing.assert_array_equal(got.bias, bias)
        np.testing.assert_array_equal(got.scale, scale)
        np.testing.assert_array_equal(got.shift, shift)


def test_kernel_from_registers():
    # 3x3, dilation (2, 1), stride (y=4, x=1), part-kernel-first: the register holds d*(k-1).
    reg = (0 << 0) | (1 << 1) | (1 << 2) | (0 << 3) | (1 << 4) | (1 << 9)
    k = W.kernel_from_registers(4, 2, reg)
    assert (k.height, k.width, k.stride, k.dilation, k.part_kernel_first) == (3, 3, (4, 1),
                                                                             (2, 1), True)
    with pytest.raises(InvalidProgramError, match="multiples of the dilation"):
        W.kernel_from_registers(3, 2, 1 << 4)


def test_errors_name_the_problem():
    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, size=(8, 3, 3, 16)).astype(np.int16)
    streams = vela_encode(w, "ethos-u55-128", 16, False, False, 8, (1, 1))
    args = dict(accelerator="ethos-u55-128", ofm_depth=8, ifm_depth=16, kernel_h=3, kernel_w=3,
                depthwise=False, part_kernel_first=False, ofm_block_depth=16)
    with pytest.raises(InvalidProgramError, match="decodes to .* needs"):
        W.decode_weights(streams, **{**args, "ifm_depth": 40})
    with pytest.raises(InvalidArgumentError, match="unknown Ethos-U accelerator 'ethos-u99-1'"):
        W.decode_weights(streams, **{**args, "accelerator": "ethos-u99-1"})
    with pytest.raises(InvalidArgumentError, match="need 2 streams"):
        W.decode_weights(streams, **{**args, "accelerator": "ethos-u65-512"})
    with pytest.raises(InvalidProgramError, match="SCALE_BASE/SCALE_LENGTH"):
        W.decode_scales(bytes(30), ofm_depth=4)


def test_missing_codec_names_the_extra(monkeypatch):
    import importlib

    from edgetorch.errors import BackendNotFoundError

    real = importlib.import_module

    def fake(name, *a, **k):
        if name == "ethosu.mlw_codec":
            raise ImportError("No module named 'ethosu'")
        return real(name, *a, **k)

    monkeypatch.setattr(W.importlib, "import_module", fake)
    with pytest.raises(BackendNotFoundError, match=r"edgetorch\[arm\]"):
        W.decode_weights(b"", accelerator="ethos-u55-128", ofm_depth=1, ifm_depth=1, kernel_h=1,
                         kernel_w=1, depthwise=False, part_kernel_first=False, ofm_block_depth=8)
