"""The lazy public door: one name -> module table, its TYPE_CHECKING mirror, and what
``stableprompt lint`` loads."""

from __future__ import annotations

import ast
import subprocess
import sys
import types
from pathlib import Path

import pytest

import stableprompt

ROOT = Path(stableprompt.__file__).parent
CLEAN = Path(__file__).parent / "fixtures" / "lint" / "clean.jsonl"
SUBMODULES = {"demo", "emulator", "providers", "testing"}


def _type_checking_imports() -> dict[str, str]:
    """Public name -> module (relative, without the leading dot) imported under TYPE_CHECKING."""
    tree = ast.parse((ROOT / "__init__.py").read_text(encoding="utf-8"))
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and "TYPE_CHECKING" in ast.unparse(node.test))
    found: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names:
            found[alias.asname or alias.name] = node.module or alias.name
    return found


def test_table_and_type_checking_imports_agree() -> None:
    """The lazy table and the TYPE_CHECKING block name the same modules for the same names,
    and together they are exactly ``__all__`` (plus the public sub-namespaces)."""
    table = stableprompt._EXPORTS
    imports = _type_checking_imports()
    assert {n: m for n, m in imports.items() if n not in SUBMODULES} == table
    assert {n for n, m in imports.items() if n == m} == SUBMODULES
    assert set(table) | {"__version__"} == set(stableprompt.__all__)


def test_all_is_the_same_94_sorted_names_and_dir_lists_them() -> None:
    """``__all__`` keeps its 94 sorted names (77 + MethodNameError, OTelSink, Summary,
    summarize, BreakpointWarning, IncompleteResponseWarning, ArgumentNameError, GeminiCache,
    record_bedrock, ModelFeatures, model_features, the source lint's lint_source,
    SourceFinding, SourceLintReport, SourceError, and the compaction advice's
    CompactionAdvice, CompactionCostWarning, ..., and ``divergences``: every divergence of
    a pair); ``dir()`` lists each, and the sub-namespaces."""
    assert len(stableprompt.__all__) == 105
    assert stableprompt.__all__ == sorted(stableprompt.__all__)
    assert set(stableprompt.__all__) | SUBMODULES <= set(dir(stableprompt))


@pytest.mark.parametrize("name", sorted(SUBMODULES))
def test_sub_namespaces_are_attributes(name: str) -> None:
    """``stableprompt.providers`` (and emulator, demo, testing) resolve as modules."""
    value = getattr(stableprompt, name)
    assert isinstance(value, types.ModuleType) and value.__name__ == f"stableprompt.{name}"


def test_unknown_attribute_raises_attribute_error() -> None:
    """A name the door does not know is an AttributeError (so hasattr works)."""
    with pytest.raises(AttributeError, match="no_such_name"):
        stableprompt.no_such_name  # noqa: B018
    assert not hasattr(stableprompt, "no_such_name")


def test_every_public_name_resolves_to_its_module() -> None:
    """Each table entry resolves to the object its module defines."""
    for name, module in stableprompt._EXPORTS.items():
        defined = sys.modules.get(f"stableprompt.{module}") or __import__(
            f"stableprompt.{module}", fromlist=[name])
        assert getattr(stableprompt, name) is getattr(defined, name)


_COUNT = """
import contextlib, io, sys
from stableprompt._cli import main
with contextlib.redirect_stdout(io.StringIO()):
    status = main(["lint", "--json", sys.argv[1]])
print(status, sum(1 for m in sys.modules if m == "stableprompt" or m.startswith("stableprompt.")))
"""


def test_lint_loads_at_most_half_of_the_modules() -> None:
    """``stableprompt lint`` (in a fresh interpreter) loads at most half of the package's
    ``.py`` modules."""
    total = sum(1 for _ in ROOT.rglob("*.py"))
    out = subprocess.run([sys.executable, "-c", _COUNT, str(CLEAN)], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[0] == "0"
    assert int(out[1]) * 2 <= total, f"lint loaded {out[1]} of {total} modules"


def test_at_most_20_top_level_modules() -> None:
    """``src/stableprompt`` holds at most 20 modules at its top level."""
    assert len(list(ROOT.glob("*.py"))) <= 20
