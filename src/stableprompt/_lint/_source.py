"""Files -> modules -> taint walks -> findings: the source pass of ``stableprompt lint``.

:func:`lint_source` reads every Python file under the given paths, resolves imports between
them (module names follow the package directories, so ``from .prompts import SYSTEM`` finds
the project's own module), and runs :class:`Analysis`: each module body and each function is
walked by :class:`~stableprompt._lint._source_flow.Walker`; a function's walk is its summary,
applied at every call of it in the project. Attributes of ``self`` (and of names holding an
instance of a project class) are one taint per class and attribute, shared by all methods; as
a method may write one that another reads, the whole pass repeats until no attribute or
module global gains a label, at most :data:`MAX_ROUNDS` times (a longer chain of attributes
is followed only that far).
The prompt-structure checks that need no data flow (the summarizer's prefix, the cache TTL)
are in :mod:`stableprompt._lint._source_checks`.
"""

from __future__ import annotations

import ast
import contextlib
import fnmatch
import re
import tokenize
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._exceptions import SourceError
from .._public import public
from ._source_checks import summarizer_findings, ttl_findings
from ._source_flow import EMPTY, Callee, FunctionInfo, Label, SinkHit, Summary, Taint, Walker
from ._source_report import FlowStep, SourceEdit, SourceFinding, SourceLintReport, SourceProblem
from ._source_rules import (
    CACHE_DECORATORS,
    RULE_BY_KIND,
    RULES,
    SINKS,
    SYSTEM_DECORATORS,
    Rule,
    Sink,
    last_name,
    match,
    rule_named,
)

__all__ = ["MAX_ROUNDS", "Analysis", "SourceConfig", "lint_source", "read_config"]

MAX_ROUNDS = 3
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "site-packages"})
_IGNORE = re.compile(r"#\s*stableprompt:\s*ignore(?:\[([^\]]*)\])?")
_SLOTS = frozenset({"system", "tools", "messages", "body"})
_RULES = {r.id: r for r in RULES}
_SLOT_WORDS = {"system": "system prompt", "tools": "tool list", "messages": "first messages",
               "body": "request body"}


@dataclass(frozen=True, slots=True)
class SourceConfig:
    """The ``[tool.stableprompt.lint]`` table of the analysed project's ``pyproject.toml``.

    Attributes:
        ignore: Rule ids or slugs never reported (``["SP203", "cache-ttl-dropped"]``).
        exclude: Glob patterns (``fnmatch``, matched against paths relative to the
            ``pyproject.toml`` directory and against file names) of files not analysed.
        extra_sinks: More prompt sinks: a call name or dotted suffix -> ``{keyword: slot}``,
            slot one of ``system``, ``tools``, ``messages``, ``body``
            (``{"llm.ask" = {system_prompt = "system"}}``).
        root: The directory of the ``pyproject.toml`` read, or ``None``.
    """

    ignore: frozenset[str] = frozenset()
    exclude: tuple[str, ...] = ()
    extra_sinks: tuple[Sink, ...] = ()
    root: Path | None = None


def read_config(paths: Sequence[str | Path]) -> SourceConfig:
    """The config of the nearest ``pyproject.toml`` at or above the first path (or none).

    Raises:
        SourceError: The table is malformed (code ``source-config-invalid``).
    """
    if not paths:
        return SourceConfig()
    try:
        start = Path(paths[0]).resolve()
    except (OSError, RuntimeError):  # a symlink loop: no project root to read a table from
        return SourceConfig()
    for directory in [start, *start.parents] if start.is_dir() else start.parents:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return _parse_config(candidate)
    return SourceConfig()


def _parse_config(path: Path) -> SourceConfig:
    def bad(message: str) -> SourceError:
        return SourceError(f"{path}: [tool.stableprompt.lint] {message}",
                           code="source-config-invalid")

    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise bad(f"cannot be read: {exc}") from exc
    table = document.get("tool", {}).get("stableprompt", {}).get("lint", {})
    if not isinstance(table, dict):
        raise bad("must be a table")
    unknown = sorted(set(table) - {"ignore", "exclude", "extra-sinks"})
    if unknown:
        raise bad(f"unknown key(s) {unknown}; known: ignore, exclude, extra-sinks")
    ignore, exclude = table.get("ignore", []), table.get("exclude", [])
    for key, value in (("ignore", ignore), ("exclude", exclude)):
        if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise bad(f"{key} must be a list of strings")
    rules = set()
    for name in ignore:
        rule = rule_named(name)
        if rule is None:
            raise bad(f"ignore names an unknown rule {name!r}; known: "
                      + ", ".join(r.id for r in RULES))
        rules.add(rule.id)
    sinks = []
    extra = table.get("extra-sinks", {})
    if not isinstance(extra, dict):
        raise bad("extra-sinks must be a table of call name -> {keyword = slot}")
    for call, slots in extra.items():
        if not (isinstance(slots, dict) and slots and all(
                isinstance(v, str) and v in _SLOTS for v in slots.values())):
            raise bad(f"extra-sinks.{call} must map keywords to one of "
                      f"{', '.join(sorted(_SLOTS))}")
        sinks.append(Sink(call, call, dict(slots)))
    return SourceConfig(frozenset(rules), tuple(exclude), tuple(sinks), path.parent)


# -- modules ---------------------------------------------------------------------------------


@dataclass(slots=True)
class ClassInfo:
    """A class of the project: its dotted key, methods and base names (as written)."""

    key: str
    node: ast.ClassDef
    methods: dict[str, FunctionInfo] = field(default_factory=dict)
    bases: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ModuleInfo:
    """One parsed file."""

    name: str
    file: str
    tree: ast.Module
    lines: list[str]
    aliases: dict[str, str] = field(default_factory=dict)
    functions: dict[str, FunctionInfo] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)


def _module_name(path: Path) -> str:
    """Dotted name from the package directories above ``path`` (``__init__.py`` in each)."""
    parts = [] if path.stem == "__init__" else [path.stem]
    directory = path.parent
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        parts.insert(0, directory.name)
        directory = directory.parent
    return ".".join(parts) or path.stem


def _top_level(body: Iterable[ast.stmt]) -> Iterable[ast.stmt]:
    """Statements of a module body, descending into ``if`` / ``try`` / ``with`` blocks."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.With):
            yield from _top_level([*node.body, *getattr(node, "orelse", [])])
        elif isinstance(node, ast.Try | ast.TryStar):
            yield from _top_level([*node.body, *node.orelse, *node.finalbody,
                                   *(s for h in node.handlers for s in h.body)])


def _index(name: str, file: str, tree: ast.Module, source: str) -> ModuleInfo:
    mod = ModuleInfo(name, file, tree, source.splitlines())
    package = name if file.endswith("__init__.py") else name.rpartition(".")[0]
    for node in _top_level(tree.body):
        if isinstance(node, ast.Import):
            for a in node.names:
                mod.aliases[a.asname or a.name.split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, *([node.module] if node.module else [])])
            for a in node.names:
                mod.aliases[a.asname or a.name] = f"{base}.{a.name}" if base else a.name
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            mod.functions[node.name] = FunctionInfo(node, name)
            mod.aliases[node.name] = f"{name}.{node.name}"
        elif isinstance(node, ast.ClassDef):
            cls = ClassInfo(f"{name}.{node.name}", node,
                            bases=[ast.unparse(b) for b in node.bases])
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    cls.methods[item.name] = FunctionInfo(item, name, cls.key)
            mod.classes[node.name] = cls
            mod.aliases[node.name] = cls.key
    return mod


def _via_key(label: Label) -> tuple[int, list[tuple[str, int, int]], str]:
    return len(label.via), [(s.file, s.line, s.col) for s in label.via], label.what


def _once_per_conversation(node: ast.expr) -> bool:
    """Pydantic AI's ``@agent.system_prompt`` without ``dynamic=True``: run when a
    conversation starts and then kept in its history, so a date there is frozen for the
    conversation (``@agent.instructions`` and ``dynamic=True`` prompts run on every request).
    """
    call = node if isinstance(node, ast.Call) else None
    func = call.func if call is not None else node
    if not (isinstance(func, ast.Attribute) and func.attr == "system_prompt"):
        return False
    return call is None or not any(k.arg == "dynamic" and not (
        isinstance(k.value, ast.Constant) and k.value.value is False) for k in call.keywords)


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    return ast.unparse(node)


# -- the analysis ----------------------------------------------------------------------------


class Analysis:
    """The whole-project pass (the :class:`~stableprompt._lint._source_flow.Project` a walk
    asks): modules by name, functions and classes by dotted name, attribute and global
    taints, summaries (memoized per round) and the raw findings."""

    def __init__(self, modules: Sequence[ModuleInfo], extra_sinks: Sequence[Sink] = ()) -> None:
        self.modules = {m.name: m for m in modules}
        self.sink_index: dict[str, tuple[Sink, ...]] = {}
        self.configured_index: dict[str, tuple[Sink, ...]] = {}
        for sink in (*SINKS, *extra_sinks):
            key = last_name(sink.pattern)
            self.sink_index[key] = (*self.sink_index.get(key, ()), sink)
        for sink in extra_sinks:
            key = last_name(sink.pattern)
            self.configured_index[key] = (*self.configured_index.get(key, ()), sink)
        self.reads: set[tuple[str, str]] = set()
        self.functions: dict[str, FunctionInfo] = {}
        self.classes: dict[str, ClassInfo] = {}
        for mod in modules:
            for name, info in mod.functions.items():
                self.functions[f"{mod.name}.{name}"] = info
            for cls in mod.classes.values():
                self.classes[cls.key] = cls
        self.by_method: dict[str, list[FunctionInfo]] = {}
        for cls in self.classes.values():
            for name, info in cls.methods.items():
                self.by_method.setdefault(name, []).append(info)
        self.fields: dict[tuple[str, str], Taint] = {}
        self.globals: dict[str, dict[str, Taint]] = {m.name: {} for m in modules}
        self.memo: dict[int, Summary] = {}
        self.busy: set[int] = set()
        self.raw: dict[tuple[Any, ...], tuple[Label, SinkHit]] = {}
        self.changed = False

    # -- Project protocol ------------------------------------------------------------------

    def sinks_named(self, last: str) -> tuple[Sink, ...]:
        return self.sink_index.get(last, ())

    def configured_sinks_named(self, last: str) -> tuple[Sink, ...]:
        return self.configured_index.get(last, ())

    def dotted(self, module: str, node: ast.expr, aliases: Mapping[str, str]) -> str:
        if isinstance(node, ast.Name):
            return aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(module, node.value, aliases)
            return f"{base}.{node.attr}" if base else node.attr
        if isinstance(node, ast.Call):
            return self.dotted(module, node.func, aliases) + "()"
        if isinstance(node, ast.Subscript):
            return self.dotted(module, node.value, aliases) + "[]"
        return ""

    def method(self, cls_key: str, name: str, depth: int = 0) -> FunctionInfo | None:
        cls = self.classes.get(cls_key)
        if cls is None or depth > 5:
            return None
        if name in cls.methods:
            return cls.methods[name]
        module = self.modules.get(cls_key.rpartition(".")[0])
        for base in cls.bases:
            key = module.aliases.get(base, base) if module is not None else base
            found = self.method(key, name, depth + 1)
            if found is not None:
                return found
        return None

    def resolve(self, walker: Walker, node: ast.Call, dotted: str) -> Callee | None:
        func = node.func
        if isinstance(func, ast.Attribute):
            owner = walker.owner(func.value)
            if owner is not None:
                info = self.method(owner, func.attr)
                return None if info is None else Callee(info, 1 if info.bound else 0, func.attr)
            # an object of unknown type: the project's one method of that name, if only one
            # class defines it (not for a call on an imported module or class)
            root = func.value
            while isinstance(root, ast.Attribute | ast.Call | ast.Subscript):
                root = root.func if isinstance(root, ast.Call) else root.value
            candidates = self.by_method.get(func.attr, ())
            if (len(candidates) == 1 and not func.attr.startswith("__") and candidates[0].bound
                    and not (isinstance(root, ast.Name) and root.id in walker.aliases)):
                return Callee(candidates[0], 1, func.attr)
        if dotted in self.functions:
            return Callee(self.functions[dotted], 0, dotted.rpartition(".")[2])
        if dotted in self.classes:
            init = self.method(dotted, "__init__")
            return None if init is None else Callee(init, 1, dotted.rpartition(".")[2])
        return None

    def class_named(self, walker: Walker, dotted: str) -> str | None:
        if dotted in self.classes:
            return dotted
        if match(dotted, "stableprompt.PromptBuilder"):
            return "stableprompt.PromptBuilder"
        return None

    def summary(self, info: FunctionInfo) -> Summary:
        key = id(info.node)
        if key in self.memo:
            return self.memo[key]
        if key in self.busy:  # recursion: the summary so far is empty
            return Summary()
        self.busy.add(key)
        mod = self.modules[info.module]
        decorators = [_decorator_name(d) for d in info.node.decorator_list]
        frozen = info.node.name == "__init__" or any(
            mod.aliases.get(d, d) in CACHE_DECORATORS or d in CACHE_DECORATORS
            for d in decorators) or any(_once_per_conversation(d)
                                        for d in info.node.decorator_list)
        params = info.params
        env = {name: frozenset({Label("param", name, mod.file, info.node.lineno,
                                      info.node.col_offset, index=i)})
               for i, name in enumerate(params) if not (i == 0 and info.bound)}
        walker = Walker(self, info.module, mod.file, dict(mod.aliases), info=info,
                        frozen=frozen, env=env)
        walker.stmts(info.node.body)
        if any("." in d and d.rpartition(".")[2] in SYSTEM_DECORATORS for d in decorators):
            for ret, taint in walker.return_sites:
                if ret.value is not None:
                    walker.sink(taint, walker.hit(ret.value, None, "system",
                                                  f"@{decorators[0]}", "return"))
        self.busy.discard(key)
        self.memo[key] = walker.summary
        for local in walker.local_funcs.values():
            self.summary(local)
        return walker.summary

    def field_taint(self, cls: str, attr: str) -> Taint:
        self.reads.add((cls, attr))
        found = self.fields.get((cls, attr))
        if found is not None:
            return found
        for base in self.classes[cls].bases if cls in self.classes else ():
            module = self.modules.get(cls.rpartition(".")[0])
            key = module.aliases.get(base, base) if module is not None else base
            if key in self.classes and key != cls:
                return self.field_taint(key, attr)
        return EMPTY

    def add_field(self, cls: str, attr: str, taint: Taint) -> None:
        old = self.fields.get((cls, attr), EMPTY)
        if not taint <= old:
            self.fields[(cls, attr)] = old | taint
            # another round only if a walk already read the old value
            self.changed = self.changed or (cls, attr) in self.reads

    def global_taint(self, module: str, name: str) -> Taint | None:
        found = self.globals.get(module, {}).get(name)
        if found is not None:
            return found
        target = self.modules[module].aliases.get(name) if module in self.modules else None
        if target is not None and "." in target:
            other, _, attr = target.rpartition(".")
            if other in self.globals and other != module:
                return self.globals[other].get(attr)
        return None

    def report(self, label: Label, hit: SinkHit) -> None:
        rule = RULE_BY_KIND[label.kind]
        key = (rule, hit.file, hit.line, hit.col, label.file, label.line, label.col)
        known = self.raw.get(key)
        # several paths from one source to one sink: keep the shortest, then the first in
        # file order, so the flow shown does not depend on set iteration order
        if known is None or _via_key(label) < _via_key(known[0]):
            self.raw[key] = (label, hit)

    # -- rounds ----------------------------------------------------------------------------

    def run(self) -> None:
        """Walk every module body and function until attributes and globals are stable."""
        for _ in range(MAX_ROUNDS):
            self.changed = False
            self.memo.clear()
            self.raw.clear()
            self.reads.clear()
            for mod in self.modules.values():
                self.walk_module(mod)
            for mod in self.modules.values():
                for info in mod.functions.values():
                    self.summary(info)
                for cls in mod.classes.values():
                    for info in cls.methods.values():
                        self.summary(info)
            if not self.changed:
                return

    def walk_module(self, mod: ModuleInfo) -> None:
        walker = Walker(self, mod.name, mod.file, dict(mod.aliases), frozen=True)
        body = [s for s in mod.tree.body
                if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
        walker.stmts(body)
        self.update_globals(mod.name, walker.env)
        for cls in mod.classes.values():
            inner = Walker(self, mod.name, mod.file, dict(mod.aliases), frozen=True)
            inner.stmts([s for s in cls.node.body
                         if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)])
            for name, taint in inner.env.items():
                if taint:
                    self.add_field(cls.key, name, taint)

    def update_globals(self, module: str, env: Mapping[str, Taint]) -> None:
        table = self.globals[module]
        for name, taint in env.items():
            if taint and not taint <= table.get(name, EMPTY):
                table[name] = table.get(name, EMPTY) | taint
                self.changed = True


# -- from raw flows to findings --------------------------------------------------------------


def _edit(rule: Rule, label: Label, hit: SinkHit, modules: Mapping[str, ModuleInfo],
          ) -> SourceEdit | None:
    """The mechanical edit for a flow, where there is one."""
    mod = modules.get(hit.file)
    if mod is None:
        return None
    if rule.id in ("SP201", "SP202") and hit.slot == "tools" and hit.line == hit.end_line:
        text = mod.lines[hit.line - 1].encode()[hit.col:hit.end_col].decode(errors="replace")
        # A list of dicts has no order of its own (sorted() would raise TypeError): by name.
        key = ", key=lambda t: t.name" if rule.id == "SP202" else (
            ", key=lambda t: t['name']")
        return SourceEdit(hit.file, hit.line, hit.col + 1, hit.end_line, hit.end_col + 1,
                          f"sorted({text}{key})", "sort the tools")
    if rule.id == "SP203":
        src = modules.get(label.file)
        call = _node_at(src.tree, label.line, label.col) if src is not None else None
        if call is not None and call.end_lineno is not None and call.end_col_offset:
            line, col = call.end_lineno, call.end_col_offset - 1  # the closing parenthesis
            return SourceEdit(label.file, line, col + 1, line, col + 1, ", sort_keys=True",
                              "serialize with sorted keys")
    return None


def _node_at(tree: ast.Module, line: int, col: int) -> ast.Call | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno == line and node.col_offset == col:
            return node
    return None


def _finding(label: Label, hit: SinkHit, modules: Mapping[str, ModuleInfo]) -> SourceFinding:
    rule = _RULES[RULE_BY_KIND[label.kind]]
    where = _SLOT_WORDS.get(hit.slot, hit.slot)
    message = (f"{label.what} (line {label.line}) reaches the {where} of {hit.api} "
               f"({hit.argument})")
    flow = (FlowStep(label.file, label.line, label.col + 1, f"source: {label.what}"),
            *(FlowStep(s.file, s.line, s.col + 1, f"via {s.note}") for s in label.via),
            FlowStep(hit.file, hit.line, hit.col + 1, f"sink: {hit.api} {hit.argument}"))
    return SourceFinding(rule.id, rule.name, rule.cause, rule.severity, hit.file, hit.line,
                         hit.col + 1, hit.end_line, hit.end_col + 1, message, flow, rule.fix,
                         _edit(rule, label, hit, modules))


def _in_characters(finding: SourceFinding, modules: Mapping[str, ModuleInfo]) -> SourceFinding:
    """``finding`` with columns counted in characters, not the UTF-8 bytes ``ast`` counts
    (the same on ASCII lines; SARIF's ``columnKind`` is ``unicodeCodePoints``)."""

    def col(file: str, line: int, col: int) -> int:
        mod = modules.get(file)
        if mod is None or not 0 < line <= len(mod.lines):
            return col
        text = mod.lines[line - 1]
        if text.isascii():
            return col
        return len(text.encode()[:col - 1].decode(errors="ignore")) + 1

    f = finding
    flow = tuple(replace(s, col=col(s.file, s.line, s.col)) for s in f.flow)
    edit = None if f.edit is None else replace(
        f.edit, col=col(f.edit.file, f.edit.line, f.edit.col),
        end_col=col(f.edit.file, f.edit.end_line, f.edit.end_col))
    return replace(f, col=col(f.file, f.line, f.col), end_col=col(f.file, f.end_line, f.end_col),
                   flow=flow, edit=edit)


def _suppressions(mod: ModuleInfo) -> dict[int, frozenset[str] | None]:
    """Line -> rule ids ignored there (``None``: every rule)."""
    out: dict[int, frozenset[str] | None] = {}
    for i, text in enumerate(mod.lines, start=1):
        if "stableprompt" not in text:
            continue
        found = _IGNORE.search(text)
        if found is None:
            continue
        if found.group(1) is None:
            out[i] = None
            continue
        ids = {rule.id for name in found.group(1).split(",")
               if (rule := rule_named(name)) is not None}
        out[i] = frozenset(ids)
    return out


def _suppressed(finding: SourceFinding, tables: Mapping[str, dict[int, frozenset[str] | None]],
                ) -> bool:
    places = [(finding.file, finding.line), (finding.file, finding.end_line),
              *((s.file, s.line) for s in finding.flow)]
    for file, line in places:
        table = tables.get(file)
        if table is None or line not in table:
            continue
        rules = table[line]
        if rules is None or finding.rule in rules:
            return True
    return False


# -- entry -----------------------------------------------------------------------------------


def _files(paths: Sequence[str | Path], config: SourceConfig) -> list[tuple[str, Path]]:
    """``(display path, path)`` of every Python file under ``paths``, sorted per argument.

    Raises:
        SourceError: A path does not exist (code ``source-path-missing``).
    """
    out: list[tuple[str, Path]] = []
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise SourceError(f"no such file or directory: {given}", code="source-path-missing")
        if path.is_file():
            candidates = [(str(given), path)]
        else:
            candidates = []
            for found in sorted(path.rglob("*.py")):
                rel = found.relative_to(path)
                if any(p.startswith(".") or p in _SKIP_DIRS for p in rel.parts[:-1]):
                    continue
                candidates.append((str(Path(given) / rel), found))
        for shown, found in candidates:
            try:
                key = found.resolve()
            except (OSError, RuntimeError):  # a symlink loop: not a file to analyse
                continue
            if key in seen or _excluded(found, config):
                continue
            seen.add(key)
            out.append((shown, found))
    return out


def _excluded(path: Path, config: SourceConfig) -> bool:
    if not config.exclude:
        return False
    names = [path.name, path.as_posix()]
    if config.root is not None:
        with contextlib.suppress(ValueError):
            names.append(path.resolve().relative_to(config.root).as_posix())
    return any(fnmatch.fnmatch(n, pattern) for n in names for pattern in config.exclude)


def lint_source(paths: Sequence[str | Path], *, config: SourceConfig | None = None,
                ) -> SourceLintReport:
    """Find cache-killers in Python harness source: values that differ per call, process or
    machine flowing into cached prompt slots, and prompt-structure mistakes.

    Args:
        paths: Files and directories (searched recursively for ``*.py``; hidden directories,
            ``__pycache__`` and ``site-packages`` skipped).
        config: Rules to ignore, files to exclude, extra sinks; default: the
            ``[tool.stableprompt.lint]`` table of the nearest ``pyproject.toml`` at or above
            the first path (:func:`read_config`).

    Returns:
        SourceLintReport: findings after suppressions (``# stableprompt: ignore[SP101]`` on
        the sink's or the source's line; ``# stableprompt: ignore`` for every rule), ordered
        by file, line, column and rule. Deterministic: the same tree gives the same report.

    Raises:
        SourceError: A path does not exist (code ``source-path-missing``), a file named
            directly is not valid Python (``source-syntax``), or the config table is
            malformed (``source-config-invalid``). A file found in a directory that does not
            parse is listed in ``problems`` instead.
    """
    if not paths:
        raise SourceError("no paths to lint", code="source-path-missing")
    config = read_config(paths) if config is None else config
    direct = {str(p) for p in paths if Path(p).is_file()}
    modules: list[ModuleInfo] = []
    problems: list[SourceProblem] = []
    names: set[str] = set()
    lines = 0
    for shown, path in _files(paths, config):
        try:
            source = _read_source(path)
            tree = ast.parse(source, filename=shown)
        except (SyntaxError, ValueError, OSError, UnicodeDecodeError, RecursionError,
                MemoryError) as exc:  # RecursionError: an expression nested beyond the parser
            line = getattr(exc, "lineno", None) or 0
            message = getattr(exc, "msg", None) or str(exc)
            if shown in direct:
                raise SourceError(f"{shown}:{line}: not valid Python: {message}",
                                  code="source-syntax") from exc
            problems.append(SourceProblem(shown, line, f"not valid Python: {message}"))
            continue
        if _depth(tree) > MAX_AST_DEPTH:  # the recursive walk would overflow: say so instead
            message = (f"expressions nested deeper than {MAX_AST_DEPTH} levels (a generated "
                       "file?): not analysed")
            if shown in direct:
                raise SourceError(f"{shown}:0: {message}", code="source-syntax")
            problems.append(SourceProblem(shown, 0, message))
            continue
        lines += source.count("\n") + (not source.endswith("\n") and bool(source))
        name = _module_name(path)
        while name in names:  # two roots with the same module name: keep both apart
            name = f"{name}~"
        names.add(name)
        modules.append(_index(name, shown, tree, source))
    analysis = Analysis(modules, config.extra_sinks)
    analysis.run()
    by_file = {m.file: m for m in modules}
    found = [_finding(label, hit, by_file) for label, hit in analysis.raw.values()]
    found += ttl_findings([(m.file, m.tree, m.lines) for m in modules])
    found += summarizer_findings([(m.file, m.tree, m.aliases) for m in modules])
    found = [_in_characters(f, by_file) for f in found]
    tables = {m.file: _suppressions(m) for m in modules}
    kept = [f for f in found if f.rule not in config.ignore and not _suppressed(f, tables)]
    kept.sort(key=lambda f: (f.file, f.line, f.col, f.rule, f.flow[0].line, f.flow[0].col))
    return SourceLintReport(tuple(str(p) for p in paths), len(modules), lines, tuple(kept),
                            len(found) - len(kept), tuple(problems))


public(lint_source)


def _read_source(path: Path) -> str:
    """A Python file's text, decoded as Python decodes it (a PEP 263 coding line or a BOM,
    else UTF-8: ``tokenize.open``).

    Raises:
        OSError: unreadable; SyntaxError / UnicodeDecodeError: not decodable as declared.
    """
    with tokenize.open(path) as handle:
        return handle.read()


MAX_AST_DEPTH = 400
"""Deepest syntax tree the analysis walks (its walk is recursive, each level a few frames):
a module nested deeper (a generated 1,000-term ``+`` chain, a huge literal) is listed as not
analysed rather than overflowing the interpreter's stack for the whole run."""


def _depth(tree: ast.AST) -> int:
    """The depth of ``tree`` (iterative: any depth is measured without recursion)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > MAX_AST_DEPTH:
                return deepest
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest
