"""Delegation end to end: partitioners, to_backend (both forms), to_edge_transform_and_lower,
DelegateCall emission, delegate segments, the runtime's backend lookup, and the reports.

The demo backend (``edgetorch.backends.demo``) does the compiling and running.
"""

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import ref_process  # noqa: E402
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner  # noqa: E402
from torch.fx.passes.operator_support import OperatorSupportBase  # noqa: E402

from edgetorch.backends.demo import BackendWithCompilerDemo, DemoPartitioner  # noqa: E402
from edgetorch.backends.demo.runtime import DemoProgram  # noqa: E402
from edgetorch.devtools.backend_debug import get_delegation_info  # noqa: E402
from edgetorch.errors import BackendNotFoundError, ExportError  # noqa: E402
from edgetorch.exir import (  # noqa: E402
    ExecutorchBackendConfig,
    to_edge,
    to_edge_transform_and_lower,
)
from edgetorch.exir.backend import (  # noqa: E402
    BackendDetails,
    CompileSpec,
    DelegationSpec,
    LoweredBackendModule,
    Partitioner,
    PartitionResult,
    PreprocessResult,
    executorch_call_delegate,
    to_backend,
)
from edgetorch.exir.backend.utils import format_delegated_graph  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402
from edgetorch.schema import program as S  # noqa: E402
from edgetorch.schema.pte import PteFile  # noqa: E402

ATOL = 1e-5


class SinAddCumsum(torch.nn.Module):
    """Supported ops, one unsupported op (cumsum) in the middle, supported ops again."""

    def forward(self, x, y):
        a = torch.sin(x) + y
        b = torch.cumsum(a, 0)
        return torch.relu(b) * 2.0, a


class TwoLinears(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 5)
        self.lin2 = torch.nn.Linear(5, 3)

    def forward(self, x):
        return self.lin2(torch.cumsum(torch.sigmoid(self.lin(x)), 1)) - 1.0


def _inputs(*shapes):
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(*s, generator=g) for s in shapes)


def _run(et, inputs, method="forward"):
    return Runtime.get().load_program(et.buffer).load_method(method).execute(list(inputs))


def _check(model, inputs, outputs):
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        np.testing.assert_allclose(np.asarray(got), want.numpy(), atol=ATOL, rtol=0)


def _plan(et, method="forward"):
    return next(p for p in et.executorch_program.execution_plan if p.name == method)


def _kinds(plan):
    return [type(i.instr_args).__name__ for i in plan.chains[0].instructions]


def _delegate_calls(graph_module):
    return [n for n in graph_module.graph.nodes if n.target is executorch_call_delegate]


# ---- to_backend(backend_id, program, compile_specs) ----------------------------------------


class SinMul(torch.nn.Module):
    def forward(self, x):
        return torch.sin(x) * x


def test_to_backend_whole_program_gives_a_lowered_module():
    inputs = _inputs((2, 3))
    edge = to_edge(torch.export.export(SinMul(), inputs))
    specs = [CompileSpec("max_value", bytes([4]))]
    lowered = to_backend("BackendWithCompilerDemo", edge.exported_program(), specs)

    assert isinstance(lowered, LoweredBackendModule)
    assert lowered.backend_id == "BackendWithCompilerDemo"
    assert lowered.compile_specs == specs
    assert json.loads(lowered.processed_bytes)["instructions"][0]["op"] == "aten.sin.default"
    assert lowered.original_module is edge.exported_program()
    # Eager calls run the original subgraph through executorch_call_delegate.
    torch.testing.assert_close(lowered(*inputs), SinMul()(*inputs))


def test_lowered_module_composes_into_a_new_module_and_runs():
    inputs = _inputs((2, 3))
    lowered = to_backend("BackendWithCompilerDemo",
                         to_edge(torch.export.export(SinMul(), inputs)).exported_program(), [])

    class Composite(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lowered = lowered

        def forward(self, x):
            return torch.cumsum(self.lowered(x), 0) + self.lowered(x)

    model = Composite()
    et = to_edge(torch.export.export(model, inputs)).to_executorch()
    _check(model, inputs, _run(et, inputs))
    plan = _plan(et)
    assert _kinds(plan).count("DelegateCall") == 2
    # Two calls of one lowered module: two BackendDelegate entries, one shared blob.
    assert len(plan.delegates) == 2
    assert plan.delegates[0].processed.index == plan.delegates[1].processed.index == 0
    assert len(et._state.delegate_blobs) == 1


def test_lowered_module_alone_as_a_program():
    inputs = _inputs((2, 3))
    lowered = to_backend("BackendWithCompilerDemo",
                         to_edge(torch.export.export(SinMul(), inputs)).exported_program(), [])
    out = Runtime.get().load_program(lowered.buffer()).load_method("forward").execute(inputs)
    _check(SinMul(), inputs, out)
    assert [d.id for d in lowered.program().execution_plan[0].delegates] == [
        "BackendWithCompilerDemo"]


def test_executorch_demo_import_paths():
    from edgetorch.exir.backend.backend_api import to_backend as api_to_backend
    from edgetorch.exir.backend.test.backend_with_compiler_demo import (
        BackendWithCompilerDemo as Demo,
    )
    from edgetorch.exir.backend.test.op_partitioner_demo import AddMulPartitionerDemo

    assert Demo is BackendWithCompilerDemo and api_to_backend is to_backend
    spec = AddMulPartitionerDemo().delegation_spec
    assert spec == DelegationSpec("BackendWithCompilerDemo", [CompileSpec("max_value", b"\x04")])


def test_unknown_backend_id_at_export_lists_registered_ones():
    edge = to_edge(torch.export.export(SinMul(), _inputs((2, 3))))
    with pytest.raises(ExportError, match="BackendWithCompilerDem0.*BackendWithCompilerDemo"):
        to_backend("BackendWithCompilerDem0", edge.exported_program(), [])
    with pytest.raises(NotImplementedError, match="Backend Nope was not found"):  # as ExecuTorch
        to_backend("Nope", edge.exported_program(), [])


# ---- to_backend(program, partitioner): partial delegation ----------------------------------


def test_partial_delegation_two_subgraphs_around_a_portable_kernel():
    model, inputs = SinAddCumsum(), _inputs((3, 4), (3, 4))
    edge = to_edge(torch.export.export(model, inputs))
    lowered_ep = to_backend(edge.exported_program(), DemoPartitioner())

    calls = _delegate_calls(lowered_ep.graph_module)
    assert len(calls) == 2
    remaining = [n.target for n in lowered_ep.graph.nodes
                 if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)]
    assert remaining == [torch.ops.aten.cumsum.default]
    # The input program is untouched.
    assert not _delegate_calls(edge.exported_program().graph_module)

    et = edge.to_backend(DemoPartitioner()).to_executorch()
    _check(model, inputs, _run(et, inputs))
    plan = _plan(et)
    assert _kinds(plan) == ["DelegateCall", "KernelCall", "DelegateCall"]
    assert [plan.operators[i.instr_args.op_index].name for i in plan.chains[0].instructions
            if isinstance(i.instr_args, S.KernelCall)] == ["aten::cumsum"]


def test_delegate_call_args_are_inputs_then_planned_outputs():
    model, inputs = SinAddCumsum(), _inputs((3, 4), (3, 4))
    et = to_edge(torch.export.export(model, inputs)).to_backend(DemoPartitioner()).to_executorch()
    plan = _plan(et)
    first = plan.chains[0].instructions[0].instr_args
    assert isinstance(first, S.DelegateCall)
    # sin(x) + y: inputs x, y, then the one output; ExecuTorch plans delegate outputs.
    assert first.args[:2] == plan.inputs
    out = plan.values[first.args[2]].val
    assert isinstance(out, S.Tensor) and out.allocation_info is not None
    assert list(out.sizes) == [3, 4]
    assert plan.outputs[1] == first.args[2]  # `a` is also a method output


def test_weights_used_only_by_a_delegate_move_into_it():
    model, inputs = TwoLinears(), _inputs((2, 4))
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs),
                                       partitioner=[DemoPartitioner()])
    ep = edge.exported_program()
    assert not ep.state_dict  # both linears' weights went to the delegates
    (lowered,) = [m for m in ep.graph_module.children() if isinstance(m, LoweredBackendModule)][:1]
    assert set(lowered.original_module.state_dict) == {"lin.weight", "lin.bias"}
    _check(model, inputs, _run(edge.to_executorch(), inputs))


def test_a_weight_shared_with_undelegated_code_is_copied_for_it():
    """As ExecuTorch's to_backend does: the delegate owns the weight, the code left in the
    program reads a copy (``p_w_copy_0``), so no weight is passed into the delegate."""
    class Shared(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(3, 4))

        def forward(self, x):
            return torch.sin(x * self.w), torch.cumsum(self.w, 0)

    model, inputs = Shared(), _inputs((3, 4))
    edge = to_edge(torch.export.export(model, inputs)).to_backend(DemoPartitioner())
    ep = edge.exported_program()
    assert "w" in ep.state_dict
    (call,) = _delegate_calls(ep.graph_module)
    assert [a.name for a in call.args[1:]] == ["x"]
    copy = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name == "p_w_copy_0")
    assert [u.target for u in copy.users] == [torch.ops.aten.cumsum.default]
    _check(model, inputs, _run(edge.to_executorch(), inputs))


def test_partitioner_logs_why_it_left_operators_out(caplog):
    edge = to_edge(torch.export.export(SinAddCumsum(), _inputs((3, 4), (3, 4))))
    with caplog.at_level(logging.INFO, logger="edgetorch.exir.backend.partitioner"):
        to_backend(edge.exported_program(), DemoPartitioner())
    assert "DemoPartitioner did not take %aten_cumsum_default (aten.cumsum.default): " \
           "BackendWithCompilerDemo does not implement aten.cumsum.default" in caplog.text


class _TagAll(Partitioner):
    """Tags what ``select`` picks with one tag."""

    def __init__(self, select, tag_placeholders=False):
        super().__init__()
        self.select = select
        self.tag_placeholders = tag_placeholders

    def partition(self, ep):
        for node in ep.graph.nodes:
            if (node.op == "call_function" or self.tag_placeholders) and self.select(node):
                node.meta["delegation_tag"] = "t"
        return PartitionResult(ep, {"t": DelegationSpec("BackendWithCompilerDemo", [])})


def test_partitioner_errors_name_what_to_fix():
    edge = to_edge(torch.export.export(SinAddCumsum(), _inputs((3, 4), (3, 4))))
    ep = edge.exported_program()

    # sin+add and relu*2 with the unsupported cumsum between them: not one subgraph.
    not_cumsum = _TagAll(lambda n: n.target != torch.ops.aten.cumsum.default)
    with pytest.raises(ExportError, match="do not form one self-contained subgraph"):
        to_backend(ep, not_cumsum)

    with pytest.raises(ExportError, match="user input but is tagged"):
        to_backend(ep, _TagAll(lambda n: n.name == "x", tag_placeholders=True))

    class Mutating(Partitioner):
        def partition(self, ep):
            next(n for n in ep.graph.nodes if n.op == "call_function").name = "renamed"
            return PartitionResult(ep, {})

    with pytest.raises(ExportError, match="changed the graph"):
        to_backend(ep, Mutating())

    class NoSpec(Partitioner):
        def partition(self, ep):
            next(n for n in ep.graph.nodes if n.op == "call_function").meta["delegation_tag"] = "z"
            return PartitionResult(ep, {})

    with pytest.raises(ExportError, match=r"\['z'\].*no DelegationSpec"):
        to_backend(ep, NoSpec())


def test_compile_specs_reach_the_runtime_backend():
    inputs = _inputs((2, 3))
    specs = [CompileSpec("max_value", bytes([4])), CompileSpec("name", b"demo")]
    et = to_edge(torch.export.export(SinMul(), inputs)).to_backend(
        DemoPartitioner(compile_specs=specs)).to_executorch()
    assert _plan(et).delegates[0].compile_specs == specs
    method = Runtime.get().load_program(et.buffer).load_method("forward")
    ((_, handle),) = method._delegate_handles
    assert isinstance(handle, DemoProgram)
    assert handle.compile_specs == {"max_value": b"\x04", "name": b"demo"}


# ---- to_edge_transform_and_lower -----------------------------------------------------------


def test_transform_and_lower_keeps_ops_to_not_decompose_for_the_backend():
    model, inputs = TwoLinears(), _inputs((2, 4))
    ep = torch.export.export(model, inputs)
    edge = to_edge_transform_and_lower(ep, partitioner=[DemoPartitioner()])
    gm = edge.exported_program().graph_module
    inner = [n.target for _, m in gm.named_children() if isinstance(m, LoweredBackendModule)
             for n in m.original_module.graph.nodes if n.op == "call_function"]
    assert inner.count(torch.ops.aten.linear.default) == 2
    # Plain to_edge decomposes linear (permute_copy + addmm), which the demo does not take.
    plain = to_edge(ep).to_backend(DemoPartitioner()).exported_program()
    assert torch.ops.aten.addmm.default in [n.target for n in plain.graph.nodes]
    _check(model, inputs, _run(edge.to_executorch(), inputs))


def test_ops_to_not_decompose_filter_lets_rejected_nodes_decompose():
    class OnlyFirstLinear(DemoPartitioner):
        def ops_to_not_decompose(self, ep):
            return ([torch.ops.aten.linear.default],
                    lambda node: node.args[1].meta["val"].shape[0] == 5)  # lin, not lin2

    model, inputs = TwoLinears(), _inputs((2, 4))
    edge = to_edge_transform_and_lower(torch.export.export(model, inputs),
                                       partitioner=[OnlyFirstLinear()])
    targets = [n.target for n in edge.exported_program().graph.nodes]
    assert torch.ops.aten.addmm.default in targets  # lin2, decomposed and left to portable
    _check(model, inputs, _run(edge.to_executorch(), inputs))


def test_kept_op_that_no_partitioner_takes_is_an_error():
    class KeepsButRefuses(Partitioner):
        def ops_to_not_decompose(self, ep):
            return ([torch.ops.aten.linear.default], None)

        def partition(self, ep):
            return PartitionResult(ep, {})

    with pytest.raises(ExportError, match="linear.*neither decomposed nor delegated.*"
                                          "KeepsButRefuses"):
        to_edge_transform_and_lower(torch.export.export(TwoLinears(), _inputs((2, 4))),
                                    partitioner=[KeepsButRefuses()])


class _OnlyOps(Partitioner):
    """Takes the given ops, to the demo backend (for partitioner-order and dict tests)."""

    def __init__(self, *ops):
        super().__init__()
        self.ops = set(ops)

    def partition(self, ep):
        class Support(OperatorSupportBase):
            def is_node_supported(_, submodules, node):
                return node.op == "call_function" and node.target in self.ops

        parts = CapabilityBasedPartitioner(ep.graph_module, Support(),
                                           allows_single_node_partition=True).propose_partitions()
        tags = {}
        for i, p in enumerate(parts):
            for node in p.nodes:
                node.meta["delegation_tag"] = f"only{i}"
            tags[f"only{i}"] = DelegationSpec("BackendWithCompilerDemo", [])
        return PartitionResult(ep, tags)


def test_partitioners_are_tried_in_order():
    model, inputs = SinAddCumsum(), _inputs((3, 4), (3, 4))
    ep = torch.export.export(model, inputs)
    first = _OnlyOps(torch.ops.aten.sin.default)
    edge = to_edge_transform_and_lower(ep, partitioner=[first, DemoPartitioner()])
    modules = [m for _, m in edge.exported_program().graph_module.named_children()]
    # The first partitioner took sin alone; the demo partitioner then took add, relu*2.
    firsts = [[n.target for n in m.original_module.graph.nodes if n.op == "call_function"]
              for m in modules]
    assert [torch.ops.aten.sin.default] in firsts
    assert len(modules) == 3
    _check(model, inputs, _run(edge.to_executorch(), inputs))


def test_transform_and_lower_with_a_partitioner_per_method():
    class Encode(torch.nn.Module):
        def forward(self, x):
            return torch.sin(x) * 2.0

    class Decode(torch.nn.Module):
        def forward(self, x):
            return torch.cos(x) + 1.0

    inputs = _inputs((2, 3))
    programs = {"encode": torch.export.export(Encode(), inputs),
                "decode": torch.export.export(Decode(), inputs)}
    edge = to_edge_transform_and_lower(programs, partitioner={"encode": [DemoPartitioner()]},
                                       constant_methods={"get_answer": 42})
    et = edge.to_executorch()
    assert _kinds(_plan(et, "encode")) == ["DelegateCall"]
    assert "DelegateCall" not in _kinds(_plan(et, "decode"))
    _check(Encode(), inputs, _run(et, inputs, "encode"))
    _check(Decode(), inputs, _run(et, inputs, "decode"))
    assert _run(et, [], "get_answer") == [42]


def test_transform_passes_run_before_partitioning():
    seen = []

    def note(gm):
        seen.append(len(_delegate_calls(gm)))

    to_edge_transform_and_lower(torch.export.export(SinMul(), _inputs((2, 3))),
                                transform_passes=[note], partitioner=[DemoPartitioner()])
    assert seen == [0]


def test_dynamic_shapes_through_a_delegate():
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(torch.sin(x) * 2, 1) + 1

    model = M()
    ep = torch.export.export(model, _inputs((4, 3)),
                             dynamic_shapes={"x": {0: torch.export.Dim("b", min=1, max=8)}})
    et = to_edge_transform_and_lower(ep, partitioner=[DemoPartitioner()]).to_executorch()
    method = Runtime.get().load_program(et.buffer).load_method("forward")
    for n in (8, 2, 5):
        inputs = _inputs((n, 3))
        _check(model, inputs, method.execute(list(inputs)))


# ---- segments, runtime lookup ----------------------------------------------------------------


@pytest.mark.parametrize("extract", [True, False])
def test_delegate_blobs_in_segments_or_inline(extract):
    model, inputs = SinAddCumsum(), _inputs((3, 4), (3, 4))
    edge = to_edge(torch.export.export(model, inputs)).to_backend(DemoPartitioner())
    et = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=extract))
    pte = PteFile.parse(et.buffer)
    delegates = pte.program.execution_plan[0].delegates
    blobs = [bytes(pte.delegate_bytes(d)) for d in delegates]
    assert blobs == [m.processed_bytes for _, m in
                     edge.exported_program().graph_module.named_children()]
    if extract:
        assert pte.program.backend_delegate_data == []
        assert {d.processed.location for d in delegates} == {S.DataLocation.SEGMENT}
    else:
        assert [d.data for d in pte.program.backend_delegate_data] == blobs
        assert {d.processed.location for d in delegates} == {S.DataLocation.INLINE}
    _check(model, inputs, _run(et, inputs))


class NoRuntimeBackend(BackendDetails):
    """A backend with a compiler but no runtime half."""

    @staticmethod
    def preprocess(edge_program, compile_specs):
        return PreprocessResult(processed_bytes=b"opaque")


def test_unknown_backend_is_a_load_error_naming_it():
    inputs = _inputs((2, 3))
    edge = to_edge(torch.export.export(SinMul(), inputs)).to_backend(
        _TagAllAs("NoRuntimeBackend"))
    program = Runtime.get().load_program(edge.to_executorch().buffer)
    with pytest.raises(BackendNotFoundError,
                       match=r"'NoRuntimeBackend' is not registered.*BackendWithCompilerDemo"):
        program.load_method("forward")


class _TagAllAs(Partitioner):
    def __init__(self, backend_id):
        super().__init__()
        self.backend_id = backend_id

    def partition(self, ep):
        for node in ep.graph.nodes:
            if node.op == "call_function":
                node.meta["delegation_tag"] = "all"
        return PartitionResult(ep, {"all": DelegationSpec(self.backend_id, [])})


def test_backend_ids_are_class_names_and_unique():
    from edgetorch.errors import RegistrationError
    from edgetorch.exir.backend import BACKEND_DETAILS

    assert BACKEND_DETAILS["BackendWithCompilerDemo"] is BackendWithCompilerDemo
    with pytest.raises(RegistrationError, match="already taken"):
        type("BackendWithCompilerDemo", (BackendDetails,),
             {"preprocess": staticmethod(lambda ep, cs: PreprocessResult())})


# ---- reports -------------------------------------------------------------------------------


def test_get_delegation_info_and_format_delegated_graph():
    edge = to_edge(torch.export.export(SinAddCumsum(), _inputs((3, 4), (3, 4))))
    gm = edge.to_backend(DemoPartitioner()).exported_program().graph_module

    info = get_delegation_info(gm)
    assert info.num_delegated_subgraphs == 2
    # sin add relu mul | cumsum and the two getitems that read the delegates' outputs
    assert (info.delegated_nodes, info.non_delegated_nodes) == (4, 3)
    assert info.delegation_by_operator["aten_cumsum_default"].non_delegated == 1
    assert info.delegation_by_operator["getitem"].non_delegated == 2
    assert info.delegation_by_operator["aten_sin_default"].delegated == 1
    assert info.get_summary() == ("Total delegated subgraphs: 2\n"
                                  "Number of delegated nodes: 4\n"
                                  "Number of non-delegated nodes: 3\n")
    table = info.get_operator_delegation_dataframe()
    rows = table.to_dict("records")
    assert rows[-1] == {"op_type": "Total", "occurrences_in_delegated_graphs": 4,
                        "occurrences_in_non_delegated_graphs": 3}
    assert [r["op_type"] for r in rows] == ["aten_add_tensor", "aten_cumsum_default",
                                            "aten_mul_tensor", "aten_relu_default",
                                            "aten_sin_default", "getitem", "Total"]
    assert list(table.columns) == ["op_type", "occurrences_in_delegated_graphs",
                                   "occurrences_in_non_delegated_graphs"]

    text = format_delegated_graph(gm)
    assert text.startswith("graph():\n")
    assert text.count("backend_id: BackendWithCompilerDemo") == 2
    assert "lowered graph():" in text
    for op in ("sin", "cumsum"):  # ExecuTorch's spelling of Edge ops, under edgetorch
        assert f"edgetorch.exir.dialects.edge._ops.aten.{op}.default" in text
    # Also on the graph after to_executorch: as in ExecuTorch, every call but the delegate
    # calls counts (cumsum's out variant, the getitems, memory-planning markers).
    et_gm = edge.to_backend(DemoPartitioner()).to_executorch().exported_program().graph_module
    calls = [n for n in et_gm.graph.nodes if n.op == "call_function"
             and not n.name.startswith("executorch_call_delegate")]
    info = get_delegation_info(et_gm)
    assert info.non_delegated_nodes == len(calls) and info.delegated_nodes == 4
    assert info.delegation_by_operator["aten_cumsum_default"].non_delegated == 1


def test_delegation_dataframe_is_always_a_dataframe():
    import pandas as pd

    edge = to_edge(torch.export.export(SinAddCumsum(), _inputs((3, 4), (3, 4))))
    info = get_delegation_info(edge.to_backend(DemoPartitioner()).exported_program().graph_module)
    table = info.get_operator_delegation_dataframe()
    assert isinstance(table, pd.DataFrame)
    assert [row["op_type"] for _, row in table.iterrows()][-1] == "Total"
    lines = str(info).splitlines()
    assert lines[3].split() == ["op_type", "delegated", "non_delegated"]


# ---- ExecuTorch compatibility -----------------------------------------------------------------


def _ref_python():
    from refenv import ref_available, ref_python

    if not ref_available():
        pytest.skip("reference ExecuTorch env not available")
    return ref_python()


def _ref(script, *args):
    import refenv

    proc = ref_process.run([str(_ref_python()), str(Path(refenv.__file__).with_name(script)),
                           *map(str, args)], env=refenv._clean_env(), capture_output=True,
                           text=True, timeout=refenv.EXPORT_TIMEOUT_S)
    return proc


@pytest.mark.compat
def test_executorch_loads_our_delegated_program_up_to_the_backend(tmp_path):
    from refenv import RefToolError, ref_run, ref_stats

    _ref_python()
    model, inputs = SinAddCumsum(), _inputs((3, 4), (3, 4))
    edge = to_edge(torch.export.export(model, inputs)).to_backend(DemoPartitioner())
    for extract in (True, False):
        path = tmp_path / f"demo_{extract}.pte"
        et = edge.to_executorch(ExecutorchBackendConfig(extract_delegate_segments=extract))
        path.write_bytes(et.buffer)
        stats = ref_stats(path)["methods"]["forward"]
        assert stats["delegates"] == ["BackendWithCompilerDemo"] * 2
        assert stats["instruction_kinds"] == {"DelegateCall": 2, "KernelCall": 1}
        # ExecuTorch has no such backend: the load gets as far as looking it up.
        with pytest.raises(RefToolError, match="Backend BackendWithCompilerDemo is not "
                                               "registered"):
            ref_run(path, [x.numpy() for x in inputs])


@pytest.mark.compat
def test_delegate_emission_matches_executorch(tmp_path):
    from ref_delegation import AddMmModel, example_inputs, summarize

    proc = _ref("ref_delegation.py", "export", tmp_path / "et.pte", tmp_path / "et.json")
    assert proc.returncode == 0, proc.stderr[-4000:]
    theirs = json.loads((tmp_path / "et.json").read_text())

    model, inputs = AddMmModel(), example_inputs()
    # The same script as ExecuTorch's side, imports renamed.
    from edgetorch.exir.backend.test.op_partitioner_demo import AddMulPartitionerDemo

    edge = to_edge(torch.export.export(model, inputs)).to_backend(AddMulPartitionerDemo())
    et = edge.to_executorch()
    ours = summarize(et.executorch_program)

    def roles(summary):
        out = []
        for ins in summary["instructions"]:
            args = []
            for a in ins.get("args", []):
                if a["input"]:
                    args.append(("input", summary["inputs"].index(a["index"])))
                elif a["output"]:
                    args.append(("output", summary["outputs"].index(a["index"])))
                else:
                    args.append(("temp", a["kind"], a["sizes"], a["planned"]))
            out.append((ins["kind"], ins.get("delegate_index"), args))
        return out

    assert roles(ours) == roles(theirs)
    assert ours["delegates"] == theirs["delegates"]
    _check(model, inputs, _run(et, inputs))

    # And their container loads in our runtime up to our demo backend, which cannot read
    # their (different) blob format.
    from edgetorch.errors import InvalidProgramError

    program = Runtime.get().load_program(tmp_path / "et.pte")
    with pytest.raises(InvalidProgramError, match="BackendWithCompilerDemo: the delegate blob"):
        program.load_method("forward")


# ---- a fixture for the torch-free job ---------------------------------------------------------


@pytest.mark.skipif(not os.environ.get("EDGETORCH_FIXTURES"), reason="EDGETORCH_FIXTURES not set")
def test_write_delegated_fixture():
    root = Path(os.environ["EDGETORCH_FIXTURES"]) / "delegation"  # not globbed by other tests
    root.mkdir(parents=True, exist_ok=True)
    model, inputs = SinAddCumsum(), _inputs((3, 4), (3, 4))
    et = to_edge(torch.export.export(model, inputs)).to_backend(DemoPartitioner()).to_executorch()
    (root / "sin_add_cumsum.pte").write_bytes(et.buffer)
    with torch.no_grad():
        outs = model(*inputs)
    np.savez(root / "sin_add_cumsum.npz", **{f"input_{i}": x.numpy() for i, x in enumerate(inputs)},
             **{f"output_{i}": o.numpy() for i, o in enumerate(outs)})

