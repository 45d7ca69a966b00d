"""Model Explorer (the ``explorer`` extra): ``visualization_utils`` as ExecuTorch's, and Arm's
``.pte`` adapter, served by Model Explorer's own server on loopback, turning edgetorch's and
ExecuTorch's ``.pte`` for the same model into the same graph JSON; a headless Chromium
screenshot of the served page when Chromium is installed."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
from refenv import in_ci  # noqa: E402

FLOW = Path(__file__).with_name("devtools_flow.py")
SRC = Path(__file__).resolve().parents[2] / "src"
ADAPTER = "pte_adapter_model_explorer"


def _need_extra() -> None:
    missing = [m for m in ("model_explorer", ADAPTER) if importlib.util.find_spec(m) is None]
    if missing:
        why = f"the explorer extra is not installed ({', '.join(missing)}): " \
              "pip install 'edgetorch[explorer]'"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)


def _lowered():
    from edgetorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from edgetorch.exir import to_edge_transform_and_lower

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.cumsum(self.lin(x).relu(), 1)

    ep = torch.export.export(M(), (torch.randn(2, 4),))
    return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])


def test_visualize_with_clusters_writes_model_explorer_json(tmp_path):
    _need_extra()
    from edgetorch.devtools.visualization.visualization_utils import (
        model_explorer_graphs,
        visualize_with_clusters,
    )

    edge = _lowered()
    path = tmp_path / "graph.json"
    visualize_with_clusters(edge.exported_program(), str(path))
    data = json.loads(path.read_text())
    assert data["label"] == "Executorch" and data["graphsWithLevel"][0]["level"] == 0
    labels = [n["label"] for n in data["graphs"][0]["nodes"]]
    assert "executorch_call_delegate" in " ".join(labels) and "aten.cumsum" in labels

    # a partitioner's tags (before lowering) become groups
    program = edge.exported_program()
    for node in program.graph.nodes:
        if node.op == "call_function":
            node.meta["delegation_tag"] = "tag0"
    graphs = model_explorer_graphs(program)
    spaces = [n.namespace for n in graphs["graphs"][0].nodes]
    assert "partition 0 (tag0)" in spaces and "" in spaces  # placeholders stay ungrouped


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _convert(port: int, pte: Path) -> dict:
    body = json.dumps({"extensionId": ADAPTER, "cmdId": "convert", "modelPath": str(pte),
                       "settings": {}, "deleteAfterConversion": False}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/apipost/v1/send_command",
                                     data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as r:
        return json.loads(r.read())


def _generate(tool: str, model: str, out: Path) -> None:
    if tool == "executorch":
        from refenv import _clean_env, ref_available, ref_python

        if not ref_available():
            pytest.skip("reference environment missing")
        cmd, env = [str(ref_python()), str(FLOW), "executorch"], _clean_env()
    else:
        cmd, env = [sys.executable, str(FLOW), "edgetorch"], dict(os.environ,
                                                                  PYTHONPATH=str(SRC))
    out.mkdir()
    subprocess.run([*cmd, "generate", model, str(out)], env=env, check=True,
                   capture_output=True, timeout=1200)


@pytest.mark.compat
def test_model_explorer_server_reads_our_pte_as_executorchs(tmp_path):
    _need_extra()
    models = ["cnn", "cnn-xnnpack"]
    for model in models:
        _generate("executorch", model, tmp_path / f"et-{model}")
        _generate("edgetorch", model, tmp_path / f"ours-{model}")
    port = _free_port()
    exe = Path(sys.executable).with_name("model-explorer")
    server = subprocess.Popen([str(exe), "--host", "127.0.0.1", "--port", str(port),
                               "--no_open_in_browser", "--extensions", ADAPTER],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/check_health", timeout=2)
                break
            except OSError:
                time.sleep(1)
        for model in models:
            theirs = _convert(port, tmp_path / f"et-{model}" / "et.pte")
            ours = _convert(port, tmp_path / f"ours-{model}" / "et.pte")
            assert "error" not in theirs and "error" not in ours, (theirs, ours)
            assert ours == theirs
            nodes = [n["label"] for g in ours["graphCollections"][0]["graphs"]
                     for n in g["nodes"]]
            assert ("aten::permute_copy" in nodes) == (model == "cnn")
        _screenshot(port, tmp_path)
    finally:
        server.kill()
        server.wait(30)


def _screenshot(port: int, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return  # no browser on this machine: the JSON check above stands alone
    png = tmp_path / "model_explorer.png"
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                    f"--screenshot={png}", "--window-size=1280,800",
                    f"http://127.0.0.1:{port}/"], check=True, capture_output=True, timeout=300)
    assert png.stat().st_size > 10_000
