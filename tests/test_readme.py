"""The README's code runs as written (issue 14 item 8)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stableprompt import CompactionCostWarning, Ledger
from stableprompt._cli import main

README = Path(__file__).resolve().parent.parent / "README.md"


def _python_block(heading: str) -> str:
    """The first ```python block under the README section ``heading``."""
    text = README.read_text(encoding="utf-8")
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, f"no python block under {heading!r}"
    return match.group(1)


def test_readme_tool_loop_runs_and_reports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The tool-calling loop block runs unchanged against the emulator with the official
    SDK, leaves a ledger of one verdict per call, and ``stableprompt report`` reads it."""
    monkeypatch.chdir(tmp_path)
    code = _python_block("A complete tool-calling loop")
    namespace: dict[str, object] = {"__name__": "readme"}
    with pytest.warns(CompactionCostWarning) as warned:  # a two-question compaction: the
        exec(compile(code, str(README), "exec"), namespace)  # README says so, as written
    assert len(warned) == 1 and warned[0].message.advice.provider == "anthropic"  # type: ignore[union-attr]
    assert capsys.readouterr().out.strip() == "Pack sunglasses."
    with Ledger(tmp_path / "calls.db") as ledger:
        verdicts = [r.verdict for r in ledger.records()]
    assert verdicts == ["cold", "hit", "hit", "hit", "hit", "hit"]
    assert main(["report", "calls.db"]) == 0
    out = capsys.readouterr().out
    assert "hit rate" in out and "6 records" in out


def test_readme_keeps_the_newcomer_commands_and_the_install_line() -> None:
    """The two newcomer commands stay at the top; the install line says the package is not
    on PyPI and how to install it."""
    text = README.read_text(encoding="utf-8")
    top = text.split("\n## Quickstart\n", 1)[0]
    assert ".venv/bin/stableprompt demo" in top and ".venv/bin/pytest" in top
    assert "not on PyPI" in top and "pip install /path/to/stableprompt" in top


def test_readme_mid_session_block_runs() -> None:
    """The mid-session changes block runs as written: the beta header on the Anthropic
    request, the tool removal and the tail in one system message, OpenAI explicit caching."""
    code = _python_block("Changing instructions and tools mid-session")
    namespace: dict[str, object] = {"__name__": "readme"}
    with pytest.warns(UserWarning):  # the example's prefix is below the model's minimum
        exec(compile(code, str(README), "exec"), namespace)  # our own README, as written
    anthropic, chat = namespace["anthropic"], namespace["chat"]
    assert anthropic.headers == {  # type: ignore[attr-defined]
        "anthropic-beta": "mid-conversation-tool-changes-2026-07-01"}
    last = anthropic.body["messages"][-1]  # type: ignore[attr-defined]
    assert last["role"] == "system"
    assert [m["role"] for m in anthropic.body["messages"]] == [  # type: ignore[attr-defined]
        "user", "system"]
    assert [b["type"] for b in last["content"]] == ["tool_removal", "text", "text"]
    assert chat.body["prompt_cache_options"] == {"ttl": "30m"}  # type: ignore[attr-defined]
