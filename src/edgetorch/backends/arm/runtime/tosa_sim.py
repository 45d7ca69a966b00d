"""Run a TOSA flatbuffer on a PC with tosa-tools' reference model (``tosa_reference_model``).

``TosaGraphRunner(tosa_bytes)`` checks the graph once (block ``main``'s inputs and outputs,
their shapes and dtypes); ``runner.run([arrays])`` checks the inputs against them and returns
the outputs as NumPy arrays. Torch-free; tosa-tools comes with the ``edgetorch[arm]`` extra.
"""

from __future__ import annotations

import numpy as np

from ....errors import InvalidArgumentError, InvalidProgramError, KernelError
from .tosa_graph import TosaGraphInfo, read_tosa
from .tosa_tools import require_tosa_tools

NUMPY_DTYPES = {"BOOL": np.bool_, "INT8": np.int8, "INT16": np.int16, "INT32": np.int32,
                "FP16": np.float16, "FP32": np.float32, "INT64": np.int64}


class TosaGraphRunner:
    """A parsed TOSA graph ready to run with the reference model."""

    def __init__(self, tosa_bytes: bytes, where: str = "TOSA graph"):
        self.trm = require_tosa_tools("tosa_reference_model")
        self.tosa_bytes = bytes(tosa_bytes)
        self.where = where
        try:
            self.graph: TosaGraphInfo = read_tosa(self.tosa_bytes)
        except ValueError as exc:
            raise InvalidProgramError(f"{where}: {exc}") from None
        main = self.graph.main
        self.input_specs = [(n, main.tensor(n)) for n in main.inputs]
        self.output_specs = [(n, main.tensor(n)) for n in main.outputs]

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        if len(inputs) != len(self.input_specs):
            raise InvalidArgumentError(
                f"{self.where}: got {len(inputs)} inputs, the graph takes "
                f"{len(self.input_specs)} ({', '.join(n for n, _ in self.input_specs)})")
        arrays = []
        for value, (name, spec) in zip(inputs, self.input_specs):
            arr = np.ascontiguousarray(value)
            want = NUMPY_DTYPES.get(spec.dtype)
            if want is None or arr.dtype != want or list(arr.shape) != list(spec.shape):
                raise InvalidArgumentError(
                    f"{self.where}: input {name!r} is {arr.dtype}{list(arr.shape)}, the graph "
                    f"takes {spec.dtype}{list(spec.shape)}; pass the quantized (int8) tensor "
                    "the delegate expects")
            arrays.append(arr)
        outs, status = self.trm.run(self.tosa_bytes, arrays, verbosity="NONE")
        if status != self.trm.GraphStatus.TOSA_VALID:
            raise KernelError(f"{self.where}: tosa-tools' reference model returned {status.name} "
                              "(the graph or its inputs break a TOSA rule); rerun with "
                              "verbosity to see which operator")
        return [np.asarray(o) for o in outs]


def run_tosa(tosa_bytes: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``tosa_bytes`` once on ``inputs`` (int8 arrays in the graph's input order)."""
    return TosaGraphRunner(tosa_bytes).run(inputs)
