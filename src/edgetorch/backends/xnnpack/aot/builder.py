"""Building an ``XNNGraph`` from an Edge subgraph: values, layouts, constants, the rule table.

Every fx node stands for a logical (PyTorch, NCHW-ordered) tensor. XNNPACK runs convolution
and pooling on NHWC tensors, so a node may have an XNNPACK value in either *layout*:
``NCHW`` (the tensor's own dimension order) or ``NHWC`` (a 4-D tensor with its channel
dimension moved last). :meth:`Builder.get` returns a node's value in the layout a rule asks
for and inserts a static transpose the first time the other layout is needed, so a chain of
convolutions stays NHWC and transposes appear only where the layout really changes (what
ExecuTorch's channels-last tagging pass achieves). Weights are materialized directly in the
layout asked for, with no transpose at run time.

At the delegate's boundary the layout is the tensor's dim order: a channels-last input or
output is NHWC, anything else NCHW (``XNNExecutor`` passes tensors in dim order).

Constants go to the program's named data (``NamedDataStore``) under the SHA-256 hex digest of
their bytes, and the graph refers to them by key (``ConstantDataOffset(UINT64_MAX, size,
key)``), as ExecuTorch 1.5 writes them.
"""

from __future__ import annotations

import copy
import hashlib
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch._ops import OpOverload
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from ....errors import ExportError, RegistrationError
from ....exir._serialize._named_data_store import NamedDataStore
from ....exir.passes.spec_prop import upper_bound
from ....exir.tensor import dim_order_of
from .. import schema as x

NCHW, NHWC = False, True  # a value's layout: is it the channels-last copy of a 4-D tensor
PERM_NCHW_TO_NHWC = (0, 2, 3, 1)
PERM_NHWC_TO_NCHW = (0, 3, 1, 2)
CONSTANT_TENSOR_ALIGNMENT = 16
DEFAULT_DEBUG_HANDLE = 65535  # what ExecuTorch writes for nodes without a debug handle
FP32 = x.XNNDatatype.xnn_datatype_fp32
FP16 = x.XNNDatatype.xnn_datatype_fp16
INF = float("inf")

Check = Callable[[torch.fx.Node, ExportedProgram], "str | None"]
Emit = Callable[["Builder", torch.fx.Node], None]


Statics = Callable[[torch.fx.Node], "list[torch.fx.Node]"]


@dataclass(frozen=True)
class Rule:
    """How one ATen operator becomes XNNPACK nodes: ``check(node, ep)`` returns why the
    node cannot be lowered (None when it can; the common dtype/shape checks are separate),
    ``emit(builder, node)`` writes the nodes. ``statics(node)`` lists the weight
    placeholders that must be constants of the delegate (so the partitioner keeps all their
    users in one delegate)."""

    emit: Emit
    check: Check
    statics: Statics


OP_RULES: dict[OpOverload, Rule] = {}


def _no_check(node: torch.fx.Node, ep: ExportedProgram) -> str | None:
    return None


def _no_statics(node: torch.fx.Node) -> list[torch.fx.Node]:
    return []


def rule(*ops: OpOverload, check: Check | None = None,
         statics: Statics | None = None) -> Callable[[Emit], Emit]:
    """Register the decorated emitter (with ``check`` and ``statics``) for ``ops``."""

    def deco(fn: Emit) -> Emit:
        for op in ops:
            if op in OP_RULES:
                raise RegistrationError(f"XNNPACK lowering of {op} is registered twice")
            OP_RULES[op] = Rule(fn, check or _no_check, statics or _no_statics)
        return fn

    return deco


# ---- facts about the exported program ----------------------------------------------------


def static_tensor(ep: ExportedProgram, node: Any) -> torch.Tensor | None:
    """The value of a weight/buffer/constant placeholder that nothing mutates, else None."""
    if not isinstance(node, torch.fx.Node) or node.op != "placeholder":
        return None
    sig = ep.graph_signature
    mutated = set(sig.buffers_to_mutate.values())
    for spec in sig.input_specs:
        if spec.arg.name != node.name:
            continue
        if spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            return None
        if spec.target in mutated:
            return None
        value = ep.state_dict.get(spec.target)
        if value is None:
            value = ep.constants.get(spec.target)
        return value if isinstance(value, torch.Tensor) else None
    return None


def _val(node: torch.fx.Node) -> torch.Tensor:
    val = node.meta["val"]
    return val[0] if isinstance(val, (tuple, list)) else val


def shape_of(node: torch.fx.Node) -> list[int]:
    """The tensor's sizes, dynamic ones at their upper bound (what XNNPACK values declare)."""
    return [upper_bound(d) for d in _val(node).shape]


def dynamic_dims(node: torch.fx.Node) -> list[int]:
    """The dimensions whose size is only known at run time."""
    return [i for i, d in enumerate(_val(node).shape)
            if not isinstance(d, int) and d.node.expr.free_symbols]


def reshape_target(node: torch.fx.Node) -> list[int]:
    """``node``'s shape as a static reshape's ``new_shape``: 0 marks the (one) dimension
    XNNPACK infers at run time."""
    dynamic = set(dynamic_dims(node))
    return [0 if i in dynamic else d for i, d in enumerate(shape_of(node))]


def dynamic_reason(*nodes: Any) -> str | None:
    """Why an operator whose XNNPACK node needs fixed sizes cannot take ``nodes``."""
    for node in nodes:
        if isinstance(node, torch.fx.Node) and dynamic_dims(node):
            return (f"%{node.name} has a dynamic shape {list(_val(node).shape)} (this lowering "
                    "needs static sizes)")
    return None


def is_channels_last(node: torch.fx.Node) -> bool:
    return dim_order_of(_val(node)) == PERM_NCHW_TO_NHWC


def permuted(dims: Iterable[int], nhwc: bool) -> list[int]:
    dims = list(dims)
    return [dims[i] for i in PERM_NCHW_TO_NHWC] if nhwc else dims


def sole_user(node: torch.fx.Node) -> torch.fx.Node | None:
    """The one user of ``node`` when it is an operator call (not the graph output)."""
    if len(node.users) != 1:
        return None
    user = next(iter(node.users))
    return user if user.op == "call_function" else None


# ---- the builder --------------------------------------------------------------------------


class Builder:
    """Writes one ``XNNGraph``; rules call :meth:`get`, :meth:`out`, :meth:`add` and friends."""

    def __init__(self, ep: ExportedProgram, store: NamedDataStore) -> None:
        self.ep = ep
        self.store = store
        self.graph = x.XNNGraph(version="0", constant_data=[x.ConstantDataOffset(0, 0, "")])
        self.node: torch.fx.Node | None = None  # the node being lowered (debug handle)
        self.done: set[torch.fx.Node] = set()  # nodes a rule already lowered (fusions)
        self._values: dict[tuple[torch.fx.Node, bool], int] = {}
        self._home: dict[torch.fx.Node, bool] = {}
        self._constant_index: dict[str, int] = {}
        self._statics: dict[torch.fx.Node, torch.Tensor] = {}
        self.inputs: list[torch.fx.Node] = []
        from .quant import QuantPlan  # (it builds on this module)

        self.plan = QuantPlan(ep)
        self.act_quant: tuple[x.XNNDatatype, Any] | None = None  # see value()
        # A delegate computes in one float type: the partitioner never joins float16 and
        # float32 operators (a cast between them stays outside), so one float16 tensor makes
        # every float value and weight of the graph fp16, as ExecuTorch serializes them.
        self.float_type = FP16 if any(
            isinstance(v, torch.Tensor) and v.dtype == torch.float16
            for v in (n.meta.get("val") for n in ep.graph.nodes)) else FP32
        for node in ep.graph.nodes:
            if node.op != "placeholder":
                continue
            value = static_tensor(ep, node)
            if value is not None:
                self._statics[node] = value
            else:
                self.inputs.append(node)

    # -- values ---------------------------------------------------------------------------

    def value(self, dims: Iterable[int], constant_index: int = 0) -> int:
        """A new value of the given (physical) dims: the delegate's float type, or, for the
        intermediate values of a quantized operator (``act_quant``), quantized like its
        output."""
        if self.act_quant is not None and not constant_index:
            return self.new_value(dims, *self.act_quant)
        return self.new_value(dims, self.float_type, None, constant_index)

    def new_value(self, dims: Iterable[int], datatype: x.XNNDatatype, quant: Any = None,
                  constant_index: int = 0) -> int:
        """A new value; ``quant`` (XNNQuantParams) makes it a quantized value."""
        vid = len(self.graph.xvalues)
        dims = [int(d) for d in dims] or [1]  # XNNPACK has no 0-d tensors
        tv = x.XNNTensorValue(
            datatype=datatype, num_dims=len(dims), dims=dims, constant_buffer_idx=constant_index,
            external_id=x.XNN_INVALID_VALUE_ID, flags=0, id_out=vid)
        self.graph.xvalues.append(x.XValue(
            tv if quant is None else x.XNNQuantizedTensorValue(tv, copy.copy(quant))))
        return vid

    def like(self, vid: int, dims: Iterable[int]) -> int:
        """A new computed value with ``vid``'s datatype and quantization (layout changes)."""
        u = self.graph.xvalues[vid].xvalue_union
        quant = u.quant_params if isinstance(u, x.XNNQuantizedTensorValue) else None
        return self.new_value(dims, self.tensor_value(vid).datatype, quant)

    def tensor_value(self, vid: int) -> x.XNNTensorValue:
        return self.graph.xvalues[vid].tensor

    def dims(self, vid: int) -> list[int]:
        return list(self.tensor_value(vid).dims)

    def constant(self, data: torch.Tensor) -> int:
        """A static value holding ``data`` (contiguous, in the delegate's float type)."""
        t = data.detach().to(torch.float16 if self.float_type == FP16 else torch.float32)
        t = t.contiguous()
        raw = t.numpy().tobytes() if t.numel() else b""
        if not raw:
            raise ExportError("XNNPACK cannot hold an empty constant; the partitioner should "
                              "not have delegated it")
        key = hashlib.sha256(raw).hexdigest()
        index = self._constant_index.get(key)
        if index is None:
            index = self._constant_index[key] = len(self.graph.constant_data)
            self.graph.constant_data.append(x.ConstantDataOffset(x.UINT64_MAX, len(raw), key))
            self.store.add_named_data(key, raw, CONSTANT_TENSOR_ALIGNMENT)
        return self.value(t.shape, index)

    def scalar(self, number: float) -> int:
        return self.constant(torch.tensor([float(number)]))

    def static(self, node: Any) -> torch.Tensor | None:
        """The data of a weight placeholder the delegate owns, else None."""
        return self._statics.get(node) if isinstance(node, torch.fx.Node) else None

    def home(self, node: torch.fx.Node) -> bool:
        """The layout ``node`` was produced in (weights: NCHW, they fit any layout)."""
        return self._home.get(node, NCHW)

    def get(self, node: torch.fx.Node, nhwc: bool = NCHW) -> int:
        """``node``'s value in the given layout, transposing (once) if needed."""
        key = (node, nhwc)
        vid = self._values.get(key)
        if vid is not None:
            return vid
        data = self._statics.get(node)
        if data is not None:
            vid = self.constant(data.permute(PERM_NCHW_TO_NHWC) if nhwc else data)
        elif (node, not nhwc) in self._values:
            vid = self.transpose(self._values[(node, not nhwc)],
                                 PERM_NCHW_TO_NHWC if nhwc else PERM_NHWC_TO_NCHW,
                                 DEFAULT_DEBUG_HANDLE)
        else:
            raise ExportError(f"XNNPACK lowering: %{node.name} is used before it is defined "
                              "(internal error: the graph is not in topological order?)")
        self._values[key] = vid
        return vid

    def put(self, node: torch.fx.Node, vid: int, nhwc: bool = NCHW) -> None:
        """Record ``vid`` as ``node``'s value in the given layout."""
        self._values[(node, nhwc)] = vid
        self._home.setdefault(node, nhwc)

    def out(self, node: torch.fx.Node, nhwc: bool = NCHW) -> int:
        """A new value for ``node``'s output in the given layout."""
        dims = permuted(shape_of(node), nhwc)
        quant = self.plan.values.get(node)
        vid = self.new_value(dims, *quant) if quant is not None else self.value(dims)
        self.put(node, vid, nhwc)
        return vid

    def alias(self, node: torch.fx.Node, source: torch.fx.Node) -> None:
        """``node`` computes the same tensor as ``source`` (a copy, a no-op)."""
        for layout in (self.home(source), not self.home(source)):
            vid = self._values.get((source, layout))
            if vid is not None:
                self.put(node, vid, layout)
        if (node, NCHW) not in self._values and (node, NHWC) not in self._values:
            self.put(node, self.get(source, NCHW), NCHW)

    # -- nodes ----------------------------------------------------------------------------

    def add(self, xnode: Any, min_max: tuple[float, float] | None = None,
            debug_handle: int | None = None) -> None:
        if debug_handle is None:
            meta = self.node.meta if self.node is not None else {}
            debug_handle = meta.get("debug_handle", DEFAULT_DEBUG_HANDLE)
            if not isinstance(debug_handle, int):
                debug_handle = DEFAULT_DEBUG_HANDLE
        bounds = None if min_max is None else x.OutputMinMax(float(min_max[0]), float(min_max[1]))
        self.graph.xnodes.append(x.XNode(xnode, debug_handle, bounds))

    def transpose(self, vid: int, perm: Iterable[int], debug_handle: int | None = None) -> int:
        perm = list(perm)
        dims = self.dims(vid)
        out = self.like(vid, [dims[p] for p in perm])
        self.add(x.XNNStaticTranspose(len(perm), perm, vid, out), debug_handle=debug_handle)
        return out

    def reshape(self, vid: int, shape: Iterable[int] | torch.fx.Node) -> int:
        """``vid`` reshaped to ``shape``, or to a node's shape (its one dynamic size, if any,
        left for XNNPACK to infer)."""
        if isinstance(shape, torch.fx.Node):
            dims, shape = shape_of(shape), reshape_target(shape)
        else:
            dims = shape = [int(d) for d in shape]
        out = self.like(vid, dims)
        shape = shape or [1]
        self.add(x.XNNStaticReshape(len(shape), shape, vid, out))
        return out

    # -- the whole graph ------------------------------------------------------------------

    def build(self) -> x.XNNGraph:
        g = self.graph
        for k, node in enumerate(self.inputs):
            quant = None
            if _val(node).dtype not in (torch.float32, torch.float16):
                quant = self.plan.input_quant(node)  # int8 from a quantize in another delegate
                if quant is None:
                    raise ExportError(
                        f"XNNPACK delegate input %{node.name} is {_val(node).dtype}; edgetorch's "
                        "delegates take float32, or int8 read only by dequantize nodes")
            nhwc = len(shape_of(node)) == 4 and is_channels_last(node)
            dims = permuted(shape_of(node), nhwc)
            vid = self.new_value(dims, *quant) if quant else self.value(dims)
            tv = self.tensor_value(vid)
            tv.external_id, tv.flags = k, x.XNN_VALUE_FLAG_EXTERNAL_INPUT
            g.input_ids.append(vid)
            self.put(node, vid, nhwc)
        for node in self.ep.graph.nodes:
            if node.op != "call_function" or node in self.done:
                continue
            self.node = node
            self.act_quant = self.plan.op_quant.get(node)
            if node.target is operator.getitem:
                self._getitem(node)
                continue
            r = OP_RULES.get(node.target)
            if r is None:
                raise ExportError(f"XNNPACK cannot lower %{node.name} ({node.target}); the "
                                  "partitioner should not have delegated it")
            r.emit(self, node)
        self.node = None
        self.act_quant = None
        outputs = self.ep.graph.output_node().args[0]
        for k, node in enumerate(outputs):
            self._mark_output(node, len(self.inputs) + k)
        g.num_externs = len(self.inputs) + len(outputs)
        return g

    def _getitem(self, node: torch.fx.Node) -> None:
        source, index = node.args
        if index != 0:
            raise ExportError(f"XNNPACK lowering: %{node.name} reads output {index} of "
                              f"%{source.name}; only output 0 is computed")
        self.alias(node, source)

    def _mark_output(self, node: Any, external_id: int) -> None:
        if not isinstance(node, torch.fx.Node):
            raise ExportError(f"XNNPACK delegate output {external_id} is not a tensor ({node!r})")
        nhwc = len(shape_of(node)) == 4 and is_channels_last(node)
        vid = self.get(node, nhwc)
        tv = self.tensor_value(vid)
        if tv.flags or tv.constant_buffer_idx:  # already an external value, or a weight
            dup = self.like(vid, tv.dims)
            self.add(x.XNNCopy(vid, dup), debug_handle=DEFAULT_DEBUG_HANDLE)
            vid, tv = dup, self.tensor_value(dup)
        tv.external_id, tv.flags = external_id, x.XNN_VALUE_FLAG_EXTERNAL_OUTPUT
        self.graph.output_ids.append(vid)
