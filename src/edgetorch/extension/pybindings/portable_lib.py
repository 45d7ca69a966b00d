"""ExecuTorch's legacy pybindings API (``executorch.extension.pybindings.portable_lib``) on
edgetorch's runtime.

    from edgetorch.extension.pybindings.portable_lib import _load_for_executorch
    module = _load_for_executorch("model.pte", "model.ptd")
    outputs = module.forward([x])

The names, arguments and defaults are ExecuTorch 1.5.1's; every call goes to
``edgetorch.runtime`` (Program, Method, the event tracer, bundled programs) -- there is no
second interpreter. Differences from ExecuTorch's C++ bindings:

* ``_load_for_executorch_from_data_loader`` takes a ``PyDataLoader``, an opaque wrapper of a
  C++ ``DataLoader`` that Python code cannot build; it does not exist here.
* the operator profiler (``_create_profile_block`` ...) is compiled out in ExecuTorch's wheels;
  here it is a no-op too, and ``_dump_profile_results`` returns empty bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...runtime import Runtime, Verification
from ...runtime import meta as _meta
from ...runtime.bundled import BundledModule as _RuntimeBundledModule
from ...runtime.event_tracer import RecordingEventTracer
from ...runtime.method import Method
from ...runtime.program import Program
from ...schema import program as S
from . import _convert
from ._convert import SCALAR_TYPE_NAMES, as_runtime_error

__all__ = [
    "BundledModule", "ExecuTorchMethod", "ExecuTorchModule", "ExecuTorchProgram", "MethodMeta",
    "TensorInfo", "Verification",
    "_create_profile_block", "_dump_profile_results", "_get_operator_names",
    "_get_registered_backend_names", "_is_available", "_load_bundled_program_from_buffer",
    "_load_for_executorch", "_load_for_executorch_from_buffer",
    "_load_for_executorch_from_bundled_program", "_load_program", "_load_program_from_buffer",
    "_reset_profile_results", "_threadpool_get_thread_count", "_unsafe_reset_threadpool",
]

_DEFAULT_BUNDLED_INPUT_POOL_SIZE = 16 * 1024


# ---- metadata ------------------------------------------------------------------------------


class TensorInfo:
    """Shape and dtype of one tensor (ExecuTorch's ``TensorInfo``; ``dtype()`` is the
    ScalarType's integer value)."""

    def __init__(self, info: _meta.TensorInfo) -> None:
        self._info = info

    def sizes(self) -> tuple[int, ...]:
        return tuple(self._info.sizes())

    def dtype(self) -> int:
        return int(self._info.dtype())

    def is_memory_planned(self) -> bool:
        return self._info.is_memory_planned()

    def nbytes(self) -> int:
        return self._info.nbytes()

    def __repr__(self) -> str:
        return (f"TensorInfo(sizes={list(self.sizes())}, dtype="
                f"{SCALAR_TYPE_NAMES.get(self.dtype(), str(self.dtype()))}, "
                f"is_memory_planned={self.is_memory_planned()}, nbytes={self.nbytes()})")


def _attribute_tensors(plan: S.ExecutionPlan) -> list[tuple[int, S.Tensor]]:
    """ExecuTorch's attributes: every tensor value that carries a fully qualified name."""
    found = []
    for i, v in enumerate(plan.values):
        t = v.val
        if isinstance(t, S.Tensor) and t.extra_tensor_info is not None \
                and t.extra_tensor_info.fully_qualified_name:
            found.append((i, t))
    return found


class MethodMeta:
    """A method's inputs, outputs and attributes, readable without loading the method."""

    def __init__(self, plan: S.ExecutionPlan) -> None:
        self._meta = _meta.method_meta(plan)
        self._attributes = [_meta.tensor_info(t) for _, t in _attribute_tensors(plan)]

    def name(self) -> str:
        return self._meta.name()

    def num_inputs(self) -> int:
        return self._meta.num_inputs()

    def num_outputs(self) -> int:
        return self._meta.num_outputs()

    def num_attributes(self) -> int:
        return len(self._attributes)

    @staticmethod
    def _tensor(infos: Sequence[Any], index: int, what: str) -> TensorInfo:
        if not 0 <= index < len(infos) or not isinstance(infos[index], _meta.TensorInfo):
            raise IndexError(f"Cannot get {what} tensor meta at {index}")
        return TensorInfo(infos[index])

    def input_tensor_meta(self, index: int) -> TensorInfo:
        return self._tensor(self._meta._inputs, index, "input")

    def output_tensor_meta(self, index: int) -> TensorInfo:
        return self._tensor(self._meta._outputs, index, "output")

    def attribute_tensor_meta(self, index: int) -> TensorInfo:
        return self._tensor(self._attributes, index, "attribute")

    def __repr__(self) -> str:
        ins = [repr(self.input_tensor_meta(i)) for i in range(self.num_inputs())]
        outs = [repr(TensorInfo(o)) if isinstance(o, _meta.TensorInfo) else str(o)
                for o in self._meta._outputs]
        return (f"MethodMeta(name='{self.name()}', num_inputs={self.num_inputs()}, "
                f"input_tensor_meta={ins}, num_outputs={self.num_outputs()}, "
                f"output_tensor_meta={outs})")


# ---- running -----------------------------------------------------------------------------


def _outputs(method: Method, values: list[Any], clone: bool = True) -> list[Any]:
    """``clone=False``: tensors are views of the method's output memory (no copy); the next
    execution overwrites them (ExecuTorch's ``clone_outputs=False``)."""
    meta = method.metadata
    orders = [meta.output_tensor_meta(i).dim_order()
              if isinstance(meta.output_tensor_meta(i), _meta.TensorInfo) else None
              for i in range(meta.num_outputs())]
    return [_convert.output_to_python(v, order, clone) for v, order in zip(values, orders)]


class ExecuTorchMethod:
    """One loaded method (``program.load_method(name)``): set inputs, execute, read outputs."""

    def __init__(self, method: Method, plan: S.ExecutionPlan) -> None:
        self._method = method
        self._plan = plan
        self._inputs: list[Any] = []
        self._results: list[Any] | None = None

    @as_runtime_error
    def set_inputs(self, inputs: Sequence[Any]) -> None:
        self._inputs = _convert.inputs_to_runtime(inputs, self._method.name)

    @as_runtime_error
    def execute(self) -> None:
        # Views of the output memory; get_outputs copies them unless told not to.
        self._results = self._method.execute(self._inputs, copy_outputs=False)

    def get_outputs(self, clone_outputs: bool = True) -> list[Any]:
        if self._results is None:
            raise RuntimeError(f"method {self._method.name!r} has not been executed yet; call "
                               "execute() (or call(inputs)) first")
        values = [v.copy() if clone_outputs and isinstance(v, np.ndarray) else v
                  for v in self._results]
        return _outputs(self._method, values, clone_outputs)

    def call(self, inputs: Any = (), clone_outputs: bool = True) -> list[Any]:
        self.set_inputs(inputs)
        self.execute()
        return self.get_outputs(clone_outputs)

    __call__ = call

    @as_runtime_error
    def get_attribute(self, name: str) -> Any:
        if name in self._method.buffer_names:
            return _convert.output_to_python(self._method.get_buffer(name), None)
        names = [t.extra_tensor_info.fully_qualified_name for _, t in _attribute_tensors(self._plan)]
        raise RuntimeError(f"Failed to get attribute '{name}' for method '{self._method.name}': "
                           f"its named tensors are {names}; export with "
                           "ExecutorchBackendConfig(emit_mutable_buffer_names=True) to name buffers")

    def method_meta(self) -> MethodMeta:
        return MethodMeta(self._plan)


def _write_etdump(program: Program, path: str, debug_buffer_path: str | None) -> None:
    if not isinstance(program.event_tracer, RecordingEventTracer):
        raise RuntimeError("No etdump found")
    program.write_etdump_result_to_file(path, debug_buffer_path)


class ExecuTorchProgram:
    """A loaded program whose methods are loaded one by one (``_load_program``)."""

    def __init__(self, program: Program) -> None:
        self._program = program
        self._plans = list(program.program.execution_plan)

    def num_methods(self) -> int:
        return len(self._plans)

    def get_method_name(self, method_index: int) -> str:
        if not 0 <= method_index < len(self._plans):
            raise RuntimeError(f"method index {method_index} is out of range: the program has "
                               f"{len(self._plans)} method(s)")
        return self._plans[method_index].name

    @as_runtime_error
    def load_method(self, method_name: str) -> ExecuTorchMethod:
        return ExecuTorchMethod(self._program.load_method(method_name),
                                self._program._plan(method_name))

    @as_runtime_error
    def method_meta(self, method_name: str) -> MethodMeta:
        return MethodMeta(self._program._plan(method_name))

    def has_etdump(self) -> bool:
        return isinstance(self._program.event_tracer, RecordingEventTracer)

    @as_runtime_error
    def write_etdump_result_to_file(self, path: str, debug_buffer_path: str | None = None) -> None:
        _write_etdump(self._program, path, debug_buffer_path)


class ExecuTorchModule:
    """A program with its methods loaded on first use (ExecuTorch's ``Module``): a missing or
    bad ``.ptd`` surfaces when a method runs, as in ExecuTorch."""

    def __init__(self, load: Callable[[], Program], enable_etdump: bool) -> None:
        self._load = load
        self._enable_etdump = enable_etdump
        self._program: Program | None = None
        self._methods: dict[str, Method] = {}
        self._last_inputs: dict[str, list[Any]] = {}

    @property
    def program(self) -> Program:
        """The underlying ``edgetorch.runtime.Program`` (loaded on first access)."""
        if self._program is None:
            self._program = self._load()
        return self._program

    def _method(self, name: str) -> Method:
        if name not in self._methods:
            self._methods[name] = self.program.load_method(name)
        return self._methods[name]

    @as_runtime_error
    def run_method(self, method_name: str, inputs: Any = (), clone_outputs: bool = True) -> list[Any]:
        method = self._method(method_name)
        converted = _convert.inputs_to_runtime(inputs, method_name)
        if len(converted) != method.metadata.num_inputs():
            # ExecuTorch logs this line before failing; scripts look for it on stderr.
            import sys

            print(f"[portable_lib.py] The length of given input array ({len(converted)}) must be same as the "
                  f"number of inputs in method ({method.metadata.num_inputs()}).", file=sys.stderr)
        self._last_inputs[method_name] = converted
        return _outputs(method, method.execute(converted, copy_outputs=clone_outputs),
                        clone_outputs)

    def forward(self, inputs: Any = (), clone_outputs: bool = True) -> list[Any]:
        return self.run_method("forward", inputs, clone_outputs)

    __call__ = forward

    @as_runtime_error
    def plan_execute(self, method_name: str, clone_outputs: bool = True) -> list[Any]:
        """Run ``method_name`` again on the inputs it last received (none for a method
        without inputs)."""
        method = self._method(method_name)
        values = method.execute(self._last_inputs.get(method_name, []), copy_outputs=clone_outputs)
        return _outputs(method, values, clone_outputs)

    @as_runtime_error
    def method_meta(self, method_name: str) -> MethodMeta:
        return MethodMeta(self.program._plan(method_name))

    @as_runtime_error
    def method_names(self) -> list[str]:
        return [p.name for p in self.program.program.execution_plan]

    def has_etdump(self) -> bool:
        return self._enable_etdump

    @as_runtime_error
    def write_etdump_result_to_file(self, path: str, debug_buffer_path: str | None = None) -> None:
        _write_etdump(self.program, path, debug_buffer_path)


class BundledModule:
    """A ``.bpte`` loaded from bytes (``_load_bundled_program_from_buffer``)."""

    def __init__(self, buffer: bytes) -> None:
        from ...schema import bundled_program as B

        self._buffer = bytes(buffer)
        self._bundled = B.deserialize_from_flatbuffer_to_bundled_program(self._buffer)
        self._runner: _RuntimeBundledModule | None = None

    @property
    def program_buffer(self) -> bytes:
        """The embedded ``.pte``."""
        return bytes(self._bundled.program)

    @as_runtime_error
    def verify_result_with_bundled_expected_output(
        self, method_name: str, testset_idx: int, rtol: float = 1e-5, atol: float = 1e-8,
    ) -> list[Any]:
        """Run bundled test case ``testset_idx`` of ``method_name``; RuntimeError unless every
        output matches the bundled expected output within rtol/atol. Returns the outputs."""
        if self._runner is None:
            self._runner = _RuntimeBundledModule(
                self._bundled, Runtime.get().load_program(self.program_buffer))
        outputs = self._runner.verify_result_with_bundled_expected_output(
            method_name, testset_idx, rtol, atol)
        return [_convert.output_to_python(o, None) for o in outputs]


# ---- loading -----------------------------------------------------------------------------


def _loader(data: Any, data_map: Any, enable_etdump: bool, debug_buffer_size: int,
            verification: Verification) -> Callable[[], Program]:
    def load() -> Program:
        return Runtime.get().load_program(
            data, data_path=data_map, enable_etdump=enable_etdump,
            debug_buffer_size=debug_buffer_size, verification=verification)

    return load


def _load_for_executorch(program_path: str, data_path: str | None = None,
                         enable_etdump: bool = False, debug_buffer_size: int = 0,
                         program_verification: Verification = Verification.InternalConsistency,
                         ) -> ExecuTorchModule:
    """Load a ``.pte`` (and its ``.ptd`` weights) as a module."""
    if not os.path.exists(program_path):  # ExecuTorch's MmapDataLoader fails at once
        raise RuntimeError(f"Failed to create MmapDataLoader from file {program_path}: no such "
                           "file; check the path")
    return ExecuTorchModule(_loader(program_path, data_path, enable_etdump, debug_buffer_size,
                                    program_verification), enable_etdump)


def _load_for_executorch_from_buffer(
    buffer: bytes, data_map_buffer: bytes | None = None, enable_etdump: bool = False,
    debug_buffer_size: int = 0,
    program_verification: Verification = Verification.InternalConsistency,
) -> ExecuTorchModule:
    """Same as ``_load_for_executorch`` with the program (and ``.ptd``) as bytes."""
    return ExecuTorchModule(_loader(bytes(buffer), _data(data_map_buffer), enable_etdump,
                                    debug_buffer_size, program_verification), enable_etdump)


def _load_for_executorch_from_bundled_program(
    ptr: BundledModule, data_map_buffer: bytes | str | None = None, enable_etdump: bool = False,
    debug_buffer_size: int = 0,
) -> ExecuTorchModule:
    """A module over the program inside a bundled program; the second argument is the
    ``.ptd`` as bytes or as a path (ExecuTorch's two overloads)."""
    return ExecuTorchModule(_loader(ptr.program_buffer, _data(data_map_buffer), enable_etdump,
                                    debug_buffer_size, Verification.InternalConsistency),
                            enable_etdump)


def _data(data_map: bytes | str | os.PathLike | None) -> Any:
    if isinstance(data_map, (bytearray, memoryview)):
        return bytes(data_map)
    return data_map


@as_runtime_error
def _load_bundled_program_from_buffer(buffer: bytes,
                                      non_const_pool_size: int = _DEFAULT_BUNDLED_INPUT_POOL_SIZE,
                                      ) -> BundledModule:
    return BundledModule(buffer)


@as_runtime_error
def _load_program(path: str, enable_etdump: bool = False, debug_buffer_size: int = 0,
                  program_verification: Verification = Verification.Minimal,
                  data_path: str | None = None) -> ExecuTorchProgram:
    """Load a program whose methods are then loaded one at a time."""
    return ExecuTorchProgram(_loader(path, data_path, enable_etdump, debug_buffer_size,
                                     program_verification)())


@as_runtime_error
def _load_program_from_buffer(buffer: bytes, enable_etdump: bool = False,
                              debug_buffer_size: int = 0,
                              program_verification: Verification = Verification.Minimal,
                              data_path: str | None = None) -> ExecuTorchProgram:
    return ExecuTorchProgram(_loader(bytes(buffer), data_path, enable_etdump, debug_buffer_size,
                                     program_verification)())


# ---- registries, profiling, threads --------------------------------------------------------


def _get_operator_names() -> list[str]:
    """Every operator this runtime has a kernel for (``aten::add.out`` ...)."""
    return sorted(Runtime.get().operator_registry.operator_names)


def _get_registered_backend_names() -> list[str]:
    return list(Runtime.get().backend_registry.registered_backend_names)


def _is_available(backend_name: str) -> bool:
    return Runtime.get().backend_registry.is_available(backend_name)


def _create_profile_block(name: str) -> None:
    """ExecuTorch's operator profiler is compiled out of its wheels; so it is here."""


def _dump_profile_results() -> bytes:
    return b""


def _reset_profile_results() -> None:
    """Nothing to reset: see ``_create_profile_block``."""


@as_runtime_error
def _unsafe_reset_threadpool(num_threads: int) -> None:
    """Resize the thread pool kernels use (NumPy's BLAS), process-wide."""
    from ...runtime.threadpool import set_num_threads

    set_num_threads(num_threads)


def _threadpool_get_thread_count() -> int:
    from ...runtime.threadpool import get_num_threads

    return get_num_threads()
