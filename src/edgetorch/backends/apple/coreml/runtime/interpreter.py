"""The Core ML delegate on a PC: a NumPy interpreter of the ML program ExecuTorch's (or
edgetorch's) ``CoreMLBackend`` delegate holds.

``CoreMLBackend`` (registered under ``"CoreMLBackend"``) unflattens the blob, reads
``model.mlpackage``'s ML program with the checked protobuf reader, materialises the
constants, resolves every operation to its handler at load (an operation without one is
refused then, by name), and runs the program in order. Precision follows the program: Core
ML programs converted with ``compute_precision=FLOAT16`` (ExecuTorch's default) cast their
inputs to fp16 and declare fp16 results, so each operation reads fp16 values, computes in
float32 and rounds its result to fp16 as the program declares it (the Neural Engine or GPU
may round inside an operation too: results agree within fp16 tolerance, not bit for bit).
Compressed weights (``constexpr_*`` operations: palettized, quantized, pruned) are
decompressed once, at load, as Core ML does, into constants of the declared dtype.
``handle.operators_run`` counts what ran; ``handle.report()`` says it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .....errors import InvalidArgumentError, KernelError, OperatorMissingError, near_matches
from .....runtime.backends import BackendExecutionContext, BackendInitContext
from .mil_ops import MIL_OPS, NP_DTYPES
from .program import Binding, MLProgram, load

BACKEND_ID = "CoreMLBackend"
_F16 = np.dtype(np.float16)


@dataclass
class _Step:
    type: str
    fn: Any
    inputs: dict[str, list[Binding]]  # argument -> a value's name, or ("value", v)
    outputs: list[tuple[str, np.dtype | None]]


@dataclass
class CoreMLDelegate:
    program: MLProgram
    steps: list[_Step]
    operators_run: Counter = field(default_factory=Counter)

    def report(self) -> str:
        ran = ", ".join(f"{n} x{c}" for n, c in sorted(self.operators_run.items()))
        return (f"CoreMLBackend (NumPy ML program interpreter, opset {self.program.opset}): "
                f"{len(self.steps)} operations, {len(self.program.constants)} constants; "
                f"ran {ran or 'nothing yet'}")


def _np_dtype(mil: str | None) -> np.dtype | None:
    return np.dtype(NP_DTYPES[mil]) if mil in NP_DTYPES else None


class CoreMLBackend:
    """The runtime half of ExecuTorch's Core ML delegate, on the CPU with NumPy."""

    def is_available(self) -> bool:
        return True

    def init(self, blob: memoryview, compile_specs: dict[str, bytes],
             context: BackendInitContext | None = None) -> CoreMLDelegate:
        program = load(blob)
        steps = []
        for op in program.operations:
            fn = MIL_OPS.get(op.type)
            if fn is None:
                hint = near_matches(op.type, MIL_OPS)
                near = f" Similar: {', '.join(hint)}." if hint else ""
                raise OperatorMissingError(
                    f"CoreMLBackend: the ML program uses operation {op.type!r}, which this "
                    f"runtime cannot run.{near} Keep that operator out of the Core ML delegate "
                    "(CoreMLPartitioner(skip_ops_for_coreml_delegation=[...])), or add it to "
                    "edgetorch.backends.apple.coreml.runtime.mil_ops.")
            steps.append(_Step(op.type, fn, op.inputs,
                               [(name, _np_dtype(dt)) for name, dt in op.outputs]))
        handle = CoreMLDelegate(program, steps)
        self._decompress_weights(handle)
        return handle

    def _decompress_weights(self, handle: CoreMLDelegate) -> None:
        """Run the ``constexpr_*`` steps whose inputs are constants (in program order, so a
        chain of them folds too) into the constants; the other steps stay."""
        consts = handle.program.constants
        kept = []
        for step in handle.steps:
            if step.type.startswith("constexpr_") and all(
                    isinstance(b, tuple) or b in consts
                    for bindings in step.inputs.values() for b in bindings):
                self._run(step, consts)
                handle.operators_run[step.type] += 1
            else:
                kept.append(step)
        handle.steps = kept

    def execute(self, handle: CoreMLDelegate, values: list[Any], args: list[int],
                context: BackendExecutionContext | None = None) -> None:
        prog = handle.program
        n_in = len(prog.input_names)
        if len(args) != n_in + len(prog.output_names):
            raise InvalidArgumentError(
                f"CoreMLBackend: the delegate takes {n_in} inputs and "
                f"{len(prog.output_names)} outputs, the call passes {len(args)} values")
        env: dict[str, Any] = dict(prog.constants)
        for name, arg in zip(prog.input_names, args[:n_in]):
            dt = _np_dtype(prog.function_inputs.get(name))
            x = np.asarray(values[arg])
            env[name] = x.astype(dt, copy=False) if dt is not None else x
        for step in handle.steps:
            self._run(step, env)
            handle.operators_run[step.type] += 1
        for name, arg in zip(prog.output_names, args[n_in:]):
            if name not in env:
                raise KernelError(f"CoreMLBackend: the program computes no output {name!r}")
            self._write(env[name], values, arg, context)

    @staticmethod
    def _read(binding: Any, env: dict[str, Any]) -> Any:
        if isinstance(binding, tuple):
            return binding[1]
        if binding not in env:
            raise KernelError(f"CoreMLBackend: value {binding!r} is read before it is computed")
        v = env[binding]
        if isinstance(v, np.ndarray) and v.dtype == _F16:
            return v.astype(np.float32)  # fp16 storage, float32 arithmetic
        return v

    def _run(self, step: _Step, env: dict[str, Any]) -> None:
        kwargs = {}
        for name, bindings in step.inputs.items():
            vals = [self._read(b, env) for b in bindings]
            kwargs[name] = vals if len(vals) > 1 or name == "values" else vals[0]
        try:
            result = step.fn(**kwargs)
        except (ArithmeticError, IndexError, TypeError, ValueError) as e:
            raise KernelError(f"CoreMLBackend: operation {step.type} "
                              f"({step.outputs[0][0] if step.outputs else '?'}) failed: "
                              f"{type(e).__name__}: {e}") from e
        results = result if len(step.outputs) > 1 else (result,)
        for (name, dtype), r in zip(step.outputs, results):
            r = np.asarray(r)
            env[name] = r.astype(dtype, copy=False) if dtype is not None else r

    @staticmethod
    def _write(r: Any, values: list[Any], arg: int,
               context: BackendExecutionContext | None) -> None:
        dst = values[arg]
        r = np.asarray(r)
        if not isinstance(dst, np.ndarray):
            values[arg] = r
            return
        if r.shape != dst.shape:
            if context is None:
                raise InvalidArgumentError(f"CoreMLBackend: output of shape {list(r.shape)} does "
                                           f"not fit the program's {list(dst.shape)}")
            dst = context.resize(arg, tuple(r.shape))
        np.copyto(dst, r, casting="unsafe")

    def destroy(self, handle: CoreMLDelegate) -> None:
        handle.program.constants.clear()

