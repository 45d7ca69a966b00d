"""Padding arithmetic of ExecuTorch's serializers (``exir._serialize.padding``)."""

from __future__ import annotations


def padding_required(offset: int, alignment: int) -> int:
    """Bytes to add after ``offset`` to reach the next multiple of ``alignment``."""
    return -offset % alignment


def aligned_size(input_size: int, alignment: int) -> int:
    """``input_size`` rounded up to a multiple of ``alignment``."""
    return input_size + padding_required(input_size, alignment)


def pad_to(data: bytes, length: int) -> bytes:
    """``data`` followed by zeros up to ``length`` bytes."""
    if len(data) > length:
        raise ValueError(f"cannot pad {len(data)} bytes to the shorter length {length}")
    return data + bytes(length - len(data))
