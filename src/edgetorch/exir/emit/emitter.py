"""The emitter: a lowered, memory-planned graph -> one ``ExecutionPlan`` of program.fbs.

Arguments follow the operator's schema order (defaults filled in), and every ``KernelCall``
ends with its return slot, as ExecuTorch's emitter writes them, so the C++ runtime's unboxing
wrappers and ours read the same layout. Int lists are boxed (their items are value indices)
so symbolic sizes can live in them. Every constant argument gets a fresh EValue, in argument
order, as ExecuTorch's emitter writes them (``_emit_argument`` never looks values up), so the
values table -- and the whole ``.pte`` -- matches ExecuTorch's byte for byte.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._higher_order_ops.executorch_call_delegate import executorch_call_delegate
from torch._ops import OpOverload
from torch.export import ExportedProgram
from torch.utils._pytree import treespec_dumps

from ...errors import ExportError
from ...schema import program as S
from .. import memory
from .._serialize._named_data_store import NamedDataStore
from ..ops import describe_node, is_cond, is_map, is_out_variant, op_name_and_overload, user_frame
from ..passes.executorch_prim_ops_registry import SYM_OP_NAMES, SYM_OPS
from ..passes.to_out_variant import mutated_arg_index
from ..signature import placeholder_infos
from ..tensor import TensorSpec, make_tensor_value, memory_format_enum, scalar_type_of
from .control_flow import ControlFlowEmitter


@dataclass
class ProgramState:
    """What the methods of one program share: the constant buffers and delegate blobs."""

    constant_buffers: list[bytes] = field(default_factory=lambda: [b""])
    _constant_index: dict[bytes, int] = field(default_factory=dict)
    delegate_blobs: list[bytes] = field(default_factory=list)
    # Initial states of mutable buffers (ExecuTorch's mutable data segment); 0 is reserved.
    mutable_buffers: list[bytes] = field(default_factory=lambda: [b""])
    # External constants (.ptd files): tag -> {fully qualified name: (bytes, spec)}.
    external: dict[str, dict[str, tuple[bytes, TensorSpec]]] = field(default_factory=dict)
    # Named data the delegates' preprocess stored (PreprocessResult.data_store_output).
    named_data: NamedDataStore = field(default_factory=NamedDataStore)

    _delegate_index: dict[bytes, int] = field(default_factory=dict)
    # Per method, ExecuTorch's emitter outputs for the devtools (see MethodEmitter._provenance).
    debug_handle_map: dict[str, dict[int, int | list[int]]] = field(default_factory=dict)
    delegate_map: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    instruction_id_to_num_outs_map: dict[str, dict[int, int]] = field(default_factory=dict)

    def add_delegate_blob(self, data: bytes) -> int:
        """Index of ``data`` in ``Program.backend_delegate_data`` (identical blobs shared)."""
        key = hashlib.sha256(data).digest()
        idx = self._delegate_index.get(key)
        if idx is None:
            idx = len(self.delegate_blobs)
            self.delegate_blobs.append(data)
            self._delegate_index[key] = idx
        return idx

    def add_mutable(self, data: bytes) -> int:
        self.mutable_buffers.append(data)
        return len(self.mutable_buffers) - 1

    def add_constant(self, data: bytes) -> int:
        key = hashlib.sha256(data).digest()
        idx = self._constant_index.get(key)
        if idx is None:
            idx = len(self.constant_buffers)
            self.constant_buffers.append(data)
            self._constant_index[key] = idx
        return idx


def tensor_bytes(t: torch.Tensor, dim_order: tuple[int, ...]) -> bytes:
    """The bytes of ``t`` laid out in ``dim_order`` (contiguous or channels-last)."""
    t = t.detach()
    if t.dim() > 0:
        t = t.permute(dim_order)
    flat = t.contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


class MethodEmitter(ControlFlowEmitter):
    def __init__(self, name: str, ep: ExportedProgram, state: ProgramState,
                 emit_stacktrace: bool = False, emit_mutable_buffer_names: bool = True,
                 external_tag: Callable[[torch.fx.Node], str | None] | None = None) -> None:
        self.name = name
        self.ep = ep
        self.state = state
        self.emit_stacktrace = emit_stacktrace
        self.emit_mutable_buffer_names = emit_mutable_buffer_names
        self.external_tag = external_tag
        self.values: list[S.EValue] = []
        self.operators: list[S.Operator] = []
        self._op_index: dict[tuple[str, str], int] = {}
        self.instructions: list[S.Instruction] = []
        self.stacktrace: list[S.FrameList] = []
        self.delegates: list[S.BackendDelegate] = []
        self._spec_ids: dict[int, int] = {}
        self.env: dict[torch.fx.Node, Any] = {}
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.node: torch.fx.Node | None = None
        self.debug_handle_map: dict[int, int | list[int]] = {}
        self.delegate_map: dict[int, dict[str, Any]] = {}
        self.instruction_id_to_num_outs_map: dict[int, int] = {}

    # ---- values ------------------------------------------------------------------------

    def _add(self, val: S.KernelTypes) -> int:
        self.values.append(S.EValue(val))
        return len(self.values) - 1

    def _const(self, value: Any) -> int:
        """A new EValue for a constant scalar/string/None (never shared, as in ExecuTorch)."""
        return self._add(_scalar_evalue(value))

    def _tensor(self, spec: TensorSpec) -> int:
        idx = self._spec_ids.get(id(spec))
        if idx is not None:
            return idx
        data_idx = 0
        alloc = None
        extra = None
        if spec.const:
            storage = spec.storage
            if storage is None and spec.alias_of is not None and spec.alias_of.storage is not None:
                storage = spec.alias_of.storage.reshape(spec.shape)
            data = tensor_bytes(storage, spec.dim_order)
            tag = self._external_tag(spec)
            if tag is not None:
                # Stored in a .ptd file, found by name at load time.
                self.state.external.setdefault(tag, {})[spec.fqn] = (data, spec)
                extra = S.ExtraTensorInfo(fully_qualified_name=spec.fqn,
                                          location=S.TensorDataLocation.EXTERNAL)
            else:
                data_idx = self.state.add_constant(data)
        else:
            owner = spec if spec.planned else spec.alias_of
            if owner is not None and owner.planned:
                alloc = S.AllocationDetails.of(owner.mem_id, owner.mem_offset)
            if spec.fqn is not None and spec.planned:  # a mutable buffer
                if spec.storage is not None:
                    data = tensor_bytes(spec.storage, spec.dim_order)
                    # A zero initial state needs no bytes (our arenas start zeroed) unless
                    # the buffer is marked (InitializedMutableBufferPass).
                    if data.strip(b"\x00") or self.node is not None and \
                            self.node.meta.get("et_init_buffer"):
                        data_idx = self.state.add_mutable(data)
                if self.emit_mutable_buffer_names:
                    extra = S.ExtraTensorInfo(fully_qualified_name=spec.fqn,
                                              location=S.TensorDataLocation.SEGMENT)
        tensor = make_tensor_value(data_idx, alloc, spec, extra)
        idx = self._add(tensor)
        self._spec_ids[id(spec)] = idx
        return idx

    def _external_tag(self, spec: TensorSpec) -> str | None:
        """The .ptd file (tag) a weight placeholder goes to: ``meta["constant_tag"]`` when a
        pass set it (ExecuTorch's key), else the config's choice. Lifted constants stay in the
        program: they are closer to code than to data."""
        node = self.node
        if not spec.fqn or node is None or node.op != "placeholder":
            return None
        if node.meta.get("constant_tag") is not None:
            return node.meta["constant_tag"]
        if self.external_tag is None or "_lifted_tensor" in node.name:
            return None
        return self.external_tag(node)

    def _empty_tensor(self) -> int:
        return self._add(S.Tensor(scalar_type=S.ScalarType.BYTE, storage_offset=0, sizes=[0],
                                  dim_order=[0]))

    # ---- arguments ---------------------------------------------------------------------

    def _arg(self, value: Any, jit_type: Any) -> int:
        if isinstance(value, torch.fx.Node):
            v = self.env[value]
            if isinstance(v, (list, tuple)):
                return self._add(S.TensorList(list(v)))
            return v
        if isinstance(jit_type, torch.OptionalType):
            if value is None:
                return self._const(None)
            jit_type = jit_type.getElementType()
        if value is None:
            if isinstance(jit_type, torch.TensorType):
                return self._empty_tensor()
            return self._const(None)
        if isinstance(value, (list, tuple)):
            return self._list(list(value), jit_type)
        if isinstance(value, torch.dtype):
            return self._const(int(scalar_type_of(value)))
        if isinstance(value, torch.memory_format):
            return self._const(memory_format_enum(value))
        if isinstance(value, torch.layout):
            return self._const(0)
        if isinstance(value, torch.device):
            return self._const(0)
        if isinstance(value, (bool, int, float, str)):
            return self._const(value)
        raise ExportError(f"cannot emit argument {value!r} of type {type(value).__name__}\n  "
                          f"{describe_node(self.node)}")

    def _list(self, items: list[Any], jit_type: Any) -> int:
        elem = jit_type.getElementType() if isinstance(jit_type, torch.ListType) else None
        if isinstance(elem, torch.OptionalType) and isinstance(elem.getElementType(), torch.TensorType):
            return self._add(S.OptionalTensorList(
                [-1 if v is None else self._arg(v, torch.TensorType.get()) for v in items]))
        if elem is None:  # no schema type (e.g. a graph output): infer from the items
            elem = _infer_elem_type(items)
        if isinstance(elem, torch.TensorType):
            return self._add(S.TensorList([self._arg(v, elem) for v in items]))
        if isinstance(elem, torch.BoolType):
            return self._add(S.BoolList([bool(v) for v in items]))
        if isinstance(elem, torch.FloatType):
            return self._add(S.DoubleList([float(v) for v in items]))
        # Int lists (and SymInt lists) are boxed.
        boxed = [self.env[v] if isinstance(v, torch.fx.Node) else self._const(int(v)) for v in items]
        return self._add(S.IntList(boxed))

    # ---- instructions ------------------------------------------------------------------

    def _operator(self, name: str, overload: str) -> int:
        key = (name, overload)
        idx = self._op_index.get(key)
        if idx is None:
            idx = len(self.operators)
            self.operators.append(S.Operator(name=name, overload=overload))
            self._op_index[key] = idx
        return idx

    def _append(self, instr: S.InstructionArguments) -> int:
        self.instructions.append(S.Instruction(instr))
        if self.emit_stacktrace:
            self.stacktrace.append(_frames(self.node))
        return len(self.instructions) - 1

    def _kernel_call(self, name: str, overload: str, args: list[int]) -> int:
        return self._append(S.KernelCall(self._operator(name, overload), args))

    def _provenance(self, instr: int, node: torch.fx.Node, lowered: Any = None) -> None:
        """Record which debug handle(s) instruction ``instr`` runs, as ExecuTorch's emitter
        does: an operator's own handle; for a delegate call, the handles of every
        call_function node of the lowered subgraph, its number of outputs, and the backend's
        ``debug_handle_map`` (delegate debug identifier -> handles) under ``delegate_map``."""
        if len(self._gm_stack) > 1:
            return  # inside a cond branch: ExecuTorch's sub-emitters' maps are not kept
        if lowered is None:
            handle = node.meta.get("debug_handle")
            if handle is not None:
                self.debug_handle_map[instr] = handle
            return
        graph = lowered.original_module.graph
        self.debug_handle_map[instr] = [
            n.meta["debug_handle"] for n in graph.nodes
            if n.op == "call_function" and n.meta.get("debug_handle") is not None]
        outs = graph.output_node().args[0]
        self.instruction_id_to_num_outs_map[instr] = len(outs) if isinstance(outs, (list, tuple)) else 1
        meta = lowered.meta if lowered.meta is not None else {}
        self.delegate_map[instr] = {"name": lowered.backend_id,
                                    "delegate_map": meta.get("debug_handle_map", {})}

    def _emit_op(self, node: torch.fx.Node) -> Any:
        op: OpOverload = node.target
        schema = op._schema
        args = []
        for i, sa in enumerate(schema.arguments):
            if sa.name in node.kwargs:
                value = node.kwargs[sa.name]
            elif not sa.kwarg_only and i < len(node.args):
                value = node.args[i]
            else:
                value = sa.default_value if sa.has_default_value() else None
            args.append(self._arg(value, sa.type))
        name, overload = op_name_and_overload(op)
        if is_out_variant(op):
            # The results are the out arguments just emitted (ExecuTorch's layout): one out
            # is returned as is; several, or one Tensor[] out, as a new TensorList.
            outs = [args[i] for i, sa in enumerate(schema.arguments) if sa.is_out]
            if len(outs) == 1 and not isinstance(self.values[outs[0]].val, S.TensorList):
                ret = outs[0]
                args.append(ret)
            else:
                ret = outs if len(outs) > 1 else list(self.values[outs[0]].val.items)
                args.append(self._add(S.TensorList(list(ret))))
        elif (i := mutated_arg_index(op)) is not None:  # in-place: returns what it wrote
            ret = args[i]
            args.append(ret)
        else:  # ops returning a scalar, e.g. aten::sym_size.int
            ret = self._add(S.Int(0))
            args.append(ret)
        self._provenance(self._kernel_call(name, overload, args), node)
        return ret

    def _emit_view(self, node: torch.fx.Node) -> int:
        spec: TensorSpec = node.meta["spec"]
        base_spec = spec.alias_of
        static = spec.dynamism == S.TensorShapeDynamism.STATIC
        if static and base_spec is not None and (base_spec.planned or base_spec.const):
            if base_spec.const:
                spec.const = True
            return self._tensor(spec)  # same bytes as the base: no instruction needed
        base = self._arg(node.args[0], torch.TensorType.get())
        size = self._list(list(node.args[1]), torch.ListType.ofInts())
        out = self._tensor(spec)
        self._kernel_call("executorch_prim::et_view", "default", [base, size, out])
        return out

    def _emit_sym(self, node: torch.fx.Node) -> int:
        args = [self.env[a] if isinstance(a, torch.fx.Node) else self._const(a) for a in node.args]
        ret = self._add(S.Int(0) if not isinstance(node.meta.get("val"), (float, torch.SymFloat))
                        else S.Double(0.0))
        instr = self._kernel_call(f"executorch_prim::{SYM_OP_NAMES[node.target]}", "Scalar",
                                  args + [ret])
        self._provenance(instr, node)
        return ret

    def _emit_delegate(self, node: torch.fx.Node) -> int | list[int]:
        """``DelegateCall`` with args ``[inputs..., outputs...]``, as ExecuTorch emits it; the
        outputs are planned tensors (a list read by ``getitem``, or one tensor when the
        delegate returns one). Every call gets its own ``BackendDelegate`` entry; identical
        blobs share one ``backend_delegate_data`` entry."""
        lowered = getattr(node.graph.owning_module, node.args[0].target)
        index = self.state.add_delegate_blob(lowered.processed_bytes)
        store_output = lowered.named_data_store_output
        if store_output is not None:  # external tags go to <tag>.ptd (data_files)
            self.state.named_data.merge_named_data_store(store_output)
        args = [self._arg(a, None) for a in node.args[1:]]
        spec = node.meta["spec"]
        specs = list(spec) if isinstance(spec, (tuple, list)) else [spec]
        outs = [self._tensor(s) if isinstance(s, TensorSpec) else self._add(S.Int(0))
                for s in specs]
        self.delegates.append(S.BackendDelegate(
            id=lowered.backend_id,
            processed=S.BackendDelegateDataReference(S.DataLocation.INLINE, index),
            compile_specs=[S.CompileSpec(cs.key, bytes(cs.value)) for cs in lowered.compile_specs],
        ))
        self.instructions.append(S.Instruction(S.DelegateCall(len(self.delegates) - 1, args + outs)))
        if self.emit_stacktrace:
            self.stacktrace.append(_frames(node))
        self._provenance(len(self.instructions) - 1, node, lowered)
        return outs if isinstance(spec, (tuple, list)) else outs[0]

    # ---- graph walk --------------------------------------------------------------------

    def emit(self) -> S.ExecutionPlan:
        infos = placeholder_infos(self.ep)
        self._gm_stack = [self.ep.graph_module]
        for node in self.ep.graph.nodes:
            self.node = node
            if node.op == "placeholder":
                self.env[node] = self._placeholder(node, infos.get(node))
            elif node.op == "call_function":
                self.env[node] = self._call(node)
            elif node.op == "output":
                self._output(node)
            elif node.op == "get_attr":
                self.env[node] = None  # delegates and submodules are emitted by their users
        in_spec = self.ep.call_spec.in_spec
        out_spec = self.ep.call_spec.out_spec
        self.state.debug_handle_map[self.name] = self.debug_handle_map
        self.state.delegate_map[self.name] = self.delegate_map
        self.state.instruction_id_to_num_outs_map[self.name] = self.instruction_id_to_num_outs_map
        return S.ExecutionPlan(
            name=self.name,
            container_meta_type=S.ContainerMetadata(
                treespec_dumps(in_spec) if in_spec is not None else "",
                treespec_dumps(out_spec) if out_spec is not None else "",
            ),
            values=self.values,
            inputs=self.inputs,
            outputs=self.outputs,
            chains=[S.Chain(inputs=[], outputs=[], instructions=self.instructions,
                            stacktrace=self.stacktrace if self.emit_stacktrace else None)],
            operators=self.operators,
            delegates=self.delegates,
            non_const_buffer_sizes=list(self.ep.graph_module.meta["non_const_buffer_sizes"]),
            # The planner's list of non-CPU arenas (None when every arena is in host memory).
            non_const_buffer_device=self.ep.graph_module.meta.get("non_const_buffer_device"),
        )

    def _placeholder(self, node: torch.fx.Node, info) -> int:
        spec = node.meta.get("spec")
        if isinstance(spec, TensorSpec):
            idx = self._tensor(spec)
        else:
            idx = self._add(_scalar_evalue(node.meta.get("val")))
        if info is None or info.fqn is None:
            self.inputs.append(idx)
        return idx

    def _call(self, node: torch.fx.Node) -> Any:
        target = node.target
        if target is operator.getitem:
            return self.env[node.args[0]][node.args[1]]
        if target is memory.alloc:
            return self._tensor(node.meta["spec"])
        if target is memory.view:
            return self._emit_view(node)
        if target in SYM_OPS:
            return self._emit_sym(node)
        if is_cond(node):
            return self._emit_cond(node)
        if is_map(node):
            return self._emit_map(node)
        if target is executorch_call_delegate:
            return self._emit_delegate(node)
        if isinstance(target, OpOverload):
            return self._emit_op(node)
        raise ExportError(f"the emitter cannot handle call to {target}\n  {describe_node(node)}")

    def _output(self, node: torch.fx.Node) -> None:
        from torch.export.graph_signature import OutputKind

        kinds = [s.kind for s in self.ep.graph_signature.output_specs]
        for i, arg in enumerate(node.args[0]):
            if kinds and kinds[i] != OutputKind.USER_OUTPUT:
                continue
            if isinstance(arg, torch.fx.Node):
                self.outputs.append(self.env[arg])
            else:
                self.outputs.append(self._add(_scalar_evalue(arg)))


def constant_method_plan(name: str, value: Any, state: ProgramState) -> S.ExecutionPlan:
    """A method that just returns ``value`` (ExecuTorch's "constant methods", e.g. LLM
    metadata such as ``get_max_seq_len``): its outputs are the flattened leaves."""
    from torch.utils._pytree import tree_flatten

    leaves, spec = tree_flatten(value)
    values = []
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            data_idx = state.add_constant(tensor_bytes(leaf, tuple(range(leaf.dim()))))
            values.append(S.EValue(S.Tensor(
                scalar_type=scalar_type_of(leaf.dtype), storage_offset=0, sizes=list(leaf.shape),
                dim_order=list(range(leaf.dim())), data_buffer_idx=data_idx)))
        elif isinstance(leaf, torch.dtype):
            values.append(S.EValue(S.Int(int(scalar_type_of(leaf)))))
        else:
            values.append(S.EValue(_scalar_evalue(leaf)))
    return S.ExecutionPlan(
        name=name,
        container_meta_type=S.ContainerMetadata("", treespec_dumps(spec)),
        values=values,
        inputs=[],
        outputs=list(range(len(values))),
        chains=[S.Chain(inputs=[], outputs=[], instructions=[], stacktrace=None)],
        operators=[],
        delegates=[],
        non_const_buffer_sizes=[0],
    )


def _infer_elem_type(items: list[Any]) -> Any:
    if items and all(isinstance(v, torch.fx.Node) and isinstance(v.meta.get("val"), torch.Tensor)
                     for v in items):
        return torch.TensorType.get()
    if items and all(isinstance(v, bool) for v in items):
        return torch.BoolType.get()
    if items and any(isinstance(v, float) for v in items):
        return torch.FloatType.get()
    return torch.IntType.get()


def _scalar_evalue(value: Any) -> S.KernelTypes:
    if value is None:
        return S.Null()
    if isinstance(value, bool):
        return S.Bool(value)
    if isinstance(value, int):
        return S.Int(value)
    if isinstance(value, float):
        return S.Double(value)
    if isinstance(value, str):
        return S.String(value)
    if isinstance(value, torch.SymInt):
        return S.Int(0)
    raise ExportError(f"cannot emit value {value!r} of type {type(value).__name__}")


def _frames(node: torch.fx.Node | None) -> S.FrameList:
    if node is None:
        return S.FrameList([])
    where = user_frame(node)
    if where is None:
        return S.FrameList([])
    loc, _, rest = where.partition(" in ")
    filename, _, lineno = loc.rpartition(":")
    func, _, code = rest.partition(": ")
    return S.FrameList([S.Frame(filename=filename, lineno=int(lineno), name=func, context=code)])
