"""EthosUCompileSpec: ExecuTorch 1.5.1's defaults, flags, TOSA specs and compile-spec order."""

from __future__ import annotations

import pytest

from edgetorch.backends.arm.ethosu import EthosUCompileSpec, VelaExternalBlockPlacements
from edgetorch.backends.arm.ethosu.compile_spec import TARGETS

DEFAULTS = {"u55": ("Ethos_U55_High_End_Embedded", "Shared_Sram", "TOSA-1.0+INT+int16+int4+u55"),
            "u65": ("Ethos_U65_High_End", "Dedicated_Sram_384KB", "TOSA-1.0+INT+int16+int4+u55"),
            "u85": ("Ethos_U85_SYS_DRAM_Mid", "Sram_Only", "TOSA-1.0+INT+int16+int4+cf")}
ALL_TARGETS = ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256", "ethos-u65-256",
               "ethos-u65-512", "ethos-u85-128", "ethos-u85-256", "ethos-u85-512",
               "ethos-u85-1024", "ethos-u85-2048"]


def test_every_seed_target_is_known():
    assert sorted(TARGETS) == sorted(ALL_TARGETS)


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_defaults_and_specs(target):
    system, mode, tosa = DEFAULTS[target[6:9]]
    cs = EthosUCompileSpec(target)
    assert cs.compiler_flags == [f"--accelerator-config={target}", "--config=Arm/vela.ini",
                                 "--output-format=raw", f"--system-config={system}",
                                 f"--memory-mode={mode}"]
    assert str(cs.tosa_spec) == tosa and (cs.system_config, cs.memory_mode) == (system, mode)
    keys = [s.key for s in cs._to_list()]
    assert keys == ["tosa_spec", "compile_flags", "output_format", "preserve_io_quantization",
                    "target"]
    assert EthosUCompileSpec._from_list(cs._to_list()) == cs


def test_order_with_everything():
    cs = EthosUCompileSpec("ethos-u55-128", extra_flags=["--verbose-operators"],
                           external_block_placements=VelaExternalBlockPlacements(
                               weight_data="npu_weights", cmd_data="cmds"))
    cs.dump_intermediate_artifacts_to("out/").dump_debug_info(EthosUCompileSpec.DebugMode.JSON)
    cs._get_pass_pipeline_config()  # what quantizing does (U55: STABLE softmax)
    specs = cs._to_list()
    assert [s.key for s in specs] == [
        "tosa_spec", "compile_flags", "output_format", "debug_artifact_path", "dump_debug_info",
        "transform_pipeline_config", "preserve_io_quantization", "target",
        "external_block_placements"]
    values = {s.key: s.value for s in specs}
    assert values["compile_flags"].startswith(b"--verbose-operators --accelerator-config=")
    assert values["external_block_placements"] == b'{"cmd_data":"cmds","weight_data":"npu_weights"}'
    assert values["transform_pipeline_config"] == (
        b'{"softmax": "STABLE", "leaky_relu": "DECOMPOSE", "quantize_inf": {"neg_inf": -256.0, '
        b'"pos_inf": 255.0}, "sdpa_safe_softmax_guard": "PRESERVE"}')
    back = EthosUCompileSpec._from_list(specs)
    assert back == cs and back.external_block_placements == cs.external_block_placements


def test_overrides():
    cs = EthosUCompileSpec("ethos-u85-256", system_config="Ethos_U85_SYS_Flash_High",
                           memory_mode="Dedicated_Sram", config_ini="my.ini")
    assert "--config=my.ini" in cs.compiler_flags
    assert (cs.system_config, cs.memory_mode) == ("Ethos_U85_SYS_Flash_High", "Dedicated_Sram")


@pytest.mark.parametrize("bad", ["ethos-u99-128", "ethos-u55-999", "cortex-m55"])
def test_unknown_target(bad):
    with pytest.raises(RuntimeError, match="Unknown ethos target"):
        EthosUCompileSpec(bad)


def test_bad_placement():
    with pytest.raises(ValueError, match="Invalid external Vela placement"):
        VelaExternalBlockPlacements(weight_data="")
