"""Move views and permutes through elementwise operators, as ExecuTorch 1.5.1's
``PropagateViewCopyPermuteDownPass``, ``PropagateViewCopyPermuteUpPass`` and
``MoveDataMovementOpsToSmallerDtypePass`` do -- on the lowering's flat operator list.

ExecuTorch runs them on its FX graph after the RESCALEs are inserted, so where a RESHAPE or
TRANSPOSE of the model ends up (and so the order and shapes of the operators around it, and
the ``.tosa`` bytes) follows from them: ``(x * 2).permute(0, 2, 1)`` becomes a TRANSPOSE of
the delegate input followed by the RESCALE, MUL and RESCALE on the permuted shape.

Rules (theirs, for static shapes):
- an operator is *elementwise* if it is ADD, SUB, MUL, CLAMP, TABLE, a per-tensor RESCALE or
  (FP profile) one of the functions INT makes a TABLE (SIGMOID, TANH, EXP...);
  a RESCALE is *transparent*: a view that changes the rank does not cross it;
- a move crosses one operator at a time; the crossed operator must read one tensor (TABLE's
  table does not count; moving up, a permute also crosses an operator whose other inputs are
  all-ones of the same rank), keep a permute's rank, and -- for TABLE -- not end up reading
  an ``[N > 1, 1, 1, C]`` tensor (Ethos-U85 miscompiles that, MLBEDSW-11805);
- down: the moving op's only reader is crossed, and the op is placed after it; up: the
  crossed operator must have no reader but the frontier, and the op is placed before the
  last operator crossed;
- then a TRANSPOSE next to a per-tensor RESCALE moves to the narrower side of it.
Forks (splitting a permute over several readers), reductions and slices that would have
their arguments rewritten, and the fusion of the moved ops are not modelled: they stop a
move here, where ExecuTorch might go on.
"""

from __future__ import annotations

from .tosa_ir import TOp

_ELEMENTWISE = {"ADD", "SUB", "MUL", "CLAMP", "TABLE", "RESCALE",
                "SIGMOID", "TANH", "EXP", "RECIPROCAL", "RSQRT", "ERF", "LOG"}
_WIDTH = {"INT8": 1, "INT16": 2, "INT32": 4, "BOOL": 1, "FP32": 4}


def _inputs(op) -> list:
    """The tensors an operator reads, once each (shape constants are arguments in FX)."""
    out: list = []
    for i in getattr(op, "inputs", ()):
        if not (isinstance(i, TOp) and i.op == "CONST_SHAPE") and not any(i is o for o in out):
            out.append(i)
    return out


def _elementwise(op) -> bool:
    if not isinstance(op, TOp) or op.op not in _ELEMENTWISE:
        return False
    return op.op != "RESCALE" or len(op.attrs["scales"]) == 1


def _layout_inputs(op) -> list:
    """The inputs that carry a layout (TABLE's table does not)."""
    return _inputs(op)[:1] if op.op == "TABLE" else _inputs(op)


def _unsafe_table_shape(shape: list[int]) -> bool:
    return len(shape) == 4 and shape[0] > 1 and shape[1] == 1 and shape[2] == 1


class _Graph:
    def __init__(self, order: list, outputs: list, movable: set[int]):
        self.order = order
        self.outputs = outputs
        self.movable = movable
        self._readers: dict[int, list] | None = None  # rebuilt after each change

    def users(self, t) -> list:
        """Readers of ``t`` in order, once each; ``None`` stands for the graph output."""
        if self._readers is None:
            self._readers = {}
            for o in self.order:
                if isinstance(o, TOp):
                    for i in {id(i): i for i in o.inputs}:
                        self._readers.setdefault(i, []).append(o)
            for o in self.outputs:
                self._readers.setdefault(id(o), []).append(None)
        return list(self._readers.get(id(t), []))

    def replace_input(self, op: TOp, old, new) -> None:
        op.inputs = [new if i is old else i for i in op.inputs]
        self._readers = None

    def move_before(self, op: TOp, anchor: TOp) -> None:
        self.order.remove(op)
        self.order.insert(self.order.index(anchor), op)
        self._readers = None

    def move_after(self, op: TOp, anchor) -> None:
        self.order.remove(op)
        self.order.insert(self.order.index(anchor) + 1, op)
        self._readers = None

    # -- crossing -----------------------------------------------------------------------------

    def can_cross(self, m: TOp, frontier, nxt, up: bool) -> bool:
        if not _elementwise(nxt):
            return False
        src_shape, dst_shape = m.inputs[0].shape, m.shape
        if m.op == "RESHAPE" and nxt.op == "RESCALE" and len(src_shape) != len(dst_shape):
            return False
        seen = dst_shape if up else src_shape
        if nxt.op == "TABLE" and _unsafe_table_shape(list(seen)):
            return False
        if m.op == "TRANSPOSE" and len(nxt.shape) != len(m.attrs["perms"]):
            return False
        if len(_layout_inputs(nxt)) == 1:
            return True
        if not up or m.op != "TRANSPOSE":
            return False
        rank = len(frontier.shape)
        dependent = [i for i in _layout_inputs(nxt)
                     if not (len(i.shape) == rank and all(d == 1 for d in i.shape))]
        return len(dependent) == 1

    def down(self, m: TOp) -> bool:
        frontier, moved, crossed = m, False, []
        for _ in range(len(self.order)):
            readers = self.users(frontier)
            if len(readers) != 1 or readers[0] is None:
                break
            nxt = readers[0]
            if not self.can_cross(m, frontier, nxt, up=False):
                break
            frontier, moved = nxt, True
            crossed.append(nxt)
        if not moved:
            return False
        src = m.inputs[0]
        first = crossed[0]
        self.replace_input(first, m, src)
        for reader in self.users(frontier):
            if reader is None:
                self._readers = None
                self.outputs[:] = [m if o is frontier else o for o in self.outputs]
            else:
                self.replace_input(reader, frontier, m)
        m.inputs[0] = frontier
        m.dtype = frontier.dtype
        for op in crossed:
            op.shape = list(src.shape)
        self.move_after(m, frontier)
        return True

    def up(self, m: TOp) -> bool:
        frontier, moved, crossed = m, False, []
        for _ in range(len(self.order)):
            nexts = _inputs(frontier)
            if not nexts or any(any(u is not frontier for u in self.users(n)) for n in nexts):
                break
            if len(nexts) > 1 or not any(o is nexts[0] for o in self.order) or \
                    not self.can_cross(m, frontier, nexts[0], up=True):
                break  # (a constant's RESCALE sits with the constants: not crossed)
            frontier, moved = nexts[0], True
            crossed.append(frontier)
        if not moved:
            return False
        original = m.inputs[0]
        # ExecuTorch takes the frontier's first input; the layout-carrying one is the same
        # tensor for the graphs its quantizer makes (the operand, then the constant).
        rank = len(frontier.shape)
        producer = next((i for i in _layout_inputs(frontier)
                         if not (len(i.shape) == rank and all(d == 1 for d in i.shape))),
                        _inputs(frontier)[0])
        m.inputs[0] = producer
        m.dtype = producer.dtype
        self.replace_input(frontier, producer, m)
        for reader in self.users(m):
            if reader is None:
                self._readers = None
                self.outputs[:] = [original if o is m else o for o in self.outputs]
            elif reader is not frontier:
                self.replace_input(reader, m, original)
        for op in crossed:
            op.shape = list(m.shape)
        self.move_before(m, frontier)
        return True

    # -- MoveDataMovementOpsToSmallerDtypePass --------------------------------------------

    def to_smaller_dtype(self, m: TOp) -> bool:
        producer = m.inputs[0]
        if isinstance(producer, TOp) and producer.op == "RESCALE" and _elementwise(producer) \
                and _WIDTH[m.dtype] > _WIDTH[producer.inputs[0].dtype] \
                and self.users(producer) == [m]:
            # TRANSPOSE(RESCALE(x)) -> RESCALE(TRANSPOSE(x)): the RESCALE goes after it
            readers = self.users(m)
            src = producer.inputs[0]
            m.inputs[0], m.dtype = src, src.dtype
            producer.inputs[0], producer.shape = m, list(m.shape)
            self._redirect(readers, m, producer)
            self.move_after(producer, m)
            return True
        readers = self.users(m)
        narrowing = next((r for r in readers if r is not None and r.op == "RESCALE"
                          and _elementwise(r) and _WIDTH[m.dtype] > _WIDTH[r.dtype]), None)
        if narrowing is None or len(readers) != 1:
            return False  # ExecuTorch splits a shared one; not modelled
        # RESCALE(TRANSPOSE(x)) -> TRANSPOSE(RESCALE(x)): the TRANSPOSE goes after it
        src = m.inputs[0]
        after = self.users(narrowing)
        narrowing.inputs[0], narrowing.shape = src, list(src.shape)
        m.inputs[0], m.dtype = narrowing, narrowing.dtype
        self._redirect(after, narrowing, m)
        self.move_after(m, narrowing)
        return True

    def _redirect(self, readers: list, old, new) -> None:
        for reader in readers:
            if reader is None:
                self._readers = None
                self.outputs[:] = [new if o is old else o for o in self.outputs]
            elif reader is not new:
                self.replace_input(reader, old, new)

    def run(self) -> None:
        for _ in range(4 * len(self.order) + 4):  # each round moves one op one step or more
            candidates = [o for o in self.order if id(o) in self.movable]
            if not any(self.down(m) for m in candidates):
                break
        for _ in range(4 * len(self.order) + 4):
            candidates = [o for o in self.order if id(o) in self.movable]
            if not any(self.up(m) for m in candidates):
                break
        for _ in range(4 * len(self.order) + 4):
            candidates = [o for o in self.order if id(o) in self.movable and o.op == "TRANSPOSE"]
            if not any(self.to_smaller_dtype(m) for m in candidates):
                break


def propagate_data_movement(order: list, outputs: list, movable: set[int]) -> None:
    """Apply the moves to ``order`` (and the graph ``outputs``) in place."""
    _Graph(order, outputs, movable).run()
