"""ExecuTorch's pass modules at their paths (``edgetorch.exir.passes.<module>``): each pass
does what ExecuTorch's does, checked on graphs and, where the result runs, against eager
torch through edgetorch's runtime."""

import copy
import operator

import pytest
import torch
from torch.export.graph_signature import InputKind

from edgetorch.exir import EdgeCompileConfig, memory, to_edge
from edgetorch.exir.dialects._ops import ops as exir_ops
from edgetorch.exir.passes import (
    ReplaceSymSizeOpPass,
    convert_constant_dim_order_pass,
    propagate_dynamic_shape,
)
from edgetorch.exir.passes.constant_prop_pass import constant_prop_pass
from edgetorch.exir.passes.cse_pass import CSEPass
from edgetorch.exir.passes.debug_handle_generator_pass import (
    DebugHandleGeneratorPass,
    generate_missing_debug_handles,
)
from edgetorch.exir.passes.executorch_prim_ops_registry import PYTHON_TO_BACKEND_SYM_OPS
from edgetorch.exir.passes.insert_write_back_for_buffers_pass import (
    insert_write_back_for_buffers_pass,
)
from edgetorch.exir.passes.memory_format_ops_pass import DimOrderOpsRevertPass, MemoryFormatOpsPass
from edgetorch.exir.passes.normalize_view_copy_base_pass import NormalizeViewCopyBasePass
from edgetorch.exir.passes.remove_graph_asserts_pass import RemoveGraphAssertsPass
from edgetorch.exir.passes.remove_noop_pass import RemoveNoopPass, RemoveToCopyPass
from edgetorch.exir.passes.replace_edge_with_backend_pass import EdgeToBackendOpsPass
from edgetorch.exir.passes.replace_view_copy_with_view_pass import ReplaceViewCopyWithViewPass
from edgetorch.exir.passes.spec_prop import SpecPropPass
from edgetorch.exir.passes.sym_to_tensor_pass import SymToTensorPass
from edgetorch.exir.sym_util import eval_upper_bound
from edgetorch.runtime import Runtime


def _edge(module, inputs, **kw):
    return to_edge(torch.export.export(module, inputs, **kw))


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def _run(manager, inputs):
    program = Runtime.get().load_program(manager.to_executorch().buffer)
    return program.load_method("forward").execute(list(inputs))


# ---- CSEPass ----------------------------------------------------------------------------

class Repeated(torch.nn.Module):
    def forward(self, x):
        a = torch.neg(torch.abs(x))
        b = torch.neg(torch.abs(x))
        return a * b + torch.neg(torch.abs(x))


def test_cse_merges_repeated_chains_and_keeps_the_values():
    x = torch.randn(4, 4)
    manager = _edge(Repeated(), (x,))
    gm = manager.exported_program().graph_module
    assert _targets(gm).count(exir_ops.edge.aten.neg.default) == 3
    result = CSEPass()(gm)
    assert result.modified
    targets = _targets(result.graph_module)
    assert targets.count(exir_ops.edge.aten.neg.default) == 1
    assert targets.count(exir_ops.edge.aten.abs.default) == 1
    assert CSEPass()(result.graph_module).modified is False
    torch.testing.assert_close(result.graph_module(x)[0], Repeated()(x))


def test_cse_tells_numbers_of_different_types_apart():
    class M(torch.nn.Module):
        def forward(self, x):  # x + 1 stays int64, x + 1.0 is float
            return (x + 1).float() + (x + 1.0) + (x + 1).float()

    gm = torch.export.export(M(), (torch.arange(3),)).graph_module
    assert CSEPass()(gm).modified
    adds = [n for n in gm.graph.nodes if n.target == torch.ops.aten.add.Tensor]
    # x + 1 computed once, x + 1.0 kept apart from it, and the two sums
    assert sorted(type(n.args[1]).__name__ for n in adds) == ["Node", "Node", "float", "int"]
    x = torch.arange(3)
    torch.testing.assert_close(gm(x)[0], M()(x))


def test_cse_leaves_random_and_custom_ops_alone():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.rand_like(x) + torch.rand_like(x)

    gm = torch.export.export(M(), (torch.randn(3),)).graph_module
    assert CSEPass()(gm).modified is False
    assert _targets(gm).count(torch.ops.aten.rand_like.default) == 2


# ---- SymToTensorPass / EdgeToBackendOpsPass / ReplaceSymSizeOpPass -----------------------

class AddSize(torch.nn.Module):
    def forward(self, x):
        return torch.add(x, x.shape[0] - 1)


def _dynamic_edge():
    dim = torch.export.Dim("n", max=3)
    return to_edge(torch.export.export(AddSize(), (torch.ones(3, 2),),
                                       dynamic_shapes={"x": {0: dim}}),
                   compile_config=EdgeCompileConfig(_check_ir_validity=False))


def test_sym_to_tensor_wraps_sizes_in_int32_scalar_tensors():
    manager = _dynamic_edge().transform([SymToTensorPass()])
    gm = manager.exported_program().graph_module
    [wrap] = [n for n in gm.graph.nodes if n.target == torch.ops.aten.scalar_tensor.default]
    assert wrap.kwargs["dtype"] == torch.int32 and wrap.args[0].target is operator.sub
    for n in (2, 3):
        x = torch.randn(n, 2)
        torch.testing.assert_close(manager.exported_program().module()(x), AddSize()(x))


def test_edge_to_backend_ops_then_the_program_runs():
    manager = _dynamic_edge().transform([EdgeToBackendOpsPass()])
    gm = manager.exported_program().graph_module
    sub = PYTHON_TO_BACKEND_SYM_OPS[operator.sub]
    assert sub in _targets(gm) and operator.sub not in _targets(gm)
    assert "edgetorch_exir_dialects_backend__ops_executorch_prim_sub_Scalar" in gm.code
    assert sub(7, 3) == 4  # the backend op computes what it stands for
    for n in (1, 3):
        x = torch.randn(n, 2)
        [out] = _run(manager, [x])
        torch.testing.assert_close(torch.as_tensor(out), AddSize()(x))


def test_replace_sym_size_op_pass_retargets_packets():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.ops.aten.sym_size, (x, 0)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert ReplaceSymSizeOpPass()(gm).modified
    assert _targets(gm) == [torch.ops.aten.sym_size.int]
    assert gm(torch.ones(5, 2)) == 5
    assert ReplaceSymSizeOpPass()(gm).modified is False


# ---- asserts, no-ops, views --------------------------------------------------------------

def test_remove_graph_asserts_pass_drops_asserts_and_their_conditions():
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    size = graph.call_function(torch.ops.aten.sym_size.int, (x, 0))
    big = graph.call_function(operator.ge, (size, 2))
    graph.call_function(torch.ops.aten._assert_scalar.default, (big, "x too small"))
    graph.output(graph.call_function(torch.ops.aten.mul.Tensor, (x, x)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    assert RemoveGraphAssertsPass()(gm).modified
    assert _targets(gm) == [torch.ops.aten.mul.Tensor]  # the condition went with it
    torch.testing.assert_close(gm(torch.full((1,), 3.0)), torch.full((1,), 9.0))
    assert RemoveGraphAssertsPass()(gm).modified is False


def test_remove_noop_passes():
    class M(torch.nn.Module):
        def forward(self, x):
            whole = torch.ops.aten.slice_copy.Tensor(x, 0, 0, 3)
            return whole + torch.ops.aten.slice_copy.Tensor(x, 0, 0, 1)

    gm = torch.export.export(M(), (torch.randn(3, 4),)).graph_module
    assert _targets(gm).count(torch.ops.aten.slice_copy.Tensor) == 2
    assert RemoveNoopPass()(gm).modified
    # the whole-tensor slice goes, the one keeping a row stays
    assert _targets(gm).count(torch.ops.aten.slice_copy.Tensor) == 1
    x = torch.randn(3, 4)
    torch.testing.assert_close(gm(x)[0], x + x[:1])

    class ToSame(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten._to_copy.default(x, dtype=torch.float32) + 1

    gm = torch.export.export(ToSame(), (torch.randn(2),)).graph_module
    assert RemoveToCopyPass()(gm).modified
    assert torch.ops.aten._to_copy.default not in _targets(gm)


class ViewChain(torch.nn.Module):
    def forward(self, x):
        x = torch.ops.aten.view_copy.default(x, [30, 1])
        x = torch.ops.aten.view_copy.default(x, [5, 6])
        x = torch.ops.aten.view_copy.default(x, [3, -1])
        return x + 1


def test_normalize_then_replace_view_copies():
    gm = torch.export.export(ViewChain(), (torch.ones(30),)).graph_module
    views = [n for n in gm.graph.nodes if n.target == torch.ops.aten.view_copy.default]
    assert NormalizeViewCopyBasePass()(gm).modified
    x = next(n for n in gm.graph.nodes if n.op == "placeholder")
    assert [v.args[0] for v in views] == [x, x, x]  # every view reads the first non-view
    SpecPropPass()(gm)
    result = ReplaceViewCopyWithViewPass()(gm)
    assert result.modified
    assert _targets(gm).count(memory.view) == 3
    last = views[-1]
    assert last.meta["spec"].alias_of is x.meta["spec"]  # shares its base's bytes
    assert tuple(last.meta["spec"].shape) == (3, 10)


def test_view_copy_read_by_the_output_stays_a_copy():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.ops.aten.view_copy.default(x + 1, [2, 3])

    gm = torch.export.export(M(), (torch.ones(6),)).graph_module
    assert ReplaceViewCopyWithViewPass()(gm).modified is False
    assert memory.view not in _targets(gm)


# ---- dim orders ---------------------------------------------------------------------------

class Layouts(torch.nn.Module):
    def forward(self, x):
        return x.to(memory_format=torch.channels_last).clone() + 1


def test_dim_order_ops_revert_and_back():
    x = torch.randn(2, 3, 4, 5)
    ep = to_edge(torch.export.export(Layouts(), (x,)),
                 compile_config=EdgeCompileConfig(_skip_dim_order=False)).exported_program()
    gm = ep.graph_module
    dim_order = [n for n in gm.graph.nodes if "dim_order_ops" in str(n.target)]
    assert [n.kwargs["dim_order"] for n in dim_order] == [[0, 2, 3, 1], [0, 2, 3, 1]]
    expected = gm(x)[0]
    assert DimOrderOpsRevertPass()(gm).modified
    reverted = [n for n in gm.graph.nodes if n.op == "call_function" and n.target in (
        exir_ops.edge.aten._to_copy.default, exir_ops.edge.aten.clone.default)]
    assert [type(n.target).__name__ for n in reverted] == ["EdgeOpOverload"] * 2
    assert [n.kwargs["memory_format"] for n in reverted] == [torch.channels_last] * 2
    out = gm(x)[0]
    torch.testing.assert_close(out, expected)
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert MemoryFormatOpsPass()(gm).modified
    assert [n.kwargs["dim_order"] for n in gm.graph.nodes
            if "dim_order_ops" in str(n.target)] == [[0, 2, 3, 1], [0, 2, 3, 1]]


class AddConstant(torch.nn.Module):
    def __init__(self, constant, buffer):
        super().__init__()
        if buffer:
            self.register_buffer("c", constant)
        else:
            self.c = constant

    def forward(self, x):
        return x + self.c


@pytest.mark.parametrize("buffer", [False, True])
def test_convert_constant_dim_order_pass(buffer):
    permuted = torch.randn(4, 3, 2).permute(2, 0, 1)
    ep = torch.export.export(AddConstant(permuted, buffer), (torch.randn(2, 4, 3),))
    out = convert_constant_dim_order_pass.convert_constant_dim_order_pass(copy.deepcopy(ep))
    tensors = dict(out.named_buffers()) if buffer else out.constants
    [value] = tensors.values()
    assert value.is_contiguous() and torch.equal(value, permuted)
    placeholder = next(n for n in out.graph.nodes if n.op == "placeholder")
    assert placeholder.meta["val"].is_contiguous()
    x = torch.randn(2, 4, 3)
    torch.testing.assert_close(out.module()(x), x + permuted)

    channels_last = torch.randn(1, 2, 3, 4).to(memory_format=torch.channels_last)
    ep = torch.export.export(AddConstant(channels_last, buffer), (torch.randn(1, 2, 3, 4),))
    out = convert_constant_dim_order_pass.convert_constant_dim_order_pass(ep)
    tensors = dict(out.named_buffers()) if buffer else out.constants
    assert next(iter(tensors.values())).is_contiguous(memory_format=torch.channels_last)


# ---- write back, debug handles, dynamic shapes ---------------------------------------------

def test_insert_write_back_for_buffers_pass():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("state", torch.zeros(1))
            self.register_buffer("copied", torch.zeros(1))

        def forward(self, x):
            y = x + self.state
            self.state.add_(1)
            self.copied.copy_(x)
            return y

    ep = to_edge(torch.export.export(M(), (torch.zeros(1),))).exported_program()
    gm, signature = insert_write_back_for_buffers_pass(ep)
    copies = [n for n in gm.graph.nodes if n.target == torch.ops.aten.copy_.default]
    assert [c.args[0].name for c in copies] == ["b_state", "b_copied"]
    mutations = [s for s in signature.output_specs if s.kind.name == "BUFFER_MUTATION"]
    assert [s.arg.name for s in mutations] == [c.name for c in copies]
    assert [s.target for s in mutations] == ["state", "copied"]


def test_debug_handles_regenerated_and_filled():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(3, 2)

        def forward(self, x):
            return torch.relu(self.linear(x))

    ep = _edge(M(), (torch.randn(1, 3),)).exported_program()
    handles = {n.name: n.meta["debug_handle"] for n in ep.graph.nodes
               if n.op == "call_function"}
    for n in ep.graph.nodes:
        n.meta.pop("debug_handle", None)
    DebugHandleGeneratorPass()(ep.graph_module)
    assert {n.name: n.meta["debug_handle"] for n in ep.graph.nodes
            if n.op == "call_function"} == handles
    # linear's permute and addmm share the linear's handle
    assert handles["aten_permute_copy_default"] == handles["aten_addmm_default"] == 1
    relu = next(n for n in ep.graph.nodes if n.name == "aten_relu_default")
    relu.meta.pop("debug_handle")
    generate_missing_debug_handles(ep)
    # every node without one, placeholders too (as ExecuTorch's), after the largest (1)
    assert [n.meta["debug_handle"] for n in ep.graph.nodes] == [2, 3, 4, 1, 1, 5, 6]


def test_propagate_dynamic_shape_and_unbounded_sizes():
    class M(torch.nn.Module):
        def forward(self, x):
            return x + 1

    manager = to_edge(torch.export.export(
        M(), (torch.randn(4, 8),), dynamic_shapes={"x": {0: torch.export.Dim("b", min=1)}}))
    size = next(n for n in manager.exported_program().graph.nodes
                if n.name == "x").meta["val"].shape[0]
    assert isinstance(size, torch.SymInt) and eval_upper_bound(size) == 4  # no max: the hint
    gm = manager.transform(propagate_dynamic_shape()).exported_program().graph_module
    out = gm.graph.output_node()
    assert out.meta["spec"][0] is out.args[0][0].meta["spec"]
    assert tuple(out.meta["spec"][0].shape) == (4, 8)
    [result] = _run(manager, [torch.ones(3, 8)])  # planned at the example's size
    torch.testing.assert_close(torch.as_tensor(result), torch.full((3, 8), 2.0))


def test_edge_node_names_count_up_without_gaps():
    class M(torch.nn.Module):
        def forward(self, x):
            a = torch.nn.functional.dropout(torch.nn.functional.layer_norm(x, (4,)), 0.5)
            return torch.nn.functional.dropout(a, 0.5)

    gm = _edge(M().train(), (torch.randn(2, 4),)).exported_program().graph_module
    getitems = [n.name for n in gm.graph.nodes if n.target is operator.getitem]
    assert getitems == ["getitem", "getitem_1", "getitem_2"]
    assert gm.graph.output_node().meta["val"][0].shape == (2, 4)


# ---- constant_prop_pass -------------------------------------------------------------------

def test_constant_prop_pass_materializes_only_what_inputs_read():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.ones(1, 2, 3))

        def forward(self, x):
            b = self.a + self.a
            c = torch.cat([self.a, b])
            return (c + c) + x

    ep = torch.export.export(M(), (torch.zeros(2, 2, 3),))
    out = constant_prop_pass(ep)
    specs = out.graph_signature.input_specs
    assert [(s.kind, s.target, s.persistent) for s in specs[:1]] == [
        (InputKind.CONSTANT_TENSOR, "_prop_tensor_constant0", True)]
    assert "a" not in out.state_dict and list(out.constants) == ["_prop_tensor_constant0"]
    assert _targets(out.graph_module).count(torch.ops.aten.add.Tensor) == 1
    x = torch.randn(2, 2, 3)
    torch.testing.assert_close(out.module()(x), M()(x))


def test_constant_prop_pass_returns_constant_outputs_through_a_clone():
    class M(torch.nn.Module):
        def forward(self):
            return torch.add(torch.tensor(3), torch.tensor(5))

    manager = to_edge(torch.export.export(M(), ()))
    ep = manager.exported_program()
    constant_prop_pass(ep)
    [clone] = [n for n in ep.graph.nodes if n.op == "call_function"]
    assert clone.target == exir_ops.edge.aten.clone.default
    assert clone.args[0].name.startswith("_prop_tensor_constant")
    assert ep.graph_signature.output_specs[0].arg.name == clone.name
    assert int(ep.module()()) == 8


def test_constant_prop_pass_keeps_edge_quantization_primitives():
    import torch.ao.quantization.fx._decomposed  # noqa: F401  (quantized_decomposed ops)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.ones(3, 3, dtype=torch.int8)

        def forward(self, x):
            w = torch.ops.quantized_decomposed.dequantize_per_tensor.default(
                self.w, 3.0, 3, -127, 128, torch.int8)
            return torch.nn.functional.linear(x, w)

    ep = to_edge(torch.export.export(M(), (torch.randn(3),)),
                 compile_config=EdgeCompileConfig(_check_ir_validity=False)).exported_program()
    constant_prop_pass(ep)
    dq = exir_ops.edge.quantized_decomposed.dequantize_per_tensor.default
    assert dq in _targets(ep.graph_module)
    # with an explicit (empty) skip set the dequantize is computed too
    constant_prop_pass(ep, custom_skip_targets=set())
    assert dq not in _targets(ep.graph_module)


def test_view_of_a_data_dependent_size_lowers_and_runs():
    class M(torch.nn.Module):
        def forward(self, x):
            return (torch.nonzero(x).view(-1) + 1).float().sum(dim=0, keepdim=True) + x[:1]

    x = torch.tensor([0.0, 2.0, 0.0, 3.0])
    [out] = _run(_edge(M(), (x,)), [x])
    torch.testing.assert_close(torch.as_tensor(out), M()(x))
