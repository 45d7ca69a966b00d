"""Enumerated input shapes for Core ML: which concrete shapes a symbolic input takes.

The compile spec carries a JSON list of ``(symbolic shape, enumerations)`` pairs, where a
symbolic shape is ``{"shape": [1, {"key_name": "s0", "low": 2, "high": 8}, ...]}``
(ExecuTorch's encoding, stored in the ``.pte``); conversion gives coremltools a
``ct.EnumeratedShapes`` per dynamic input.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import coremltools as ct
import torch
from coremltools.converters.mil.frontend.torch.utils import TORCH_DTYPE_TO_MIL_DTYPE

_INFINITE = {"int_oo", "-int_oo", "oo", "-oo", "Infinity", "-Infinity"}


def _symkey(s: object) -> str:
    text = str(s)
    return text[4:-1] if text.startswith("Sym(") and text.endswith(")") else text


def _bound(b: object) -> int | None:
    return None if b is None or str(b) in _INFINITE else int(str(b))


@dataclass(frozen=True, slots=True)
class _SymInt:
    key_name: str
    low: int | None
    high: int | None

    @classmethod
    def from_symint_and_range_constraints(cls, s: torch.SymInt, range_constraints=None):
        low = high = None
        for k, v in (range_constraints or {}).items():
            if _symkey(k) == _symkey(s):
                low = _bound(getattr(v, "lower", getattr(v, "min", None)))
                high = _bound(getattr(v, "upper", getattr(v, "max", None)))
        return cls(_symkey(s), low, high)


@dataclass(frozen=True, slots=True)
class _SymbolicShape:
    shape: tuple

    @classmethod
    def from_shape_and_range_constraints(cls, shape, range_constraints=None):
        dims = []
        for s in shape:
            if isinstance(s, int):
                assert s >= 0
                dims.append(s)
            elif isinstance(s, torch.SymInt):
                dims.append(_SymInt.from_symint_and_range_constraints(s, range_constraints))
            else:
                raise ValueError(f"Unexpected type found in shape: {type(s)}")
        return cls(tuple(dims))

    def is_static_shape(self) -> bool:
        return not any(isinstance(s, _SymInt) for s in self.shape)

    def __len__(self) -> int:
        return len(self.shape)

    def __getitem__(self, key):
        return self.shape[key]

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> _SymbolicShape:
        assert len(d) == 1 and "shape" in d
        dims = []
        for s in d["shape"]:
            if isinstance(s, int):
                dims.append(s)
            elif isinstance(s, dict):
                assert set(s) == {"key_name", "low", "high"}
                dims.append(_SymInt(**s))
            else:
                raise ValueError(f"Unexpected type found in shape: {type(s)}")
        return cls(tuple(dims))


def _user_inputs(ep):
    names = ep.graph_signature.user_inputs
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in names:
            yield node.name, node.meta["val"]


def _create_enumeration_map(ep, enumerated_shapes: dict, *, ignore_range_constraints=False):
    """Symbolic shape -> (enumerations, input names); validated against the shapes' ranks,
    static dims and range constraints."""
    assert enumerated_shapes, "No enumerated shapes provided"
    count = None
    for name, shapes in enumerated_shapes.items():
        if count is None:
            count = len(shapes)
        else:
            assert len(shapes) > 1, (f"Input {name} only has {len(shapes)} enumerated shapes "
                                     "provided.  You should not specify enumerated shapes for "
                                     "inputs with only 1 input.")
            assert len(shapes) == count, (f"Input {name} has {len(shapes)} enumerated shape "
                                          f"provided, but other inputs have {count} enumerated "
                                          "shapes")
    found: dict = {}
    for name, fake in _user_inputs(ep):
        sym = _SymbolicShape.from_shape_and_range_constraints(
            fake.shape, None if ignore_range_constraints else ep.range_constraints)
        if sym.is_static_shape():
            continue
        if name not in enumerated_shapes:
            raise ValueError(f"The input {name} has a symbolic shape, but you did not provide an "
                             "enumeration for it")
        for shape in enumerated_shapes[name]:
            assert len(sym) == len(shape), (f"In {name}, the rank of the enumeration is "
                                            f"{len(shape)}, but the symbolic shape has rank "
                                            f"{len(sym)}")
            for i, d in enumerate(shape):
                assert isinstance(d, int), f"Enumerated shapes must be ints, but got {type(d)}."
                assert d >= 1, "Each enumerated shape dimension must be >= 1"
                if isinstance(sym[i], int):
                    assert sym[i] == d, (f"In {name}, the shape enumeration {shape} does not "
                                         f"match {fake.shape} on the non-symbolic value at index "
                                         f"{i}")
                    continue
                # torch rarely allows 1 as a lower bound: 1 passes a bound of 2
                if sym[i].low is not None:
                    assert d >= sym[i].low or (d == 1 and sym[i].low == 2), (
                        f"In {name}, the shape enumeration {shape} violates the lower "
                        f"range-constraint on the symbolic shape {fake.shape} at index {i}")
                if sym[i].high is not None:
                    assert d <= sym[i].high, (
                        f"In {name}, the shape enumeration {shape} violates the upper "
                        f"range-constraint on the symbolic shape {fake.shape} at index {i}")
        if sym in found:
            shapes, names = found[sym]
            assert shapes == enumerated_shapes[name], (
                f"The symbolic shape {fake.shape}, has multiple enumerations defined.  A new "
                f"enumeration is defined for input {name}, but the existing inputs {names} have "
                "a different one defined.  If these inputs have different enumerations, they "
                "should be exported with different symbolic shapes.")
            names.append(name)
        else:
            found[sym] = (enumerated_shapes[name], [name])
    return found


class _SymbolicShapeToEnumeratedShapeMap:
    def __init__(self, emap: dict) -> None:
        self.emap = emap

    def to_json(self) -> str:
        return json.dumps([(k.to_dict(), self.emap[k]) for k in self.emap])

    @classmethod
    def from_json(cls, s: str) -> _SymbolicShapeToEnumeratedShapeMap:
        return cls({_SymbolicShape.from_dict(k): tuple(v) for k, v in json.loads(s)})

    @classmethod
    def from_exported_program(cls, ep, enumerated_shapes, *, ignore_range_constraints=False):
        return cls(_create_enumeration_map(ep, enumerated_shapes,
                                           ignore_range_constraints=ignore_range_constraints))

    def __getitem__(self, key: _SymbolicShape):
        return self.emap[key][0]

    def __contains__(self, key: object) -> bool:
        return key in self.emap

    def __repr__(self) -> str:
        return f"_SymbolicShapeToEnumeratedShapeMap(emap={self.emap})"


_ENUMERATED_SHAPE_INPUT_DTYPES = (torch.float16, torch.float32, torch.int32)


def _get_ct_inputs(ep, emap: _SymbolicShapeToEnumeratedShapeMap) -> list:
    """coremltools input types: static shapes as they are, symbolic ones enumerated. Only
    fp16/fp32/int32 inputs (coremltools converts others silently)."""
    inputs = []
    for name, fake in _user_inputs(ep):
        assert fake.dtype in _ENUMERATED_SHAPE_INPUT_DTYPES, (
            f"When using enumerated shapes, all inputs must have one of the following dtyeps "
            f"{list(_ENUMERATED_SHAPE_INPUT_DTYPES)}, but {name} has dtype {fake.dtype}")
        dtype = TORCH_DTYPE_TO_MIL_DTYPE[fake.dtype]
        sym = _SymbolicShape.from_shape_and_range_constraints(fake.shape, ep.range_constraints)
        if sym.is_static_shape():
            inputs.append(ct.TensorType(name=name, shape=sym.shape, dtype=dtype))
            continue
        assert sym in emap, (f"The shape of input {name} ({sym}) is not in the "
                             f"_SymbolicShapeToEnumeratedShapeMap={emap}")
        inputs.append(ct.TensorType(name=name, shape=ct.EnumeratedShapes(shapes=emap[sym]),
                                    dtype=dtype))
    return inputs
