"""Tests for ``stableprompt lint --source``: the corpus, flows, fixes, suppressions, config,
SARIF and the command line.

The corpus (``tests/fixtures/source_lint/``) holds harness excerpts; a ``# expect: RULE ...``
comment on a line lists the findings expected there (a rule once per expected flow). The
corpus test demands every expected finding (100% recall) and nothing else (0 false
positives). The SARIF schema in ``tests/fixtures/sarif/`` is the OASIS 2.1.0 schema (see the
README there for its source).
"""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest
from jsonschema import Draft4Validator  # type: ignore[import-untyped]

import stableprompt
from stableprompt._cli import main
from stableprompt._lint._findings import CAUSE_FIXES
from stableprompt._lint._sarif import to_sarif
from stableprompt._lint._source import SourceConfig, lint_source, read_config
from stableprompt._lint._source_rules import RULES, rule_named

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "source_lint"
UNITS = sorted(p for p in CORPUS.iterdir() if p.suffix == ".py" or (
    p.is_dir() and (p / "__init__.py").is_file()))
_EXPECT = re.compile(r"#\s*expect:\s*(.*)$")


def _expected(unit: Path) -> Counter[tuple[str, str, int]]:
    files = [unit] if unit.is_file() else sorted(unit.glob("*.py"))
    out: Counter[tuple[str, str, int]] = Counter()
    for file in files:
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
            found = _EXPECT.search(line)
            if found:
                for rule in found.group(1).split():
                    out[(str(file), rule, number)] += 1
    return out


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# -- the corpus ------------------------------------------------------------------------------


def test_corpus_is_big_enough_and_covers_every_rule() -> None:
    """The corpus has at least 25 snippets, positives and negatives, and expects every rule."""
    expected = Counter[tuple[str, str, int]]()
    for unit in UNITS:
        expected += _expected(unit)
    negatives = [u for u in UNITS if not _expected(u)]
    assert len(UNITS) >= 25
    assert len(negatives) >= 10
    assert {rule for _, rule, _ in expected} == {r.id for r in RULES}


@pytest.mark.parametrize("unit", UNITS, ids=[u.name for u in UNITS])
def test_corpus_snippet_findings_are_exactly_the_expected(unit: Path) -> None:
    """Each snippet yields exactly its expected findings: no miss, no false positive."""
    report = lint_source([str(unit)], config=SourceConfig())
    actual = Counter((f.file, f.rule, f.line) for f in report.findings)
    assert report.problems == ()
    assert actual == _expected(unit)


def test_corpus_recall_and_false_positives_in_total() -> None:
    """Over the whole corpus: 100% recall and 0 false positives (the numbers the README
    quotes)."""
    hits = misses = extra = 0
    for unit in UNITS:
        expected = _expected(unit)
        actual = Counter((f.file, f.rule, f.line)
                         for f in lint_source([str(unit)], config=SourceConfig()).findings)
        hits += sum((expected & actual).values())
        misses += sum((expected - actual).values())
        extra += sum((actual - expected).values())
    assert (misses, extra) == (0, 0)
    assert hits >= 30


# -- findings: flow, cause, fix, edit ---------------------------------------------------------


def test_finding_carries_flow_cause_and_capture_fix() -> None:
    """A flow through a helper names the source line, the call and the sink, with the
    capture linter's cause slug and fix text."""
    report = lint_source([str(CORPUS / "p01_anthropic_clock_system.py")], config=SourceConfig())
    (finding,) = report.findings
    assert (finding.rule, finding.name, finding.cause) == ("SP101", "clock-in-prefix",
                                                           "volatile-token")
    assert finding.flow[0].line == 10 and finding.flow[0].note == "source: datetime.now()"
    assert finding.flow[-1].line == 15
    assert finding.fix.startswith(CAUSE_FIXES["volatile-token"])
    assert finding.edit is None


def test_mechanical_edits_sort_tools_and_keys() -> None:
    """Unsorted MCP tools get a ``sorted(..., key=...)`` edit; json.dumps gets
    ``sort_keys=True`` inserted before its closing parenthesis; a bare cache_control gets the
    1h ttl."""
    mcp = lint_source([str(CORPUS / "p06_mcp_tools_unsorted.py")], config=SourceConfig())
    assert mcp.findings[0].edit is not None
    assert mcp.findings[0].edit.replacement == "sorted(tools, key=lambda t: t.name)"
    dumps = lint_source([str(CORPUS / "p08_json_dumps_schema_system.py")],
                        config=SourceConfig())
    edit = dumps.findings[0].edit
    assert edit is not None and edit.replacement == ", sort_keys=True"
    line = (CORPUS / "p08_json_dumps_schema_system.py").read_text().splitlines()[edit.line - 1]
    assert line[edit.col - 1] == ")"
    ttl = lint_source([str(CORPUS / "p11_ttl_dropped.py")], config=SourceConfig())
    assert ttl.findings[0].edit is not None
    assert ttl.findings[0].edit.replacement == ', "ttl": "1h"'


def test_class_attribute_written_by_one_method_read_by_another(tmp_path: Path) -> None:
    """A value stored on ``self`` in one method reaches a sink in another."""
    path = _write(tmp_path, "h.py", (
        "import os\nimport anthropic\n\n"
        "class H:\n"
        "    def __init__(self, root):\n"
        "        self.client = anthropic.Anthropic()\n"
        "        self.root = root\n"
        "    def call(self, messages):\n"
        "        return self.client.messages.create(system=f'root {self.root}',\n"
        "                                           messages=messages)\n\n"
        "def make():\n"
        "    return H(os.getcwd())\n"))
    report = lint_source([str(path)], config=SourceConfig())
    assert [(f.rule, f.line) for f in report.findings] == [("SP103", 9)]
    assert report.findings[0].flow[0].note == "source: os.getcwd()"


def test_a_loop_at_module_level_is_not_frozen(tmp_path: Path) -> None:
    """The clock at module level is frozen, but not inside a module-level loop."""
    path = _write(tmp_path, "loop.py", (
        "import time\nimport anthropic\nclient = anthropic.Anthropic()\n"
        "while True:\n"
        "    client.messages.create(system=f'{time.time()}', messages=[])\n"))
    assert [f.rule for f in lint_source([str(path)], config=SourceConfig()).findings] == [
        "SP101"]


# -- suppressions and config -----------------------------------------------------------------


def test_inline_suppression_by_id_slug_or_all(tmp_path: Path) -> None:
    """``# stableprompt: ignore[RULE]`` on the sink or source line drops the finding; another
    rule's id does not; a bare ``ignore`` drops all."""
    base = (CORPUS / "p01_anthropic_clock_system.py").read_text()
    cases = {
        "id": base.replace("system=system,", "system=system,  # stableprompt: ignore[SP101]"),
        "slug": base.replace("now = datetime.now()",
                             "now = datetime.now()  # stableprompt: ignore[clock-in-prefix]"),
        "all": base.replace("system=system,", "system=system,  # stableprompt: ignore"),
        "other": base.replace("system=system,", "system=system,  # stableprompt: ignore[SP203]"),
    }
    for name, text in cases.items():
        report = lint_source([str(_write(tmp_path, f"{name}.py", text))], config=SourceConfig())
        assert (len(report.findings), report.suppressed) == (
            (1, 0) if name == "other" else (0, 1)), name


def test_pyproject_config_ignores_excludes_and_adds_sinks(tmp_path: Path) -> None:
    """The analysed project's ``[tool.stableprompt.lint]`` ignores rules, excludes files and
    declares extra sinks."""
    _write(tmp_path, "pyproject.toml", (
        "[tool.stableprompt.lint]\n"
        "ignore = ['SP103']\n"
        "exclude = ['skip_*.py']\n"
        "[tool.stableprompt.lint.extra-sinks]\n"
        "'llm.ask' = { prompt = 'system' }\n"))
    _write(tmp_path, "skip_me.py", "import time\nimport x\nx.messages.create(system=time.time())\n")
    _write(tmp_path, "app.py", (
        "import os\nimport time\nimport llm\n"
        "def go():\n"
        "    llm.ask(prompt=f'{time.time()} {os.getcwd()}')\n"))
    config = read_config([tmp_path])
    assert config.ignore == {"SP103"}
    report = lint_source([tmp_path])
    assert report.files == 1
    assert [(f.rule, f.line) for f in report.findings] == [("SP101", 5)]
    assert report.suppressed == 1


def test_malformed_config_is_a_typed_error(tmp_path: Path) -> None:
    """An unknown rule in ``ignore`` raises SourceError with code source-config-invalid."""
    _write(tmp_path, "pyproject.toml", "[tool.stableprompt.lint]\nignore = ['SP999']\n")
    with pytest.raises(stableprompt.SourceError) as info:
        lint_source([tmp_path])
    assert info.value.code == "source-config-invalid"


def test_rule_lookup_by_id_or_slug() -> None:
    """Rules are found by id in any case or by slug; unknown names give None."""
    assert rule_named("sp202") is rule_named("unsorted-mcp-tools") is RULES[5]
    assert rule_named("nope") is None


# -- bad input -------------------------------------------------------------------------------


def test_missing_path_and_syntax_error_are_typed_errors(tmp_path: Path) -> None:
    """A missing path and a named file that does not parse raise SourceError with codes."""
    with pytest.raises(stableprompt.SourceError) as missing:
        lint_source([tmp_path / "nope.py"], config=SourceConfig())
    assert missing.value.code == "source-path-missing"
    bad = _write(tmp_path, "bad.py", "def f(:\n")
    with pytest.raises(stableprompt.SourceError) as syntax:
        lint_source([bad], config=SourceConfig())
    assert syntax.value.code == "source-syntax"


def test_unparsable_file_in_a_directory_is_listed_not_fatal(tmp_path: Path) -> None:
    """A file in a directory that does not parse becomes a problem; the rest is linted."""
    _write(tmp_path, "bad.py", "def f(:\n")
    shutil.copy(CORPUS / "p01_anthropic_clock_system.py", tmp_path / "good.py")
    report = lint_source([tmp_path], config=SourceConfig())
    assert [p.file.endswith("bad.py") for p in report.problems] == [True]
    assert [f.rule for f in report.findings] == ["SP101"]


# -- SARIF -----------------------------------------------------------------------------------


def test_sarif_validates_against_the_2_1_0_schema() -> None:
    """The SARIF log of the whole corpus (flows, fixes, a problem) is valid SARIF 2.1.0."""
    schema = json.loads((FIXTURES / "sarif" / "sarif-schema-2.1.0.json").read_text())
    report = lint_source([CORPUS], config=SourceConfig())
    log = to_sarif(report)
    Draft4Validator.check_schema(schema)
    Draft4Validator(schema).validate(log)
    results = log["runs"][0]["results"]
    assert len(results) == len(report.findings)
    assert any("fixes" in r for r in results)
    assert all(r["ruleId"] == log["runs"][0]["tool"]["driver"]["rules"][r["ruleIndex"]]["id"]
               for r in results)


# -- command line ----------------------------------------------------------------------------


def test_cli_text_json_sarif_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """Findings exit 1 (0 with --exit-zero); a clean file exits 0; JSON and SARIF parse."""
    positive = str(CORPUS / "p03_git_status_system.py")
    negative = str(CORPUS / "n01_date_frozen_at_import.py")
    assert main(["lint", "--source", positive]) == 1
    text = capsys.readouterr().out
    assert "SP104 subprocess-in-prefix" in text and "FAIL 2 finding(s)" in text
    assert main(["lint", "--source", positive, "--exit-zero"]) == 0
    capsys.readouterr()
    assert main(["lint", "--source", negative]) == 0
    assert "PASS 0 finding(s)" in capsys.readouterr().out
    assert main(["lint", "--source", positive, "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["summary"]["rules"] == {"SP104": 2}
    assert main(["lint", "--source", positive, "--format", "sarif"]) == 1
    assert json.loads(capsys.readouterr().out)["version"] == "2.1.0"


def test_cli_bad_input_exits_2_with_one_line(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A missing path exits 2 with one stderr line; with --json the error is on stdout; a
    capture's --format sarif is refused the same way."""
    assert main(["lint", "--source", str(tmp_path / "nope")]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "source-path-missing" in captured.err
    assert main(["lint", "--source", str(tmp_path / "nope"), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "source-path-missing"
    assert main(["lint", str(tmp_path), "--format", "sarif"]) == 2
    assert "needs --source" in capsys.readouterr().err


def test_pre_commit_hook_definition() -> None:
    """The repository defines the stableprompt-source-lint pre-commit hook."""
    text = (Path(__file__).parent.parent / ".pre-commit-hooks.yaml").read_text()
    assert "id: stableprompt-source-lint" in text
    assert "entry: stableprompt lint --source" in text
    assert "types: [python]" in text


def test_odd_files_are_listed_not_fatal(tmp_path: Path) -> None:
    """A PEP 263 latin-1 file is read as Python reads it; a 1,000-term expression and a
    symlink loop are listed as not analysed (or skipped) instead of a traceback for the whole
    run; a list of dicts gets a sort edit with a key (sorted() of dicts raises TypeError)
    (found by the session's reviewer)."""
    from stableprompt import lint_source

    (tmp_path / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\ns = \"caf\xe9\"\n")
    (tmp_path / "chain.py").write_text("x = " + " + ".join(["1"] * 1000) + "\n")
    (tmp_path / "a.py").symlink_to("b.py")
    (tmp_path / "b.py").symlink_to("a.py")
    (tmp_path / "tools.py").write_text(
        "import anthropic\nc = anthropic.Anthropic()\nnames = {'a', 'b'}\n"
        "tools = [{'name': n, 'input_schema': {}} for n in set(names)]\n"
        "c.messages.create(model='m', max_tokens=1, tools=tools, messages=[])\n")
    report = lint_source([tmp_path])
    assert [p.file.endswith("chain.py") for p in report.problems] == [True]
    edits = [f.edit for f in report.findings if f.edit is not None]
    assert edits and all("key=lambda t: t['name']" in e.replacement for e in edits)
    assert lint_source([tmp_path / "latin.py"]).findings == ()


def test_a_configured_sink_that_is_the_projects_own_function(tmp_path: Path) -> None:
    """``extra-sinks`` naming the project's own wrapper (analysed as a function too) is still
    a sink: a clock passed to it is found (it was found only when the wrapper lived outside
    the linted tree) (found by the session's reviewer)."""
    from stableprompt import lint_source

    (tmp_path / "pyproject.toml").write_text(
        '[tool.stableprompt.lint]\n'
        'extra-sinks = {"myharness.llm.ask" = {system_prompt = "system"}}\n')
    (tmp_path / "myharness").mkdir()
    (tmp_path / "myharness" / "__init__.py").write_text("")
    (tmp_path / "myharness" / "llm.py").write_text(
        "def ask(system_prompt: str, messages: list) -> str:\n    return system_prompt\n")
    (tmp_path / "use.py").write_text(
        "import time\nfrom myharness import llm\n\n\ndef turn(messages: list) -> str:\n"
        "    return llm.ask(system_prompt=f't={time.time()}', messages=messages)\n")
    report = lint_source([tmp_path])
    assert [(f.rule, f.file.endswith("use.py")) for f in report.findings] == [("SP101", True)]


def test_a_lint_that_analysed_nothing_does_not_pass(tmp_path: Path) -> None:
    """A directory whose every file fails to parse (syntax newer than the interpreter, or
    not Python) checked nothing: it does not pass (it printed PASS with exit 0)."""
    from stableprompt import lint_source

    (tmp_path / "new.py").write_text("type X = int[\n")
    report = lint_source([tmp_path])
    assert report.files == 0 and report.problems and not report.passed
    (tmp_path / "ok.py").write_text("x = 1\n")
    assert lint_source([tmp_path]).passed  # one analysed file: problems are listed only
