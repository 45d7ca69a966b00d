"""Run a Vela delegate blob functionally: the inputs go into the scratch as ExecuTorch's runtime
puts them there (raw bytes at their offsets), the command stream runs, the outputs are read back.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .....errors import InvalidArgumentError, OperatorMissingError
from ...ethosu.vela_bin import VelaBin, VelaIO
from .cmdstream import DriverPayload, parse_driver_payload
from .interp import Interpreter, RunStats
from .memory import Memory

REGION_WEIGHTS, REGION_SCRATCH, REGION_FAST_SCRATCH = 0, 1, 2


def accelerator_of(payload: DriverPayload, target: str | None = None) -> str:
    """``ethos-u55-128`` etc.: from the CONFIG word Vela wrote (product, MACs per cycle)."""
    if payload.config is None:
        if target:
            return target
        raise OperatorMissingError("Ethos-U simulation: the command stream has no CONFIG word "
                                   "and no target is known")
    product = payload.config >> 28
    if product not in (0, 1):
        raise OperatorMissingError(
            f"Ethos-U simulation: product {product} in the CONFIG word is not an Ethos-U55/U65 "
            "(Ethos-U85 command streams are not simulated yet); run the delegate from its TOSA "
            "graph (backend option 'simulation': 'tosa')")
    return f"ethos-u{55 if product == 0 else 65}-{payload.macs_per_cc}"


@dataclass
class NpuProgram:
    """A parsed delegate ready to run many times."""

    vela: VelaBin
    payload: DriverPayload
    accelerator: str
    last_stats: RunStats | None = None

    @classmethod
    def from_vela_bin(cls, vela: VelaBin, target: str | None = None) -> NpuProgram:
        payload = parse_driver_payload(vela.cmd_data)
        return cls(vela, payload, accelerator_of(payload, target))

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """Raw input arrays (any shape with the right element count and size) -> raw outputs
        as flat arrays of the I/O element size (int8/int16/int32)."""
        if len(inputs) != len(self.vela.inputs):
            raise InvalidArgumentError(
                f"Ethos-U simulation: {len(inputs)} inputs given, the delegate has "
                f"{len(self.vela.inputs)}")
        mem = Memory({REGION_WEIGHTS: self.vela.weight_data,
                      REGION_SCRATCH: bytes(self.vela.scratch_size)})
        for k, (io, arr) in enumerate(zip(self.vela.inputs, inputs, strict=True)):
            raw = np.ascontiguousarray(arr)
            if raw.size != io.numel or raw.dtype.itemsize != io.elem_size:
                raise InvalidArgumentError(
                    f"Ethos-U simulation input {k}: got {raw.dtype} {list(raw.shape)}, the NPU "
                    f"expects {io.numel} elements of {io.elem_size} byte(s)")
            data = raw.view(np.uint8).reshape(-1)
            mem.region(io.region, io.offset + data.size, write=True)[
                io.offset:io.offset + data.size] = data
        self.last_stats = Interpreter(self.payload, self.accelerator).run(mem)
        return [self._read(mem, io) for io in self.vela.outputs]

    @staticmethod
    def _read(mem: Memory, io: VelaIO) -> np.ndarray:
        dtype = {1: np.int8, 2: np.int16, 4: np.int32}.get(io.elem_size, np.uint8)
        raw = mem.region(io.region, io.offset + io.nbytes)[io.offset:io.offset + io.nbytes]
        return raw.copy().view(dtype)
