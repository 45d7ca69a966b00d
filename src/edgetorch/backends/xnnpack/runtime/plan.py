"""A delegate graph compiled for one set of input shapes into one straight-line function.

The reference path (``runtime.run_steps``) runs each node's step, which reads its inputs from
the environment list and stores a fresh result there. At load, for the graph's declared input
shapes (``backend._plan_at_load``: a call on zeros), and once a graph has been called
``PLAN_AFTER`` times with other input shapes, :func:`build` runs that call node by node and
writes, as it goes, the Python function that later calls with those shapes run instead:

- a node whose rule gave an OUT :class:`~.nodes.Op` writes into a buffer of its own,
  allocated here at the shape this call gave it. One buffer per node output: no buffer is
  written while a view of an older value in it lives, so views need no lifetime analysis;
- a layout node (VIEW) of a buffer or a constant is resolved here, once, to a fixed view; of an
  external input or of a closure's result it is re-made per call (one method call);
- a constant that a binary node broadcasts is expanded here to the output's shape (NumPy's
  broadcasting loops take about twice as long as same-shape ones; same products, same bits);
- a closure rule (convolutions, quantized nodes) runs its reference step, its inputs put into
  the environment first;
- floating-point warnings are off while it runs (the graph's ``runtime.quiet.Quiet``);
- external outputs are copied into the method's tensors (``runtime._store`` when they need a
  resize or a cast, as the reference path does).

Each node runs the same NumPy operations in the same order as on the reference path, only
into other memory, so both paths give the same bits (tests/backends/xnnpack/test_xnnpack_plan.py).
Traced calls (one event per node) always take the reference path.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ....errors import EdgeTorchError, KernelError
from .nodes import _BINARY, CALL, OUT, VIEW

if TYPE_CHECKING:
    from .backend import CompiledGraph

# Calls with the same input shapes (other than those planned at load) before a
# graph gets a plan for them: the first call of a shape runs the reference path (a shape seen
# once, e.g. each new length of a growing sequence, never pays for a plan), the second builds
# the plan, the later ones run it. The load pass ``xnnpack.plan`` (passes.py) switches plans
# on or off.
PLAN_AFTER = 2
MAX_PLANS = 8  # input-shape signatures planned per graph; others run the reference path
# A graph with at most this many bytes of weights is planned at load (its declared shapes):
# the build is a call, and for larger graphs it would make the load several times longer
# (MiniLM's 19 delegates, 86 MB: ~100 ms more CPU on a 30 ms load); they are planned at the
# second call of a shape, as other shapes are.
PLAN_AT_LOAD_MAX_BYTES = 1 << 20
# ... and whose values at their declared sizes take at most this many bytes (8 per element)
PLAN_AT_LOAD_MAX_VALUE_BYTES = 64 << 20
BROADCAST_MAX_BYTES = 1 << 16  # constants expanded to an output of at most this size

_BROADCASTING = frozenset(_BINARY.values())
_counter = itertools.count()


class Plan:
    """The compiled function of one graph for one input-shape signature.

    ``fn(values, args, resize)`` runs the call and returns True, or returns False (having
    done nothing) when the inputs are not those it was built for. ``str()`` is its source.
    """

    def __init__(self, source: str, namespace: dict[str, Any], node_at: dict[int, int],
                 buffers: int) -> None:
        self.source = source
        code = compile(source, f"<XNNPACK plan {next(_counter)}>", "exec")
        exec(code, namespace)  # noqa: S102 - our own generated source, see _Writer
        self.fn: Callable[..., bool] = namespace["plan"]
        self.node_at = node_at  # source line -> node index, to name a failing node
        self.buffers = buffers  # bytes preallocated for node outputs

    def failed_node(self, error: BaseException) -> int | None:
        tb = error.__traceback__
        node = None
        while tb is not None:
            if tb.tb_frame.f_code is self.fn.__code__:
                node = self.node_at.get(tb.tb_lineno)
            tb = tb.tb_next
        return node

    def __str__(self) -> str:
        return self.source


class _Writer:
    """The plan's source and namespace, written while the build call runs."""

    def __init__(self, g: CompiledGraph) -> None:
        from .backend import _physical, _store

        self.g = g
        self.ns: dict[str, Any] = {"ndarray": np.ndarray, "ENV": g.env, "COPYTO": np.copyto,
                                   "STORE": _store, "PHYS": _physical, "CLIP": np.ndarray.clip,
                                   "MAXIMUM": np.maximum, "MINIMUM": np.minimum}
        self.body: list[tuple[str, int]] = []  # (line, node index)
        self.name: dict[int, str] = {}  # slot -> the expression of its value
        self.value: dict[int, Any] = {}  # slot -> its value in this call
        self.fixed: set[int] = set()  # slots whose value is the same object on every call
        self.in_env: set[int] = set()  # slots the plan stores into the environment
        self.written: dict[int, str] = {}  # slot -> the buffer an OUT step writes it into
        self.readers: dict[int, int] = {}  # slot -> how many nodes read it
        for k, slots in enumerate(g.node_slots):
            for s in slots:
                if s != g.nodes[k].out:
                    self.readers[s] = self.readers.get(s, 0) + 1
        self.external = {s for _, s, _ in g.inputs} | {s for _, s in g.outputs}
        self.nbytes = 0

    def constant(self, obj: Any, prefix: str) -> str:
        name = f"{prefix}{len(self.ns)}"
        self.ns[name] = obj
        return name

    def define(self, slot: int, value: Any, fixed: bool, name: str | None = None) -> str:
        self.value[slot] = value
        if fixed:
            self.fixed.add(slot)
            self.name[slot] = name or self.constant(value, f"b{slot}_")
        else:
            self.name[slot] = name or f"v{slot}"
        return self.name[slot]

    def emit(self, line: str, node: int) -> None:
        self.body.append((line, node))


def build(g: CompiledGraph, ins: list[np.ndarray], values: list[Any], args: Any,
          resize: Any) -> Plan:
    """Run this call of ``g`` (``ins``: its bound external inputs) node by node, writing the
    plan for its input shapes; the call's outputs are stored as the reference path does."""
    from .backend import _write_outputs

    g.env[:] = g.initial  # (a reference call that failed may have left values behind)
    w = _Writer(g)
    for s, c in enumerate(g.initial):
        if c is not None:
            w.define(s, c, True, w.constant(c, f"c{s}_"))
    for (_, s, _), a in zip(g.inputs, ins):
        w.define(s, a, False, f"x{s}")
    g.quiet.run(_run_nodes, w)
    outs = [w.value.get(s) for _, s in g.outputs]
    _write_outputs(g, outs, values, args, resize)
    return _assemble(w, ins, outs)


def _run_nodes(w: _Writer) -> None:
    g = w.g
    for k, rec in enumerate(g.nodes):
        try:
            f = g.fusions.get(k)
            if f is None:
                _node(w, k, rec)
            elif k == f.nodes[-1] and not _fused(w, k, f):
                for j in f.nodes:  # one by one, late (nothing else reads their values)
                    _node(w, j, g.nodes[j])
            # (an inner node of a chain runs with its last node)
        except EdgeTorchError:
            raise
        except Exception as e:  # a node's own failure on this call: named, as run_steps does
            raise KernelError(f"XNNPACK {g.descriptions[k]} failed: {type(e).__name__}: "
                              f"{e}") from e


def _node(w: _Writer, k: int, rec: Any) -> None:
    op = rec.op
    if op is None or not all(type(w.value.get(s)) is np.ndarray for s in op.ins):
        return _closure(w, k)
    vals = [w.value[s] for s in op.ins]
    fn = w.constant(op.fn, "F")
    extra = [w.constant(e, "E") for e in op.extra]
    finite = rec.lo != -math.inf or rec.hi != math.inf
    if op.kind == VIEW:
        r = op.fn(*vals, *op.extra)
        if type(r) is not np.ndarray or r.dtype != rec.dtype or finite:
            return _closure(w, k)
        src = op.ins[0]
        if r is vals[0]:  # a copy node: the same value
            w.define(rec.out, r, src in w.fixed, w.name[src])
        elif src not in w.fixed:
            out = w.define(rec.out, r, False)
            w.emit(f"{out} = {fn}({', '.join([w.name[src], *extra])})", k)
        elif np.may_share_memory(r, vals[0]):
            w.define(rec.out, r, True)  # a view of a fixed buffer: made once, here
        else:  # a reshape that copies (a transposed view): copy into a buffer, view that
            flat = np.empty(vals[0].shape, vals[0].dtype)
            np.copyto(flat, vals[0])
            w.nbytes += flat.nbytes
            w.emit(f"COPYTO({w.constant(flat, 'b')}, {w.name[src]})", k)
            w.define(rec.out, op.fn(flat, *op.extra), True)
        return None
    r = op.fn(*vals, *op.extra)
    if type(r) is not np.ndarray or r.dtype != rec.dtype:
        return _closure(w, k)
    names = [w.name[s] for s in op.ins]
    if op.kind == OUT:
        args = list(op.extra)
        if r.nbytes <= BROADCAST_MAX_BYTES:
            for j, s in enumerate(op.ins):
                if op.fn in _BROADCASTING and w.g.initial[s] is not None and \
                        _expands(vals[j], r):
                    vals[j] = np.ascontiguousarray(np.broadcast_to(vals[j], r.shape))
                    names[j] = w.constant(vals[j], f"c{s}x")
                    w.nbytes += vals[j].nbytes
            for j in op.expand:
                if _expands(args[j], r):
                    args[j] = np.ascontiguousarray(np.broadcast_to(args[j], r.shape))
                    extra[j] = w.constant(args[j], "E")
                    w.nbytes += args[j].nbytes
        spent = _in_place(w, k, op, vals, r)
        if spent is None:
            buf = np.empty(r.shape, r.dtype)
            w.nbytes += buf.nbytes
            name = None
        else:  # an elementwise ufunc over a buffer only it reads: into that buffer
            buf, name = w.value[spent], w.name[spent]
        np.copyto(buf, r)  # (this call's result: the node is not computed twice at load)
        out = w.written[rec.out] = w.define(rec.out, buf, True, name)
        w.emit(f"{fn}({', '.join([*names, *extra])}, out={out})", k)
    else:
        assert op.kind == CALL
        out = w.define(rec.out, r, False)
        w.emit(f"{out} = {fn}({', '.join([*names, *extra])})", k)
    if finite:
        r = w.value[rec.out]
        lo, hi = np.asarray(rec.lo, rec.dtype), np.asarray(rec.hi, rec.dtype)
        r.clip(lo, hi, out=r)
        w.emit(_clamp_line(out, lo, hi, w), k)
    return None


def _clamp_line(out: str, lo: np.ndarray, hi: np.ndarray, w: _Writer) -> str:
    """The plan's clamp of ``out`` in place: ``ndarray.clip`` (one pass), or for a bound on
    one side of a float32/float64 value its ufunc alone (``maximum(lo, x)``, ``minimum(hi,
    x)``: the same bits as clip, -0.0 and NaN included, without clip's Python wrapper, ~1 us
    of a tiny model's ~20 us call; float16's ufuncs treat -0.0 otherwise)."""
    if lo.dtype in (np.float32, np.float64):
        if hi == np.inf:
            return f"MAXIMUM({w.constant(lo, 'E')}, {out}, out={out})"
        if lo == -np.inf:
            return f"MINIMUM({w.constant(hi, 'E')}, {out}, out={out})"
    return f"CLIP({out}, {w.constant(lo, 'E')}, {w.constant(hi, 'E')}, out={out})"


def _in_place(w: _Writer, k: int, op: Any, vals: list[np.ndarray], r: np.ndarray
              ) -> int | None:
    """An input slot of node ``k`` whose buffer the node may write its result into: a NumPy
    ufunc (elementwise: in place is exact) over a same-shaped buffer of this plan that no
    other node reads, views or returns (fewer buffers: a smaller working set)."""
    if not isinstance(op.fn, np.ufunc):
        return None
    for s, v in zip(op.ins, vals):
        if s in w.written and w.readers.get(s) == 1 and s not in w.external and \
                v.shape == r.shape and v.dtype == r.dtype and v.flags.c_contiguous:
            return s
    return None


def _fused(w: _Writer, k: int, f: Any) -> bool:
    """Emit fusion ``f`` (ending at node ``k``) as one OUT step, if this call's values fit."""
    vals = [w.value.get(s) for s in f.ins]
    if not all(type(v) is np.ndarray for v in vals):
        return False
    prepared = f.prepare(vals)
    if prepared is None:
        return False
    fn, extra = prepared
    r = fn(*vals, *extra)
    if r.dtype != w.g.nodes[k].dtype:
        return False
    buf = np.empty(r.shape, r.dtype)
    w.nbytes += buf.nbytes
    fn(*vals, *extra, out=buf)  # (as the plan calls it: what it derives once, e.g. views, now)
    out = w.written[f.out] = w.define(f.out, buf, True)
    names = [w.name[s] for s in f.ins] + [w.constant(e, "E") for e in extra]
    w.emit(f"{w.constant(fn, 'F')}({', '.join(names)}, out={out})  # {f.name}: nodes "
           f"{', '.join(map(str, f.nodes))}", k)
    return True


def _expands(a: Any, r: np.ndarray) -> bool:
    """Whether ``a`` is an array that broadcasts against the result ``r`` (more than a
    scalar: NumPy's scalar loops are as fast as its same-shape ones)."""
    return type(a) is np.ndarray and a.size > 1 and a.shape != r.shape and \
        np.broadcast_shapes(a.shape, r.shape) == r.shape


def _closure(w: _Writer, k: int) -> None:
    """Run node ``k``'s reference step: its defined inputs into the environment first, the
    values it writes read back after."""
    env, slots = w.g.env, w.g.node_slots[k]
    for s in slots:
        if s in w.value and w.g.initial[s] is None:
            env[s] = w.value[s]
            w.in_env.add(s)
            w.emit(f"ENV[{s}] = {w.name[s]}", k)
    w.g.nodes[k].step()
    w.emit(f"{w.constant(w.g.nodes[k].step, 'S')}()", k)
    for s in slots:
        if s not in w.value and env[s] is not None:
            w.in_env.add(s)
            w.emit(f"{w.define(s, env[s], False)} = ENV[{s}]", k)


def _direct_outputs(w: _Writer, outs: list[Any]) -> dict[int, tuple[str, np.ndarray]]:
    """External outputs the step computing them can write into the method's tensor: an OUT
    step's buffer that no node reads (nor aliases) and that only this output shows."""
    g = w.g
    slots = [s for _, s in g.outputs]
    inputs = {s for _, s, _ in g.inputs}
    return {ext: (w.written[s], r) for (ext, s), r in zip(g.outputs, outs)
            if s in w.written and s not in w.readers and s not in inputs and
            slots.count(s) == 1}


def _assemble(w: _Writer, ins: list[np.ndarray], outs: list[Any]) -> Plan:
    g = w.g
    lines = ["def plan(values, args, resize):",
             f"    if len(args) < {g.num_args}:",
             "        return False"]
    for (ext, s, _), a in zip(g.inputs, ins):
        x, dt = f"x{s}", w.constant(a.dtype, "D")
        lines += [f"    {x} = values[args[{ext}]]",
                  f"    if type({x}) is not ndarray or {x}.dtype is not {dt}:",
                  "        return False",
                  f"    if not {x}.flags.c_contiguous:",
                  f"        {x} = PHYS({x})",
                  f"    if {x}.shape != {a.shape!r}:",
                  "        return False"]
    body = list(w.body)
    direct = _direct_outputs(w, outs)
    for ext, (buf, r) in direct.items():
        # (XNNPACK writes its external outputs in place too: they never alias the inputs)
        o, t = f"o{ext}", f"t{ext}"
        lines += [f"    {o} = values[args[{ext}]]",
                  f"    {t} = {o} if type({o}) is ndarray and {o}.shape == {r.shape!r} and "
                  f"{o}.dtype is {w.constant(r.dtype, 'D')} and {o}.flags.c_contiguous "
                  f"else {buf}"]
        token = re.compile(rf"\b{re.escape(buf)}\b")
        body = [(token.sub(t, line), k) for line, k in body]
    node_at = {}
    for line, k in body:
        lines.append(f"    {line}")
        node_at[len(lines)] = k
    for (ext, s), r in zip(g.outputs, outs):
        src = w.name.get(s, "None")
        if ext in direct:
            lines += [f"    if t{ext} is not o{ext}:",
                      f"        STORE(o{ext}, {src}, {ext}, args[{ext}], resize)"]
        elif type(r) is np.ndarray:
            lines += [f"    o = values[args[{ext}]]",
                      f"    if type(o) is ndarray and o.shape == {r.shape!r} and "
                      f"o.dtype is {w.constant(r.dtype, 'D')} and o.flags.c_contiguous:",
                      f"        COPYTO(o, {src})",
                      "    else:",
                      f"        STORE(o, {src}, {ext}, args[{ext}], resize)"]
        else:
            lines.append(f"    STORE(values[args[{ext}]], {src}, {ext}, args[{ext}], resize)")
    lines += [f"    ENV[{s}] = None" for s in sorted(w.in_env)]
    lines.append("    return True")
    return Plan("\n".join(lines) + "\n", w.ns, node_at, w.nbytes)
