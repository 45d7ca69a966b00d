"""The ``program.fbs`` writer behind ``flatbuffer.program_to_flatbuffer``.

Drives ``flatbuffers.Builder`` exactly as ExecuTorch 1.5.1's serializer (the flatc-generated
object API ``Pack`` methods) does: a table's strings, vectors and sub-tables are built first,
in field order; then its fields are added in field order, and fields equal to their schema
default are omitted. With the same Builder this gives the same bytes, not merely equivalent
ones. One method per table, named after it.
"""

from __future__ import annotations

import flatbuffers

from ..errors import FormatError
from . import program as s
from ._fbwriter import raw_vector, scalar_vector, table_vector


class ProgramWriter:
    def __init__(self, tensor_alignment: int, delegate_alignment: int) -> None:
        self.b = flatbuffers.Builder(1024)
        self.tensor_alignment = tensor_alignment
        self.delegate_alignment = delegate_alignment
        # Union member order of KernelTypes / InstructionArguments in program.fbs.
        self.kernel_packers = (
            self.null,
            self.int_,
            self.bool_,
            self.double,
            self.tensor,
            self.string_value,
            self.int_list,
            self.double_list,
            self.bool_list,
            self.tensor_list,
            self.optional_tensor_list,
        )
        self.instruction_packers = (
            self.kernel_call,
            self.delegate_call,
            self.move_call,
            self.jump_false_call,
            self.free_call,
        )

    def string(self, value: str) -> int:
        return self.b.CreateString(value)

    def tables(self, items, pack) -> int:
        return table_vector(self.b, [pack(item) for item in items])

    def aligned_bytes(self, data: bytes, alignment: int) -> int:
        return raw_vector(self.b, data, 1, len(data), alignment)

    # --- KernelTypes members -----------------------------------------------------------

    def null(self, v: s.Null) -> int:
        self.b.StartObject(0)
        return self.b.EndObject()

    def int_(self, v: s.Int) -> int:
        b = self.b
        b.StartObject(1)
        b.PrependInt64Slot(0, int(v.int_val), 0)
        return b.EndObject()

    def bool_(self, v: s.Bool) -> int:
        b = self.b
        b.StartObject(1)
        b.PrependBoolSlot(0, bool(v.bool_val), 0)
        return b.EndObject()

    def double(self, v: s.Double) -> int:
        b = self.b
        b.StartObject(1)
        b.PrependFloat64Slot(0, float(v.double_val), 0.0)
        return b.EndObject()

    def string_value(self, v: s.String) -> int:
        val = self.string(v.string_val)
        b = self.b
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, val, 0)
        return b.EndObject()

    def _items(self, code: str, size: int, items, name: str) -> int:
        vec = scalar_vector(self.b, code, size, items, name)
        b = self.b
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, vec, 0)
        return b.EndObject()

    def int_list(self, v: s.IntList) -> int:
        return self._items("q", 8, v.items, "IntList.items")

    def double_list(self, v: s.DoubleList) -> int:
        return self._items("d", 8, v.items, "DoubleList.items")

    def bool_list(self, v: s.BoolList) -> int:
        return self._items("?", 1, v.items, "BoolList.items")

    def tensor_list(self, v: s.TensorList) -> int:
        return self._items("i", 4, v.items, "TensorList.items")

    def optional_tensor_list(self, v: s.OptionalTensorList) -> int:
        return self._items("i", 4, v.items, "OptionalTensorList.items")

    def allocation_details(self, v: s.AllocationDetails) -> int:
        b = self.b
        b.StartObject(3)
        b.PrependUint32Slot(0, v.memory_id, 0)
        b.PrependUint32Slot(1, v.memory_offset_low, 0)
        b.PrependUint32Slot(2, v.memory_offset_high, 0)
        return b.EndObject()

    def extra_tensor_info(self, v: s.ExtraTensorInfo) -> int:
        fqn = None if v.fully_qualified_name is None else self.string(v.fully_qualified_name)
        b = self.b
        b.StartObject(5)
        b.PrependUint64Slot(0, v.mutable_data_segments_idx, 0)
        if fqn is not None:
            b.PrependUOffsetTRelativeSlot(1, fqn, 0)
        b.PrependInt8Slot(2, int(v.location), 0)
        b.PrependInt8Slot(3, int(v.device_type), 0)
        b.PrependInt8Slot(4, v.device_index, 0)
        return b.EndObject()

    def tensor(self, v: s.Tensor) -> int:
        b = self.b
        sizes = scalar_vector(b, "i", 4, v.sizes, "Tensor.sizes")
        dim_order = scalar_vector(b, "B", 1, v.dim_order, "Tensor.dim_order")
        alloc = None if v.allocation_info is None else self.allocation_details(v.allocation_info)
        extra = None if v.extra_tensor_info is None else self.extra_tensor_info(v.extra_tensor_info)
        b.StartObject(10)
        b.PrependInt8Slot(0, int(v.scalar_type), 0)
        b.PrependInt32Slot(1, v.storage_offset, 0)
        b.PrependUOffsetTRelativeSlot(2, sizes, 0)
        b.PrependUOffsetTRelativeSlot(3, dim_order, 0)
        b.PrependBoolSlot(4, bool(v.requires_grad), 0)
        b.PrependUint32Slot(5, v.data_buffer_idx, 0)
        if alloc is not None:
            b.PrependUOffsetTRelativeSlot(6, alloc, 0)
        b.PrependInt8Slot(7, v.layout, 0)
        b.PrependInt8Slot(8, int(v.shape_dynamism), 0)
        if extra is not None:
            b.PrependUOffsetTRelativeSlot(9, extra, 0)
        return b.EndObject()

    def evalue(self, v: s.EValue) -> int:
        tag, val = self._union(v.val, s.KERNEL_TYPES, self.kernel_packers, "EValue.val")
        b = self.b
        b.StartObject(2)
        b.PrependUint8Slot(0, tag, 0)
        b.PrependUOffsetTRelativeSlot(1, val, 0)
        return b.EndObject()

    def _union(self, value, members: tuple[type, ...], packers, name: str) -> tuple[int, int]:
        try:
            index = members.index(type(value))
        except ValueError:
            raise FormatError(
                f"cannot serialize {name}: {type(value).__name__} is not a member of the union "
                f"({', '.join(m.__name__ for m in members)}). Fix the value in the program."
            ) from None
        return index + 1, packers[index](value)

    # --- instructions ------------------------------------------------------------------

    def _call(self, index: int, args, name: str) -> int:
        vec = scalar_vector(self.b, "i", 4, args, name)
        b = self.b
        b.StartObject(2)
        b.PrependInt32Slot(0, index, 0)
        b.PrependUOffsetTRelativeSlot(1, vec, 0)
        return b.EndObject()

    def kernel_call(self, v: s.KernelCall) -> int:
        return self._call(v.op_index, v.args, "KernelCall.args")

    def delegate_call(self, v: s.DelegateCall) -> int:
        return self._call(v.delegate_index, v.args, "DelegateCall.args")

    def _two_ints(self, a: int, c: int) -> int:
        b = self.b
        b.StartObject(2)
        b.PrependInt32Slot(0, a, 0)
        b.PrependInt32Slot(1, c, 0)
        return b.EndObject()

    def move_call(self, v: s.MoveCall) -> int:
        return self._two_ints(v.move_from, v.move_to)

    def jump_false_call(self, v: s.JumpFalseCall) -> int:
        return self._two_ints(v.cond_value_index, v.destination_instruction)

    def free_call(self, v: s.FreeCall) -> int:
        b = self.b
        b.StartObject(1)
        b.PrependInt32Slot(0, v.value_index, 0)
        return b.EndObject()

    def instruction(self, v: s.Instruction) -> int:
        tag, val = self._union(
            v.instr_args, s.INSTRUCTION_TYPES, self.instruction_packers, "Instruction.instr_args"
        )
        b = self.b
        b.StartObject(2)
        b.PrependUint8Slot(0, tag, 0)
        b.PrependUOffsetTRelativeSlot(1, val, 0)
        return b.EndObject()

    def frame(self, v: s.Frame) -> int:
        filename, name, context = (
            self.string(v.filename),
            self.string(v.name),
            self.string(v.context),
        )
        b = self.b
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(0, filename, 0)
        b.PrependInt32Slot(1, v.lineno, 0)
        b.PrependUOffsetTRelativeSlot(2, name, 0)
        b.PrependUOffsetTRelativeSlot(3, context, 0)
        return b.EndObject()

    def frame_list(self, v: s.FrameList) -> int:
        items = self.tables(v.items, self.frame)
        b = self.b
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, items, 0)
        return b.EndObject()

    def chain(self, v: s.Chain) -> int:
        b = self.b
        inputs = scalar_vector(b, "i", 4, v.inputs, "Chain.inputs")
        outputs = scalar_vector(b, "i", 4, v.outputs, "Chain.outputs")
        instructions = self.tables(v.instructions, self.instruction)
        stacktrace = None if v.stacktrace is None else self.tables(v.stacktrace, self.frame_list)
        b.StartObject(4)
        b.PrependUOffsetTRelativeSlot(0, inputs, 0)
        b.PrependUOffsetTRelativeSlot(1, outputs, 0)
        b.PrependUOffsetTRelativeSlot(2, instructions, 0)
        if stacktrace is not None:
            b.PrependUOffsetTRelativeSlot(3, stacktrace, 0)
        return b.EndObject()

    # --- plans, delegates --------------------------------------------------------------

    def operator(self, v: s.Operator) -> int:
        name, overload = self.string(v.name), self.string(v.overload)
        b = self.b
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(0, name, 0)
        b.PrependUOffsetTRelativeSlot(1, overload, 0)
        return b.EndObject()

    def data_reference(self, v: s.BackendDelegateDataReference) -> int:
        b = self.b
        b.StartObject(2)
        b.PrependInt8Slot(0, int(v.location), 0)
        b.PrependUint32Slot(1, v.index, 0)
        return b.EndObject()

    def compile_spec(self, v: s.CompileSpec) -> int:
        key = self.string(v.key)
        value = raw_vector(self.b, bytes(v.value), 1, len(v.value), 1)
        b = self.b
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(0, key, 0)
        b.PrependUOffsetTRelativeSlot(1, value, 0)
        return b.EndObject()

    def backend_delegate(self, v: s.BackendDelegate) -> int:
        id_ = self.string(v.id)
        processed = self.data_reference(v.processed)
        specs = self.tables(v.compile_specs, self.compile_spec)
        b = self.b
        b.StartObject(3)
        b.PrependUOffsetTRelativeSlot(0, id_, 0)
        b.PrependUOffsetTRelativeSlot(1, processed, 0)
        b.PrependUOffsetTRelativeSlot(2, specs, 0)
        return b.EndObject()

    def container_metadata(self, v: s.ContainerMetadata) -> int:
        inp, out = self.string(v.encoded_inp_str), self.string(v.encoded_out_str)
        b = self.b
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(0, inp, 0)
        b.PrependUOffsetTRelativeSlot(1, out, 0)
        return b.EndObject()

    def non_const_buffer_device(self, v: s.NonConstBufferDevice) -> int:
        b = self.b
        b.StartObject(3)
        b.PrependInt32Slot(0, v.buffer_idx, 0)
        b.PrependInt8Slot(1, int(v.device_type), 0)
        b.PrependInt8Slot(2, v.device_index, 0)
        return b.EndObject()

    def execution_plan(self, v: s.ExecutionPlan) -> int:
        b = self.b
        name = self.string(v.name)
        meta = self.container_metadata(v.container_meta_type)
        values = self.tables(v.values, self.evalue)
        inputs = scalar_vector(b, "i", 4, v.inputs, "ExecutionPlan.inputs")
        outputs = scalar_vector(b, "i", 4, v.outputs, "ExecutionPlan.outputs")
        chains = self.tables(v.chains, self.chain)
        operators = self.tables(v.operators, self.operator)
        delegates = self.tables(v.delegates, self.backend_delegate)
        sizes = scalar_vector(
            b, "q", 8, v.non_const_buffer_sizes, "ExecutionPlan.non_const_buffer_sizes"
        )
        devices = (
            None
            if v.non_const_buffer_device is None
            else self.tables(v.non_const_buffer_device, self.non_const_buffer_device)
        )
        b.StartObject(10)
        for slot, off in enumerate(
            (name, meta, values, inputs, outputs, chains, operators, delegates, sizes)
        ):
            b.PrependUOffsetTRelativeSlot(slot, off, 0)
        if devices is not None:
            b.PrependUOffsetTRelativeSlot(9, devices, 0)
        return b.EndObject()

    # --- program -----------------------------------------------------------------------

    def _one_vector_table(self, vec: int) -> int:
        b = self.b
        b.StartObject(1)
        b.PrependUOffsetTRelativeSlot(0, vec, 0)
        return b.EndObject()

    def buffer(self, v: s.Buffer) -> int:
        return self._one_vector_table(self.aligned_bytes(v.storage, self.tensor_alignment))

    def inline_data(self, v: s.BackendDelegateInlineData) -> int:
        return self._one_vector_table(self.aligned_bytes(v.data, self.delegate_alignment))

    def data_segment(self, v: s.DataSegment) -> int:
        b = self.b
        b.StartObject(2)
        b.PrependUint64Slot(0, v.offset, 0)
        b.PrependUint64Slot(1, v.size, 0)
        return b.EndObject()

    def subsegment_offsets(self, v: s.SubsegmentOffsets) -> int:
        offsets = scalar_vector(self.b, "Q", 8, v.offsets, "SubsegmentOffsets.offsets")
        b = self.b
        b.StartObject(2)
        b.PrependUint32Slot(0, v.segment_index, 0)
        b.PrependUOffsetTRelativeSlot(1, offsets, 0)
        return b.EndObject()

    def named_data(self, v: s.NamedData) -> int:
        key = self.string(v.key)
        b = self.b
        b.StartObject(2)
        b.PrependUOffsetTRelativeSlot(0, key, 0)
        b.PrependUint32Slot(1, v.segment_index, 0)
        return b.EndObject()

    def program(self, v: s.Program) -> int:
        plans = self.tables(v.execution_plan, self.execution_plan)
        constants = self.tables(v.constant_buffer, self.buffer)
        inline = self.tables(v.backend_delegate_data, self.inline_data)
        segments = self.tables(v.segments, self.data_segment)
        constant_segment = (
            None if v.constant_segment is None else self.subsegment_offsets(v.constant_segment)
        )
        mutable = (
            None
            if v.mutable_data_segments is None
            else self.tables(v.mutable_data_segments, self.subsegment_offsets)
        )
        named = None if v.named_data is None else self.tables(v.named_data, self.named_data)
        b = self.b
        b.StartObject(8)
        b.PrependUint32Slot(0, v.version, 0)
        b.PrependUOffsetTRelativeSlot(1, plans, 0)
        b.PrependUOffsetTRelativeSlot(2, constants, 0)
        b.PrependUOffsetTRelativeSlot(3, inline, 0)
        b.PrependUOffsetTRelativeSlot(4, segments, 0)
        for slot, off in ((5, constant_segment), (6, mutable), (7, named)):
            if off is not None:
                b.PrependUOffsetTRelativeSlot(slot, off, 0)
        return b.EndObject()
