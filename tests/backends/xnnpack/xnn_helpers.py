"""Building XNNPACK graphs by hand for the tests: a small graph builder, a graph that uses
every schema table, ExecuTorch-style JSON of a graph, and a .pte that calls a blob.

(Imported by module name: pytest puts this directory on sys.path; tests/ has no __init__.py.)
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import math

import numpy as np

from edgetorch.backends.xnnpack import schema as x
from edgetorch.backends.xnnpack.serialization import serialize_xnnpack_binary
from edgetorch.schema import program as s
from edgetorch.schema.pte import serialize_pte
from edgetorch.schema.scalar_type import ScalarType

# The examples ExecuTorch's XnnpackPartitioner lowers, smallest first.
MODELS = ["tiny_classifier", "mlp", "cnn", "transformer_encoder", "mobilenet_v2", "resnet18"]

FP32 = x.XNNDatatype.xnn_datatype_fp32
INVALID = x.XNN_INVALID_VALUE_ID


class GraphBuilder:
    """Values in definition order; external inputs get ids 0.., outputs follow them."""

    def __init__(self) -> None:
        self.values: list[x.XNNTensorValue] = []
        self.nodes: list[x.XNode] = []
        self.constant_data = [x.ConstantDataOffset(0, 0, "")]
        self.named: dict[str, bytes] = {}
        self._inputs: list[int] = []
        self._outputs: list[int] = []
        self.output_dtypes: list[np.dtype] = []

    def _value(self, dims, **kw) -> int:
        vid = len(self.values)
        self.values.append(x.XNNTensorValue(FP32, len(dims), list(dims), external_id=INVALID,
                                            id_out=vid, **kw))
        return vid

    def input(self, *dims: int) -> int:
        vid = self._value(dims, flags=x.XNN_VALUE_FLAG_EXTERNAL_INPUT)
        self._inputs.append(vid)
        return vid

    def output(self, *dims: int, dtype=np.float32) -> int:
        """An external output; ``dtype`` is the method's tensor (XNNPACK's value is fp32)."""
        vid = self._value(dims, flags=x.XNN_VALUE_FLAG_EXTERNAL_OUTPUT)
        self._outputs.append(vid)
        self.output_dtypes.append(np.dtype(dtype))
        return vid

    def tensor(self, *dims: int) -> int:
        return self._value(dims)

    def const(self, array: np.ndarray) -> int:
        """A constant stored, as ExecuTorch 1.5 does, in named data under its SHA-256."""
        data = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        key = hashlib.sha256(data).hexdigest()
        self.named[key] = data
        self.constant_data.append(x.ConstantDataOffset(x.UINT64_MAX, len(data), key))
        return self._value(array.shape, constant_buffer_idx=len(self.constant_data) - 1)

    def node(self, union, output_min_max: x.OutputMinMax | None = None) -> None:
        self.nodes.append(x.XNode(union, len(self.nodes) + 1, output_min_max))

    def build(self) -> x.XNNGraph:
        for ext, vid in enumerate(self._inputs + self._outputs):
            self.values[vid].external_id = ext
        return x.XNNGraph(
            version="0",
            xnodes=self.nodes,
            xvalues=[x.XValue(v) for v in self.values],
            num_externs=len(self._inputs) + len(self._outputs),
            input_ids=list(self._inputs),
            output_ids=list(self._outputs),
            constant_data=self.constant_data,
        )

    @property
    def input_dims(self) -> list[list[int]]:
        return [self.values[v].dims for v in self._inputs]

    @property
    def output_dims(self) -> list[list[int]]:
        return [self.values[v].dims for v in self._outputs]


def _u32(k: int) -> list[int]:
    return [k, k + 1, k + 2]


def every_table_graph() -> x.XNNGraph:
    """One node of every union member and one value of every quantization kind (not meant to
    run; ids are arbitrary). Default-valued and non-default fields both appear."""
    nodes = []
    for i, cls in enumerate(x.XNODE_UNION):
        kwargs = {}
        for k, f in enumerate(dataclasses.fields(cls)):
            if f.type in ("int",):
                kwargs[f.name] = (i * 7 + k) % 5
            elif f.type == "float":
                kwargs[f.name] = [0.0, -1.5, 0.01, math.inf][(i + k) % 4]
            else:
                kwargs[f.name] = _u32(i + k)[: (i + k) % 4]
        mm = None if i % 3 else x.OutputMinMax(-(i % 2) * 6.0, math.inf if i % 2 else 6.5)
        nodes.append(x.XNode(cls(**kwargs), debug_handle=i * 3, output_min_max=mm))
    quant = [
        x.PerChannelQuant([0.5, 0.25], 1, 3, 2),
        x.PerTensorQuant(0.125, -3),
        x.PerTokenDynamicQuant(2),
        x.PerChannelGroupQuant([], 0, 32, 4, 64),
    ]
    values = [
        x.XValue(x.XNNTensorValue(FP32, 4, [1, 3, 8, 8], 0, 0, 1, 0)),
        x.XValue(x.XNNTensorValue(x.XNNDatatype.xnn_datatype_fp16, 0, [], 1, INVALID, 0, 1)),
    ] + [
        x.XValue(x.XNNQuantizedTensorValue(
            x.XNNTensorValue(x.XNNDatatype(3 + k), 2, [4, 2], k + 2, INVALID, 0, k + 2), q))
        for k, q in enumerate(quant)
    ]
    return x.XNNGraph(
        version="0",
        xnodes=nodes,
        xvalues=values,
        num_externs=3,
        input_ids=[0],
        output_ids=[5, 1],
        constant_data=[
            x.ConstantDataOffset(0, 0, ""),
            x.ConstantDataOffset(x.UINT64_MAX, 48, "a" * 64),
            x.ConstantDataOffset(16, 32, None),
            x.ConstantDataOffset(x.UINT64_MAX, 48, "a" * 64),
        ],
    )


def executorch_json(graph: x.XNNGraph) -> str:
    """``graph`` as JSON that ExecuTorch's ``_json_to_dataclass`` turns into its own
    ``XNNGraph``: dataclass fields in order, a union's ``<name>_type`` (member class name)
    right after its value, enums by name, None as null. Fields that only
    ``runtime_schema.fbs`` has are left out."""

    def enc(o):
        if dataclasses.is_dataclass(o):
            out = {}
            for f in dataclasses.fields(o):
                if f.name in ("dq_datatype", "constant_buffer", "mem_buffer_sizes"):
                    continue
                v = getattr(o, f.name)
                out[f.name] = enc(v)
                if f.name in ("xnode_union", "xvalue_union", "quant_params"):
                    out[f.name + "_type"] = type(v).__name__
            return out
        if isinstance(o, list):
            return [enc(v) for v in o]
        if isinstance(o, enum.IntEnum):
            return o.name
        if isinstance(o, float) and math.isinf(o):
            return "inf" if o > 0 else "-inf"
        return o

    return json.dumps(enc(graph))


_SCALAR = {np.dtype(np.float32): ScalarType.FLOAT, np.dtype(np.int64): ScalarType.LONG}


def program_calling(blob: bytes, named: dict[str, bytes], input_dims, output_dims,
                    output_dtypes=None) -> bytes:
    """A .pte whose ``forward`` is one DelegateCall to ``blob`` (inputs, then outputs)."""
    values, offset = [], 0
    dtypes = [np.dtype(np.float32)] * len(input_dims) + list(
        output_dtypes or [np.dtype(np.float32)] * len(output_dims))
    for dims, dtype in zip(list(input_dims) + list(output_dims), dtypes):
        values.append(s.EValue(s.Tensor(
            scalar_type=_SCALAR[dtype], storage_offset=0, sizes=list(dims),
            dim_order=list(range(len(dims))), requires_grad=False, data_buffer_idx=0,
            allocation_info=s.AllocationDetails.of(1, offset), layout=0,
            shape_dynamism=s.TensorShapeDynamism.STATIC, extra_tensor_info=None)))
        offset += -(-dtype.itemsize * math.prod(dims) // 16) * 16
    n_in = len(input_dims)
    ids = list(range(len(values)))
    plan = s.ExecutionPlan(
        name="forward",
        container_meta_type=s.ContainerMetadata("", ""),
        values=values,
        inputs=ids[:n_in],
        outputs=ids[n_in:],
        chains=[s.Chain(ids[:n_in], ids[n_in:], [s.Instruction(s.DelegateCall(0, ids))], None)],
        operators=[],
        delegates=[s.BackendDelegate(
            "XnnpackBackend", s.BackendDelegateDataReference(s.DataLocation.INLINE, 0), [])],
        non_const_buffer_sizes=[0, offset],
    )
    program = s.Program(version=0, execution_plan=[plan],
                        constant_segment=s.SubsegmentOffsets(0, []))
    return serialize_pte(program, constant_buffers=[b""], delegate_blobs=[blob],
                         named_data={k: (v, 16) for k, v in named.items()})


def graph_program(b: GraphBuilder) -> bytes:
    return program_calling(serialize_xnnpack_binary(b.build()), b.named, b.input_dims,
                           b.output_dims, b.output_dtypes)
