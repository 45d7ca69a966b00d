"""``to_edge`` lifts the Python scalars of Tensor operands into 0-d constants and casts mixed
operands, as ExecuTorch 1.5.1 does (``ScalarToTensorPass``, ``lift_constant_tensor_pass``,
``RemoveMixedTypeOperators``); the programs compute what eager torch computes, dtypes
included. Byte equality with ExecuTorch: ``tests/compat/test_compat_scalars.py``."""

import pytest
import torch
from torch.export.graph_signature import InputKind

from edgetorch.exir import ExecutorchBackendConfig, to_edge
from edgetorch.exir.dialects._ops import ops as exir_ops
from edgetorch.runtime import Runtime


class AddOne(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("c", torch.ones(3))

    def forward(self, x):
        return (x + 1) * 0.5 + self.c


def _calls(ep):
    return [(n.target, n.args, dict(n.kwargs)) for n in ep.graph.nodes if n.op == "call_function"]


def test_scalar_becomes_lifted_buffer_named_as_executorch_names_it():
    ep = to_edge(torch.export.export(AddOne(), (torch.randn(3),))).exported_program()
    specs = ep.graph_signature.input_specs
    assert [(s.kind, s.target) for s in specs] == [
        (InputKind.BUFFER, "c"),
        # N counts the buffers before it (one here), as in ExecuTorch
        (InputKind.BUFFER, "_lifted_tensor_constant1"),
        (InputKind.BUFFER, "_lifted_tensor_constant2"),
        (InputKind.USER_INPUT, None),
    ]
    assert all(s.persistent for s in specs[1:3])
    one, half = ep.state_dict["_lifted_tensor_constant1"], ep.state_dict["_lifted_tensor_constant2"]
    # torch.tensor(value): the value's own dtype, 0-d
    assert (one.dtype, one.shape, one.item()) == (torch.int64, torch.Size([]), 1)
    assert (half.dtype, half.item()) == (torch.float32, 0.5)
    calls = _calls(ep)
    # the int64 1 is cast to x's dtype before the add (RemoveMixedTypeOperators), with the
    # dim order ExecuTorch writes for a 0-d tensor: []
    cast, add, mul, _ = calls
    assert cast[0] == exir_ops.edge.dim_order_ops._to_dim_order_copy.default
    assert cast[2] == {"dtype": torch.float32, "dim_order": []}
    assert add[0] == exir_ops.edge.aten.add.Tensor and mul[0] == exir_ops.edge.aten.mul.Tensor
    assert mul[1][1].name == "_lifted_tensor_constant2"  # same dtype: no cast


def test_mixed_operands_cast_to_the_promoted_dtype():
    class Mixed(torch.nn.Module):
        def forward(self, x, i):
            return x + i, i / 2, i // 2

    ep = to_edge(torch.export.export(Mixed(), (torch.randn(3), torch.tensor([1, 2, 3])))
                 ).exported_program()
    casts = [(n.args[0].name, n.kwargs["dtype"]) for n in ep.graph.nodes
             if n.target == exir_ops.edge.dim_order_ops._to_dim_order_copy.default]
    # x + i: i -> float32; i / 2 (true division): both -> float32; i // 2: no cast
    assert casts == [("i", torch.float32), ("i", torch.float32),
                     ("_lifted_tensor_constant0", torch.float32)]


class ScalarZoo(torch.nn.Module):
    def forward(self, x, i, h, b):
        return (1.0 - x, x / 3, i + 3, i * 2.5, i / 2, i // 2, i + True, h * 0.5 + 1,
                x.double() - 1, i.to(torch.int32) + 2, torch.maximum(x, torch.tensor(0.25)),
                torch.minimum(i, torch.tensor(1)), b * 2, torch.where(x > 0, x, 0.0))


@pytest.mark.parametrize("fold", [False, True])
def test_programs_compute_eager_values_and_dtypes(fold):
    inputs = (torch.randn(4), torch.tensor([1, -2, 3, 7]), torch.randn(4).to(torch.float16),
              torch.tensor([True, False, True, False]))
    model = ScalarZoo()
    et = to_edge(torch.export.export(model, inputs)).to_executorch(
        ExecutorchBackendConfig(fold_constants=fold))
    got = Runtime.get().load_program(et.buffer).load_method("forward").execute(list(inputs))
    want = model(*inputs)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g = torch.as_tensor(g)
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-3 if w.dtype == torch.float16 else 1e-5)


def test_folding_removes_the_constant_casts():
    inputs = (torch.randn(3),)
    et = to_edge(torch.export.export(AddOne(), inputs)).to_executorch()  # fold_constants=True
    ops = [o.name for o in et.executorch_program.execution_plan[0].operators]
    assert "dim_order_ops::_to_dim_order_copy" not in ops
    unfolded = to_edge(torch.export.export(AddOne(), inputs)).to_executorch(
        ExecutorchBackendConfig(fold_constants=False, fuse_batch_norm=False))
    assert len(et.buffer) <= len(unfolded.buffer)


def test_nested_graphs_keep_scalar_overloads():
    """ExecuTorch keeps a cond branch's scalar as a get_attr constant of the branch; edgetorch
    calls the .Scalar overload there (same values)."""
    class Branches(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda x: x + 1, lambda x: x - 2.0, (x,))

    for x in (torch.ones(3), -torch.ones(3)):
        et = to_edge(torch.export.export(Branches(), (x,))).to_executorch()
        got = Runtime.get().load_program(et.buffer).load_method("forward").execute([x])
        torch.testing.assert_close(torch.as_tensor(got[0]), Branches()(x))


def test_whole_slices_and_views_of_views_are_dropped():
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("table", torch.arange(32.0).reshape(8, 4))

        def forward(self, x):
            return (x + 1).view(2, 16).view(4, 8) * 2, self.table[: x.shape[0]] * x

    x = torch.randn(8, 4)
    edge = to_edge(torch.export.export(M(), (x,)))
    targets = [n.target for n in edge.exported_program().graph.nodes if n.op == "call_function"]
    assert exir_ops.edge.aten.slice_copy.Tensor not in targets
    et = edge.to_executorch()
    views = [n for n in et.exported_program().graph.nodes
             if n.op == "call_function" and getattr(n.target, "__name__", "") == "view"]
    assert len(views) == 1  # view(view(y)) reads y; the middle view is gone
    assert views[0].args[0].op == "call_function" and views[0].args[0].target != views[0].target
    got = Runtime.get().load_program(et.buffer).load_method("forward").execute([x])
    for g, w in zip(got, M()(x)):
        torch.testing.assert_close(torch.as_tensor(g), w)


def test_scalar_on_a_channels_last_tensor_keeps_the_scalar_overload():
    """ExecuTorch's portable mul/add kernels need one dim order across their tensors; a lifted
    0-d constant is never channels-last, so lifting here would write a program ExecuTorch's
    runtime refuses (InvalidArgument). The scalar overload is kept instead, and the result is
    eager's, in eager's layout. (ExecuTorch runs it: tests/devtools/test_bundled_program_compat.py
    ::test_executorch_verifies_our_channels_last_bpte.)"""

    class Scale(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2.0 + 1

    x = torch.randn(1, 3, 4, 4).to(memory_format=torch.channels_last)
    edge = to_edge(torch.export.export(Scale(), (x,)))
    ep = edge.exported_program()
    targets = [t for t, _, _ in _calls(ep)]
    assert exir_ops.edge.aten.mul.Scalar in targets and exir_ops.edge.aten.add.Scalar in targets
    assert not any(s.target and "_lifted_tensor_constant" in s.target
                   for s in ep.graph_signature.input_specs)
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    got = method.execute([x.numpy()])[0]
    want = Scale()(x)
    torch.testing.assert_close(torch.from_numpy(got.copy()), want.contiguous(), rtol=1e-5,
                               atol=1e-6)
