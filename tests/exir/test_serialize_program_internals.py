"""``exir._serialize._program`` (ExecuTorch's serializer internals): a .pte parsed into a
``PTEFile`` holds its constants and delegate blobs inline, and writing it back gives the same
bytes."""

from __future__ import annotations

import pytest
import torch

from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from edgetorch.exir import to_edge, to_edge_transform_and_lower
from edgetorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary


def _programs():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    ep = torch.export.export(model, (torch.randn(2, 4),))
    return {"portable": (to_edge(ep).to_executorch(), model),
            "xnnpack": (to_edge_transform_and_lower(
                ep, partitioner=[XnnpackPartitioner()]).to_executorch(), model)}


@pytest.mark.parametrize("kind", ["portable", "xnnpack"])
def test_deserialize_then_serialize_gives_the_same_bytes(kind):
    et, model = _programs()[kind]
    pte = deserialize_pte_binary(et.buffer)
    assert pte.program.segments == []
    if kind == "portable":  # bias and the folded transposed weight, after the empty buffer 0
        stored = [bytes(b.storage) for b in pte.program.constant_buffer]
        assert stored == [b"", model[0].bias.detach().numpy().tobytes(),
                          model[0].weight.detach().t().contiguous().numpy().tobytes()]
        assert pte.named_data is None
    else:  # the blob is inline again; the weights are named data
        assert len(pte.program.backend_delegate_data) == 1
        assert len(pte.named_data.pte_data) == 2
    assert serialize_pte_binary(pte, extract_delegate_segments=True) == et.buffer


def test_flatbuffer_program_and_extended_header_round_trip():
    from edgetorch.errors import AlignmentError
    from edgetorch.exir._serialize._flatbuffer_program import (
        _flatbuffer_to_program,
        _program_to_flatbuffer,
    )
    from edgetorch.exir._serialize._program import (
        _ExtendedHeader,
        _get_extended_header,
        _program_to_json,
    )
    from edgetorch.exir._serialize.padding import aligned_size, pad_to, padding_required

    et, _ = _programs()["xnnpack"]
    pte = deserialize_pte_binary(et.buffer)
    result = _program_to_flatbuffer(pte.program, constant_tensor_alignment=32,
                                    delegate_alignment=64)
    assert result.max_alignment == 64
    back = _flatbuffer_to_program(result.data)
    assert _program_to_json(back) == _program_to_json(pte.program)
    assert '"val_type": "Tensor"' in _program_to_json(back)  # union members are named
    with pytest.raises(ValueError, match="power of two"):
        _program_to_flatbuffer(pte.program, constant_tensor_alignment=3)
    with pytest.raises(AlignmentError):
        _program_to_flatbuffer(pte.program, delegate_alignment=0)

    header = _get_extended_header(et.buffer)  # the file has segments, so a header
    assert header is not None and header.program_size < len(et.buffer)
    assert header.segment_base_offset % 128 == 0
    assert _ExtendedHeader.from_bytes(header.to_bytes()) == header
    assert _get_extended_header(b"\0" * 8 + b"xx00" + b"\0" * 40) is None  # wrong magic
    assert _get_extended_header(b"short") is None
    assert (padding_required(17, 16), aligned_size(17, 16), pad_to(b"ab", 4)) == (15, 32,
                                                                                  b"ab\0\0")


def test_serialize_for_executorch_writes_ptd_files_with_flat_tensor():
    import copy

    from edgetorch.exir._serialize._named_data_store import NamedDataStore
    from edgetorch.exir._serialize._serialize import serialize_for_executorch
    from edgetorch.exir.config import ExecutorchBackendConfig
    from edgetorch.exir.emit import EmitterOutput
    from edgetorch.exir.scalar_type import ScalarType
    from edgetorch.exir.tensor_layout import TensorLayout
    from edgetorch.extension.flat_tensor.serialize.serialize import FlatTensorSerializer

    et, _ = _programs()["portable"]
    out = EmitterOutput(program=copy.deepcopy(deserialize_pte_binary(et.buffer).program),
                        debug_handle_map={}, method_to_delegate_debug_id_map={},
                        instruction_id_to_num_outs_map={}, mutable_data=None,
                        external_constant_buffer=[], external_constant_map={})
    store = NamedDataStore()
    weights = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    store.add_named_data("w", weights, 32, "model")
    store.add_named_data("blob", b"opaque", 1, "model")
    store.add_named_data("inline", b"in the pte", 16)
    pte, ptds = serialize_for_executorch(out, ExecutorchBackendConfig(), FlatTensorSerializer(),
                                         store.get_named_data_store_output())
    assert list(ptds) == ["model"]
    assert deserialize_pte_binary(bytes(pte)).named_data.pte_data.keys() == {"inline"}
    payload = FlatTensorSerializer().deserialize(ptds["model"])
    w = payload.named_data["w"]
    assert payload.buffers[w.buffer_index] == weights.numpy().tobytes()
    assert w.tensor_layout == TensorLayout(ScalarType.FLOAT, [2, 3], [0, 1])
    blob = payload.named_data["blob"]
    assert payload.buffers[blob.buffer_index] == b"opaque" and blob.tensor_layout is None
