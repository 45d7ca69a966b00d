"""``to_edge`` and the program managers, with ExecuTorch's names and call shapes."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, BinaryIO

from torch.export import ExportedProgram

from ...errors import ExportError, PassError
from ...schema import program as S
from ...schema.ptd import serialize_ptd
from ...schema.pte import serialize_pte
from .._serialize._named_data_store import buffer_bytes
from ..backend import preserve
from ..backend.backend_api import to_backend as _to_backend
from ..backend.preserve import _remove_invalid_ops_for_not_decompose  # noqa: F401  (ExecuTorch's path)
from ..config import EdgeCompileConfig, ExecutorchBackendConfig
from ..edge import _decomposition_table, to_edge_dialect, to_edge_ops
from ..emit import EmitterOutput, ProgramState
from ..emit._emit_program import emitter_output
from ..emit.emitter import constant_method_plan
from ..foreign_warnings import quiet
from ..lowering import copy_program, emit_method, plan_method
from ..memory_planning import MemoryPlan
from ..pass_base import adopt_graph_module, pass_name, run_passes
from ..passes.lift_constants import lift_constant_tensor_pass  # noqa: F401  (ExecuTorch's path)
from ..verifier import verify_edge_program

SCHEMA_VERSION = S.SCHEMA_VERSION  # Program.version as ExecuTorch 1.5 writes it


def _as_dict(programs: ExportedProgram | dict[str, ExportedProgram]) -> dict[str, ExportedProgram]:
    if isinstance(programs, ExportedProgram):
        return {"forward": programs}
    if isinstance(programs, dict) and all(isinstance(v, ExportedProgram) for v in programs.values()):
        return dict(programs)
    raise TypeError(
        "expected an ExportedProgram or a dict {method_name: ExportedProgram}, got "
        f"{type(programs).__name__}; create one with torch.export.export(model, example_inputs)"
    )


@quiet
def to_edge(
    programs: ExportedProgram | dict[str, ExportedProgram],
    constant_methods: dict[str, Any] | None = None,
    compile_config: EdgeCompileConfig | None = None,
    generate_etrecord: bool = False,
) -> EdgeProgramManager:
    """Lower ATen programs to the Edge dialect and verify them as ExecuTorch's Edge verifier
    does (whether the runtime can run every op is ``to_executorch``'s check)."""
    config = compile_config or EdgeCompileConfig()
    edge = {name: to_edge_dialect(ep, config) for name, ep in _as_dict(programs).items()}
    manager = EdgeProgramManager(edge, constant_methods, config)
    return _with_etrecord(manager, programs, edge) if generate_etrecord else manager


def _with_etrecord(manager: EdgeProgramManager, programs: Any,
                   edge: dict[str, ExportedProgram],
                   extra: dict[str, Any] | None = None) -> EdgeProgramManager:
    """Keep the edge-stage ETRecord on the manager (``to_executorch`` completes it). As in
    ExecuTorch, it records the Edge programs before partitioning: delegated nodes keep their
    debug handles there, so the Inspector can name what a delegate call ran."""
    from ...devtools.etrecord._etrecord import record_for  # devtools is optional at import

    manager._etrecord = record_for(programs, edge, extra)
    return manager


@quiet
def to_edge_transform_and_lower(
    programs: ExportedProgram | dict[str, ExportedProgram],
    transform_passes: list | dict[str, list] | None = None,
    partitioner: Any = None,
    constant_methods: dict[str, Any] | None = None,
    compile_config: EdgeCompileConfig | None = None,
    generate_etrecord: bool = False,
) -> EdgeProgramManager:
    """``to_edge`` + ``transform`` + ``to_backend`` in one step.

    ``partitioner`` is a list tried in order for every method, or ``{method: [...]}``. The
    operators each partitioner's ``ops_to_not_decompose`` names stay whole for it to take
    (and must be taken). What is left after lowering is verified like ``to_edge``'s output,
    the partitioners' operators counting as preserved.
    """
    config = compile_config or EdgeCompileConfig()
    aten = _as_dict(programs)
    by_method = preserve.partitioners_by_method(partitioner, aten)
    edge, kept = {}, {}
    for name, ep in aten.items():
        kept[name] = preserve.preserved_ops(ep, by_method[name])
        keep = preserve.all_ops(kept[name])
        if preserve.has_filter(kept[name]):  # decompose what the filters turn down
            ep = ep.run_decompositions(_decomposition_table(config, keep))
            parked = preserve.park_accepted(ep, kept[name])
            edge[name] = to_edge_dialect(ep, config)
            preserve.unpark(edge[name], parked)
        else:
            edge[name] = to_edge_dialect(ep, config, keep=keep)
    manager = EdgeProgramManager(edge, constant_methods,
                                 dataclasses.replace(config, _check_ir_validity=False))
    before_lowering = _etrecord_programs(edge) if generate_etrecord else {}
    extra = {}
    if transform_passes is not None:
        manager = manager.transform(transform_passes)
        if generate_etrecord:  # the graph after the user's passes, as ExecuTorch records it
            extra["edge_after_transform"] = EdgeProgramManager(
                _etrecord_programs(manager._edge_programs), None, manager.compile_config)
    for i in range(max((len(ps) for ps in by_method.values()), default=0)):
        manager = manager.to_backend(
            {name: ps[i] for name, ps in by_method.items() if i < len(ps)})
    for name in manager.methods:
        ep = manager.exported_program(name)
        preserve.decompose_declined(ep, kept[name], _decomposition_table(config, []))
        preserve.check_consumed(name, ep, kept[name])
    result = EdgeProgramManager(manager._edge_programs, constant_methods, config,
                                preserve_ops=[op for ops in kept.values()
                                              for op in preserve.all_ops(ops)])
    return (_with_etrecord(result, programs, before_lowering, extra) if generate_etrecord
            else result)


def _transform(self: ExportedProgram, *passes: Any,
               override_verifiers: list | None = None) -> ExportedProgram:
    """``passes`` run on a copy of ``self``; the copy is returned, or ``self`` when no pass
    changed anything (ExecuTorch's private helper, used by its tests and testers)."""
    if any(isinstance(p, (list, tuple)) for p in passes):
        raise TypeError(f"_transform takes passes as separate arguments, got {list(passes)}; "
                        "pass verifiers with override_verifiers=")
    ep = copy_program(self)
    changed = False
    for i, p in enumerate(passes):
        try:
            changed = run_passes(ep, [p]) or changed
        except Exception as e:  # every failure named as torch.fx's pass manager names it
            before = [pass_name(q) for q in passes[:i]]
            raise PassError(f"An error occurred when running the {pass_name(p)!r} pass after "
                            f"the following passes: {before}\n  {type(e).__name__}: {e}") from e
    if not changed:
        return self
    to_edge_ops(ep)
    if override_verifiers:
        ep._verifiers = list(override_verifiers)
    return ep


def _update_exported_program_graph_module(exported_program: ExportedProgram,
                                          gm: Any, override_verifiers: list | None = None
                                          ) -> ExportedProgram:
    """A copy of ``exported_program`` whose graph is ``gm`` (a pass's rebuilt graph module)."""
    ep = copy_program(exported_program)
    adopt_graph_module(ep, gm)
    if override_verifiers:
        ep._verifiers = list(override_verifiers)
    return ep


def _copy_module(new_prog: Any, new_gm: Any) -> None:
    """Make ``new_prog`` (a graph module) hold ``new_gm``'s graph, submodules and tensors."""
    import torch

    new_prog.meta.update(new_gm.meta)
    new_prog.graph = new_gm.graph
    for name, _ in list(new_prog.named_children()):
        delattr(new_prog, name)
    for name, mod in new_gm.named_children():
        setattr(new_prog, name, mod)
    for node in new_gm.graph.nodes:
        if node.op == "get_attr":
            t = getattr(new_gm, node.target, None)
            if isinstance(t, torch.Tensor):
                setattr(new_prog, node.target, t)


def _etrecord_programs(edge: dict[str, ExportedProgram]) -> dict[str, ExportedProgram]:
    return {name: copy_program(ep) for name, ep in edge.items()}


class EdgeProgramManager:
    """A set of Edge-dialect methods, ready for ``transform``, ``to_backend``, ``to_executorch``."""

    def __init__(self, edge_programs: dict[str, ExportedProgram] | ExportedProgram,
                 constant_methods: dict[str, Any] | None = None,
                 compile_config: EdgeCompileConfig | None = None,
                 core_aten_ops_exception_list: list | None = None,
                 preserve_ops: list | None = None) -> None:
        """``core_aten_ops_exception_list`` and ``preserve_ops`` add to the config's lists for
        the Edge verifier (ExecuTorch's arguments)."""
        self.compile_config = compile_config or EdgeCompileConfig()
        if isinstance(edge_programs, ExportedProgram):  # one method, as ExecuTorch accepts
            edge_programs = {"forward": edge_programs}
        self._edge_programs = dict(edge_programs)
        self._config_methods = dict(constant_methods or {})
        self._etrecord: Any = None  # set by generate_etrecord=True
        clash = set(self._edge_programs) & set(self._config_methods)
        if clash:
            raise ExportError(f"names used both as methods and constant methods: {sorted(clash)}")
        self._exceptions = list(core_aten_ops_exception_list or [])  # beyond the config's
        self._preserved = list(preserve_ops or [])
        if self.compile_config._check_ir_validity:
            config = self.compile_config
            exceptions = [*(config._core_aten_ops_exception_list or []), *self._exceptions]
            preserved = [*(config.preserve_ops or []), *self._preserved]
            for name, ep in self._edge_programs.items():
                verify_edge_program(ep, name, exceptions, preserved)

    @property
    def methods(self) -> set[str]:
        return set(self._edge_programs)

    @property
    def config_methods(self) -> set[str]:
        return set(self._config_methods)

    def exported_program(self, method_name: str = "forward") -> ExportedProgram:
        try:
            return self._edge_programs[method_name]
        except KeyError:
            raise KeyError(f"no method {method_name!r}; methods: {sorted(self.methods)}") from None

    def transform(self, passes: Any) -> EdgeProgramManager:
        """Run passes (``ExportPass``, ``PassBase``, ``PassManager`` or ``gm -> PassResult``
        callables) on every method, or per method with ``{method: [...]}``; the result is
        verified again as in ``to_edge``."""
        new = {}
        for name, ep in self._edge_programs.items():
            method_passes = passes.get(name, []) if isinstance(passes, dict) else passes
            if callable(method_passes):  # one pass or a PassManager
                method_passes = [method_passes]
            ep = copy_program(ep)
            run_passes(ep, list(method_passes), name)
            to_edge_ops(ep)  # operators a pass inserted as torch.ops.* join the Edge dialect
            new[name] = ep
        return self._derived(new)

    @quiet
    def to_backend(self, partitioner: Any) -> EdgeProgramManager:
        """Delegate with ``partitioner`` (every method) or ``{method: partitioner}`` (only
        those methods); what stays undelegated is verified as in ``to_edge``."""
        by_method = partitioner if isinstance(partitioner, dict) else dict.fromkeys(
            self._edge_programs, partitioner)
        unknown = set(by_method) - set(self._edge_programs)
        if unknown:
            raise ExportError(f"partitioners given for unknown methods {sorted(unknown)}; "
                              f"methods: {sorted(self.methods)}")
        new = {name: _to_backend(ep, by_method[name]) if name in by_method else ep
               for name, ep in self._edge_programs.items()}
        return self._derived(new)

    def _derived(self, programs: dict[str, ExportedProgram]) -> EdgeProgramManager:
        """A manager for ``programs`` that keeps this one's configuration and ETRecord (which
        records the Edge program as ``to_edge`` made it, before transforms and delegation)."""
        manager = EdgeProgramManager(programs, self._config_methods, self.compile_config,
                                     self._exceptions, self._preserved)
        manager._etrecord = self._etrecord
        return manager

    @quiet
    def to_executorch(self, config: ExecutorchBackendConfig | None = None) -> ExecutorchProgramManager:
        config = config or ExecutorchBackendConfig()
        if config.fold_constants is None:  # see ExecutorchBackendConfig.fold_constants
            config = dataclasses.replace(config, fold_constants=self._etrecord is None)
        if config.fuse_batch_norm is None:  # (the same for fuse_batch_norm)
            config = dataclasses.replace(config, fuse_batch_norm=self._etrecord is None)
        state = ProgramState()
        lowered: dict[str, ExportedProgram] = {}
        plans = []
        configs = _per_method_configs(config, sorted(self._edge_programs))
        for name, method_config in configs.items():  # ExecuTorch orders methods by name
            lowered[name] = plan_method(name, self._edge_programs[name], method_config)
        for planner in {id(c.memory_planning_pass): c.memory_planning_pass
                        for c in configs.values()}.values():
            if hasattr(planner, "run_multimethod"):  # mutable buffers shared by methods
                planner.run_multimethod()
        for name, ep in lowered.items():
            plans.append(emit_method(name, ep, configs[name], state))
        for name, value in self._config_methods.items():
            plans.append(constant_method_plan(name, value, state))
        program = S.Program(version=SCHEMA_VERSION, execution_plan=plans)
        manager = ExecutorchProgramManager(lowered, program, state, config, self._config_methods)
        if self._etrecord is not None:
            manager._etrecord = self._etrecord.copy()
            manager._etrecord.add_executorch_program(manager)
        return manager

    def __repr__(self) -> str:
        return f"EdgeProgramManager(methods={sorted(self.methods)}, config_methods={sorted(self.config_methods)})"


def _per_method_configs(config: ExecutorchBackendConfig,
                        names: list[str]) -> dict[str, ExecutorchBackendConfig]:
    """One config per method: ``memory_planning_pass`` may be ``{method: pass}`` (a method
    not named gets the default planner, as in ExecuTorch)."""
    planners = config.memory_planning_pass
    if not isinstance(planners, dict):
        return dict.fromkeys(names, config)
    return {n: dataclasses.replace(config, memory_planning_pass=planners[n] if n in planners
                                   else ExecutorchBackendConfig().memory_planning_pass)
            for n in names}


class ExecutorchProgramManager:
    """The emitted program: ``buffer`` holds the ``.pte`` bytes."""

    def __init__(self, lowered: dict[str, ExportedProgram], program: S.Program,
                 state: ProgramState, config: ExecutorchBackendConfig,
                 config_methods: dict[str, Any]) -> None:
        self._lowered = lowered
        self._program = program
        self._state = state
        self._config = config
        self._config_methods = config_methods
        self._buffer: bytes | None = None
        self._emitted: EmitterOutput | None = None
        self._etrecord: Any = None

    def get_etrecord(self) -> Any:
        """The ETRecord recorded with ``generate_etrecord=True`` (``edgetorch.devtools.ETRecord``)."""
        if self._etrecord is None:
            raise RuntimeError("ETRecord was not generated; pass generate_etrecord=True to "
                               "to_edge / to_edge_transform_and_lower")
        return self._etrecord

    @property
    def methods(self) -> set[str]:
        return set(self._lowered)

    @property
    def config_methods(self) -> set[str]:
        return set(self._config_methods)

    @property
    def executorch_program(self) -> S.Program:
        """The emitted ``Program`` as ExecuTorch's emitter leaves it: constants in
        ``constant_buffer`` (entry 0 the reserved empty one), delegate blobs inline in
        ``backend_delegate_data``; ``buffer`` moves them to segments."""
        return self._emitter_output.program

    def exported_program(self, method_name: str = "forward") -> ExportedProgram:
        return self._lowered[method_name]

    @property
    def debug_handle_map(self) -> dict[str, dict[int, int | list[int]]]:
        """``{method: {instruction index: debug handle | [handles]}}`` (ExecuTorch's shape):
        which Edge node(s) each kernel or delegate instruction of chain 0 runs. A delegate
        call lists the handles of every node it took over."""
        return self._state.debug_handle_map

    @property
    def delegate_map(self) -> dict[str, dict[int, dict[str, Any]]]:
        """``{method: {delegate instruction: {"name": backend id, "delegate_map": the
        backend's {delegate debug identifier: handles}}}}`` (ExecuTorch's shape)."""
        return self._state.delegate_map

    @property
    def instruction_id_to_num_outs_map(self) -> dict[str, dict[int, int]]:
        """``{method: {delegate instruction: number of outputs}}`` (ExecuTorch's shape; what
        the Inspector needs to split a delegate call's logged arguments into outputs)."""
        return self._state.instruction_id_to_num_outs_map

    @property
    def _emitter_output(self) -> EmitterOutput:
        """ExecuTorch's emitter output: the program with its constants and delegate blobs
        inline (``Program.constant_buffer``, ``backend_delegate_data``) and the maps above."""
        if self._emitted is None:
            self._emitted = emitter_output(self._program.execution_plan, self._state)
        return self._emitted

    def memory_plan(self, method_name: str = "forward") -> MemoryPlan:
        return self._lowered[method_name].graph_module.meta["memory_plan"]

    @property
    def buffer(self) -> bytes:
        if self._buffer is None:
            self._buffer = serialize_pte(
                self._program,
                constant_buffers=self._state.constant_buffers,
                delegate_blobs=self._state.delegate_blobs,
                named_data=self._named_data(),
                extract_delegate_segments=self._config.extract_delegate_segments,
                segment_alignment=self._config.segment_alignment,
                constant_tensor_alignment=self._config.constant_tensor_alignment or 16,
                delegate_alignment=self._config.delegate_alignment,
                mutable_buffers=(self._state.mutable_buffers
                                 if len(self._state.mutable_buffers) > 1 else None),
            )
        return self._buffer

    def _named_data(self) -> dict[str, tuple[bytes, int]] | None:
        store = self._state.named_data
        if not store.pte_data:
            return None
        return {key: (buffer_bytes(store.buffers[e.buffer_index]), e.alignment)
                for key, e in store.pte_data.items()}

    @property
    def data_files(self) -> dict[str, bytes]:
        """External weight files (``{tag}.ptd`` name -> bytes), when configured: external
        constants, and the named data delegates placed outside the .pte (opaque blobs)."""
        by_tag: dict[str, dict] = {}
        for tag, tensors in self._state.external.items():
            by_tag[tag] = {fqn: (data, spec.scalar_type, list(spec.shape), list(spec.dim_order))
                           for fqn, (data, spec) in tensors.items()}
        store = self._state.named_data
        for tag, entries in store.external_data.items():
            named = by_tag.setdefault(tag, {})
            for key, entry in entries.items():
                named[key] = (buffer_bytes(store.buffers[entry.buffer_index]), None, [], [],
                              entry.alignment)
        return {f"{tag}.ptd": serialize_ptd(named, alignment=16) for tag, named in by_tag.items()}

    @property
    def _tensor_data(self) -> dict[str, bytes]:
        """ExecuTorch's private name for :attr:`data_files`, keyed by tag (no ``.ptd``);
        a fresh dict each time."""
        return {name.removesuffix(".ptd"): data for name, data in self.data_files.items()}

    def write_tensor_data_to_file(self, outdir: str | os.PathLike) -> None:
        """Write the external weights (``ExecutorchBackendConfig(external_constants=...)``)
        as ``<outdir>/<tag>.ptd`` files."""
        os.makedirs(outdir, exist_ok=True)
        for name, data in self.data_files.items():
            with open(os.path.join(outdir, name), "wb") as f:
                f.write(data)

    def write_to_file(self, open_file: BinaryIO) -> None:
        open_file.write(self.buffer)

    def save(self, path: str | os.PathLike) -> None:
        path = os.fspath(path)
        if not path.endswith(".pte"):
            path += ".pte"
        with open(path, "wb") as f:
            self.write_to_file(f)

    def dump_executorch_program(self, verbose: bool = False) -> None:
        for plan in self._program.execution_plan:
            print(f"method {plan.name}: {len(plan.values)} values, "
                  f"{len(plan.chains[0].instructions) if plan.chains else 0} instructions, "
                  f"arenas {plan.non_const_buffer_sizes[1:]}")
            if verbose:
                for i, ins in enumerate(plan.chains[0].instructions):
                    print(f"  {i:4d} {ins.instr_args}")

    def __repr__(self) -> str:
        return f"ExecutorchProgramManager(methods={sorted(self.methods)}, {len(self.buffer)} bytes)"
