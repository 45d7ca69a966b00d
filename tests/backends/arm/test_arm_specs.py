"""TosaSpecification and the Arm compile specs: ExecuTorch 1.5.1's strings, keys and order."""

from __future__ import annotations

import pytest

from edgetorch.backends.arm.common.pipeline_config import (
    ArmPassPipelineConfig,
    SoftmaxDecompositionConfig,
)
from edgetorch.backends.arm.tosa.compile_spec import TosaCompileSpec
from edgetorch.backends.arm.tosa.specification import TosaSpecification
from edgetorch.schema.program import CompileSpec


@pytest.mark.parametrize("text", ["TOSA-1.0+INT", "TOSA-1.0+FP", "TOSA-1.0+INT+int16",
                                  "TOSA-1.0+INT+int16+int4+u55", "TOSA-1.0+INT+int16+int4+cf",
                                  "TOSA-1.1+INT+int64", "TOSA-1.0+INT+FP+int4+cf"])
def test_spec_round_trips(text):
    assert str(TosaSpecification.create_from_string(text)) == text


def test_spec_fields():
    u55 = TosaSpecification.create_from_string("TOSA-1.0+INT+int16+int4+u55")
    assert u55.is_U55_subset and u55.support_integer() and not u55.support_float()
    assert u55.support_extension("int16") and not u55.support_extension("cf")
    u85 = TosaSpecification.create_from_string("TOSA-1.0+INT+int16+int4+cf")
    assert not u85.is_U55_subset and u85.support_extension("cf")
    assert u55 == u85  # ExecuTorch compares version and profiles only
    # Ordering on output: extensions, then 8k, then u55.
    assert str(TosaSpecification.create_from_string("TOSA-1.0+INT+u55+8k+int16")) == \
        "TOSA-1.0+INT+int16+8k+u55"


@pytest.mark.parametrize("bad, words", [
    ("TOSA-2.0+INT", "Wrong TOSA version"),
    ("TOSA-1.0", "Failed to parse"),
    ("TOSA-1.0+int16", "No profile"),
    ("TOSA-1.0+INT+fft", "Bad extensions"),
])
def test_spec_errors(bad, words):
    with pytest.raises(ValueError, match=words):
        TosaSpecification.create_from_string(bad)


def test_tosa_compile_spec_list_order_and_round_trip():
    cs = TosaCompileSpec("TOSA-1.0+INT").dump_intermediate_artifacts_to("inter/")
    assert cs._to_list() == [
        CompileSpec("tosa_spec", b"TOSA-1.0+INT"),
        CompileSpec("output_format", b"tosa"),
        CompileSpec("debug_artifact_path", b"inter/"),
        CompileSpec("preserve_io_quantization", b"False"),
    ]
    back = TosaCompileSpec._from_list(cs._to_list())
    assert back == cs and back.path_for_intermediates == "inter/"
    cs.dump_debug_info(TosaCompileSpec.DebugMode.JSON)
    assert [s.key for s in cs._to_list()] == ["tosa_spec", "output_format", "debug_artifact_path",
                                              "dump_debug_info", "preserve_io_quantization"]


def test_u55_pipeline_config_appears_only_once_asked_for():
    cs = TosaCompileSpec("TOSA-1.0+INT+int16+int4+u55")
    assert "transform_pipeline_config" not in [s.key for s in cs._to_list()]
    config = cs._get_pass_pipeline_config()  # what the quantizer does
    assert config.softmax is SoftmaxDecompositionConfig.STABLE
    specs = {s.key: s.value for s in cs._to_list()}
    assert specs["transform_pipeline_config"] == (
        b'{"softmax": "STABLE", "leaky_relu": "DECOMPOSE", "quantize_inf": '
        b'{"neg_inf": -256.0, "pos_inf": 255.0}, "sdpa_safe_softmax_guard": "PRESERVE"}')
    assert ArmPassPipelineConfig.from_dict(ArmPassPipelineConfig().to_dict()).is_default()


def test_compile_spec_errors():
    with pytest.raises(ValueError, match="compiler flags"):
        TosaCompileSpec._from_list([CompileSpec("tosa_spec", b"TOSA-1.0+INT"),
                                    CompileSpec("compile_flags", b"--x"),
                                    CompileSpec("output_format", b"tosa")])
    with pytest.raises(ValueError, match="Incorrect output format"):
        TosaCompileSpec._from_list([CompileSpec("tosa_spec", b"TOSA-1.0+INT"),
                                    CompileSpec("output_format", b"vela")])
    with pytest.raises(ValueError, match="No tosa_spec"):
        TosaCompileSpec._from_list([CompileSpec("output_format", b"tosa")])
