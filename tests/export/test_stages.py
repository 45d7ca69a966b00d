"""edgetorch.export's stage pipeline: ExportSession runs Stage objects (edgetorch.export.stages),
validates their order, lets a caller replace one, and each stage does what ExecuTorch's does
(checked end to end against eager torch, or by what the stage hands on)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from edgetorch.backends.xnnpack import XnnpackPartitioner  # noqa: E402
from edgetorch.backends.xnnpack.quantizer import (  # noqa: E402
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)
from edgetorch.errors import ExportArgumentError, PassError  # noqa: E402
from edgetorch.examples import get_example  # noqa: E402
from edgetorch.exir import EdgeProgramManager  # noqa: E402
from edgetorch.export import (  # noqa: E402
    AOQuantizationConfig,
    ExportRecipe,
    ExportSession,
    LoweringRecipe,
    QuantizationRecipe,
    StageType,
    export,
)
from edgetorch.export.stages import (  # noqa: E402
    EdgeProgramManagerTransformStage,
    PipelineArtifact,
    SourceTransformStage,
    Stage,
    ToBackendStage,
    TorchExportStage,
)

pytestmark = pytest.mark.filterwarnings("ignore::edgetorch.exir._warnings.ExperimentalWarning")
S = StageType


def _close(outputs, model, inputs, tol=1e-5):
    with torch.no_grad():
        want = model(*inputs)
    torch.testing.assert_close(outputs[0], want, rtol=tol, atol=tol)


class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


def test_separate_stages_lower_to_xnnpack_and_match_eager():
    model, inputs = get_example("mlp").build()
    recipe = ExportRecipe(
        lowering_recipe=LoweringRecipe(partitioners=[XnnpackPartitioner()]),
        pipeline_stages=[S.TORCH_EXPORT, S.TO_EDGE, S.TO_BACKEND, S.TO_EXECUTORCH])
    session = export(model, [inputs], recipe)
    assert list(session.get_stage_artifacts()) == recipe.pipeline_stages
    _close(session.run_method(), model, inputs)
    # the Edge manager is TO_BACKEND's (delegated), not TO_EDGE's
    backend = session.get_stage_artifacts()[S.TO_BACKEND]
    assert session.get_edge_program_manager() is backend.data
    info = backend.get_context("delegation_info")
    assert info.num_delegated_subgraphs >= 1
    assert backend.get_context("delegation_info_by_method") == {"forward": info}
    assert session.get_registered_stage(S.TO_BACKEND).delegation_info is info
    assert backend.get_context("duration_ms") >= 0


def test_edge_passes_run_once_and_the_manager_passes_after_them():
    calls = []

    def edge_passes(method, ep):
        calls.append(("edge", method))
        return []

    def manager_passes(edge):
        calls.append(("manager", sorted(edge.methods)))
        return []

    lowering = LoweringRecipe(edge_transform_passes=[edge_passes],
                              edge_manager_transform_passes=[manager_passes])
    model, inputs = get_example("simple_model").build()
    session = export(model, [inputs], ExportRecipe(lowering_recipe=lowering))
    # the default pipeline adds the manager transform stage for the manager passes, and the
    # per-method passes ran in TO_EDGE_TRANSFORM_AND_LOWER only
    assert S.EDGE_PROGRAM_MANAGER_TRANSFORM in session.get_stage_artifacts()
    assert calls == [("edge", "forward"), ("manager", ["forward"])]
    edge = session.get_edge_program_manager()
    assert edge is session.get_stage_artifacts()[S.EDGE_PROGRAM_MANAGER_TRANSFORM].data
    _close(session.run_method(), model, inputs)

    calls.clear()  # after TO_EDGE (no lowering stage), the transform stage runs both kinds
    export(model, [inputs], ExportRecipe(lowering_recipe=lowering, pipeline_stages=[
        S.TORCH_EXPORT, S.TO_EDGE, S.EDGE_PROGRAM_MANAGER_TRANSFORM, S.TO_EXECUTORCH]))
    assert calls == [("edge", "forward"), ("manager", ["forward"])]


def test_pipeline_order_is_checked_before_anything_runs():
    model, inputs = get_example("mlp").build()

    def session(stages):
        return ExportSession(model, [inputs], ExportRecipe(pipeline_stages=stages))

    for stages in ([S.TO_BACKEND, S.TO_EXECUTORCH], [S.TO_EXECUTORCH]):
        with pytest.raises(ValueError, match="cannot start a pipeline"):
            session(stages).export()
    with pytest.raises(ValueError, match="Invalid transition"):
        session([S.TORCH_EXPORT, S.TO_EDGE_TRANSFORM_AND_LOWER, S.QUANTIZE]).export()
    with pytest.raises(ValueError, match="Invalid transition"):
        session([S.TORCH_EXPORT, S.TO_EDGE_TRANSFORM_AND_LOWER, S.TO_BACKEND]).export()
    graph_module = torch.fx.symbolic_trace(model)
    with pytest.raises(ValueError, match="QUANTIZE.*GraphModule"):
        ExportSession(graph_module, [inputs], ExportRecipe(pipeline_stages=[
            S.QUANTIZE, S.TORCH_EXPORT, S.TO_EDGE_TRANSFORM_AND_LOWER, S.TO_EXECUTORCH])).export()
    # a refused pipeline keeps what the last run made
    good = session([S.TORCH_EXPORT, S.TO_EDGE, S.TO_EXECUTORCH])
    good.export()
    good._pipeline_stages = [S.TO_EXECUTORCH]
    with pytest.raises(ValueError):
        good.export()
    assert S.TO_EXECUTORCH in good.get_stage_artifacts()


class ScaleWeights(Stage):
    """A stage of the caller's own, in place of TORCH_EXPORT: doubles the models' weights
    first, then exports as the stage it replaces."""

    stage_type = S.TORCH_EXPORT
    valid_predecessor_stages: list = []
    can_start_pipeline = True

    def run(self, artifact: PipelineArtifact) -> None:
        with torch.no_grad():
            for model in artifact.data.values():
                for p in model.parameters():
                    p.mul_(2)
        inner = TorchExportStage()
        inner.run(artifact)
        self._artifact = inner.get_artifacts()


def test_a_registered_stage_replaces_the_recipes():
    model, inputs = Linear(), (torch.randn(3, 8),)
    before = model.fc.weight.detach().clone()
    session = ExportSession(model, [inputs], ExportRecipe(
        pipeline_stages=[S.TORCH_EXPORT, S.TO_EDGE_TRANSFORM_AND_LOWER, S.TO_EXECUTORCH]))
    stage = ScaleWeights()
    session.register_stage(S.TORCH_EXPORT, stage)
    assert session.get_all_registered_stages()[S.TORCH_EXPORT] is stage
    session.export()
    assert torch.equal(model.fc.weight, 2 * before)
    _close(session.run_method(), model, inputs)  # the model, weights doubled in place
    with pytest.raises(RuntimeError, match="ScaleWeights not executed"):
        ScaleWeights().get_artifacts()


def test_stages_run_alone_on_artifacts():
    model, inputs = get_example("mlp").build()
    context = {"example_inputs": {"forward": [inputs]}}
    exported = TorchExportStage()
    exported.run(PipelineArtifact({"forward": model}, context))
    artifact = exported.get_artifacts()
    assert artifact.context == context and artifact.context is not context
    with pytest.raises(TypeError, match="Expected EdgeProgramManager"):
        EdgeProgramManagerTransformStage().run(artifact)
    with pytest.raises(RuntimeError, match="Edge program manager is not set"):
        ToBackendStage().run(PipelineArtifact(None))
    copied = artifact.copy_with_new_data(1)
    copied.add_context("k", 2)
    assert copied.data == 1 and "k" not in artifact.context


def test_partitioners_by_method_go_in_rounds():
    enc, x = get_example("mlp").build()
    head, y = get_example("simple_model").build()
    session = export({"encode": enc, "head": head}, {"encode": [x], "head": [y]},
                     ExportRecipe(lowering_recipe=LoweringRecipe(
                         partitioners={"encode": [XnnpackPartitioner()]}),
                         pipeline_stages=[S.TORCH_EXPORT, S.TO_EDGE, S.TO_BACKEND,
                                          S.TO_EXECUTORCH]))
    infos = session.get_stage_artifacts()[S.TO_BACKEND].get_context("delegation_info_by_method")
    assert infos["encode"].num_delegated_subgraphs >= 1
    assert infos["head"].num_delegated_subgraphs == 0  # no partitioner named it
    _close(session.run_method("encode"), enc, x)
    _close(session.run_method("head"), head, y)
    assert isinstance(session.get_edge_program_manager(), EdgeProgramManager)


def _int8(qat: bool = False) -> XNNPACKQuantizer:
    return XNNPACKQuantizer().set_global(
        get_symmetric_quantization_config(is_per_channel=True, is_qat=qat))


def test_quantize_stage_hooks_calibration_and_qat():
    model, inputs = Linear().eval(), (torch.randn(3, 8),)
    seen = []

    def calibration():
        seen.append("calibrate")
        return [inputs, (torch.randn(3, 8),)]

    def hook(name):
        def graph_pass(gm):
            seen.append(name)
            return gm
        return graph_pass

    quant = QuantizationRecipe(quantizers=[_int8()], calibration_inputs_fn=calibration,
                               pre_prepare_passes=[hook("pre_prepare")],
                               post_convert_passes=[hook("post_convert")])
    session = export(model, [inputs], ExportRecipe(quantization_recipe=quant))
    assert seen == ["pre_prepare", "calibrate", "post_convert"]
    quantized = session.get_stage_artifacts()[S.QUANTIZE].data["forward"]
    assert any("quantize_per" in str(n.target) for n in quantized.graph.nodes)
    _close(session.run_method(), model, inputs, tol=0.05)

    trained = []
    qat = QuantizationRecipe(quantizers=[_int8(qat=True)], is_qat=True,
                             train_fn=lambda gm: trained.append(gm(*inputs)))
    session = export(Linear(), [inputs], ExportRecipe(quantization_recipe=qat))
    assert len(trained) == 1
    _close(session.run_method(), model, inputs, tol=0.05)

    with pytest.raises(ValueError, match="train_fn"):
        export(Linear(), [inputs], ExportRecipe(quantization_recipe=QuantizationRecipe(
            quantizers=[_int8(qat=True)], is_qat=True)))

    def broken(gm):
        raise KeyError("no such node")

    with pytest.raises(PassError, match="broken.*KeyError"):
        export(Linear(), [inputs], ExportRecipe(quantization_recipe=QuantizationRecipe(
            quantizers=[_int8()], post_prepare_passes=[broken])))


def test_source_transform_takes_one_torchao_config_and_copies_the_model():
    from torchao.quantization import Int8WeightOnlyConfig

    model, x = Linear(), torch.randn(3, 8)
    weight = model.fc.weight
    stage = SourceTransformStage(QuantizationRecipe(
        ao_quantization_configs=[AOQuantizationConfig(Int8WeightOnlyConfig())]))
    stage.run(PipelineArtifact({"forward": model}))
    assert model.fc.weight is weight  # the caller's model is untouched
    transformed = stage.get_artifacts().data["forward"]
    assert transformed is not model
    with torch.no_grad():  # int8 weights: close to the float model, not equal
        got, want = transformed(x), model(x)
    assert not torch.equal(got, want)
    torch.testing.assert_close(got, want, rtol=0.05, atol=0.05)
    two = [AOQuantizationConfig(Int8WeightOnlyConfig())] * 2
    with pytest.raises(ValueError, match="multiple quantization configs"):
        SourceTransformStage(QuantizationRecipe(ao_quantization_configs=two)).run(
            PipelineArtifact({"forward": model}))


def test_session_errors():
    model, inputs = get_example("mlp").build()
    session = ExportSession(model, [inputs])
    with pytest.raises(RuntimeError, match="Executorch program manager is not initialized"):
        session.get_pte_buffer()
    with pytest.raises(RuntimeError, match="Exported program is not available"):
        session.get_exported_program()
    with pytest.raises(ExportArgumentError) as caught:
        session.save_to_pte("")
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, AssertionError)
    with pytest.raises(ValueError, match="is empty"):
        ExportSession({"forward": model}, {"forward": []}).get_example_input()
