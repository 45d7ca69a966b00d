"""Chat templates rendered as hostile code: jinja2's sandbox plus limits on work and size.

A chat template comes with the model (tokenizer_config.json, GGUF metadata), so it is as
untrusted as any file. jinja2's ``ImmutableSandboxedEnvironment`` blocks attribute escapes, but
not work: ``'a' * 10**10`` exhausts memory, nested loops never end, a recursive macro ends in
RecursionError. :class:`ChatTemplate` renders with the environment transformers uses (so real
templates give the same text: ``tojson``, ``strftime_now``, ``namespace``, ``{% break %}``,
``{% generation %}``) and counts, per render:

- **steps**: loop iterations (every ``for``, recursive loops included), calls and filter calls;
- **depth**: nested macro / ``caller()`` / recursive-loop calls;
- **built characters**: every string or container the template builds (``*``, ``+``, ``%``,
  ``~``, ``format``, filters, string methods, output), checked *before* the big allocations;
- **output characters**, the wall-clock time and the size of the template itself.

Any limit, sandbox escape (``SecurityError``), syntax error, ``RecursionError`` or other failure
inside the template becomes a :class:`~edgetorch.errors.TokenizerError` naming the template.
``lipsum`` is not offered (a template has no use for lorem ipsum; it is a cheap way to build
megabytes). Nothing here imports torch.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.runtime import LoopContext, Macro, markup_join, str_join
from jinja2.sandbox import (
    ImmutableSandboxedEnvironment,
    SandboxedEscapeFormatter,
    SandboxedFormatter,
)
from jinja2.utils import Namespace
from jinja2.visitor import NodeTransformer
from markupsafe import Markup

from ....errors import TokenizerError
from .template_budget import (
    BUDGET,
    FLOAT_TEXT,
    Budget,
    TemplateLimits,
    binop_size,
    budget,
    charge_value,
    join_size,
    method_size,
    percent_size,
    replace_size,
    size_of,
)


class _BoundedFields:
    """``str.format`` that adds up each field's width before formatting it."""

    _total = 0

    def vformat(self, format_string: str, args: Any, kwargs: Any) -> str:
        self._total = len(format_string)
        return super().vformat(format_string, args, kwargs)  # type: ignore[misc]

    def format_field(self, value: Any, format_spec: str) -> Any:
        b = budget()
        self._total += sum(int(d) for d in re.findall(r"\d+", format_spec)) + \
            size_of(value, b.limits.max_value_chars) + FLOAT_TEXT
        b.build(self._total, "a str.format result")
        return super().format_field(value, format_spec)  # type: ignore[misc]


class _BoundedFormatter(_BoundedFields, SandboxedFormatter):
    pass


class _BoundedEscapeFormatter(_BoundedFields, SandboxedEscapeFormatter):
    pass


# ---- instrumented AST: loops, output and ~ go through the budget -----------------------


def _iterate(iterable: Any) -> Any:
    b = budget()
    for item in iterable:
        b.step()
        yield item


def _emit(value: Any) -> Any:
    """Every ``{{ ... }}`` and every piece of template text, each time it is output."""
    b = budget()
    b.step()
    b.build(len(value) if isinstance(value, str) else size_of(value, b.limits.max_value_chars),
            "an output piece")
    return value


def _literal(text: str) -> Markup:
    b = budget()
    b.build(len(text), "template text")
    return Markup(text)  # template text is never escaped, even inside {% autoescape %}


@jinja2.pass_eval_context
def _concat(eval_ctx: Any, *values: Any) -> str:
    b = budget()
    b.step()
    b.build(join_size("", list(values)), "a ~ concatenation")
    return (markup_join if eval_ctx.autoescape else str_join)(values)


def _call_env(name: str, *args: nodes.Expr, lineno: int) -> nodes.Call:
    return nodes.Call(nodes.EnvironmentAttribute(name), list(args), [], None, None,
                      lineno=lineno)


class _Instrument(NodeTransformer):
    def visit_For(self, node: nodes.For) -> nodes.For:
        self.generic_visit(node)
        node.iter = _call_env("et_iterate", node.iter, lineno=node.lineno)
        return node

    def visit_Output(self, node: nodes.Output) -> nodes.Output:
        self.generic_visit(node)
        node.nodes = [
            _call_env("et_literal", nodes.Const(c.data), lineno=c.lineno)
            if isinstance(c, nodes.TemplateData) else _call_env("et_emit", c, lineno=c.lineno)
            for c in node.nodes]
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Call:
        self.generic_visit(node)
        return _call_env("et_concat", *node.nodes, lineno=node.lineno)


# ---- the environment -------------------------------------------------------------------

# Filters that build more than they are given: the estimated size of their result.
_FILTER_SIZES = {
    "center": lambda v, width=80: max(len(str(v)), int(width)),
    "indent": lambda s, width=4, *a, **k: len(str(s)) + (str(s).count("\n") + 1) * (
        len(width) if isinstance(width, str) else int(width)),
    "wordwrap": lambda s, width=79, blw=True, wrapstring=None, *a, **k: len(str(s)) * (
        1 + len(wrapstring or "\n")),
    "batch": lambda v, linecount, *a, **k: len(v) + int(linecount),
    "slice": lambda v, slices, *a, **k: len(v) + int(slices),
    "format": lambda v, *args, **kwargs: percent_size(str(v), kwargs or args, 1 << 62),
    "replace": lambda s, old, new, count=None: replace_size(str(s), str(old), str(new), count),
}


# A macro call costs about ten loop iterations; counting it so keeps a call storm (two
# recursive calls per level) within the step limit well before the deadline.
_MACRO_STEPS = 10


class _ChatEnvironment(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset(("*", "**", "+", "%"))

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        b = budget()
        b.step()
        size = binop_size(left, right, operator)
        if size is not None:
            b.build(size, f"the result of {operator!r}")
        return super().call_binop(context, operator, left, right)

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        b = budget()
        if isinstance(__obj, (Macro, LoopContext)):
            b.step(_MACRO_STEPS)
            if isinstance(__obj, LoopContext) and args:  # loop(children): count those too
                args = (_iterate(args[0]), *args[1:])
            b.depth += 1
            if b.depth > b.limits.max_depth:
                b.fail(f"macro / caller() / recursive loop calls nested deeper than "
                       f"{b.limits.max_depth}")
            try:
                return super().call(__context, __obj, *args, **kwargs)
            finally:
                b.depth -= 1
        b.step()
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, (str, bytes, bytearray)) and not isinstance(__obj, type):
            name = getattr(__obj, "__name__", "")
            if name == "join" and args:
                items = list(_iterate(args[0]))
                b.build(join_size(owner, items), "a join")
                args = (items, *args[1:])
            else:
                size = method_size(owner, name, args, kwargs)
                if size is not None:
                    b.build(size, f"the result of .{name}()")
        return charge_value(super().call(__context, __obj, *args, **kwargs),
                             "a call's result")

    def wrap_str_format(self, value: Any) -> Any:
        if super().wrap_str_format(value) is None:
            return None  # not str.format / str.format_map
        f_self = value.__self__
        formatter = (_BoundedEscapeFormatter(self, escape=f_self.escape)
                     if isinstance(f_self, Markup) else _BoundedFormatter(self))
        is_map = value.__name__ == "format_map"

        def bounded(*args: Any, **kwargs: Any) -> str:
            if is_map:
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one positional argument")
                args, kwargs = (), args[0]
            return type(f_self)(formatter.vformat(f_self, args, kwargs))

        return bounded


def _bounded_filter(name: str, fn: Any) -> Any:
    estimate = _FILTER_SIZES.get(name)
    skip = 1 if getattr(fn, "jinja_pass_arg", None) is not None else 0

    def bounded(*args: Any, **kwargs: Any) -> Any:
        b = budget()
        b.step()
        value_args = args[skip:]
        if name in ("join", "sum") and value_args:  # look at the items, then pass them on
            items = list(_iterate(value_args[0]))
            args = (*args[:skip], items, *value_args[1:])
            if name == "join" and len(value_args) <= 2 and "attribute" not in kwargs:
                sep = value_args[1] if len(value_args) > 1 else kwargs.get("d", "")
                b.build(join_size(str(sep), items), "a join")
            start = value_args[2] if len(value_args) > 2 else kwargs.get("start", 0)
            if name == "sum" and isinstance(start, (str, list, tuple)):
                # each + copies the total so far: n items cost n times the result
                b.build(len(items) * join_size("", items), "a sum of sequences")
        elif estimate is not None and value_args:
            try:
                size = estimate(*value_args, **kwargs)
            except (TypeError, ValueError):
                size = None  # wrong arguments: the filter itself says so
            if size is not None:
                b.build(size, f"the result of |{name}")
        return charge_value(fn(*args, **kwargs), f"the result of |{name}")

    bounded.__dict__.update(getattr(fn, "__dict__", {}))  # keeps jinja_pass_arg
    bounded.__name__ = getattr(fn, "__name__", name)
    return bounded


class _GenerationTag(Extension):
    """``{% generation %}...{% endgeneration %}`` (transformers marks assistant text with it);
    the body renders unchanged."""

    tags = {"generation"}

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: Any = None, sort_keys: bool = False) -> str:
    # transformers' tojson: no HTML escaping, indent / separators / sort_keys exposed.
    b = budget()
    if indent is not None:
        width = len(indent) if isinstance(indent, str) else int(indent)
        b.build(size_of(x, b.limits.max_value_chars) * (12 + width), "a tojson result")
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class _TemplateDict:
    """``dict(...)`` without the class itself (no ``dict.__subclasses__`` style reach)."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(Namespace):
    """``namespace(...)`` refusing underscore names (transformers' rule)."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805  (Namespace's signature)
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check(name)
        Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check(name)
        Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"a chat template cannot store underscore attributes on a namespace ({name!r})")


def _environment(raise_exception: Any) -> _ChatEnvironment:
    env = _ChatEnvironment(trim_blocks=True, lstrip_blocks=True,
                           extensions=[_GenerationTag, loopcontrols])
    env.filters["tojson"] = _tojson
    env.filters = {name: _bounded_filter(name, fn) for name, fn in env.filters.items()}
    env.globals.pop("lipsum", None)
    env.globals.update(raise_exception=raise_exception, strftime_now=_strftime_now,
                       dict=_TemplateDict(), namespace=_TemplateNamespace)
    env.et_iterate, env.et_emit, env.et_literal, env.et_concat = (
        _iterate, _emit, _literal, _concat)
    return env


# jinja2's parser and compiler recurse per level of nesting (~13 Python frames per bracket);
# these keep a template well inside Python's recursion limit, so that a RecursionError never
# stands in for a limit. Real templates nest a handful of levels.
MAX_NESTING = 32  # brackets and blocks, and a run of unary operators
MAX_TREE_DEPTH = 100  # the parsed template (a chain a+a+a+... is as deep as it is long)
_OPENERS = {"lparen", "lbracket", "lbrace"}
_CLOSERS = {"rparen", "rbracket", "rbrace"}
_BLOCKS = {"for", "if", "macro", "call", "filter", "with", "autoescape", "block", "generation"}


def _check_nesting(env: _ChatEnvironment, source: str, name: str) -> None:
    depth = unary = 0
    after_block_begin = False
    for token in env.lexer.tokenize(source):
        kind, value = token.type, token.value
        if kind in _OPENERS:
            depth += 1
        elif kind in _CLOSERS:
            depth -= 1
        elif after_block_begin and kind == "name":
            depth += 1 if value in _BLOCKS else -1 if value[3:] in _BLOCKS and \
                value.startswith("end") else 0
        unary = unary + 1 if kind in ("sub", "add") or (kind == "name" and value == "not") \
            else 0
        after_block_begin = kind == "block_begin"
        if depth > MAX_NESTING or unary > MAX_NESTING:
            raise TokenizerError(f"{name}: the chat template nests more than {MAX_NESTING} "
                                 f"levels deep (line {token.lineno}); real templates nest a few")


def _check_depth(tree: nodes.Node, name: str) -> None:
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            raise TokenizerError(f"{name}: the chat template's expressions nest more than "
                                 f"{MAX_TREE_DEPTH} levels deep (line {node.lineno})")
        stack.extend((child, depth + 1) for child in node.iter_child_nodes())


class ChatTemplate:
    """One chat template, compiled once, rendered within ``limits``."""

    def __init__(self, source: str, name: str, limits: TemplateLimits | None = None) -> None:
        self.name, self.limits = name, limits or TemplateLimits()
        if not isinstance(source, str):
            raise TokenizerError(f"{name}: the chat template is {type(source).__name__}, not a "
                                 "string; fix the chat_template entry")
        if len(source) > self.limits.max_template_chars:
            raise TokenizerError(f"{name}: the chat template has {len(source)} characters "
                                 f"(limit {self.limits.max_template_chars}); a real one has a few "
                                 "thousand")

        def raise_exception(message: Any) -> None:
            raise TokenizerError(f"{name}: the chat template refused the messages: {message}")

        env = _environment(raise_exception)
        try:
            _check_nesting(env, source, name)
            tree = env.parse(source)
            _check_depth(tree, name)
            tree = _Instrument().visit(tree)
            tree.set_environment(env)
            self._template = env.from_string(tree)
        except TokenizerError:
            raise
        except Exception as e:  # the template is hostile code: every way it fails is typed
            raise TokenizerError(f"{name}: the chat template does not compile: "
                                 f"{type(e).__name__}: {str(e)[:300]}") from e

    def render(self, **context: Any) -> str:
        """The rendered text; any limit or failure is a ``TokenizerError``."""
        counters = Budget(self.limits, self.name)
        token = BUDGET.set(counters)
        pieces, size = [], 0
        try:
            for piece in self._template.generate(**context):
                size += len(piece)
                if size > self.limits.max_output_chars:
                    counters.fail(f"output longer than {self.limits.max_output_chars} characters")
                pieces.append(piece)
        except TokenizerError:
            raise
        except jinja2.exceptions.SecurityError as e:
            raise TokenizerError(f"{self.name}: the chat template tried something the sandbox "
                                 f"forbids: {str(e)[:300]}") from e
        except (RecursionError, MemoryError) as e:
            raise TokenizerError(f"{self.name}: the chat template ran out of "
                                 f"{'stack' if isinstance(e, RecursionError) else 'memory'}; "
                                 "it may be hostile") from None
        except Exception as e:  # the template's own errors (undefined, types, ...)
            raise TokenizerError(f"{self.name}: the chat template failed: "
                                 f"{type(e).__name__}: {str(e)[:300]}") from e
        finally:
            BUDGET.reset(token)
        return "".join(pieces)
