"""``edgetorch inspect --tensors``: every stored byte is accounted for by a tensor or blob."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.export import export

from edgetorch.cli import inspect_program
from edgetorch.devtools.size_report import size_items
from edgetorch.examples import load_model_spec
from edgetorch.exir import to_edge, to_edge_transform_and_lower
from edgetorch.schema.pte import PteFile

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "et_tiny_classifier.pte"


def _within_alignment(items_total: int, section: int, count: int, alignment: int = 128) -> bool:
    return section - count * alignment <= items_total <= section


def test_constants_fill_the_constant_segment_of_executorchs_file():
    pte = PteFile.parse(FIXTURE.read_bytes())
    items = size_items(pte)
    constants = [it for it in items if it.kind == "constant"]
    assert constants and all(it.nbytes > 0 for it in constants)
    assert [it.nbytes for it in items] == sorted((it.nbytes for it in items), reverse=True)
    section = pte.size_breakdown()["constant_segment"]
    assert _within_alignment(sum(it.nbytes for it in constants), section, len(constants))


def test_named_data_and_delegates_of_an_xnnpack_program(tmp_path):
    from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    model, inputs = load_model_spec("mlp")
    et = to_edge_transform_and_lower(export(model, inputs),
                                     partitioner=[XnnpackPartitioner()]).to_executorch()
    pte = PteFile.parse(et.buffer)
    items = size_items(pte)
    named = [it for it in items if it.kind == "named_data"]
    weights = sum(p.numel() * 4 for p in model.parameters())
    assert sum(it.nbytes for it in named) == weights
    assert [it.kind for it in items].count("delegate") == 1
    path = tmp_path / "mlp.pte"
    path.write_bytes(et.buffer)
    text = inspect_program(str(path), tensors=3)
    assert "largest stored tensors and blobs (top 3):" in text
    assert text.count("named_data") >= 3 and "more" in text


def test_constant_users_name_the_operator(tmp_path):
    model = torch.nn.Linear(4, 3)
    et = to_edge(export(model, (torch.randn(2, 4),))).to_executorch()
    items = size_items(PteFile.parse(et.buffer))
    # The weight is stored transposed (folded at export) and read by addmm, like the bias.
    assert [(it.nbytes, it.detail) for it in items] == [
        (48, "float32[4, 3] -> aten::addmm.out"), (12, "float32[3] -> aten::addmm.out")]
