"""``to_executorch``'s pipeline for one method: an explicit, ordered list of steps.

Each step is ``(name, fn(ep, config) -> None)``; a failure names the step and the steps that
ran before it, so a broken user pass or a planner problem is easy to place.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

from ..errors import EdgeTorchError, PassError
from ..kernels.quantized import aot as _quantized_aot  # noqa: F401  (quantized out variants)
from ..schema import program as S
from .config import ExecutorchBackendConfig
from .emit import MethodEmitter, ProgramState
from .pass_base import run_passes
from .passes.constant_fold import fold_constants
from .passes.fuse_batch_norm import fuse_batch_norm
from .passes.insert_write_back_for_buffers_pass import insert_write_back
from .passes.quant_fusion import quant_fusion_and_const_prop
from .passes.replace_view_copy_with_view_pass import view_copy_to_view
from .passes.spec_prop import propagate_specs, root
from .passes.to_out_variant import to_out_variants
from .verifier import provided_names, verify_runtime_support

Step = tuple[str, Callable[[ExportedProgram, ExecutorchBackendConfig], object]]


def _reinplace(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    if config.run_reinplace_pass or config.reinplace_extra_ops:
        from .passes.reinplace import DEFAULT_INPLACEABLE_OPS, reinplace_pass

        reinplace_pass(ep, DEFAULT_INPLACEABLE_OPS | frozenset(config.reinplace_extra_ops or ()))


def _user_passes(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    run_passes(ep, config.passes)


def _legalize_dim_order(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    from .passes.legalize_portable_dim_order_pass import (
        LegalizePortableDimOrderPass,
        needs_legalization,
    )

    if needs_legalization(ep.graph_module):
        run_passes(ep, [LegalizePortableDimOrderPass()])


def _quant_fusion(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    if config.do_quant_fusion_and_const_prop:
        quant_fusion_and_const_prop(ep)


def _reinplace_custom_ops(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    # Export functionalizes a custom op that mutates an argument (llama::update_cache writing
    # a KV-cache buffer) into auto_functionalized(op, ...); the runtime's kernel writes in
    # place, so the original call comes back, as in ExecuTorch's to_executorch.
    if any(n.op == "call_function" and getattr(n.target, "__name__", "").startswith(
            "auto_functionalized") for n in ep.graph.nodes):
        from torch.export._remove_auto_functionalized_pass import (
            unsafe_remove_auto_functionalized_pass,
        )

        unsafe_remove_auto_functionalized_pass(ep)


def _runtime_support(ep: ExportedProgram, config: ExecutorchBackendConfig,
                     name: str = "forward") -> None:
    verify_runtime_support(ep, name, provided_names(config.target_runtime_operators))


def _write_back(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    insert_write_back(ep)


def _fuse_batch_norm(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    if config.fuse_batch_norm is not False:  # None: fuse (resolved as fold_constants is)
        fuse_batch_norm(ep)


def _fold(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    if config.fold_constants is not False:  # None: fold (the manager resolves it for ETRecords)
        fold_constants(ep)


def _views(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    if config.remove_view_copy:
        view_copy_to_view(ep)


def _out_variants(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    to_out_variants(ep)


def _specs(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    propagate_specs(ep)


def _devices(ep: ExportedProgram, config: ExecutorchBackendConfig, name: str = "forward") -> None:
    from .passes.propagate_device_pass import place_on_devices

    place_on_devices(ep.graph_module, config, name)


def _sym_shapes(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    if config.sym_shape_eval_pass is not None:
        config.sym_shape_eval_pass(ep.graph_module)


def _plan(ep: ExportedProgram, config: ExecutorchBackendConfig) -> None:
    planner = config.memory_planning_pass
    if hasattr(planner, "enable_non_cpu_memory_planning"):  # the config decides, as ExecuTorch's
        planner.enable_non_cpu_memory_planning = config.enable_non_cpu_memory_planning
    planner.run(ep.graph_module, ep.graph_signature)


def share_view_bytes(ep: ExportedProgram) -> None:
    """Views share their base's bytes (after every method is planned: ``run_multimethod`` may
    still move mutable buffers)."""
    for node in ep.graph.nodes:
        spec = node.meta.get("spec")
        if getattr(spec, "alias_of", None) is not None:
            base = root(spec)
            spec.mem_id, spec.mem_offset = base.mem_id, base.mem_offset


STEPS: list[Step] = [
    ("quant fusion and constant propagation (do_quant_fusion_and_const_prop)", _quant_fusion),
    ("re-inplace (run_reinplace_pass)", _reinplace),
    ("user passes (ExecutorchBackendConfig.passes)", _user_passes),
    ("contiguous inputs for portable kernels (LegalizePortableDimOrderPass)",
     _legalize_dim_order),
    ("custom ops mutate in place (remove auto_functionalized)", _reinplace_custom_ops),
    ("every operator has a kernel (target_runtime_operators)", _runtime_support),
    ("write back mutated buffers", _write_back),
    ("fuse batch norm into convolutions (fuse_batch_norm)", _fuse_batch_norm),
    ("fold constants", _fold),
    ("view_copy -> view", _views),
    ("to out variants", _out_variants),
    ("tensor specs", _specs),
    ("device placement of delegate tensors (PropagateDevicePass)", _devices),
    ("sizes of dynamic tensors (sym_shape_eval_pass)", _sym_shapes),
    ("memory planning", _plan),
]


DEFAULT_EXTERNAL_TAG = "_default_external_constant"  # ExecuTorch's file name for the .ptd


def _external_tagger(config: ExecutorchBackendConfig, ep: ExportedProgram):
    """Which constants go to a .ptd file, and which (a function of the placeholder node, as
    ExecuTorch's ``external_constants_pass``): ``external_constants`` is a bool (every weight
    to ``_default_external_constant.ptd``) or a callable ``node -> tag | None``; with
    ``external_mutable_weights`` every weight that has a gradient output goes to the default
    file whatever the callable says."""
    ext = config.external_constants
    trained = set()
    if config.external_mutable_weights:
        grads = {o.target for o in ep.graph_signature.output_specs
                 if o.kind == OutputKind.GRADIENT_TO_PARAMETER}
        trained = {name for name, fqn in ep.graph_signature.inputs_to_parameters.items()
                   if fqn in grads}
    if not ext and not trained:
        return None

    def tag(node: torch.fx.Node) -> str | None:
        if node.op == "placeholder" and node.target in trained:
            return DEFAULT_EXTERNAL_TAG
        if ext is True:
            return DEFAULT_EXTERNAL_TAG
        return ext(node) if callable(ext) else None
    return tag


def copy_program(ep: ExportedProgram) -> ExportedProgram:
    """A deep copy of ``ep`` whose graph, signature and weight dicts are new but whose weight
    tensors are shared: no step of ``to_executorch`` writes a weight in place (folding and
    fusion add new constants), and cloning every weight was most of the copy's time."""
    memo: dict[int, object] = {id(t): t for t in (*ep.state_dict.values(), *ep.constants.values())
                               if isinstance(t, torch.Tensor)}
    with warnings.catch_warnings():  # torch warns about its own pytree internals while copying
        warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
        return copy.deepcopy(ep, memo)


def lower_method(name: str, edge_ep: ExportedProgram, config: ExecutorchBackendConfig,
                 state: ProgramState) -> tuple[ExportedProgram, S.ExecutionPlan]:
    ep = plan_method(name, edge_ep, config)
    return ep, emit_method(name, ep, config, state)


def plan_method(name: str, edge_ep: ExportedProgram, config: ExecutorchBackendConfig
                ) -> ExportedProgram:
    """Every step of ``to_executorch`` up to emission, on ``edge_ep`` itself (returned, memory
    planned). As in ExecuTorch, ``to_executorch`` lowers the Edge program in place: afterwards
    the EdgeProgramManager's program holds the out variants and the plan, and a second
    ``to_executorch`` starts from that lowered graph (every step leaves lowered nodes alone)."""
    ep = edge_ep
    done: list[str] = []
    for step_name, fn in STEPS:
        try:
            if fn in (_devices, _runtime_support):  # steps that name the method
                fn(ep, config, name)
            else:
                fn(ep, config)
        except EdgeTorchError:
            raise
        except Exception as e:
            before = ", ".join(done) or "none"
            raise PassError(
                f"method {name!r}: step '{step_name}' of to_executorch failed: "
                f"{type(e).__name__}: {e}\n  steps that ran before it: {before}"
            ) from e
        done.append(step_name)
    return ep


def emit_method(name: str, ep: ExportedProgram, config: ExecutorchBackendConfig,
                state: ProgramState) -> S.ExecutionPlan:
    share_view_bytes(ep)
    return MethodEmitter(name, ep, state, config.emit_stacktrace,
                         config.emit_mutable_buffer_names, _external_tagger(config, ep)).emit()
