"""``DebugPass``: logs a graph's code and every node (operation, target, optionally its memory
spec and the user's source line) at DEBUG level, for looking at a graph between passes. An
enabled pass logs whatever the logger's level (as ExecuTorch's lowers the level while it runs).
It changes nothing."""

from __future__ import annotations

import logging
import os
import re

import torch
from torch.fx.passes.infra.pass_base import PassBase, PassResult

log = logging.getLogger(__name__)


class DebugPass(PassBase):
    def __init__(self, msg: str = "", enable_debug_pass: bool = True, show_src: bool = False,
                 show_full_path: bool = False, show_all_frames: bool = False,
                 path_filter: str | None = None, show_spec: bool = False,
                 log_filename: str | None = None) -> None:
        """``show_src``: the source lines of each node (all frames with ``show_all_frames``,
        only those whose path matches ``path_filter``; file names unless
        ``show_full_path``). ``log_filename``: also write the log there (overwritten)."""
        self.msg = msg
        self.enable_debug_pass = enable_debug_pass
        self.show_src = show_src
        self.show_full_path = show_full_path
        self.show_all_frames = show_all_frames
        self.path_filter = re.compile(path_filter) if path_filter else None
        self.show_spec = show_spec
        self.log_filename = log_filename

    def call(self, graph_module: torch.fx.GraphModule) -> PassResult:
        if not self.enable_debug_pass:
            return PassResult(graph_module, False)
        handler = logging.FileHandler(self.log_filename, mode="w") if self.log_filename else None
        if handler is not None:
            log.addHandler(handler)
        level = log.level
        if not log.isEnabledFor(logging.DEBUG):
            log.setLevel(logging.DEBUG)
        try:
            for line in self.lines(graph_module):
                log.debug("%s", line)
        finally:
            log.setLevel(level)
            if handler is not None:
                log.removeHandler(handler)
                handler.close()
        return PassResult(graph_module, False)

    def lines(self, graph_module: torch.fx.GraphModule) -> list[str]:
        """What ``call`` logs: a header, then one line per node (and its source lines)."""
        out = [f"DebugPass {self.msg}".rstrip() + f": {len(graph_module.graph.nodes)} nodes"]
        graph_module.recompile()
        out += ["Code is:", *graph_module.code.strip("\n").splitlines()]
        for node in graph_module.graph.nodes:
            line = f"{node.op} {node.name}: {node.target}"
            if self.show_spec and "spec" in node.meta:
                line += f" spec={node.meta['spec']}"
            out.append(line)
            if self.show_src:
                out.extend(f"    {frame}" for frame in self._frames(node))
        return out

    def _frames(self, node: torch.fx.Node) -> list[str]:
        # torch.export's stack_trace: '  File "path", line N, in fn\n    code' per frame
        trace = node.meta.get("stack_trace") or ""
        frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', trace)
        if self.path_filter is not None:
            frames = [f for f in frames if self.path_filter.search(f[0])]
        if not self.show_all_frames:
            frames = frames[-1:]
        return [f"{path if self.show_full_path else os.path.basename(path)}:{lineno} in "
                f"{fn}: {code}" for path, lineno, fn, code in frames]
