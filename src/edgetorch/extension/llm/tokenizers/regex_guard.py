"""Refuse the regular expressions in a tokenizer.json that can take exponential time.

A tokenizer.json carries its own regexes (a ``Split`` pre-tokenizer, a ``Replace`` normalizer or
decoder), and the ``tokenizers`` library runs them with Oniguruma on every prompt. Oniguruma's
per-match retry limit (10,000,000 steps) stops one runaway attempt with a panic, but a pattern
whose attempts each stay just under it makes every encode take seconds per position: a hostile
file can hang the runner on ordinary text. The exponential shapes are quantifiers nested inside
quantifiers (``(a+)+``, ``(\\w+\\s?)*``, ``((ab)*c)+``): the real tokenizers' patterns (GPT-2,
Llama 3, Qwen, SmolLM...) never nest them, so such a pattern is refused when the file is loaded.

What this does not catch: an ambiguous alternation under one quantifier (``(a|aa)+``) and
polynomial shapes (``\\s*\\s*$``); Oniguruma's retry limit bounds each of their attempts and the
panic it raises becomes a :class:`~edgetorch.errors.TokenizerError` at encode.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ....errors import TokenizerError

_MAX_DEPTH = 64  # JSON nesting walked for patterns; tokenizer.json nests 4-5 deep
_MAX_PATTERN = 4096  # characters; the real pre-tokenizer patterns are under 300
# an escape whose argument is braced (\p{L}, \x{263a}, \k<name> uses <>, \N{...})
_BRACED_ESCAPES = frozenset("pPxNgko")


def patterns(node: Any, depth: int = 0) -> Iterator[str]:
    """Every ``{"Regex": "..."}`` value in a tokenizer.json document."""
    if depth > _MAX_DEPTH:
        raise TokenizerError(f"tokenizer.json nests deeper than {_MAX_DEPTH} levels")
    if isinstance(node, dict):
        value = node.get("Regex")
        if isinstance(value, str):
            yield value
        for child in node.values():
            yield from patterns(child, depth + 1)
    elif isinstance(node, list):
        for child in node:
            yield from patterns(child, depth + 1)


def nested_quantifier(pattern: str) -> int | None:
    """The offset of the first unbounded quantifier (``*``, ``+``, ``{n,}``) applied to a group
    that itself holds one, or None. Character classes and escapes are skipped."""
    if len(pattern) > _MAX_PATTERN:
        return 0
    frames = [False]  # per open group: does it contain an unbounded quantifier?
    last_group_unbounded = False  # the atom before a quantifier is a group holding one
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        atom_group = False
        if c == "\\":
            i += 2
            if i - 1 < n and pattern[i - 1] in _BRACED_ESCAPES and i < n and pattern[i] == "{":
                i = _skip_past(pattern, i, "}")
        elif c == "[":
            i = _skip_class(pattern, i)
        elif c == "(":
            frames.append(False)
            i += 1
        elif c == ")":
            inner = frames.pop() if len(frames) > 1 else False
            frames[-1] = frames[-1] or inner
            atom_group, i = inner, i + 1
        elif c in "*+" or (c == "{" and _unbounded_brace(pattern, i)):
            if last_group_unbounded:
                return i
            frames[-1] = True
            i = _skip_past(pattern, i, "}") if c == "{" else i + 1
            if i < n and pattern[i] in "?+":  # lazy or possessive suffix
                i += 1
        else:
            i += 1
        last_group_unbounded = atom_group
    return None


def check_tokenizer_json(document: Any, path: str) -> None:
    """Raise :class:`TokenizerError` naming the first exponential pattern in ``document``."""
    for pattern in patterns(document):
        at = nested_quantifier(pattern)
        if at is not None:
            shown = pattern if len(pattern) <= 120 else pattern[:117] + "..."
            raise TokenizerError(
                f"{path}: the regular expression {shown!r} nests a repetition inside a "
                f"repetition (at character {at}), which can take exponential time on ordinary "
                "text; no real tokenizer needs this. Rewrite the pattern without nested "
                "quantifiers.")


def _skip_past(pattern: str, i: int, close: str) -> int:
    end = pattern.find(close, i)
    return len(pattern) if end < 0 else end + 1


def _skip_class(pattern: str, i: int) -> int:
    """The index after the character class opening at ``i`` (Oniguruma nests classes)."""
    depth = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            depth += 1
            if i + 1 < n and pattern[i + 1] == "^":
                i += 1
            if i + 1 < n and pattern[i + 1] == "]":  # a literal ] first in the class
                i += 1
        elif c == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def _unbounded_brace(pattern: str, i: int) -> bool:
    """``{n,}`` (unbounded) rather than ``{n}``/``{n,m}`` or a literal brace."""
    end = pattern.find("}", i)
    body = pattern[i + 1:end] if end > 0 else ""
    lo, comma, hi = body.partition(",")
    return bool(comma) and lo.strip().isdigit() and hi.strip() == ""
