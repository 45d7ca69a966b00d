"""One devtools flow for edgetorch and ExecuTorch alike (the import root is an argument):
export a small model with an ETRecord, run it with ETDump and debug buffer, then read the
files with the Inspector. Runs in our venv (``edgetorch``) and in the reference venv
(``executorch``)::

    python devtools_flow.py ROOT generate MODEL OUT_DIR      # et.pte/.etrecord/.etdp/.bin
    python devtools_flow.py ROOT inspect DIR OUT.json        # the Inspector's view, as JSON
"""

from __future__ import annotations

import importlib
import io
import json
import sys

import torch


class CNN(torch.nn.Module):
    def __init__(self, batch_norm: bool = False) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4) if batch_norm else None
        self.lin = torch.nn.Linear(144, 5)

    def forward(self, x):
        y = self.conv(x)
        if self.bn is not None:
            y = self.bn(y)
        return self.lin(torch.relu(y).flatten(1))


class Transformer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        self.head = torch.nn.Linear(16, 5)

    def forward(self, x):
        return self.head(self.layer(x))


def model(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    """``cnn``, ``bn`` (CNN with BatchNorm) or ``tfm``; a ``-xnnpack`` suffix lowers it."""
    torch.manual_seed(0)
    base = name.removesuffix("-xnnpack")
    if base == "tfm":
        return Transformer().eval(), torch.randn(1, 8, 16)
    m = CNN(batch_norm=base == "bn").eval()
    if m.bn is not None:  # statistics that make the BatchNorm do something
        m.bn.running_mean.uniform_(-1, 1)
        m.bn.running_var.uniform_(0.5, 2)
    return m, torch.randn(1, 3, 8, 8)


def generate(root: str, name: str, out: str) -> None:
    exir = importlib.import_module(root + ".exir")
    runtime = importlib.import_module(root + ".runtime")
    m, x = model(name)
    ep = torch.export.export(m, (x,))
    parts = []
    if name.endswith("-xnnpack"):
        xnn = importlib.import_module(root + ".backends.xnnpack.partition.xnnpack_partitioner")
        parts = [xnn.XnnpackPartitioner()]
    et = exir.to_edge_transform_and_lower(ep, partitioner=parts,
                                          generate_etrecord=True).to_executorch()
    record = et.get_etrecord()
    record.update_representative_inputs([x])
    record.update_reference_outputs([m(x)])
    record.save(f"{out}/et.etrecord")
    with open(f"{out}/et.pte", "wb") as f:
        f.write(et.buffer)
    program = runtime.Runtime.get().load_program(f"{out}/et.pte", enable_etdump=True,
                                                  debug_buffer_size=1 << 20)
    method = program.load_method("forward")
    for _ in range(2):
        method.execute([x])
    program.write_etdump_result_to_file(f"{out}/et.etdp", f"{out}/et.bin")


def _shapes(values) -> list:
    return [list(v.shape) if hasattr(v, "shape") else None for v in values]


def inspect(root: str, d: str) -> dict:
    devtools = importlib.import_module(root + ".devtools")
    serialize = importlib.import_module(root + ".devtools.etdump.serialize")
    ins = devtools.Inspector(etdump_path=f"{d}/et.etdp", etrecord=f"{d}/et.etrecord",
                             debug_buffer_path=f"{d}/et.bin")
    table = io.StringIO()
    ins.print_data_tabular(file=table)
    printed = ins._prepare_dataframe()
    with open(f"{d}/et.etdp", "rb") as f:
        dump = serialize.deserialize_from_etdump_flatcc(f.read())
    gap = ins.calculate_numeric_gap("MSE")
    return {
        "events": [[b.name, e.name, _shapes(e.debug_data), list(e.op_types),
                    list(e.debug_handles) if isinstance(e.debug_handles, (list, tuple))
                    else e.debug_handles, e.num_outputs, bool(e.is_delegated_op),
                    e.delegate_backend_name, len(e.perf_data.raw) if e.perf_data else 0]
                   for b in ins.event_blocks for e in b.events],
        "printed": [list(map(str, r)) for r in printed[["event_block_name", "event_name",
                                                        "is_delegated_op"]].values],
        "columns": list(printed.columns),
        "value_types": sorted({str(ev.debug_event.debug_entry.val) for r in dump.run_data
                               for ev in r.events or [] if ev.debug_event}),
        "gap": [[list(map(int, r.aot_debug_handle)), list(r.aot_ops), list(r.runtime_ops),
                 [float(v) for v in r.gap]] for r in gap.itertuples()],
    }


if __name__ == "__main__":
    root, command, a, b = sys.argv[1:5]
    if command == "generate":
        generate(root, a, b)
    else:
        with open(b, "w") as f:
            json.dump(inspect(root, a), f)
