"""The taint walk of one function (or module body): which sources reach which prompt sinks.

A value's taint is a frozen set of :class:`Label` s, one per source it derives from. The walk
is intra-procedural and flow-sensitive in straight-line code (an assignment replaces a name's
taint; ``x.sort()`` removes ordering labels), and joins branches by union; a loop body is
walked twice so a value carried around the loop is seen. Function parameters start as
symbolic ``param`` labels, so one walk of a function is also its :class:`Summary`: what its
return value carries, which parameters reach a sink, and which reach an attribute of ``self``.
At a call of a project function the caller substitutes its argument taints for those labels
(:meth:`Walker.call_project`): that is the inter-procedural part.

Positions in a message list: a label is ``tail`` once it sits after the first element of a
list (a later list-literal element, ``append``, ``extend``, ``+ [...]``, ``*history``), unless
that element is a ``role: system`` / ``developer`` message. Only non-tail labels count in a
``messages`` slot: a timestamp in the newest user message is sent once and never re-rendered.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

from ._source_rules import (
    BUILDER_METHODS,
    BUILDER_SINK,
    FROZEN_KINDS,
    KILL_ALL,
    LLM_CALLS,
    LLM_LAST,
    ORDER_KINDS,
    SOURCE_ATTRIBUTES,
    SOURCE_INDEX,
    SOURCE_METHODS,
    SUMMARY_WORDS,
    SYSTEM_ONLY_KINDS,
    TOOLS_ONLY_KINDS,
    Sink,
    match,
)

__all__ = ["EMPTY", "Callee", "FunctionInfo", "Label", "Project", "SinkHit", "Step", "Summary",
           "Taint", "Walker", "admits"]


@dataclass(frozen=True, slots=True)
class Step:
    """One hop of a flow: a 1-based ``line``, 0-based ``col`` and what happens there."""

    file: str
    line: int
    col: int
    note: str


@dataclass(frozen=True, slots=True)
class Label:
    """One source a value derives from.

    Attributes:
        kind: A key of :data:`~stableprompt._lint._source_rules.RULE_BY_KIND`, or ``param``
            (symbolic: parameter ``index`` of the function being walked).
        what: What the source is (``datetime.now()``), or the parameter's name.
        file, line, col: Where the source is (1-based line, 0-based column).
        index: Parameter position for ``param`` labels (``-1`` otherwise).
        tail: The value sits after the first element of a message list.
        drops: For ``param`` labels: kinds removed on the way (``sorted`` removes the
            ordering kinds), so an argument of such a kind does not come through.
        via: Call sites the value passed through (not part of equality: a set keeps one).
    """

    kind: str
    what: str
    file: str
    line: int
    col: int
    index: int = -1
    tail: bool = False
    drops: frozenset[str] = frozenset()
    via: tuple[Step, ...] = field(default=(), compare=False)


Taint = frozenset[Label]
EMPTY: Taint = frozenset()
_MAX_VIA = 3


@dataclass(frozen=True, slots=True)
class SinkHit:
    """A prompt slot a value reaches: where, which slot of which API."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    slot: str
    api: str
    argument: str
    canonical: bool = False


@dataclass(slots=True)
class Summary:
    """What a function does with its parameters (see the module docstring); ``tuples``:
    per arity, the taint of each position of the tuple displays it returns (so
    ``tools, choice = f()`` keeps the two apart)."""

    returns: Taint = EMPTY
    tuples: dict[int, list[Taint]] = field(default_factory=dict)
    param_sinks: set[tuple[Label, SinkHit]] = field(default_factory=set)
    param_fields: set[tuple[Label, tuple[str, str]]] = field(default_factory=set)


@dataclass(slots=True)
class FunctionInfo:
    """A function of the analysed project: its node, module and class (``None``: a plain
    function), and for a nested function the enclosing walk's names (its closure)."""

    node: ast.FunctionDef | ast.AsyncFunctionDef
    module: str
    cls: str | None = None
    closure: Mapping[str, Taint] | None = None
    nested_self: str | None = None

    @property
    def params(self) -> list[str]:
        a = self.node.args
        return [p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)]

    @property
    def self_name(self) -> str | None:
        """The name ``self`` goes by: a method's first parameter, or the enclosing method's
        in a nested function."""
        return self.params[0] if self.bound and self.params else self.nested_self

    @property
    def bound(self) -> bool:
        """A method taking ``self``/``cls`` first (not a staticmethod, not a nested def)."""
        if self.cls is None or self.closure is not None:
            return False
        return not any(isinstance(d, ast.Name) and d.id == "staticmethod"
                       for d in self.node.decorator_list)


@dataclass(frozen=True, slots=True)
class Callee:
    """A resolved call of a project function; ``offset`` 1 when the call binds ``self``."""

    info: FunctionInfo
    offset: int
    name: str


class Project(Protocol):
    """What a walk asks of the whole project (implemented by ``_source.Analysis``)."""

    def sinks_named(self, last: str) -> tuple[Sink, ...]: ...

    def configured_sinks_named(self, last: str) -> tuple[Sink, ...]: ...

    def dotted(self, module: str, node: ast.expr, aliases: Mapping[str, str]) -> str: ...

    def resolve(self, walker: Walker, node: ast.Call, dotted: str) -> Callee | None: ...

    def class_named(self, walker: Walker, dotted: str) -> str | None: ...

    def summary(self, info: FunctionInfo) -> Summary: ...

    def field_taint(self, cls: str, attr: str) -> Taint: ...

    def add_field(self, cls: str, attr: str, taint: Taint) -> None: ...

    def global_taint(self, module: str, name: str) -> Taint | None: ...

    def report(self, label: Label, hit: SinkHit) -> None: ...


def admits(label: Label, slot: str, *, canonical: bool = False) -> bool:
    """Whether ``label`` matters in prompt ``slot`` (``param`` labels are decided later)."""
    if slot == "messages" and label.tail:
        return False
    if label.kind == "param":
        return True
    if canonical and (label.kind in ORDER_KINDS or label.kind == "json-keys"):
        return False
    if slot == "body":
        return label.kind in FROZEN_KINDS or label.kind in ("env", "subprocess")
    if label.kind in TOOLS_ONLY_KINDS:
        return slot == "tools"
    if label.kind in SYSTEM_ONLY_KINDS:
        return slot in ("system", "system-pairs")
    return True


def _union(taints: Iterable[Taint]) -> Taint:
    out: set[Label] = set()
    for t in taints:
        out |= t
    return frozenset(out)


def _drop(taint: Taint, kinds: Iterable[str]) -> Taint:
    """``taint`` without labels of ``kinds`` (a ``param`` label remembers them as drops)."""
    if not taint:
        return taint
    kinds = frozenset(kinds)
    return frozenset(
        replace(x, drops=x.drops | kinds) if x.kind == "param" and not kinds <= x.drops else x
        for x in taint if x.kind not in kinds)


#: Keyword arguments that configure a call rather than give it content: an unknown call's
#: result does not carry them (a model name from the environment is not prompt text).
_CONFIG_KEYWORDS = frozenset({"model", "model_name", "model_id", "modelId", "provider",
                              "api_key", "base_url", "timeout", "temperature", "max_tokens",
                              "settings", "model_settings", "config", "client"})
_MESSAGE_WORDS = ("messages", "history", "msgs", "conversation", "turns", "transcript")


def _messagey(node: ast.expr | None) -> bool:
    """A message: a dict display with a ``role`` key, a ``*Message(...)`` call, ``*rest``, or
    a name that says it holds messages (``history``, ``self.messages``)."""
    if isinstance(node, ast.Starred):
        return True
    if isinstance(node, ast.Dict):
        return any(isinstance(k, ast.Constant) and k.value == "role" for k in node.keys)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name.endswith("Message")
    if isinstance(node, ast.List | ast.ListComp | ast.Tuple):
        elts = [node.elt] if isinstance(node, ast.ListComp) else node.elts
        return any(_messagey(e) for e in elts)
    if isinstance(node, ast.Name | ast.Attribute):
        name = (node.id if isinstance(node, ast.Name) else node.attr).lower()
        return any(w in name for w in _MESSAGE_WORDS)
    return False


def _tail(taint: Taint) -> Taint:
    if all(x.tail for x in taint):
        return taint
    return frozenset(x if x.tail else replace(x, tail=True) for x in taint)


def _is_system_message(node: ast.expr) -> bool:
    """A ``{"role": "system" | "developer", ...}`` display or a ``SystemMessage(...)`` call."""
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            if (isinstance(k, ast.Constant) and k.value == "role" and isinstance(v, ast.Constant)
                    and v.value in ("system", "developer")):
                return True
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return name == "SystemMessage"
    return False


def _role_test(test: ast.expr) -> str | None:
    """The name whose role ``test`` compares with ``"system"`` (``m["role"] == "system"``,
    ``m.get("role") == "system"``, ``m.role == "system"``), or ``None``."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq | ast.Is | ast.In)):
        return None
    sides = [test.left, test.comparators[0]]
    if not any(isinstance(s, ast.Constant) and s.value == "system" for s in sides):
        return None
    for side in sides:
        target: ast.expr | None = None
        if ((isinstance(side, ast.Subscript) and _const(side.slice) == "role")
                or (isinstance(side, ast.Attribute) and side.attr == "role")):
            target = side.value
        elif (isinstance(side, ast.Call) and isinstance(side.func, ast.Attribute)
              and side.func.attr == "get" and side.args and _const(side.args[0]) == "role"):
            target = side.func.value
        if isinstance(target, ast.Name):
            return target.id
    return None


def _const(node: ast.expr) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _stable_literal(node: ast.expr) -> bool:
    """A dict/list display whose keys are constants and whose nested dicts are displays too:
    ``json.dumps`` of it writes the keys in source order, every time."""
    if isinstance(node, ast.Dict):
        return all(k is not None and isinstance(k, ast.Constant) for k in node.keys) and all(
            _stable_literal(v) for v in node.values)
    if isinstance(node, ast.List | ast.Tuple):
        return all(_stable_literal(e) for e in node.elts)
    return not isinstance(node, ast.Name | ast.Attribute | ast.Call | ast.Subscript)


def _has_break(body: list[ast.stmt]) -> bool:
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Break):
                return True
    return False


class Walker:
    """Walks one scope's statements, keeping each local name's taint.

    Args:
        project: The whole-project view (calls, fields, globals, findings).
        module: Dotted module name; ``file`` its path as reported.
        aliases: Import aliases in scope (local name -> resolved dotted name).
        info: The function walked, or ``None`` for a module or class body.
        frozen: Clock and random values computed here are computed once (module or class
            body, ``__init__``, a cached function), outside loops.
        env: Initial names (parameters, a closure).
    """

    def __init__(self, project: Project, module: str, file: str, aliases: dict[str, str], *,
                 info: FunctionInfo | None = None, frozen: bool = False,
                 env: Mapping[str, Taint] | None = None) -> None:
        self.project = project
        self.module = module
        self.file = file
        self.aliases = aliases
        self.info = info
        self.cls = info.cls if info is not None else None
        self.frozen = frozen
        self.env: dict[str, Taint] = dict(env or {})
        self.types: dict[str, str] = {}
        self.local_funcs: dict[str, FunctionInfo] = {}
        self.summary = Summary()
        self.return_sites: list[tuple[ast.Return, Taint]] = []
        self._loops = 0
        self._roots: list[str] = []  # loop targets eligible for the hoist pattern
        self.last_tuple: list[Taint] | None = None  # per position, of the last project call

    # -- labels ----------------------------------------------------------------------------

    def label(self, kind: str, what: str, node: ast.AST) -> Taint:
        if kind in FROZEN_KINDS and self.frozen and not self._loops:
            return EMPTY
        return frozenset({Label(kind, what, self.file, getattr(node, "lineno", 0),
                                getattr(node, "col_offset", 0))})

    def step(self, node: ast.AST, note: str) -> Step:
        return Step(self.file, getattr(node, "lineno", 0), getattr(node, "col_offset", 0), note)

    def hit(self, node: ast.expr, sink: Sink | None, slot: str, api: str,
            argument: str) -> SinkHit:
        return SinkHit(self.file, node.lineno, node.col_offset,
                       node.end_lineno or node.lineno, node.end_col_offset or node.col_offset,
                       slot, api, argument, canonical=bool(sink and sink.canonical))

    def sink(self, taint: Taint, hit: SinkHit) -> None:
        """Report every label of ``taint`` that matters in ``hit``'s slot."""
        for lab in taint:
            if not admits(lab, hit.slot, canonical=hit.canonical):
                continue
            if lab.kind == "param":
                self.summary.param_sinks.add((lab, hit))
            else:
                self.project.report(lab, hit)

    # -- statements ------------------------------------------------------------------------

    def stmts(self, body: Iterable[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def _branch(self, bodies: list[list[ast.stmt]], *, keep: bool = False) -> None:
        """Walk each body from the current names; afterwards a name holds the union."""
        start = dict(self.env)
        results = [start] if keep else []
        for body in bodies:
            self.env = dict(start)
            self.stmts(body)
            results.append(self.env)
        merged: dict[str, Taint] = {}
        for env in results:
            for name, taint in env.items():
                merged[name] = merged.get(name, EMPTY) | taint
        self.env = merged

    def loop(self, body: list[ast.stmt]) -> None:
        """Walk a loop body; again when a name from before the loop gained labels in it (a
        value carried to the next iteration)."""
        self._loops += 1
        start = dict(self.env)
        self._branch([body], keep=True)
        if any(name in start and taint != start[name] for name, taint in self.env.items()):
            self._branch([body], keep=True)
        self._loops -= 1

    def stmt(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            self.last_tuple = None
            taint = self.expr(node.value)
            parts = self.last_tuple
            if isinstance(node.value, ast.Tuple) and not any(
                    isinstance(e, ast.Starred) for e in node.value.elts):
                parts = [self.expr(e) for e in node.value.elts]
            for target in node.targets:
                if (parts is not None and isinstance(target, ast.Tuple)
                        and len(target.elts) == len(parts)):
                    for elt, part in zip(target.elts, parts, strict=True):
                        self.bind(elt, part, None)
                else:
                    self.bind(target, taint, node.value)
        elif isinstance(node, ast.AnnAssign):
            if node.value is not None:
                self.bind(node.target, self.expr(node.value), node.value)
        elif isinstance(node, ast.AugAssign):
            taint = self.expr(node.value)
            if _messagey(node.value) or _messagey(node.target):
                taint = _tail(taint)
            self.bind(node.target, self.expr(node.target) | taint, None)
        elif isinstance(node, ast.Expr):
            self.expr(node.value)
        elif isinstance(node, ast.Return):
            if isinstance(node.value, ast.Tuple) and not any(
                    isinstance(e, ast.Starred) for e in node.value.elts):
                parts = [self.expr(e) for e in node.value.elts]
                known = self.summary.tuples.setdefault(len(parts), [EMPTY] * len(parts))
                self.summary.tuples[len(parts)] = [a | b for a, b in zip(known, parts,
                                                                          strict=True)]
            taint = self.expr(node.value) if node.value is not None else EMPTY
            self.summary.returns |= taint
            self.return_sites.append((node, taint))
        elif isinstance(node, ast.If):
            self.expr(node.test)
            name = _role_test(node.test)
            if name is not None and name in self._roots:
                self.env[name] = self.env.get(name, EMPTY) | self.label(
                    "hoisted-system", f"{name} with role system", node.test)
            self._branch([node.body, node.orelse])
        elif isinstance(node, ast.For | ast.AsyncFor):
            self.bind(node.target, self.expr(node.iter), None)
            roots = [] if _has_break(node.body) else [
                n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)]
            self._roots += roots
            self.loop(node.body)
            del self._roots[len(self._roots) - len(roots):]
            self.stmts(node.orelse)
        elif isinstance(node, ast.While):
            self.expr(node.test)
            self.loop(node.body)
            self.stmts(node.orelse)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                taint = self.expr(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, taint, item.context_expr)
            self.stmts(node.body)
        elif isinstance(node, ast.Try | ast.TryStar):
            self.stmts(node.body)
            self._branch([node.orelse, *[h.body for h in node.handlers]], keep=True)
            self.stmts(node.finalbody)
        elif isinstance(node, ast.Match):
            self.expr(node.subject)
            self._branch([c.body for c in node.cases], keep=True)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            self.local_funcs[node.name] = FunctionInfo(
                node, self.module, self.cls, closure=dict(self.env),
                nested_self=self.info.self_name if self.info is not None else None)
            self.env.pop(node.name, None)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            self.aliases.update(self.project_aliases(node))

    def project_aliases(self, node: ast.Import | ast.ImportFrom) -> dict[str, str]:
        out: dict[str, str] = {}
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(
                    ".")[0]
        elif node.level == 0 and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
        return out

    def bind(self, target: ast.expr, taint: Taint, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = taint
            self.types.pop(target.id, None)
            if isinstance(value, ast.Call):
                cls = self.project.class_named(self, self.dotted(value.func))
                if cls is not None:
                    self.types[target.id] = cls
        elif isinstance(target, ast.Tuple | ast.List):
            for elt in target.elts:
                self.bind(elt, taint, None)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, taint, None)
        elif isinstance(target, ast.Attribute):
            owner = self.owner(target.value)
            if owner is not None:
                self.write_field(owner, target.attr, taint)
            elif isinstance(target.value, ast.Name):
                name = target.value.id
                self.env[name] = self.env.get(name, EMPTY) | taint
        elif isinstance(target, ast.Subscript):
            self.grow(target.value, taint)

    def owner(self, node: ast.expr) -> str | None:
        """The project class whose attribute ``node.attr`` is: ``self`` in a method, or a
        name holding an instance of a project class."""
        if isinstance(node, ast.Name):
            if self.cls is not None and self.info is not None and (
                    node.id == self.info.self_name):
                return self.cls
            return self.types.get(node.id)
        return None

    def write_field(self, cls: str, attr: str, taint: Taint) -> None:
        for lab in taint:
            if lab.kind == "param":
                self.summary.param_fields.add((lab, (cls, attr)))
        concrete = frozenset(x for x in taint if x.kind != "param")
        if concrete:
            self.project.add_field(cls, attr, concrete)

    def grow(self, node: ast.expr, taint: Taint) -> None:
        """Add ``taint`` to the container ``node`` (a name or a field)."""
        if isinstance(node, ast.Name):
            self.env[node.id] = self.env.get(node.id, EMPTY) | taint
        elif isinstance(node, ast.Attribute):
            owner = self.owner(node.value)
            if owner is not None:
                self.write_field(owner, node.attr, taint)
            else:
                self.grow(node.value, taint)
        elif isinstance(node, ast.Subscript):
            self.grow(node.value, taint)

    # -- expressions -----------------------------------------------------------------------

    def dotted(self, node: ast.expr) -> str:
        return self.project.dotted(self.module, node, self.aliases)

    def name(self, name: str) -> Taint:
        if name in self.env:
            return self.env[name]
        closure = self.info.closure if self.info is not None else None
        if closure is not None and name in closure:
            return closure[name]
        return self.project.global_taint(self.module, name) or EMPTY

    def exprs(self, nodes: Iterable[ast.expr | None]) -> Taint:
        return _union(self.expr(n) for n in nodes if n is not None)

    def expr(self, node: ast.expr | None) -> Taint:
        if node is None or isinstance(node, ast.Constant):
            return EMPTY
        if isinstance(node, ast.Name):
            return self.name(node.id)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Attribute):
            dotted = self.dotted(node)
            for pattern, (kind, what) in SOURCE_ATTRIBUTES.items():
                if match(dotted, pattern):
                    return self.label(kind, what, node)
            owner = self.owner(node.value)
            if owner is not None:
                return self.project.field_taint(owner, node.attr)
            return self.expr(node.value)
        if isinstance(node, ast.JoinedStr | ast.BoolOp):
            return self.exprs(node.values)
        if isinstance(node, ast.FormattedValue):
            return self.expr(node.value)
        if isinstance(node, ast.BinOp):
            left, right = self.expr(node.left), self.expr(node.right)
            if isinstance(node.op, ast.Add) and (_messagey(node.left) or _messagey(node.right)):
                right = _tail(right)
            return left | right
        if isinstance(node, ast.UnaryOp | ast.Await | ast.Starred):
            return self.expr(node.operand if isinstance(node, ast.UnaryOp) else node.value)
        if isinstance(node, ast.Compare):
            return _drop(self.exprs([node.left, *node.comparators]), {*ORDER_KINDS, "json-keys"})
        if isinstance(node, ast.IfExp):
            return self.exprs([node.body, node.orelse]) | _drop(
                self.expr(node.test), {*ORDER_KINDS, "json-keys"})
        if isinstance(node, ast.Subscript):
            return self.expr(node.value) | _drop(self.expr(node.slice), ORDER_KINDS)
        if isinstance(node, ast.List | ast.Tuple):
            return self.sequence(node.elts)
        if isinstance(node, ast.Set):
            return self.exprs(node.elts) | self.label("unordered", "a set literal", node)
        if isinstance(node, ast.Dict):
            return self.exprs([*node.keys, *node.values])
        if isinstance(node, ast.ListComp | ast.GeneratorExp | ast.SetComp | ast.DictComp):
            return self.comprehension(node)
        if isinstance(node, ast.NamedExpr):
            taint = self.expr(node.value)
            self.bind(node.target, taint, node.value)
            return taint
        if isinstance(node, ast.Lambda):
            return self.expr(node.body)
        if isinstance(node, ast.Slice):
            return self.exprs([node.lower, node.upper, node.step])
        return EMPTY

    def sequence(self, elts: list[ast.expr]) -> Taint:
        """A list or tuple display: elements after the first are tail positions, unless
        they are system messages."""
        parts = []
        for i, elt in enumerate(elts):
            taint = self.expr(elt)
            if ((i > 0 and _messagey(elt)) or isinstance(elt, ast.Starred)) and not (
                    _is_system_message(elt)):
                taint = _tail(taint)
            parts.append(taint)
        return _union(parts)

    def comprehension(self, node: ast.ListComp | ast.GeneratorExp | ast.SetComp
                      | ast.DictComp) -> Taint:
        saved = dict(self.env)
        hoist = EMPTY
        for gen in node.generators:
            self.bind(gen.target, self.expr(gen.iter), None)
            for cond in gen.ifs:
                self.expr(cond)
                name = _role_test(cond)
                if name is not None:
                    hoist |= self.label("hoisted-system", f"{name} with role system", cond)
        if isinstance(node, ast.DictComp):
            taint = self.exprs([node.key, node.value])
        else:
            taint = self.expr(node.elt)
        if isinstance(node, ast.SetComp):
            taint |= self.label("unordered", "a set comprehension", node)
        self.env = saved
        return taint | hoist

    # -- calls -----------------------------------------------------------------------------

    def call(self, node: ast.Call) -> Taint:
        func = node.func
        dotted = self.dotted(func)
        method = func.attr if isinstance(func, ast.Attribute) else ""
        receiver = self.expr(func.value) if isinstance(func, ast.Attribute) else EMPTY
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords}
        every = _union([*args, *kwargs.values()])
        callee = self.local_callee(func) or self.project.resolve(self, node, dotted)
        if callee is None:
            self.sinks(node, dotted, method, args, kwargs)
        else:  # the project's own function: a sink only where the config names it one
            self.sinks(node, dotted, method, args, kwargs, configured=True)
        last = dotted.rpartition(".")[2]
        # effects on the receiver
        if isinstance(func, ast.Attribute):
            if method == "sort":
                self.rebind(func.value, _drop(receiver, ORDER_KINDS))
            elif method in ("append", "extend", "appendleft", "insert"):
                messages = _messagey(func.value) or any(_messagey(a) for a in node.args)
                first = method == "insert" and node.args and _const(node.args[0]) == 0
                self.grow(func.value, _tail(every) if messages and not first else every)
            elif method in ("add", "update"):
                self.grow(func.value, every)
        if match(dotted, "random.shuffle") and node.args:
            self.grow(node.args[0], self.label("random", "random.shuffle()", node))
        # sources
        if match(dotted, "json.dumps") or match(dotted, "orjson.dumps"):
            sort = any(k.arg == "sort_keys" and _const(k.value) is True for k in node.keywords)
            sort = sort or any(k.arg == "option" and "SORT_KEYS" in ast.unparse(k.value)
                               for k in node.keywords)
            if sort:
                return _drop(every, {"json-keys", "io-order"})
            if node.args and not _stable_literal(node.args[0]):
                return every | self.label("json-keys", f"{last}() without sort_keys", node)
            return every
        if callee is None:
            source = self.source(dotted, method, node)
            if source:
                return every | receiver | source
            if last in LLM_LAST and any(match(dotted, p) for p in LLM_CALLS):
                return self.label("model-output", f"{last}() output", node)
        summarizes = any(w in last.lower() for w in SUMMARY_WORDS)
        out = self.label("model-output", f"{last}() output", node) if summarizes else EMPTY
        # sanitizers
        if last in KILL_ALL and isinstance(func, ast.Name):
            return out
        if dotted in ("sorted", "min", "max", "sum", "any", "all", "heapq.nsmallest"):
            return out | _drop(every, ORDER_KINDS)
        if callee is not None:
            return out | self.call_project(node, callee, args, kwargs, receiver)
        content = _union([*args, *(t for k, t in kwargs.items() if k not in _CONFIG_KEYWORDS)])
        return out | content | receiver

    def source(self, dotted: str, method: str, node: ast.Call) -> Taint:
        """The label a call to a source makes, or nothing."""
        if dotted in ("set", "frozenset"):  # the builtins (a local ``set`` is bound)
            return self.label("unordered", f"a {dotted}", node)
        for pattern, kind, what in SOURCE_INDEX.get(dotted.rpartition(".")[2], ()):
            if match(dotted, pattern):
                return self.label(kind, what, node)
        if method in SOURCE_METHODS:
            kind, what = SOURCE_METHODS[method]
            return self.label(kind, what, node)
        return EMPTY

    def rebind(self, node: ast.expr, taint: Taint) -> None:
        if isinstance(node, ast.Name):
            self.env[node.id] = taint

    def local_callee(self, func: ast.expr) -> Callee | None:
        if isinstance(func, ast.Name) and func.id in self.local_funcs:
            return Callee(self.local_funcs[func.id], 0, func.id)
        return None

    def call_project(self, node: ast.Call, callee: Callee, args: list[Taint],
                     kwargs: Mapping[str | None, Taint], receiver: Taint) -> Taint:
        """Apply ``callee``'s summary at this call: substitute the arguments for its
        parameter labels in its return value, sinks and field writes."""
        summary = self.project.summary(callee.info)
        params = callee.info.params
        bound: dict[int, Taint] = {}
        for i, taint in enumerate(args):
            bound[i + callee.offset] = taint
        for key, taint in kwargs.items():
            if key in params:
                bound[params.index(key)] = taint
            elif key is None:
                for i in range(len(params)):
                    bound[i] = bound.get(i, EMPTY) | taint
        step = self.step(node, f"{callee.name}()")

        def via(lab: Label) -> Label:
            return lab if len(lab.via) >= _MAX_VIA else replace(lab, via=(*lab.via, step))

        def substitute(taint: Taint) -> Taint:
            out: set[Label] = set()
            for lab in taint:
                if lab.kind != "param":
                    out.add(via(lab))
                    continue
                for arg in bound.get(lab.index, EMPTY):
                    if arg.kind in lab.drops:
                        continue
                    if arg.kind == "param" and lab.drops:
                        arg = replace(arg, drops=arg.drops | lab.drops)
                    out.add(replace(arg, tail=True) if lab.tail and not arg.tail else arg)
            return frozenset(out)

        for plab, hit in summary.param_sinks:
            self.sink(frozenset(via(x) for x in substitute(frozenset({plab}))), hit)
        for plab, (cls, attr) in summary.param_fields:
            self.write_field(cls, attr, substitute(frozenset({plab})))
        if callee.info.node.name == "__init__":
            return EMPTY
        self.last_tuple = None
        if len(summary.tuples) == 1:
            self.last_tuple = [substitute(t) for t in next(iter(summary.tuples.values()))]
        return substitute(summary.returns)

    def sinks(self, node: ast.Call, dotted: str, method: str, args: list[Taint],
              kwargs: Mapping[str | None, Taint], *, configured: bool = False) -> None:
        """Report the arguments of ``node`` that land in cached prompt slots (``configured``:
        only the sinks of ``[tool.stableprompt.lint] extra-sinks``, for a call of the
        project's own function, which is also analysed as a function)."""
        last = dotted.rpartition(".")[2]
        named = (self.project.configured_sinks_named(last) if configured
                 else self.project.sinks_named(last))
        for sink in named:
            if not match(dotted, sink.pattern):
                continue
            for key, slot in sink.slots.items():
                if key == "0":
                    if not node.args:
                        continue
                    arg_node, taint = node.args[0], args[0]
                else:
                    found = [(k.value, kwargs[k.arg]) for k in node.keywords if k.arg == key]
                    if not found:
                        continue
                    arg_node, taint = found[0]
                if slot == "system-pairs":
                    taint = self.system_pairs(arg_node, taint)
                    slot = "system"
                self.sink(taint, self.hit(arg_node, sink, slot, sink.api,
                                          key if key != "0" else "argument 1"))
            return
        if (method in BUILDER_METHODS and node.args and isinstance(node.func, ast.Attribute)
                and self.is_builder(node.func.value)):
            self.sink(args[0], self.hit(node.args[0], BUILDER_SINK, BUILDER_METHODS[method],
                                        "stableprompt PromptBuilder", f".{method}()"))

    def system_pairs(self, node: ast.expr, taint: Taint) -> Taint:
        """The taint of the system entries of a LangChain ``[("system", text), ...]`` list
        (anything not a visible non-system pair counts)."""
        if not isinstance(node, ast.List | ast.Tuple):
            return taint
        parts = []
        for elt in node.elts:
            if (isinstance(elt, ast.Tuple) and elt.elts and isinstance(elt.elts[0], ast.Constant)
                    and elt.elts[0].value != "system"):
                continue
            parts.append(self.expr(elt))
        return _union(parts)

    def is_builder(self, node: ast.expr) -> bool:
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        if isinstance(node, ast.Call):
            return match(self.dotted(node.func), "stableprompt.PromptBuilder")
        if isinstance(node, ast.Name):
            return self.types.get(node.id) == "stableprompt.PromptBuilder"
        return False
