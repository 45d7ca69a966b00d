"""Read a TOSA flatbuffer into plain dataclasses (tosa-tools' generated ``tosa`` reader).

Used by the simulation (block inputs/outputs, their shapes and dtypes) and by tests and
``describe()`` to print or compare graphs. Torch-free; needs the ``edgetorch[arm]`` extra.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from functools import cache

from .tosa_tools import require_tosa_tools


@cache
def _enum_names(enum_cls: type) -> dict[int, str]:
    return {v: k for k, v in vars(enum_cls).items() if not k.startswith("_") and isinstance(v, int)}


@dataclass(frozen=True)
class TosaTensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str
    data: bytes

    def __str__(self) -> str:
        digest = f" data={len(self.data)}B:{hashlib.sha256(self.data).hexdigest()[:12]}" if self.data else ""
        return f"{self.name}: {self.dtype}{list(self.shape)}{digest}"


@dataclass(frozen=True)
class TosaOperatorInfo:
    op: str
    attribute: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.op}({', '.join(self.inputs)}) -> {', '.join(self.outputs)}"


@dataclass
class TosaBlockInfo:
    name: str
    tensors: list[TosaTensorInfo] = field(default_factory=list)
    operators: list[TosaOperatorInfo] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    def tensor(self, name: str) -> TosaTensorInfo:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(f"TOSA block {self.name!r} has no tensor {name!r}")

    def op_counts(self) -> Counter:
        return Counter(o.op for o in self.operators)


@dataclass
class TosaGraphInfo:
    version: tuple[int, int, int, bool]
    regions: dict[str, list[TosaBlockInfo]]

    @property
    def main(self) -> TosaBlockInfo:
        return self.regions["main"][0]

    def describe(self) -> str:
        lines = [f"TOSA {'.'.join(map(str, self.version[:3]))}{' draft' if self.version[3] else ''}"]
        for region, blocks in self.regions.items():
            for block in blocks:
                lines.append(f"region {region} block {block.name}: inputs {block.inputs} "
                             f"outputs {block.outputs}")
                lines += [f"  tensor {t}" for t in block.tensors]
                lines += [f"  {o}" for o in block.operators]
        return "\n".join(lines)


def read_tosa(buf: bytes) -> TosaGraphInfo:
    """Parse ``buf`` (a ``.tosa`` file's bytes); a buffer without the ``TOSA`` identifier raises
    ``ValueError``."""
    require_tosa_tools("tosa")
    if len(buf) < 8 or bytes(buf[4:8]) != b"TOSA":
        raise ValueError(f"not a TOSA flatbuffer (identifier {bytes(buf[4:8])!r}, expected b'TOSA'); "
                         "pass the .tosa file written to the intermediates folder")
    from tosa import Attribute, DType, Op, TosaGraph  # noqa: N811 - generated module names

    graph = TosaGraph.TosaGraph.GetRootAs(buf, 0)
    ver = graph.Version()
    version = (ver._Major(), ver._Minor(), ver._Patch(), bool(ver._Draft()))
    op_names, attr_names = _enum_names(Op.Op), _enum_names(Attribute.Attribute)
    dtype_names = _enum_names(DType.DType)
    regions: dict[str, list[TosaBlockInfo]] = {}
    for r in range(graph.RegionsLength()):
        region = graph.Regions(r)
        blocks = []
        for b in range(region.BlocksLength()):
            blk = region.Blocks(b)
            info = TosaBlockInfo(blk.Name().decode())
            for t in range(blk.TensorsLength()):
                ten = blk.Tensors(t)
                data = ten.DataAsNumpy()
                info.tensors.append(TosaTensorInfo(
                    ten.Name().decode(), tuple(int(d) for d in ten.ShapeAsNumpy())
                    if ten.ShapeLength() else (), dtype_names.get(ten.Type(), str(ten.Type())),
                    data.tobytes() if not isinstance(data, int) else b""))
            for o in range(blk.OperatorsLength()):
                op = blk.Operators(o)
                info.operators.append(TosaOperatorInfo(
                    op_names.get(op.Op(), str(op.Op())),
                    attr_names.get(op.AttributeType(), str(op.AttributeType())),
                    tuple(op.Inputs(i).decode() for i in range(op.InputsLength())),
                    tuple(op.Outputs(i).decode() for i in range(op.OutputsLength()))))
            info.inputs = [blk.Inputs(i).decode() for i in range(blk.InputsLength())]
            info.outputs = [blk.Outputs(i).decode() for i in range(blk.OutputsLength())]
            blocks.append(info)
        regions[region.Name().decode()] = blocks
    return TosaGraphInfo(version, regions)
