"""Chat templates are hostile code: rendered sandboxed with limits on work, size and depth
(``ChatTemplate``), and every failure is a ``TokenizerError`` naming the template. Real
templates render exactly as transformers renders them."""

import re
from pathlib import Path

import pytest

from edgetorch.errors import TokenizerError
from edgetorch.extension.llm.tokenizers.chat_template import ChatTemplate, TemplateLimits

# Templates in the shapes real models use (the fuzz seeds): ChatML with tools (Qwen / SmolLM
# style), Llama 3 Instruct's, a Llama 3.1 style one (namespace, tojson(indent), macros, format,
# raise_exception, {% generation %}), one with call blocks, recursive loops and str.format; and
# SmolLM2's own, read from its GGUF by make_seeds.py.
TEMPLATES = Path(__file__).resolve().parents[2] / "fixtures" / "fuzz" / "chat_template"
SEEDS = sorted(p.stem[len("seed-"):] for p in TEMPLATES.glob("seed-*.jinja"))

MESSAGES = [
    {"role": "system", "content": "  Be brief.  "},
    {"role": "user", "content": "What is 2+2? <b>bold</b> & {{ not a template }}"},
    {"role": "assistant", "content": "4"},
    {"role": "user", "content": "naïve café 😀 and\nnewlines\n"},
]
TOOLS = [{"type": "function", "function": {"name": "add", "description": "Add two numbers",
          "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}}]
KWARGS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
          "date_string": "26 Jul 2024"}


@pytest.mark.parametrize("name", SEEDS)
@pytest.mark.parametrize("tools", [None, TOOLS])
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_real_templates_render_as_transformers(name, tools, add_generation_prompt):
    chat_utils = pytest.importorskip("transformers.utils.chat_template_utils")
    source = (TEMPLATES / f"seed-{name}.jinja").read_text()
    messages = MESSAGES[1:] if name == "llama31" and tools is None else MESSAGES
    kwargs = dict(messages=messages, tools=tools, add_generation_prompt=add_generation_prompt,
                  **KWARGS)
    ours = ChatTemplate(source, name).render(**kwargs)
    theirs = chat_utils._compile_jinja_template(source).render(**kwargs)
    assert ours == theirs
    assert len(ours) > 50


def test_the_seeds_hold_smollm2s_template():
    from test_llm_tokenizers import _smollm2_gguf

    from edgetorch.extension.llm.tokenizers.gguf import read_gguf_tokenizer

    assert {"chatml", "llama3", "llama31", "smollm2"} <= set(SEEDS)
    assert (TEMPLATES / "seed-smollm2.jinja").read_text() == \
        read_gguf_tokenizer(_smollm2_gguf())["tokenizer.chat_template"]


def test_tokenizer_renders_through_the_sandbox(tmp_path):
    from tiny_llm import write_tokenizer

    from edgetorch.extension.llm import tokenizers as T

    tok = T.load_tokenizer(write_tokenizer(str(tmp_path)))
    msgs = [{"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(msgs) == "<|bos|>user: hi\n<|bos|>assistant: "
    tok.chat_template = "{% for i in range(100) %}{% for m in messages %}x{% endfor %}{% endfor %}"
    tok._template = None
    with pytest.raises(TokenizerError, match=r"chat template of .*tokenizer\.json.*more than 50 "):
        tok.apply_chat_template(msgs, limits=TemplateLimits(max_steps=50))
    assert tok.apply_chat_template(msgs) == "x" * 100  # the default limits are far above


SMALL = TemplateLimits(max_steps=20_000, max_value_chars=100_000, max_output_chars=50_000,
                       max_built_chars=1_000_000, max_depth=16, max_int_bits=4096)

# (template, what the error says); each would exhaust memory, hang or crash without limits.
ATTACKS = {
    "string times": ("{{ 'a' * 10**10 }}", "result of '\\*'"),
    "list times": ("{{ ['a' * 1000] * 100000 }}", "result of '\\*'"),
    "doubling ~": ("{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
                   "{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "concatenation"),
    "doubling +": ("{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
                   "{% set ns.s = ns.s + ns.s %}{% endfor %}", "result of '\\+'"),
    "integer squaring": ("{% set ns = namespace(x=3) %}{% for i in range(64) %}"
                         "{% set ns.x = ns.x * ns.x %}{% endfor %}", "integer of"),
    "power": ("{{ 7 ** 1000000 }}", "integer of"),
    "nested loops": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                     "{% endfor %}", "loop iterations and calls"),
    "loop over a built list": ("{% set r = range(10000)|list %}{% for i in r %}{% for j in r %}"
                               "{% endfor %}{% endfor %}", "loop iterations and calls"),
    "recursive macro": ("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "nested deeper"),
    "call storm": ("{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}"
                   "{{ f(15) }}", "loop iterations and calls"),
    "recursive loop": ("{% for x in [1] recursive %}{{ loop([1, 2]) }}{% endfor %}",
                       "nested deeper"),
    "str.format width": ("{{ '{:>999999999}'.format(1) }}", "str.format"),
    "safe str.format width": ("{{ ('{:>999999999}'|safe).format(1) }}", "str.format"),
    "% width": ("{{ '%999999999d' % 1 }}", "result of '%'"),
    "format filter width": ("{{ '%999999999s'|format(1) }}", r"\|format"),
    "center": ("{{ 'a'|center(999999999) }}", r"\|center"),
    "indent": ("{{ ('\\n' * 50000)|indent(1000) }}", r"\|indent"),
    "batch padding": ("{{ [1]|batch(999999999, 0)|list }}", r"\|batch"),
    "slices": ("{{ [1]|slice(999999999)|list }}", r"\|slice"),
    "wordwrap": ("{{ ('a ' * 1000)|wordwrap(1, wrapstring='x' * 1000) }}", r"\|wordwrap"),
    "join": ("{{ (['a' * 30000] * 3)|join('x' * 30000) }}", "a join"),
    "str.join": ("{{ ('x' * 30000).join(['a' * 30000] * 3) }}", "a join"),
    "replace": ("{{ ('a' * 50000).replace('', 'bbbbbbbbbb') }}", r"\.replace"),
    "translate": ("{{ ('a' * 1000).translate({97: 'b' * 1000}) }}", r"\.translate"),
    "ljust": ("{{ 'a'.ljust(999999999) }}", r"\.ljust"),
    "sum of lists": ("{{ ([[1] * 10] * 2000)|sum(start=[]) }}", "sum of sequences"),
    "tojson indent": ("{{ ([[[[[1]]]]] * 5000)|tojson(indent=100000) }}", "tojson"),
    "template text in loops": ("{% for i in range(100000) %}" + "x" * 50 + "{% endfor %}",
                               "characters"),
    "deep nesting": ("{% set ns = namespace(x=[]) %}{% for i in range(10000) %}"
                     "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x }}", "stack|characters"),
    "class escape": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", "sandbox forbids"),
    "globals escape": ("{{ raise_exception.__globals__['os'] }}", "sandbox forbids"),
    "namespace dunder": ("{{ namespace(_x=1) }}", "underscore"),
    "list mutation": ("{% set l = [1] %}{{ l.append(2) }}", "sandbox forbids"),
    "include a file": ("{% include '/etc/passwd' %}", "no loader"),
    "syntax error": ("{% for %}", "does not compile"),
    "parser recursion": ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "nests more than 32"),
    "unary recursion": ("{{ " + "not " * 5000 + "1 }}", "nests more than 32"),
    "nested blocks": ("{% if 1 %}" * 100 + "x" + "{% endif %}" * 100, "nests more than 32"),
    "deep expression": ("{{ 1" + " + 1" * 3000 + " }}", "expressions nest more than 100"),
    "lipsum": ("{{ lipsum(100000) }}", "undefined"),
    "raise_exception": ("{{ raise_exception('no system role') }}", "refused the messages: no system"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_hostile_templates_are_typed_errors_naming_the_template(name):
    source, says = ATTACKS[name]
    with pytest.raises(TokenizerError, match=f"^the template {re.escape(repr(name))}: .*({says})"):
        ChatTemplate(source, f"the template {name!r}", SMALL).render(messages=MESSAGES)


def test_default_limits_stop_the_work_attacks():
    """With the default limits too (not only the small ones above)."""
    storm = ("{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}"
             "{{ f(40) }}")
    for source in (ATTACKS["string times"][0], ATTACKS["nested loops"][0], storm,
                   ATTACKS["doubling ~"][0], ATTACKS["recursive macro"][0]):
        with pytest.raises(TokenizerError, match="may be hostile"):
            ChatTemplate(source, "t").render(messages=MESSAGES)


def test_template_size_and_type_are_checked():
    with pytest.raises(TokenizerError, match="characters .limit 10."):
        ChatTemplate("x" * 11, "t", TemplateLimits(max_template_chars=10))
    with pytest.raises(TokenizerError, match="is list, not a string"):
        ChatTemplate(["x"], "t")


def test_output_limit():
    t = ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}", "t",
                     TemplateLimits(max_output_chars=100))
    assert t.render(messages=[{"content": "x" * 100}]) == "x" * 100
    with pytest.raises(TokenizerError, match="output longer than 100"):
        t.render(messages=[{"content": "x" * 60}] * 2)


def test_helpers_transformers_offers():
    t = ChatTemplate("{{ strftime_now('%Y') | length }} {{ {'a': '<é>'} | tojson }} "
                     "{{ dict(a=1) }} {% for i in range(5) %}{% if i == 2 %}{% break %}"
                     "{% endif %}{{ i }}{% endfor %}", "t")
    assert t.render() == '4 {"a": "<é>"} {\'a\': 1} 01'
