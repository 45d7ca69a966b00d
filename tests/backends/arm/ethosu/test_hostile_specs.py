"""A ``.pte`` cannot steer the Ethos-U runtime (issue 28, item 2): its ``debug_artifact_path``
is followed only inside the ``.pte``'s folder or a folder the user names, and none of its own
Vela flags beyond the target's options ever reaches Vela."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from ethosu_util import load_npz

import edgetorch.backends.arm.runtime.ethosu as sim
from edgetorch.errors import UnsafeFileError
from edgetorch.runtime import Runtime
from edgetorch.schema.pte import PteFile, serialize_pte

pytestmark = pytest.mark.compat


@pytest.fixture(autouse=True)
def _no_graphs_compiled_in_this_process(monkeypatch):
    """The runtime runs a delegate this process compiled from the graph it kept in memory
    (``ethosu.compiled``), which needs no path: an earlier test in the same worker that compiled
    the same blob would hide what these tests check, so they start without any."""
    from edgetorch.backends.arm.ethosu import compiled

    monkeypatch.setattr(compiled, "COMPILED", {})
    monkeypatch.setattr(sim, "COMPILED", {})


def _with_specs(pte: bytes, **specs: bytes) -> bytes:
    parsed = PteFile.parse(pte)
    args = parsed.to_serialize_args()
    program = args.pop("program")
    for cs in program.execution_plan[0].delegates[0].compile_specs:
        if cs.key in specs:
            cs.value = specs[cs.key]
    return serialize_pte(program, **args)


def _run(pte, inputs, **options):
    program = Runtime.get().load_program(pte, backend_options={"EthosUBackend": options})
    return program.load_method("forward").execute(inputs)


@pytest.mark.parametrize("style", ["absolute", "relative"])
def test_a_stored_path_outside_the_pte_folder_is_refused(ref_arm, tmp_path, style):
    out = ref_arm("add", "ethos-u55-128")
    inputs = load_npz(out / "inputs.npz")
    other = tmp_path / "unrelated"
    shutil.copytree(out / "inter", other)  # a folder the user never named
    home = tmp_path / "home"
    home.mkdir()
    stored = str(other) if style == "absolute" else "../unrelated"
    pte = home / "model.pte"
    pte.write_bytes(_with_specs((out / "model.pte").read_bytes(),
                                debug_artifact_path=stored.encode()))
    with pytest.raises(UnsafeFileError, match="unrelated.*allowed_dirs") as e:
        _run(pte, inputs)
    assert e.value.code == 0x22
    with pytest.raises(UnsafeFileError):
        _run(pte, inputs, simulation="tosa")
    # naming the folder allows it; the command stream needs no folder at all
    expected = _run(out / "model.pte", inputs)
    np.testing.assert_array_equal(_run(pte, inputs, allowed_dirs=[str(other)])[0], expected[0])
    np.testing.assert_array_equal(_run(pte, inputs, simulation="npu")[0], expected[0])


def test_a_symlink_out_of_the_pte_folder_is_refused(ref_arm, tmp_path):
    out = ref_arm("add", "ethos-u55-128")
    home = tmp_path / "home"
    home.mkdir()
    (home / "link").symlink_to(out / "inter", target_is_directory=True)
    pte = home / "model.pte"
    pte.write_bytes(_with_specs((out / "model.pte").read_bytes(), debug_artifact_path=b"link"))
    with pytest.raises(UnsafeFileError, match="link"):
        _run(pte, load_npz(out / "inputs.npz"))


def test_a_tosa_spec_cannot_become_a_glob_pattern(ref_arm, tmp_path):
    out = ref_arm("add", "ethos-u55-128")
    pte = tmp_path / "model.pte"
    pte.write_bytes(_with_specs((out / "model.pte").read_bytes(), tosa_spec=b"../../*"))
    with pytest.raises(Exception) as e:
        _run(pte, load_npz(out / "inputs.npz"), simulation="tosa")
    assert "TOSA specification name" in str(e.value) or "tosa_spec" in str(e.value)


def test_only_target_options_of_the_stored_flags_reach_vela():
    stored = (b"--supported-ops-report --config=/etc/passwd --output-dir=/tmp/x "
              b"--accelerator-config=ethos-u55-128 --config=Arm/vela.ini --output-format=raw "
              b"--system-config=Ethos_U55_High_End_Embedded --memory-mode=Shared_Sram "
              b"--verbose-all --enable-debug-db --optimise=Performance --system-config=a/../b")
    assert sim.target_flags(stored) == [
        "--accelerator-config=ethos-u55-128", "--config=Arm/vela.ini", "--output-format=raw",
        "--system-config=Ethos_U55_High_End_Embedded", "--memory-mode=Shared_Sram",
        "--optimise=Performance"]


def test_the_tie_break_hands_vela_only_target_flags(monkeypatch, tmp_path):
    import edgetorch.backends.arm.ethosu.vela as vela_mod

    seen = []

    def fake_compile(tosa, flags, *a, **k):
        seen.append(list(flags))
        raise UnsafeFileError("stop")  # the flags are what is checked

    monkeypatch.setattr(vela_mod, "vela_compile", fake_compile)
    monkeypatch.chdir(tmp_path)
    specs = {"compile_flags": b"--supported-ops-report --accelerator-config=ethos-u55-128"}
    with pytest.raises(UnsafeFileError):
        sim._same_command_stream(b"", specs, None)
    assert seen == [["--accelerator-config=ethos-u55-128"]]
    assert list(tmp_path.iterdir()) == []
