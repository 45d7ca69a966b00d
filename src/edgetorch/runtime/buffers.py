"""A method's mutable buffers: planned tensors that keep their value across ``execute`` calls
(KV caches, counters), readable, writable and resettable by name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from .interop import to_numpy
from .values import strided_view


@dataclass
class MutableBuffer:
    name: str
    view: np.ndarray  # its planned bytes, seen as the tensor
    dim_order: tuple[int, ...]
    initial: memoryview | None  # initial state from the program, None for zeros

    def reset(self) -> None:
        if self.initial is None:
            self.view[...] = 0
            return
        raw = np.frombuffer(self.initial, dtype=np.uint8, count=self.view.nbytes)
        np.copyto(self.view, strided_view(raw, 0, self.view.dtype, self.view.shape,
                                          self.dim_order))


class BufferTable:
    """The mutable buffers of one method, by fully qualified name."""

    def __init__(self, method: str) -> None:
        self._method = method
        self._buffers: dict[str, MutableBuffer] = {}

    def add(self, buffer: MutableBuffer) -> None:
        self._buffers[buffer.name] = buffer
        buffer.reset()

    @property
    def names(self) -> list[str]:
        return sorted(self._buffers)

    def _get(self, name: str) -> MutableBuffer:
        try:
            return self._buffers[name]
        except KeyError:
            raise InvalidArgumentError(
                f"method {self._method!r} has no mutable buffer {name!r}; its buffers are "
                f"{self.names}") from None

    def get(self, name: str) -> np.ndarray:
        return np.array(self._get(name).view, copy=True)

    def set(self, name: str, value: Any) -> None:
        target = self._get(name).view
        value = np.asarray(to_numpy(value))
        if value.shape != target.shape:
            raise InvalidArgumentError(
                f"buffer {name!r} has sizes {list(target.shape)}, got {list(value.shape)}")
        np.copyto(target, value, casting="unsafe")

    def reset(self) -> None:
        for buffer in self._buffers.values():
            buffer.reset()
