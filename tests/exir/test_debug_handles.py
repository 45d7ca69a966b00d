"""The provenance spine from the compiler's side: debug handles on Edge nodes, the emitter's
maps, XNNPACK nodes that carry their node's handle, and a traced run whose intermediate
values equal eager PyTorch."""

from __future__ import annotations

import numpy as np
import torch
from debug_handle_models import Branchy, ConvReluLinear, branchy

from edgetorch.backends.xnnpack import XnnpackPartitioner
from edgetorch.backends.xnnpack.serialization import deserialize_xnnpack_binary
from edgetorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from edgetorch.exir.debug_handles import bfs_nodes
from edgetorch.runtime import Runtime
from edgetorch.runtime.event_tracer import DebugEvent
from edgetorch.schema.pte import PteFile


def _inputs():
    return (torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(3)),)


def _edge(model=None, inputs=None):
    model = model or ConvReluLinear().eval()
    return to_edge(torch.export.export(model, inputs or _inputs()))


def _handled(gm):
    return [n for n in bfs_nodes(gm) if n.op not in ("placeholder", "output")]


def test_every_node_has_a_handle_numbered_from_one_in_graph_order():
    gm = _edge().exported_program().graph_module
    handles = [n.meta["debug_handle"] for n in _handled(gm)]
    assert all(isinstance(h, int) and h >= 1 for h in handles)
    # New handles appear in order 1, 2, 3, ... with no gaps.
    firsts = list(dict.fromkeys(handles))
    assert firsts == list(range(1, len(firsts) + 1))
    by_op = {str(n.target): n.meta["debug_handle"] for n in _handled(gm)}
    # Linear decomposes into permute_copy + addmm: both came from it, both get its handle.
    assert by_op["aten.permute_copy.default"] == by_op["aten.addmm.default"]
    assert len({by_op["aten.convolution.default"], by_op["aten.relu.default"],
                by_op["aten.addmm.default"]}) == 3


def test_handles_continue_inside_cond_branches_breadth_first():
    model, inputs = branchy()
    gm = to_edge(torch.export.export(model, inputs)).exported_program().graph_module
    top = [n.meta["debug_handle"] for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    inner = [n.meta["debug_handle"] for n in _handled(gm)][len(top):]
    assert inner and min(inner) > max(top)
    assert isinstance(model, Branchy)


def test_emitter_maps_have_executorchs_shapes():
    edge = _edge()
    handles = {str(n.target): n.meta["debug_handle"]
               for n in edge.exported_program().graph.nodes if n.op == "call_function"}
    et = edge.to_executorch(ExecutorchBackendConfig(fold_constants=False, fuse_batch_norm=False))
    plan = et.executorch_program.execution_plan[0]
    dmap = et.debug_handle_map["forward"]
    for i, ins in enumerate(plan.chains[0].instructions):
        op = plan.operators[ins.instr_args.op_index]
        assert dmap[i] == handles[f"aten.{op.name.partition('::')[2]}.default"], op.name
    assert et.delegate_map == {"forward": {}}
    assert et.instruction_id_to_num_outs_map == {"forward": {}}


def test_a_delegate_instruction_maps_to_every_handle_it_took_over():
    model = ConvReluLinear().eval()
    ep = torch.export.export(model, _inputs())
    edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
    et = edge.to_executorch()
    (instr, handles), = et.debug_handle_map["forward"].items()
    assert isinstance(handles, list) and handles == sorted(handles) and len(set(handles)) >= 3
    assert et.delegate_map["forward"][instr] == {"name": "XnnpackBackend", "delegate_map": {}}
    assert et.instruction_id_to_num_outs_map["forward"] == {instr: 1}
    call = next(n for n in edge.exported_program().graph.nodes
                if n.op == "call_function" and "call_delegate" in str(n.target))
    assert call.meta["debug_handle"] == max(handles) + 1  # one past the graph's, as ExecuTorch
    # Each XNNPACK node carries the handle of the Edge node it lowers (XNNPACK's own layout
    # transposes have none: 65535, as ExecuTorch writes them).
    pte = PteFile.parse(et.buffer)
    plan = pte.program.execution_plan[0]
    xnodes = deserialize_xnnpack_binary(pte.delegate_bytes(plan.delegates[0])).graph.xnodes
    by_kind = {type(n.xnode_union).__name__: n.debug_handle for n in xnodes}
    assert by_kind["XNNConv2d"] == handles[0]
    assert by_kind["XNNFullyConnected"] == max(handles)
    assert {n.debug_handle for n in xnodes} <= set(handles) | {65535}


def test_traced_intermediate_output_equals_eager():
    model = ConvReluLinear().eval()
    (x,) = _inputs()
    et = _edge(model, (x,)).to_executorch()
    program = Runtime.get().load_program(et.buffer, enable_etdump=True, debug_buffer_size=1 << 20)
    out = program.load_method("forward").execute([x.numpy()])[0]
    dmap = et.debug_handle_map["forward"]
    conv_handle = next(n.meta["debug_handle"] for n in et.exported_program().graph.nodes
                       if "convolution" in str(n.target))
    conv_instr = next(i for i, h in dmap.items() if h == conv_handle)
    debug = [e for e in program.event_tracer.run_blocks[-1].events if isinstance(e, DebugEvent)]
    conv_out = next(e.value for e in debug if e.instruction_id == conv_instr and not e.output)
    with torch.no_grad():
        np.testing.assert_allclose(conv_out, model.conv(x).numpy(), atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(out, model(x).numpy(), atol=1e-5, rtol=1e-5)


def test_delegate_mapping_builder_as_executorchs():
    import pytest

    from edgetorch.errors import ExportError
    from edgetorch.exir.backend.utils import DelegateMappingBuilder

    gm = _edge().exported_program().graph_module
    conv, relu = [n for n in gm.graph.nodes if "convolution" in str(n.target) or "relu" in str(n.target)]
    gen = DelegateMappingBuilder(generated_identifiers=True)
    assert gen.insert_delegate_mapping_entry(nodes=[relu, conv]) == 0
    assert gen.insert_delegate_mapping_entry(handles=[7, None, 5]) == 1
    assert gen.get_delegate_mapping() == {
        0: tuple(sorted([conv.meta["debug_handle"], relu.meta["debug_handle"]])), 1: (5, 7)}
    named = DelegateMappingBuilder()
    named.insert_delegate_mapping_entry(nodes=conv, identifier="conv #1")
    with pytest.raises(ExportError, match="already inserted"):
        named.insert_delegate_mapping_entry(handles=3, identifier="conv #1")
    with pytest.raises(ExportError, match="needs an identifier"):
        named.insert_delegate_mapping_entry(handles=3)
    with pytest.raises(ExportError, match="exactly one"):
        gen.insert_delegate_mapping_entry()


def test_a_kernel_error_names_the_users_source_line_when_stacktraces_are_emitted(monkeypatch):
    import pytest

    from edgetorch.errors import KernelError
    from edgetorch.kernels import registry

    et = _edge().to_executorch(ExecutorchBackendConfig(emit_stacktrace=True))
    entry = registry.KERNELS["aten::relu.out"]

    def boom(*args):
        raise RuntimeError("relu broke")

    monkeypatch.setitem(registry.KERNELS, "aten::relu.out",
                        registry.KernelEntry(entry.name, boom, entry.num_args))
    method = Runtime.get().load_program(et.buffer).load_method("forward")
    with pytest.raises(KernelError) as info:
        method.execute([_inputs()[0].numpy()])
    msg = str(info.value)
    assert "method 'forward' instruction 1 (aten::relu.out" in msg
    assert "debug_handle_models.py:" in msg and "in forward" in msg and "relu broke" in msg


def test_prim_ops_get_operator_call_only():
    """``aten::sym_size.int`` and ``executorch_prim::*`` are ExecuTorch prim ops: no
    native_call event and no logged value, as its runtime reports them."""

    class Reshape(torch.nn.Module):
        def forward(self, x):
            return (x * 2).reshape(x.shape[0] * 2, -1)

    batch = torch.export.Dim("batch", max=8)
    ep = torch.export.export(Reshape(), (torch.randn(4, 6),), dynamic_shapes=({0: batch},))
    et = to_edge(ep).to_executorch()
    program = Runtime.get().load_program(et.buffer, enable_etdump=True, debug_buffer_size=1 << 16)
    method = program.load_method("forward")
    x = torch.randn(3, 6)
    out = method.execute([x.numpy()])[0]
    np.testing.assert_allclose(out, (x * 2).reshape(6, -1).numpy())
    prims = {r.index for r in method.records if r.is_prim}
    assert {method.records[i].name for i in prims} == {"aten::sym_size.int",
                                                       "executorch_prim::mul.Scalar"}
    events = program.event_tracer.run_blocks[-1].events
    for e in events:
        if e.instruction_id in prims and e.chain_index == 0:
            assert not isinstance(e, DebugEvent) and e.name == "OPERATOR_CALL"
    # Every instruction, prim or not, has its node's handle.
    assert sorted(et.debug_handle_map["forward"]) == [r.index for r in method.records]
