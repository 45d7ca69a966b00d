"""Edge-dialect operators: ATen overloads with the dtype rules of ExecuTorch's ``edge.yaml``.

``exir_ops.edge.aten.add.Tensor`` is an :class:`EdgeOpOverload`. It *is* an ``OpOverload``
(a subclass sharing the ATen overload's state) and compares equal to, and hashes like, the
ATen overload it wraps, so the compiler's tables keyed by ``torch.ops.aten.*`` and every
``node.target == torch.ops.aten.add.Tensor`` keep working on Edge graphs, while passes
written for ExecuTorch match ``exir_ops.edge.aten.add.Tensor`` on the same nodes. Its
``_schema`` adds ``allowed_types`` to its tensor arguments and results (and the scalars
edge.yaml types), exactly where ExecuTorch puts them.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass
from functools import cache

import torch
from torch._ops import OpOverload, OpOverloadPacket

# ExecuTorch's ScalarType names for the dtypes edge.yaml mentions.
DTYPES: dict[str, torch.dtype] = {
    "Bool": torch.bool, "Byte": torch.uint8, "Char": torch.int8, "Short": torch.int16,
    "Int": torch.int32, "Long": torch.int64, "Half": torch.float16,
    "BFloat16": torch.bfloat16, "Float": torch.float32, "Double": torch.float64,
    "UInt16": torch.uint16, "ComplexFloat": torch.complex64, "ComplexDouble": torch.complex128,
}
_ANY = frozenset(DTYPES.values())


@cache
def _table() -> dict[str, dict]:
    """edge.yaml's facts (see scripts/gen_edge_dtypes.py), read on first use."""
    return json.loads((pathlib.Path(__file__).parent / "dtypes.json").read_text())


def is_tensor_arg(arg: torch._C.Argument) -> bool:
    return str(arg.type) in ("Tensor", "Optional[Tensor]", "List[Tensor]")


def tensor_names(schema: torch._C.FunctionSchema) -> list[str]:
    """Names of the tensor arguments, then ``__ret_N`` for each tensor result (edge.yaml's)."""
    names = [a.name for a in schema.arguments if is_tensor_arg(a)]
    rets = [r for r in schema.returns if is_tensor_arg(r)]
    return names + [r.name or f"__ret_{i}" for i, r in enumerate(rets)]


@dataclass(frozen=True)
class DtypeConstraint:
    """The allowed dtype combinations of one operator: each rule maps every tensor argument
    and result name to a set of dtypes, and an alias (``T0``) used by several names in one
    rule means they share one dtype."""

    rules: tuple[dict[str, tuple[str, frozenset[torch.dtype]]], ...]

    def allowed(self, name: str) -> frozenset[torch.dtype]:
        """Every dtype ``name`` may take in some rule (empty if ``name`` is not a tensor)."""
        out: frozenset[torch.dtype] = frozenset()
        for rule in self.rules:
            if name in rule:
                out |= rule[name][1]
        return out

    def allowed_given(self, name: str, dtypes: dict[str, torch.dtype | None]) -> set[torch.dtype]:
        """The dtypes ``name`` may take while the other names keep their ``dtypes``."""
        return {t for t in self.allowed(name) if self.validate({**dtypes, name: t})}

    def validate(self, dtypes: dict[str, torch.dtype | None]) -> bool:
        """True when some rule accepts ``dtypes`` (``None``: unknown, matches anything)."""
        for rule in self.rules:
            bound: dict[str, torch.dtype] = {}
            ok = True
            for name, dtype in dtypes.items():
                if dtype is None or name not in rule:
                    continue
                alias, types = rule[name]
                if dtype not in types or bound.setdefault(alias, dtype) != dtype:
                    ok = False
                    break
            if ok:
                return True
        return False


def constraint_for(schema: torch._C.FunctionSchema) -> DtypeConstraint:
    name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    info = _table().get(name)
    if info is None:  # not in edge.yaml: any dtype ExecuTorch knows, independently
        return DtypeConstraint(({n: (n, _ANY) for n in tensor_names(schema)},))
    aliases = {k: frozenset(DTYPES[t] for t in v) for k, v in info["aliases"].items()}
    return DtypeConstraint(tuple(
        {n: (alias, aliases[alias]) for n, alias in rule.items()} for rule in info["rules"]))


class EdgeArgument:
    """A schema argument (or result) with ``allowed_types``; everything else is the ATen one."""

    def __init__(self, argument: torch._C.Argument, allowed_types: frozenset[torch.dtype]):
        self.argument = argument
        self.allowed_types = set(allowed_types)

    def __getattr__(self, name: str):
        return getattr(self.argument, name)

    def __str__(self) -> str:
        return str(self.argument)

    __repr__ = __str__


class EdgeFunctionSchema:
    """An ATen ``FunctionSchema`` whose tensor arguments and results (and the scalar ones
    edge.yaml gives a type, like ``add``'s ``alpha``) carry ``allowed_types``."""

    def __init__(self, schema: torch._C.FunctionSchema):
        self.schema = schema
        self.dtype_constraint = constraint_for(schema)
        c = self.dtype_constraint
        named = set(c.rules[0]) if c.rules else set()  # tensors, and scalars edge.yaml types
        self.arguments = [EdgeArgument(a, c.allowed(a.name)) if a.name in named else a
                          for a in schema.arguments]
        # As ExecuTorch does: plain Tensor results take edge.yaml's ``__ret_N`` names in
        # order (results it names otherwise, or Tensor[] ones, carry no allowed_types).
        ret_names = iter(sorted(n for n in named if n.startswith("__ret")))
        self.returns = []
        for r in schema.returns:
            name = next(ret_names, None) if isinstance(r.type, torch.TensorType) else None
            self.returns.append(EdgeArgument(r, c.allowed(name)) if name else r)

    def __getattr__(self, name: str):
        return getattr(self.schema, name)

    def __str__(self) -> str:
        return str(self.schema)

    __repr__ = __str__


class EdgeOpOverload(OpOverload):
    """An Edge-dialect operator overload; ``_op`` is the ATen ``OpOverload`` it stands for."""

    def __init__(self, op: OpOverload, dialect: str = "edge"):
        # Share the ATen overload's state (dispatch tables, packet, tags), then specialise.
        self.__dict__.update(op.__dict__)
        self._op = op
        self._schema = EdgeFunctionSchema(op._schema)
        self._dialect = dialect
        self.__name__ = f"{op.namespace}.{op.__name__}"
        # torch.fx prints ``<module>.aten.add.Tensor`` and names the operator in generated
        # code ``edgetorch_exir_dialects_edge__ops_aten_add_Tensor``: ExecuTorch's spelling
        # (``executorch.exir.dialects.edge._ops``) under our package, so graph checks written
        # for ExecuTorch match after the rename.
        self.__module__ = f"edgetorch.exir.dialects.{dialect}._ops"

    def __call__(self, /, *args, **kwargs):
        return self._op(*args, **kwargs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EdgeOpOverload):
            return other._op is self._op
        if isinstance(other, OpOverload):
            return other is self._op
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._op)

    def __reduce__(self):
        return (_edge_op, (self._dialect, str(self._op)))

    def __repr__(self) -> str:
        return f"<EdgeOpOverload: {self.__name__}>: schema = {self._schema.schema}"

    def to_out_variant(self) -> OpOverload:
        """The ATen ``.out`` overload the runtime calls for this operator."""
        from ...ops import out_variant

        out = out_variant(self._op)
        if out is None:
            raise RuntimeError(f"{self._op.name()} has no out variant")
        return out


def _edge_op(dialect: str, qualified: str) -> EdgeOpOverload:
    from .._ops import ops

    ns, op, overload = qualified.split(".")
    return getattr(getattr(getattr(getattr(ops, dialect), ns), op), overload)


class EdgeOpOverloadPacket:
    """``exir_ops.edge.aten.add``: its attributes are the overloads as Edge ops."""

    overload_class: type[EdgeOpOverload] = EdgeOpOverload

    def __init__(self, qualified_op_name: str, op_name: str, parent: OpOverloadPacket,
                 dialect: str = "edge"):
        self._parent_overload_packet = parent
        self._qualified_op_name = qualified_op_name
        self._dialect = dialect
        self.__name__ = qualified_op_name.replace("::", ".")
        self._op = parent._op
        self._overload_names = parent._overload_names

    @property
    def op(self):
        return self._op

    def overloads(self) -> list[str]:
        return self._parent_overload_packet.overloads()

    def __getattr__(self, key: str) -> EdgeOpOverload:
        if key.startswith("__"):
            raise AttributeError(key)
        try:
            aten = getattr(self._parent_overload_packet, key)
        except AttributeError:
            raise AttributeError(
                f"{self} has no overload {key!r}; overloads: "
                f"{', '.join(self.overloads())}") from None
        overload = self.overload_class(aten, self._dialect)
        setattr(self, key, overload)  # one object per overload
        return overload

    def __call__(self, *args, **kwargs):
        return self._parent_overload_packet(*args, **kwargs)

    def __hash__(self) -> int:
        return hash(self._op)

    def __str__(self) -> str:
        return self.__name__

    def __repr__(self) -> str:
        parent = self._parent_overload_packet._qualified_op_name.replace("::", ".")
        return f"<EdgeOpOverloadPacket(op='{self.__name__}', parent_op='{parent}')>"
