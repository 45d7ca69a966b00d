"""``serialize_for_executorch``: the emitter's output as a ``.pte`` and its ``.ptd`` files
(ExecuTorch's ``exir._serialize._serialize``)."""

from __future__ import annotations

from ...schema import program as s
from ..tensor_layout import TensorLayout
from ._cord import Cord
from ._named_data_store import NamedDataStore, NamedDataStoreOutput
from ._program import PTEFile, serialize_pte_binary
from .data_serializer import DataPayload, DataSerializer


def _external_tensor_layouts(program: s.Program) -> dict[str, TensorLayout]:
    """{fully qualified name: layout} of the tensors the program reads from external files."""
    layouts = {}
    for plan in program.execution_plan:
        for value in plan.values:
            info = getattr(value.val, "extra_tensor_info", None)
            if info is not None and info.fully_qualified_name is not None \
                    and info.location == s.TensorDataLocation.EXTERNAL:
                t = value.val
                layouts[info.fully_qualified_name] = TensorLayout(t.scalar_type, list(t.sizes),
                                                                  list(t.dim_order))
    return layouts


def serialize_for_executorch(emitter_output, config, data_serializer: DataSerializer,
                             named_data_store: NamedDataStoreOutput | None = None,
                             ) -> tuple[Cord, dict[str, Cord]]:
    """The ``.pte`` (with the store's ``pte_data``) and ``{tag: .ptd}``: the emitter's
    external constants and the store's ``external_data``, one file per tag written by
    ``data_serializer``. ``config`` is an ``ExecutorchBackendConfig`` (segment and
    alignment settings)."""
    pte_named = None
    if named_data_store is not None and named_data_store.pte_data:
        pte_named = NamedDataStoreOutput(named_data_store.buffers, named_data_store.pte_data, {})
    pte = Cord(serialize_pte_binary(
        PTEFile(emitter_output.program, emitter_output.mutable_data, pte_named),
        extract_delegate_segments=config.extract_delegate_segments,
        segment_alignment=config.segment_alignment,
        constant_tensor_alignment=config.constant_tensor_alignment,
        delegate_alignment=config.delegate_alignment))

    store = NamedDataStore()
    constants = emitter_output.external_constant_map or {}
    if constants:
        layouts = _external_tensor_layouts(emitter_output.program)
        for tag, fqn_to_index in constants.items():
            for fqn, index in fqn_to_index.items():
                store.add_named_data(fqn, emitter_output.external_constant_buffer[index],
                                     external_tag=tag, tensor_layout=layouts.get(fqn))
    if named_data_store is not None:
        if not constants:  # the caller's store as it is (its buffers, its entries)
            store_out = named_data_store
        else:
            store.merge_named_data_store(named_data_store)
            store_out = store.get_named_data_store_output()
    else:
        store_out = store.get_named_data_store_output()
    ptd_files = {tag: data_serializer.serialize(DataPayload(store_out.buffers, entries))
                 for tag, entries in store_out.external_data.items() if entries}
    return pte, ptd_files
