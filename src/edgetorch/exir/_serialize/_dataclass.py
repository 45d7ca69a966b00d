"""Schema dataclasses as JSON (ExecuTorch's ``exir._serialize._dataclass`` encoder), for
printing and comparing programs and ETDumps: a dataclass becomes a dict whose union fields
also name their member's type (``val_type``), bytes a list of ints, an enum its value."""

from __future__ import annotations

import json
from typing import Any

from ._program import _jsonable


class _DataclassEncoder(json.JSONEncoder):
    def default(self, o: Any) -> Any:
        converted = _jsonable(o)
        if converted is o:  # not a dataclass, bytes or enum: json's own error
            return super().default(o)
        return converted
