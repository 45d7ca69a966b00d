"""The block-YAML subset of ExecuTorch's ``selected_operators.yaml``, without PyYAML.

The runtime may read a selection file on a machine with numpy alone, so this module writes
what ``yaml.safe_dump(..., default_flow_style=False)`` writes for nested mappings, lists of
scalars and booleans (keys sorted, list items at their key's indentation), and reads that
subset back: block mappings and sequences, ``[]``/``{}`` and short flow lists, plain or
quoted scalars, YAML 1.1 booleans (``Yes``/``No`` appear in ExecuTorch's format comment), and
comments. Anything else is a ``ValueError`` naming the line.
"""

from __future__ import annotations

import re
from typing import Any

_PLAIN = re.compile(r"^[A-Za-z0-9_./][A-Za-z0-9_./:;,|@+\- ]*(?<! )$")
_BOOLS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}
_NULLS = {"", "~", "null"}


def _scalar_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return str(v)
    s = str(v)
    if _PLAIN.match(s) and s.lower() not in _BOOLS and s.lower() not in _NULLS and not s.endswith(":") \
            and ": " not in s and " #" not in s and not re.fullmatch(r"[-+]?[0-9][0-9_.eE+-]*", s):
        return s
    return "'" + s.replace("'", "''") + "'"


def dump(obj: dict[str, Any]) -> str:
    """``obj`` (str keys; values: dict, list of scalars, scalar) as block YAML."""
    lines: list[str] = []

    def emit(value: Any, indent: int) -> None:
        pad = " " * indent
        for key in sorted(value):
            v = value[key]
            k = _scalar_text(key)
            if isinstance(v, dict):
                if v:
                    lines.append(f"{pad}{k}:")
                    emit(v, indent + 2)
                else:
                    lines.append(f"{pad}{k}: {{}}")
            elif isinstance(v, (list, tuple)):
                if v:
                    lines.append(f"{pad}{k}:")
                    lines.extend(f"{pad}- {_scalar_text(x)}" for x in v)
                else:
                    lines.append(f"{pad}{k}: []")
            else:
                lines.append(f"{pad}{k}: {_scalar_text(v)}")

    emit(obj, 0)
    return "\n".join(lines) + "\n"


def _parse_scalar(text: str, where: str) -> Any:
    t = text.strip()
    if len(t) >= 2 and t[0] == t[-1] == "'":
        return t[1:-1].replace("''", "'")
    if len(t) >= 2 and t[0] == t[-1] == '"':
        return bytes(t[1:-1], "utf-8").decode("unicode_escape")
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].strip()
        return [_parse_scalar(x, where) for x in inner.split(",")] if inner else []
    if t == "{}":
        return {}
    if t.startswith(("{", "[", "&", "*", "!", "|", ">")):
        raise ValueError(f"{where}: unsupported YAML value {t!r}")
    low = t.lower()
    if low in _BOOLS:
        return _BOOLS[low]
    if low in _NULLS:
        return None
    if re.fullmatch(r"[-+]?[0-9]+", t):
        return int(t)
    return t


def _strip_comment(line: str) -> str:
    out, quote = [], None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            break
        out.append(ch)
    return "".join(out).rstrip()


def _split_key(text: str, where: str) -> tuple[str, str]:
    if text[:1] in "'\"":
        end = text.find(text[0], 1)
        if end < 0 or text[end + 1:end + 2] != ":":
            raise ValueError(f"{where}: expected 'key: value', got {text!r}")
        return text[1:end], text[end + 2:]
    m = re.match(r"^(.*?):(\s|$)", text)
    if not m:
        raise ValueError(f"{where}: expected 'key: value', got {text!r}")
    return m.group(1).strip(), text[m.end():]


def load(text: str, source: str = "<yaml>") -> Any:
    """Parse the subset :func:`dump` writes (and hand-written files of the same shape)."""
    rows = []
    for n, raw in enumerate(text.splitlines(), 1):
        if raw.strip() in ("---", "..."):
            continue
        line = _strip_comment(raw)
        if line.strip():
            if "\t" in line[: len(line) - len(line.lstrip())]:
                raise ValueError(f"{source}:{n}: tabs are not allowed in YAML indentation")
            rows.append((n, len(line) - len(line.lstrip(" ")), line.strip()))
    pos = 0

    def block(indent: int) -> Any:
        nonlocal pos
        if pos >= len(rows):
            return None
        n, ind, body = rows[pos]
        if ind < indent:
            return None
        if body.startswith("- ") or body == "-":
            items = []
            while pos < len(rows) and rows[pos][1] == ind and rows[pos][2].startswith("-"):
                n, _, body = rows[pos]
                pos += 1
                items.append(_parse_scalar(body[1:], f"{source}:{n}"))
            return items
        mapping: dict[str, Any] = {}
        while pos < len(rows) and rows[pos][1] == ind and not rows[pos][2].startswith("- "):
            n, _, body = rows[pos]
            where = f"{source}:{n}"
            key, rest = _split_key(body, where)
            pos += 1
            if rest.strip():
                mapping[key] = _parse_scalar(rest, where)
            elif pos < len(rows) and (rows[pos][1] > ind or
                                      (rows[pos][1] == ind and rows[pos][2].startswith("-"))):
                mapping[key] = block(rows[pos][1])
            else:
                mapping[key] = None
        if pos < len(rows) and rows[pos][1] > ind:
            n = rows[pos][0]
            raise ValueError(f"{source}:{n}: unexpected indentation")
        return mapping

    result = block(0)
    if pos < len(rows):
        raise ValueError(f"{source}:{rows[pos][0]}: unexpected content {rows[pos][2]!r}")
    return result
