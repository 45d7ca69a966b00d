"""Model Explorer views of programs (``executorch.devtools.visualization.visualization_utils``).

Needs the ``explorer`` extra (``pip install edgetorch[explorer]``: Google's
``ai-edge-model-explorer`` and Arm's ``.pte`` adapter). ``visualize`` starts Model Explorer's
server with the program's graph; ``visualize_with_clusters`` writes its JSON (partitions and
QDQ clusters as groups) for the Model Explorer GUI, or serves it. For an offline page with no
extra, use ``edgetorch.devtools.visualization.visualize(program, "graph.html")``.

Model Explorer 0.1.34 renamed the module ExecuTorch 1.5.1 imports
(``pytorch_exported_program_adater_impl`` -> ``..._adapter_impl``); both names work here.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from typing import Any

from ...errors import EdgeTorchError

_INSTALL = "pip install 'edgetorch[explorer]'"


class ModelExplorerMissing(EdgeTorchError, ImportError):
    """Model Explorer (the ``explorer`` extra) is not installed."""


def _model_explorer() -> Any:
    try:
        import model_explorer
        return model_explorer
    except ImportError as e:
        raise ModelExplorerMissing(f"Model Explorer is not installed ({e}); {_INSTALL}") from None


def _default_settings() -> Any:
    _model_explorer()
    from model_explorer.consts import DEFAULT_SETTINGS
    return DEFAULT_SETTINGS


def _adapter_class() -> type:
    try:  # >= 0.1.34
        from model_explorer.pytorch_exported_program_adapter_impl import (
            PytorchExportedProgramAdapterImpl,
        )
        return PytorchExportedProgramAdapterImpl
    except ImportError:
        pass
    try:  # <= 0.1.33 spelled the module "adater"
        from model_explorer.pytorch_exported_program_adater_impl import (
            PytorchExportedProgramAdapterImpl,
        )
        return PytorchExportedProgramAdapterImpl
    except ImportError:
        pass
    raise ModelExplorerMissing(f"this Model Explorer has no PyTorch adapter; {_INSTALL}")


def _command(open_in_browser: bool, port: int | None) -> list[str]:
    command = ["model-explorer"]
    if not open_in_browser:
        command.append("--no_open_in_browser")
    if port is not None:
        command += ["--port", str(port)]
    return command


class SingletonModelExplorerServer:
    """One ``model-explorer`` server shared by nested ``with`` blocks."""

    server: subprocess.Popen | None = None
    num_open: int = 0
    wait_after_start = 3.0

    def __init__(self, open_in_browser: bool = True, port: int | None = None) -> None:
        if SingletonModelExplorerServer.server is None:
            SingletonModelExplorerServer.server = subprocess.Popen(
                _command(open_in_browser, port))

    def __enter__(self) -> SingletonModelExplorerServer:
        SingletonModelExplorerServer.num_open += 1
        time.sleep(self.wait_after_start)
        return self

    def __exit__(self, *exc: object) -> None:
        SingletonModelExplorerServer.num_open -= 1
        if SingletonModelExplorerServer.num_open == 0 and self.server is not None:
            _stop(self.server, self.wait_after_start)
            SingletonModelExplorerServer.server = None


class ModelExplorerServer:
    """A ``model-explorer`` server for the duration of a ``with`` block."""

    wait_after_start = 2.0

    def __init__(self, open_in_browser: bool = True, port: int | None = None) -> None:
        self.server = subprocess.Popen(_command(open_in_browser, port))

    def __enter__(self) -> ModelExplorerServer:
        time.sleep(self.wait_after_start)
        return self

    def __exit__(self, *exc: object) -> None:
        _stop(self.server, self.wait_after_start)


def _stop(server: subprocess.Popen, wait: float) -> None:
    server.kill()
    try:
        server.wait(wait)
    except subprocess.TimeoutExpired:
        server.terminate()


def _get_exported_program(visualizable: Any) -> Any:
    from torch.export import ExportedProgram

    if isinstance(visualizable, ExportedProgram):
        return visualizable
    if hasattr(visualizable, "exported_program"):  # Edge / Executorch program managers
        return visualizable.exported_program()
    raise EdgeTorchError(f"cannot visualize a {type(visualizable).__name__}; pass an "
                         "ExportedProgram, EdgeProgramManager or ExecutorchProgramManager")


def visualize(visualizable: Any, reuse_server: bool = True, no_open_in_browser: bool = False,
              **kwargs: Any) -> None:
    """Serve ``visualizable``'s graph in Model Explorer (kwargs go to
    ``model_explorer.visualize_from_config``: host, port, ...)."""
    me = _model_explorer()
    config = me.config()
    config.add_model_from_pytorch("Executorch", exported_program=_get_exported_program(
        visualizable), settings=_default_settings())
    if reuse_server:
        config.set_reuse_server()
    visualize_model_explorer(config=kwargs.pop("config", config),
                             no_open_in_browser=no_open_in_browser, **kwargs)


def visualize_model_explorer(**kwargs: Any) -> None:
    _model_explorer().visualize_from_config(**kwargs)


def model_explorer_graphs(exported_program: Any,
                          get_node_partition_name: Callable[[Any], str | None] | None = None,
                          get_node_qdq_cluster_name: Callable[[Any], str | None] | None = None
                          ) -> dict[str, Any]:
    """Model Explorer's graphs of ``exported_program``, nodes grouped by partition and QDQ
    cluster (``namespace`` "partition 0 (tag)/cluster (name)")."""
    graphs = _adapter_class()(exported_program, _default_settings()).convert()
    partition = get_node_partition_name or (lambda n: n.meta.get("delegation_tag"))
    cluster = get_node_qdq_cluster_name or (lambda n: n.meta.get("cluster"))
    known: list[str] = []
    nodes = list(exported_program.graph.nodes)
    explorer_nodes = graphs["graphs"][0].nodes
    if len(nodes) != len(explorer_nodes):
        raise EdgeTorchError(f"Model Explorer made {len(explorer_nodes)} nodes of a graph of "
                             f"{len(nodes)}; this Model Explorer version is not supported")
    for explorer_node, node in zip(explorer_nodes, nodes):
        parts = []
        if (name := partition(node)) is not None:
            if name not in known:
                known.append(name)
            parts.append(f"partition {known.index(name)} ({name.replace('/', ':')})")
        if (name := cluster(node)) is not None:
            parts.append(f"cluster ({name.replace('/', ':')})")
        explorer_node.namespace = "/".join(parts)
    return graphs


def _save_model_as_json(config: Any, file_name: str) -> None:
    """The config's graphs as the JSON the Model Explorer GUI opens."""
    graphs_list = json.loads(config.get_transferrable_data()["graphs_list"])
    graphs = json.loads(graphs_list[0])["graphs"]
    for graph in graphs:
        graph["collectionLabel"] = "Executorch"
    data = {"label": "Executorch", "graphs": graphs,
            "graphsWithLevel": [{"graph": g, "level": level} for level, g in enumerate(graphs)]}
    with open(file_name, "w") as f:
        json.dump(data, f)


def visualize_with_clusters(exported_program: Any, json_file_name: str | None = None,
                            no_open_in_browser: bool = False, reuse_server: bool = False,
                            get_node_partition_name: Callable[[Any], str | None] = lambda node:
                            node.meta.get("delegation_tag", None),
                            get_node_qdq_cluster_name: Callable[[Any], str | None] = lambda node:
                            node.meta.get("cluster", None),
                            **kwargs: Any) -> None:
    """Model Explorer with partitions and QDQ clusters highlighted: written to
    ``json_file_name`` for the GUI, or (None) served."""
    config = _model_explorer().config()
    graphs = model_explorer_graphs(exported_program, get_node_partition_name,
                                   get_node_qdq_cluster_name)
    index = len(config.graphs_list)
    config.graphs_list.append(graphs)
    config.model_sources.append({"url": f"graphs://Executorch/{index}"})
    if json_file_name is not None:
        _save_model_as_json(config, json_file_name)
        return
    if reuse_server:
        config.set_reuse_server()
    visualize_model_explorer(config=config, no_open_in_browser=no_open_in_browser, **kwargs)


def visualize_graph(graph_module: Any, exported_program: Any, reuse_server: bool = True,
                    no_open_in_browser: bool = False, **kwargs: Any) -> None:
    """Visualize ``graph_module`` (say, the result of a pass) in place of the program's own
    graph; operators are not verified, so custom ops show too."""
    from ...exir.program import copy_program

    program = copy_program(_get_exported_program(exported_program))
    program._graph_module = graph_module  # ExportedProgram has no public setter
    program._verifiers = []
    visualize(program, reuse_server, no_open_in_browser, **kwargs)
