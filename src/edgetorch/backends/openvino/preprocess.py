"""``OpenvinoBackend.preprocess``: compile a delegated subgraph with OpenVINO.

OpenVINO's PyTorch FX frontend converts the subgraph to an ``ov.Model``; the CPU (or other)
plugin compiles it with the compile specs' properties, and the compiled model's export is the
blob -- what ``ov.Core.import_model`` reads back at run time, in our runtime and in
ExecuTorch's. Blobs are tied to the OpenVINO version that wrote them and are not
byte-reproducible (OpenVINO numbers its nodes with process-global counters).
"""

from __future__ import annotations

import torch
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from ...errors import ExportError, FeatureNotAvailableError
from ...exir.backend import BackendDetails, CompileSpec, PreprocessResult
from ._passes import decompose_floor_divide, revert_dim_order_ops
from .options import parse_options

INSTALL_HINT = "pip install 'edgetorch[openvino]' (openvino>=2025.1,<2026)"


def import_openvino():
    """``openvino`` itself, or an error that says which extra to install."""
    try:
        import openvino
    except ImportError as e:
        raise FeatureNotAvailableError(
            f"the OpenVINO backend needs the openvino package ({e}); {INSTALL_HINT}") from None
    return openvino


def _ov_type(ov, dtype: torch.dtype):
    types = {torch.float32: ov.Type.f32, torch.float64: ov.Type.f64, torch.float16: ov.Type.f16,
             torch.bfloat16: ov.Type.bf16, torch.int64: ov.Type.i64, torch.int32: ov.Type.i32,
             torch.uint8: ov.Type.u8, torch.int8: ov.Type.i8, torch.bool: ov.Type.boolean}
    if dtype not in types:
        raise ExportError(f"OpenvinoBackend: a delegate input has dtype {dtype}, which OpenVINO's "
                          f"frontend does not take; leave that part out with op_names_to_skip")
    return types[dtype]


def user_input_values(edge_program: ExportedProgram) -> list[object]:
    """Example values of the subgraph's user inputs, in placeholder order -- the order the
    delegate call passes them and the OpenVINO model's inputs are numbered."""
    users = {s.arg.name for s in edge_program.graph_signature.input_specs
             if s.kind == InputKind.USER_INPUT}
    return [n.meta["val"] for n in edge_program.graph.nodes
            if n.op == "placeholder" and n.name in users]


def compile_subgraph(gm: torch.fx.GraphModule, args: list[object], options, core=None):
    """OpenVINO's FX frontend + ``compile_model``: the ``ov.CompiledModel`` for ``gm``."""
    ov = import_openvino()
    from openvino.frontend import FrontEndManager
    from openvino.frontend.pytorch.fx_decoder import TorchFXPythonDecoder

    core = core or ov.Core()
    available = list(core.available_devices)
    if options.device not in available:
        raise ExportError(f"OpenvinoBackend: device {options.device!r} is not available to "
                          f"OpenVINO here (available: {', '.join(available)}); try "
                          f"CompileSpec('device', b'CPU')")
    frontend = FrontEndManager().load_by_framework("pytorch")
    decoder = TorchFXPythonDecoder(gm)
    model = frontend.convert(frontend.load(decoder))
    for i, value in enumerate(args):
        param = model.inputs[i].get_node()
        if isinstance(value, torch.Tensor):
            param.set_element_type(_ov_type(ov, value.dtype))
            param.set_partial_shape(ov.PartialShape(list(decoder.input_shapes[i])))
        else:  # a SymInt/int input crosses the delegate boundary as an int64 [1] tensor
            param.set_element_type(ov.Type.i64)
            param.set_partial_shape(ov.PartialShape([1]))
    model.validate_nodes_and_infer_types()
    return core.compile_model(model, options.device, options.ov_config())


class OpenvinoBackend(BackendDetails):
    """ExecuTorch's ``OpenvinoBackend``: compile specs ``device`` (default ``b"CPU"``),
    ``cache_dir`` and, beyond ExecuTorch, ``inference_precision`` (``b"f32"``...)."""

    @staticmethod
    def preprocess(edge_program: ExportedProgram,
                   compile_specs: list[CompileSpec]) -> PreprocessResult:
        options = parse_options(compile_specs, strict=True)
        gm = edge_program.graph_module
        revert_dim_order_ops(gm)
        decompose_floor_divide(gm)
        compiled = compile_subgraph(edge_program.module(), user_input_values(edge_program),
                                    options)
        blob = compiled.export_model()
        return PreprocessResult(processed_bytes=blob if isinstance(blob, bytes)
                                else blob.getvalue())
