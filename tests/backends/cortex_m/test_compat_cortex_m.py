"""Against ExecuTorch 1.5.1's Cortex-M flow (``aot_arm_compiler``'s ``_to_edge_cortex_m``, run by
``ref_cortex_m.py`` in the Arm reference venv), for seeded CNNs and an MLP with softmax:

- edgetorch's flow writes the same ``.pte``, byte for byte;
- ExecuTorch's ``.pte`` runs in edgetorch's runtime (ExecuTorch's own Python runtime has no
  kernels for ``cortex_m::`` operators);
- each ``cortex_m::`` kernel, fed the values ExecuTorch's edge program computed, gives that
  program's result: bit-exact where ExecuTorch's Python reference is integer arithmetic, within
  one quantization step where it computes in float (softmax, average pooling, division,
  quantize);
- the whole program's outputs are within one quantization step of the edge program's.
"""

from __future__ import annotations

import json
import re

import flatbuffers
import numpy as np
import pytest
import torch
from cortex_m_models import MODELS

from edgetorch.backends.arm.scripts.cortex_m import to_edge_cortex_m
from edgetorch.exir import ExecutorchBackendConfig
from edgetorch.kernels import KERNELS
from edgetorch.runtime import Runtime
from edgetorch.schema.pte import PteFile
from edgetorch.schema.scalar_type import ScalarType

pytestmark = pytest.mark.compat

# A CNN and an MLP with softmax by default (ExecuTorch's lowering of each takes a minute or
# more); the other models and targets with -m slow.
_FAST = [("small_cnn", "cortex-m55"), ("mlp", "cortex-m55")]
_SLOW = [("ds_cnn", "cortex-m55"), ("inverted_residual", "cortex-m55"),
         ("upsample", "cortex-m55"), ("batch_matmul", "cortex-m55"), ("mlp", "cortex-m4"),
         ("small_cnn", "cortex-m0plus")]
CASES = [*_FAST, *(pytest.param(*case, marks=pytest.mark.slow) for case in _SLOW)]
IDS = [f"{m}-{t}" for m, t in [*_FAST, *_SLOW]]
# ExecuTorch's Python references that compute in float: a result may round the other way
FLOAT_REFERENCE = {"quantize_per_tensor", "softmax", "quantized_avg_pool2d",
                   "quantized_avg_pool2d_nhwc", "quantized_div"}
DTYPES = {"int8": int(ScalarType.CHAR), "int16": int(ScalarType.SHORT)}


def _npz(path) -> list[np.ndarray]:
    with np.load(path) as data:
        return [data[k] for k in sorted(data.files, key=lambda k: int(k[4:]))]


def ours_pte(model: str, target: str) -> bytes:
    module, inputs = MODELS[model]()
    module.requires_grad_(False)
    exported = torch.export.export(module, inputs, strict=True)
    _, edge, _ = to_edge_cortex_m(exported.module(), inputs, target)
    return edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False)).buffer


@pytest.mark.parametrize(("model", "target"), CASES, ids=IDS)
def test_pte_byte_identical(ref_cortex_m, model, target):
    folder = ref_cortex_m(model, target)
    ours, ref = ours_pte(model, target), (folder / "model.pte").read_bytes()
    # flatbuffers' Builder lays tables out differently from one release to the next, and both
    # ExecuTorch's serializer and ours drive it: bytes are comparable with the same release
    theirs_version = json.loads((folder / "env.json").read_text())["flatbuffers"]
    if theirs_version != flatbuffers.__version__:
        assert PteFile.parse(ours).program == PteFile.parse(ref).program
        pytest.skip(f"same program; the bytes need flatbuffers {theirs_version} (ExecuTorch's "
                    f"environment), this one has {flatbuffers.__version__} (make test-arm)")
    assert ours == ref


def _with_layout(value: np.ndarray, dim_order: list[int]) -> np.ndarray:
    """``value`` (logical) stored in ``dim_order``: a strided view, as the runtime gives it."""
    if list(dim_order) == sorted(dim_order):
        return np.ascontiguousarray(value)
    physical = np.ascontiguousarray(value.transpose(dim_order))
    return physical.transpose(np.argsort(dim_order))


class _Graph:
    def __init__(self, folder):
        record = json.loads((folder / "nodes.json").read_text())
        self.nodes, self.layouts = record["nodes"], record["layouts"]
        with np.load(folder / "values.npz") as data:
            self.values = {k: data[k] for k in data.files}

    def tensor(self, name: str) -> np.ndarray:
        return _with_layout(self.values[name], self.layouts[name])

    def decode(self, arg):
        if isinstance(arg, list):
            return [self.decode(a) for a in arg]
        if isinstance(arg, dict) and "ref" in arg:
            return self.tensor(arg["ref"])
        if isinstance(arg, dict) and "dtype" in arg:
            return DTYPES[arg["dtype"]]
        return arg


def _op(node: dict) -> str | None:
    """The ``cortex_m`` operator a recorded node calls (``str`` of an Edge operator)."""
    found = re.search(r"\bcortex_m\.(\w+)\.default\b", node["target"])
    return found.group(1) if found else None


def _cortex_m_nodes(graph: _Graph):
    for node in graph.nodes:
        if _op(node) is not None:
            yield node, _op(node)


@pytest.mark.parametrize(("model", "target"), CASES, ids=IDS)
def test_kernels_match_reference_ops(ref_cortex_m, model, target):
    graph = _Graph(ref_cortex_m(model, target))
    checked = 0
    for node, op in _cortex_m_nodes(graph):
        want = graph.values[node["name"]]
        out = np.zeros_like(graph.tensor(node["name"]))
        out = _with_layout(out, graph.layouts[node["name"]])
        KERNELS[f"cortex_m::{op}.out"].fn(*graph.decode(node["args"]), out)
        if op == "dequantize_per_tensor":
            np.testing.assert_array_equal(out, want, err_msg=node["name"])
        elif op in FLOAT_REFERENCE:
            steps = np.abs(out.astype(np.int64) - want.astype(np.int64))
            assert steps.max(initial=0) <= 1, f"{node['name']} ({op}): {steps.max()} steps"
        else:
            np.testing.assert_array_equal(out, want, err_msg=f"{node['name']} ({op})")
        checked += 1
    assert checked >= 3


def _output_scales(graph: _Graph) -> list[float]:
    """The scale of each program output (outputs are cortex_m dequantize calls)."""
    last = [n for n in graph.nodes if _op(n) == "dequantize_per_tensor"]
    return [n["args"][1] for n in last[-1:]]


@pytest.mark.parametrize(("model", "target"), CASES, ids=IDS)
def test_executorch_pte_runs(ref_cortex_m, model, target):
    folder = ref_cortex_m(model, target)
    method = Runtime.get().load_program(str(folder / "model.pte")).load_method("forward")
    outputs = method.execute(_npz(folder / "inputs.npz"))
    wanted = _npz(folder / "edge.npz")
    assert len(outputs) == len(wanted)
    (scale,) = _output_scales(_Graph(folder))
    for got, want in zip(outputs, wanted):
        got = np.asarray(got)
        assert got.shape == want.shape and got.dtype == want.dtype
        steps = np.abs(got.astype(np.float64) - want) / scale
        assert steps.max() <= 1 + 1e-3, f"{steps.max():.2f} output steps from the edge program"
