"""Write the fuzzers' seed corpus from the examples (needs torch; run from the repository root).

    python scripts/fuzz/make_seeds.py          # rewrites tests/fixtures/fuzz/{pte,ptd,xnnpack}/seed-*

Seeds are the smaller examples (big weights only slow the mutations down), the ExecuTorch-written
fixtures, a ``.ptd`` with its fixed program (``ptd_program.pte``), and the XNNPACK delegate blobs
with the programs whose named data hold their weights (``xnnpack_context/``).
"""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

import torch

from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from edgetorch.examples import get_example
from edgetorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower
from edgetorch.schema.pte import PteFile

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "tests" / "fixtures" / "fuzz"
# (cnn, transformer_encoder and up take 30-60 ms per execute: too slow for a million runs)
PTE_EXAMPLES = ["tiny_classifier", "simple_model", "shape_ops"]
XNNPACK_EXAMPLES = ["tiny_classifier", "simple_model"]
ET_FILES = {  # written by ExecuTorch 1.5.1 (tests/fixtures/README.md)
    "pte": [REPO / "tests/fixtures/et_tiny_classifier.pte"],
    "ptd": [REPO / "tests/fixtures/et_named_tensors.ptd"],
}
ET_XNNPACK = REPO / "tests/backends/xnnpack/fixtures/et_tiny_classifier_xnnpack.pte"


def _export(name: str, **config):
    ex = get_example(name)
    ep = torch.export.export(ex.factory(), ex.example_inputs())
    return to_edge(ep).to_executorch(ExecutorchBackendConfig(**config))


def _xnnpack(name: str) -> bytes:
    ex = get_example(name)
    ep = torch.export.export(ex.factory(), ex.example_inputs())
    return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer


def _blobs(pte: bytes) -> list[bytes]:
    f = PteFile.parse(pte)
    return [bytes(f.delegate_bytes(d)) for plan in f.program.execution_plan for d in plan.delegates]


def _fresh(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for old in d.glob("seed-*"):
        old.unlink()
    return d


def main() -> int:
    warnings.filterwarnings("ignore")
    pte_dir, ptd_dir, xnn_dir = (_fresh(OUT / t) for t in ("pte", "ptd", "xnnpack"))
    context = OUT / "xnnpack_context"
    if context.exists():
        shutil.rmtree(context)
    context.mkdir()
    for name in PTE_EXAMPLES:
        (pte_dir / f"seed-{name}.pte").write_bytes(_export(name).buffer)
    for src in ET_FILES["pte"]:
        shutil.copy(src, pte_dir / f"seed-{src.name}")

    ext = _export("simple_model", external_constants=True)
    (OUT / "ptd_program.pte").write_bytes(ext.buffer)
    for fname, data in ext.data_files.items():
        (ptd_dir / f"seed-simple_model-{fname}").write_bytes(data)
    for src in ET_FILES["ptd"]:
        shutil.copy(src, ptd_dir / f"seed-{src.name}")

    programs = {name: _xnnpack(name) for name in XNNPACK_EXAMPLES}
    programs["et_tiny_classifier"] = ET_XNNPACK.read_bytes()
    for name, pte in programs.items():
        (context / f"{name}.pte").write_bytes(pte)
        for k, blob in enumerate(_blobs(pte)):
            (xnn_dir / f"seed-{name}-{k}.xnn").write_bytes(blob)

    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"seed corpus written to {OUT.relative_to(REPO)}: {total / 1e6:.2f} MB")
    for f in sorted(OUT.rglob("*")):
        if f.is_file():
            print(f"  {f.relative_to(OUT)}  {f.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
