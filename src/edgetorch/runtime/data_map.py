"""External tensor data (``.ptd`` files): weights a program finds by fully qualified name."""

from __future__ import annotations

import mmap
import os

from ..errors import ExternalDataError
from ..schema import program as S
from ..schema.ptd import PtdFile


class DataMap:
    """The named tensors of one or more ``.ptd`` files (memory-mapped, zero-copy)."""

    def __init__(self, files: list[tuple[str, PtdFile]]) -> None:
        self._files = files

    def keys(self) -> list[str]:
        return sorted({k for _, f in self._files for k in f.keys()})

    def tensor_bytes(self, key: str | None, tensor: S.Tensor | None = None) -> memoryview:
        for source, ptd in self._files:
            if key is not None and key in ptd:
                data, layout = ptd.get(key)
                if tensor is not None and layout is not None:
                    if (int(layout.scalar_type) != int(tensor.scalar_type)
                            or list(layout.sizes) != [int(s) for s in tensor.sizes]):
                        raise ExternalDataError(
                            f"{source}: tensor {key!r} is {layout.scalar_type.name.lower()}"
                            f"{list(layout.sizes)}, the program expects "
                            f"{S.ScalarType(tensor.scalar_type).name.lower()}{list(tensor.sizes)}; "
                            "the .ptd file was written for another program")
                return data
        names = ", ".join(src for src, _ in self._files)
        raise ExternalDataError(
            f"tensor {key!r} is not in the external data file(s) {names}; pass the .ptd written "
            "with this program (ExecutorchProgramManager.write_tensor_data_to_file)")


def load_data_map(paths: str | os.PathLike | bytes | list[str | os.PathLike | bytes]) -> DataMap:
    """The ``.ptd`` file(s) at ``paths``; a bytes item is a ``.ptd`` already in memory."""
    if isinstance(paths, (str, os.PathLike, bytes, bytearray, memoryview)):
        paths = [paths]
    files = []
    for path in paths:
        if isinstance(path, (bytes, bytearray, memoryview)):
            files.append(("<bytes>", PtdFile.parse(memoryview(path))))
            continue
        path = os.fspath(path)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except OSError as e:
            raise ExternalDataError(f"cannot read external data file {path!r}: {e}") from e
        files.append((path, PtdFile.parse(data)))
    return DataMap(files)
