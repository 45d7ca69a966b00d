"""Model Explorer (the ``explorer`` extra): ``visualization_utils`` as ExecuTorch's, and Arm's
``.pte`` adapter, served by Model Explorer's own server on loopback, turning edgetorch's and
ExecuTorch's ``.pte`` for the same model into the same graph JSON; a headless Chromium
screenshot of the graph; ExecuTorch's ETRecord and ETDump adapters reading edgetorch's files as
they read ExecuTorch's."""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compat"))
import ref_process  # noqa: E402
from refenv import in_ci  # noqa: E402

FLOW = Path(__file__).with_name("devtools_flow.py")
SRC = Path(__file__).resolve().parents[2] / "src"
ADAPTER = "pte_adapter_model_explorer"
ADAPTERS = Path(__file__).with_name("explorer_adapters.py")
GRAPH_SECONDS = 25  # a 7-node graph shows in ~5 s on a loaded 2-core machine


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


def _need_ref() -> None:
    from refenv import ref_status

    usable, why = ref_status()
    if not usable:
        if in_ci():
            pytest.fail(f"reference environment missing: {why}")
        pytest.skip(f"reference environment missing: {why}")


def _generate(tool: str, model: str, out: Path) -> None:
    if tool == "executorch":
        from refenv import _clean_env, ref_python

        _need_ref()
        cmd, env = [str(ref_python()), str(FLOW), "executorch"], _clean_env()
    else:
        cmd, env = [sys.executable, str(FLOW), "edgetorch"], dict(os.environ,
                                                                  PYTHONPATH=str(SRC))
    out.mkdir()
    subprocess.run([*cmd, "generate", model, str(out)], env=env, check=True,
                   capture_output=True, timeout=1200)


MODELS = ("cnn", "cnn-xnnpack")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    """``<tool>-<model>/et.{pte,etrecord,etdp,bin}`` for both tools and both models."""
    root = tmp_path_factory.mktemp("explorer")
    for model in MODELS:
        for tool in ("executorch", "edgetorch"):
            _generate(tool, model, root / f"{tool}-{model}")
    return root


@pytest.mark.compat
def test_model_explorer_server_reads_our_pte_as_executorchs(generated, tmp_path):
    _need_extra()
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
        for model in MODELS:
            theirs = _convert(port, generated / f"executorch-{model}" / "et.pte")
            ours = _convert(port, generated / f"edgetorch-{model}" / "et.pte")
            assert "error" not in theirs and "error" not in ours, (theirs, ours)
            assert ours == theirs
            nodes = [n["label"] for g in ours["graphCollections"][0]["graphs"]
                     for n in g["nodes"]]
            assert ("aten::permute_copy" in nodes) == (model == "cnn")
        _screenshot(port, generated / "edgetorch-cnn" / "et.pte", tmp_path / "graph.png")
    finally:
        server.kill()
        server.wait(30)


@pytest.mark.compat
def test_executorchs_etrecord_and_etdump_adapters_read_our_files_as_executorchs(generated):
    """ExecuTorch's Model Explorer adapters (they import executorch, so they run in the
    reference venv) turn edgetorch's ETRecord into the same graphs as ExecuTorch's, and
    overlay edgetorch's ETDump on the same nodes with the same event counts."""
    from refenv import _clean_env, ref_python

    _need_ref()
    probe = subprocess.run([str(ref_python()), "-c", "import etrecord_adapter_model_explorer, "
                            "etdump_data_provider_model_explorer.provider"],
                           env=_clean_env(), capture_output=True, text=True)
    if probe.returncode:
        why = "ExecuTorch's Model Explorer adapters are not in the reference venv " \
              f"(bash scripts/setup_ref_env.sh installs them): {probe.stderr[-300:]}"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    folders = {(tool, model): generated / f"{tool}-{model}"
               for model in MODELS for tool in ("executorch", "edgetorch")}
    ref_process.run([str(ref_python()), str(ADAPTERS), *map(str, folders.values())],
                    env=_clean_env(), check=True, capture_output=True, timeout=900)
    # the only difference allowed: the file's own path, shown as graph metadata
    views = {key: json.loads((folder / "mx.json").read_text().replace(str(folder), "<folder>"))
             for key, folder in folders.items()}
    for model in MODELS:
        theirs, ours = views["executorch", model], views["edgetorch", model]
        assert ours == theirs
        overlay = ours["overlays"]["et.etrecord/forward"]
        if model == "cnn":  # portable operators are timed one by one
            assert overlay["error"] == "" and overlay["event_counts"]["aten_convolution_default_"] == 1
        else:  # one XNNPACK delegate call: ExecuTorch's provider maps no node (nor for its own files)
            assert overlay["overlays"] == {}


def _screenshot(port: int, pte: Path, png: Path) -> None:
    """Headless Chromium shows ``pte``'s graph. Model Explorer lays the graph out after the page's
    load event, and Chromium screenshots at that event: a wrapper page frames it and holds its
    own load event back with one slow resource."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        if in_ci():
            pytest.fail("chromium is not installed (make test installs Debian's chromium)")
        return  # no browser on this machine: the JSON check above stands alone
    data = urllib.parse.quote(json.dumps({"models": [{"url": str(pte), "adapterId": ADAPTER}]}))
    target = f"http://127.0.0.1:{port}/?data={data}"

    class Wrapper(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/slow":
                time.sleep(GRAPH_SECONDS)
                body = b""
            else:
                body = (f'<body style="margin:0"><iframe src="{target}" style="border:0;'
                        f'width:1280px;height:800px"></iframe><img src="/slow"></body>').encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    wrapper = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Wrapper)
    threading.Thread(target=wrapper.serve_forever, daemon=True).start()
    try:
        subprocess.run([chromium, "--headless", "--no-sandbox", "--use-angle=swiftshader",
                        "--enable-unsafe-swiftshader", f"--screenshot={png}",
                        "--window-size=1280,800", f"http://127.0.0.1:{wrapper.server_port}/"],
                       check=True, capture_output=True, timeout=300)
    finally:
        wrapper.shutdown()
    # Model Explorer's side panel ("GRAPH INFO", op node count) is drawn only once a graph is
    # shown; while it still processes, that corner is blank
    from matplotlib.image import imread

    pixels = imread(png)[50:130, 915:1280, :3].mean(axis=2)
    assert (pixels < 0.5).sum() > 100, f"no graph in {png}"
