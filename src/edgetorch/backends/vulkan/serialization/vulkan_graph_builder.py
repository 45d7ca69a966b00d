"""``VkGraphBuilder``: a preprocessed Edge graph to a ``VkGraph`` (ExecuTorch 1.5.1's builder,
whose value numbering this follows exactly, so the blobs are byte-identical).

Nodes are visited in graph order. A placeholder that is used becomes a value (a weight a
constant too, its bytes in the named data under their SHA-256); a call's arguments become
values in schema order (scalars shared by value; ``None``, devices, dtypes as ``Null``),
then its output; a ``getitem`` names an item of its source's value list. Tensor values carry
the memory object the planner gave them and the representation ``TagMemoryMetaPass`` chose.
"""

from __future__ import annotations

import hashlib
import logging
import operator
from types import NoneType
from typing import Any

import torch
from torch._export.utils import get_buffer, get_param, is_buffer, is_param
from torch.export import ExportedProgram
from torch.fx import Node

from ....exir._serialize._named_data_store import NamedDataStore
from ....exir.backend.utils import DelegateMappingBuilder
from ....exir.dialects._ops import ops as exir_ops
from ....exir.tensor import TensorSpec
from .. import utils
from . import vulkan_graph_schema as vk

logger = logging.getLogger(__name__)

_Scalar = bool | int | float


def _tensor_bytes(t: torch.Tensor) -> bytes:
    """The bytes of ``t``'s whole storage, as ExecuTorch serializes a constant."""
    raw = torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage())
    return raw.numpy().tobytes()


class VkGraphBuilder:
    def __init__(self, program: ExportedProgram, delegate_mapping_builder: DelegateMappingBuilder,
                 downcast_64_bit: bool = True, force_fp16: bool = False,
                 alias_buffer_mutations: bool = False) -> None:
        self.program = program
        self.delegate_mapping_builder = delegate_mapping_builder
        self.downcast_64_bit = downcast_64_bit
        self.force_fp16 = force_fp16
        self.buffer_mutation_inputs: dict[str, Node] = {}
        self.buffer_mutation_user_outputs: set[str] = set()
        if alias_buffer_mutations:
            self._alias_buffer_mutations()
        self.chain: list[vk.OperatorCall] = []
        self.values: list[vk.VkValue] = []
        self.input_ids: list[int] = []
        self.output_ids: list[int] = []
        self.const_tensors: list = []  # (named key, size) or None per constant
        self.named_data_store = NamedDataStore()
        self.node_to_value_ids: dict[Node, int] = {}
        self.const_scalar_to_value_ids: dict[Any, int] = {}
        self.seen_ops: set = set()

    def _alias_buffer_mutations(self) -> None:
        """A mutated buffer's new value is written into the buffer's own value (through its
        prepack when there is one) instead of being an output."""
        sig = self.program.graph_signature
        nodes = {n.name: n for n in self.program.graph_module.graph.nodes}
        by_target = {}
        for name, target in sig.inputs_to_buffers.items():
            if name not in nodes:
                continue
            buf = nodes[name]
            prepack = next((u for u in buf.users if u.op == "call_function"
                            and u.target == exir_ops.edge.et_vk.prepack.default), None)
            by_target[target] = prepack or buf
        self.buffer_mutation_inputs = {out: by_target[t] for out, t in
                                       sig.buffers_to_mutate.items() if t in by_target}
        self.buffer_mutation_user_outputs = set(sig.user_outputs)

    # ---- constants ------------------------------------------------------------------------

    def get_param_tensor(self, node: Node) -> torch.Tensor:
        if node is None:
            raise RuntimeError("node is None")
        if is_param(self.program, node):
            tensor = get_param(self.program, node)
        elif is_buffer(self.program, node):
            tensor = get_buffer(self.program, node)
        elif utils.is_constant(self.program, node):
            name = self.program.graph_signature.inputs_to_lifted_tensor_constants[node.name]
            tensor = self.program.constants.get(name)
        elif utils.is_get_attr_node(node):
            try:  # lifted and unlifted graphs
                tensor = getattr(node.graph.owning_module, node.target)
            except AttributeError:
                tensor = getattr(self.program.graph_module, node.target)
        else:
            raise RuntimeError(f"unsupported param type, {node.op}.")
        assert tensor is not None
        return tensor

    def maybe_add_constant_tensor(self, node: Node) -> int:
        """The constant id of a weight node (its bytes, in the delegate's dtype, go to the
        named data under their SHA-256), or -1."""
        if not utils.is_param_node(self.program, node):
            return -1
        tensor = self.get_param_tensor(node)
        dtype = self.get_effective_dtype(tensor.dtype)
        if tensor.dtype != dtype:
            if dtype.is_floating_point:  # fp16: -1e5 masks would become -inf
                info = torch.finfo(dtype)
                tensor = tensor.clamp(min=info.min, max=info.max)
            tensor = tensor.to(dtype)
        tensor = tensor.contiguous()
        size = tensor.untyped_storage().nbytes()
        constant_id = len(self.const_tensors)
        if size > 0:
            data = _tensor_bytes(tensor)
            key = hashlib.sha256(data).hexdigest()
            self.named_data_store.add_named_data(key, data, alignment=16)
            self.const_tensors.append((key, size))
        else:
            self.const_tensors.append(None)
        return constant_id

    # ---- values ---------------------------------------------------------------------------

    def _append(self, value: Any) -> int:
        self.values.append(vk.VkValue(value))
        return len(self.values) - 1

    def create_node_value(self, node: Node) -> int:
        if node.name in self.buffer_mutation_inputs:
            src = self.buffer_mutation_inputs[node.name]
            if src not in self.node_to_value_ids:
                raise AssertionError("Cannot alias a buffer mutation before its input is "
                                     "serialized")
            self.node_to_value_ids[node] = self.node_to_value_ids[src]
            return self.node_to_value_ids[node]
        if utils.is_symint_node(node) or node.meta.get("etvk_is_scalar_tensor", False):
            new_id = self.create_symint_value()
        else:
            spec = node.meta.get("spec")
            if isinstance(spec, TensorSpec):
                new_id = self.create_tensor_value(spec, self.maybe_add_constant_tensor(node))
            elif isinstance(spec, (list, tuple)):
                new_id = self.create_value_list_value(spec)
            else:
                raise RuntimeError(f"Cannot create value for node {node} with spec of type "
                                   f"{type(spec)}")
        self.node_to_value_ids[node] = new_id
        return new_id

    def create_null_value(self) -> int:
        return self._append(vk.Null())

    def get_or_create_scalar_value(self, scalar: _Scalar) -> int:
        # 1 == True and 1 == 1.0 as dict keys: bools are keyed by their name, and an int and
        # an equal float share one value, as in ExecuTorch.
        key = str(scalar) if isinstance(scalar, bool) else scalar
        if key in self.const_scalar_to_value_ids:
            return self.const_scalar_to_value_ids[key]
        if isinstance(scalar, bool):
            new_id = self._append(vk.Bool(scalar))
        elif isinstance(scalar, int):
            new_id = self._append(vk.Int(scalar))
        else:
            new_id = self._append(vk.Double(scalar))
        self.const_scalar_to_value_ids[key] = new_id
        return new_id

    def create_symint_value(self) -> int:
        return self._append(vk.SymInt(0))

    def get_effective_dtype(self, dtype: torch.dtype) -> torch.dtype:
        if self.downcast_64_bit and dtype == torch.float64:
            return torch.float32
        if self.downcast_64_bit and dtype == torch.int64:
            return torch.int32
        if self.force_fp16 and dtype == torch.float32:
            return torch.float16
        return dtype

    def get_staging_dtype(self, dtype: torch.dtype) -> torch.dtype:
        # 64-bit values are converted on the CPU, when copying to/from the staging buffer.
        if self.downcast_64_bit and dtype == torch.float64:
            return torch.float32
        if self.downcast_64_bit and dtype == torch.int64:
            return torch.int32
        return dtype

    def create_tensor_value(self, spec: TensorSpec, constant_id: int = -1) -> int:
        storage, layout = vk.VkStorageType.DEFAULT_STORAGE, vk.VkMemoryLayout.DEFAULT_LAYOUT
        node_repr = getattr(spec, "etvk_node_repr", None)
        if node_repr is not None:
            assert isinstance(node_repr, utils.TensorRepr)
            storage, layout = node_repr.storage_type, node_repr.memory_layout
        dtype = self.get_effective_dtype(spec.dtype)
        # A constant's bytes are already in the effective dtype; an input/output is staged
        # in its own.
        staging = dtype if constant_id >= 0 else self.get_staging_dtype(spec.dtype)
        return self._append(vk.VkTensor(
            datatype=utils.get_vk_datatype(dtype), dims=list(spec.shape),
            constant_id=constant_id,
            mem_obj_id=spec.mem_obj_id if spec.mem_obj_id is not None else -1,
            storage_type=storage, memory_layout=layout,
            staging_datatype=utils.get_vk_datatype(staging)))

    def create_scalar_list_value(self, arg: list) -> int:
        """A list of scalars. As in ExecuTorch, an empty list appends three values (int,
        bool and int lists) and a list of bools two (bool and int lists); the first is used."""
        new_id = len(self.values)
        if not arg:
            self._append(vk.IntList([]))
        all_bool = all(isinstance(v, bool) for v in arg)
        all_int = all(isinstance(v, int) for v in arg)
        all_float = all(isinstance(v, float) for v in arg)
        int_or_sym = all(isinstance(v, int) or (isinstance(v, Node) and utils.is_symint_node(v))
                         for v in arg)
        if all_bool:
            self._append(vk.BoolList(list(arg)))
        if all_int:
            self._append(vk.IntList(list(arg)))
        elif all_float:
            self._append(vk.DoubleList(list(arg)))
        elif int_or_sym:
            return self.create_value_list_value(arg)
        else:
            raise NotImplementedError(f"Cannot add value for list {arg}")
        return new_id

    def create_value_list_value(self, arg: tuple | list) -> int:
        items = [self.get_or_create_value_for(e) for e in arg]
        return self._append(vk.ValueList(items))

    def create_string_value(self, string: str) -> int:
        return self._append(vk.String(string))

    def get_or_create_value_for(self, arg: Any) -> int:
        if isinstance(arg, Node):
            if arg in self.node_to_value_ids:
                return self.node_to_value_ids[arg]
            return self.create_node_value(arg)
        if isinstance(arg, (NoneType, torch.device, torch.dtype, torch.layout,
                            torch.memory_format)):
            return self.create_null_value()
        if isinstance(arg, (bool, int, float)):
            return self.get_or_create_scalar_value(arg)
        if isinstance(arg, TensorSpec):
            return self.create_tensor_value(arg)
        if isinstance(arg, list) and (not arg or any(isinstance(v, (bool, int, float))
                                                     for v in arg)):
            return self.create_scalar_list_value(arg)
        if isinstance(arg, list) and isinstance(arg[0], Node):
            return self.create_value_list_value(arg)
        if isinstance(arg, torch.fx.immutable_collections.immutable_list):
            return self.create_value_list_value(arg)
        if isinstance(arg, str):
            return self.create_string_value(arg)
        raise RuntimeError(f"Cannot create value for arg of type {type(arg)}")

    # ---- nodes ----------------------------------------------------------------------------

    def process_placeholder_node(self, node: Node) -> None:
        if not node.users:
            return  # an unused input or weight
        ids = self.create_node_value(node)
        if not utils.is_param_node(self.program, node):
            self.input_ids.append(ids)

    def process_getitem_node(self, node: Node) -> None:
        source = self.node_to_value_ids[node.all_input_nodes[0]]
        self.node_to_value_ids[node] = self.values[source].value.items[node.args[1]]

    def process_call_function_node(self, node: Node) -> None:
        args = []
        self.seen_ops.add(node.target)
        if hasattr(node.target, "_schema"):
            for i, schema_arg in enumerate(node.target._schema.arguments):
                if not schema_arg.kwarg_only and i < len(node.args):
                    value = node.args[i]
                elif schema_arg.name in node.kwargs:
                    value = node.kwargs[schema_arg.name]
                else:
                    value = schema_arg.default_value
                args.append(self.get_or_create_value_for(value))
        else:
            args.extend(self.get_or_create_value_for(a) for a in node.args)
        args.append(self.create_node_value(node))
        node_id = (0 if not self.delegate_mapping_builder
                   else self.delegate_mapping_builder.insert_delegate_mapping_entry(node))
        self.chain.append(vk.OperatorCall(node_id=node_id, name=node.target.__name__,
                                          args=args))

    def process_getattr_node(self, node: Node) -> None:
        self.create_node_value(node)

    def process_output_node(self, node: Node) -> None:
        for out in node.all_input_nodes:
            if out not in self.node_to_value_ids:
                raise AssertionError("Cannot find input to output node in node_to_value_ids. "
                                     "The output node is serialized before its producer.")
            # A mutated buffer's new value is not an output of the delegate call.
            if out.name in self.buffer_mutation_inputs:
                if out.name not in self.buffer_mutation_user_outputs:
                    continue
            elif utils.is_mutable_buffer_node(out, self.program):
                continue
            self.output_ids.append(self.node_to_value_ids[out])

    def process_node(self, node: Node, call_node_debug_hdl: int) -> None:
        if node.op == "placeholder":
            self.process_placeholder_node(node)
        elif node.op == "call_function":
            if node.target == operator.getitem:
                self.process_getitem_node(node)
            else:
                node.meta["debug_handle"] = call_node_debug_hdl
                self.process_call_function_node(node)
        elif node.op == "get_attr":
            self.process_getattr_node(node)
        elif node.op == "output":
            self.process_output_node(node)
        else:
            raise AssertionError(f"Unsupported node op: {node.op}")

    def build_graph(self) -> vk.VkGraph:
        for i, node in enumerate(self.program.graph_module.graph.nodes):
            self.process_node(node, i)
        logger.info("Operators included in this Vulkan partition: %s",
                    ", ".join(sorted(getattr(op, "__name__", str(op)) for op in self.seen_ops)))
        return vk.VkGraph(version="0", chain=self.chain, values=self.values,
                          input_ids=self.input_ids, output_ids=self.output_ids,
                          constants=[], shaders=[])
