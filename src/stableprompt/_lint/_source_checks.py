"""Prompt-structure checks that compare code, not data flows.

- :func:`ttl_findings` (SP304): a ``cache_control`` display without ``ttl`` (the provider's
  5-minute default) in a project that writes ``"ttl": "1h"`` elsewhere: a per-request marker
  that quietly drops the 1-hour cache.
- :func:`summarizer_findings` (SP303): a summarizer call (in a function named ``summar*``,
  ``compact*``, ``condense*``) whose system, tools or message conversion differs from the main
  call of the same API in the same module or class: the compaction request then misses the
  cache the conversation just wrote, and pays for the whole history uncached.

Used by :mod:`stableprompt._lint._source`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ._source_report import FlowStep, SourceEdit, SourceFinding
from ._source_rules import LLM_CALLS, RULES, SUMMARY_WORDS, match

__all__ = ["summarizer_findings", "ttl_findings"]

_TTL = next(r for r in RULES if r.id == "SP304")
_SUMMARIZER = next(r for r in RULES if r.id == "SP303")
_SYSTEM_KEYS = ("system", "instructions", "system_instruction")
_TOOL_KEYS = ("tools", "toolConfig", "functions")
_MESSAGE_KEYS = ("messages", "input", "contents")


def _key(node: ast.expr | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _cache_controls(tree: ast.Module) -> Iterator[ast.Dict]:
    """Every dict display used as a ``cache_control`` value."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "cache_control" and isinstance(kw.value, ast.Dict):
                    yield kw.value
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values, strict=True):
                if _key(k) == "cache_control" and isinstance(v, ast.Dict):
                    yield v
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and _key(target.slice) == "cache_control":
                    yield node.value


def ttl_findings(modules: Iterable[tuple[str, ast.Module, Sequence[str]]],
                 ) -> list[SourceFinding]:
    """SP304 over ``(file, tree, lines)`` of every module of the project."""
    hour: tuple[str, ast.Dict] | None = None
    bare: list[tuple[str, ast.Dict]] = []
    for file, tree, _ in modules:
        for node in _cache_controls(tree):
            keys = [_key(k) if k is not None else "**" for k in node.keys]
            if "ttl" in keys:
                value = node.values[keys.index("ttl")]
                if hour is None and _key(value) == "1h":
                    hour = (file, node)
            elif "**" not in keys and "type" in keys:
                bare.append((file, node))
    if hour is None:
        return []
    first_file, first = hour
    out = []
    for file, node in bare:
        end_line, end_col = node.end_lineno or node.lineno, (node.end_col_offset or 1) - 1
        edit = SourceEdit(file, end_line, end_col + 1, end_line, end_col + 1,
                          ', "ttl": "1h"', "keep the 1-hour TTL")
        out.append(SourceFinding(
            _TTL.id, _TTL.name, _TTL.cause, _TTL.severity, file, node.lineno,
            node.col_offset + 1, end_line, end_col + 2,
            f"cache_control without ttl (defaults to 5m) while line {first.lineno} of "
            f"{first_file} caches for 1h",
            (FlowStep(first_file, first.lineno, first.col_offset + 1, "ttl 1h"),
             FlowStep(file, node.lineno, node.col_offset + 1, "no ttl: 5m")),
            _TTL.fix, edit))
    return out


@dataclass(frozen=True, slots=True)
class _Call:
    node: ast.Call
    api: str
    function: str
    cls: str

    def kw(self, keys: Sequence[str]) -> ast.keyword | None:
        return next((k for k in self.node.keywords if k.arg in keys), None)


def _dotted(node: ast.expr, aliases: Mapping[str, str]) -> str:
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value, aliases)}.{node.attr}"
    if isinstance(node, ast.Call):
        return _dotted(node.func, aliases) + "()"
    return ""


def _llm_calls(tree: ast.Module, aliases: Mapping[str, str]) -> list[_Call]:
    out: list[_Call] = []

    def visit(node: ast.AST, function: str, cls: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, function, child.name)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name, cls)
            else:
                if isinstance(child, ast.Call):
                    dotted = _dotted(child.func, aliases)
                    api = next((p for p in LLM_CALLS if match(dotted, p)), None)
                    if api is not None:
                        out.append(_Call(child, api, function, cls))
                visit(child, function, cls)

    visit(tree, "", "")
    return out


def _prefix(node: ast.expr) -> ast.expr:
    """The part of a message list a summarizer should share: ``history + [ask]`` and
    ``[*history, ask]`` share ``history``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _prefix(node.left)
    if isinstance(node, ast.List) and node.elts and isinstance(node.elts[0], ast.Starred):
        return node.elts[0].value
    return node


def _names(node: ast.expr) -> set[str]:
    """Root names (``self.history`` counts as one name; ``self`` alone does not)."""
    out = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name):
            out.add(f"{n.value.id}.{n.attr}")
        elif isinstance(n, ast.Name) and n.id not in ("self", "cls"):
            out.add(n.id)
    return out


def _differences(main: _Call, summ: _Call) -> Iterator[tuple[str, str, ast.AST]]:
    """``(cause, message, node)`` per slot the summarizer builds differently."""
    m_tools, s_tools = main.kw(_TOOL_KEYS), summ.kw(_TOOL_KEYS)
    if m_tools is not None and s_tools is None:
        yield ("tool-removed", f"{main.api}() in {summ.function}() sends no {m_tools.arg} "
               f"while the main call in {main.function}() does", summ.node)
    m_sys, s_sys = main.kw(_SYSTEM_KEYS), summ.kw(_SYSTEM_KEYS)
    if m_sys is not None and (s_sys is None or ast.dump(m_sys.value) != ast.dump(s_sys.value)):
        shown = "no system" if s_sys is None else f"{s_sys.arg}={ast.unparse(s_sys.value)[:60]}"
        yield ("content-edit", f"{main.api}() in {summ.function}() sends {shown} while the "
               f"main call in {main.function}() sends {m_sys.arg}="
               f"{ast.unparse(m_sys.value)[:60]}", s_sys.value if s_sys else summ.node)
    m_msg, s_msg = main.kw(_MESSAGE_KEYS), summ.kw(_MESSAGE_KEYS)
    if m_msg is not None and s_msg is not None:
        a, b = _prefix(m_msg.value), _prefix(s_msg.value)
        if ast.dump(a) != ast.dump(b) and _names(a) & _names(b):
            yield ("history-rewrite", f"{summ.function}() converts the history as "
                   f"{ast.unparse(b)[:60]} while {main.function}() sends "
                   f"{ast.unparse(a)[:60]}", s_msg.value)


def summarizer_findings(modules: Iterable[tuple[str, ast.Module, Mapping[str, str]]],
                        ) -> list[SourceFinding]:
    """SP303 over ``(file, tree, aliases)`` of every module of the project."""
    out = []
    for file, tree, aliases in modules:
        calls = _llm_calls(tree, aliases)
        summ = [c for c in calls if any(w in c.function.lower() for w in SUMMARY_WORDS)]
        main = [c for c in calls if c not in summ]
        for s in summ:
            peers = [m for m in main if m.api == s.api and m.cls == s.cls]
            if not peers:
                continue
            m = peers[0]
            for cause, message, node in _differences(m, s):
                line, col = getattr(node, "lineno", 0), getattr(node, "col_offset", 0)
                out.append(SourceFinding(
                    _SUMMARIZER.id, _SUMMARIZER.name, cause, _SUMMARIZER.severity, file, line,
                    col + 1, getattr(node, "end_lineno", line) or line,
                    (getattr(node, "end_col_offset", col) or col) + 1, message,
                    (FlowStep(file, m.node.lineno, m.node.col_offset + 1,
                              f"main call in {m.function}()"),
                     FlowStep(file, line, col + 1, f"summarizer call in {s.function}()")),
                    _SUMMARIZER.fix))
    return out
