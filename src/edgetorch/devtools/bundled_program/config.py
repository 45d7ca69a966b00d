"""MethodTestCase and MethodTestSuite (``executorch.devtools.bundled_program.config``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

import torch
from torch.utils._pytree import tree_flatten

from ...errors import BundledProgramError

ConfigValue = Union[torch.Tensor, int, bool, float]  # noqa: UP007  (the schema's Value kinds)
# ExecuTorch's names for a test case's inputs and expected outputs.
MethodInputType = Sequence[ConfigValue]
MethodOutputType = Sequence[torch.Tensor]
# The containers a case's inputs and outputs may nest (flattened with torch's pytree).
DataContainer = Union[list, tuple, dict]  # noqa: UP007  (ExecuTorch's alias; get_args works)


def _flatten(data: Any, what: str) -> list[ConfigValue]:
    flat, _ = tree_flatten(data)
    for i, x in enumerate(flat):
        if not isinstance(x, (torch.Tensor, int, bool, float)):
            raise BundledProgramError(
                f"{what} {i} is {type(x).__name__}; a bundled value must be a torch.Tensor, int, "
                "bool or float (lists, tuples and dicts of them are flattened)")
    return flat


class MethodTestCase:
    """One execution's inputs and (optionally) its expected outputs, pytree-flattened.

    Without ``expected_outputs`` the case only runs (profiling); it cannot be verified."""

    def __init__(self, inputs: Any, expected_outputs: Any = None) -> None:
        self.inputs: list[ConfigValue] = _flatten(inputs, "input")
        self.expected_outputs: list[ConfigValue] = (
            [] if expected_outputs is None else _flatten(expected_outputs, "expected output"))

    def __repr__(self) -> str:
        return (f"MethodTestCase({len(self.inputs)} inputs, "
                f"{len(self.expected_outputs)} expected outputs)")


@dataclass
class MethodTestSuite:
    """All test cases of one method."""

    method_name: str
    test_cases: Sequence[MethodTestCase]
