"""Names ExecuTorch's own tests and testers import, at its paths, each checked for what it
does: partitioner validation switch, ``_transform``, ``print_program``/``pretty_print``,
``dim_order_utils``, ``exir.error``, ``exir.graph_module``, ``XNNPACKPassManager``,
``get_param_tensor``, ``extension.pytree``."""

from __future__ import annotations

import io

import pytest
import torch

from edgetorch.exir import to_edge
from edgetorch.exir.backend import backend_api
from edgetorch.exir.backend.canonical_partitioners.all_node_partitioner import (
    AllNodePartitioner,
)
from edgetorch.exir.dialects._ops import ops as exir_ops


class _AddMul(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        return (x + self.w) * 2


def _edge():
    return to_edge(torch.export.export(_AddMul(), (torch.randn(3),)))


def test_validation_disabled_is_scoped_and_restores():
    assert backend_api._ENABLE_VALIDATION
    with backend_api.validation_disabled():
        assert not backend_api._ENABLE_VALIDATION
        with pytest.raises(RuntimeError), backend_api.validation_disabled():
            raise RuntimeError
        assert not backend_api._ENABLE_VALIDATION
    assert backend_api._ENABLE_VALIDATION


def test_transform_returns_self_when_nothing_changes_and_a_copy_when_it_does():
    from edgetorch.exir.pass_base import ExportPass
    from edgetorch.exir.program._program import _transform

    class MulToAdd(ExportPass):
        def call_operator(self, op, args, kwargs, meta):
            if op == exir_ops.edge.aten.mul.Tensor:
                op = exir_ops.edge.aten.add.Tensor
            return super().call_operator(op, args, kwargs, meta)

    ep = _edge().exported_program()
    assert _transform(ep) is ep
    new = _transform(ep, MulToAdd())
    targets = [n.target for n in new.graph.nodes if n.op == "call_function"]
    assert exir_ops.edge.aten.mul.Tensor not in targets
    assert any(n.target == exir_ops.edge.aten.mul.Tensor for n in ep.graph.nodes)  # untouched
    x = torch.randn(3)
    torch.testing.assert_close(new.module()(x), (x + 1) + 2)
    with pytest.raises(TypeError, match="separate arguments"):
        _transform(ep, [MulToAdd()])


def test_print_program_and_pretty_print():
    from edgetorch.exir.print_program import pretty_print, print_program

    program = _edge().to_executorch().executorch_program
    out = io.StringIO()
    print_program(program, out=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "The program contains the following 2 instructions"
    assert lines[1].startswith("  0: aten::add.out ") and "I0" in lines[1]
    assert lines[2].startswith("  1: aten::mul.out ") and "O0" in lines[2]
    assert "CT[3]f32" in lines[1] and "Tm" in lines[1]  # the weight and a planned tensor
    out = io.StringIO()
    pretty_print(program.execution_plan[0].operators[0], out=out)
    assert out.getvalue() == "Operator(name=aten::add, overload=out)\n"
    with pytest.raises(Exception, match="GraphModule"):
        pretty_print(torch.fx.symbolic_trace(_AddMul()))


def test_dim_order_utils():
    from edgetorch.exir.dim_order_utils import (
        get_dim_order,
        get_memory_format,
        is_channel_last_dim_order,
        is_contiguous_dim_order,
    )

    assert get_dim_order(torch.channels_last, 4) == [0, 2, 3, 1]
    assert get_dim_order(torch.contiguous_format, 3) == [0, 1, 2]
    assert get_dim_order(torch.preserve_format, 2) is None
    assert get_memory_format([0, 2, 3, 1]) == torch.channels_last
    assert get_memory_format(None) == torch.preserve_format
    with pytest.raises(ValueError):
        get_memory_format([1, 0])
    t = torch.randn(1, 2, 3, 4)
    assert is_contiguous_dim_order(t) and not is_channel_last_dim_order(t)
    assert is_channel_last_dim_order(t.to(memory_format=torch.channels_last))


def test_export_error_types_and_internal_assert():
    from edgetorch.errors import ExportError as OurExportError
    from edgetorch.exir.error import ExportError, ExportErrorType, InternalError, internal_assert

    with pytest.raises(ExportError, match=r"\[ExportErrorType.NOT_SUPPORTED\]: nope"):
        raise ExportError(ExportErrorType.NOT_SUPPORTED, "nope")
    assert ExportError is OurExportError
    internal_assert(True, "fine")
    with pytest.raises(InternalError, match="broken"):
        internal_assert(False, "broken")


def test_graph_module_finds_control_flow_subgraphs():
    from edgetorch.exir.graph_module import (
        contains_any_call_fn_target_op,
        get_cond_while_submodules,
        get_control_flow_submodules,
    )

    class Cond(torch.nn.Module):
        def forward(self, x):
            return torch.cond(x.sum() > 0, lambda y: y.sin(), lambda y: y.cos(), (x,))

    gm = torch.export.export(Cond(), (torch.randn(3),)).graph_module
    subs = get_control_flow_submodules(gm)
    assert [name for name, _, _ in subs] == ["true_graph_0", "false_graph_0"]
    assert all(node.target is torch.ops.higher_order.cond for _, _, node in subs)
    assert [n for n, _, _ in get_cond_while_submodules(gm)] == ["true_graph_0", "false_graph_0"]
    assert contains_any_call_fn_target_op(gm, {torch.ops.aten.sin.default})
    assert not contains_any_call_fn_target_op(gm, {torch.ops.aten.tan.default})


def test_all_node_partitioner_delegates_the_whole_program():
    from edgetorch.backends.demo.compiler import BackendWithCompilerDemo
    from edgetorch.exir.lowered_backend_module import get_lowered_backend_modules
    from edgetorch.runtime import Runtime

    class AddMul(torch.nn.Module):  # tensors only: a lifted scalar would need a cast
        def forward(self, x, y):
            return (x + y) * x

    edge = to_edge(torch.export.export(AddMul(), (torch.randn(3), torch.randn(3))))
    edge = edge.to_backend(AllNodePartitioner(BackendWithCompilerDemo.__name__, []))
    gm = edge.exported_program().graph_module
    assert [m.backend_id for m in get_lowered_backend_modules(gm)] == ["BackendWithCompilerDemo"]
    assert not [n for n in gm.graph.nodes if n.op == "call_function"
                and n.target not in (torch.ops.higher_order.executorch_call_delegate,)
                and "getitem" not in str(n.target)]
    x, y = torch.randn(3), torch.randn(3)
    method = Runtime.get().load_program(edge.to_executorch().buffer).load_method("forward")
    torch.testing.assert_close(torch.as_tensor(method.execute([x, y])[0]), (x + y) * x)


def test_xnnpack_pass_manager_runs_pass_classes():
    from edgetorch.backends.xnnpack._passes import (
        RemoveNoopExpandCopyPass,
        XNNPACKPass,
        XNNPACKPassManager,
    )

    class Model(torch.nn.Module):
        def forward(self, x):
            return x.expand(2, 3) + 1

    ep = to_edge(torch.export.export(Model(), (torch.randn(2, 3),))).exported_program()
    seen = []

    class Record(XNNPACKPass):
        def call(self, graph_module):
            seen.append(self.exported_program)
            return super().call(graph_module)

    out = XNNPACKPassManager(ep, [RemoveNoopExpandCopyPass, Record]).transform()
    assert "expand_copy" not in str(out.graph)
    assert len(seen) == 1 and seen[0] is not ep  # the pass sees the program it runs on
    with pytest.raises(Exception, match="pass classes"):
        XNNPACKPassManager(ep, [lambda gm: gm]).transform()


def test_get_param_tensor_and_pytree():
    from edgetorch.backends.xnnpack.utils.utils import get_param_tensor
    from edgetorch.extension.pytree import from_str, to_str, tree_flatten, tree_unflatten

    ep = _edge().exported_program()
    w = next(n for n in ep.graph.nodes if n.op == "placeholder")
    torch.testing.assert_close(get_param_tensor(ep, w), torch.ones(3))
    leaves, spec = tree_flatten({"a": (1, 2), "b": [3]})
    assert leaves == [1, 2, 3]
    assert tree_unflatten(leaves, from_str(to_str(spec))) == {"a": (1, 2), "b": [3]}


def test_constant_prop_pass_folds_whatever_the_size():
    from edgetorch.exir.passes.constant_prop_pass import constant_prop_pass

    class Expand(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(1, 4))

        def forward(self, x):
            return x + self.w.expand(8, 4) * 2

    model = Expand()
    ep = to_edge(torch.export.export(model, (torch.randn(8, 4),))).exported_program()
    assert constant_prop_pass(ep) is ep
    ops = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert ops == [exir_ops.edge.aten.add.Tensor]  # expand and mul folded (it grew 8x)
    assert [k for k in ep.constants if k.startswith("_prop_tensor_constant")] != []
    x = torch.randn(8, 4)
    torch.testing.assert_close(ep.module()(x), model(x))


def test_tensor_helpers():
    from edgetorch.errors import MemoryPlanningError
    from edgetorch.exir.tensor import (
        TensorSpec,
        contiguous_stride_from_shape,
        dim_order_from_stride,
        make_allocation_info,
        make_tensor_value,
        num_bytes_from_shape_and_dtype,
        stride_from_dim_order,
    )

    assert contiguous_stride_from_shape(torch.Size([2, 3, 4])) == (12, 4, 1)
    assert contiguous_stride_from_shape(torch.Size([2, 0, 4])) == (4, 4, 1)
    assert dim_order_from_stride((1, 15, 5)) == (1, 2, 0)
    assert dim_order_from_stride((3, 1, 3, 3)) == (0, 2, 3, 1)  # ties keep their order
    assert stride_from_dim_order([2, 3, 4], [0, 2, 1]) == [12, 1, 3]
    assert num_bytes_from_shape_and_dtype(torch.Size([2, 3]), torch.float16) == 12
    info = make_allocation_info(1, (3 << 32) + 5)
    assert (info.memory_id, info.memory_offset_low, info.memory_offset_high) == (1, 5, 3)
    with pytest.raises(MemoryPlanningError, match="negative"):
        make_allocation_info(0, -1)
    with pytest.raises(MemoryPlanningError, match="64 bits"):
        make_allocation_info(0, 1 << 64)
    t = make_tensor_value(1, None, TensorSpec.from_tensor(torch.randn(2, 0, 3)))
    assert (t.sizes, t.dim_order, t.data_buffer_idx, t.storage_offset) == ([2, 0, 3],
                                                                           [0, 1, 2], 1, 0)


def test_quant_patterns_module_defines_the_out_variants():
    from edgetorch.exir.passes._quant_patterns_and_replacements import quantized_decomposed_lib

    assert quantized_decomposed_lib.ns == "quantized_decomposed"
    add = exir_ops.edge.quantized_decomposed.add.default
    assert add.to_out_variant().name() == "quantized_decomposed::add.out"
    mixed = exir_ops.edge.quantized_decomposed.mixed_linear.default
    assert mixed.to_out_variant().name() == "quantized_decomposed::mixed_linear.out"


def test_common_schema_helpers():
    import sys

    from edgetorch.exir.common import (
        extract_out_arguments,
        format_schema_name,
        get_schema_for_operators,
        setting_python_recursive_limit,
    )

    schemas = get_schema_for_operators(["torch.ops.aten.add.Tensor", "torch.ops.nope.x.default"])
    assert schemas["aten::add.Tensor"].startswith("aten::add.Tensor(Tensor self, Tensor other")
    assert schemas["nope::x.default"] == "<No Schema Found>"
    one = torch._C.parse_schema("aten::abs.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)")
    two = torch._C.parse_schema("aten::aminmax.out(Tensor self, *, int? dim=None, "
                                "bool keepdim=False, Tensor(a!) min, Tensor(b!) max) "
                                "-> (Tensor(a!) min, Tensor(b!) max)")
    assert extract_out_arguments(one, {"out": 1}) == ("out", 1)
    assert extract_out_arguments(two, {"min": 1, "max": 2}) == [("min", 1), ("max", 2)]
    assert format_schema_name(one) == "aten::abs.out"
    before = sys.getrecursionlimit()
    with setting_python_recursive_limit(before + 500):
        assert sys.getrecursionlimit() == before + 500
    assert sys.getrecursionlimit() == before


def test_delegated_payload_and_identical_graphs():
    from edgetorch.exir.backend.test.op_partitioner_demo import AddMulPartitionerDemo
    from edgetorch.exir.backend.utils import get_delegated_payload, is_identical_graph

    class M(torch.nn.Module):
        def forward(self, a, x, b):
            return torch.mm(a, x) + b

    class N(torch.nn.Module):
        def forward(self, a, x, b):
            return torch.mm(a, x) - b

    inputs = (torch.randn(2, 2), torch.randn(2, 2), torch.randn(2, 2))
    edge = to_edge(torch.export.export(M(), inputs))
    gm = edge.exported_program().graph_module
    assert get_delegated_payload(gm) == {}
    lowered = edge.to_backend(AddMulPartitionerDemo()).exported_program().graph_module
    [(name, (backend, specs, blob))] = get_delegated_payload(lowered).items()
    assert name.startswith("lowered_module_") and backend == "BackendWithCompilerDemo"
    assert [s.key for s in specs] == ["max_value"] and blob == getattr(lowered,
                                                                       name).processed_bytes
    again = to_edge(torch.export.export(M(), inputs)).exported_program().graph_module
    other = to_edge(torch.export.export(N(), inputs)).exported_program().graph_module
    assert is_identical_graph(gm, again) and not is_identical_graph(gm, other)


def test_debug_pass_logs_every_node_and_changes_nothing(tmp_path, caplog):
    import logging

    from edgetorch.exir.passes import DebugPass

    class M(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    gm = to_edge(torch.export.export(M(), (torch.randn(2),))).exported_program().graph_module
    before = str(gm.graph)
    log_file = tmp_path / "debug.log"
    with caplog.at_level(logging.DEBUG, logger="edgetorch.exir.passes.debug_pass"):
        result = DebugPass(msg="here", log_filename=str(log_file))(gm)
    assert not result.modified and str(gm.graph) == before
    assert "call_function aten_relu_default: aten.relu.default" in caplog.text
    assert log_file.read_text().splitlines()[0] == "DebugPass here: 6 nodes"
    assert DebugPass(enable_debug_pass=False)(gm).modified is False
