"""The HTML graph view: what it draws, and that a real browser renders it."""

from __future__ import annotations

import re

import pytest
import torch
from headless_chromium import rendered_dom, screenshot  # tests/support
from torch.export import export

from edgetorch.cli import main as cli_main
from edgetorch.devtools.visualization import build_view, render_html, visualize
from edgetorch.examples import load_model_spec
from edgetorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower


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


def test_headless_chromium_renders_and_screenshots(tmp_path):
    page = tmp_path / "cnn.html"
    model, inputs = load_model_spec("cnn")
    visualize(to_edge(export(model, inputs)), page, title="cnn")
    dom = rendered_dom(page, tmp_path / "profile")
    # The browser parsed the SVG: every node group is in the rendered DOM.
    assert dom.count('class="node ') == page.read_text().count('class="node ') > 10
    data = screenshot(page, tmp_path / "cnn.png", (1000, 900), tmp_path / "profile")
    assert len(data) > 20_000  # a blank page compresses to a few KB


class Skips(torch.nn.Module):
    """Residual paths that skip rows (an edge from the input to the last add crosses every
    row between), and an operator with a long name."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(4, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.conv2 = torch.nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv1(x)))
        z = torch.sigmoid(self.conv2(y)) * y
        return torch.nn.functional.adaptive_avg_pool2d(z + x, 1) + x.mean()


def _numbers(text):
    return [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", text)]


def _points_of(d):
    """Points along an SVG path of M, L and C commands (cubic curves sampled)."""
    pts, cur = [], None
    for cmd, args in re.findall(r"([MLC])([^MLC]*)", d):
        v = _numbers(args)
        if cmd == "M":
            cur = (v[0], v[1])
            pts.append(cur)
        elif cmd == "L":
            for t in (i / 20 for i in range(1, 21)):
                pts.append((cur[0] + t * (v[0] - cur[0]), cur[1] + t * (v[1] - cur[1])))
            cur = (v[0], v[1])
        else:
            (x1, y1), (x2, y2), (x3, y3) = cur, (v[0], v[1]), (v[2], v[3])
            x4, y4 = v[4], v[5]
            for t in (i / 40 for i in range(1, 41)):
                a, b, c, e = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t ** 2, t ** 3
                pts.append((a * x1 + b * x2 + c * x3 + e * x4, a * y1 + b * y2 + c * y3 + e * y4))
            cur = (x4, y4)
    return pts


@pytest.mark.parametrize("stage", ["edge", "executorch"])
def test_labels_are_whole_and_edges_go_around_nodes(stage):
    from edgetorch.devtools.visualization.html import CHAR_W, PAD

    program = to_edge(export(Skips().eval(), (torch.randn(1, 4, 6, 6),)))
    # the BatchNorm kept (its long operator name is the label that must fit)
    executorch = program.to_executorch(ExecutorchBackendConfig(fuse_batch_norm=False))
    page = render_html(build_view(executorch if stage == "executorch" else program))
    assert "…" not in page
    rects = {}
    for node_id, x, y, w, h, label, shape in re.findall(
            r'<g class="node [^"]*" id="node-([^"]+)"[^>]*><title>[^<]*</title>'
            r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"[^>]*/>'
            r'<text[^>]*>([^<]*)</text><text[^>]*>([^<]*)</text>', page):
        x, y, w, h = float(x), float(y), float(w), float(h)
        rects[node_id] = (x, y, w, h)
        assert len(label) * CHAR_W["label"] + 2 * PAD <= w + 1e-6, label  # the text fits
        assert len(shape) * CHAR_W["shape"] + 2 * PAD <= w + 1e-6, shape
    assert len(rects) == page.count('<g class="node') > 8
    assert any(len(label) > 30 for label in re.findall(r"<text[^>]*>([^<]*)</text>", page))
    edges = re.findall(r'<path d="([^"]+)" class="edge" data-from="([^"]+)" data-to="([^"]+)"',
                       page)
    long_edges = 0
    for d, src, dst in edges:
        pts = _points_of(d)
        long_edges += pts[-1][1] - pts[0][1] > 100
        for node_id, (x, y, w, h) in rects.items():
            inside = [p for p in pts if x + 0.5 < p[0] < x + w - 0.5 and y + 0.5 < p[1] < y + h - 0.5]
            assert not inside, f"edge {src} -> {dst} crosses node {node_id} at {inside[0]}"
    assert long_edges >= 2  # the skips were drawn (and checked)
