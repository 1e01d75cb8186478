"""The CLI dispatcher loads only the subcommand that runs; commands import the kit, not _cli."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import stableprompt
from stableprompt._cli import SUBCOMMANDS

ROOT = Path(stableprompt.__file__).parent
CLEAN = Path(__file__).parent / "fixtures" / "lint" / "clean.jsonl"
_SCRIPT = """
import io, contextlib, sys
from stableprompt._cli import main
with contextlib.redirect_stdout(io.StringIO()):
    status = main(sys.argv[1:])
print(status, " ".join(sorted(m for m in sys.modules if m.startswith("stableprompt"))))
"""


def _loaded(*argv: str) -> tuple[int, set[str]]:
    out = subprocess.run([sys.executable, "-c", _SCRIPT, *argv], capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[0]), set(out[1:])


def test_lint_imports_only_its_own_command() -> None:
    """``stableprompt lint`` imports the lint command and no other subcommand module."""
    status, loaded = _loaded("lint", "--json", str(CLEAN))
    assert status == 0
    modules = {spec.partition(":")[0] for spec in SUBCOMMANDS.values()}
    assert loaded & modules == {"stableprompt._lint._command"}


def test_help_loads_every_command() -> None:
    """``stableprompt --help`` lists (so imports) every subcommand."""
    _, loaded = _loaded("--help")
    assert {spec.partition(":")[0] for spec in SUBCOMMANDS.values()} <= loaded


def test_feature_commands_never_import_cli() -> None:
    """Every module named in SUBCOMMANDS imports the kit (_subcommand), never _cli."""
    for spec in SUBCOMMANDS.values():
        module = spec.partition(":")[0]
        path = ROOT.joinpath(*module.split(".")[1:]).with_suffix(".py")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module}
        assert not any(name.endswith("_cli") for name in imported), module
        assert any(name.endswith("_subcommand") for name in imported), module
