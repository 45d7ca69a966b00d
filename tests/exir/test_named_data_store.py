"""The named-data store backends write their weights into (``exir._serialize``): bytes, files
kept on disk and torch tensors; keys unique, equal bytes stored once; ``Cord`` pieces; sharding
the ``.pte``'s keys into external files."""

from __future__ import annotations

import io

import pytest
import torch

from edgetorch.errors import NamedDataError
from edgetorch.exir._serialize._cord import Cord, FileBackedData
from edgetorch.exir._serialize._named_data_store import NamedDataStore
from edgetorch.exir._serialize.data_serializer import DataEntry
from edgetorch.exir.scalar_type import ScalarType
from edgetorch.exir.tensor_layout import TensorLayout


def test_cord_shares_pieces_and_streams_them(tmp_path):
    src = tmp_path / "blob.bin"
    src.write_bytes(b"on disk")
    with FileBackedData.move_from(str(src)) as blob:
        assert not src.exists() and len(blob) == 7
        cord = Cord(b"head:")
        cord.append(blob)
        copy = Cord(cord)
        assert copy._buffers[1] is blob  # appended, not copied
        out = io.BytesIO()
        copy.write_to_file(out)
        assert out.getvalue() == bytes(copy) == b"head:on disk" and len(copy) == 12
        owned = blob._path
    assert not (tmp_path / owned).exists()  # closing removes the owned file
    with pytest.raises(TypeError, match="Cord holds bytes"):
        Cord().append("text")  # type: ignore[arg-type]


def test_tensor_layouts_follow_memory_order():
    nchw = torch.arange(120, dtype=torch.float32).reshape(2, 3, 4, 5)
    nhwc = nchw.contiguous(memory_format=torch.channels_last)
    assert TensorLayout.from_tensor(nchw) == TensorLayout(ScalarType.FLOAT, [2, 3, 4, 5],
                                                          [0, 1, 2, 3])
    assert TensorLayout.from_tensor(nhwc).dim_order == [0, 2, 3, 1]
    with pytest.raises(NamedDataError, match="contiguous"):
        TensorLayout.from_tensor(nchw.transpose(1, 3))


def test_store_tensors_bytes_and_duplicates():
    store = NamedDataStore()
    t = torch.arange(120, dtype=torch.float32).reshape(2, 3, 4, 5)
    nhwc = t.contiguous(memory_format=torch.channels_last)
    store.add_named_data("nhwc", nhwc, 16)
    store.add_named_data("raw", b"abc", None, "weights")
    store.add_named_data("same", b"abc", 4)  # equal bytes: one buffer, own alignment
    store.add_named_data("raw", b"abc", 8, "weights")  # again: alignments combine
    out = store.get_named_data_store_output()
    # channels-last bytes are the permuted values, as they lie in memory
    assert out.buffers[0] == t.permute(0, 2, 3, 1).contiguous().numpy().tobytes()
    assert out.pte_data["nhwc"] == DataEntry(0, 16, TensorLayout(ScalarType.FLOAT,
                                                                 [2, 3, 4, 5], [0, 2, 3, 1]))
    assert out.pte_data["same"] == DataEntry(1, 4, None)
    assert out.external_data == {"weights": {"raw": DataEntry(1, 8, None)}}
    with pytest.raises(ValueError, match="other bytes"):
        store.add_named_data("raw", b"abd")
    with pytest.raises(NamedDataError, match="layout"):
        store.add_named_data("t", t, 1, None, TensorLayout(ScalarType.INT, [2, 3, 4, 5],
                                                          [0, 1, 2, 3]))
    with pytest.raises(NamedDataError, match="alignment"):
        store.add_named_data("z", b"z", 0)
    with pytest.raises(TypeError, match="FileBackedData or a torch.Tensor"):
        store.add_named_data("s", "text")  # type: ignore[arg-type]


def test_file_backed_data_dedups_by_content(tmp_path):
    paths = [tmp_path / f"w{i}" for i in range(2)]
    for p in paths:
        p.write_bytes(b"weights")
    with FileBackedData.move_from(str(paths[0])) as a, FileBackedData.move_from(
            str(paths[1])) as b:
        first = NamedDataStore()
        first.add_named_data("a", a, external_tag="model")
        second = NamedDataStore()
        second.add_named_data("b", b, external_tag="model")
        first.merge_named_data_store(second.get_named_data_store_output())
        assert first.buffers == [a]
        assert set(first.external_data["model"]) == {"a", "b"}


def test_externalize_pte_data_shards_by_size_in_key_order():
    def shards(order):
        store = NamedDataStore()
        data = {"a": b"a" * 6, "a2": b"a" * 6, "b": b"b" * 4, "c": b"c" * 5}
        for key in order:
            store.add_named_data(key, data[key], 16)
        store.add_named_data("ext", b"x", 1, "existing")
        store.externalize_pte_data(10, "w")
        out = store.get_named_data_store_output()
        assert out.pte_data == {}
        return {tag: sorted(keys) for tag, keys in out.external_data.items()}

    got = shards(["a", "a2", "b", "c"])
    assert got == shards(["c", "b", "a2", "a"])
    # a and a2 share one 6-byte buffer; b (4) fits beside it; c starts a new shard
    assert sorted(got.values()) == [["a", "a2", "b"], ["c"], ["ext"]]
    store = NamedDataStore()
    store.add_named_data("big", b"x" * 11)
    with pytest.raises(ValueError, match="exceeds external data shard cap"):
        store.externalize_pte_data(10, "w")
    assert list(store.pte_data) == ["big"]  # nothing moved
    for cap in (True, 0, 1.5):
        with pytest.raises(NamedDataError, match="positive integer"):
            store.externalize_pte_data(cap, "w")  # type: ignore[arg-type]
