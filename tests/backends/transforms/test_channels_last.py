"""The ``channels_last`` dialect: each operator is its ATen operator on NHWC data, it passes
``to_edge`` (a custom namespace, as in ExecuTorch), ``DecomposeChannelsLastPass`` turns it back
into portable operators that run in edgetorch's runtime with eager's numbers, and one left in
the program is refused at ``to_executorch``."""

import pytest

torch = pytest.importorskip("torch")

import edgetorch.backends.transforms.channels_last_ops  # noqa: E402, F401
from edgetorch.backends.transforms.decompose_channels_last_pass import (  # noqa: E402
    DecomposeChannelsLastPass,
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
