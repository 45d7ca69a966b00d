"""The OpenVINO delegate's runtime half: ``openvino.Core().import_model(blob, device)``.

It reads the blobs ExecuTorch 1.5.1 writes (a CPU-plugin compiled-model export) and ours.
Inputs bind by index in the delegate call's order, which is the delegated subgraph's
placeholder order, not necessarily ``forward``'s; an int argument becomes an int64 ``[1]``
tensor, as in ExecuTorch's runtime. Needs ``openvino`` (the ``edgetorch[openvino]`` extra)
and numpy -- never torch. Without ``openvino``, the backend reports itself unavailable and
``load_method`` raises ``BackendNotFoundError`` (ExecuTorch's NotFound) naming the extra.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ...errors import BackendNotFoundError, InvalidArgumentError, InvalidProgramError
from ...runtime.backends import BackendExecutionContext, BackendInitContext, register_backend
from .options import PRECISIONS, OpenvinoOptions, parse_options

BACKEND_ID = "OpenvinoBackend"
INSTALL_HINT = "pip install 'edgetorch[openvino]' (openvino>=2025.1,<2026)"


@functools.cache
def _openvino() -> tuple[Any, str]:
    """``(module, "")`` or ``(None, why not)``; tried once, like ExecuTorch's dlopen."""
    try:
        import openvino
    except ImportError as e:
        return None, f"the openvino package is not installed ({e})"
    except OSError as e:  # a broken install: its shared libraries do not load
        return None, f"openvino failed to load ({e})"
    return openvino, ""


_default_precision: list[str | None] = [None]


def set_inference_precision(precision: str | None) -> None:
    """Precision for delegates whose compile specs do not name one (ExecuTorch's never do):
    ``"f32"``, ``"bf16"``, ``"f16"``, or None for the device default. Applies to methods
    loaded afterwards."""
    if precision is not None and precision not in PRECISIONS:
        raise InvalidArgumentError(f"{BACKEND_ID}: precision {precision!r} is not one of "
                                   f"{', '.join(PRECISIONS)} (or None for the device default)")
    _default_precision[0] = precision


@dataclass
class OpenvinoDelegate:
    """An imported delegate: the compiled model, one infer request, and the options used."""

    compiled: Any
    request: Any
    n_inputs: int
    n_outputs: int
    options: OpenvinoOptions

    @property
    def inference_precision(self) -> str:
        """What the compiled model computes in (``"f32"``, ``"bf16"``...), as OpenVINO says."""
        return self.compiled.get_property("INFERENCE_PRECISION_HINT").to_string()


class OpenvinoBackend:
    """Registered as ``"OpenvinoBackend"`` when this module loads (``edgetorch.runtime``
    imports it through ``edgetorch.backends.builtin``); always registered, usable when the
    openvino package is."""

    def is_available(self) -> bool:
        return _openvino()[0] is not None

    def unavailable_reason(self) -> str:
        why = _openvino()[1]
        return f"{why}; {INSTALL_HINT}" if why else ""

    def init(self, blob: memoryview, compile_specs: dict[str, bytes],
             context: BackendInitContext | None = None) -> OpenvinoDelegate:
        ov, why = _openvino()
        if ov is None:
            raise BackendNotFoundError(f"{BACKEND_ID}: {why}; {INSTALL_HINT}")
        # A cache folder is the user's choice (backend option ``cache_dir``), never the file's:
        # a path stored in a .pte must not make the runtime write files (docs/security.md);
        # ExecuTorch's runtime reads only ``device`` from the compile specs.
        user = getattr(context, "options", None) or {}
        options = replace(parse_options(compile_specs),
                          cache_dir=str(user["cache_dir"]) if user.get("cache_dir") else None)
        if options.inference_precision is None and _default_precision[0] is not None:
            options = replace(options, inference_precision=_default_precision[0])
        core = ov.Core()
        if options.device not in core.available_devices:
            raise BackendNotFoundError(
                f"{BACKEND_ID}: the delegate asks for device {options.device!r}, which OpenVINO "
                f"does not see here (available: {', '.join(core.available_devices)}); "
                "re-export with CompileSpec('device', b'CPU')")
        try:
            compiled = core.import_model(bytes(blob), options.device,
                                         _import_config(core, options))
        except RuntimeError as e:
            raise InvalidProgramError(
                f"{BACKEND_ID}: OpenVINO {ov.get_version()} cannot import the delegate blob "
                f"({str(e).strip().splitlines()[-1] if str(e).strip() else e}); blobs are tied "
                "to the OpenVINO version that wrote them: re-export with this version") from None
        return OpenvinoDelegate(compiled, compiled.create_infer_request(),
                                len(compiled.inputs), len(compiled.outputs), options)

    def execute(self, handle: OpenvinoDelegate, values: list[Any], args: list[int],
                context: BackendExecutionContext | None = None) -> None:
        n_in = handle.n_inputs
        if len(args) != n_in + handle.n_outputs:
            raise InvalidArgumentError(
                f"{BACKEND_ID}: called with {len(args)} values; the compiled model takes "
                f"{n_in} inputs and {handle.n_outputs} outputs")
        request = handle.request
        for i, idx in enumerate(args[:n_in]):
            request.set_input_tensor(i, _ov_tensor(values[idx], i))
        request.infer()
        for j, idx in enumerate(args[n_in:]):
            result = request.get_output_tensor(j).data
            slot = values[idx]
            if isinstance(slot, np.ndarray) and slot.shape == result.shape:
                np.copyto(slot, result, casting="same_kind")  # into the planned output memory
            elif context is not None and isinstance(slot, np.ndarray):
                np.copyto(context.resize(idx, result.shape), result, casting="same_kind")
            else:
                values[idx] = result.copy()  # the request reuses its output memory

    def destroy(self, handle: OpenvinoDelegate) -> None:
        handle.request = handle.compiled = None


register_backend(BACKEND_ID, OpenvinoBackend())


def _import_config(core: Any, options: OpenvinoOptions) -> dict[str, str]:
    """Properties for ``import_model``. The CPU plugin's export holds the model, not its
    precision: the precision is chosen again at import (the device default, bf16 on
    AVX512-BF16 CPUs, unless the hint says otherwise), so ``inference_precision`` must be
    passed here too -- ExecuTorch's runtime passes nothing, so there a ``.pte`` asking for f32
    still runs in the device default. ``CACHE_DIR`` is a Core property, not an import one."""
    config = options.ov_config()
    cache_dir = config.pop("CACHE_DIR", None)
    if cache_dir is not None:
        core.set_property({"CACHE_DIR": cache_dir})
    return config


def _ov_tensor(value: Any, position: int):
    ov = _openvino()[0]
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return ov.Tensor(np.array([int(value)], dtype=np.int64))
    if not isinstance(value, np.ndarray):
        raise InvalidArgumentError(
            f"{BACKEND_ID}: delegate input {position} is {type(value).__name__}; OpenVINO "
            "delegates take tensors and ints")
    array = np.ascontiguousarray(value)
    # Sharing needs a writeable buffer; a read-only one (a constant of the file) is copied.
    return ov.Tensor(array, shared_memory=array.flags.writeable)
