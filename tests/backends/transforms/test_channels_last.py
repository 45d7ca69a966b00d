"""The ``channels_last`` dialect: each operator is its ATen operator on NHWC data, it passes
``to_edge`` (a custom namespace, as in ExecuTorch), ``ReplaceOpsWithChannelsLastVariants``
brings it in, ``DecomposeChannelsLastPass`` turns it back into portable operators that run in
edgetorch's runtime with eager's numbers, and one left in the program is refused at
``to_executorch``."""

import pytest

torch = pytest.importorskip("torch")

import edgetorch.backends.transforms.channels_last_ops  # noqa: E402, F401
from edgetorch.backends.transforms.decompose_channels_last_pass import (  # noqa: E402
    DecomposeChannelsLastPass,
)
from edgetorch.backends.transforms.replace_ops_with_channels_last_variants import (  # noqa: E402
    ChannelsLastOpSpec,
    ReplaceOpsWithChannelsLastVariants,
)
from edgetorch.errors import UnsupportedOperatorError  # noqa: E402
from edgetorch.exir import to_edge  # noqa: E402
from edgetorch.exir.dialects._ops import ops as exir_ops  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

cl = torch.ops.channels_last


def _nhwc(x):
    return x.permute(0, 2, 3, 1).contiguous()


CASES = [  # (channels_last call, the ATen call on NCHW)
    (lambda x: cl.avg_pool2d(x, [3, 3], [2, 2], [1, 1], True, False),
     lambda x: torch.ops.aten.avg_pool2d(x, [3, 3], [2, 2], [1, 1], True, False)),
    (lambda x: cl.adaptive_avg_pool2d(x, [4, 4]),
     lambda x: torch.ops.aten.adaptive_avg_pool2d(x, [4, 4])),
    (lambda x: cl.upsample_bilinear2d(x, [16, 12], False, None),
     lambda x: torch.ops.aten.upsample_bilinear2d.vec(x, [16, 12], False, None)),
    (lambda x: cl.upsample_nearest2d(x, [16, 16], None),
     lambda x: torch.ops.aten.upsample_nearest2d.vec(x, [16, 16], None)),
    (lambda x: cl.max_pool2d(x, [2, 2], [2, 2]),
     lambda x: torch.ops.aten.max_pool2d(x, [2, 2], [2, 2])),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_each_operator_is_its_aten_operator_on_nhwc_data(case):
    ours, aten = CASES[case]
    x = torch.randn(2, 3, 8, 8)
    out = ours(_nhwc(x))
    assert out.is_contiguous()
    assert torch.equal(out, _nhwc(aten(x)))  # the same ATen kernel on the same values


def test_max_pool_indices_are_the_same_flat_positions():
    x = torch.randn(1, 2, 6, 6)
    values, indices = cl.max_pool2d_with_indices(_nhwc(x), [2, 2], [2, 2])
    ref_v, ref_i = torch.ops.aten.max_pool2d_with_indices(x, [2, 2], [2, 2])
    assert torch.equal(values, _nhwc(ref_v)) and torch.equal(indices, _nhwc(ref_i))


class ConvPool(torch.nn.Module):
    def forward(self, x, w, b):
        y = cl.convolution(x, w, b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
        values, indices = cl.max_pool2d_with_indices(y, [2, 2], [2, 2])
        return cl.permute_copy(values, [0, 3, 1, 2]), indices, cl.avg_pool2d(y, [2, 2], [2, 2])


def _program():
    args = (torch.randn(2, 8, 8, 3), torch.randn(4, 3, 3, 3), torch.randn(4))
    return torch.export.export(ConvPool(), args), args


def test_to_edge_keeps_the_dialect_and_decompose_runs_it_with_eagers_numbers():
    ep, args = _program()
    edge = to_edge(ep)
    targets = {n.target for n in edge.exported_program().graph.nodes}
    assert exir_ops.edge.channels_last.convolution.default in targets
    with pytest.raises(UnsupportedOperatorError, match="channels_last::convolution has no "
                                                       "out-variant overload"):
        edge.to_executorch()
    edge = to_edge(ep).transform([DecomposeChannelsLastPass()])
    names = {str(n.target) for n in edge.exported_program().graph.nodes}
    assert not any("channels_last" in name for name in names)
    et = edge.to_executorch()
    outs = Runtime.get().load_program(et.buffer).load_method("forward").execute(list(args))
    expected = ConvPool()(*args)
    torch.testing.assert_close(outs[0], expected[0], rtol=1e-5, atol=1e-5)  # float32 conv
    assert torch.equal(outs[1], expected[1])  # indices: the same positions
    torch.testing.assert_close(outs[2], expected[2], rtol=1e-5, atol=1e-5)


class Layouts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.conv1d = torch.nn.Conv1d(4, 4, 3)
        self.pool = torch.nn.MaxPool2d(2, return_indices=True)

    def forward(self, x, y, z):
        values, indices = self.pool(self.conv(x))
        unbatched = torch.nn.functional.avg_pool2d(y, 2)  # a 3-D input gets a batch dim
        return torch.nn.functional.avg_pool2d(values, 2), indices, unbatched, self.conv1d(z)


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_replace_brings_the_dialect_in_and_decompose_takes_it_out_with_eagers_numbers():
    model = Layouts().eval()
    args = (torch.randn(1, 4, 8, 8), torch.randn(3, 8, 8), torch.randn(1, 4, 9))
    edge = to_edge(torch.export.export(model, args))
    ep = edge.exported_program()
    result = ReplaceOpsWithChannelsLastVariants(ep)(ep.graph_module)
    targets = _targets(result.graph_module)
    assert result.modified
    assert targets.count(exir_ops.edge.channels_last.convolution.default) == 1
    assert targets.count(exir_ops.edge.aten.convolution.default) == 1  # conv1d stays
    assert targets.count(exir_ops.edge.channels_last.avg_pool2d.default) == 2
    assert exir_ops.edge.channels_last.max_pool2d_with_indices.default in targets
    assert exir_ops.edge.aten.squeeze_copy.dims in targets  # the unbatched pool's batch goes

    edge = edge.transform([ReplaceOpsWithChannelsLastVariants(ep), DecomposeChannelsLastPass()])
    et = edge.to_executorch()
    outs = Runtime.get().load_program(et.buffer).load_method("forward").execute(list(args))
    for out, ref in zip(outs, model(*args)):
        assert out.shape == ref.shape
        torch.testing.assert_close(out, ref.detach(), rtol=1e-5, atol=1e-5)  # float32 conv


def test_op_map_restricts_what_is_replaced():
    args = (torch.randn(1, 4, 8, 8), torch.randn(3, 8, 8), torch.randn(1, 4, 9))
    ep = to_edge(torch.export.export(Layouts().eval(), args)).exported_program()
    assert not ReplaceOpsWithChannelsLastVariants(ep, op_map={})(ep.graph_module).modified
    only_pool = {exir_ops.edge.aten.avg_pool2d.default: ChannelsLastOpSpec(
        exir_ops.edge.channels_last.avg_pool2d.default, [0], [0])}
    gm = ReplaceOpsWithChannelsLastVariants(ep, op_map=only_pool)(ep.graph_module).graph_module
    targets = _targets(gm)
    assert targets.count(exir_ops.edge.channels_last.avg_pool2d.default) == 2
    assert exir_ops.edge.channels_last.convolution.default not in targets


def test_remove_getitem_keeps_only_the_values_and_refuses_a_read_of_the_indices():
    from edgetorch.backends.transforms.remove_getitem_op import RemoveGetItemPass
    from edgetorch.errors import ExportError

    class Pools(torch.nn.Module):
        def forward(self, x):
            values, _ = torch.max(x, dim=1)
            return torch.nn.functional.max_pool2d(x, 2), values

    x = torch.randn(1, 3, 4, 4)
    ep = to_edge(torch.export.export(Pools(), (x,))).exported_program()
    gm = RemoveGetItemPass()(ep.graph_module).graph_module
    targets = _targets(gm)
    assert exir_ops.edge.aten.max_pool2d.default in targets
    assert exir_ops.edge.aten.amax.default in targets
    assert exir_ops.edge.aten.max_pool2d_with_indices.default not in targets
    # max_pool2d is no core ATen op: a backend takes it, as in ExecuTorch (not to_edge's graph)
    for out, ref in zip(gm(x), Pools()(x)):
        assert torch.equal(out, ref)  # maxima are copied values: exact

    class WithIndices(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.max_pool2d(x, 2, return_indices=True)[1]

    ep = to_edge(torch.export.export(WithIndices(), (x,))).exported_program()
    with pytest.raises(ExportError, match="for its values"):
        RemoveGetItemPass()(ep.graph_module)
