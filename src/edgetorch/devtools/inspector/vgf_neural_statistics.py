"""VGF neural-accelerator statistics carried as delegate metadata (JSON, schema
``executorch.vgf.neural_statistics`` version 1, blobs base64-encoded)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from typing import Any

SCHEMA = "executorch.vgf.neural_statistics"
SCHEMA_VERSION = 1
_BLOBS = ("debug_database", "statistics_info", "statistics_memory")


def _as_bytes(metadata: bytes | bytearray | memoryview | str) -> bytes:
    if isinstance(metadata, str):
        return metadata.encode("utf-8")
    if isinstance(metadata, (bytes, bytearray, memoryview)):
        return bytes(metadata)
    raise TypeError(f"delegate metadata is a {type(metadata).__name__}, not bytes or str")


def _decode_blob(blob: dict[str, Any]) -> dict[str, Any]:
    out = dict(blob)
    if not out.get("available", False):
        out.setdefault("raw_data", b"")
        return out
    if out.get("encoding") != "base64":
        raise ValueError(f"VGF neural statistics blob encoding {out.get('encoding')!r} is not "
                         "supported (base64 is)")
    try:
        out["raw_data"] = base64.b64decode(out.get("data", ""), validate=True)
    except (binascii.Error, TypeError) as e:
        raise ValueError(f"malformed base64 data in a VGF neural statistics blob: {e}") from None
    return out


def parse_vgf_neural_statistics_metadata(metadata: bytes | bytearray | str) -> dict[str, Any]:
    payload = json.loads(_as_bytes(metadata).decode("utf-8"))
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA:
        raise ValueError(f"not VGF neural statistics metadata (schema "
                         f"{payload.get('schema') if isinstance(payload, dict) else None!r})")
    if payload.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"VGF neural statistics schema version "
                         f"{payload.get('schema_version')!r} is not supported ({SCHEMA_VERSION} is)")
    payload = dict(payload)
    segments = []
    for segment in payload.get("segments", []):
        segment = dict(segment)
        for key in _BLOBS:
            if isinstance(segment.get(key), dict):
                segment[key] = _decode_blob(segment[key])
        segments.append(segment)
    payload["segments"] = segments
    return payload


def parse_vgf_neural_statistics_delegate_metadata(
        delegate_metadata_list: Sequence[Any]) -> list[dict[str, Any]]:
    """The VGF records among an event's delegate metadata; other backends' metadata is
    skipped, a malformed VGF record raises."""
    parsed = []
    for metadata in delegate_metadata_list:
        if metadata is None or metadata in (b"", ""):
            continue
        try:
            raw = _as_bytes(metadata)
        except TypeError:
            continue
        try:
            payload = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            if SCHEMA.encode() in raw:
                raise ValueError("malformed VGF neural statistics delegate metadata") from e
            continue
        if isinstance(payload, dict) and payload.get("schema") == SCHEMA:
            parsed.append(parse_vgf_neural_statistics_metadata(raw))
    return parsed
