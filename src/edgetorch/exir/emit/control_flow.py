"""Control flow for the emitter, as ExecuTorch's emitter writes it: ``torch.cond`` as jumps
around two inlined branches, ``torch.map`` as a loop of jumps and prim ops around its inlined
body (``MethodEmitter`` mixes this in; it provides ``_add``, ``_const``, ``_tensor``,
``_kernel_call``, ``_append``, ``_call``, ``env``, ``instructions`` and ``_gm_stack``)."""

from __future__ import annotations

from typing import Any

import torch

from ...errors import UnsupportedOperatorError
from ...schema import program as S
from ..ops import describe_node
from ..verifier import map_reason


class ControlFlowEmitter:
    env: dict[torch.fx.Node, Any]
    instructions: list[S.Instruction]
    node: torch.fx.Node | None
    _gm_stack: list[torch.fx.GraphModule]

    def _emit_cond(self, node: torch.fx.Node) -> list[int]:
        """``torch.cond`` as ExecuTorch emits it: jump over the true branch when the predicate
        is false; the true branch ends with a jump (on a constant False) over the false branch;
        each branch moves its results into the cond's output values."""
        pred, true_attr, false_attr, operands = node.args
        gm = self._gm_stack[-1]
        pred_id = self.env[pred]
        operand_ids = [self.env[o] if isinstance(o, torch.fx.Node) else self._const(o) for o in operands]
        spec = node.meta["spec"]
        out_ids = [self._tensor(s) for s in (spec if isinstance(spec, (tuple, list)) else [spec])]
        skip_true = self._append(S.JumpFalseCall(pred_id, -1))
        self._emit_body(getattr(gm, true_attr.target), operand_ids, out_ids)
        skip_false = self._append(S.JumpFalseCall(-1, -1))
        self.instructions[skip_true].instr_args.destination_instruction = len(self.instructions)
        self._emit_body(getattr(gm, false_attr.target), operand_ids, out_ids)
        # ExecuTorch emits the jump's constant False after the false branch's values.
        jump = self.instructions[skip_false].instr_args
        jump.cond_value_index = self._const(False)
        jump.destination_instruction = len(self.instructions)
        return out_ids

    def _emit_map(self, node: torch.fx.Node) -> list[int]:
        """``torch.map`` as ExecuTorch emits it: a loop over the rows of the mapped tensor.

        ``n = sym_size(x, 0)``; loop: ``select_copy(x, 0, i)`` into the body's first input,
        the body, ``et_copy_index(out, result, i)`` (which grows ``out`` by a row), ``i += 1``,
        ``done = i == n``, jump back to the select while not done; then ``i -= n`` so the next
        run starts at 0 again. The output is DYNAMIC_BOUND (it grows row by row); the verifier
        has checked there is one mapped tensor and one result."""
        reason = map_reason(node)  # also when to_edge's check was turned off
        if reason is not None:
            raise UnsupportedOperatorError(f"{reason}.\n  {describe_node(node)}")
        body_attr, mapped, operands = node.args
        gm = self._gm_stack[-1]
        spec = node.meta["spec"]
        specs = list(spec) if isinstance(spec, (tuple, list)) else [spec]
        specs[0].dynamism = S.TensorShapeDynamism.DYNAMIC_BOUND
        out_id = self._tensor(specs[0])
        x = self.env[mapped[0]]
        operand_ids = [self.env[o] if isinstance(o, torch.fx.Node) else self._const(o) for o in operands]
        index = self._add(S.Int(0))
        size = self._add(S.Int(0))
        self._kernel_call("aten::sym_size", "int", [x, self._const(0), size])
        dim = self._const(0)
        loop = len(self.instructions)
        # The body's first input gets its value when the body is emitted (ExecuTorch's order).
        select = self._kernel_call("aten::select_copy", "int_out", [x, dim, index, -1, -1])
        inputs, results = self._emit_body(getattr(gm, body_attr.target), [None, *operand_ids])
        self.instructions[select].instr_args.args[-2:] = [inputs[0], inputs[0]]
        self.node = node
        self._kernel_call("executorch_prim::et_copy_index", "tensor", [out_id, results[0], index])
        self._kernel_call("executorch_prim::add", "Scalar", [index, self._const(1), index])
        done = self._const(False)
        self._kernel_call("executorch_prim::eq", "Scalar", [index, size, done])
        self._append(S.JumpFalseCall(done, loop))
        self._kernel_call("executorch_prim::sub", "Scalar", [index, size, index])
        return [out_id]

    def _emit_body(self, body: torch.fx.GraphModule, input_ids: list[int | None],
                   out_ids: list[int] | None = None) -> tuple[list[int], list[int]]:
        """Emit a control-flow body inline; returns its (input, result) values. Its inputs
        are bound to ``input_ids`` (``None``: a tensor of the body's own, from its spec);
        with ``out_ids``, its results are moved there (the values both branches share)."""
        outer = self.node
        self._gm_stack.append(body)
        bound = list(input_ids)
        placeholders = iter(range(len(bound)))
        results: list[int] = []
        for inner in body.graph.nodes:
            self.node = inner
            if inner.op == "placeholder":
                i = next(placeholders)
                if bound[i] is None:
                    bound[i] = self._tensor(inner.meta["spec"])
                self.env[inner] = bound[i]
            elif inner.op == "call_function":
                self.env[inner] = self._call(inner)
            elif inner.op == "output":
                results = [self.env[arg] for arg in inner.args[0]]
                for src, dest in zip(results, out_ids or []):
                    if src != dest:
                        self._append(S.MoveCall(src, dest))
        self._gm_stack.pop()
        self.node = outer
        return bound, results
