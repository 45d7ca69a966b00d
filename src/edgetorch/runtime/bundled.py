"""Run and verify a BundledProgram (``.bpte``): the runtime half of ExecuTorch's bundled IO.

``load_bundled_program(path | bytes)`` returns a :class:`BundledModule` (ExecuTorch's
``portable_lib._load_bundled_program_from_buffer``). Its
``verify_result_with_bundled_expected_output(method, idx, rtol, atol)`` loads the bundled
inputs, executes and compares, with the semantics of ExecuTorch's
``devtools/bundled_program/bundled_program.cpp`` (``verify_method_outputs``):

- dtype and sizes must be equal;
- Float/Double/Half elementwise: both NaN, or both infinite with the same sign, pass; with
  rtol == atol == 0 the values must be equal; otherwise ``|out - exp| <= atol + |rtol * out|``
  (the tolerance scales with the *method output*, as in the C++), and a non-finite error fails;
- any other dtype must match byte for byte; an empty tensor always passes;
- a test case without expected outputs cannot be verified (ExecuTorch: NotSupported).

A mismatch raises :class:`BundledVerificationError` naming method, case, output, the worst
element and its error. Torch-free: NumPy, flatbuffers and the standard library only.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from ..errors import BundledVerificationError, ErrorCode, InvalidArgumentError
from ..schema import bundled_program as B
from ..schema.scalar_type import ScalarType, to_numpy_dtype
from .program import Program

_FLOATS = (ScalarType.FLOAT, ScalarType.DOUBLE, ScalarType.HALF)


def is_bundled_program(data: bytes | bytearray | memoryview) -> bool:
    """True when ``data`` carries the ``BP08`` identifier (ExecuTorch's ``is_bundled_program``)."""
    return len(data) >= 8 and bytes(data[4:8]) == B.FILE_IDENTIFIER


def value_to_python(v: B.Value) -> Any:
    """A bundled Value as a NumPy array (Tensor) or an int/bool/float."""
    val = v.val
    if isinstance(val, B.Tensor):
        return tensor_to_numpy(val)
    if isinstance(val, B.Int):
        return int(val.int_val)
    if isinstance(val, B.Bool):
        return bool(val.bool_val)
    if isinstance(val, B.Double):
        return float(val.double_val)
    raise _corrupted("a bundled value holds no tensor, int, bool or double")


def _corrupted(what: str) -> BundledVerificationError:
    return BundledVerificationError(f"{what}; the .bpte is corrupted: bundle the program again",
                                    code=ErrorCode.InvalidArgument)


def tensor_to_numpy(t: B.Tensor) -> np.ndarray:
    """The bundled tensor's data as an array of its sizes (data is laid out in ``dim_order``)."""
    name = ScalarType(t.scalar_type).name
    try:
        dtype = to_numpy_dtype(t.scalar_type)
    except KeyError:
        raise _corrupted(f"a bundled tensor has dtype {name}, which the runtime has no NumPy "
                         "type for") from None
    sizes = [int(s) for s in t.sizes]
    order = [int(d) for d in t.dim_order] or list(range(len(sizes)))
    if any(s < 0 for s in sizes):
        raise _corrupted(f"bundled tensor {name}{sizes} has a negative size")
    if sorted(order) != list(range(len(sizes))):
        raise _corrupted(f"bundled tensor {name}{sizes} has dim_order {order}, which is no "
                         f"permutation of its {len(sizes)} dimensions")
    numel = math.prod(sizes)
    need = numel * dtype.itemsize
    if len(t.data) < need:
        raise _corrupted(f"bundled tensor {name}{sizes} holds {len(t.data)} bytes, needs {need}")
    flat = np.frombuffer(t.data, dtype=dtype, count=numel)
    if not sizes:
        return flat.reshape(()).copy()
    physical = flat.reshape([sizes[d] for d in order])
    return np.ascontiguousarray(physical.transpose(np.argsort(order)))


@dataclass
class OutputMismatch:
    """Why one output failed: the worst element and how far it is beyond tolerance."""

    method: str
    testset_idx: int
    output_idx: int
    reason: str

    def __str__(self) -> str:
        return (f"method {self.method!r} test case {self.testset_idx} output {self.output_idx}: "
                f"{self.reason}")


def compare_output(expected: np.ndarray, actual: Any, rtol: float, atol: float,
                   expected_type: ScalarType) -> str | None:
    """None when ``actual`` passes ExecuTorch's ``tensors_are_close``; else a description."""
    if not isinstance(actual, np.ndarray):
        return f"the method returned {type(actual).__name__}, expected a tensor"
    if actual.dtype != expected.dtype:
        return f"dtype {actual.dtype} != expected {expected.dtype} ({expected_type.name})"
    if tuple(actual.shape) != tuple(expected.shape):
        return f"sizes {list(actual.shape)} != expected {list(expected.shape)}"
    if expected.size == 0:
        return None
    if expected_type not in _FLOATS:
        diff = np.flatnonzero(expected.ravel() != actual.ravel())
        if diff.size == 0:
            return None
        i = int(diff[0])
        return (f"{diff.size} of {expected.size} elements differ (exact comparison for "
                f"{expected_type.name}); first at flat index {i}: got {actual.ravel()[i]!r}, "
                f"expected {expected.ravel()[i]!r}")
    a = actual.astype(np.float64).ravel()
    e = expected.astype(np.float64).ravel()
    with np.errstate(invalid="ignore", over="ignore"):
        both_nan = np.isnan(a) & np.isnan(e)
        same_inf = ~np.isfinite(a) & ~np.isfinite(e) & ((a > 0) == (e > 0))
        err = np.abs(a - e)
        if rtol == 0 and atol == 0:
            bad = a != e
        else:
            allowed = atol + np.abs(rtol * a)
            bad = ~np.isfinite(err) | (err > allowed)
    bad &= ~(both_nan | same_inf)
    if not bad.any():
        return None
    idx = np.flatnonzero(bad)
    worst = int(idx[np.argmax(np.where(np.isfinite(err[idx]), err[idx], np.inf))])
    return (f"{idx.size} of {e.size} elements outside rtol={rtol:g}, atol={atol:g}; worst at flat "
            f"index {worst}: got {a[worst]!r}, expected {e[worst]!r}, |diff| {err[worst]:.6g}, "
            f"max |diff| over mismatches {np.nanmax(err[idx]):.6g}")


class BundledModule:
    """A loaded ``.bpte``: its program plus the bundled test cases of each method."""

    def __init__(self, bundled: B.BundledProgram, program: Program) -> None:
        self.bundled_program = bundled
        self.program = program
        self._suites = {s.method_name: s for s in bundled.method_test_suites}
        self._methods: dict[str, Any] = {}

    @property
    def method_names(self) -> list[str]:
        """Methods that have bundled test cases, in file order (sorted by name)."""
        return [s.method_name for s in self.bundled_program.method_test_suites]

    def num_test_cases(self, method_name: str) -> int:
        return len(self._suite(method_name).test_cases)

    def _suite(self, method_name: str) -> B.BundledMethodTestSuite:
        if method_name not in self._suites:
            raise InvalidArgumentError(
                f"no bundled test suite for method {method_name!r}; the bundle has "
                f"{self.method_names}. Pass one of those names")
        return self._suites[method_name]

    def _case(self, method_name: str, testset_idx: int) -> B.BundledMethodTestCase:
        cases = self._suite(method_name).test_cases
        if not 0 <= testset_idx < len(cases):
            raise InvalidArgumentError(
                f"testset_idx {testset_idx} is out of range for method {method_name!r}, which "
                f"has {len(cases)} bundled test cases; use 0..{len(cases) - 1}")
        return cases[testset_idx]

    def method(self, method_name: str) -> Any:
        if method_name not in self._methods:
            self._methods[method_name] = self.program.load_method(method_name)
        return self._methods[method_name]

    def load_bundled_input(self, method_name: str, testset_idx: int) -> list[Any]:
        """The inputs of one bundled test case (NumPy arrays and Python scalars)."""
        return [value_to_python(v) for v in self._case(method_name, testset_idx).inputs]

    def expected_outputs(self, method_name: str, testset_idx: int) -> list[np.ndarray]:
        return [value_to_python(v) for v in self._case(method_name, testset_idx).expected_outputs]

    def run_bundled_input(self, method_name: str, testset_idx: int) -> list[Any]:
        """Execute one bundled test case without verifying (ExecuTorch's profiling use)."""
        return self.method(method_name).execute(self.load_bundled_input(method_name, testset_idx))

    def verify_result_with_bundled_expected_output(
        self, method_name: str, testset_idx: int, rtol: float = 1e-5, atol: float = 1e-8,
    ) -> list[Any]:
        """Run one bundled case and check every output; returns the outputs.

        Raises BundledVerificationError listing every mismatching output."""
        case = self._case(method_name, testset_idx)
        outputs = self.run_bundled_input(method_name, testset_idx)
        problems = self._check(method_name, testset_idx, case, outputs, rtol, atol)
        if problems:
            lines = "\n  ".join(str(p) for p in problems)
            raise BundledVerificationError(
                f"bundled program verification failed:\n  {lines}\nCheck the expected outputs "
                "were computed from the same model and inputs, or loosen rtol/atol")
        return outputs

    def _check(self, method_name: str, idx: int, case: B.BundledMethodTestCase,
               outputs: list[Any], rtol: float, atol: float) -> list[OutputMismatch]:
        if not case.expected_outputs:
            raise BundledVerificationError(
                f"method {method_name!r} test case {idx} has no expected outputs, so its outputs "
                "cannot be verified; bundle it with MethodTestCase(inputs, expected_outputs=...) "
                "or run it with run_bundled_input", code=ErrorCode.NotSupported)
        if len(case.expected_outputs) != len(outputs):
            return [OutputMismatch(method_name, idx, -1,
                                   f"the method returned {len(outputs)} outputs, the bundle "
                                   f"expects {len(case.expected_outputs)}")]
        problems = []
        for i, (v, out) in enumerate(zip(case.expected_outputs, outputs)):
            if not isinstance(v.val, B.Tensor):
                problems.append(OutputMismatch(method_name, idx, i,
                                               f"expected output is {type(v.val).__name__}; only "
                                               "tensors can be verified"))
                continue
            why = compare_output(tensor_to_numpy(v.val), out, rtol, atol, ScalarType(v.val.scalar_type))
            if why is not None:
                problems.append(OutputMismatch(method_name, idx, i, why))
        return problems

    def verify_all(self, rtol: float = 1e-5, atol: float = 1e-8) -> list[str]:
        """Verify every case that has expected outputs; returns one line per verified case.

        Collects all mismatches first, then raises one BundledVerificationError."""
        report, problems = [], []
        for suite in self.bundled_program.method_test_suites:
            for idx, case in enumerate(suite.test_cases):
                outputs = self.run_bundled_input(suite.method_name, idx)
                if not case.expected_outputs:
                    report.append(f"{suite.method_name}[{idx}]: ran, no expected outputs to verify")
                    continue
                found = self._check(suite.method_name, idx, case, outputs, rtol, atol)
                problems.extend(found)
                report.append(f"{suite.method_name}[{idx}]: {'FAIL' if found else 'ok'} "
                              f"({len(outputs)} outputs)")
        if problems:
            lines = "\n  ".join(str(p) for p in problems)
            raise BundledVerificationError(
                f"bundled program verification failed ({len(problems)} outputs):\n  {lines}\n"
                "Check the expected outputs were computed from the same model and inputs, or "
                "loosen rtol/atol")
        return report


def load_bundled_program(data: str | os.PathLike | bytes | bytearray | memoryview | BinaryIO,
                         **load_kwargs: Any) -> BundledModule:
    """Parse a ``.bpte`` and load its embedded program (``load_kwargs`` go to ``load_program``)."""
    from .runtime import Runtime

    if isinstance(data, (str, os.PathLike)):
        with open(os.fspath(data), "rb") as f:
            buf = f.read()
    elif hasattr(data, "read"):
        buf = data.read()
    else:
        buf = bytes(data)
    bundled = B.deserialize_from_flatbuffer_to_bundled_program(buf)
    program = Runtime.get().load_program(bytes(bundled.program), **load_kwargs)
    return BundledModule(bundled, program)


# ExecuTorch's pybinding name.
_load_bundled_program_from_buffer = load_bundled_program
