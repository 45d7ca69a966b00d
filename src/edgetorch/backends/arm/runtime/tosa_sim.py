"""Run a TOSA flatbuffer on a PC with tosa-tools' reference model (``tosa_reference_model``).

``TosaGraphRunner(tosa_bytes)`` checks the graph once (block ``main``'s inputs and outputs,
their shapes and dtypes); ``runner.run([arrays])`` checks the inputs against them and returns
the outputs as NumPy arrays. Torch-free; tosa-tools comes with the ``edgetorch[arm]`` extra.

Given an event tracer that asks for delegates' intermediate outputs
(``delegate_intermediate_outputs``), ``run`` also logs every operator's output (the block's
outputs among them) in operator order, raw (int8, int32 accumulators, in the graph's layout),
named by its TOSA tensor: the reference model
returns only block outputs, so it runs a copy of the graph whose block also outputs every
non-constant operator's result (the same operators on the same inputs: the same values).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from ....errors import InvalidArgumentError, InvalidProgramError, KernelError
from ....runtime.event_tracer import event_tracer_log_output_delegate
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
        self._probe: tuple[bytes, list[str]] | None = None
        # every non-constant operator's output, in operator order
        self._computed = list(dict.fromkeys(
            out for op in main.operators if op.op not in ("CONST", "CONST_SHAPE")
            for out in op.outputs))

    def run(self, inputs: list[np.ndarray], event_tracer: Any = None) -> list[np.ndarray]:
        """The graph's outputs on ``inputs``; with a tracer that wants delegate values, every
        operator's output is logged to it too (see the module docstring)."""
        arrays = self._checked(inputs)
        if not _wants_values(event_tracer):
            return self._run(self.tosa_bytes, arrays)
        probe, names = self.probe_graph()
        outs = self._run(probe, arrays)
        n_out = len(self.output_specs)
        if len(outs) != n_out + len(names):
            raise KernelError(f"{self.where}: the reference model returned {len(outs)} values "
                              f"for {n_out} outputs and {len(names)} operator results")
        by_name = dict(zip([n for n, _ in self.output_specs] + names, outs))
        for name in self._computed:  # in operator order, the block's outputs among them
            event_tracer_log_output_delegate(event_tracer, None, name, by_name[name])
        return outs[:n_out]

    def probe_graph(self) -> tuple[bytes, list[str]]:
        """The graph with every non-constant operator's output (not already a block output)
        added to block ``main``'s outputs, and the names added, in that order."""
        if self._probe is None:
            ts = require_tosa_tools("tosa_serializer")
            main = self.graph.main
            names = [name for name in self._computed if name not in main.outputs]
            major, minor, patch, draft = self.graph.version
            ser = ts.TosaSerializer("", targetMajor=major, targetMinor=minor, targetPatch=patch,
                                    targetDraft=draft)
            with tempfile.TemporaryDirectory(prefix="edgetorch-tosa-") as tmp:
                path = os.path.join(tmp, "graph.tosa")  # the serializer loads from a file only
                with open(path, "wb") as f:
                    f.write(self.tosa_bytes)
                loaded = ser.loadTosaFlatbuffer(path)
            blocks = [b for r in ser.regions if r.name == "main" for b in r.basicBlocks[:1]]
            if not loaded or not blocks:
                raise InvalidProgramError(f"{self.where}: tosa-tools' serializer cannot load "
                                          "the graph to read its intermediate values")
            for name in names:
                blocks[0].addOutput(name)
            self._probe = (bytes(ser.serialize()), names)
        return self._probe

    def _checked(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
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
        return arrays

    def _run(self, graph: bytes, arrays: list[np.ndarray]) -> list[np.ndarray]:
        outs, status = self.trm.run(graph, arrays, verbosity="NONE")
        if status != self.trm.GraphStatus.TOSA_VALID:
            raise KernelError(f"{self.where}: tosa-tools' reference model returned {status.name} "
                              "(the graph or its inputs break a TOSA rule); rerun with "
                              "verbosity to see which operator")
        return [np.asarray(o) for o in outs]


def _wants_values(tracer: Any) -> bool:
    return tracer is not None and bool(getattr(tracer, "log_intermediate_outputs", False)) \
        and bool(getattr(tracer, "delegate_intermediate_outputs", False))


def run_tosa(tosa_bytes: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Run ``tosa_bytes`` once on ``inputs`` (int8 arrays in the graph's input order)."""
    return TosaGraphRunner(tosa_bytes).run(inputs)
