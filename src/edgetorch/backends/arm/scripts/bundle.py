"""``--bundleio``: a BundledProgram (``.bpte``) whose expected outputs are the (quantized)
eager model's, as ExecuTorch's script writes it."""

from __future__ import annotations

import os
from typing import Any

import torch


def save_bpte(program: Any, reference_model: Any, example_inputs: tuple, output: str,
              intermediates: str | None = None) -> None:
    from ....devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from ....devtools.bundled_program.core import BundledProgram
    from ....devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    with torch.no_grad():
        expected = reference_model(*example_inputs)
    if intermediates:
        torch.save(tuple(example_inputs), os.path.join(intermediates, "input_0.pt"))
        torch.save(expected, os.path.join(intermediates, "output_ref_0.pt"))
    suites = [MethodTestSuite(name, [MethodTestCase(inputs=example_inputs,
                                                    expected_outputs=expected)])
              for name in sorted(program.methods)]
    data = serialize_from_bundled_program_to_flatbuffer(BundledProgram(program, suites))
    with open(output, "wb") as f:
        f.write(data)
