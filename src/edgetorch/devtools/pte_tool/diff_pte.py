"""What differs between two ``.pte`` files, method by method (ExecuTorch's ``diff_pte``).

    python -m edgetorch.devtools.pte_tool.diff_pte a.pte b.pte [-v] [--max-samples N]

Identical bytes end the comparison. Otherwise both files are read (with the checked reader:
a file that does not parse is reported in ``error``, not raised) and each pair of execution
plans at the same index is compared: names, operator and delegate multisets, planned buffer
sizes, value and instruction counts, then value by value -- tensors by metadata and by their
constant (or mutable-segment) bytes, decoded element-wise where the dtype is a plain number
type; other values field by field. Values are paired by index, so one inserted value shifts
every later pair (as in ExecuTorch's tool). Named-data keys present on one side only are
listed as well.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...exir._serialize._program import deserialize_pte_binary
from ...schema import program as s
from ...schema.scalar_type import ScalarType

# Element decoding for the dtypes whose bytes are plain little-endian numbers; any other
# dtype is compared byte by byte.
_ELEMENT_DTYPES: dict[ScalarType, str] = {
    ScalarType.BYTE: "<u1", ScalarType.CHAR: "<i1", ScalarType.SHORT: "<i2",
    ScalarType.INT: "<i4", ScalarType.LONG: "<i8", ScalarType.HALF: "<f2",
    ScalarType.FLOAT: "<f4", ScalarType.DOUBLE: "<f8", ScalarType.BOOL: "<u1",
    ScalarType.QUINT8: "<u1", ScalarType.QINT8: "<i1", ScalarType.QINT32: "<i4",
}


@dataclass
class OperatorUsage:
    name: str  # ``aten::add.out``, or ``delegate:<backend id>``
    arg_index: int


@dataclass
class TensorInfo:
    evalue_index: int
    scalar_type: ScalarType
    sizes: list[int]
    fqn: str | None
    data_buffer_idx: int
    operator_usages: list[OperatorUsage] = field(default_factory=list)


@dataclass
class FieldDiff:
    field_name: str
    value_a: Any
    value_b: Any


@dataclass
class ElementDiff:
    flat_index: int
    multi_index: tuple[int, ...]
    value_a: float
    value_b: float


@dataclass
class TensorDataDiff:
    tensor_a: TensorInfo
    tensor_b: TensorInfo
    byte_size_a: int
    byte_size_b: int
    bytes_differ: bool
    metadata_diffs: list[FieldDiff] = field(default_factory=list)
    num_elements: int = 0
    num_differing: int = 0
    max_abs_diff: float = 0.0
    mean_abs_diff: float = 0.0  # over the differing elements
    element_diffs: list[ElementDiff] = field(default_factory=list)  # the first few


@dataclass
class EValueDiff:
    evalue_index: int
    type_a: str
    type_b: str
    type_mismatch: bool = False
    field_diffs: list[FieldDiff] = field(default_factory=list)
    operator_usages_a: list[OperatorUsage] = field(default_factory=list)
    operator_usages_b: list[OperatorUsage] = field(default_factory=list)


@dataclass
class ExecutionPlanDiff:
    """One plan pair; an ``*_a``/``*_b`` pair is set only where the two differ."""

    plan_index: int
    name_a: str | None = None
    name_b: str | None = None
    operators_only_in_a: list[str] = field(default_factory=list)
    operators_only_in_b: list[str] = field(default_factory=list)
    delegates_only_in_a: list[str] = field(default_factory=list)
    delegates_only_in_b: list[str] = field(default_factory=list)
    non_const_buffer_sizes_a: list[int] | None = None
    non_const_buffer_sizes_b: list[int] | None = None
    value_count_a: int | None = None
    value_count_b: int | None = None
    instruction_count_a: int | None = None
    instruction_count_b: int | None = None
    tensor_diffs: list[TensorDataDiff] = field(default_factory=list)
    evalue_diffs: list[EValueDiff] = field(default_factory=list)
    tensors_only_in_a: list[TensorInfo] = field(default_factory=list)
    tensors_only_in_b: list[TensorInfo] = field(default_factory=list)

    def has_differences(self) -> bool:
        return any(v not in (None, []) for k, v in dataclasses.asdict(self).items()
                   if k != "plan_index")


@dataclass
class NamedDataDiff:
    key: str
    only_in: str  # "A" or "B"
    bytes_differ: bool = False


@dataclass
class PTEDiffResult:
    path_a: str
    path_b: str
    size_a: int
    size_b: int
    bitwise_equal: bool
    version_a: int | None = None
    version_b: int | None = None
    plan_diffs: list[ExecutionPlanDiff] = field(default_factory=list)
    extra_plans_in_a: list[str] = field(default_factory=list)
    extra_plans_in_b: list[str] = field(default_factory=list)
    named_data_diffs: list[NamedDataDiff] = field(default_factory=list)
    error: str | None = None


def diff_pte(data_a: bytes, data_b: bytes, path_a: str = "A", path_b: str = "B",
             max_samples: int = 10) -> PTEDiffResult:
    """Compare two ``.pte`` images (see the module docstring); ``max_samples`` bounds the
    element differences kept per tensor."""
    result = PTEDiffResult(path_a, path_b, len(data_a), len(data_b), data_a == data_b)
    if result.bitwise_equal:
        return result
    try:
        # a schema version differing is one of the things to report, not a reason to stop
        pte_a = deserialize_pte_binary(data_a, check_version=False)
        pte_b = deserialize_pte_binary(data_b, check_version=False)
    except Exception as e:  # any reader failure is the answer, not a crash of the tool
        result.error = f"Deserialization failed: {e}"
        return result
    prog_a, prog_b = pte_a.program, pte_b.program
    if prog_a.version != prog_b.version:
        result.version_a, result.version_b = prog_a.version, prog_b.version
    side_a = _Side(prog_a, pte_a.mutable_data)
    side_b = _Side(prog_b, pte_b.mutable_data)
    plans_a, plans_b = prog_a.execution_plan, prog_b.execution_plan
    for i, (plan_a, plan_b) in enumerate(zip(plans_a, plans_b)):
        plan_diff = _diff_plan(i, plan_a, plan_b, side_a, side_b, max_samples)
        if plan_diff.has_differences():
            result.plan_diffs.append(plan_diff)
    common = min(len(plans_a), len(plans_b))
    result.extra_plans_in_a = [p.name for p in plans_a[common:]]
    result.extra_plans_in_b = [p.name for p in plans_b[common:]]
    keys_a = {d.key for d in prog_a.named_data or []}
    keys_b = {d.key for d in prog_b.named_data or []}
    result.named_data_diffs = [NamedDataDiff(k, "A" if k in keys_a else "B")
                               for k in sorted(keys_a ^ keys_b)]
    return result


@dataclass
class _Side:
    program: s.Program
    mutable_data: list[s.Buffer] | None

    def tensor_bytes(self, t: s.Tensor) -> bytes | None:
        """The tensor's stored bytes: its constant buffer, else its mutable-data segment."""
        buffers = self.program.constant_buffer
        if 0 < t.data_buffer_idx < len(buffers):
            return bytes(buffers[t.data_buffer_idx].storage)
        index = t.extra_tensor_info.mutable_data_segments_idx if t.extra_tensor_info else 0
        if self.mutable_data is not None and 0 < index < len(self.mutable_data):
            return bytes(self.mutable_data[index].storage)
        return None


def _op_name(op: s.Operator) -> str:
    return f"{op.name}.{op.overload}" if op.overload else op.name


def _usages(plan: s.ExecutionPlan) -> dict[int, list[OperatorUsage]]:
    """Value index -> the kernel / delegate calls that take it, with the argument position."""
    out: dict[int, list[OperatorUsage]] = {}
    for chain in plan.chains:
        for instruction in chain.instructions:
            args = instruction.instr_args
            if isinstance(args, s.KernelCall):
                name = _op_name(plan.operators[args.op_index])
            elif isinstance(args, s.DelegateCall):
                name = f"delegate:{plan.delegates[args.delegate_index].id}"
            else:
                continue
            for position, value in enumerate(args.args):
                out.setdefault(value, []).append(OperatorUsage(name, position))
    return out


def _only_in(a: Counter, b: Counter) -> tuple[list[str], list[str]]:
    return sorted((a - b).elements()), sorted((b - a).elements())


def _diff_plan(index: int, plan_a: s.ExecutionPlan, plan_b: s.ExecutionPlan, side_a: _Side,
               side_b: _Side, max_samples: int) -> ExecutionPlanDiff:
    diff = ExecutionPlanDiff(plan_index=index)
    if plan_a.name != plan_b.name:
        diff.name_a, diff.name_b = plan_a.name, plan_b.name
    diff.operators_only_in_a, diff.operators_only_in_b = _only_in(
        Counter(map(_op_name, plan_a.operators)), Counter(map(_op_name, plan_b.operators)))
    diff.delegates_only_in_a, diff.delegates_only_in_b = _only_in(
        Counter(d.id for d in plan_a.delegates), Counter(d.id for d in plan_b.delegates))
    if plan_a.non_const_buffer_sizes != plan_b.non_const_buffer_sizes:
        diff.non_const_buffer_sizes_a = plan_a.non_const_buffer_sizes
        diff.non_const_buffer_sizes_b = plan_b.non_const_buffer_sizes
    values_a, values_b = plan_a.values, plan_b.values
    if len(values_a) != len(values_b):
        diff.value_count_a, diff.value_count_b = len(values_a), len(values_b)
    count_a = sum(len(c.instructions) for c in plan_a.chains)
    count_b = sum(len(c.instructions) for c in plan_b.chains)
    if count_a != count_b:
        diff.instruction_count_a, diff.instruction_count_b = count_a, count_b
    uses_a, uses_b = _usages(plan_a), _usages(plan_b)
    for i, (ev_a, ev_b) in enumerate(zip(values_a, values_b)):
        if isinstance(ev_a.val, s.Tensor) and isinstance(ev_b.val, s.Tensor):
            tensor_diff = _diff_tensor(i, ev_a.val, ev_b.val, uses_a, uses_b, side_a, side_b,
                                       max_samples)
            if tensor_diff is not None:
                diff.tensor_diffs.append(tensor_diff)
            continue
        value_diff = _diff_value(i, ev_a.val, ev_b.val, uses_a, uses_b)
        if value_diff is not None:
            diff.evalue_diffs.append(value_diff)
    common = min(len(values_a), len(values_b))
    diff.tensors_only_in_a = [_info(i, ev.val, uses_a) for i, ev in
                              enumerate(values_a[common:], common)
                              if isinstance(ev.val, s.Tensor)]
    diff.tensors_only_in_b = [_info(i, ev.val, uses_b) for i, ev in
                              enumerate(values_b[common:], common)
                              if isinstance(ev.val, s.Tensor)]
    return diff


def _info(index: int, t: s.Tensor, uses: dict[int, list[OperatorUsage]]) -> TensorInfo:
    fqn = t.extra_tensor_info.fully_qualified_name if t.extra_tensor_info else None
    return TensorInfo(index, t.scalar_type, list(t.sizes), fqn or None, t.data_buffer_idx,
                      uses.get(index, []))


_TENSOR_FIELDS = ("scalar_type", "storage_offset", "sizes", "dim_order", "requires_grad",
                  "layout", "data_buffer_idx", "allocation_info", "shape_dynamism")
_EXTRA_FIELDS = ("mutable_data_segments_idx", "fully_qualified_name", "location")


def _metadata_diffs(a: s.Tensor, b: s.Tensor) -> list[FieldDiff]:
    diffs = [FieldDiff(f, getattr(a, f), getattr(b, f)) for f in _TENSOR_FIELDS
             if getattr(a, f) != getattr(b, f)]
    extra_a, extra_b = a.extra_tensor_info, b.extra_tensor_info
    if (extra_a is None) != (extra_b is None):
        diffs.append(FieldDiff("extra_tensor_info", extra_a, extra_b))
    elif extra_a is not None:
        diffs += [FieldDiff(f"extra_tensor_info.{f}", getattr(extra_a, f), getattr(extra_b, f))
                  for f in _EXTRA_FIELDS if getattr(extra_a, f) != getattr(extra_b, f)]
    return diffs


def _diff_tensor(index: int, a: s.Tensor, b: s.Tensor, uses_a: dict, uses_b: dict,
                 side_a: _Side, side_b: _Side, max_samples: int) -> TensorDataDiff | None:
    metadata = _metadata_diffs(a, b)
    bytes_a, bytes_b = side_a.tensor_bytes(a), side_b.tensor_bytes(b)
    has_data = bytes_a is not None or bytes_b is not None
    same_data = bytes_a is not None and bytes_a == bytes_b
    if not metadata and (not has_data or same_data):
        return None
    diff = TensorDataDiff(_info(index, a, uses_a), _info(index, b, uses_b),
                          len(bytes_a or b""), len(bytes_b or b""),
                          has_data and not same_data, metadata)
    if bytes_a is not None and bytes_b is not None and not same_data:
        _element_stats(diff, bytes_a, bytes_b, a.scalar_type, list(a.sizes), max_samples)
    return diff


def _element_stats(diff: TensorDataDiff, bytes_a: bytes, bytes_b: bytes, scalar_type: int,
                   sizes: list[int], max_samples: int) -> None:
    try:
        dtype = np.dtype(_ELEMENT_DTYPES[ScalarType(scalar_type)])
    except (KeyError, ValueError):  # not a plain number type: count differing bytes
        n = min(len(bytes_a), len(bytes_b))
        a8 = np.frombuffer(bytes_a, np.uint8, n)
        diff.num_elements = n
        diff.num_differing = int(np.count_nonzero(a8 != np.frombuffer(bytes_b, np.uint8, n)))
        return
    count = min(int(np.prod(sizes, dtype=np.int64)), len(bytes_a) // dtype.itemsize,
                len(bytes_b) // dtype.itemsize)
    a = np.frombuffer(bytes_a, dtype, count).astype(np.float64)
    b = np.frombuffer(bytes_b, dtype, count).astype(np.float64)
    if ScalarType(scalar_type) == ScalarType.BOOL:  # any nonzero byte is True
        a, b = (a != 0).astype(np.float64), (b != 0).astype(np.float64)
    differing = np.flatnonzero(a != b)  # NaN != NaN: a NaN element counts as differing
    diff.num_elements, diff.num_differing = count, int(differing.size)
    if not differing.size:
        return
    gaps = np.abs(a[differing] - b[differing])
    finite = gaps[~np.isnan(gaps)]
    diff.max_abs_diff = float(finite.max()) if finite.size else 0.0
    diff.mean_abs_diff = float(gaps.sum() / differing.size)
    shape = [d for d in sizes if d > 0] if all(d > 0 for d in sizes) else None
    diff.element_diffs = [
        ElementDiff(int(i), tuple(int(x) for x in np.unravel_index(i, shape)) if shape else (),
                    float(a[i]), float(b[i]))
        for i in differing[:max_samples]]


def _diff_value(index: int, a: Any, b: Any, uses_a: dict, uses_b: dict) -> EValueDiff | None:
    type_a, type_b = type(a).__name__, type(b).__name__
    if type_a != type_b:
        return EValueDiff(index, type_a, type_b, True, [], uses_a.get(index, []),
                          uses_b.get(index, []))
    fields = [f.name for f in dataclasses.fields(a)] if dataclasses.is_dataclass(a) else []
    diffs = [FieldDiff(f, getattr(a, f), getattr(b, f)) for f in fields
             if getattr(a, f) != getattr(b, f)]
    if not diffs:
        return None
    return EValueDiff(index, type_a, type_b, False, diffs, uses_a.get(index, []),
                      uses_b.get(index, []))


def _size(num_bytes: int) -> str:
    if num_bytes >= 1 << 20:
        return f"{num_bytes / (1 << 20):.1f} MB"
    return f"{num_bytes / 1024:.1f} KB" if num_bytes >= 1024 else f"{num_bytes} B"


def _tensor_line(info: TensorInfo) -> str:
    kind = "CT" if info.data_buffer_idx > 0 else "T"  # constant tensor / planned tensor
    try:
        dtype = ScalarType(info.scalar_type).name.lower()
    except ValueError:
        dtype = str(info.scalar_type)
    fqn = f'  "{info.fqn}"' if info.fqn else ""
    return f"[idx={info.evalue_index}]  {kind} {dtype}[{','.join(map(str, info.sizes))}]{fqn}"


def format_diff_result(result: PTEDiffResult, verbose: bool = False) -> str:
    """The report as text (what the command line prints)."""
    lines = [f"Comparing: {result.path_a} ({_size(result.size_a)}) vs {result.path_b} "
             f"({_size(result.size_b)})"]
    if result.bitwise_equal:
        return "\n".join(lines + ["Status: bitwise equal"])
    lines.append("Status: NOT bitwise equal")
    if result.error:
        return "\n".join(lines + [f"Error: {result.error}"])
    if result.version_a is not None:
        lines.append(f"Version: {result.version_a} vs {result.version_b}")
    for plan in result.plan_diffs:
        lines += _plan_lines(plan, verbose)
    if result.extra_plans_in_a:
        lines.append(f"\nExtra plans in A: {', '.join(result.extra_plans_in_a)}")
    if result.extra_plans_in_b:
        lines.append(f"\nExtra plans in B: {', '.join(result.extra_plans_in_b)}")
    if result.named_data_diffs:
        lines.append("\nNamed data differences:")
        lines += [f"  {d.key!r}: only in {d.only_in}" for d in result.named_data_diffs]
    return "\n".join(lines)


def _plan_lines(pd: ExecutionPlanDiff, verbose: bool) -> list[str]:
    name = pd.name_a or pd.name_b or ""
    header = f"Plan {pd.plan_index}" + (f' "{name}"' if name else "")
    if pd.name_a is not None and pd.name_b is not None:
        header += f" (name differs: {pd.name_a!r} vs {pd.name_b!r})"
    lines = [f"\n{header}:"]
    for label, values in (("Operators only in A", pd.operators_only_in_a),
                          ("Operators only in B", pd.operators_only_in_b),
                          ("Delegates only in A", pd.delegates_only_in_a),
                          ("Delegates only in B", pd.delegates_only_in_b)):
        if values:
            lines.append(f"  {label}: {', '.join(values)}")
    if pd.non_const_buffer_sizes_a is not None:
        lines.append(f"  non_const_buffer_sizes: {pd.non_const_buffer_sizes_a} vs "
                     f"{pd.non_const_buffer_sizes_b}")
    if pd.value_count_a is not None:
        lines.append(f"  Value count: {pd.value_count_a} vs {pd.value_count_b}")
    if pd.instruction_count_a is not None:
        lines.append(f"  Instruction count: {pd.instruction_count_a} vs "
                     f"{pd.instruction_count_b}")
    if pd.tensor_diffs:
        lines.append(f"  Differing tensors ({len(pd.tensor_diffs)}):")
        for td in pd.tensor_diffs:
            lines += _tensor_diff_lines(td, verbose)
    if pd.evalue_diffs:
        lines.append(f"  Differing values ({len(pd.evalue_diffs)}):")
        for vd in pd.evalue_diffs:
            if vd.type_mismatch:
                lines.append(f"    [idx={vd.evalue_index}]  type: {vd.type_a} vs {vd.type_b}")
            else:
                lines.append(f"    [idx={vd.evalue_index}]  {vd.type_a}")
                lines += [f"      {f.field_name}: {f.value_a} vs {f.value_b}"
                          for f in vd.field_diffs]
            lines += [f"      used in A as arg {u.arg_index} of {u.name}"
                      for u in vd.operator_usages_a]
            if vd.operator_usages_b != vd.operator_usages_a:
                lines += [f"      used in B as arg {u.arg_index} of {u.name}"
                          for u in vd.operator_usages_b]
    for label, infos in (("Tensors only in A", pd.tensors_only_in_a),
                         ("Tensors only in B", pd.tensors_only_in_b)):
        if infos:
            lines.append(f"  {label} ({len(infos)}):")
            lines += [f"    {_tensor_line(i)}" for i in infos]
    return lines


def _tensor_diff_lines(td: TensorDataDiff, verbose: bool) -> list[str]:
    lines = [f"    {_tensor_line(td.tensor_a)}"]
    if verbose:
        lines.append(f"      byte sizes: {td.byte_size_a} vs {td.byte_size_b}")
    usages = td.tensor_a.operator_usages or (td.tensor_b.operator_usages if verbose else [])
    lines += [f"      used as arg {u.arg_index} of {u.name}" for u in usages]
    lines += [f"      {m.field_name}: {m.value_a} vs {m.value_b}" for m in td.metadata_diffs]
    if td.bytes_differ and td.num_differing > 0:
        lines.append(f"      {td.num_differing} / {td.num_elements} elements differ")
        lines.append(f"      max_abs_diff={td.max_abs_diff:.6g}  "
                     f"mean_abs_diff={td.mean_abs_diff:.6g}")
        if td.element_diffs:
            lines.append("      first differences:")
            lines += [f"        [{','.join(map(str, e.multi_index))}]: {e.value_a} vs "
                      f"{e.value_b} (diff={abs(e.value_a - e.value_b):.6g})"
                      for e in td.element_diffs]
            remaining = td.num_differing - len(td.element_diffs)
            if remaining > 0:
                lines.append(f"        ... and {remaining} more")
    return lines


def _main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Compare two ExecuTorch .pte files")
    parser.add_argument("file_a")
    parser.add_argument("file_b")
    parser.add_argument("-v", "--verbose", action="store_true", help="more detail per tensor")
    parser.add_argument("--max-samples", type=int, default=10,
                        help="element differences shown per tensor (default 10)")
    args = parser.parse_args(argv)
    with open(args.file_a, "rb") as fa, open(args.file_b, "rb") as fb:
        data_a, data_b = fa.read(), fb.read()
    print(format_diff_result(diff_pte(data_a, data_b, args.file_a, args.file_b,
                                      max_samples=args.max_samples), verbose=args.verbose))


if __name__ == "__main__":
    _main()
