"""The HTML graph view: what it draws, and that a real browser renders it."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess

import pytest
import torch
from torch.export import export

from edgetorch.cli import main as cli_main
from edgetorch.devtools.visualization import build_view, render_html, visualize
from edgetorch.examples import load_model_spec
from edgetorch.exir import to_edge, to_edge_transform_and_lower


class TwoLayers(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x):
        y = self.fc(x)  # THE-USER-LINE
        return torch.sin(y) + 1


def _edge():
    return to_edge(export(TwoLayers(), (torch.randn(2, 8),)))


def test_view_carries_shapes_modules_and_source_lines():
    view = build_view(_edge())
    ops = [n for n in view.nodes if n.kind == "op"]
    assert {n.label for n in ops} >= {"aten.sin.default"}
    linear = next(n for n in ops if "addmm" in n.label or "linear" in n.label)
    assert linear.shape == "float32[2, 8]"
    assert linear.module == "fc"
    line = next(i for i, text in enumerate(open(__file__), 1) if "# THE-USER-LINE" in text)
    assert linear.source.endswith(f'test_visualization.py", line {line}, in forward')
    assert [n.kind for n in view.nodes][0] in ("param", "input")
    assert view.nodes[-1].kind == "output"


def test_delegates_and_their_subgraphs_are_drawn():
    from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    model, inputs = load_model_spec("mlp")
    lowered = to_edge_transform_and_lower(export(model, inputs),
                                          partitioner=[XnnpackPartitioner()])
    view = build_view(lowered)
    delegates = [n for n in view.nodes if n.kind == "delegate"]
    assert len(delegates) == 1 and delegates[0].backend == "XnnpackBackend"
    (sub,) = view.subgraphs.values()
    assert sum(n.kind == "op" for n in sub.nodes) >= 3
    page = render_html(view)
    assert "backend:XnnpackBackend" in page and "delegate: XnnpackBackend" in page
    assert page.count('<g class="node delegate"') == 1


def test_page_is_self_contained(tmp_path):
    path = visualize(_edge(), tmp_path / "g.html", title="two layers")
    page = open(path, encoding="utf-8").read()
    assert not re.search(r"""(src|href)=["']?https?://""", page)
    assert "<script" not in page
    assert "<title>two layers</title>" in page
    assert page.count('<g class="node') == len(
        [n for n in build_view(_edge()).nodes if n.kind != "param"])


def test_cli_writes_the_page(tmp_path, capsys):
    out = tmp_path / "cnn.html"
    assert cli_main(["visualize", "cnn", "--stage", "executorch", "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert "aten.convolution.out" in out.read_text()


def _chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (make test installs Debian's chromium)")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return path


def test_headless_chromium_renders_and_screenshots(tmp_path):
    chromium = _chromium()
    page = tmp_path / "cnn.html"
    model, inputs = load_model_spec("cnn")
    visualize(to_edge(export(model, inputs)), page, title="cnn")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(flags + ["--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    # The browser parsed the SVG: every node group is in the rendered DOM.
    assert dom.count('class="node ') == page.read_text().count('class="node ') > 10
    shot = tmp_path / "cnn.png"
    subprocess.run(flags + [f"--screenshot={shot}", "--window-size=1000,900", page.as_uri()],
                   capture_output=True, timeout=120, check=True)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1000, 900)
    assert len(data) > 20_000  # a blank page compresses to a few KB
