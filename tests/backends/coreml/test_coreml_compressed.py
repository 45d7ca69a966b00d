"""Compressed weights in a Core ML delegate: the ``constexpr_*`` operations (palettized,
linearly quantized, pruned, and their joint forms) run by the ML program interpreter.

Each case compresses a small conv + linear model with coremltools' own API
(``coremltools.optimize.coreml``), puts the ML program through edgetorch's Core ML delegate
(``CoreMLBackend.preprocess_model``, as ``preprocess`` does after conversion) and compares
with the same program whose weights coremltools itself decompressed
(``coremltools.optimize.coreml.decompress_weights``): the weights the interpreter reconstructs
(LUT lookups, ``scale * (q - offset)``, masks) are coremltools' bit for bit, and so are the
outputs. ExecuTorch's documented palettization route (torchao's ``CodebookWeightOnlyConfig``,
whose k-means is coremltools') goes through ``CoreMLPartitioner`` and is compared with eager.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from cm_cases import eager, lower, run

from edgetorch.backends.apple.coreml.runtime import CoreMLBackend, mil_ops

pytestmark = pytest.mark.torch
ct = pytest.importorskip("coremltools")
cto = pytest.importorskip("coremltools.optimize")


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 16, 3, padding=1)
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.conv(x)).mean(dim=(2, 3))
        return self.fc2(torch.relu(self.fc1(h)))


def _cfg(config):
    return cto.coreml.OptimizationConfig(config)


def _palettize(**kw):
    return lambda m, joint=False: cto.coreml.palettize_weights(
        m, _cfg(cto.coreml.OpPalettizerConfig(mode="kmeans", weight_threshold=0, **kw)),
        joint_compression=joint)


def _quantize(**kw):
    return lambda m, joint=False: cto.coreml.linear_quantize_weights(
        m, _cfg(cto.coreml.OpLinearQuantizerConfig(weight_threshold=0, **kw)),
        joint_compression=joint)


def _prune(m, joint=False):
    return cto.coreml.prune_weights(
        m, _cfg(cto.coreml.OpMagnitudePrunerConfig(target_sparsity=0.5, weight_threshold=0)))


iOS16, iOS18, FP32, FP16 = "iOS16", "iOS18", "FLOAT32", "FLOAT16"
# (id, deployment target, precision, compressions applied in order (the later ones joint),
#  the constexpr operations the program holds)
CASES = [
    ("lut-4bit-ios16", iOS16, FP32, [_palettize(nbits=4)], {"constexpr_lut_to_dense"}),
    ("lut-4bit-ios16-fp16", iOS16, FP16, [_palettize(nbits=4)], {"constexpr_lut_to_dense"}),
    ("lut-3bit-grouped", iOS18, FP32,
     [_palettize(nbits=3, granularity="per_grouped_channel", group_size=4)],
     {"constexpr_lut_to_dense"}),
    ("lut-vector", iOS18, FP32, [_palettize(nbits=2, cluster_dim=2)],
     {"constexpr_lut_to_dense"}),
    ("lut-channel-scale", iOS18, FP32, [_palettize(nbits=4, enable_per_channel_scale=True)],
     {"constexpr_lut_to_dense", "constexpr_blockwise_shift_scale"}),
    ("lut-quantized", iOS18, FP32,
     [_palettize(nbits=4), _quantize(mode="linear_symmetric", granularity="per_tensor")],
     {"constexpr_lut_to_dense", "constexpr_blockwise_shift_scale"}),
    ("affine-8bit-ios16", iOS16, FP32, [_quantize(mode="linear")],
     {"constexpr_affine_dequantize"}),
    ("blockwise-int4", iOS18, FP32,
     [_quantize(mode="linear_symmetric", dtype="int4", granularity="per_block", block_size=4)],
     {"constexpr_blockwise_shift_scale"}),
    ("sparse-ios16", iOS16, FP32, [_prune], {"constexpr_sparse_to_dense"}),
    ("sparse-lut", iOS18, FP32, [_prune, _palettize(nbits=2)],
     {"constexpr_lut_to_sparse", "constexpr_sparse_to_dense"}),
    ("sparse-quantized", iOS18, FP32, [_prune, _quantize(mode="linear_symmetric")],
     {"constexpr_sparse_blockwise_shift_scale", "constexpr_sparse_to_dense"}),
]


def _delegate(mlmodel):
    from edgetorch.backends.apple.coreml.compiler import CoreMLBackend as AheadOfTime

    blob = AheadOfTime.preprocess_model(mlmodel, AheadOfTime.MODEL_TYPE.MODEL).processed_bytes
    return CoreMLBackend().init(memoryview(blob), {})


def _execute(handle, x: np.ndarray) -> np.ndarray:
    values = [x, np.zeros((x.shape[0], 8), np.float32)]
    CoreMLBackend().execute(handle, values, [0, 1])
    return values[1]


@pytest.fixture(scope="module")
def converted():
    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(2, 4, 6, 6)
    ep = torch.export.export(model, (x,)).run_decompositions({})
    cache = {}

    def get(target: str, precision: str):
        if (target, precision) not in cache:
            cache[target, precision] = ct.convert(
                ep, convert_to="mlprogram", minimum_deployment_target=getattr(ct.target, target),
                compute_precision=getattr(ct.precision, precision), skip_model_load=True)
        return cache[target, precision]
    return get, model, x.numpy()


@pytest.mark.parametrize("target, precision, compressions, ops",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_compressed_weights_decompress_as_coremltools_does(converted, target, precision,
                                                           compressions, ops):
    get, model, x = converted
    compressed = get(target, precision)
    for k, compress in enumerate(compressions):
        compressed = compress(compressed, joint=k > 0)
    ours = _delegate(compressed)
    theirs = _delegate(cto.coreml.decompress_weights(compressed))
    assert {s for s in ours.operators_run if s.startswith("constexpr_")} == ops
    assert not any(s.type.startswith("constexpr_") for s in ours.steps)  # all at load
    assert not any(s.startswith("constexpr_") for s in theirs.operators_run)
    weights = [n for n, v in theirs.program.constants.items()
               if isinstance(v, np.ndarray) and v.ndim >= 2]
    assert len(weights) == 3  # the conv's and the two linears'
    for name in weights:
        np.testing.assert_array_equal(ours.program.constants[name],
                                      theirs.program.constants[name], err_msg=name)
    got = _execute(ours, x)
    np.testing.assert_array_equal(got, _execute(theirs, x))
    with torch.no_grad():
        assert np.abs(got - model(torch.from_numpy(x)).numpy()).max() > 0  # it did compress


def test_lut_to_dense_follows_the_mil_definition():
    """The two examples of coremltools' ``constexpr_lut_to_dense`` (iOS 18) docstring: one
    table per block of rows, and a vector table laid out along ``vector_axis``."""
    lut_to_dense = mil_ops.MIL_OPS["constexpr_lut_to_dense"]
    indices = np.array([2, 3, 3, 0, 1, 0, 3, 0, 2, 1, 0, 3], np.uint8).reshape(6, 2)
    lut = np.array([1, 5, 9, 13, 2, 10, 18, 26], np.float32).reshape(2, 1, 4, 1)
    np.testing.assert_array_equal(lut_to_dense(indices, lut), [[9, 13], [13, 1], [5, 1],
                                                               [26, 2], [18, 10], [2, 26]])
    a, b = [1, 2, 3], [4, 5, 6]
    indices = np.array([[[0, 0], [1, 0]], [[1, 1], [0, 0]]], np.uint8)
    lut = np.array([a, b], np.float32).reshape(1, 1, 1, 2, 3)
    np.testing.assert_array_equal(lut_to_dense(indices, lut, vector_axis=2),
                                  [[a + a, b + a], [b + b, a + a]])
    np.testing.assert_array_equal(lut_to_dense(indices, lut, vector_axis=1),
                                  [[[1, 1], [2, 2], [3, 3], [4, 1], [5, 2], [6, 3]],
                                   [[4, 4], [5, 5], [6, 6], [1, 1], [2, 2], [3, 3]]])
    # iOS 16: one table, 2-bit indices packed low bits first (the docstring's 5 elements)
    packed = np.array([0b01_10_11_00, 0b11], np.uint8)
    np.testing.assert_array_equal(
        lut_to_dense(packed, np.array([10, 11, 12, 13], np.float32), shape=np.array([5])),
        [10, 13, 12, 11, 13])


def test_a_corrupt_look_up_table_is_refused_by_name():
    from edgetorch.backends.apple.coreml.runtime.interpreter import _Step
    from edgetorch.errors import KernelError

    step = _Step("constexpr_lut_to_dense", mil_ops.MIL_OPS["constexpr_lut_to_dense"],
                 {"indices": [("value", np.zeros(2, np.uint8))],
                  "lut": [("value", np.zeros(3, np.float32))],
                  "shape": [("value", np.array([4]))]}, [("w", None)])
    with pytest.raises(KernelError, match="constexpr_lut_to_dense .*2, 4, 16, 64 or 256"):
        CoreMLBackend()._run(step, {})


def test_codebook_palettized_linears_through_the_partitioner_match_eager():
    """ExecuTorch's palettization route (torchao ``CodebookWeightOnlyConfig``, iOS 18):
    ``dequantize_codebook`` becomes ``constexpr_lut_to_dense``; fp32 within 1e-5 of the
    palettized model run eagerly (which looks the same tables up in torch)."""
    pytest.importorskip("torchao.prototype.quantization.codebook_coreml")
    from torchao.prototype.quantization.codebook_coreml import CodebookWeightOnlyConfig
    from torchao.quantization.quant_api import quantize_

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 8)).eval()
    x = (torch.randn(2, 16),)
    quantize_(model, CodebookWeightOnlyConfig(dtype=torch.uint3, block_size=[8, -1]))
    pte = lower(model, x, minimum_deployment_target=ct.target.iOS18,
                compute_precision=ct.precision.FLOAT32)
    outs, (handle,) = run(pte, x)
    np.testing.assert_allclose(outs[0], eager(model, x)[0], atol=1e-5, rtol=1e-5)
    assert handle.operators_run["constexpr_lut_to_dense"] == 2
