"""BundledProgram (``executorch.devtools.bundled_program.core``): a program plus its test suites.

Suites are sorted by method name (the runtime looks them up in that order) and, when the
program is given, checked against each method's inputs and outputs: method name, input
count, input kind (tensor / int / bool / float), tensor dtype and sizes (static sizes must
match, dynamic ones must stay within the upper bound), and the expected outputs' count, dtype
and sizes. ExecuTorch checks names, kinds and dtypes with asserts; we raise
``BundledProgramError`` and also check counts and sizes, which ExecuTorch only finds on device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from ...errors import BundledProgramError
from ...exir.tensor import scalar_type_of
from ...runtime.meta import TensorInfo, ValueInfo, method_meta
from ...schema import bundled_program as B
from ...schema import program as S
from .config import MethodTestSuite

_KIND = {"Int": int, "Bool": bool, "Double": float}


def _dim_order(t: torch.Tensor) -> list[int]:
    """The tensor's own memory layout (channels-last stays channels-last, as ExecuTorch keeps
    it: its runtime compares a bundled output with the method's output layout and aborts on a
    mismatch); the contiguous order when the strides name none."""
    try:
        order = [int(d) for d in t.dim_order()]
    except RuntimeError:  # strides that are no permutation (e.g. overlapping): contiguous
        return list(range(t.dim()))
    return order


def _tensor_value(t: torch.Tensor) -> B.Value:
    t = t.detach().cpu()
    order = _dim_order(t)
    st = scalar_type_of(t.dtype)
    # The data in memory order; raw bytes through a uint8 view work for dtypes NumPy lacks
    # (bfloat16) too.
    stored = t.permute(order).contiguous()
    data = bytes(stored.reshape(-1).view(torch.uint8).numpy().tobytes()) if t.numel() else b""
    return B.Value(B.Tensor(scalar_type=st, sizes=list(t.shape), data=data, dim_order=order))


def _prim_value(x: int | bool | float) -> B.Value:
    if isinstance(x, bool):  # bool before int: bool is an int subclass
        return B.Value(B.Bool(bool_val=x))
    if isinstance(x, int):
        return B.Value(B.Int(int_val=x))
    return B.Value(B.Double(double_val=float(x)))


def _sizes_problem(got: tuple[int, ...], info: TensorInfo) -> str | None:
    want = info.sizes()
    if len(got) != len(want):
        return f"rank {len(got)} != {len(want)} (sizes {list(got)} vs {list(want)})"
    if info.shape_dynamism() == S.TensorShapeDynamism.STATIC:
        return None if tuple(got) == tuple(want) else f"sizes {list(got)} != {list(want)}"
    if any(g > w for g, w in zip(got, want)):
        return f"sizes {list(got)} exceed the upper bound {list(want)}"
    return None


class BundledProgram:
    """A program (``ExecutorchProgramManager``, or ``pte_file_path``) and its test suites."""

    def __init__(self, executorch_program: Any, method_test_suites: Sequence[MethodTestSuite],
                 pte_file_path: str | None = None) -> None:
        if executorch_program is None and pte_file_path is None:
            raise BundledProgramError("BundledProgram needs executorch_program or pte_file_path; "
                                      "pass the result of to_executorch() or a .pte path")
        if executorch_program is not None and pte_file_path is not None:
            raise BundledProgramError("pass only one of executorch_program and pte_file_path")
        self.executorch_program = executorch_program
        self._pte_file_path = pte_file_path
        self.method_test_suites = sorted(method_test_suites, key=lambda s: s.method_name)
        if executorch_program is not None:
            self._check(self._program())
        self._bundled_program_in_schema: B.BundledProgram | None = None

    def _program(self) -> S.Program:
        prog = self.executorch_program
        program = getattr(prog, "executorch_program", None) or getattr(prog, "program", None)
        if not isinstance(program, S.Program):
            raise BundledProgramError(
                f"executorch_program is {type(prog).__name__}; pass an ExecutorchProgramManager "
                "(to_edge(...).to_executorch()) or use pte_file_path=")
        return program

    def _check(self, program: S.Program) -> None:
        plans = {p.name: p for p in program.execution_plan}
        for suite in self.method_test_suites:
            if suite.method_name not in plans:
                raise BundledProgramError(
                    f"test suite for method {suite.method_name!r}, but the program has methods "
                    f"{sorted(plans)}; name one of those")
            meta = method_meta(plans[suite.method_name])
            for c, case in enumerate(suite.test_cases):
                where = f"method {suite.method_name!r} test case {c}"
                self._check_inputs(where, meta, case.inputs)
                if case.expected_outputs:
                    self._check_outputs(where, meta, case.expected_outputs)

    @staticmethod
    def _check_inputs(where: str, meta: Any, inputs: list[Any]) -> None:
        if len(inputs) != meta.num_inputs():
            raise BundledProgramError(
                f"{where}: {len(inputs)} inputs, the method takes {meta.num_inputs()} "
                f"({', '.join(str(meta.input_tensor_meta(i)) for i in range(meta.num_inputs()))});"
                " give one value per (flattened) input")
        for i, x in enumerate(inputs):
            info = meta.input_tensor_meta(i)
            if isinstance(info, TensorInfo):
                if not isinstance(x, torch.Tensor):
                    raise BundledProgramError(f"{where} input {i}: expected a tensor {info}, got "
                                              f"{type(x).__name__}")
                st = scalar_type_of(x.dtype)
                if st != info.dtype():
                    raise BundledProgramError(
                        f"{where} input {i}: dtype {x.dtype} ({st.name}) != the method's "
                        f"{info.dtype().name}; convert it with .to(...)")
                bad = _sizes_problem(tuple(x.shape), info)
                if bad:
                    raise BundledProgramError(f"{where} input {i}: {bad}; bundle inputs of the "
                                              "exported shape")
            else:
                want = _KIND.get(info.kind) if isinstance(info, ValueInfo) else None
                if want is None:
                    raise BundledProgramError(f"{where} input {i}: the method's input is "
                                              f"{info}, which a bundle cannot hold")
                if type(x) is not want:
                    raise BundledProgramError(f"{where} input {i}: expected {want.__name__}, "
                                              f"got {type(x).__name__}")

    @staticmethod
    def _check_outputs(where: str, meta: Any, outputs: list[Any]) -> None:
        if len(outputs) != meta.num_outputs():
            raise BundledProgramError(
                f"{where}: {len(outputs)} expected outputs, the method returns "
                f"{meta.num_outputs()}; give one tensor per (flattened) output")
        for i, y in enumerate(outputs):
            info = meta.output_tensor_meta(i)
            if not isinstance(info, TensorInfo):
                raise BundledProgramError(f"{where} output {i}: the method returns {info}; only "
                                          "tensor outputs can be bundled")
            if not isinstance(y, torch.Tensor):
                raise BundledProgramError(f"{where} expected output {i} is "
                                          f"{type(y).__name__}; expected outputs must be tensors")
            st = scalar_type_of(y.dtype)
            if st != info.dtype():
                raise BundledProgramError(f"{where} expected output {i}: dtype {y.dtype} != the "
                                          f"method's {info.dtype().name}")
            bad = _sizes_problem(tuple(y.shape), info)
            if bad:
                raise BundledProgramError(f"{where} expected output {i}: {bad}")

    def serialize_to_schema(self) -> B.BundledProgram:
        """The schema dataclass the serializer writes (cached, as in ExecuTorch)."""
        if self._bundled_program_in_schema is not None:
            return self._bundled_program_in_schema
        suites = []
        for suite in self.method_test_suites:
            cases = [B.BundledMethodTestCase(
                inputs=[_tensor_value(x) if isinstance(x, torch.Tensor) else _prim_value(x)
                        for x in case.inputs],
                expected_outputs=[_tensor_value(y) for y in case.expected_outputs])
                for case in suite.test_cases]
            suites.append(B.BundledMethodTestSuite(method_name=suite.method_name, test_cases=cases))
        if self.executorch_program is not None:
            program = bytes(self.executorch_program.buffer)
        else:
            with open(self._pte_file_path, "rb") as f:
                program = f.read()
        self._bundled_program_in_schema = B.BundledProgram(
            version=B.BUNDLED_PROGRAM_SCHEMA_VERSION, method_test_suites=suites, program=program)
        return self._bundled_program_in_schema
