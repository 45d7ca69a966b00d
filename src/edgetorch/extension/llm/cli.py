"""``edgetorch llm``: run a text LLM ``.pte`` (one prompt, or a chat with the model's template)
and convert a GGUF file's tokenizer to tokenizer.json. Needs no torch."""

from __future__ import annotations

import argparse
import sys


def add_llm_parser(sub: argparse._SubParsersAction) -> None:
    llm = sub.add_parser("llm", help="run a text LLM .pte (prompt or chat); GGUF tokenizers")
    cmds = llm.add_subparsers(dest="llm_command", required=True)

    def model_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("model", help="the .pte (forward(tokens, input_pos) -> logits)")
        p.add_argument("--tokenizer", required=True,
                       help="tokenizer.json (reads tokenizer_config.json beside it), "
                            "tokenizer.model, tiktoken or tokenizer.bin")
        p.add_argument("--data-path", help="a .ptd holding the weights")
        p.add_argument("--max-new-tokens", type=int, default=-1)
        p.add_argument("--seq-len", type=int, default=-1, help="cap on prompt + new tokens")
        p.add_argument("--temperature", type=float, default=0.8, help="0 is greedy")
        p.add_argument("--top-p", type=float, default=0.9)
        p.add_argument("--seed", type=int, default=None)
        p.add_argument("--num-bos", type=int, default=0)
        p.add_argument("--stats", action="store_true", help="print ExecuTorch's stats report")

    run = cmds.add_parser("run", help="generate from one prompt")
    model_args(run)
    run.add_argument("--prompt", required=True)
    run.add_argument("--chat", action="store_true",
                     help="wrap the prompt as a user message with the model's chat template")
    run.add_argument("--system", help="with --chat: a system message")
    run.add_argument("--no-echo", action="store_true", help="do not print the prompt")
    run.set_defaults(fn=_cmd_run)

    chat = cmds.add_parser("chat", help="chat on stdin with the model's chat template")
    model_args(chat)
    chat.add_argument("--system", help="a system message")
    chat.set_defaults(fn=_cmd_chat)

    tok = cmds.add_parser("tokenizer", help="write tokenizer.json from a GGUF file's vocabulary")
    tok.add_argument("gguf")
    tok.add_argument("-o", "--output", required=True, help="directory for tokenizer(_config).json")
    tok.set_defaults(fn=_cmd_tokenizer)


def _runner_and_config(args: argparse.Namespace, echo: bool):
    from .runner import GenerationConfig, TextLLMRunner

    runner = TextLLMRunner(args.model, args.tokenizer, args.data_path)
    config = GenerationConfig(echo=echo, max_new_tokens=args.max_new_tokens, seq_len=args.seq_len,
                              temperature=args.temperature, top_p=args.top_p, seed=args.seed,
                              num_bos=args.num_bos)
    return runner, config


def _print(piece: str) -> None:
    sys.stdout.write(piece)
    sys.stdout.flush()


def _messages(system: str | None, history: list[dict[str, str]]) -> list[dict[str, str]]:
    return ([{"role": "system", "content": system}] if system else []) + history


def _cmd_run(args: argparse.Namespace) -> int:
    runner, config = _runner_and_config(args, echo=not args.no_echo)
    prompt = args.prompt
    if args.chat:
        prompt = runner.tokenizer.apply_chat_template(
            _messages(args.system, [{"role": "user", "content": prompt}]))
    runner.generate(prompt, config, _print)
    print()
    if args.stats:
        print(runner.stats.report())
    return 0


def _cmd_chat(args: argparse.Namespace) -> int:
    runner, config = _runner_and_config(args, echo=False)
    history: list[dict[str, str]] = []
    print(f"chatting with {args.model} (empty line or Ctrl-D ends)", file=sys.stderr)
    while True:
        sys.stderr.write("> ")
        sys.stderr.flush()
        line = sys.stdin.readline()
        if not line.strip():
            return 0
        history.append({"role": "user", "content": line.rstrip("\n")})
        prompt = runner.tokenizer.apply_chat_template(_messages(args.system, history))
        # Forget the oldest exchanges while the conversation outgrows the KV cache.
        while (len(runner.tokenizer.encode(prompt)) >= runner.max_context_len - 1
               and len(history) > 2):
            del history[:2]
            prompt = runner.tokenizer.apply_chat_template(_messages(args.system, history))
        # The template re-renders the whole conversation each turn; the runner keeps the KV
        # cache of the tokens it shares with what was fed (all but the new turn, usually).
        reply = runner.generate(prompt, config, _print, reuse_prefix=True)
        print()
        history.append({"role": "assistant", "content": reply})
        if args.stats:
            print(runner.stats.report(), file=sys.stderr)


def _cmd_tokenizer(args: argparse.Namespace) -> int:
    from .tokenizers.gguf import gguf_to_tokenizer_json

    path = gguf_to_tokenizer_json(args.gguf, args.output)
    print(f"wrote {path} and tokenizer_config.json")
    return 0
