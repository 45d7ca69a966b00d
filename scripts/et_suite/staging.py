"""Export ExecuTorch's test code and lay out the two staged test trees.

``<build>/src/<commit>/`` holds the test code of the exported source dirs (read from the git
directory, so a bare mirror works). From it two stage folders are made, each holding only ExecuTorch's *test* code:

- ``<stage>/ref/tree``: as fetched, run under the reference Python with ``executorch`` 1.5.1;
- ``<stage>/ours/tree``: the same files with the imports renamed to ``edgetorch``.

Each stage also has a ``boot`` folder for ``PYTHONPATH``: ``sitecustomize.py`` (the meta-path
finder of ``stage_finder.py``: it appends the staged folder of each installed package's dotted
path to that package's ``__path__``, so ``edgetorch.backends.xnnpack.test.tester`` resolves to
the staged file while every installed module wins), and the pytest plugin that records each
test's outcome as it finishes. Nothing is ever copied into ``src/``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent

# ``from executorch...`` / ``import executorch...`` and dotted module paths in strings
# (``mock.patch("executorch.exir...")``); never ``executorch_prim``, ``libexecutorch`` or paths.
IMPORT_RE = re.compile(r"^(\s*(?:from|import)\s+)executorch\b", re.MULTILINE)
DOTTED_RE = re.compile(r"(?<![\w./-])executorch\.(?=[A-Za-z_])")
# The same path as torch.fx mangles it into generated code (``executorch_exir_dialects_edge__ops_
# aten_add_Tensor``): tests check graph code for these names.
MANGLED_RE = re.compile(r"(?<![\w./-])executorch_exir_")


def git(git_dir: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], check=True, **kw)


def resolve_commit(source: Path, ref: str) -> tuple[Path, str]:
    git_dir = source if (source / "objects").is_dir() else source / ".git"
    out = git(git_dir, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}",
              capture_output=True, text=True)
    return git_dir, out.stdout.strip()


def export_sources(git_dir: Path, commit: str, dirs: tuple[str, ...], dest: Path) -> Path:
    """Write the test code under ``dirs`` at ``commit`` to ``dest/<commit>``.

    Blobs are read with ``git cat-file --batch`` rather than ``git archive``: a partial mirror
    may lack some large blobs (model weights, tokenizers), which would fail a whole archive;
    here a missing blob is listed in ``.missing`` and skipped.
    """
    out = dest / commit
    done = out / ".exported"
    if done.exists() and set(done.read_text().split()) >= set(dirs):
        return out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    listing = git(git_dir, "ls-tree", "-r", "-z", commit, "--", *dirs, capture_output=True).stdout
    blobs = []
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, path = entry.split(b"\t", 1)
        mode, kind, sha = meta.split()
        rel = Path(path.decode("utf-8", "surrogateescape"))
        if kind == b"blob" and mode != b"120000" and is_test_code(rel):
            blobs.append((sha.decode(), rel))
    missing = []
    with subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        for sha, rel in blobs:
            proc.stdin.write(sha.encode() + b"\n")
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) != 3:  # "<sha> missing"
                missing.append(rel.as_posix())
                continue
            data = proc.stdout.read(int(header[2]))
            proc.stdout.read(1)  # the newline after each object
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(data)
        proc.stdin.close()
    (out / ".missing").write_text("\n".join(missing))
    done.write_text("\n".join(dirs))
    return out


def is_test_code(rel: Path) -> bool:
    """Test files, test folders, test helpers and conftests: the only code that is staged."""
    parts = rel.with_suffix("").parts
    return rel.name == "conftest.py" or any(
        p in ("test", "tests") or p.startswith("test_") or p.endswith(("_test", "test_util"))
        for p in parts)


def rename_imports(text: str) -> str:
    text = DOTTED_RE.sub("edgetorch.", IMPORT_RE.sub(r"\1edgetorch", text))
    return MANGLED_RE.sub("edgetorch_exir_", text)


def stage_tree(src: Path, dest: Path, rename: bool) -> int:
    """Copy the test code of ``src`` to ``dest`` (renamed when asked); returns files staged.

    Non-Python files inside test folders (assets, golden files) come along; library code never.
    """
    if dest.exists():
        shutil.rmtree(dest)
    count = 0
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if not path.is_file() or rel.name in (".exported", ".missing") or not is_test_code(rel):
            continue
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if rename and path.suffix == ".py":
            text = path.read_text(encoding="utf-8", errors="surrogateescape")
            target.write_text(rename_imports(text), encoding="utf-8", errors="surrogateescape")
        else:
            shutil.copyfile(path, target)
        count += 1
    return count


PYTEST_INI = """\
[pytest]
addopts = --import-mode=importlib -p no:cacheprovider -p et_suite_outcomes -rN --tb=short
consider_namespace_packages = true
python_files = test_*.py *_test.py
"""


def write_boot(stage: Path, package: str) -> Path:
    """The folder put first on ``PYTHONPATH``: the finder (as ``sitecustomize``) and plugin."""
    boot = stage / "boot"
    boot.mkdir(parents=True, exist_ok=True)
    finder = (HERE / "stage_finder.py").read_text()
    (boot / "sitecustomize.py").write_text(finder.replace("__PACKAGE__", package).replace(
        "__TREE__", str(stage / "tree")))
    shutil.copyfile(HERE / "outcome_plugin.py", boot / "et_suite_outcomes.py")
    (stage / "tree" / "pytest.ini").write_text(PYTEST_INI)
    return boot


def stage(src: Path, stage_root: Path) -> dict[str, Path]:
    """Make ``ours`` and ``ref`` stages from the exported sources; returns their roots.

    A stage already made from the same sources is kept (a run of one side may be going on in
    it); delete ``<build>/stage`` to make it anew.
    """
    roots = {}
    for side, package, rename in (("ours", "edgetorch", True), ("ref", "executorch", False)):
        root = stage_root / side
        made = root / ".staged"
        if not (made.exists() and made.read_text() == str(src)):
            stage_tree(src, root / "tree", rename)
            made.write_text(str(src))
        write_boot(root, package)
        roots[side] = root
    return roots
