"""Where the bytes of a ``.pte`` go: by section, and by tensor or blob (torch-free).

``size_items(pte)`` lists every stored piece — constant tensors (with the operators that read
them), delegate blobs and named data entries (the weights a delegate reads by key) — so that
``edgetorch inspect --tensors N`` can show the largest ones next to the section breakdown.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..schema import program as S
from ..schema.pte import PteFile
from ..schema.scalar_type import to_numpy_dtype


@dataclass(frozen=True)
class SizeItem:
    """One stored piece of a program."""

    kind: str  # "constant", "external" (in a .ptd), "delegate", "named_data"
    name: str
    nbytes: int
    detail: str = ""


def _users(plan: S.ExecutionPlan) -> dict[int, list[str]]:
    """Value index -> names of the operators (or delegates) that take it."""
    users: dict[int, list[str]] = {}
    for chain in plan.chains:
        for ins in chain.instructions:
            a = ins.instr_args
            if isinstance(a, S.KernelCall):
                who = plan.operators[a.op_index].qualified_name
            elif isinstance(a, S.DelegateCall):
                who = f"delegate {plan.delegates[a.delegate_index].id}"
            else:
                continue
            for i in a.args:
                if who not in users.setdefault(i, []):
                    users[i].append(who)
    return users


def _constant_items(plan: S.ExecutionPlan) -> list[SizeItem]:
    users = _users(plan)
    items = []
    for index, value in enumerate(plan.values):
        t = value.val
        if not isinstance(t, S.Tensor) or t.allocation_info is not None:
            continue
        info = t.extra_tensor_info
        external = info is not None and info.location == S.TensorDataLocation.EXTERNAL
        if t.data_buffer_idx == 0 and not external:
            continue  # filled at run time (an input or a delegate's output), not stored
        numel = 1
        for d in t.sizes:
            numel *= d
        dtype = to_numpy_dtype(t.scalar_type)
        detail = f"{dtype.name}{list(t.sizes)} -> {', '.join(users.get(index, [])) or 'unused'}"
        name = f"{plan.name}:value[{index}]"
        if info is not None and info.fully_qualified_name:
            name += f" {info.fully_qualified_name}"
        items.append(SizeItem("external" if external else "constant", name,
                              numel * dtype.itemsize, detail))
    return items


def size_items(pte: PteFile) -> list[SizeItem]:
    """Every constant tensor, delegate blob and named-data entry, largest first.

    A constant shared by several methods is listed once per method (it is stored once).
    """
    items: list[SizeItem] = []
    for plan in pte.program.execution_plan:
        items += _constant_items(plan)
        for i, d in enumerate(plan.delegates):
            items.append(SizeItem("delegate", f"{plan.name}:delegate[{i}] {d.id}",
                                  len(pte.delegate_bytes(d)),
                                  f"{d.processed.location.name.lower()} #{d.processed.index}"))
    for key in pte.named_data_keys():
        items.append(SizeItem("named_data", key, len(pte.named_data(key))))
    return sorted(items, key=lambda item: -item.nbytes)


def format_size_items(items: list[SizeItem], limit: int, fmt_bytes) -> list[str]:
    """``limit`` largest items as aligned text lines (a summary line for the rest)."""
    lines = [f"  {fmt_bytes(it.nbytes):>12}  {it.kind:<10} {it.name}  {it.detail}".rstrip()
             for it in items[:limit]]
    rest = items[limit:]
    if rest:
        lines.append(f"  {fmt_bytes(sum(it.nbytes for it in rest)):>12}  "
                     f"... {len(rest)} more")
    return lines
