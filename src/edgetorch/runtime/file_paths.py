"""Paths stored inside files are data, not places (docs/security.md).

A ``.pte`` may carry a path (an Ethos-U delegate's ``debug_artifact_path``, where its TOSA
graphs were written at export). The runtime follows such a path only when, resolved (symbolic
links and ``..`` included), it lies inside a folder the user allowed: the ``.pte``'s own folder
or one named in the load options. Anything else is an :class:`UnsafeFileError` naming the path
and how to allow a folder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from ..errors import UnsafeFileError

MAX_PATH_CHARS = 4096


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False


def allowed_roots(folders: Iterable[str | os.PathLike | None]) -> list[str]:
    """The real paths of the given folders (None and empty entries skipped)."""
    return [os.path.realpath(os.fspath(f)) for f in folders if f]


def resolve_stored_path(stored: str, roots: list[str], what: str, how_to_allow: str) -> str:
    """The real path ``stored`` (a path read from a file) names, relative paths taken from the
    working directory or from any allowed root, if it lies inside one of ``roots``."""
    if not stored or len(stored) > MAX_PATH_CHARS or "\0" in stored:
        raise UnsafeFileError(f"{what}: the stored path {stored[:200]!r} is not a usable path")
    if os.path.isabs(stored):
        candidates = [stored]
    else:
        candidates = [os.path.join(os.getcwd(), stored)] + [os.path.join(r, stored) for r in roots]
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if any(_inside(real, root) for root in roots):
            return real
    allowed = ", ".join(roots) if roots else "none (the program was loaded from bytes)"
    raise UnsafeFileError(
        f"{what}: the file asks to read {stored!r}, which resolves to "
        f"{os.path.realpath(candidates[0])!r}, outside the folders this program may read "
        f"(allowed: {allowed}); paths stored in a file are followed only inside the .pte's own "
        f"folder or a folder you name: {how_to_allow}")
