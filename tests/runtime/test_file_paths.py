"""Paths stored in files are followed only inside allowed folders (torch-free)."""

from __future__ import annotations

import os

import pytest

from edgetorch.errors import UnsafeFileError
from edgetorch.runtime.file_paths import allowed_roots, resolve_stored_path


def _resolve(stored, roots):
    return resolve_stored_path(stored, allowed_roots(roots), "test", "name a folder")


def test_inside_the_allowed_folder(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert _resolve(str(tmp_path / "a" / "b"), [tmp_path]) == os.path.realpath(tmp_path / "a" / "b")
    assert _resolve("a/b", [tmp_path]) == os.path.realpath(tmp_path / "a" / "b")
    assert _resolve("a/../a/b", [tmp_path]) == os.path.realpath(tmp_path / "a" / "b")


@pytest.mark.parametrize("stored", ["/etc", "../x", "a/../../x", "/", ""])
def test_escapes_are_refused(tmp_path, stored):
    root = tmp_path / "root"
    root.mkdir()
    with pytest.raises(UnsafeFileError):
        _resolve(stored, [root])


def test_nothing_is_allowed_without_a_folder(tmp_path):
    with pytest.raises(UnsafeFileError, match="loaded from bytes"):
        _resolve(str(tmp_path), [])


def test_symlinks_are_resolved_before_the_check(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(UnsafeFileError):
        _resolve("link", [root])


def test_nul_and_huge_paths_are_refused(tmp_path):
    for bad in ("a\0b", "a" * 5000):
        with pytest.raises(UnsafeFileError):
            _resolve(bad, [tmp_path])
