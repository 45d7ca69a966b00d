"""``executorch.extension.export_util.utils``: ``export_to_edge``, ``export_to_exec_prog``,
``save_pte_program``, with ExecuTorch's signatures and defaults."""

from __future__ import annotations

import logging
import os
from typing import Any

logger = logging.getLogger(__name__)


def _edge_compile_config() -> Any:
    from ...exir import EdgeCompileConfig

    return EdgeCompileConfig(_check_ir_validity=True, _skip_dim_order=True)


def _to_core_aten(model: Any, example_inputs: tuple, *, example_kwarg_inputs: dict | None = None,
                  dynamic_shapes: Any = None, strict: bool = True, verbose: bool = True) -> Any:
    import torch

    if not isinstance(model, (torch.fx.GraphModule, torch.nn.Module)):
        raise ValueError(f"Expected passed in model to be an instance of fx.GraphModule, got "
                         f"{type(model)}")
    ep = torch.export.export(model, tuple(example_inputs), example_kwarg_inputs,
                             dynamic_shapes=dynamic_shapes, strict=strict)
    if verbose:
        logger.info("Core ATen graph:\n%s", ep.graph)
    return ep


def _core_aten_to_edge(core_aten_ep: Any, edge_constant_methods: dict | None = None,
                       edge_compile_config: Any = None, verbose: bool = True,
                       generate_etrecord: bool = False) -> Any:
    from ...exir import EdgeCompileConfig, to_edge

    config = edge_compile_config or EdgeCompileConfig(_check_ir_validity=False)
    edge = to_edge(core_aten_ep, constant_methods=edge_constant_methods, compile_config=config,
                   generate_etrecord=generate_etrecord)
    if verbose:
        logger.info("Exported graph:\n%s", edge.exported_program())
    return edge


def export_to_edge(model: Any, example_inputs: tuple, *, example_kwarg_inputs: dict | None = None,
                   dynamic_shapes: Any = None, edge_constant_methods: dict | None = None,
                   edge_compile_config: Any = None, strict: bool = True, verbose: bool = True,
                   generate_etrecord: bool = False) -> Any:
    """``torch.export`` then ``to_edge`` (default config: verified, ``_skip_dim_order``)."""
    ep = _to_core_aten(model, example_inputs, example_kwarg_inputs=example_kwarg_inputs,
                       dynamic_shapes=dynamic_shapes, strict=strict, verbose=verbose)
    return _core_aten_to_edge(ep, edge_constant_methods,
                              edge_compile_config or _edge_compile_config(), verbose=verbose,
                              generate_etrecord=generate_etrecord)


def export_to_exec_prog(model: Any, example_inputs: tuple, *,
                        example_kwarg_inputs: dict | None = None, dynamic_shapes: Any = None,
                        edge_constant_methods: dict | None = None, edge_compile_config: Any = None,
                        backend_config: Any = None, strict: bool = True) -> Any:
    """``export_to_edge`` then ``to_executorch(backend_config)``."""
    edge = export_to_edge(model.eval(), example_inputs, example_kwarg_inputs=example_kwarg_inputs,
                          dynamic_shapes=dynamic_shapes, edge_constant_methods=edge_constant_methods,
                          edge_compile_config=edge_compile_config, strict=strict)
    return edge.to_executorch(backend_config)


def save_pte_program(prog: Any, model_name: str, output_dir: str = "") -> str:
    """Write ``prog`` (an ``ExecutorchProgramManager``, or anything with ``.buffer``) to
    ``<output_dir>/<model_name>.pte`` (``.pte`` added when missing) and return the path;
    external tensor data (``.ptd``) goes to ``output_dir`` as well."""
    filename = model_name if model_name.endswith(".pte") else f"{model_name}.pte"
    path = os.path.join(output_dir, filename) if output_dir else filename
    if output_dir:
        os.makedirs(output_dir, exist_ok=True)
    with open(path, "wb") as f:
        if hasattr(prog, "write_to_file"):
            prog.write_to_file(f)
        else:
            f.write(prog.buffer)
    if getattr(prog, "data_files", None):
        prog.write_tensor_data_to_file(output_dir or ".")
    logger.info("saved exported program to %s", path)
    return path
