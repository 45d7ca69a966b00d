"""``strip_taps_``: after partitioning and before ``to_executorch``, each ``tap.Tensor``
becomes its reducer's operators (none for ``FULL_TENSOR``), which then run on the CPU: a
partitioner never saw them, so the tapped value is read where the delegate hands it back."""

from __future__ import annotations

import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensor
from torch.export import ExportedProgram
from torch.export.exported_program import OutputSpec, TensorArgument

from ._reducers import get_reducer
from ._tap_pass import find_tap_nodes


def strip_taps_(edge_manager) -> None:  # type: ignore[no-untyped-def]
    """Replace the taps of every method of ``edge_manager`` (an ``EdgeProgramManager``) in
    place."""
    for method in edge_manager.methods:
        _strip(edge_manager.exported_program(method))


def _strip(ep: ExportedProgram) -> None:
    graph = ep.graph_module.graph
    output = graph.output_node()
    for tap in find_tap_nodes(ep.graph_module):
        source, reducer_name = tap.args[0], str(tap.args[1])
        with graph.inserting_before(tap):
            value = get_reducer(reducer_name).emit(graph, source)
        for user in list(tap.users):
            # The tap's output slot takes the reduced value; any other reader (none the tap
            # pass makes) reads the source, as if the tap were not there.
            user.replace_input_with(tap, value if user is output else source)
    graph.eliminate_dead_code()
    _fill_values(graph)
    ep.graph_module.recompile()
    _rename_outputs(ep, output)


def _fill_values(graph: fx.Graph) -> None:
    """Give the reducer's new nodes their ``meta['val']`` (``to_executorch`` plans memory
    from it), computed on the program's fake tensors."""
    new = [n for n in graph.nodes if n.op == "call_function" and "val" not in n.meta]
    fakes = [n.meta["val"] for n in graph.nodes
             if isinstance(n.meta.get("val"), FakeTensor)]
    if not new or not fakes:
        return
    with fakes[0].fake_mode:
        for node in new:
            args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda a: a.meta["val"])
            node.meta["val"] = node.target(*args, **kwargs)


def _rename_outputs(ep: ExportedProgram, output: fx.Node) -> None:
    """The signature names each output by its node: point the renamed ones at their new
    nodes (the runtime wires outputs by these names)."""
    specs = ep.graph_signature.output_specs
    values = output.args[0]
    if len(values) != len(specs):
        raise ValueError(f"the program has {len(values)} outputs but its signature "
                         f"{len(specs)}; it was malformed before strip_taps_")
    for i, (spec, node) in enumerate(zip(specs, values)):
        if (isinstance(node, fx.Node) and isinstance(spec.arg, TensorArgument)
                and spec.arg.name != node.name):
            specs[i] = OutputSpec(kind=spec.kind, arg=TensorArgument(name=node.name),
                                  target=spec.target)
