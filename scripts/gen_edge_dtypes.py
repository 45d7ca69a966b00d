"""Generate ``src/edgetorch/exir/dialects/edge/dtypes.json`` from ExecuTorch's ``edge.yaml``.

``edge.yaml`` (ExecuTorch 1.5.1, ``exir/dialects/edge/edge.yaml``) states, per Edge operator,
which dtype combinations of its tensor arguments and results the portable kernels accept: a
set of type aliases (``T0: [Float, Double]``) and a list of alternative rules mapping each
tensor argument (and ``__ret_N`` result) to an alias. We keep exactly those facts, as JSON:

    {"aten::add.Tensor": {"aliases": {"T0": ["Bool", ...]}, "rules": [{"self": "T0", ...}]}}

Usage: python scripts/gen_edge_dtypes.py [path/to/edge.yaml]
(default: the reference environment's installed executorch package). The file's format is
the small YAML subset ExecuTorch's generator writes, read here without a YAML dependency.
"""

from __future__ import annotations

import json
import pathlib
import sys

REF = ("/work/main/.venv-ref/lib/python3.11/site-packages/executorch/exir/dialects/edge/"
       "edge.yaml")
OUT = (pathlib.Path(__file__).resolve().parents[1]
       / "src/edgetorch/exir/dialects/edge/dtypes.json")


def parse(text: str) -> dict[str, dict]:
    """``{op: {"aliases": {...}, "rules": [...]}}`` from edge.yaml's text."""
    table: dict[str, dict] = {}
    entry: dict = {}
    section = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if line.startswith("- func:"):
            entry = {"aliases": {}, "rules": []}
            section = None
            continue
        key, _, value = line.strip().removeprefix("- ").partition(":")
        value = value.strip()
        if line.startswith("  ") and not line.startswith("   ") and not line.startswith("  -"):
            section = key
            if key == "inherits":
                table[value] = entry
        elif section == "type_alias":
            entry["aliases"][key] = [v.strip() for v in value.strip("[]").split(",")]
        elif section == "type_constraint":
            if line.strip().startswith("- "):
                entry["rules"].append({})
            entry["rules"][-1][key] = value
    return table


def main(path: str = REF) -> None:
    table = parse(pathlib.Path(path).read_text())
    text = json.dumps(dict(sorted(table.items())), separators=(",", ":"))
    OUT.write_text(text.replace('},"', '},\n"') + "\n")
    print(f"wrote {len(table)} operators to {OUT}")


if __name__ == "__main__":
    main(*sys.argv[1:])
