"""Fusions as data: a pattern of operations, a builder, and one engine that checks legality.

A fusion replaces a small group of operations by one step. Writing each as hand matching
repeats the same checks (is this intermediate written once? read by the next operation
alone? read through another value sharing its bytes?) and gets them subtly different each
time. Here a fusion is a :class:`Rule`: a :class:`Pattern` describing the operations from the
last one back to its inputs (tinygrad's ``UPat``, in small), and a ``build`` function that gets
the :class:`Match` and returns the replacement (or None when the values do not fit it). The
engine does the graph's legality checks once, for every rule:

* every intermediate (the result of a matched operation other than the last) is written by
  its operation alone and read only by operations of the match, and the graph agrees it may
  vanish (``Graph.inner``: for a method, no value sharing its bytes is read later; for an
  XNNPACK graph, no external output and no clamp);
* the inputs of the match (its :class:`Var` s) are not computed inside it;
* a name used twice in a pattern binds the same operation or value both times.

``Pattern(op, src)`` matches an operation whose op key (a kernel's name, an XNNPACK node's
function) is ``op`` (or one of a frozenset of them; :data:`ANY` for any, with ``test`` saying
which) and whose leading operands match ``src`` (patterns for operations that produce
them, :class:`Var` s for inputs, None for any operand); ``commutative=True`` also tries its
first two operands the other way round. A rule's ``tail`` lets a match grow past its last
operation through values read by one operation alone (an activation after a BatchNorm, the
layout views after a product); the builder is asked with the longest tail first, then shorter
ones.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

Node = Any  # what a graph calls an operation (an instruction index, a node index)


class Graph(Protocol):
    """What the engine asks of a graph (a method's dataflow, an XNNPACK delegate)."""

    def op(self, node: Node) -> Any: ...

    def operands(self, node: Node) -> Sequence[int]: ...

    def result(self, node: Node) -> int | None: ...

    def producer(self, value: int) -> Node | None: ...

    def sole_reader(self, value: int) -> Node | None: ...

    def inner(self, value: int, writer: Node, nodes: frozenset[Node], aliased: bool) -> bool: ...


@dataclass(frozen=True)
class Var:
    """An input of the match: binds the operand's value under ``name``; ``test(graph,
    value)`` may refuse it."""

    name: str
    test: Callable[[Any, int], bool] | None = None


ANY = object()  # a Pattern's op that accepts every operation (its test decides)


@dataclass(frozen=True)
class Pattern:
    """An operation and the patterns of its leading operands (see the module doc).
    ``aliased=True``: its result may be read through another value sharing its bytes (the
    builder decides what to do about it)."""

    op: Any
    src: tuple[Pattern | Var | None, ...] = ()
    name: str | None = None
    commutative: bool = False
    test: Callable[[Any, Node], bool] | None = None
    aliased: bool = False

    def accepts(self, key: Any) -> bool:
        if self.op is ANY:
            return True
        if isinstance(self.op, frozenset):
            return key in self.op
        return key == self.op


@dataclass
class Match:
    """A legal match: its operations by pattern name, its inputs by :class:`Var` name,
    ``nodes`` (every operation it covers, ascending), ``root`` (the pattern's last operation),
    ``tail`` (the operations the rule's tail added after it) and ``result``, the value the
    replacement must produce (the last operation's)."""

    root: Node
    ops: dict[str, Node]
    values: dict[str, int]
    nodes: tuple[Node, ...]
    tail: tuple[Node, ...] = ()
    result: int | None = None

    def __getitem__(self, name: str) -> Any:
        return self.ops[name] if name in self.ops else self.values[name]


@dataclass(frozen=True, eq=False)
class Rule:
    """A fusion: ``pattern``, the optional ``tail`` (a test of an operation reading the
    previous result, ``max_tail`` of them at most) and ``build(graph, match)`` -> the
    replacement or None. (Equal only to itself: the rule index is cached by the rules, and
    hashing a rule by identity costs nothing, by value its whole pattern.)"""

    name: str
    pattern: Pattern
    build: Callable[[Any, Match], Any]
    tail: Callable[[Any, Node, int], bool] | None = None
    max_tail: int = 1 << 16


@dataclass
class _State:
    ops: dict[str, Node] = field(default_factory=dict)
    values: dict[str, int] = field(default_factory=dict)
    nodes: dict[Node, Pattern] = field(default_factory=dict)  # matched op -> its pattern

    def copy(self) -> _State:
        return _State(dict(self.ops), dict(self.values), dict(self.nodes))


def match(g: Graph, pattern: Pattern, root: Node) -> Match | None:
    """The first legal match of ``pattern`` whose last operation is ``root``, or None."""
    for st in _node(g, pattern, root, _State()):
        m = _legal(g, st, root)
        if m is not None:
            return m
    return None


def _node(g: Graph, p: Pattern, node: Node, st: _State) -> Iterator[_State]:
    if p.name is not None and p.name in st.ops:
        if st.ops[p.name] == node:
            yield st
        return
    if node in st.nodes or not p.accepts(g.op(node)) or (p.test is not None and
                                                           not p.test(g, node)):
        return
    operands = g.operands(node)
    if len(operands) < len(p.src):
        return
    st = st.copy()
    st.nodes[node] = p
    if p.name is not None:
        st.ops[p.name] = node
    orders = [p.src]
    if p.commutative and len(p.src) >= 2:
        orders.append((p.src[1], p.src[0], *p.src[2:]))
    for src in orders:
        yield from _operands(g, src, operands, 0, st)


def _operands(g: Graph, src: Sequence[Pattern | Var | None], operands: Sequence[int], k: int,
              st: _State) -> Iterator[_State]:
    if k == len(src):
        yield st
        return
    p, v = src[k], operands[k]
    if p is None:
        yield from _operands(g, src, operands, k + 1, st)
    elif isinstance(p, Var):
        bound = st.values.get(p.name)
        if bound is None:
            if p.test is not None and not p.test(g, v):
                return
            st = st.copy()
            st.values[p.name] = v
        elif bound != v:
            return
        yield from _operands(g, src, operands, k + 1, st)
    else:
        node = g.producer(v)
        if node is None:
            return
        for inner in _node(g, p, node, st):
            yield from _operands(g, src, operands, k + 1, inner)


def _legal(g: Graph, st: _State, root: Node) -> Match | None:
    nodes = frozenset(st.nodes)
    for node, p in st.nodes.items():
        if node == root:
            continue
        value = g.result(node)
        if value is None or not g.inner(value, node, nodes, p.aliased):
            return None
    if any(g.producer(v) in nodes for v in st.values.values()):
        return None  # an input computed inside the match
    return Match(root, st.ops, st.values, tuple(sorted(nodes)), (), g.result(root))


def apply(g: Graph, rules: Sequence[Rule], nodes: Sequence[Node]) -> list[tuple[Rule, Match, Any]]:
    """Every node tried as the last operation of each rule, in order; a node covered by a
    fusion is not covered by another. (rule, match, what its builder returned) per fusion."""
    taken: set[Node] = set()
    found = []
    by_key = _rules_by_op(rules)
    for node in nodes:
        if node in taken:
            continue
        for rule in by_key.get(g.op(node), by_key[ANY]):
            test = rule.pattern.test
            if test is not None and not test(g, node):  # (before any match state is built)
                continue
            m = match(g, rule.pattern, node)
            if m is None or taken.intersection(m.nodes):
                continue
            built = _build(g, rule, m, taken)
            if built is not None:
                m, result = built
                taken.update(m.nodes)
                found.append((rule, m, result))
                break
    return found


def _rules_by_op(rules: Sequence[Rule]) -> dict[Any, list[Rule]]:
    """The rules whose last operation may be an op, per op key (``ANY``: for any other key),
    in their order: a node is tried only with the rules that can end there."""
    return _index(tuple(rules))


@functools.lru_cache(maxsize=64)  # (a few rule lists: one per fusion pass)
def _index(rules: tuple[Rule, ...]) -> dict[Any, list[Rule]]:
    keys = {k for r in rules if r.pattern.op is not ANY
            for k in (r.pattern.op if isinstance(r.pattern.op, frozenset) else (r.pattern.op,))}
    out = {k: [r for r in rules if r.pattern.accepts(k)] for k in keys}
    out[ANY] = [r for r in rules if r.pattern.op is ANY]
    return out


def _build(g: Graph, rule: Rule, m: Match, taken: set[Node]) -> tuple[Match, Any] | None:
    """The builder's result with the longest tail it accepts (none: the bare match)."""
    tail: list[Node] = []
    covered = set(m.nodes)
    value, writer = m.result, m.root
    while rule.tail is not None and value is not None and len(tail) < rule.max_tail:
        reader = g.sole_reader(value)
        if reader is None or reader in covered or reader in taken or \
                not rule.tail(g, reader, value):
            break
        if not g.inner(value, writer, frozenset(covered | {reader}), False):
            break
        tail.append(reader)
        covered.add(reader)
        value, writer = g.result(reader), reader
    for n in range(len(tail), -1, -1):
        grown = Match(m.root, m.ops, m.values, tuple(sorted(set(m.nodes) | set(tail[:n]))),
                      tuple(tail[:n]), g.result(tail[n - 1]) if n else m.result)
        result = rule.build(g, grown)
        if result is not None:
            return grown, result
    return None
