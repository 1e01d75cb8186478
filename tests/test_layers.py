"""The layer rule of ``../shared/ARCHITECTURE.md`` §4.2, guarded like ``__all__``: every import
inside ``src/stableprompt`` (top-level, function-local and ``TYPE_CHECKING`` alike) goes to the
same or a lower layer, and no module imports itself back through a cycle."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import stableprompt

SRC = Path(stableprompt.__file__).parent

#: Module name prefix (relative to ``stableprompt``) -> layer; the longest prefix wins.
LAYERS: dict[str, int] = {
    "_exceptions": 0, "_canonical": 0, "_segment": 0, "_usage": 0, "_policy": 0,
    "_tokens": 0, "_volatility": 0, "_volatility_patterns": 0, "_sse": 0, "_redact": 0,
    "_subcommand": 0, "_public": 0, "_version": 0, "_cache": 0, "_frozen": 0,
    "_economics": 0,
    "_wire": 1, "providers": 1,
    "_diff": 2, "_prompt": 2, "_ledger": 2,
    "_recording": 3, "_accounting": 3,
    "_client": 4,
    "_report": 5, "_lint": 5, "testing": 5, "emulator": 5, "_engine": 5,
    "_proxy": 5,
    "demo": 6,
    "_cli": 7,
    "": 8, "__main__": 8,  # the door
}
#: The emulator is independent of the SDK on purpose: core modules only (and its subcommand).
EMULATOR_MAY_IMPORT = ("_exceptions", "_canonical", "_policy", "_redact", "_subcommand",
                       "emulator")
#: The real-engine helper is an independent tool too: L5 by place, L0 only by choice.
ENGINE_MAY_IMPORT = ("_exceptions", "_cache", "_canonical", "_redact", "_subcommand",
                     "_engine")


#: Upward imports allowed by name, each with why; each stands inside a function.
ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    ("_economics._cache_policy", "_accounting._what_if"):
        "CachePolicy.from_ledger replays a ledger: the what-if is accounting (layer 3), the "
        "policy a value every layer reads (layer 0); imported when called",
}


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(name: str, source: str, *, is_package: bool = False) -> set[str]:
    """Every stableprompt module that module ``name`` (with ``source``) imports, relative
    imports resolved, wherever the import statement stands."""
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".") if package else []
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
                if not module.startswith("stableprompt"):
                    continue
                module = module.removeprefix("stableprompt").removeprefix(".")
            for alias in node.names:
                sub = f"{module}.{alias.name}" if module else alias.name
                targets.append(sub if sub in MODULES else module)
        else:
            continue
        for target in targets:
            target = target.removeprefix("stableprompt").removeprefix(".")
            if target in MODULES and target != name:
                found.add(target)
    return found


GRAPH = {name: _imports(name, path.read_text(encoding="utf-8"),
                         is_package=path.name == "__init__.py")
         for name, path in MODULES.items()}


def layer_of(name: str) -> int:
    """The layer of a module: its longest matching prefix in :data:`LAYERS`."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in LAYERS:
            return LAYERS[prefix]
    return LAYERS[""]


def test_every_module_has_a_layer() -> None:
    """Each module maps to a layer by a known prefix (a new top-level module must be placed)."""
    unplaced = sorted(n for n in MODULES if n and n.split(".")[0] not in LAYERS)
    assert unplaced == []


def test_imports_go_to_the_same_or_a_lower_layer() -> None:
    """No module imports from a higher layer."""
    upward = sorted(
        f"{name} (L{layer_of(name)}) -> {target} (L{layer_of(target)})"
        for name, targets in GRAPH.items() for target in targets
        if layer_of(target) > layer_of(name) and (name, target) not in ALLOWED_UPWARD
    )
    assert upward == []


def test_the_allowed_upward_imports_are_function_local() -> None:
    """Each allowed upward import exists, and outside ``TYPE_CHECKING`` it stands only inside
    a function, so importing the lower module never imports the higher one."""
    for (name, target) in ALLOWED_UPWARD:
        assert target in GRAPH[name]
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                assert target.rpartition(".")[2] not in ast.dump(node), (name, target)


def test_recording_a_call_never_loads_the_accounting() -> None:
    """Importing the recorder (what every recorded call runs) loads neither the accounting
    nor genai-prices: ``Recorder.summary()`` imports them when called."""
    code = ("import sys, stableprompt._recording._recorder, stableprompt._recording._transport;"
            "print(sorted(m for m in sys.modules if m.startswith(('stableprompt._accounting', "
            "'stableprompt._report', 'genai_prices'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"



def test_emulator_depends_only_on_core() -> None:
    """The emulator imports only core modules, so it stays an independent reading of the docs."""
    outside = sorted(
        f"{name} -> {target}" for name, targets in GRAPH.items() if name.startswith("emulator")
        for target in targets if not target.startswith(EMULATOR_MAY_IMPORT)
    )
    assert outside == []


def test_engine_depends_only_on_core() -> None:
    """The real-engine helper (``_engine``) imports only L0 modules and itself."""
    outside = sorted(
        f"{name} -> {target}" for name, targets in GRAPH.items() if name.startswith("_engine")
        for target in targets if not target.startswith(ENGINE_MAY_IMPORT)
        or layer_of(target) not in (0, layer_of("_engine"))
    )
    assert outside == []
    assert {"_engine._build", "_engine._server", "_engine._command"} <= set(GRAPH)


def test_no_import_cycles() -> None:
    """No two modules import each other, directly or through a cycle (Tarjan's SCCs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        # An allowed upward import is function-local (checked above): it runs after both
        # modules are loaded, so it closes no import-time cycle.
        for nxt in sorted(t for t in GRAPH[node] if (node, t) not in ALLOWED_UPWARD):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert cycles == []


def test_the_walker_sees_every_kind_of_import() -> None:
    """Top-level, TYPE_CHECKING, function-local, absolute and package-relative imports all
    count."""
    source = """
from typing import TYPE_CHECKING
from .._canonical import loads
import stableprompt._policy
if TYPE_CHECKING:
    from .._prompt._builder import PinnedHead
def f():
    from stableprompt._recording import _recorder
    from . import _formats
"""
    assert _imports("_wire._parts", source) == {
        "_canonical", "_policy", "_prompt._builder", "_recording._recorder", "_wire._formats"}
    assert "_wire._formats" in GRAPH["_wire._request"]
