"""A Core ML delegate, loaded: the ML program of its ``model.mlpackage`` with every constant
materialised (immediate values and ``weight.bin`` blobs), ready for the interpreter.

``weight.bin`` (coremltools' MIL blob storage, version 2): a 64-byte header (u32 count,
u32 version), then per blob a 64-byte record at the offset the program names (u32 sentinel
0xDEADBEEF, u32 data type, u64 size in bytes, u64 data offset, ...) and its data. Sub-byte
integer types are packed low bits first. Torch-free.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .....errors import FormatError
from ..inmemoryfs import Directory, unflatten
from . import mlmodel_schema as S
from .mil_ops import NP_DTYPES, unpack_bits
from .protobuf import decode

_HINT = "Re-export the model."
_SUB_BYTE = {"int4": (4, True), "uint4": (4, False), "uint2": (2, False), "uint1": (1, False),
             "uint3": (3, False), "uint6": (6, False)}
BLOB_SENTINEL = 0xDEADBEEF


Binding = str | tuple[str, Any]  # a value's name, or ("value", the value itself)


@dataclass
class Operation:
    type: str
    inputs: dict[str, list[Binding]]  # argument name -> its bindings
    outputs: list[tuple[str, str | None]]  # (name, MIL dtype) per output


@dataclass
class MLProgram:
    """What the interpreter runs: ``main``'s inputs, operations and outputs, the constants
    by name, and the delegate's metadata (input/output names in the delegate call's order)."""

    input_names: list[str]
    output_names: list[str]
    function_inputs: dict[str, str | None]  # name -> MIL dtype
    operations: list[Operation]
    outputs: list[str]
    constants: dict[str, Any] = field(default_factory=dict)
    opset: str = ""
    specification_version: int = 0


def _tensor_type(vt: dict | None) -> tuple[str | None, list[int] | None]:
    tt = (vt or {}).get("tensorType")
    if tt is None:
        return None, None
    dtype = S.MIL_DTYPES.get(tt.get("dataType", 0))
    dims = []
    for d in tt.get("dimensions", []):
        if "constant" not in d:
            return dtype, None  # a symbolic dimension
        dims.append(int(d["constant"].get("size", 0)))
    return dtype, dims


def _count(dims: list[int]) -> int:
    n = 1
    for d in dims:
        if d < 0:
            raise FormatError(f"Core ML: a constant has a negative dimension {dims}. {_HINT}")
        n *= d
    return n


class _Weights:
    def __init__(self, package: Directory, model_dir: str) -> None:
        self.package, self.model_dir, self.files = package, model_dir, {}

    def blob(self, ref: dict, dtype: str, dims: list[int]) -> np.ndarray:
        name = ref.get("fileName", "")
        if not name.startswith("@model_path/") or ".." in name.split("/"):
            raise FormatError(f"Core ML: weight file {name!r} is not inside the model. {_HINT}")
        path = f"{self.model_dir}/{name[len('@model_path/'):]}"
        data = self.files.get(path)
        if data is None:
            data = self.files[path] = self.package.file(path)
        offset = int(ref.get("offset", 0))
        if offset < 64 or offset + 64 > len(data):
            raise FormatError(f"Core ML: blob record at {offset} lies outside {path} "
                              f"({len(data)} bytes). {_HINT}")
        sentinel, _, size, start = struct.unpack_from("<IIQQ", data, offset)
        if sentinel != BLOB_SENTINEL or start + size > len(data):
            raise FormatError(f"Core ML: blob at {offset} of {path} is corrupt (sentinel "
                              f"{sentinel:#x}, data [{start}, +{size})). {_HINT}")
        raw = bytes(data[start:start + size])
        count = _count(dims)
        if dtype in _SUB_BYTE:
            return unpack_bits(raw, *_SUB_BYTE[dtype], count).reshape(dims)
        np_dtype = np.dtype(NP_DTYPES[dtype])
        if size < count * np_dtype.itemsize:
            raise FormatError(f"Core ML: blob at {offset} has {size} bytes, a {dtype}{dims} "
                              f"tensor needs {count * np_dtype.itemsize}. {_HINT}")
        return np.frombuffer(raw, np_dtype, count).reshape(dims)


def _immediate(value: dict, dtype: str | None, dims: list[int] | None, where: str) -> Any:
    imm = value["immediateValue"]
    if "tuple" in imm or "list" in imm:
        items = (imm.get("tuple") or imm.get("list") or {}).get("values", [])
        return [_value(v, None, where) for v in items]
    t = imm.get("tensor", {})
    if "strings" in t:
        vals: Any = t["strings"].get("values", [])
        return vals[0] if not dims and len(vals) == 1 else vals
    if "bytes" in t:
        raw = bytes(t["bytes"].get("values", b""))
        if dtype in _SUB_BYTE:
            arr = unpack_bits(raw, *_SUB_BYTE[dtype], _count(dims or []))
        else:
            arr = np.frombuffer(raw, np.dtype(NP_DTYPES[dtype or "uint8"]))
    else:
        key = next((k for k in ("floats", "ints", "bools", "longInts", "doubles") if k in t),
                   None)
        vals = t[key].get("values", []) if key else []
        arr = np.asarray(vals, dtype=NP_DTYPES.get(dtype or "fp32", np.float32))
    shape = dims if dims is not None else []
    if arr.size != _count(shape):
        if arr.size == 1:  # a splat
            return np.full(shape, arr.reshape(()), arr.dtype)
        raise FormatError(f"Core ML: {where} holds {arr.size} values for shape {shape}. {_HINT}")
    return arr.reshape(shape)


def _value(value: dict, weights: _Weights | None, where: str) -> Any:
    dtype, dims = _tensor_type(value.get("type"))
    if "blobFileValue" in value:
        if weights is None or dtype is None or dims is None:
            raise FormatError(f"Core ML: {where} refers to a weight file without a static "
                              f"tensor type. {_HINT}")
        return weights.blob(value["blobFileValue"], dtype, dims)
    if "immediateValue" in value:
        return _immediate(value, dtype, dims, where)
    raise FormatError(f"Core ML: {where} has no value. {_HINT}")


def _package_paths(package: Directory) -> tuple[str, str]:
    """(model.mlmodel path, its directory) inside ``model.mlpackage``, from its manifest."""
    try:
        manifest = json.loads(bytes(package.file("Manifest.json")))
        item = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]
        path = "Data/" + str(item["path"])
    except (ValueError, KeyError, TypeError) as e:
        raise FormatError(f"Core ML: the mlpackage's Manifest.json is unreadable ({e}). "
                          f"{_HINT}") from None
    if ".." in path.split("/"):
        raise FormatError(f"Core ML: the manifest's model path {path!r} leaves the package")
    return path, path.rsplit("/", 1)[0]


def load(blob: bytes | memoryview) -> MLProgram:
    """The ML program of a Core ML delegate blob."""
    root = unflatten(blob)
    try:
        meta = json.loads(bytes(root.file("metadata.json")))
        inputs, outputs = list(meta["inputNames"]), list(meta["outputNames"])
    except (ValueError, KeyError, TypeError) as e:
        raise FormatError(f"Core ML: metadata.json is unreadable ({e}). {_HINT}") from None
    if "model.mlpackage" not in root.items:
        if "model.mlmodelc" in root.items:
            raise FormatError("Core ML: this delegate holds a compiled model (model.mlmodelc, "
                              "model_type=compiled_model), which only Apple's Core ML can run; "
                              "export with model_type=MODEL to run it here.")
        raise FormatError(f"Core ML: the delegate has no model.mlpackage. {_HINT}")
    package = root.items["model.mlpackage"]
    if not isinstance(package, Directory):
        raise FormatError(f"Core ML: model.mlpackage is not a directory. {_HINT}")
    model_path, model_dir = _package_paths(package)
    model = decode(package.file(model_path), S.MODEL, "Model")
    program = model.get("mlProgram")
    if program is None:
        raise FormatError("Core ML: the model is not an ML program (neural networks and other "
                          "model types are not ExecuTorch's). " + _HINT)
    functions = program.get("functions", {})
    fn = functions.get("main") or (next(iter(functions.values())) if functions else None)
    if fn is None:
        raise FormatError(f"Core ML: the ML program has no function. {_HINT}")
    opset = fn.get("opset", "")
    block = fn.get("block_specializations", {}).get(opset)
    if block is None:
        raise FormatError(f"Core ML: the function has no block for its opset {opset!r}. {_HINT}")
    weights = _Weights(package, model_dir)
    prog = MLProgram(inputs, outputs,
                     {i["name"]: _tensor_type(i.get("type"))[0] for i in fn.get("inputs", [])},
                     [], list(block.get("outputs", [])), opset=opset,
                     specification_version=int(model.get("specificationVersion", 0)))
    for op in block.get("operations", []):
        outs = [(o.get("name", ""), _tensor_type(o.get("type"))[0]) for o in op.get("outputs", [])]
        if op.get("type") == "const":
            val = op.get("attributes", {}).get("val")
            if val is None or len(outs) != 1:
                raise FormatError(f"Core ML: const {outs} has no value. {_HINT}")
            prog.constants[outs[0][0]] = _value(val, weights, f"const {outs[0][0]}")
            continue
        if op.get("blocks"):
            raise FormatError(f"Core ML: operation {op.get('type')!r} has nested blocks "
                              "(control flow), which this interpreter does not run.")
        prog.operations.append(Operation(op.get("type", ""), _arguments(op, weights), outs))
    return prog


def _arguments(op: dict, weights: _Weights) -> dict[str, list[Binding]]:
    """An operation's arguments: named values, or values given in place (immediate or in
    ``weight.bin``). Before iOS 18 a ``constexpr_*`` operation's arguments are attributes."""
    where = f"operation {op.get('type')!r}"
    args: dict[str, list[Binding]] = {}
    for k, a in op.get("inputs", {}).items():
        bindings: list[Binding] = []
        for b in a.get("arguments", []):
            if "name" in b:
                bindings.append(b["name"])
            elif "value" in b:
                bindings.append(("value", _value(b["value"], weights, f"{where}'s {k}")))
            else:
                raise FormatError(f"Core ML: {where}'s argument {k!r} names no value. {_HINT}")
        args[k] = bindings
    if str(op.get("type", "")).startswith("constexpr_"):
        for k, v in op.get("attributes", {}).items():
            if k != "name":
                args[k] = [("value", _value(v, weights, f"{where}'s {k}"))]
    return args
