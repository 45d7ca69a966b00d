"""edgetorch.export: every example through the recipes API (XNNPACK FP32) equal to eager, the
session's accessors, recipes combined, and the typed errors for what is not built yet."""

from __future__ import annotations

import importlib.util
import warnings

import pytest

torch = pytest.importorskip("torch")

from edgetorch.backends.xnnpack.recipes import XNNPackRecipeType  # noqa: E402
from edgetorch.errors import FeatureNotAvailableError, InvalidProgramError  # noqa: E402
from edgetorch.examples import EXAMPLES, get_example  # noqa: E402
from edgetorch.exir import EdgeCompileConfig  # noqa: E402
from edgetorch.exir._warnings import ExperimentalWarning  # noqa: E402
from edgetorch.export import (  # noqa: E402
    ExportRecipe,
    ExportSession,
    LoweringRecipe,
    QuantizationRecipe,
    StageType,
    export,
    recipe_registry,
)
from edgetorch.runtime import Runtime  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::edgetorch.exir._warnings.ExperimentalWarning")


def _assert_eager(outputs, model, inputs):
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert got.shape == want.shape and got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def _delegates(buffer: bytes) -> list[str]:
    program = Runtime.get().load_program(buffer).program
    return [d.id for plan in program.execution_plan for d in plan.delegates]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_exports_through_the_xnnpack_fp32_recipe(name, tmp_path):
    model, inputs = get_example(name).build()
    session = export(model, [inputs],
                     export_recipe=ExportRecipe.get_recipe(XNNPackRecipeType.FP32))
    _assert_eager(session.run_method("forward", inputs), model, inputs)
    assert "XnnpackBackend" in _delegates(session.get_pte_buffer())
    session.save_to_pte(str(tmp_path / name))
    method = Runtime.get().load_program(tmp_path / f"{name}.pte").load_method("forward")
    _assert_eager(method.execute(list(inputs)), model, inputs)


def test_session_stages_and_accessors():
    model, inputs = get_example("mlp").build()
    session = export(model, [inputs, tuple(torch.randn_like(t) for t in inputs)],
                     export_recipe=ExportRecipe.get_recipe(XNNPackRecipeType.FP32))
    assert list(session.get_stage_artifacts()) == [
        StageType.SOURCE_TRANSFORM, StageType.QUANTIZE, StageType.TORCH_EXPORT,
        StageType.TO_EDGE_TRANSFORM_AND_LOWER, StageType.TO_EXECUTORCH]
    assert session.get_exported_program().graph_module is not None
    assert session.get_edge_program_manager().methods == {"forward"}
    assert session.get_executorch_program().execution_plan[0].name == "forward"
    assert session.get_pte_buffer() == session.get_executorch_program_manager().buffer
    assert session.get_example_input() == tuple(inputs)
    _assert_eager(session.run_method(), model, inputs)  # the first example input by default
    with pytest.raises(KeyError, match="encode"):
        session.get_exported_program("encode")


def test_default_recipe_is_portable_and_inputs_may_be_exported_programs():
    model, inputs = get_example("cnn").build()
    session = export(model, [inputs])
    assert _delegates(session.get_pte_buffer()) == []
    _assert_eager(session.run_method(), model, inputs)
    ep = torch.export.export(model, inputs)
    session = export({"forward": ep}, None, ExportRecipe.get_recipe(XNNPackRecipeType.FP32))
    assert list(session.get_stage_artifacts())[0] == StageType.TO_EDGE_TRANSFORM_AND_LOWER
    _assert_eager(session.run_method("forward", inputs), model, inputs)


def test_multiple_methods_and_an_explicit_pipeline():
    enc, x = get_example("tiny_classifier").build()
    head, y = get_example("simple_model").build()
    recipe = ExportRecipe(lowering_recipe=LoweringRecipe(edge_compile_config=EdgeCompileConfig()),
                          pipeline_stages=[StageType.TORCH_EXPORT, StageType.TO_EDGE,
                                           StageType.TO_EXECUTORCH])
    session = export({"encode": enc, "head": head}, {"encode": [x], "head": [y]}, recipe)
    _assert_eager(session.run_method("encode"), enc, x)
    _assert_eager(session.run_method("head"), head, y)


def test_combine_recipes():
    fp32 = ExportRecipe.get_recipe(XNNPackRecipeType.FP32)
    seen = []

    def count_nodes(method, ep):
        seen.append(method)
        return []

    extra = ExportRecipe(name="extra", lowering_recipe=LoweringRecipe(
        edge_transform_passes=[count_nodes],
        edge_compile_config=fp32.lowering_recipe.edge_compile_config))
    combined = ExportRecipe.combine([fp32, extra], recipe_name="both")
    assert combined.name == "both"
    assert combined.lowering_recipe.partitioners == fp32.lowering_recipe.partitioners
    assert combined.lowering_recipe.edge_transform_passes == [count_nodes]
    assert ExportRecipe.combine([fp32]) is fp32
    model, inputs = get_example("tiny_classifier").build()
    _assert_eager(export(model, [inputs], combined).run_method(), model, inputs)
    assert seen == ["forward"]
    with pytest.raises(ValueError, match="strict"):
        ExportRecipe.combine([fp32, ExportRecipe(strict=False)])
    with pytest.raises(ValueError, match="_check_ir_validity"):
        ExportRecipe.combine([fp32, ExportRecipe(lowering_recipe=LoweringRecipe(
            edge_compile_config=EdgeCompileConfig(_check_ir_validity=True)))])
    with pytest.raises(ValueError, match="empty"):
        ExportRecipe.combine([])
    quant = ExportRecipe.combine([ExportRecipe(quantization_recipe=QuantizationRecipe(
        quantizers=["q1"])), ExportRecipe(quantization_recipe=QuantizationRecipe(quantizers=["q2"]))])
    assert quant.quantization_recipe.quantizers == ["q1", "q2"]


def test_registry_lists_xnnpack_and_every_recipe_type():
    assert "xnnpack" in recipe_registry.list_backends()
    assert {r.value for r in recipe_registry.get_supported_recipes("xnnpack")} == {
        "xnnpack_fp32", "xnnpack_pt2e_int8_dynamic_per_channel",
        "xnnpack_pt2e_int8_static_per_channel", "xnnpack_pt2e_int8_static_per_tensor",
        "xnnpack_torchao_int8da_int4w_per_channel", "xnnpack_torchao_int8da_int4w_per_tensor"}
    with pytest.raises(ValueError, match="Invalid recipe type"):
        ExportRecipe.get_recipe("xnnpack_fp32")


class QuantMLP(torch.nn.Module):  # in/out sizes divisible by 8da4w's group size 32
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.fc2 = torch.nn.Linear(64, 128), torch.nn.Linear(128, 32)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _quantized_xnnpack_landed() -> bool:
    """The XNNPACK quantizer (compiler) and quantized XNNPACK kernels (runtime) are both there."""
    return all(importlib.util.find_spec(m) is not None for m in (
        "edgetorch.backends.xnnpack.quantizer", "edgetorch.backends.xnnpack.runtime.kernels_quant"))


@pytest.mark.parametrize("recipe_type", [t for t in XNNPackRecipeType if t != XNNPackRecipeType.FP32])
@pytest.mark.xfail(not _quantized_xnnpack_landed(), strict=True,
                   raises=(FeatureNotAvailableError, InvalidProgramError),
                   reason="the quantized XNNPACK recipes need edgetorch's XNNPACK quantizer "
                          "(FeatureNotAvailableError until it lands) and the runtime's quantized "
                          "XNNPACK support (InvalidProgramError until it lands)")
def test_quantized_recipes(recipe_type):
    model = QuantMLP().eval()
    x = (torch.randn(4, 64),)
    session = export(model, [x], ExportRecipe.get_recipe(recipe_type))
    got, want = session.run_method()[0], model(*x).detach()
    assert got.shape == want.shape
    assert (got - want).abs().max() <= 0.05 * want.abs().max() + 0.05  # 8-bit / 4-bit error


def test_etrecord_from_an_export_session_feeds_the_inspector(tmp_path):
    from edgetorch.devtools import Inspector
    from edgetorch.devtools.etrecord import parse_etrecord

    model, inputs = get_example("mlp").build()
    session = export(model, [inputs], ExportRecipe.get_recipe(XNNPackRecipeType.FP32),
                     generate_etrecord=True)
    record = session.get_etrecord()
    assert record.edge_dialect_program is not None and record._debug_handle_map
    record.save(tmp_path / "mlp.etrecord")
    assert set(parse_etrecord(tmp_path / "mlp.etrecord")._debug_handle_map) == \
        set(record._debug_handle_map)
    from edgetorch.runtime import Runtime

    program = Runtime.get().load_program(session.get_pte_buffer(), enable_etdump=True)
    program.load_method("forward").execute(list(inputs))
    program.write_etdump_result_to_file(tmp_path / "mlp.etdp")
    inspector = Inspector(etdump_path=str(tmp_path / "mlp.etdp"),
                          etrecord=str(tmp_path / "mlp.etrecord"))
    ops = {op for block in inspector.event_blocks for e in block.events for op in e.op_types}
    assert ops  # events mapped back to the Edge graph's operators through the ETRecord
    with pytest.raises(RuntimeError, match="generate_etrecord=True"):
        export(model, [inputs]).get_etrecord()


def test_bad_pipelines_and_inputs():
    model, inputs = get_example("mlp").build()
    with pytest.raises(ValueError, match="example_inputs are required"):
        ExportSession(model)
    ep = torch.export.export(model, inputs)
    with pytest.raises(ValueError, match="TORCH_EXPORT"):
        export(ep, None, ExportRecipe(pipeline_stages=[StageType.TORCH_EXPORT,
                                                       StageType.TO_EXECUTORCH]))
    with pytest.raises(ValueError, match="Invalid transition"):
        export(model, [inputs], ExportRecipe(pipeline_stages=[StageType.TORCH_EXPORT,
                                                              StageType.TO_EXECUTORCH]))
    with pytest.raises(TypeError, match="Unsupported model type"):
        export(42, [inputs])


def test_the_api_is_marked_experimental():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ExportRecipe()
    assert [w.category for w in caught] == [ExperimentalWarning]
    assert "experimental" in str(caught[0].message)


def test_registry_is_one_per_process_and_providers_say_what_they_support():
    from edgetorch.backends.xnnpack.recipes import XNNPACKRecipeProvider
    from edgetorch.export.recipe_registry import RecipeRegistry, recipe_registry

    assert RecipeRegistry() is recipe_registry
    assert "xnnpack" in RecipeRegistry().list_backends()  # constructing again keeps providers
    provider = XNNPACKRecipeProvider()
    supported = list(provider.get_supported_recipes())
    assert supported and all(provider.supports_recipe(r) for r in supported)
