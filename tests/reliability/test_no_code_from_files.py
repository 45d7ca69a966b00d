"""Nothing in a file is executed as code (issue 13, item 7).

Every module that reads ``.pte``, ``.ptd``, ``.bpte``, ETDump, ETRecord or delegate blobs is
scanned (code_exec_scan.py, an AST scan) for unpicklers, eval/exec and their relatives. A use
that is deliberate goes into ``ALLOWED`` with the reason it cannot run a file's bytes; an entry
that no longer matches anything fails too, so the list stays true.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from code_exec_scan import scan_source, scan_tree

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "src" / "edgetorch"

# The loaders and everything a loader may call (a new reader lands inside one of these).
SCANNED = ["schema", "runtime", "kernels", "backends", "devtools", "export", "extension", "util",
           "cli.py", "errors.py", "__init__.py"]
# Compiler-only code (torch side): it reads the user's Python model, not files.
NOT_SCANNED = {
    "exir": "the compiler: takes an nn.Module / ExportedProgram in memory, reads no file",
    "examples": "model definitions built in Python, not read from files",
    "quantization": "PT2E quantizers working on torch graphs in memory",
    "demo.py": "drives the compiler and then the runtime through the scanned modules",
}

# (file relative to the repository, construct) -> why it cannot execute a file's bytes.
ALLOWED: dict[tuple[str, str], str] = {
    ("src/edgetorch/util/lazy_names.py", "importlib.import_module"):
        "PEP 562 lazy exports: the module comes from the table the package passes in its own "
        "code (a name the package exports, never a file's contents)",
    ("src/edgetorch/backends/xnnpack/__init__.py", "importlib.import_module"):
        "lazy import of the AOT half by attribute name; the module comes from a fixed table "
        "in the same file (_COMPILER), never from a file's contents",
    ("src/edgetorch/backends/arm/__init__.py", "importlib.import_module"):
        "lazy import by attribute name from the fixed LAZY_IMPORTS table in the same file",
    ("src/edgetorch/backends/arm/ethosu/__init__.py", "importlib.import_module"):
        "lazy import by attribute name from the fixed LAZY_IMPORTS table in the same file",
    ("src/edgetorch/backends/openvino/__init__.py", "importlib.import_module"):
        "lazy import of the AOT half by attribute name from the fixed _COMPILER table",
    ("src/edgetorch/backends/arm/runtime/tosa_tools.py", "importlib.import_module"):
        "imports one of tosa-tools' modules, named by the caller in code (tosa_serializer, "
        "tosa_reference_model, tosa), never by a file's contents",
    ("src/edgetorch/backends/arm/scripts/models.py", "torch.load"):
        "aot_arm_compiler --model_name path.pth loads the user's own pickled nn.Module, as "
        "ExecuTorch's aot_arm_compiler does; inputs and calibration data use weights_only=True; "
        "no .pte, .ptd, .bpte, ETRecord or ETDump reaches it",
    ("src/edgetorch/backends/xnnpack/runtime/plan.py", "compile"):
        "the XNNPACK plan writes its own straight-line function from fixed templates: the only "
        "values a blob contributes are Python ints (value slots, external ids, argument counts) "
        "and tuples of ints (array shapes), formatted as digits; every other name is an "
        "identifier plan.py generates for objects it puts in the namespace itself",
    ("src/edgetorch/backends/xnnpack/runtime/plan.py", "exec"):
        "executes the code object compiled just above from plan.py's own generated source "
        "(see the compile entry): no text from a file reaches it",
    ("src/edgetorch/schema/fbs/reader.py", "compile"):
        "compile_reader writes one reading function per table class of a schema declared in "
        "code (the dataclasses of edgetorch.schema), before any buffer is read: the only "
        "values in its text are vtable slots and byte widths, ints from those declarations; "
        "field names, defaults and enum members go into the namespace, not the text",
    ("src/edgetorch/schema/fbs/reader.py", "exec"):
        "executes the code object compiled just above from compile_reader's own text (see "
        "the compile entry): no byte of a file reaches it",
    ("src/edgetorch/util/torch_files.py", "torch.export.load"):
        "load_exported_program calls torch's .pt2 reader inside _weights_only_unpickling, which "
        "replaces every unpickler it reaches (torch.load forced to weights_only=True, "
        "pickle.loads and torch._C._pickle_load_obj refusing), then checks the graph's call "
        "targets (tests/reliability/test_hostile_torch_files.py)",
}


def _findings():
    out = []
    for entry in SCANNED:
        path = PACKAGE / entry
        if path.exists():
            out += scan_tree(path, REPO)
    return out


def test_loaders_never_execute_file_contents():
    findings = _findings()
    unexplained = [f for f in findings if (f.path, f.what) not in ALLOWED]
    assert not unexplained, (
        "code that could run bytes read from a file (fix it, or add it to ALLOWED with the "
        "reason it cannot):\n" + "\n".join(map(str, unexplained)))


def test_every_allowance_has_a_reason_and_is_still_needed():
    used = {(f.path, f.what) for f in _findings()}
    for key, reason in ALLOWED.items():
        assert len(reason.split()) >= 5, f"{key}: give a real reason, not {reason!r}"
        assert key in used, f"{key} is allowed but no longer occurs: remove it from ALLOWED"


def test_every_part_of_the_package_is_scanned_or_explained():
    parts = {p.name for p in PACKAGE.iterdir() if p.suffix == ".py" or
             (p.is_dir() and (p / "__init__.py").exists())}
    unknown = parts - set(SCANNED) - set(NOT_SCANNED)
    assert not unknown, (f"new modules {sorted(unknown)}: add them to SCANNED (if they may "
                         "read a file) or NOT_SCANNED with a reason")


# ---- the scanner itself finds what it must ------------------------------------------------

@pytest.mark.parametrize("source,what", [
    ("import pickle\npickle.loads(b)", "pickle.loads"),
    ("import pickle", "import pickle"),
    ("from pickle import loads", "from pickle import ..."),
    ("import marshal as m", "import marshal"),
    ("import dill", "import dill"),
    ("eval(text)", "eval"),
    ("exec(code, {})", "exec"),
    ("compile(src, 'f', 'exec')", "compile"),
    ("__import__(name)", "__import__"),
    ("import importlib\nimportlib.import_module(name)", "importlib.import_module"),
    ("import torch\ntorch.load(f)", "torch.load"),
    ("import torch\ntorch.load(f, weights_only=False)", "torch.load"),
    ("from torch import load\nload(f)", "torch.load"),
    ("import torch\ntorch.jit.load(f)", "torch.jit.load"),
    ("import torch\ntorch.export.load(f)", "torch.export.load"),
    ("import numpy as np\nnp.load(f, allow_pickle=True)", "numpy.load"),
    ("import numpy\nnumpy.load(f, allow_pickle=flag)", "numpy.load"),
    ("import yaml\nyaml.load(s)", "yaml.load"),
    ("import yaml\nyaml.unsafe_load(s)", "yaml.unsafe_load"),
])
def test_scanner_flags(source, what):
    findings = scan_source(source, "x.py")
    assert [f.what for f in findings][-1:] == [what], findings
    assert findings[-1].line == source.count("\n") + 1


@pytest.mark.parametrize("source", [
    "import torch\ntorch.load(f, weights_only=True)",
    "import numpy as np\nnp.load(f)",
    "import numpy as np\nnp.load(f, allow_pickle=False)",
    "import re\nre.compile('x')",
    "model.eval()",
    "import importlib\nimportlib.import_module('edgetorch.kernels')",
    "import yaml\nyaml.load(s, Loader=yaml.SafeLoader)",
    "import yaml\nyaml.safe_load(s)",
    "import json\njson.loads(s)",
])
def test_scanner_passes_safe_code(source):
    assert scan_source(source, "x.py") == []
