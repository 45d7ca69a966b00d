"""Runs under the reference interpreter: ExecuTorch 1.5.1's LLM runner and manual stepping on a
.pte, for tests/extension/llm and bench/bench_llm.py. Results are written as JSON.

    ref_llm_runner.py generate model.pte tokenizer.json PROMPT MAX_NEW out.json [--custom-ops]
        [--repeat R] [--threads T]
    ref_llm_runner.py step model.pte '[ids]' N out.json [--custom-ops] [--repeat R] [--threads T]

With --repeat, the run with the fastest decode is reported (after the first, a warm-up).
"""

from __future__ import annotations

import argparse
import json
import time


def _setup(a: argparse.Namespace) -> None:
    if a.custom_ops:
        import executorch.extension.llm.custom_ops.custom_ops  # noqa: F401  (llama:: kernels)
    if a.threads:
        from executorch.extension.pybindings import portable_lib

        portable_lib._unsafe_reset_threadpool(a.threads)


def cmd_generate(a: argparse.Namespace) -> dict:
    from executorch.extension.llm.runner import GenerationConfig, TextLLMRunner

    runner = TextLLMRunner(a.model, a.tokenizer)
    best = None
    for i in range(a.repeat + (a.repeat > 1)):
        runner.reset()
        pieces, stats = [], []
        cfg = GenerationConfig(echo=False, max_new_tokens=a.max_new, temperature=0.0)
        try:
            runner.generate(a.prompt, cfg, pieces.append,
                            lambda s: stats.append(s.to_json_string()))  # noqa: B023
        except Exception as e:  # report ExecuTorch's failure (e.g. UnicodeDecodeError) as data
            return {"pieces": pieces, "error": f"{type(e).__name__}: {e}"}
        run = {"pieces": pieces, "stats": json.loads(stats[0]) if stats else None}
        if a.repeat > 1 and i == 0:
            continue  # warm-up
        rate = (run["stats"] or {}).get("decode_token_per_sec", 0)
        if best is None or rate > (best["stats"] or {}).get("decode_token_per_sec", 0):
            best = run
    return best


def cmd_step(a: argparse.Namespace) -> dict:
    """Greedy decoding by calling forward directly: prompt in one call, then one token a call."""
    import torch
    from executorch.runtime import Runtime

    ids = json.loads(a.ids)
    best = None
    for _ in range(a.repeat):
        method = Runtime.get().load_program(a.model).load_method("forward")
        t0 = time.perf_counter()
        logits = method.execute([torch.tensor([ids]), torch.tensor([0])])[0]
        t1 = time.perf_counter()
        out, pos = [], len(ids)
        for _ in range(a.n):
            out.append(int(logits.reshape(-1, logits.shape[-1])[-1].argmax()))
            logits = method.execute([torch.tensor([[out[-1]]]), torch.tensor([pos])])[0]
            pos += 1
        t2 = time.perf_counter()
        run = {"ids": out, "prefill_s": t1 - t0, "decode_s": t2 - t1}
        if best is None or run["decode_s"] < best["decode_s"]:
            best = run
    return best


def main() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("model")
    g.add_argument("tokenizer")
    g.add_argument("prompt")
    g.add_argument("max_new", type=int)
    g.add_argument("out")
    s = sub.add_parser("step")
    s.add_argument("model")
    s.add_argument("ids")
    s.add_argument("n", type=int)
    s.add_argument("out")
    for q in (g, s):
        q.add_argument("--custom-ops", action="store_true", help="import ExecuTorch's llama ops")
        q.add_argument("--repeat", type=int, default=1)
        q.add_argument("--threads", type=int, default=0, help="reset the threadpool to T")
    a = p.parse_args()
    _setup(a)
    result = cmd_generate(a) if a.cmd == "generate" else cmd_step(a)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
