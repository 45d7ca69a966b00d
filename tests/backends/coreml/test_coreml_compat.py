"""Against ExecuTorch 1.5.1 with coremltools 9.0: edgetorch's Core ML delegate decodes equal
to ExecuTorch's (the same files, the same ML program, weights and debug mappings; only the
uuid4 identifier, the manifest's ids and protobuf map order differ, which ExecuTorch's own
runs do too), and ExecuTorch's Core ML ``.pte`` runs in edgetorch within fp16 tolerance, with
MobileNetV2's top-1 class equal to eager's."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from cm_cases import decoded_model, delegates, eager, fp16_tolerance, lower, run
from delegate_checks import params  # tests/support

from edgetorch.examples import EXAMPLES

pytestmark = [pytest.mark.compat, pytest.mark.torch]
MODELS = ["mobilenet_v2", "transformer_encoder", "llama_decoder"]
SLOW = {"transformer_encoder", "llama_decoder"}  # -m slow (make test-vulkan-coreml-slow)
RANDOM_IDS = {"metadata.json", "model.mlpackage/Manifest.json",
              "model.mlpackage/Data/com.apple.CoreML/model.mlmodel"}


@pytest.fixture(scope="module")
def submitted(coreml_ref):
    for m in MODELS:  # the default run's, two at a time
        if m not in SLOW:
            coreml_ref.submit(m)
    return coreml_ref


def _manifest_shape(text: bytes) -> list:
    m = json.loads(text)
    return sorted((e["name"], e["path"], e["author"]) for e in m["itemInfoEntries"].values())


@pytest.mark.parametrize("name", params(MODELS, SLOW))
def test_delegate_decodes_equal_to_executorchs(name, submitted):
    pytest.importorskip("coremltools")
    model, inputs = EXAMPLES[name].build()
    ours, theirs = delegates(lower(model, inputs)), delegates(submitted.get(name).read_bytes())
    assert len(ours) == len(theirs) == 1
    a, b = ours[0], theirs[0]
    assert sorted(a) == sorted(b)
    for path in set(a) - RANDOM_IDS:
        assert a[path] == b[path], path
    meta_a, meta_b = json.loads(a["metadata.json"]), json.loads(b["metadata.json"])
    assert meta_a["identifier"].startswith("executorch_")
    assert {k: v for k, v in meta_a.items() if k != "identifier"} == \
        {k: v for k, v in meta_b.items() if k != "identifier"}
    assert _manifest_shape(a["model.mlpackage/Manifest.json"]) == \
        _manifest_shape(b["model.mlpackage/Manifest.json"])
    assert decoded_model(a) == decoded_model(b)


def _images(n: int) -> list[torch.Tensor]:
    """Random images and structured ones (gradients, checkerboards, a bright square)."""
    g = torch.Generator().manual_seed(7)
    out = [torch.randn(1, 3, 224, 224, generator=g) for _ in range(n)]
    y, x = torch.meshgrid(torch.linspace(-2, 2, 224), torch.linspace(-2, 2, 224),
                          indexing="ij")
    out.append(torch.stack([x, y, x * y]).unsqueeze(0))
    out.append(((torch.arange(224)[:, None] // 28 + torch.arange(224) // 28) % 2).float()
               .expand(1, 3, 224, 224) * 2 - 1)
    sq = torch.full((1, 3, 224, 224), -1.0)
    sq[..., 80:150, 60:170] = 2.0
    out.append(sq)
    return out


def test_executorch_mobilenet_v2_top1_equals_eager(submitted):
    model, _ = EXAMPLES["mobilenet_v2"].build()
    pte = submitted.get("mobilenet_v2").read_bytes()
    from edgetorch.runtime import Runtime

    method = Runtime.get().load_program(pte).load_method("forward")
    for image in _images(5):
        (got,) = method.execute([image.numpy()])
        (want,) = eager(model, (image,))
        assert got.argmax() == want.argmax()


@pytest.mark.parametrize("name", params(MODELS[1:], SLOW))
def test_executorch_coreml_pte_runs_in_edgetorch(name, submitted):
    model, inputs = EXAMPLES[name].build()
    outs, handles = run(submitted.get(name).read_bytes(), inputs)
    ops = sum(len(h.steps) for h in handles)
    for got, want in zip(outs, eager(model, inputs)):
        assert np.abs(got - want).max() <= fp16_tolerance(want, ops)
