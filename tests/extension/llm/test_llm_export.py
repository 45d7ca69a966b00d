"""export_llm on a tiny random-weight llama: every path runs in our runtime (and, marked
compat, in ExecuTorch 1.5.1's) and matches the eager decoder step by step."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llm_helpers  # noqa: E402
import ref_process  # noqa: E402
from llm_helpers import MAX_CTX, MAX_SEQ, PARAMS  # noqa: E402

from edgetorch.errors import ExportError  # noqa: E402
from edgetorch.extension.llm.export.builder import load_model  # noqa: E402
from edgetorch.extension.llm.export.config.llm_config import LlmConfig  # noqa: E402
from edgetorch.extension.llm.export.export_llm import main as export_llm_main  # noqa: E402
from edgetorch.runtime import Runtime  # noqa: E402

COMMON = ["model.use_kv_cache=True", f"export.max_seq_length={MAX_SEQ}",
          f"export.max_context_length={MAX_CTX}", '+base.metadata={"get_eos_ids": [2, 3]}']
CONFIGS = {
    "fp32_plain_portable": [],
    "fp32_custom_xnnpack": ["model.use_sdpa_with_kv_cache=True", "backend.xnnpack.enabled=True"],
    "8da4w_custom_xnnpack": ["model.use_sdpa_with_kv_cache=True", "backend.xnnpack.enabled=True",
                             "quantization.qmode=8da4w", "quantization.group_size=32",
                             "quantization.use_hqq=False"],
    "int8_emb4_custom": ["model.use_sdpa_with_kv_cache=True", "quantization.qmode=int8",
                         "quantization.embedding_quantize=4,32"],
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return llm_helpers.write_pth(tmp_path_factory.mktemp("ckpt"))


@pytest.fixture(scope="module")
def exported(checkpoint, tmp_path_factory):
    """name -> (.pte path, overrides); exported on first use through the CLI entry point."""
    out = tmp_path_factory.mktemp("pte")
    cache: dict[str, tuple[Path, list[str]]] = {}

    def get(name: str) -> tuple[Path, list[str]]:
        if name not in cache:
            ckpt, params = checkpoint
            overrides = [f"base.checkpoint={ckpt}", f"base.params={params}", *COMMON,
                         *CONFIGS[name], f"export.output_name={out / name}.pte"]
            assert export_llm_main(overrides) == 0
            cache[name] = (out / f"{name}.pte", overrides)
        return cache[name]

    return get


def steps() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    out = [(torch.randint(0, PARAMS["vocab_size"], (1, 6), generator=g), torch.tensor([0]))]
    for p in range(6, 11):
        out.append((torch.randint(0, PARAMS["vocab_size"], (1, 1), generator=g),
                    torch.tensor([p])))
    out.append((torch.randint(0, PARAMS["vocab_size"], (1, 7), generator=g), torch.tensor([11])))
    return out


def eager_logits(overrides: list[str]) -> list[np.ndarray]:
    model = load_model(LlmConfig.from_args(overrides)).model
    with torch.no_grad():
        return [model(t, p).numpy() for t, p in steps()]


def run_ours(pte: Path) -> list[np.ndarray]:
    method = Runtime.get().load_program(pte).load_method("forward")
    return [np.asarray(method.execute([t.numpy(), p.numpy()])[0]) for t, p in steps()]


@pytest.mark.parametrize("name", CONFIGS)
def test_runs_like_the_eager_decoder(exported, name):
    pte, overrides = exported(name)
    got, want = run_ours(pte), eager_logits(overrides)
    for g, w in zip(got, want):
        assert g.shape == (1, PARAMS["vocab_size"])
        if name.startswith("8da4w"):
            # XNNPACK's int8 x int4 dot products round the dynamic activation scale its own
            # way; the argmax and the logits stay within a few quantization steps.
            np.testing.assert_allclose(g, w, atol=0.02 * np.abs(w).max())
            assert g.argmax() == w.argmax()
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * np.abs(w).max())


def _operators(pte: Path) -> set[str]:
    from edgetorch.schema.pte import PteFile

    plan = next(p for p in PteFile.parse(pte.read_bytes()).program.execution_plan
                if p.name == "forward")
    return {f"{o.name}.{o.overload}" for o in plan.operators}


def test_paths_use_the_expected_kernels(exported):
    plain = _operators(exported("fp32_plain_portable")[0])
    assert "aten::index_put.out" in plain and not any(o.startswith("llama::") for o in plain)
    custom = _operators(exported("fp32_custom_xnnpack")[0])
    assert {"llama::update_cache.out", "llama::custom_sdpa.out"} <= custom
    assert "aten::mm.out" not in custom  # the linears run in XNNPACK
    assert "quantized_decomposed::embedding_4bit.out" in _operators(
        exported("int8_emb4_custom")[0])


def test_metadata_methods(exported):
    program = Runtime.get().load_program(exported("fp32_custom_xnnpack")[0])
    values = {name: program.load_method(name).execute([]) for name in program.method_names
              if name != "forward"}
    assert {k: [int(x) for x in v] for k, v in values.items()} == {
        "get_max_seq_len": [MAX_SEQ], "get_max_context_len": [MAX_CTX], "get_n_layers": [2],
        "get_vocab_size": [PARAMS["vocab_size"]], "use_kv_cache": [1],
        "use_sdpa_with_kv_cache": [1], "enable_dynamic_shape": [1], "get_eos_ids": [2, 3]}
    meta = program.metadata("forward")
    assert list(meta.input_tensor_meta(0).sizes()) == [1, MAX_SEQ - 1]
    assert list(meta.input_tensor_meta(1).sizes()) == [1]


@pytest.mark.parametrize(("name", "copies"), [("fp32_plain_portable", 1), ("fp32_custom_xnnpack", 2)])
def test_tied_embedding_is_stored_as_executorch_stores_it(name, copies, exported, checkpoint):
    """Once in a portable program; with XNNPACK, once per side (the output Linear's weight in the
    delegate's data, the embedding's gather in the program's constants), as ExecuTorch 1.5.1
    copies a weight shared by a delegated and an undelegated user (its partitioner's
    duplicate_constant_node; compared with ExecuTorch in test_xnnpack_compat_aot)."""
    table = llm_helpers.tiny_state()["tok_embeddings.weight"].numpy().tobytes()
    assert exported(name)[0].read_bytes().count(table) == copies, name


def test_gguf_checkpoint_exports_like_its_weights(tmp_path):
    gguf_path = tmp_path / "tiny.gguf"
    llm_helpers.write_gguf(gguf_path)
    from edgetorch.extension.llm.export.checkpoint import read_gguf

    params, state, tok = read_gguf(gguf_path)
    assert params["tie_word_embeddings"] and params["n_kv_heads"] == 2 and tok["eos_id"] == 2
    cfg = LlmConfig.from_args([f"base.checkpoint={gguf_path}", *COMMON[:3]])
    loaded = load_model(cfg)
    assert loaded.metadata["get_bos_id"] == 1 and loaded.metadata["get_eos_ids"] == [2]
    for name, value in state.items():
        torch.testing.assert_close(loaded.model.state_dict()[name], value)


def test_config_errors_name_the_field():
    with pytest.raises(ExportError, match="no field 'model.use_kv_cachee'"):
        LlmConfig.from_args(["model.use_kv_cachee=True"])
    with pytest.raises(ExportError, match="must be True or False"):
        LlmConfig.from_args(["model.use_kv_cache=maybe"])
    with pytest.raises(ExportError, match="qmode 'int3'"):
        load_model(LlmConfig.from_args(["quantization.qmode=int3", "model.use_kv_cache=True"]))


def test_yaml_config(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model:\n  use_kv_cache: true\nexport:\n  max_seq_length: 64\n"
                    "backend:\n  xnnpack:\n    enabled: true\n")
    cfg = LlmConfig.from_args(["export.max_context_length=256"], str(path))
    assert cfg.model.use_kv_cache and cfg.backend.xnnpack.enabled
    assert (cfg.export.max_seq_length, cfg.export.max_context_length) == (64, 256)


# ---- ExecuTorch 1.5.1 runs our files -----------------------------------------------------


def _ref_run(pte: Path, tmp: Path) -> tuple[list[np.ndarray], dict]:

    from refenv import REF_TOOL, _clean_env, load_npz, ref_python

    flat = [a.numpy() for pair in steps() for a in pair]
    np.savez(tmp / "steps.npz", *flat)
    cmd = [str(ref_python()), str(REF_TOOL.with_name("ref_llm.py")), "run", str(pte),
           str(tmp / "steps.npz"), str(tmp / "out.npz")]
    r = ref_process.run(cmd, env=_clean_env(), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    return load_npz(tmp / "out.npz"), json.loads((tmp / "out.json").read_text())


def _ref_available() -> bool:
    from refenv import ref_available

    return ref_available()


@pytest.mark.compat
@pytest.mark.skipif(not _ref_available(), reason="reference ExecuTorch env not available")
@pytest.mark.parametrize("name", ["fp32_custom_xnnpack", "8da4w_custom_xnnpack",
                                  "int8_emb4_custom"])
def test_executorch_runs_our_pte(exported, name, tmp_path):
    pte, _ = exported(name)
    theirs, meta = _ref_run(pte, tmp_path)
    ours = run_ours(pte)
    for a, b in zip(theirs, ours):
        if name.startswith("8da4w"):
            np.testing.assert_allclose(a, b, atol=0.02 * np.abs(b).max())
            assert a.argmax() == b.argmax()
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * np.abs(b).max())
    assert meta["get_max_seq_len"] == [MAX_SEQ] and meta["get_eos_ids"] == [2, 3]
    assert meta["use_sdpa_with_kv_cache"] == [True]


def test_export_llm_shows_its_stages_and_layers(tmp_path, capsys, monkeypatch):
    """On a terminal (forced here) export_llm draws its stages, the GGUF's tensors, the layers
    being quantized and the partitions being lowered; the only stdout line is the result."""
    monkeypatch.setenv("EDGETORCH_PROGRESS", "1")
    gguf_path = tmp_path / "tiny.gguf"
    llm_helpers.write_gguf(gguf_path)
    assert export_llm_main([f"base.checkpoint={gguf_path}", *COMMON, *CONFIGS[
        "8da4w_custom_xnnpack"], f"export.output_name={tmp_path / 'm'}.pte"]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"wrote {tmp_path / 'm'}.pte\n"
    for needle in ("export_llm: loading and quantizing the model", "reading tiny.gguf",
                   "quantizing (Int8DynamicActivationIntxWeightConfig)", "export_llm: exporting",
                   "export_llm: lowering to XNNPACK", "lowering (XnnpackPartitioner)",
                   "export_llm: planning memory and emitting", "export_llm: writing"):
        assert needle in captured.err, needle


def test_config_arg_helpers(monkeypatch):
    import sys

    from edgetorch.extension.llm.export.export_llm import parse_config_arg, pop_config_arg

    monkeypatch.setattr(sys, "argv", ["export_llm", "--config", "c.yaml", "base.x=1"])
    assert parse_config_arg() == ("c.yaml", ["base.x=1"])
    assert pop_config_arg() == "c.yaml" and sys.argv == ["export_llm", "base.x=1"]
    assert parse_config_arg() == (None, ["base.x=1"])
    with pytest.raises(ValueError, match="--config"):
        pop_config_arg()
