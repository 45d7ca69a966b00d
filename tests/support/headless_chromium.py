"""Headless Chromium (Debian's; ``make browser`` installs it) for the tests that check an HTML
page as a browser renders it: the DOM after parsing, and a screenshot."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

TIMEOUT_S = 120


def _command(profile: Path) -> list[str]:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (make test installs Debian's chromium)")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return [path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}"]


def rendered_dom(page: Path, profile: Path) -> str:
    """The page's DOM as Chromium serialises it after parsing (inline SVG included)."""
    return subprocess.run(_command(profile) + ["--dump-dom", page.as_uri()], capture_output=True,
                          text=True, timeout=TIMEOUT_S, check=True).stdout


def screenshot(page: Path, shot: Path, size: tuple[int, int], profile: Path) -> bytes:
    """A PNG of the page in a ``size`` window; checked to be a PNG of that size."""
    subprocess.run(_command(profile) + [f"--screenshot={shot}", f"--window-size={size[0]},"
                                        f"{size[1]}", page.as_uri()],
                   capture_output=True, timeout=TIMEOUT_S, check=True)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", data[16:24]) == size
    return data
