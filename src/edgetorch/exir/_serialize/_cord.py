"""``Cord``: bytes assembled from pieces without copying them (ExecuTorch's
``exir._serialize._cord``), and ``FileBackedData``, a blob that stays in its file until it
is written out (large weights a backend produced on disk).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import weakref
from typing import BinaryIO

_CHUNK = 8 * 1024 * 1024  # bytes per read when hashing or copying a file


class FileBackedData:
    """The bytes of a file, read only when needed. With ``cleanup`` the file is removed when
    the object is closed or collected."""

    def __init__(self, path: str, cleanup: bool = False, sha256: bytes | None = None) -> None:
        self._path = path
        self._size = os.path.getsize(path)
        self._sha256 = sha256
        self._finalizer = weakref.finalize(self, _remove, path) if cleanup else None

    @classmethod
    def move_from(cls, path: str, sha256: bytes | None = None) -> FileBackedData:
        """Take ownership of ``path``: it is renamed to a private file in the same folder
        (no copy) that is removed when the object is closed."""
        fd, owned = tempfile.mkstemp(prefix=".edgetorch_", suffix=".data",
                                     dir=os.path.dirname(path) or ".")
        os.close(fd)
        try:
            os.replace(path, owned)
        except BaseException:
            os.remove(owned)
            raise
        return cls(owned, cleanup=True, sha256=sha256)

    def __len__(self) -> int:
        return self._size

    def prefix(self, size: int) -> bytes:
        with open(self._path, "rb") as f:
            return f.read(size)

    def sha256(self) -> bytes:
        if self._sha256 is None:
            digest = hashlib.sha256()
            with open(self._path, "rb") as f:
                while chunk := f.read(_CHUNK):
                    digest.update(chunk)
            self._sha256 = digest.digest()
        return self._sha256

    def to_bytes(self) -> bytes:
        with open(self._path, "rb") as f:
            return f.read()

    def write_to_file(self, outfile: BinaryIO) -> None:
        with open(self._path, "rb") as f:
            shutil.copyfileobj(f, outfile, length=_CHUNK)

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> FileBackedData:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


CordBuffer = bytes | FileBackedData


class Cord:
    """A sequence of byte pieces that reads as one ``bytes`` (``bytes(cord)``) or streams to a
    file (``write_to_file``); appending a Cord shares its pieces."""

    def __init__(self, data: CordBuffer | Cord | None = None) -> None:
        self._buffers: list[CordBuffer] = []
        self._byte_size = 0
        if data is not None:
            self.append(data)

    def __len__(self) -> int:
        return self._byte_size

    def __bytes__(self) -> bytes:
        return b"".join(b if isinstance(b, bytes) else b.to_bytes() for b in self._buffers)

    def append(self, data: CordBuffer | Cord) -> None:
        if isinstance(data, Cord):
            self._buffers.extend(data._buffers)
        elif isinstance(data, (bytes, FileBackedData)):
            self._buffers.append(data)
        else:
            raise TypeError(f"a Cord holds bytes, FileBackedData or Cords, not "
                            f"{type(data).__name__}; convert with bytes(...) first")
        self._byte_size += len(data)

    def write_to_file(self, outfile: BinaryIO) -> None:
        for item in self._buffers:
            if isinstance(item, bytes):
                outfile.write(item)
            else:
                item.write_to_file(outfile)
