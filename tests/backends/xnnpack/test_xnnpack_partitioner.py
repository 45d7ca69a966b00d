"""XnnpackPartitioner + XnnpackBackend.preprocess, checked in edgetorch's runtime: every
lowered operator pattern and the example models against eager, partial delegation, the
logged reasons, delegation reports, named data. (ExecuTorch's runtime: test_xnnpack_compat_aot.)
"""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch import nn
from xnn_aot_cases import (
    CASES,
    IDS,
    Fn,
    dynamic_batch_programs,
    eager,
    lower,
    program_summary,
    run_ours,
)

from edgetorch.backends.xnnpack import XnnpackPartitioner as ReExported
from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import (
    ConfigPrecisionType,
    XnnpackPartitioner,
)
from edgetorch.backends.xnnpack.serialization import deserialize_xnnpack_binary
from edgetorch.devtools.backend_debug import get_delegation_info
from edgetorch.examples import EXAMPLES
from edgetorch.exir import to_edge
from edgetorch.schema.pte import PteFile

PARTITIONER_LOG = "edgetorch.exir.backend.partitioner"


def test_seed_snippet_runs_with_renamed_imports():
    from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from edgetorch.exir import to_edge_transform_and_lower

    model, sample_inputs = EXAMPLES["simple_model"].build()
    et_program = to_edge_transform_and_lower(
        torch.export.export(model, sample_inputs), partitioner=[XnnpackPartitioner()]
    ).to_executorch()
    plan = et_program.executorch_program.execution_plan[0]
    assert [d.id for d in plan.delegates] == ["XnnpackBackend"]
    np.testing.assert_allclose(run_ours(et_program.buffer, sample_inputs)[0],
                               eager(model, sample_inputs)[0], atol=1e-5)
    assert ReExported is XnnpackPartitioner


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_operator_pattern_matches_eager(c):
    model, inputs = c.build()
    _, et = lower(model, inputs)
    delegates, portable = program_summary(et)
    assert delegates and set(delegates) == {"XnnpackBackend"}, c.name
    assert portable == sorted(c.portable), f"{c.name}: left portable {portable}"
    for got, want in zip(run_ours(et.buffer, inputs), eager(model, inputs)):
        np.testing.assert_allclose(got, want, atol=c.atol, rtol=1e-5, err_msg=c.name)


# (example, delegates, portable operators): the four CNN/MLP examples are one delegate, as
# with ExecuTorch; the encoder splits at the layer norms and the attention-mask logic.
MODELS = [
    ("cnn", 1, []),
    ("mlp", 1, []),
    ("transformer_encoder", 3, ["aten::any", "aten::eq", "aten::full_like",
                                "aten::logical_not", "aten::native_layer_norm",
                                "aten::where"]),
    ("mobilenet_v2", 1, []),
    ("resnet18", 1, []),
]


@pytest.mark.parametrize("name,num_delegates,portable", MODELS, ids=[m[0] for m in MODELS])
def test_example_model_matches_eager(name, num_delegates, portable):
    model, inputs = EXAMPLES[name].build()
    _, et = lower(model, inputs)
    delegates, ops = program_summary(et)
    assert delegates == ["XnnpackBackend"] * num_delegates
    assert ops == portable
    for got, want in zip(run_ours(et.buffer, inputs), eager(model, inputs)):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def test_dynamic_batch_runs_at_every_size():
    """Values are declared at the upper bound; a reshape leaves the batch for XNNPACK to
    infer (new_shape 0). The CNN's flatten takes its size from sym_size, which stays
    portable and splits it in two delegates."""
    for name, model, et, batches in dynamic_batch_programs():
        delegates, _ = program_summary(et)
        assert len(delegates) == (1 if name == "linear_relu_reshape" else 2), name
        for inputs in batches:
            got, want = run_ours(et.buffer, inputs)[0], eager(model, inputs)[0]
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, atol=1e-5, err_msg=f"{name} {want.shape}")


@pytest.mark.parametrize("name", sorted(set(EXAMPLES) - {m[0] for m in MODELS}))
def test_other_examples_match_eager(name):
    model, inputs = EXAMPLES[name].build()
    _, et = lower(model, inputs)
    assert "XnnpackBackend" in program_summary(et)[0]
    for got, want in zip(run_ours(et.buffer, inputs), eager(model, inputs)):
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


class _Middle(nn.Module):
    """conv -> (cumsum: no XNNPACK lowering) -> linear: two delegates around a kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, a):
        return self.fc(torch.relu(self.conv(a)).cumsum(1).flatten(1))


def test_partial_delegation_around_an_unsupported_operator(caplog):
    torch.manual_seed(0)
    model, inputs = _Middle().eval(), (torch.randn(2, 3, 6, 6),)
    with caplog.at_level(logging.INFO, logger=PARTITIONER_LOG):
        edge, et = lower(model, inputs)
    delegates, portable = program_summary(et)
    assert delegates == ["XnnpackBackend"] * 2
    assert portable == ["aten::cumsum"]
    kinds = [type(i.instr_args).__name__
             for i in et.executorch_program.execution_plan[0].chains[0].instructions]
    assert kinds == ["DelegateCall", "KernelCall", "DelegateCall"]
    np.testing.assert_allclose(run_ours(et.buffer, inputs)[0], eager(model, inputs)[0],
                               atol=1e-5)
    assert "did not take %aten_cumsum_default (aten.cumsum.default): XNNPACK has no lowering for " \
           "aten.cumsum.default" in caplog.text

    info = get_delegation_info(edge.exported_program().graph_module)
    assert info.num_delegated_subgraphs == 2
    # cumsum and the getitems that read the two delegates' outputs, as ExecuTorch counts
    # (plus what to_executorch, run on this manager above, added to its graph)
    assert info.delegation_by_operator["aten_cumsum_default"].non_delegated == 1
    assert info.delegation_by_operator["getitem"].non_delegated == 2
    assert "Total delegated subgraphs: 2" in info.get_summary()


class _Rejected(nn.Module):
    def forward(self, a, i):
        return (a[:, ::2] * 2, torch.softmax(a, 0), i + 1, a.to(torch.float16) * 2)


@pytest.mark.parametrize("expected", [
    "did not take %aten_slice_copy_tensor (aten.slice_copy.Tensor): step 2 (XNNPACK slices with step 1 only)",
    "did not take %aten__softmax_default (aten._softmax.default): softmax over dim 0 of a rank-2 tensor",
    "did not take %aten_add_tensor (aten.add.Tensor): input %i is torch.int64 (XNNPACK takes "
    "float32 and float16)",
    # float16 is delegated (the fp16 ``* 2`` is), but never in one node with float32
    "did not take %dim_order_ops__to_dim_order_copy_default_1 "
    "(dim_order_ops._to_dim_order_copy.default): it mixes ['torch.float16', 'torch.float32'] "
    "(a delegate computes in one float type)",
])
def test_each_rejection_is_logged_with_its_reason(caplog, expected):
    inputs = (torch.randn(4, 6), torch.arange(3))
    with caplog.at_level(logging.INFO, logger=PARTITIONER_LOG):
        lower(_Rejected(), inputs)
    assert expected in caplog.text


def test_delegation_info_of_the_cnn():
    model, inputs = EXAMPLES["cnn"].build()
    edge, _ = lower(model, inputs)
    info = get_delegation_info(edge.exported_program().graph_module)
    # the one non-delegated node is the getitem of the delegate's output (ExecuTorch's count)
    assert (info.num_delegated_subgraphs, info.num_non_delegated_nodes) == (1, 1)
    assert info.delegation_by_operator["getitem"].non_delegated == 1
    assert info.num_delegated_nodes > 10
    assert "Number of non-delegated nodes: 1" in info.get_summary()


def test_weights_are_named_data_keyed_by_their_sha256():
    model, inputs = EXAMPLES["cnn"].build()
    _, et = lower(model, inputs)
    pte = PteFile.parse(et.buffer)
    blob = deserialize_xnnpack_binary(pte.delegate_bytes(pte.program.execution_plan[0].delegates[0]))
    assert len(blob.constant_data) == 0  # ExecuTorch 1.5 leaves the blob's region empty
    entries = blob.graph.constant_data[1:]
    assert blob.graph.constant_data[0] == x.ConstantDataOffset(0, 0, "")
    assert len(entries) == 8  # 3 conv filters + 3 folded biases + fc weight and bias
    assert sorted(pte.named_data_keys()) == sorted(e.named_key for e in entries)
    import hashlib

    for e in entries:
        data = bytes(pte.named_data(e.named_key))
        assert (e.offset, e.size) == (x.UINT64_MAX, len(data))
        assert hashlib.sha256(data).hexdigest() == e.named_key


def test_conv_chain_stays_nhwc_with_transposes_only_at_the_ends():
    model, inputs = EXAMPLES["cnn"].build()
    _, et = lower(model, inputs)
    pte = PteFile.parse(et.buffer)
    graph = deserialize_xnnpack_binary(
        pte.delegate_bytes(pte.program.execution_plan[0].delegates[0])).graph
    kinds = [type(n.xnode_union).__name__ for n in graph.xnodes]
    assert kinds == ["XNNStaticTranspose", "XNNConv2d", "XNNMaxPooling2d", "XNNConv2d",
                     "XNNAvgPooling2d", "XNNConv2d", "XNNGlobalAvgPooling2d",
                     "XNNStaticTranspose", "XNNStaticReshape", "XNNFullyConnected"]
    # batch norms folded into the convolutions, ReLUs into their output range
    assert all(n.output_min_max == x.OutputMinMax(0.0, float("inf"))
               for n in graph.xnodes if isinstance(n.xnode_union, x.XNNConv2d))


def test_per_op_mode_makes_one_delegate_per_operator():
    model = Fn(lambda m, a: (a + 1).relu() * 2)
    inputs = (torch.randn(3, 4),)
    _, et = lower(model, inputs, XnnpackPartitioner(per_op_mode=True))
    delegates, portable = program_summary(et)
    assert (delegates, portable) == (["XnnpackBackend"] * 3, [])
    np.testing.assert_allclose(run_ours(et.buffer, inputs)[0], eager(model, inputs)[0])


def test_without_fp32_precision_nothing_is_delegated(caplog):
    model = Fn(lambda m, a: a * 2)
    with caplog.at_level(logging.INFO, logger=PARTITIONER_LOG):
        _, et = lower(model, (torch.randn(2),),
                      XnnpackPartitioner(config_precisions=ConfigPrecisionType.STATIC_QUANT))
    assert program_summary(et) == ([], ["aten::mul"])
    assert "FP32 is not among config_precisions" in caplog.text


def test_to_edge_then_to_backend_takes_decomposed_operators():
    """Without to_edge_transform_and_lower, linear arrives as permute_copy + addmm (still
    XNNPACK's) and max_pool2d as max_pool2d_with_indices, which stays outside as in ExecuTorch
    1.5.1 (its partitioner takes only max_pool2d kept whole)."""
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(36, 5))
    model.eval()
    inputs = (torch.randn(2, 3, 8, 8),)
    edge = to_edge(torch.export.export(model, inputs)).to_backend(XnnpackPartitioner())
    et = edge.to_executorch()
    assert program_summary(et) == (["XnnpackBackend", "XnnpackBackend"],
                                   ["aten::max_pool2d_with_indices"])
    np.testing.assert_allclose(run_ours(et.buffer, inputs)[0], eager(model, inputs)[0],
                               atol=1e-5)


def test_runtime_half_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import edgetorch.backends.xnnpack as x, edgetorch.runtime\n"
            "assert 'edgetorch.backends.xnnpack.xnnpack_preprocess' not in sys.modules\n"
            "print(x.BACKEND_ID)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "XnnpackBackend"
