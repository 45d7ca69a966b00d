"""ExecuTorch's Model Explorer adapters on one folder of devtools files, run in the reference
venv (the adapters import executorch)::

    python explorer_adapters.py DIR [DIR ...]

Each ``DIR`` holds ``et.etrecord`` and ``et.etdp`` (from ``devtools_flow.py generate``); writes
``DIR/mx.json``: the
ETRecord adapter's graphs as Model Explorer JSON, and for each graph the ETDump overlay's
shape: which nodes got runtime data, under which overlay names, with how many events. The
latencies themselves are left out: two runs never time the same."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from etrecord_adapter_model_explorer.main import ETRecordAdapter
from model_explorer.utils import remove_none


def main(folder: str) -> None:
    # the ETDump provider refuses to import before the ETRecord adapter is registered (above)
    from etdump_data_provider_model_explorer.main import ETDumpProfilingOverlayProvider
    from etrecord_adapter_model_explorer.builder.builder import ETRecordGraphBuilder

    d = Path(folder)
    collections = ETRecordGraphBuilder(d / "et.etrecord", {}).build()
    provider = ETDumpProfilingOverlayProvider()
    overlays = {}
    for collection in collections:
        for graph in collection.graphs:
            result = provider.run(provider_id=provider.metadata.id,
                                  model_path=str(d / "et.etrecord"), graph_id=graph.id,
                                  config_values={"etdump_path": str(d / "et.etdp")},
                                  graph=graph)
            overlays[f"{collection.label}/{graph.id}"] = {
                "error": result.error,
                "overlays": {o.name: sorted(o.results) for o in (result.result or [])},
                "event_counts": {node: r.value for o in (result.result or [])
                                 if o.name == "Runtime Event Count"
                                 for node, r in sorted(o.results.items())},
            }
    graphs = ETRecordAdapter().convert(str(d / "et.etrecord"), {})
    (d / "mx.json").write_text(json.dumps({
        "graphs": [remove_none(asdict(c)) for c in graphs["graphCollections"]],
        "overlays": overlays,
    }, indent=1, sort_keys=True, default=str))


if __name__ == "__main__":
    for folder in sys.argv[1:]:
        main(folder)
