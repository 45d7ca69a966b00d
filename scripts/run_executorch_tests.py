#!/usr/bin/env python3
"""Run ExecuTorch's own Python tests against edgetorch and against ExecuTorch, side by side.

    python scripts/run_executorch_tests.py                      # clone v1.5.1 from GitHub
    python scripts/run_executorch_tests.py --source ~/executorch --ref v1.5.1
    python scripts/run_executorch_tests.py --source /path/to/executorch.git --ref <commit> \
        --wheel-tests

ExecuTorch's sources go to a scratch folder (``--scratch``, default a temporary directory),
never into this repository. Two trees are made there: ``executorch/`` as fetched, and
``edgetorch/`` where every ``import executorch``/``from executorch`` became ``edgetorch`` and
nothing else changed. Each test file then runs with pytest under edgetorch's Python (this
repository's ``src`` on PYTHONPATH) and, unrenamed, under the reference Python that has
``executorch`` installed. Test helpers the files import from ExecuTorch's tree
(``extension/pybindings/test/make_test.py`` ...) are found in the scratch tree by a fallback
import hook (see ``CONFTEST``), so edgetorch's own modules always win.

``--wheel-tests`` replaces each fetched file that the reference environment's installed
``executorch`` wheel also ships (``runtime/test/*.py``, ``extension/pybindings/test/*.py``) by
the wheel's copy: those are exactly the release's files even when ``--ref`` is only close to it.

Developer tool: CI cannot fetch. Record the figures in docs/compatibility.md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
URL = "https://github.com/pytorch/executorch"
DEFAULT_FILES = [
    "runtime/test/test_runtime.py",
    "runtime/test/test_runtime_xnnpack.py",
    "extension/pybindings/test/test_pybindings.py",
    "exir/tests/test_memory_planning.py",
    "exir/tests/test_pass_infra.py",
    "devtools/bundled_program/test/test_end2end.py",
    "runtime/test/test_runtime_etdump_gen.py",
]
# Folders whose helper modules the test files import besides their own folder.
HELPER_DIRS = ["exir", "extension", "devtools", "runtime", "test"]

IMPORT_RE = re.compile(r"^(\s*(?:from|import)\s+)executorch\b", re.MULTILINE)

# Written to the root of each tree: test helper modules under <package> that the installed
# package lacks are looked up in this tree, after every normal finder failed. A folder on the
# way to one becomes an empty namespace package: none of ExecuTorch's library code runs.
CONFTEST = '''\
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_ROOT = os.path.dirname(os.path.abspath(__file__))
_PKG = {package!r}


def _is_test_helper(parts):
    # Only ExecuTorch's test code comes from the tree, never its library code: a module the
    # package lacks that is not a test helper must fail to import, as it would for a user.
    return any(p in ("test", "tests") or p.startswith("test_") or p.endswith("test_util")
               for p in parts)


class _TestTreeFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if not name.startswith(_PKG + "."):
            return None
        parts = name.split(".")[1:]
        base = os.path.join(_ROOT, *parts)
        helper = _is_test_helper(parts)
        if helper and os.path.isfile(base + ".py"):
            return importlib.util.spec_from_file_location(name, base + ".py")
        if os.path.isdir(base):
            init = os.path.join(base, "__init__.py")
            if helper and os.path.isfile(init):
                return importlib.util.spec_from_file_location(
                    name, init, submodule_search_locations=[base])
            spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
            spec.submodule_search_locations = [base]
            return spec
        return None


sys.meta_path.append(_TestTreeFinder())
'''


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


def is_git_dir(p: Path) -> bool:
    return (p / "HEAD").is_file() and (p / "objects").is_dir()


def fetch_sources(args: argparse.Namespace, dest: Path, dirs: list[str]) -> str:
    """Put ExecuTorch's ``dirs`` at ``args.ref`` into ``dest``; returns a description."""
    dest.mkdir(parents=True)
    source = Path(args.source).expanduser() if args.source else None
    if source is None:
        clone = dest.parent / "clone"
        run(["git", "clone", "--quiet", "--depth", "1", "--branch", args.ref, URL, str(clone)])
        source = clone / ".git"
    git_dir = source if is_git_dir(source) else source / ".git"
    if is_git_dir(git_dir):
        rev = subprocess.run(["git", f"--git-dir={git_dir}", "rev-parse", "--verify", "--quiet",
                              f"{args.ref}^{{commit}}"], capture_output=True, text=True)
        if rev.returncode != 0:
            sys.exit(f"{git_dir} has no commit {args.ref!r}; pass --ref <tag or commit> "
                     "(e.g. the one in executorch.version.git_version)")
        commit = rev.stdout.strip()
        tree = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "--name-only", commit],
                              capture_output=True, text=True, check=True).stdout.split()
        wanted = [d for d in dirs if d in tree]
        archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", commit, *wanted],
                                 capture_output=True, check=True).stdout
        run(["tar", "-x", "-C", str(dest)], input=archive)
        return f"{git_dir} at {args.ref} ({commit[:12]})"
    for d in dirs:  # a plain checkout without git metadata
        if (source / d).is_dir():
            shutil.copytree(source / d, dest / d)
    return f"{source} (copied as is)"


def is_test_helper(parts: tuple[str, ...]) -> bool:
    """The rule the import hook applies too (see CONFTEST): test folders and test modules."""
    return any(p in ("test", "tests") or p.startswith("test_") or p.endswith("test_util")
               for p in parts)


def prune_library_code(tree: Path) -> int:
    """Delete every Python file that is not test code, so no ExecuTorch library module can
    be imported from the scratch tree (pytest would import a folder's ``__init__.py``)."""
    removed = 0
    for py in list(tree.rglob("*.py")):
        if not is_test_helper(py.relative_to(tree).with_suffix("").parts):
            py.unlink()
            removed += 1
    return removed


def overlay_wheel_tests(tree: Path, ref_python: str, files: list[str]) -> list[str]:
    """Replace fetched test files by the reference wheel's copies where it ships them."""
    out = subprocess.run([ref_python, "-c", "import executorch; print(list(executorch.__path__)[0])"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return []
    root = Path(out.stdout.strip().splitlines()[-1])
    replaced = []
    folders = {str(Path(f).parent) for f in files}
    for folder in sorted(folders):
        for f in (root / folder).glob("*.py") if (root / folder).is_dir() else []:
            (tree / folder).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, tree / folder / f.name)
            replaced.append(f"{folder}/{f.name}")
    return replaced


def renamed_copy(src: Path, dest: Path) -> int:
    shutil.copytree(src, dest)
    changed = 0
    for py in dest.rglob("*.py"):
        text = py.read_text(encoding="utf-8", errors="surrogateescape")
        new = IMPORT_RE.sub(r"\1edgetorch", text)
        if new != text:
            py.write_text(new, encoding="utf-8", errors="surrogateescape")
            changed += 1
    return changed


def pytest_counts(python: str, tree: Path, test: str, env: dict[str, str], xml: Path,
                  timeout: float, log: Path) -> dict[str, object]:
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--import-mode=importlib",
           f"--rootdir={tree}", f"--junitxml={xml}", "-o", "junit_family=xunit1", str(tree / test)]
    try:
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                              timeout=timeout)
        log.write_text(proc.stdout + proc.stderr)
    except subprocess.TimeoutExpired:
        return {"note": f"timed out after {timeout:.0f}s"}
    if not xml.exists():
        return {"note": "pytest wrote no report: " + (proc.stderr.strip().splitlines() or ["?"])[-1]}
    results: dict[str, str] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}.{case.get('name')}".split(".")[-2:]
        key = ".".join(name)
        kinds = {child.tag for child in case}
        results[key] = ("error" if "error" in kinds else "failed" if "failure" in kinds
                        else "skipped" if "skipped" in kinds else "passed")
    counts: dict[str, object] = {k: sum(1 for v in results.values() if v == k)
                                 for k in ("passed", "failed", "error", "skipped")}
    counts["results"] = results
    return counts


def fmt(c: dict[str, object]) -> str:
    if "note" in c:
        return str(c["note"])
    total = sum(int(c[k]) for k in ("passed", "failed", "error", "skipped"))  # type: ignore[call-overload]
    extra = "".join(f" {c[k]} {k}" for k in ("failed", "error", "skipped") if c[k])
    return f"{c['passed']}/{total} passed{extra}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", help="a git directory (bare or not) or a checkout of "
                   "pytorch/executorch; default: git clone --depth 1 --branch <ref> " + URL)
    p.add_argument("--ref", default="v1.5.1", help="tag or commit (default v1.5.1)")
    p.add_argument("--scratch", help="scratch folder (default: a new temporary directory)")
    p.add_argument("--python", default=sys.executable, help="Python with torch for edgetorch")
    p.add_argument("--ref-python", default=os.environ.get(
        "EDGETORCH_REF_PYTHON", str(REPO / ".venv-ref/bin/python")),
        help="Python with executorch installed ($EDGETORCH_REF_PYTHON)")
    p.add_argument("--no-ref", action="store_true", help="run only against edgetorch")
    p.add_argument("--wheel-tests", action="store_true",
                   help="use the test files the reference wheel ships where it ships them")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per file and side")
    p.add_argument("--extra-path", default="",
                   help="folders prepended to edgetorch's PYTHONPATH (e.g. a pip --target "
                   "folder holding test-only dependencies such as parameterized)")
    p.add_argument("--ref-extra-path", default="",
                   help="the same for the reference Python (e.g. where pytest was installed "
                   "with pip --target when its environment lacks it)")
    p.add_argument("--diff", action="store_true",
                   help="list every test whose outcome differs between the two sides")
    p.add_argument("--prepare-only", action="store_true",
                   help="make the two trees and stop (to run pytest on them by hand)")
    p.add_argument("files", nargs="*", default=DEFAULT_FILES)
    args = p.parse_args()

    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="edgetorch-et-tests-")).resolve()
    if REPO in scratch.parents or scratch == REPO:
        sys.exit("--scratch must be outside this repository: ExecuTorch's code is not committed")
    if scratch.exists() and any(scratch.iterdir()):
        shutil.rmtree(scratch)
    dirs = sorted({f.split("/")[0] for f in args.files} | set(HELPER_DIRS))
    orig = scratch / "executorch"
    described = fetch_sources(args, orig, dirs)
    use_ref = not args.no_ref and Path(args.ref_python).exists()
    if args.wheel_tests and Path(args.ref_python).exists():
        replaced = overlay_wheel_tests(orig, args.ref_python, args.files)
        described += f"; {len(replaced)} test files from the reference wheel"
    pruned = prune_library_code(orig)
    described += f"; {pruned} library files left out"
    renamed = scratch / "edgetorch"
    n = renamed_copy(orig, renamed)
    (orig / "conftest.py").write_text(CONFTEST.format(package="executorch"))
    (renamed / "conftest.py").write_text(CONFTEST.format(package="edgetorch"))
    print(f"sources: {described}; imports renamed in {n} files; scratch {scratch}")
    if args.prepare_only:
        return 0

    base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    et_path = [p for p in args.extra_path.split(os.pathsep) if p] + [str(REPO / "src")]
    et_env = dict(base_env, PYTHONPATH=os.pathsep.join(et_path))
    ref_env = dict(base_env)
    for key in ("PYTHONHOME", "VIRTUAL_ENV"):
        ref_env.pop(key, None)
    if args.ref_extra_path:
        ref_env["PYTHONPATH"] = args.ref_extra_path
    rows = []
    for f in args.files:
        stem = f.replace("/", "_")
        ours = pytest_counts(args.python, renamed, f, et_env, scratch / f"{stem}.edgetorch.xml",
                             args.timeout, scratch / f"{stem}.edgetorch.log")
        theirs = (pytest_counts(args.ref_python, orig, f, ref_env,
                                scratch / f"{stem}.executorch.xml", args.timeout,
                                scratch / f"{stem}.executorch.log")
                  if use_ref else {"note": "not run"})
        rows.append((f, ours, theirs))
        print(f"{f:52s} edgetorch {fmt(ours):34s} executorch {fmt(theirs)}", flush=True)

    print("\n| test file | edgetorch | ExecuTorch |\n|---|---|---|")
    for f, ours, theirs in rows:
        print(f"| `{f}` | {fmt(ours)} | {fmt(theirs)} |")
    if args.diff:
        for f, ours, theirs in rows:
            a = ours.get("results", {})
            b = theirs.get("results", {})
            for test in sorted(set(a) | set(b)):  # type: ignore[arg-type]
                if a.get(test) != b.get(test):  # type: ignore[union-attr]
                    print(f"  {f}::{test}: edgetorch {a.get(test)}, executorch {b.get(test)}")  # type: ignore[union-attr]
    print(f"\nlogs and junit reports: {scratch}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
