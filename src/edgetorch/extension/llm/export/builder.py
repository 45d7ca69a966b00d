"""The export flow behind ``export_llm``: build the decoder, load weights, quantize, export
with a dynamic token dimension, lower (optionally to XNNPACK) and write the ``.pte`` with the
metadata methods ExecuTorch's runners read.

Steps follow ExecuTorch 1.5.1's ``export_llama``: ``torch.export`` (strict, no grad,
``Dim("token_dim", max=max_seq_length-1)`` on tokens, static ``input_pos``),
``to_edge_transform_and_lower(..., constant_methods=metadata)``, then ``to_executorch`` with
quant fusion (quantized embeddings) and graph inputs left unplanned.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ....errors import ExportError
from ....examples.models.llama import ModelArgs, Transformer
from ....exir import foreign_warnings, torch_export
from ....util import progress
from ..custom_ops import custom_ops as _custom_ops  # noqa: F401  (defines llama::*)
from .checkpoint import read_gguf, read_pth
from .config.llm_config import LlmConfig
from .quantize import quantize


@dataclass
class LoadedModel:
    model: Transformer
    metadata: dict[str, Any]


def load_model(cfg: LlmConfig) -> LoadedModel:
    """The eager decoder described by ``cfg`` (weights loaded, quantized), and its metadata."""
    token_info: dict[str, Any] = {}
    state: dict[str, torch.Tensor] | None = None
    params: dict[str, Any] = {}
    ckpt = cfg.base.checkpoint
    if ckpt is not None and str(ckpt).endswith(".gguf"):
        params, state, token_info = read_gguf(ckpt)
    elif ckpt is not None:
        params, state = read_pth(ckpt, cfg.base.params)
    elif cfg.base.params is not None:
        params = json.loads(Path(cfg.base.params).read_text())
    if cfg.export.max_seq_length > cfg.export.max_context_length:
        raise ExportError(f"export.max_seq_length {cfg.export.max_seq_length} exceeds "
                          f"export.max_context_length {cfg.export.max_context_length}; the "
                          "KV cache must hold at least one forward call's tokens")
    if cfg.model.use_sdpa_with_kv_cache and not cfg.model.use_kv_cache:
        raise ExportError("model.use_sdpa_with_kv_cache=True needs model.use_kv_cache=True")
    args = ModelArgs.from_params(
        params, max_seq_len=cfg.export.max_seq_length,
        max_context_len=cfg.export.max_context_length, use_kv_cache=cfg.model.use_kv_cache,
        use_sdpa_with_kv_cache_op=cfg.model.use_sdpa_with_kv_cache,
        enable_dynamic_shape=cfg.model.enable_dynamic_shape)
    if state is None:
        torch.manual_seed(0)
    model = Transformer(args)
    if state is not None:
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            raise ExportError(f"checkpoint {ckpt} does not match the decoder: missing "
                              f"{missing[:5]}, unexpected {unexpected[:5]}; check base.params")
    model.eval()
    quantize(model, cfg)
    return LoadedModel(model, metadata(cfg, args, token_info))


def metadata(cfg: LlmConfig, args: ModelArgs, token_info: dict[str, Any]) -> dict[str, Any]:
    """ExecuTorch's LLM metadata methods, plus ``base.metadata`` JSON (which wins). A GGUF's
    BOS/EOS ids are written too, so runners stop at EOS without a tokenizer config."""
    meta: dict[str, Any] = {
        "get_max_seq_len": cfg.export.max_seq_length,
        "get_max_context_len": cfg.export.max_context_length,
        "get_n_layers": args.n_layers,
        "get_vocab_size": args.vocab_size,
        "use_kv_cache": cfg.model.use_kv_cache,
        "use_sdpa_with_kv_cache": cfg.model.use_sdpa_with_kv_cache,
        "enable_dynamic_shape": cfg.model.enable_dynamic_shape,
    }
    if token_info.get("bos_id") is not None:
        meta["get_bos_id"] = int(token_info["bos_id"])
    if token_info.get("eos_id") is not None:
        meta["get_eos_ids"] = [int(token_info["eos_id"])]
    if cfg.base.metadata:
        try:
            extra = json.loads(cfg.base.metadata)
        except json.JSONDecodeError as e:
            raise ExportError(f"base.metadata is not JSON ({e}): {cfg.base.metadata!r}; "
                              "write e.g. '{\"get_bos_id\": 1, \"get_eos_ids\": [2]}'") from None
        meta.update(extra)
    return meta


def export_program(loaded: LoadedModel, cfg: LlmConfig) -> torch.export.ExportedProgram:
    model = loaded.model
    seq = max(2, min(3, cfg.export.max_seq_length - 1))
    tokens = torch.arange(2, 2 + seq).reshape(1, seq)
    if model.args.use_kv_cache:
        example: tuple = (tokens, torch.tensor([0]))
        dims: tuple = ({1: torch.export.Dim("token_dim", max=cfg.export.max_seq_length - 1)},
                       None)
    else:
        example = (tokens,)
        dims = ({1: torch.export.Dim("token_dim", max=cfg.export.max_seq_length - 1)},)
    if not cfg.model.enable_dynamic_shape:
        example = (torch.tensor([[2]]), *example[1:])
        dims = None
    with torch.no_grad():
        return torch_export.export_program(model, example, dynamic_shapes=dims, strict=True)


def to_pte(loaded: LoadedModel, cfg: LlmConfig, step: progress.Steps | None = None):
    """The ``ExecutorchProgramManager`` of the configured export (``step``: the job's
    progress, advanced at each stage)."""
    from ....exir import (
        EdgeCompileConfig,
        ExecutorchBackendConfig,
        MemoryPlanningPass,
        to_edge_transform_and_lower,
    )

    advance = step.next if step is not None else (lambda: None)
    advance()
    ep = export_program(loaded, cfg)
    partitioners = []
    if cfg.backend.xnnpack.enabled:
        from ....backends.xnnpack.partition import XnnpackPartitioner

        partitioners.append(XnnpackPartitioner())
    advance()
    edge = to_edge_transform_and_lower(ep, partitioner=partitioners or None,
                                       constant_methods=loaded.metadata,
                                       compile_config=EdgeCompileConfig(_check_ir_validity=False))
    advance()
    return edge.to_executorch(ExecutorchBackendConfig(
        extract_delegate_segments=True, do_quant_fusion_and_const_prop=True,
        memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False)))


def output_path(cfg: LlmConfig) -> Path:
    """ExecuTorch's rule: an ``output_name`` ending in ``.pte`` is used as given (relative to
    the working directory); otherwise ``{output_dir}/{output_name}.pte``."""
    name = cfg.export.output_name
    if name is not None and name.endswith(".pte"):
        return Path(name)
    if name is None:
        parts = [cfg.base.model_class]
        if cfg.backend.xnnpack.enabled:
            parts.append("xnnpack")
        if cfg.quantization.qmode:
            parts.append(cfg.quantization.qmode)
        name = "_".join(parts)
    return Path(cfg.export.output_dir) / f"{name}.pte"


def export_llm(cfg: LlmConfig) -> Path:
    """Export per ``cfg`` and write the ``.pte``; returns its path."""
    stages = ["loading and quantizing the model", "exporting",
              "lowering to XNNPACK" if cfg.backend.xnnpack.enabled else "converting to Edge",
              "planning memory and emitting", "writing"]
    with foreign_warnings.filtered(), progress.steps("export_llm", stages) as step:
        step.next()
        loaded = load_model(cfg)
        program = to_pte(loaded, cfg, step)
        step.next()
        path = output_path(cfg)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            program.write_to_file(f)
    return path
