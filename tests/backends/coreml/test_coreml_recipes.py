"""Core ML's export recipes (``CoreMLRecipeProvider``, ExecuTorch 1.5.1's): the recipe each
type builds (compile specs, partitioner options, quantization configs, deployment targets),
parameter checks, and one float recipe exported end to end, fully delegated."""

from __future__ import annotations

import pytest
import torch

from edgetorch.errors import CompileSpecError

pytestmark = pytest.mark.torch
ct = pytest.importorskip("coremltools")


@pytest.fixture(scope="module")
def recipes():
    from edgetorch.backends.apple.coreml import recipes

    return recipes


def _specs(recipe):
    (partitioner,) = recipe.lowering_recipe.partitioners
    return partitioner.delegation_spec.compile_specs


def _backend():
    from edgetorch.backends.apple.coreml.compiler import CoreMLBackend

    return CoreMLBackend


def test_registered_with_the_recipe_registry(recipes):
    from edgetorch.export import recipe_registry

    assert "coreml" in recipe_registry.list_backends()
    assert set(recipe_registry.get_supported_recipes("coreml")) == set(recipes.CoreMLRecipeType)


@pytest.mark.parametrize("name, precision", [("FP32", "FLOAT32"), ("FP16", "FLOAT16")])
def test_float_recipes_set_precision_and_keep_the_target(recipes, name, precision):
    recipe = recipes.CoreMLRecipeProvider().create_recipe(
        recipes.CoreMLRecipeType[name], compute_unit=ct.ComputeUnit.CPU_ONLY)
    specs, backend = _specs(recipe), _backend()
    assert backend.model_compute_precision_from_compile_specs(specs) == ct.precision[precision]
    assert backend.compute_unit_from_compile_specs(specs) == ct.ComputeUnit.CPU_ONLY
    assert backend.min_deployment_target_from_compile_specs(specs) is None
    assert recipe.quantization_recipe is None
    assert recipe.lowering_recipe.partitioners[0].take_over_mutable_buffer


@pytest.mark.parametrize("name, oldest", [
    ("PT2E_INT8_STATIC", "iOS17"), ("TORCHAO_INT8_WEIGHT_ONLY_PER_CHANNEL", "iOS16"),
    ("TORCHAO_INT4_WEIGHT_ONLY_PER_GROUP", "iOS18")])
def test_quantized_recipes_raise_the_target_and_refuse_an_older_one(recipes, name, oldest):
    provider, kind = recipes.CoreMLRecipeProvider(), recipes.CoreMLRecipeType[name]
    # ExecuTorch's wording (the enum's str, its number), then its name
    why = f"must be {getattr(ct.target, oldest)} or higher \\({oldest}\\)"
    with pytest.raises(CompileSpecError, match=why):
        provider.create_recipe(kind, minimum_deployment_target=ct.target.iOS15)
    recipe = provider.create_recipe(kind)
    target = _backend().min_deployment_target_from_compile_specs(_specs(recipe))
    assert target == getattr(ct.target, oldest)
    # Core ML keeps state from iOS18 on; an older target leaves mutable buffers to the program
    take_over = recipe.lowering_recipe.partitioners[0].take_over_mutable_buffer
    assert take_over == (oldest == "iOS18")


def test_torchao_group_size_and_filter(recipes):
    from torchao.quantization.granularity import PerGroup

    provider, t = recipes.CoreMLRecipeProvider(), recipes.CoreMLRecipeType
    recipe = provider.create_recipe(t.TORCHAO_INT8_WEIGHT_ONLY_PER_GROUP, group_size=16)
    (config,) = recipe.quantization_recipe.ao_quantization_configs
    assert config.ao_base_config.granularity == PerGroup(16) and config.filter_fn is None
    with pytest.raises(CompileSpecError, match="must be an integer"):
        provider.create_recipe(t.TORCHAO_INT4_WEIGHT_ONLY_PER_GROUP, group_size="32")
    with pytest.raises(CompileSpecError, match="must be positive"):
        provider.create_recipe(t.TORCHAO_INT4_WEIGHT_ONLY_PER_GROUP, group_size=0)


def test_codebook_parameters(recipes):
    provider, t = recipes.CoreMLRecipeProvider(), recipes.CoreMLRecipeType
    recipe = provider.create_recipe(t.CODEBOOK_WEIGHT_ONLY, bits=3, block_size=[-1, 16])
    (config,) = recipe.quantization_recipe.ao_quantization_configs
    assert config.ao_base_config.dtype == torch.uint3
    assert config.filter_fn(torch.nn.Linear(2, 2), "l")
    assert not config.filter_fn(torch.nn.Conv2d(1, 1, 1), "c")
    for kwargs, why in (({"bits": 9, "block_size": [-1, 8]}, "between 1 and 8"),
                        ({"bits": 3, "block_size": "[-1, 8]"}, "must be a list"),
                        ({"bits": 3}, "must be present")):
        with pytest.raises(CompileSpecError, match=why):
            provider.create_recipe(t.CODEBOOK_WEIGHT_ONLY, **kwargs)


def test_fp32_recipe_exports_fully_delegated(recipes):
    from edgetorch.exir.schema import DelegateCall
    from edgetorch.export import ExportRecipe, export

    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    session = export(model=model.eval(), example_inputs=[(torch.randn(3, 8),)],
                     export_recipe=ExportRecipe.get_recipe(recipes.CoreMLRecipeType.FP32))
    (instruction,) = session.get_executorch_program().execution_plan[0].chains[0].instructions
    assert isinstance(instruction.instr_args, DelegateCall)
