"""The weights and scales of real Vela 5.1.0 (Regor) output, decoded from the command stream's
WEIGHT/SCALE ranges, equal the TOSA graph's quantized weights (minus zero point), biases and
rescale factors: for a small net compiled for every U55/U65 MAC config, and for the ``.pte``
edgetorch's Ethos-U flow writes."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ethosu.vela", reason="the NPU weight tests need ethos-u-vela (make test-arm)")
pytest.importorskip("tosa_reference_model", reason="the NPU weight tests need tosa-tools")
torch = pytest.importorskip("torch")

from npu_weight_streams import decode_ops  # noqa: E402
from torch import nn  # noqa: E402

from edgetorch.backends.arm.ethosu.vela import vela_compile  # noqa: E402
from edgetorch.backends.arm.ethosu.vela_bin import parse_vela_bin  # noqa: E402
from edgetorch.backends.arm.runtime.tosa_graph import read_tosa  # noqa: E402
from edgetorch.schema.pte import PteFile  # noqa: E402

CONFIGS = ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256",
           "ethos-u65-512"]


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


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """(TOSA bytes, .pte bytes) of WeightNet through edgetorch's Ethos-U flow for U55-128."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    from edgetorch.backends.arm.ethosu import EthosUCompileSpec, EthosUPartitioner
    from edgetorch.backends.arm.quantizer import EthosUQuantizer, get_symmetric_quantization_config
    from edgetorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower

    torch.manual_seed(0)
    model, inputs = WeightNet().eval(), (torch.randn(1, 3, 17, 17),)
    inter = tmp_path_factory.mktemp("npu_weights")
    cs = EthosUCompileSpec("ethos-u55-128")
    cs.dump_intermediate_artifacts_to(str(inter))
    quantizer = EthosUQuantizer(cs)
    quantizer.set_global(get_symmetric_quantization_config())
    prepared = prepare_pt2e(torch.export.export(model, inputs).module(), quantizer)
    prepared(*inputs)
    exported = torch.export.export(convert_pt2e(prepared), inputs)
    edge = to_edge_transform_and_lower(exported, partitioner=[EthosUPartitioner(cs)])
    pte = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer
    (tosa,) = Path(inter).glob("output_*.tosa")
    return tosa.read_bytes(), bytes(pte)


def tosa_layers(tosa: bytes) -> list[dict]:
    """Each CONV2D / DEPTHWISE_CONV2D: OHWI weights minus zero point, bias, rescale factors."""
    block = read_tosa(tosa).main

    def const(name, dtype):
        return np.frombuffer(block.tensor(name).data, dtype)

    rescale_of = {op.inputs[0]: op for op in block.operators if op.op == "RESCALE"}
    layers = []
    for op in block.operators:
        if op.op not in ("CONV2D", "DEPTHWISE_CONV2D"):
            continue
        shape = block.tensor(op.inputs[1]).shape
        w = const(op.inputs[1], np.int8).reshape(shape).astype(np.int32)
        if op.op == "DEPTHWISE_CONV2D":  # HWCM -> [C*M, H, W, 1]
            w = w.reshape(shape[0], shape[1], -1).transpose(2, 0, 1)[..., None]
        zp = const(op.inputs[4], np.int8).astype(np.int32)
        w = w - (zp if zp.size == 1 else zp[:w.shape[0]].reshape(-1, 1, 1, 1))
        rescale = rescale_of[op.outputs[0]]
        layers.append(dict(name=op.outputs[0], kind="depthwise" if "DEPTH" in op.op else "conv",
                           weights=w, bias=const(op.inputs[2], np.int32).astype(np.int64),
                           multiplier=const(rescale.inputs[1], np.int32).astype(np.int64),
                           shift=const(rescale.inputs[2], np.int8).astype(np.int64),
                           covered=np.zeros(w.shape[0], bool)))
    return layers


def check_against_tosa(ops, layers) -> None:
    """Each NPU operation's weights are an OFM-channel slice of one TOSA layer's, with its bias
    and the same rescale factor (Vela drops common factors of two: compare as fractions);
    together the operations cover every channel of every layer."""
    for op in ops:
        o = op.weights.shape[0]
        matches = [(layer, s) for layer in layers if layer["kind"] == op.kind
                   and layer["weights"].shape[1:] == op.weights.shape[1:]
                   for s in range(layer["weights"].shape[0] - o + 1)
                   if np.array_equal(layer["weights"][s:s + o], op.weights)]
        assert matches, f"{op.kind} weights {op.weights.shape} match no TOSA layer's slice"
        layer, s = matches[0]
        np.testing.assert_array_equal(op.scales.bias, layer["bias"][s:s + o], err_msg=layer["name"])
        for c in range(o):
            ours = Fraction(int(op.scales.scale[c]), 1 << int(op.scales.shift[c]))
            ref = Fraction(int(layer["multiplier"][s + c]), 1 << int(layer["shift"][s + c]))
            assert ours == ref, (layer["name"], s + c, ours, ref)
        layer["covered"][s:s + o] = True
    for layer in layers:
        assert layer["covered"].all(), f"TOSA layer {layer['name']} has channels no NPU op uses"


@pytest.mark.parametrize("acc", CONFIGS)
def test_vela_output_weights_equal_tosa(acc, compiled, tmp_path):
    from edgetorch.backends.arm.ethosu import EthosUCompileSpec

    tosa, _ = compiled
    vela_compile(tosa, EthosUCompileSpec(acc).compiler_flags, str(tmp_path))
    with np.load(tmp_path / "output" / "out_vela.npz") as npz:
        ops = decode_ops(npz["cmd_data"].tobytes(), npz["weight_data"].tobytes(), acc)
    layers = tosa_layers(tosa)
    check_against_tosa(ops, layers)
    kinds = {(op.kind, bool(op.regs["NPU_SET_KERNEL_STRIDE"] & 4)) for op in ops}
    assert kinds == {("conv", True), ("conv", False), ("depthwise", False)}
    assert len(ops) >= len(layers) == 6


def test_edgetorch_pte_weights_equal_tosa(compiled):
    tosa, pte = compiled
    pf = PteFile.parse(pte)
    (delegate,) = pf.program.execution_plan[0].delegates
    blob = parse_vela_bin(pf.delegate_bytes(delegate))
    ops = decode_ops(blob.cmd_data, blob.weight_data, "ethos-u55-128")
    check_against_tosa(ops, tosa_layers(tosa))
