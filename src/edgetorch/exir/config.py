"""Compile configurations, with ExecuTorch's names and defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .passes.memory_planning_pass import MemoryPlanningPass


@dataclass
class EdgeCompileConfig:
    """Options of ``to_edge``.

    ``_check_ir_validity`` runs ExecuTorch's Edge verifier: ATen operators in core ATen, Edge
    dtypes as ``edge.yaml`` allows; custom operators pass. ``preserve_ops`` keeps those ops
    out of the core-ATen decomposition, ``_core_aten_ops_exception_list`` lets non-core ops
    through the verifier; either way a kernel or a backend must handle them, which
    ``to_executorch`` checks (see ``ExecutorchBackendConfig.target_runtime_operators``).
    """

    _check_ir_validity: bool = True
    _use_edge_ops: bool = True
    _skip_dim_order: bool = False
    _core_aten_ops_exception_list: list[Any] = field(default_factory=list)
    preserve_ops: list[Any] = field(default_factory=list)


def _default_sym_shape_eval_pass() -> Any:
    from .passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass

    return ConstraintBasedSymShapeEvalPass()


def _default_propagate_device_config() -> Any:
    from .passes.propagate_device_config import PropagateDeviceConfig

    return PropagateDeviceConfig()


def _default_memory_planning_pass() -> MemoryPlanningPass:
    from .passes.memory_planning_pass import MemoryPlanningPass

    return MemoryPlanningPass()


@dataclass
class ExecutorchBackendConfig:
    """Options of ``EdgeProgramManager.to_executorch``."""

    passes: list[Any] = field(default_factory=list)
    memory_planning_pass: Any = field(default_factory=_default_memory_planning_pass)
    extract_delegate_segments: bool = True
    segment_alignment: int = 128
    constant_tensor_alignment: int | None = None
    delegate_alignment: int | None = None
    remove_view_copy: bool = True
    # True: every weight goes to "_default_external_constant.ptd"; or a callable
    # (placeholder torch.fx.Node) -> tag | None choosing the .ptd file (tag) per weight.
    external_constants: Any = False
    # Every weight that has a gradient output (a training program) goes to the default file.
    external_mutable_weights: bool = False
    emit_stacktrace: bool = False
    # ExecuTorch defaults to False; we name mutable buffers by default so that the runtime can
    # read, write and reset them by name (a few bytes per buffer).
    emit_mutable_buffer_names: bool = True
    # Fold operators whose inputs are all constants (e.g. the weight transpose of a Linear)
    # into new constants when that does not grow the file. ExecuTorch leaves them to run time.
    # None (the default): fold, except for a program that records an ETRecord
    # (generate_etrecord=True), whose instructions, profile events and numeric-gap rows then
    # stay those of ExecuTorch's program (native_call_permute_copy.out included).
    fold_constants: bool | None = None
    # Fold an inference BatchNorm into the convolution before it (passes/fuse_batch_norm.py),
    # as XNNPACK's preprocess does for its nodes. ExecuTorch leaves them to run time. None
    # (the default): fuse, except for a program that records an ETRecord (as fold_constants).
    fuse_batch_norm: bool | None = None
    # ExecuTorch's quant fusion: weight-only quantized embeddings become one
    # quantized_decomposed::embedding_{byte,4bit,2bit} kernel (exir/passes/quant_fusion.py).
    do_quant_fusion_and_const_prop: bool = False
    # How a dynamic tensor's size becomes the size it is planned at (a graph-module pass over
    # the tensor specs): its constraint upper bound (default) or its example value.
    sym_shape_eval_pass: Any = field(default_factory=_default_sym_shape_eval_pass)
    # ExecuTorch's experimental re-inplacing (exir/passes/reinplace.py): index_put on a dead or
    # mutable tensor becomes index_put_, which needs no buffer of its own.
    run_reinplace_pass: bool = False
    reinplace_extra_ops: Any = None  # more functional ops to re-inplace (a frozenset)
    # Delegates whose compile specs name a target_device (PropagateDevicePass): True (as
    # ExecuTorch) plans their tensors in arenas of that device, with host/device copies at
    # the boundary; False only tags them and plans everything in host memory.
    enable_non_cpu_memory_planning: bool = True
    # PropagateDeviceConfig, or {method: PropagateDeviceConfig}.
    propagate_device_config: Any = field(default_factory=_default_propagate_device_config)
    # to_executorch refuses an operator left outside delegates that edgetorch's runtime has no
    # kernel for (or no kernel for its dtype), so no .pte is written that the runtime cannot
    # run. A deployment whose ExecuTorch runtime links its own kernel library names those
    # operators here ("mylib::foo.out", "mylib::foo" for every overload, or torch.ops.mylib.foo):
    # they are written unchecked, and edgetorch's runtime refuses the file at load_method
    # (OperatorMissingError) unless a kernel is registered with @edgetorch.kernels.kernel.
    target_runtime_operators: list[Any] = field(default_factory=list)
