"""The flattened directory a Core ML delegate blob is (ExecuTorch's ``inmemoryfs``).

Layout: the files' bytes, each at the end of the previous file (rounded up to ``alignment``:
1, or the page size above 1 GB), then, at the next aligned position, the index: compact JSON
with sorted keys, written byte-reversed so a reader finds it from the end::

    {"nodes":[{"children":{},"dataRegion":{"offset":0,"size":97},"kind":0,"name":"a.json"},
              ...,
              {"children":{"a.json":0,...},"dataRegion":{"offset":0,"size":0},"kind":1,
               "name":"lowered_module"}]}

Nodes are listed children first (the root last); ``kind`` 0 is a file, 1 a directory,
``children`` maps a name to a node index. Torch-free; the reader checks every index and
region and bounds its work by the blob's size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ....errors import FormatError

FILE, DIRECTORY = 0, 1
_HINT = "The Core ML delegate blob is truncated or corrupted; re-export the model."


@dataclass
class Directory:
    """A directory: names to files (bytes or memoryviews) and subdirectories."""

    name: str
    items: dict[str, bytes | memoryview | Directory] = field(default_factory=dict)

    def file(self, path: str) -> memoryview:
        """The file at ``a/b/c`` (a ``FormatError`` naming what is missing otherwise)."""
        node: bytes | memoryview | Directory = self
        for part in path.split("/"):
            if not isinstance(node, Directory) or part not in node.items:
                raise FormatError(f"the Core ML delegate has no file {path!r} (no {part!r}). "
                                  f"{_HINT}")
            node = node.items[part]
        if isinstance(node, Directory):
            raise FormatError(f"{path!r} in the Core ML delegate is a directory, not a file")
        return memoryview(node)

    def files(self) -> dict[str, memoryview]:
        """Every file, by path."""
        out, todo = {}, [("", self)]
        while todo:
            prefix, d = todo.pop()
            for name, node in d.items.items():
                if isinstance(node, Directory):
                    todo.append((f"{prefix}{name}/", node))
                else:
                    out[f"{prefix}{name}"] = memoryview(node)
        return dict(sorted(out.items()))


def _align(n: int, alignment: int) -> int:
    return (n + alignment - 1) // alignment * alignment


def flatten(root: Directory, alignment: int = 1) -> bytes:
    """The blob of ``root`` (files in name order: any order reads back the same)."""
    nodes: list[dict] = []
    chunks: list[tuple[int, bytes | memoryview]] = []
    end = 0

    def visit(node: Directory | bytes | memoryview, name: str) -> int:
        nonlocal end
        if isinstance(node, Directory):
            children = {k: visit(v, k) for k, v in sorted(node.items.items())}
            nodes.append({"children": children, "dataRegion": {"offset": 0, "size": 0},
                          "kind": DIRECTORY, "name": name})
        else:
            offset = _align(end, alignment)
            nodes.append({"children": {}, "dataRegion": {"offset": offset, "size": len(node)},
                          "kind": FILE, "name": name})
            chunks.append((offset, node))
            end = offset + len(node)
        return len(nodes) - 1

    visit(root, root.name)
    out = bytearray(_align(end, alignment))
    for offset, data in chunks:
        out[offset:offset + len(data)] = data
    index = json.dumps({"nodes": nodes}, separators=(",", ":"), sort_keys=True,
                       ensure_ascii=False).encode()
    return bytes(out) + index[::-1]


def _index_text(blob: memoryview) -> bytes:
    """The JSON index at the end of ``blob`` (written reversed, maybe zero padded)."""
    return _index(blob)[0]


def _index(blob: memoryview) -> tuple[bytes, int]:
    """(the JSON index, where its bytes start in ``blob``)."""
    end = len(blob)
    while end > 0 and blob[end - 1] == 0:
        end -= 1
    if end == 0 or blob[end - 1] != ord("{"):
        raise FormatError(f"the Core ML delegate blob does not end with its JSON index. {_HINT}")
    depth, in_string, i = 0, False, end - 1
    while i >= 0:  # reversed text: read from the end towards the start
        c = blob[i]
        if c == ord('"') and not (in_string and i + 1 < end and blob[i + 1] == ord("\\")):
            in_string = not in_string
        elif not in_string and c == ord("{"):
            depth += 1
        elif not in_string and c == ord("}"):
            depth -= 1
            if depth == 0:
                return bytes(blob[i:end])[::-1], i
        i -= 1
    raise FormatError(f"the Core ML delegate's JSON index is not closed. {_HINT}")


def unflatten(blob: bytes | bytearray | memoryview) -> Directory:
    """The directory a blob holds; files are zero-copy views of ``blob``."""
    view = memoryview(blob).cast("B")
    text, data_end = _index(view)
    try:
        index = json.loads(text)
        nodes = index["nodes"]
    except (ValueError, KeyError, TypeError) as e:
        raise FormatError(f"the Core ML delegate's JSON index is malformed ({e}). {_HINT}") \
            from None
    if not isinstance(nodes, list) or not nodes:
        raise FormatError(f"the Core ML delegate's index lists no nodes. {_HINT}")
    built: list[Directory | memoryview | None] = []
    for i, node in enumerate(nodes):
        try:
            name, kind = str(node["name"]), int(node["kind"])
            if kind == FILE:
                offset, size = int(node["dataRegion"]["offset"]), int(node["dataRegion"]["size"])
                if not (0 <= offset and 0 <= size and offset + size <= data_end):
                    raise FormatError(f"file {name!r} lies at [{offset}, +{size}), outside the "
                                      f"blob's {data_end} bytes of file data. {_HINT}")
                built.append(view[offset:offset + size])
            elif kind == DIRECTORY:
                d = Directory(name)
                for child, j in dict(node["children"]).items():
                    j = int(j)
                    if not 0 <= j < i or built[j] is None:
                        raise FormatError(f"directory {name!r} refers to node {j}, which is "
                                          f"not an earlier unused node. {_HINT}")
                    d.items[str(child)] = built[j]
                    built[j] = None if isinstance(built[j], Directory) else built[j]
                built.append(d)
            else:
                raise FormatError(f"node {name!r} has kind {kind}, neither file nor "
                                  f"directory. {_HINT}")
        except (KeyError, TypeError, ValueError) as e:
            raise FormatError(f"node {i} of the Core ML delegate's index is malformed ({e}). "
                              f"{_HINT}") from None
    root = built[-1]
    if not isinstance(root, Directory):
        raise FormatError(f"the Core ML delegate's last node is not a directory. {_HINT}")
    return root
