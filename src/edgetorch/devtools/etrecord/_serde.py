"""ExportedProgram <-> the four blobs an ETRecord stores, in the form ExecuTorch's
``exir.serde.serialize`` writes and reads, so that each side reads the other's programs.

torch's export serde does the work; what differs is the Edge dialect:

* an Edge operator is stored by its ATen schema (``target._op``) under the name
  ``executorch.exir.dialects.edge.ops.<namespace>.<op>.<overload>``, which ExecuTorch resolves
  to its own Edge op and we resolve to ours (``exir_ops.edge``);
* ``node.meta["debug_handle"]`` is kept (as a string, as ExecuTorch writes it);
* a planned buffer (``memory.alloc``, in a program ``to_executorch`` has lowered) is stored
  as ExecuTorch stores it: target ``memory.alloc``, each ``(shape, dtype)`` spec a string
  ``"<shape>;<dtype number>"``;
* a delegate call stores its lowered module as JSON (ExecuTorch's ``SerdeLoweredBackendModule``:
  the original Edge program, base64 blobs, backend id); reading one gives back a
  ``LoweredBackendModule`` that keeps the original program for the Inspector.
"""

from __future__ import annotations

import base64
import functools
import json
import operator
import types
from typing import Any

import torch
from torch._export.serde import schema
from torch._export.serde import serialize as export_serialize
from torch._higher_order_ops.executorch_call_delegate import executorch_call_delegate
from torch.export import ExportedProgram
from torch.utils._sympy.numbers import int_oo

from ...errors import UnsafeFileError
from ...exir.backend.compile_spec_schema import CompileSpec
from ...exir.backend.lowered_backend_module import LoweredBackendModule
from ...exir.dialects._ops import ops as exir_ops
from ...exir.dialects.edge._ops import EdgeOpOverload
from ...exir.memory import alloc as memory_alloc
from ...util.torch_files import check_graph_targets, load_tensors

EDGE_PREFIX = "executorch.exir.dialects.edge.ops."
ALLOC_TARGET = "memory.alloc"
MAX_ALLOC_RANK = 64  # a spec from a file names a shape; more dimensions than this is corrupt
SerializedArtifact = export_serialize.SerializedArtifact


# torch marks its serde classes final (no subclassing), so the Edge dialect's handling is
# bound onto an instance: torch's code calls these through ``self`` and finds ours first.


def _graph_serializer(ep: ExportedProgram) -> Any:
    ser = export_serialize.GraphModuleSerializer(ep.graph_signature, ep.module_call_graph)
    base = {name: getattr(ser, name) for name in _SERIALIZER_HOOKS}
    for name, fn in _SERIALIZER_HOOKS.items():
        setattr(ser, name, types.MethodType(functools.partial(fn, base=base), ser))
    return ser


class _SerializerHooks:
    @staticmethod
    def serialize_operator(self: Any, target: Any, *, base: dict) -> str:
        if isinstance(target, EdgeOpOverload):
            return EDGE_PREFIX + target.__name__
        return base["serialize_operator"](target)

    @staticmethod
    def handle_call_function(self: Any, node: torch.fx.Node, *, base: dict) -> None:
        if isinstance(node.target, EdgeOpOverload):
            edge_op = node.target
            inputs = self.serialize_inputs(edge_op._op, node.args, node.kwargs)
            node.target = edge_op._op  # torch's output serializer reads the ATen schema
            try:
                outputs = self.serialize_outputs(node)
            finally:
                node.target = edge_op
            self.graph_state.nodes.append(schema.Node(
                name=node.name, target=self.serialize_operator(edge_op), inputs=inputs,
                outputs=outputs, metadata=self.serialize_metadata(node)))
            return
        if node.target is memory_alloc:
            self.graph_state.nodes.append(schema.Node(
                name=node.name, target=ALLOC_TARGET, inputs=_alloc_inputs(node.args[0]),
                outputs=_delegate_outputs(self, node), metadata=self.serialize_metadata(node)))
            return
        if node.target is executorch_call_delegate:
            lowered = node.args[0]
            args = [schema.NamedArgument(
                name=lowered.target,
                arg=schema.Argument.create(as_string=_lowered_module_json(lowered)))]
            args += [schema.NamedArgument(name=f"delegate_arg_{i}", arg=self.serialize_input(a))
                     for i, a in enumerate(node.args[1:])]
            self.graph_state.nodes.append(schema.Node(
                name=node.name, target=self.serialize_operator(node.target), inputs=args,
                outputs=_delegate_outputs(self, node), metadata=self.serialize_metadata(node)))
            return
        base["handle_call_function"](node)

    @staticmethod
    def serialize_metadata(self: Any, node: torch.fx.Node, *, base: dict) -> dict[str, str]:
        meta = base["serialize_metadata"](node)
        if "debug_handle" in node.meta:
            meta["debug_handle"] = str(node.meta["debug_handle"])
        return meta


_SERIALIZER_HOOKS = {name: getattr(_SerializerHooks, name) for name in
                     ("serialize_operator", "handle_call_function", "serialize_metadata")}


def _alloc_inputs(specs: Any) -> list[schema.NamedArgument]:
    """One ``alloc_arg`` for a single ``(shape, dtype)``, one ``alloc_list`` entry per spec of
    a list (ExecuTorch's names)."""
    def spec(s: Any) -> schema.Argument:
        shape, dtype = s
        number = export_serialize._TORCH_TO_SERIALIZE_DTYPE[dtype].value
        return schema.Argument.create(as_string=f"{tuple(shape)};{number}")

    if isinstance(specs, list):
        return [schema.NamedArgument(name="alloc_list", arg=spec(s)) for s in specs]
    return [schema.NamedArgument(name="alloc_arg", arg=spec(specs))]


def _alloc_spec(text: str) -> tuple[tuple[int, ...], torch.dtype]:
    """``"(2, 3);7"`` -> ``((2, 3), torch.float32)``; anything else is refused."""
    shape_text, sep, dtype_text = text.partition(";")
    dims = [d.strip() for d in shape_text.strip().strip("()").split(",")]
    dims = [d for d in dims if d]
    if not sep or len(dims) > MAX_ALLOC_RANK or not all(d.isdigit() for d in dims) \
            or not dtype_text.strip().isdigit():
        raise UnsafeFileError(f"memory.alloc spec {text[:80]!r} is not '<shape>;<dtype>'")
    try:
        dtype = export_serialize._SERIALIZE_TO_TORCH_DTYPE[
            schema.ScalarType(int(dtype_text))]
    except (ValueError, KeyError) as e:
        raise UnsafeFileError(f"memory.alloc spec {text[:80]!r}: unknown dtype") from e
    return tuple(int(d) for d in dims), dtype


def _deserialize_alloc(self: Any, serialized_node: schema.Node) -> None:
    inputs = serialized_node.inputs
    if not inputs or any(i.arg.type != "as_string" for i in inputs):
        raise UnsafeFileError(f"memory.alloc node {serialized_node.name!r} has no specs")
    specs = [_alloc_spec(i.arg.as_string) for i in inputs]
    arg: Any = specs[0] if len(inputs) == 1 and inputs[0].name == "alloc_arg" else specs
    node = self.graph.create_node("call_function", memory_alloc, (arg,), {}, "alloc")
    outputs = serialized_node.outputs
    if len(outputs) == 1 and outputs[0].type == "as_tensor":
        self.sync_fx_node(outputs[0].as_tensor.name, node)
    elif outputs:
        self.deserialize_multiple_outputs(serialized_node, node)
    node.meta.update(self.deserialize_metadata(serialized_node.metadata))


def _delegate_outputs(self: Any, node: torch.fx.Node) -> list[schema.Argument]:
    """Outputs named after the ``getitem`` users, as ExecuTorch names them."""
    meta_val = node.meta["val"]
    if isinstance(meta_val, torch.Tensor):
        return [schema.Argument.create(as_tensor=self.serialize_tensor_output(node.name, meta_val))]
    names = {u.args[1]: u.name for u in node.users if u.target is operator.getitem}
    args = [self.serialize_tensor_output(names.get(i, f"{node.name}_unused_{i}"), v)
            for i, v in enumerate(meta_val)]
    if len(args) == 1:
        return [schema.Argument.create(as_tensors=args)]
    return [schema.Argument.create(as_tensor=a) for a in args]


def _lowered_module_json(lowered_node: torch.fx.Node) -> str:
    module = getattr(lowered_node.graph.owning_module, lowered_node.target)
    artifact = _serialize_program(module.original_module)

    def b64(b: bytes) -> str:
        return base64.b64encode(bytes(b)).decode("ascii")

    payload = {
        "original_module": _as_executorch_schema(
            export_serialize._dataclass_to_dict(artifact.exported_program)),
        "original_state_dict": b64(artifact.state_dict),
        "original_constants": b64(artifact.constants),
        "processed_bytes": b64(module.processed_bytes),
        "compile_specs": [{"key": cs.key, "value": b64(cs.value)} for cs in module.compile_specs],
        "backend_id": module.backend_id,
        "named_data_store": None,
    }
    return json.dumps(payload, cls=export_serialize.EnumEncoder)


def _serialize_program(ep: ExportedProgram) -> SerializedArtifact:
    graph_module = _graph_serializer(ep).serialize(ep.graph_module)
    constants = dict(ep.constants)
    kwargs: dict[str, Any] = {}
    if hasattr(ep, "verifiers"):
        kwargs["verifiers"] = [v.dialect for v in ep.verifiers]
    serialized = schema.ExportedProgram(
        graph_module=graph_module,
        opset_version={"aten": torch._C._get_max_operator_version()},
        range_constraints=export_serialize.serialize_range_constraints(ep.range_constraints),
        schema_version=schema.SchemaVersion(major=schema.SCHEMA_VERSION[0],
                                            minor=schema.SCHEMA_VERSION[1]),
        **kwargs,
    )
    example = (export_serialize.serialize_torch_artifact(ep.example_inputs)
               if ep.example_inputs is not None else b"")
    return SerializedArtifact(serialized, export_serialize.serialize_torch_artifact(ep.state_dict),
                              export_serialize.serialize_torch_artifact(constants), example)


# ExecuTorch 1.5.1 reads programs with its own copy of the export schema (version 5.4), which
# lacks fields newer torch writes; they are dropped (all are optional in torch's reader too).
ET_SCHEMA_VERSION = {"major": 5, "minor": 4}
_NEWER_FIELDS = {"torch_version", "guards_code", "sym_float_values", "forward_arg_names",
                 "treespec_namedtuple_fields", "is_hop_single_tensor_return"}


def _as_executorch_schema(obj: Any) -> Any:
    if isinstance(obj, list):
        return [_as_executorch_schema(v) for v in obj]
    if not isinstance(obj, dict):
        return obj
    out = {k: _as_executorch_schema(v) for k, v in obj.items() if k not in _NEWER_FIELDS}
    if "graph" in out and "signature" in out:  # GraphModule
        out.pop("metadata", None)
    if "name" in out and "arg" in out:  # NamedArgument
        out.pop("kind", None)
    if "verifiers" in out:  # ExportedProgram: ExecuTorch stores one dialect
        verifiers = out.pop("verifiers")
        out["dialect"] = verifiers[0] if verifiers else "EDGE"
    if "schema_version" in out:
        out["schema_version"] = dict(ET_SCHEMA_VERSION)
    return out


def serialize(ep: ExportedProgram) -> SerializedArtifact:
    """The four blobs: program JSON (bytes), state dict, constants, example inputs."""
    artifact = _serialize_program(ep)
    text = json.dumps(_as_executorch_schema(
        export_serialize._dataclass_to_dict(artifact.exported_program)),
        cls=export_serialize.EnumEncoder)
    return SerializedArtifact(text.encode("utf-8"), artifact.state_dict, artifact.constants,
                              artifact.example_inputs)


def _graph_deserializer() -> Any:
    des = export_serialize.GraphModuleDeserializer()
    base = {name: getattr(des, name) for name in _DESERIALIZER_HOOKS}
    for name, fn in _DESERIALIZER_HOOKS.items():
        setattr(des, name, types.MethodType(functools.partial(fn, base=base), des))
    return des


class _DeserializerHooks:
    @staticmethod
    def deserialize_operator(self: Any, serialized_target: str, *, base: dict) -> Any:
        if serialized_target.startswith(EDGE_PREFIX):
            return _edge_operator(serialized_target)
        if serialized_target == ALLOC_TARGET:
            return memory_alloc
        return base["deserialize_operator"](serialized_target)

    @staticmethod
    def deserialize_node(self: Any, serialized_node: schema.Node, target: Any, *,
                         base: dict) -> None:
        if isinstance(target, EdgeOpOverload):
            # torch reads inputs and outputs against the ATen schema; the node keeps the Edge op
            before = set(self.graph.nodes)
            base["deserialize_node"](serialized_node, target._op)
            for node in self.graph.nodes:
                if node not in before and node.op == "call_function" and node.target is target._op:
                    node.target = target
            return
        if target is executorch_call_delegate:
            _deserialize_delegate(self, serialized_node)
            return
        if target is memory_alloc:
            _deserialize_alloc(self, serialized_node)
            return
        base["deserialize_node"](serialized_node, target)

    @staticmethod
    def deserialize_metadata(self: Any, metadata: dict[str, str], *, base: dict) -> dict:
        meta = base["deserialize_metadata"](metadata)
        if "debug_handle" in metadata:
            meta["debug_handle"] = json.loads(metadata["debug_handle"])
        return meta


def _edge_operator(serialized_target: str) -> EdgeOpOverload:
    """``executorch.exir.dialects.edge.ops.aten.add.Tensor`` -> our Edge op; anything that is
    not ``<namespace>.<op>.<overload>`` naming an Edge operator is refused (the name comes from
    a file and is resolved by attribute lookup)."""
    parts = serialized_target[len(EDGE_PREFIX):].split(".")
    if len(parts) != 3 or not all(p.isidentifier() and not p.startswith("__") for p in parts):
        raise UnsafeFileError(f"operator {serialized_target!r} is not an Edge operator name "
                              "(<namespace>.<op>.<overload>)")
    target: Any = exir_ops.edge  # ExecuTorch's names and ours are the same ATen names
    try:
        for part in parts:
            target = getattr(target, part)
    except (AttributeError, RuntimeError) as e:
        raise UnsafeFileError(f"operator {serialized_target!r} is not a known Edge operator "
                              f"({e})") from e
    if not isinstance(target, EdgeOpOverload):
        raise UnsafeFileError(f"{serialized_target!r} does not name an Edge operator")
    return target


_DESERIALIZER_HOOKS = {name: getattr(_DeserializerHooks, name) for name in
                       ("deserialize_operator", "deserialize_node", "deserialize_metadata")}


def _deserialize_delegate(self: Any, serialized_node: schema.Node) -> None:
    first, *rest = serialized_node.inputs
    payload = json.loads(first.arg.as_string)
    outer = export_serialize._CURRENT_DESERIALIZER  # torch allows one deserializer at a time
    export_serialize._CURRENT_DESERIALIZER = None
    try:
        original = _deserialize_ep(
            export_serialize._dict_to_dataclass(schema.ExportedProgram,
                                                payload["original_module"]),
            load_tensors(base64.b64decode(payload["original_state_dict"]),
                         f"delegate {first.name!r} original_state_dict"),
            load_tensors(base64.b64decode(payload["original_constants"]),
                         f"delegate {first.name!r} original_constants"), None)
    finally:
        export_serialize._CURRENT_DESERIALIZER = outer
    check_graph_targets(original.graph_module, f"delegate {first.name!r}'s original program")
    lowered = LoweredBackendModule(
        original, payload["backend_id"], base64.b64decode(payload["processed_bytes"]),
        [CompileSpec(cs["key"], base64.b64decode(cs["value"])) for cs in payload["compile_specs"]])
    self.module.register_module(first.name, lowered)
    args = (self.graph.get_attr(first.name), *(self.deserialize_input(a.arg) for a in rest))
    node = self.graph.create_node("call_function", executorch_call_delegate, args, {},
                                  serialized_node.name)
    outputs = serialized_node.outputs
    if len(outputs) == 1 and outputs[0].type == "as_tensor":
        self.sync_fx_node(outputs[0].as_tensor.name, node)
    elif outputs:
        self.deserialize_multiple_outputs(serialized_node, node)
    node.meta.update(self.deserialize_metadata(serialized_node.metadata))


def _deserialize_program(artifact: SerializedArtifact, what: str) -> ExportedProgram:
    text = artifact.exported_program
    serialized = export_serialize._dict_to_dataclass(
        schema.ExportedProgram, json.loads(text.decode("utf-8") if isinstance(text, bytes) else text))
    # Tensors are read here, weights-only: torch's own reader would retry an unsafe load.
    return _deserialize_ep(serialized, load_tensors(artifact.state_dict, f"{what}'s state dict"),
                           load_tensors(artifact.constants, f"{what}'s constants"),
                           load_tensors(artifact.example_inputs, f"{what}'s example inputs")
                           if artifact.example_inputs else None)


def _deserialize_ep(exported_program: schema.ExportedProgram, state_dict: Any, constants: Any,
                    example_inputs: Any = None) -> ExportedProgram:
        self = export_serialize.ExportedProgramDeserializer()
        symbol_ranges = {
            k: torch.fx.experimental.symbolic_shapes.ValueRanges(
                # an unset bound is unbounded (torch's own deserializer passes the same)
                export_serialize._int_to_sympy_int(v.min_val, -int_oo),
                export_serialize._int_to_sympy_int(v.max_val, int_oo))
            for k, v in exported_program.range_constraints.items()}
        res = _graph_deserializer().deserialize(
            exported_program.graph_module, state_dict, constants, example_inputs, symbol_ranges)
        range_constraints = self.deserialize_range_constraints(symbol_ranges,
                                                               res.names_to_symbols)
        # Build without the ATen verifier (Edge ops are not ATen ops), then attach the graph.
        dummy = torch.fx.Graph()
        dummy.output(())
        ep = ExportedProgram(
            root=res.graph_module, graph=dummy,
            graph_signature=torch.export.ExportGraphSignature(input_specs=[], output_specs=[]),
            state_dict=res.state_dict, range_constraints=range_constraints,
            module_call_graph=res.module_call_graph, example_inputs=res.example_inputs,
            constants=res.constants)
        ep.graph_module.graph = res.graph_module.graph
        ep._graph_signature = res.signature
        for node in res.graph_module.graph.nodes:
            if node.op == "get_attr":
                setattr(ep.graph_module, node.target, getattr(res.graph_module, node.target))
        return ep


def deserialize(artifact: SerializedArtifact, what: str = "program") -> ExportedProgram:
    """Read a program written by :func:`serialize` or by ExecuTorch's ``serialize``: tensors
    with ``weights_only=True`` only, and a graph that calls operators only (both refused with
    ``UnsafeFileError`` otherwise)."""
    ep = _deserialize_program(artifact, what)
    check_graph_targets(ep.graph_module, what)
    return ep
