"""The weights and scales of real Vela 5.1.0 (Regor) output, decoded from the command stream's
WEIGHT/SCALE ranges, equal the TOSA graph's quantized weights (minus zero point), biases and
rescale factors: for a small net compiled for every U55/U65 MAC config, and for the ``.pte``
edgetorch's Ethos-U flow writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ethosu.vela", reason="the NPU weight tests need ethos-u-vela (make test-arm)")
pytest.importorskip("tosa_reference_model", reason="the NPU weight tests need tosa-tools")
torch = pytest.importorskip("torch")

from npu_weight_streams import (  # noqa: E402
    check_against_tosa,
    check_pte,
    decode_ops,
    decode_ops_u85,
    tosa_layers,
    vela_listing,
)
from torch import nn  # noqa: E402
from tosa_single_op import Layer  # noqa: E402

from edgetorch.backends.arm.ethosu.vela import vela_compile  # noqa: E402

CONFIGS = ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256",
           "ethos-u65-512"]
U85_CONFIGS = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024",
               "ethos-u85-2048"]


def compile_and_decode(tosa: bytes, acc: str, workdir) -> list:
    """Vela on ``tosa`` for ``acc``; each convolution's decoded weights and scales. U85 register
    fields come from Vela's own listing (no U85 register definitions in Python)."""
    from edgetorch.backends.arm.ethosu import EthosUCompileSpec

    flags = EthosUCompileSpec(acc).compiler_flags
    if acc in U85_CONFIGS:
        listing, npz_path = vela_listing(tosa, flags, str(workdir))
        with np.load(npz_path) as npz:
            return decode_ops_u85(listing, npz["weight_data"].tobytes(), acc)
    vela_compile(tosa, flags, str(workdir))
    with np.load(workdir / "output" / "out_vela.npz") as npz:
        return decode_ops(npz["cmd_data"].tobytes(), npz["weight_data"].tobytes(), acc)


class WeightNet(nn.Module):
    """Every weight layout Vela picks for int8: part-kernel-first (3 input channels), depth-first
    (64), dilation 2, a 9x9 kernel (two 8x8 sub-kernels per axis), depthwise, stride 2, and a
    fully connected layer; output depths that split into several OFM blocks and weight slices."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 40, 3, padding=1)
        self.c2 = nn.Conv2d(40, 64, 3, padding=2, dilation=2)
        self.dw = nn.Conv2d(64, 64, 5, padding=2, groups=64)
        self.c3 = nn.Conv2d(64, 70, 1, stride=2)
        self.c4 = nn.Conv2d(70, 19, 9, padding=4)
        self.fc = nn.Linear(19, 10)

    def forward(self, x):
        y = self.c3(torch.relu(self.dw(self.c2(torch.relu(self.c1(x))))))
        y = self.c4(y)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


_BUILT: dict = {}


def weightnet_pte(target: str, workdir: Path) -> tuple[bytes, bytes]:
    """(TOSA bytes, .pte bytes) of WeightNet through edgetorch's Ethos-U flow for ``target``."""
    if target in _BUILT:
        return _BUILT[target]
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from edgetorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
    from edgetorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_quantization_config
    from edgetorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    torch.manual_seed(0)
    model, inputs = WeightNet().eval(), (torch.randn(1, 3, 17, 17),)
    cs = EthosUCompileSpec(target)
    cs.dump_intermediate_artifacts_to(str(workdir))
    quantizer = EthosUQuantizer(cs)
    quantizer.set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)
    exported = torch.export.export(convert_pt2e(prepared), inputs)
    edge = to_edge_transform_and_lower(exported, partitioner=[EthosUPartitioner(cs)])
    pte = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer
    (tosa,) = Path(workdir).glob("output_*.tosa")
    _BUILT[target] = tosa.read_bytes(), bytes(pte)
    return _BUILT[target]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return weightnet_pte("ethos-u55-128", tmp_path_factory.mktemp("npu_weights"))


@pytest.mark.parametrize("acc", CONFIGS + U85_CONFIGS)
def test_vela_output_weights_equal_tosa(acc, compiled, tmp_path):
    tosa, _ = compiled
    ops = compile_and_decode(tosa, acc, tmp_path)
    layers = tosa_layers(tosa)
    check_against_tosa(ops, layers)
    kinds = {(op.kind, bool(op.regs["NPU_SET_KERNEL_STRIDE"] & 4)) for op in ops}
    assert kinds == {("conv", True), ("conv", False), ("depthwise", False)}
    assert len(ops) >= len(layers) == 6


# One-layer TOSA graphs compiled by Vela directly: what the net above does not reach (int16
# IFMs, weight zero points, depth multipliers, strides, dilation per axis, 16-bit depthwise).
LAYERS = {
    "conv3x3": Layer(False, (9, 9, 20), 30, (3, 3)),
    "conv1x1_deep": Layer(False, (6, 6, 96), 40, (1, 1), seed=1),
    "conv_int16": Layer(False, (9, 9, 20), 30, (3, 3), ifm_bits=16, seed=2),
    "conv1x1_int16_deep": Layer(False, (5, 5, 48), 24, (1, 1), ifm_bits=16, seed=3),
    "conv_weight_zp": Layer(False, (12, 12, 8), 5, (3, 3), weight_zp=7, seed=4),
    "conv_dilation_y": Layer(False, (12, 12, 6), 12, (3, 3), dilation=(2, 1), seed=5),
    "conv_stride2": Layer(False, (13, 13, 16), 17, (3, 3), stride=(2, 2), seed=6),
    "conv_9x9": Layer(False, (12, 12, 4), 8, (9, 9), seed=7),
    "fully_connected": Layer(False, (1, 1, 100), 10, (1, 1), seed=8),
    "depthwise": Layer(True, (9, 9, 16), 16, (3, 3), seed=9),
    "depthwise_dilated": Layer(True, (14, 14, 24), 24, (5, 5), dilation=(2, 2), seed=10),
    "depthwise_int16": Layer(True, (9, 9, 16), 16, (3, 3), ifm_bits=16, seed=11),
    "depthwise_multiplier2": Layer(True, (9, 9, 8), 16, (3, 3), seed=12),
    # Larger weights: U85 picks the fast (FWD) or the compressed (SWD) format by layer.
    "conv_64x96": Layer(False, (16, 16, 64), 96, (3, 3), seed=20),
    "conv1x1_200x130": Layer(False, (8, 8, 200), 130, (1, 1), seed=21),
    # Weights minus zero point beyond int8: U85's raw fast format stores a zero adjust.
    "conv_64x96_weight_zp": Layer(False, (16, 16, 64), 96, (3, 3), weight_zp=-20, seed=24),
    # Few distinct values: the codecs' palette modes (U85 FWD: 2-bit and 4-bit LUTs).
    "conv_4_values": Layer(False, (16, 16, 64), 96, (3, 3), seed=22, values=(-3, 0, 5, 7)),
    "conv_12_values": Layer(False, (16, 16, 64), 96, (3, 3), seed=23, values=tuple(range(-6, 6))),
    # Kernels Vela splits into several operations (stride > 3, dilation > 2) or tiles (> 8).
    "conv_stride4": Layer(False, (19, 19, 8), 12, (3, 3), stride=(4, 4), seed=30),
    "conv_dilation3": Layer(False, (20, 20, 8), 12, (3, 3), dilation=(3, 3), seed=31),
    "conv_1x9": Layer(False, (12, 20, 8), 8, (1, 9), seed=33),
    "conv_11x11_stride3": Layer(False, (20, 20, 3), 8, (11, 11), stride=(3, 3), seed=34),
}
# U55/U65 leave this one on the CPU; U85 runs it as 25 chained 1x1 depthwise operations.
U85_LAYERS = {"depthwise_stride4": Layer(True, (17, 17, 8), 8, (5, 5), stride=(4, 4), seed=32)}


@pytest.mark.parametrize("name,acc", [(n, a) for n in LAYERS for a in CONFIGS + U85_CONFIGS]
                         + [(n, a) for n in U85_LAYERS for a in U85_CONFIGS])
def test_single_layer_weights_equal_tosa(name, acc, tmp_path):
    tosa = {**LAYERS, **U85_LAYERS}[name].tosa()
    ops = compile_and_decode(tosa, acc, tmp_path)
    assert ops, f"{name}: Vela emitted no convolution for the layer"
    check_against_tosa(ops, tosa_layers(tosa))


@pytest.mark.parametrize("target", ["ethos-u55-128", "ethos-u65-512", "ethos-u85-256"])
def test_edgetorch_pte_weights_equal_tosa(target, tmp_path_factory, tmp_path):
    tosa, pte = weightnet_pte(target, tmp_path_factory.mktemp("npu_weights"))
    assert check_pte(pte, [tosa], tmp_path) >= 6
