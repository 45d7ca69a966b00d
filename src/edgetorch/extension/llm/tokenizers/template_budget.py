"""What one chat-template render may do, and the counters that hold it to that.

:class:`TemplateLimits` are the limits; a :class:`Budget` per render (in a ContextVar, so
concurrent renders stay apart) counts steps, depth and characters built; the ``*_size``
functions estimate, *before* an operation runs, how big its result will be (the operations that
can build far more than they are given: ``*``, ``+``, ``%``, ``str.format`` widths, ``join``,
``replace``, ``translate``, ``center``...). Used by :mod:`.chat_template`.
"""

from __future__ import annotations

import contextvars
import re
import time
from dataclasses import dataclass
from typing import Any

from jinja2.utils import Namespace

from ....errors import TokenizerError


@dataclass(frozen=True)
class TemplateLimits:
    """What one render may do. Real chat templates stay orders of magnitude below these."""

    max_template_chars: int = 256_000
    max_output_chars: int = 4_000_000
    max_value_chars: int = 4_000_000  # any one string or container the template builds
    max_built_chars: int = 64_000_000  # everything built during the render, added up
    max_steps: int = 1_000_000  # loop iterations + calls
    max_depth: int = 64  # nested macro / caller() / recursive loop calls
    max_int_bits: int = 65_536  # results of * and ** on integers
    max_seconds: float = 10.0


class Budget:
    """The counters of one render (held in a ContextVar, so concurrent renders stay apart)."""

    def __init__(self, limits: TemplateLimits, name: str) -> None:
        self.limits, self.name = limits, name
        self.steps = self.built = self.output = self.depth = 0
        self.deadline = time.monotonic() + limits.max_seconds

    def fail(self, what: str) -> None:
        raise TokenizerError(
            f"{self.name}: {what}; a chat prompt never needs this much, so the template may be "
            "hostile. If it is genuine, render it with larger TemplateLimits")

    def step(self, n: int = 1) -> None:
        self.steps += n
        if self.steps > self.limits.max_steps:
            self.fail(f"more than {self.limits.max_steps} loop iterations and calls")
        if time.monotonic() > self.deadline:
            self.fail(f"rendering took longer than {self.limits.max_seconds:g} s")

    def build(self, size: int, what: str = "a value") -> None:
        """Charge a value of ``size`` characters before (or as) it is made."""
        if size > self.limits.max_value_chars:
            self.fail(f"{what} of {size} characters (limit {self.limits.max_value_chars})")
        self.built += size
        if self.built > self.limits.max_built_chars:
            self.fail(f"more than {self.limits.max_built_chars} characters built in all")

    def int_bits(self, bits: int) -> None:
        if bits > self.limits.max_int_bits:
            self.fail(f"an integer of ~{bits} bits (limit {self.limits.max_int_bits})")


BUDGET: contextvars.ContextVar[Budget] = contextvars.ContextVar("chat_template_budget")


def size_of(x: Any, cap: int) -> int:
    """About how many characters ``str(x)`` has: exact for a string; for containers their
    items' sizes plus separators (walked without recursion; counting stops past ``cap``)."""
    if isinstance(x, (str, bytes, bytearray)):
        return len(x)
    total, stack = 0, [x]
    while stack and total <= cap:
        v = stack.pop()
        if isinstance(v, (str, bytes, bytearray)):
            total += len(v) + 4  # quotes and ", "
        elif isinstance(v, bool) or v is None:
            total += 6
        elif isinstance(v, int):
            total += v.bit_length() // 3 + 3
        elif isinstance(v, (list, tuple, set, frozenset, range)):
            total += 2
            if isinstance(v, range):
                total += 8 * len(v)
            else:
                stack.extend(v)
        elif isinstance(v, dict):
            total += 2 + 2 * len(v)
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, Namespace):  # prints its attributes
            stack.append(dict(getattr(v, "_Namespace__attrs", {})))
        else:
            total += 32
    return total


def budget() -> Budget:
    return BUDGET.get()


def charge_value(value: Any, what: str) -> Any:
    b = budget()
    if isinstance(value, (str, bytes, bytearray, list, tuple, dict, set, frozenset, Namespace)):
        b.build(size_of(value, b.limits.max_value_chars), what)
    return value


# ---- sizes of the template's operations, estimated before they run ----------------------

_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")
FLOAT_TEXT = 400  # '%f' % 1e308 is ~320 characters


def percent_size(fmt: str, args: Any, cap: int) -> int:
    """An upper bound on the length of ``fmt % args``."""
    values = list(args.values()) if isinstance(args, dict) else \
        list(args) if isinstance(args, tuple) else [args]
    widest = max((size_of(v, cap) for v in values), default=0) + FLOAT_TEXT
    star = max((abs(v) for v in values if isinstance(v, int)), default=0)
    total = len(fmt)
    for m in _PERCENT_SPEC.finditer(fmt):
        for group in (m[1], m[2]):
            total += star if group == "*" else int(group) if group else 0
        total += widest
        if total > cap:
            break
    return total


def _sequence_times(seq: Any, n: int) -> int:
    return max(n, 0) * max(size_of(seq, 1 << 62), 1)  # exact for strings


def binop_size(left: Any, right: Any, op: str) -> int | None:
    """Estimated size (characters) of ``left op right`` when it builds a string or
    container; None when it does not."""
    b = budget()
    seqs = (str, list, tuple, bytes)
    if op == "*":
        if isinstance(left, seqs) and isinstance(right, int):
            return _sequence_times(left, right)
        if isinstance(right, seqs) and isinstance(left, int):
            return _sequence_times(right, left)
        if isinstance(left, int) and isinstance(right, int):
            b.int_bits(left.bit_length() + right.bit_length())
    elif op == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0:
            b.int_bits(max(left.bit_length(), 1) * min(right, 1 << 40))
    elif op == "+":
        if isinstance(left, seqs) and isinstance(right, seqs):
            cap = b.limits.max_value_chars
            return size_of(left, cap) + size_of(right, cap)
    elif op == "%" and isinstance(left, str):
        return percent_size(left, right, b.limits.max_value_chars)
    return None


def method_size(owner: Any, name: str, args: tuple, kwargs: dict) -> int | None:
    """Estimated result size of the string / bytes methods that can build much more than
    they are given; None for the others (bounded by their input)."""
    n = len(owner)
    if name in ("center", "ljust", "rjust", "zfill"):
        return max(n, int((args or [kwargs.get("width", 0)])[0]))
    if name == "expandtabs":
        size = int((args or [kwargs.get("tabsize", 8)])[0])
        return n + owner.count("\t" if isinstance(owner, str) else b"\t") * max(size, 0)
    if name == "replace" and len(args) >= 2:
        return replace_size(owner, args[0], args[1], args[2] if len(args) > 2 else -1)
    if name == "translate" and args and isinstance(args[0], dict):
        longest = max((size_of(v, 1 << 62) for v in args[0].values()), default=1)
        return n * max(longest, 1)
    return None


def replace_size(s: Any, old: Any, new: Any, count: Any) -> int:
    try:
        hits = s.count(old) if len(old) else len(s) + 1
    except TypeError:
        return len(s)  # replace() itself will refuse these argument types
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return len(s) + hits * len(new)


def join_size(sep: Any, items: list) -> int:
    cap = budget().limits.max_value_chars
    total = len(sep) * max(len(items) - 1, 0)
    for item in items:
        total += size_of(item, cap)
        if total > cap:
            break
    return total
