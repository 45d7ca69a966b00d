"""Reference side of the quantized XNNPACK tests; runs ONLY in the reference venv (executorch 1.5.1).

    python xnn_qref.py export DIR [CASE ...]
        For every case (default: all of ``CASES``), quantize the model as ExecuTorch's docs do,
        lower it with ``XnnpackPartitioner`` and write DIR/CASE.pte and DIR/CASE.io.npz:
        ``in_<k>`` (the inputs), ``et_<k>`` (ExecuTorch's runtime output on them) and
        ``fq_<k>`` (the converted, fake-quant eager model's output). A case that fails writes
        DIR/CASE.err.txt instead.

Only ``edgetorch.examples`` (torch-only) is imported from edgetorch.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "src"))

from edgetorch.examples import get_example  # noqa: E402


class Blocks(nn.Module):
    """Conv, depthwise conv, add, mul, cat, max / avg / adaptive-avg pooling, hardtanh."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.c3 = nn.Conv2d(8, 8, 1)
        self.c4 = nn.Conv2d(16, 8, 3, stride=2, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        a = torch.relu(self.c1(x))
        b = self.c2(a)
        s = a + b
        m = s * self.c3(a)
        y = torch.cat([s, m], dim=1)
        y = nn.functional.max_pool2d(y, 2)
        y = torch.relu(self.c4(y))
        y = nn.functional.avg_pool2d(y, 2)
        y = nn.functional.adaptive_avg_pool2d(y, 1)
        return self.fc(torch.flatten(y, 1))


class SmallMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(64, 96), nn.Linear(96, 64), nn.Linear(64, 10)

    def forward(self, x):
        return self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))


def _example(name: str, shape=None):
    spec = get_example(name)
    model = spec.factory()
    inputs = spec.example_inputs()
    if shape is not None:
        inputs = (torch.randn(*shape, generator=torch.Generator().manual_seed(1)),)
    return model, inputs


def _blocks():
    torch.manual_seed(0)
    return Blocks().eval(), (torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1)),)


def _small_mlp():
    torch.manual_seed(0)
    return SmallMLP().eval(), (torch.randn(3, 64, generator=torch.Generator().manual_seed(1)),)


MODELS = {
    "cnn": lambda: _example("cnn"),
    "mlp": lambda: _example("mlp"),
    "small_mlp": _small_mlp,
    "mobilenet_v2": lambda: _example("mobilenet_v2", (1, 3, 64, 64)),
    "blocks": _blocks,
    "llama": lambda: _example("llama_decoder"),
}

# case name -> (model, scheme)
CASES = {
    "cnn_static_pc": ("cnn", "static_pc"),
    "cnn_static_pt": ("cnn", "static_pt"),
    "cnn_dynamic": ("cnn", "dynamic"),
    "mlp_static_pc": ("mlp", "static_pc"),
    "mlp_static_pt": ("mlp", "static_pt"),
    "mlp_dynamic": ("mlp", "dynamic"),
    "small_mlp_static_pc": ("small_mlp", "static_pc"),
    "small_mlp_8da4w": ("small_mlp", "8da4w"),
    "mobilenet_v2_static_pc": ("mobilenet_v2", "static_pc"),
    "blocks_static_pc": ("blocks", "static_pc"),
    "blocks_static_pt": ("blocks", "static_pt"),
    "mlp_8da4w": ("mlp", "8da4w"),
    "llama_8da4w": ("llama", "8da4w"),
    "llama_dynamic": ("llama", "dynamic"),
    "llama_static_pc": ("llama", "static_pc"),
}


def _pt2e(model, inputs, per_channel: bool, dynamic: bool):
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    gm = torch.export.export(model, inputs).module()
    cfg = get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=dynamic)
    prepared = prepare_pt2e(gm, XNNPACKQuantizer().set_global(cfg))
    prepared(*inputs)
    gen = torch.Generator().manual_seed(7)
    for _ in range(3):  # a little more calibration, same shapes
        prepared(*[torch.randn(t.shape, generator=gen) if t.is_floating_point() else t
                   for t in inputs])
    return convert_pt2e(prepared)


def _8da4w(model):
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    cfg = Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4,
                                                weight_granularity=PerGroup(32))
    quantize_(model, cfg, filter_fn=lambda m, fqn: isinstance(m, nn.Linear)
              and m.in_features % 32 == 0)
    return model


def build(case: str):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    model_name, scheme = CASES[case]
    model, inputs = MODELS[model_name]()
    if scheme == "8da4w":
        quantized = _8da4w(model)
    else:
        quantized = _pt2e(model, inputs, scheme != "static_pt", scheme == "dynamic")
    with torch.no_grad():
        fq = quantized(*inputs)
    fq = [fq] if isinstance(fq, torch.Tensor) else list(fq)
    ep = torch.export.export(quantized, inputs)
    program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
    return program.buffer, inputs, fq


def export(directory: str, *cases: str) -> None:
    import executorch.kernels.quantized  # noqa: F401  (out variants of any leftover Q/DQ)
    from executorch.runtime import Runtime

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    for case in cases or CASES:
        try:
            buf, inputs, fq = build(case)
            pte = out / f"{case}.pte"
            pte.write_bytes(buf)
            method = Runtime.get().load_program(pte).load_method("forward")
            et = method.execute(list(inputs))
            arrays = {f"in_{k}": t.numpy() for k, t in enumerate(inputs)}
            arrays.update({f"et_{k}": t.detach().numpy() for k, t in enumerate(et)})
            arrays.update({f"fq_{k}": t.detach().numpy() for k, t in enumerate(fq)})
            np.savez(out / f"{case}.io.npz", **arrays)
        except Exception:
            (out / f"{case}.err.txt").write_text(traceback.format_exc())


if __name__ == "__main__":
    cmd, *rest = sys.argv[1:]
    {"export": export}[cmd](*rest)
