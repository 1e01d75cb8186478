"""Source-lint results: a finding (rule, place, flow, fix, edit) and the report.

Produced by :mod:`stableprompt._lint._source`; written as text or JSON here and as SARIF by
:mod:`stableprompt._lint._sarif`. Lines are 1-based and columns 1-based (as editors and SARIF
count); an end column is exclusive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TextIO

from .._public import public
from ._source_rules import RULES

__all__ = ["FlowStep", "SourceEdit", "SourceFinding", "SourceLintReport", "SourceProblem",
           "render_source_report"]


@dataclass(frozen=True, slots=True)
class FlowStep:
    """One place of a flow: ``file:line:col`` and what happens there (``source``,
    ``passed to ask()``, ``sink``)."""

    file: str
    line: int
    col: int
    note: str

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "col": self.col, "note": self.note}


@dataclass(frozen=True, slots=True)
class SourceEdit:
    """A mechanical fix: replace ``file`` from ``line:col`` to ``end_line:end_col``
    (exclusive) with ``replacement``."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    replacement: str
    description: str

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "col": self.col,
                "end_line": self.end_line, "end_col": self.end_col,
                "replacement": self.replacement, "description": self.description}


@dataclass(frozen=True, slots=True)
class SourceFinding:
    """One cache-killer found in harness source.

    Attributes:
        rule: Rule id (``SP101``); ``name`` its slug (``clock-in-prefix``).
        cause: The capture linter's slug for the break (a ``Divergence.cause`` such as
            ``volatile-token``, or a capture finding code such as ``breakpoint-ttl-order``).
        severity: ``error`` (differs on every call) or ``warning`` (across processes,
            machines or runtimes).
        file, line, col, end_line, end_col: The sink (where the value enters the prompt);
            1-based, end column exclusive.
        message: What reaches what.
        flow: Source first, then the calls it passed through, then the sink.
        fix: How to fix it; ``edit`` the mechanical edit where there is one, else ``None``.
    """

    rule: str
    name: str
    cause: str
    severity: str
    file: str
    line: int
    col: int
    end_line: int
    end_col: int
    message: str
    flow: tuple[FlowStep, ...]
    fix: str
    edit: SourceEdit | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict with the same field names (``flow`` and ``edit`` as dicts)."""
        return {"rule": self.rule, "name": self.name, "cause": self.cause,
                "severity": self.severity, "file": self.file, "line": self.line,
                "col": self.col, "end_line": self.end_line, "end_col": self.end_col,
                "message": self.message, "flow": [s.as_dict() for s in self.flow],
                "fix": self.fix, "edit": None if self.edit is None else self.edit.as_dict()}

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.rule} {self.name} {self.message}"


@dataclass(frozen=True, slots=True)
class SourceProblem:
    """A file that was not analysed (not valid Python, not readable): ``line`` 0 if unknown."""

    file: str
    line: int
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "message": self.message}


@dataclass(frozen=True, slots=True)
class SourceLintReport:
    """What ``stableprompt lint --source`` found.

    Attributes:
        paths: The paths given, as given.
        files: Python files analysed; ``lines`` their total line count.
        findings: Findings left after suppressions and the config's ``ignore``, ordered by
            file, line, column and rule.
        suppressed: Findings dropped by ``# stableprompt: ignore[...]`` comments or the
            config's ``ignore``.
        problems: Files that could not be analysed (each listed, never a traceback).
    """

    paths: tuple[str, ...]
    files: int
    lines: int
    findings: tuple[SourceFinding, ...]
    suppressed: int
    problems: tuple[SourceProblem, ...]

    @property
    def passed(self) -> bool:
        """No findings, and something was analysed: problems alone do not fail (they are
        listed), but a lint where every file failed to parse (a project in syntax newer than
        the interpreter) checked nothing and does not pass."""
        return not self.findings and not (self.problems and self.files == 0)

    def as_dict(self) -> dict[str, Any]:
        """``{"summary", "findings", "problems", "rules"}``, JSON-ready."""
        counts: dict[str, int] = {}
        for f in self.findings:
            counts[f.rule] = counts.get(f.rule, 0) + 1
        return {
            "summary": {"paths": list(self.paths), "files": self.files, "lines": self.lines,
                        "findings": len(self.findings), "suppressed": self.suppressed,
                        "problems": len(self.problems), "rules": dict(sorted(counts.items())),
                        "passed": self.passed},
            "findings": [f.as_dict() for f in self.findings],
            "problems": [p.as_dict() for p in self.problems],
            "rules": {r.id: {"name": r.name, "cause": r.cause, "severity": r.severity,
                             "summary": r.summary} for r in RULES},
        }


public(SourceFinding, SourceLintReport)


def render_source_report(report: SourceLintReport, out: TextIO) -> None:
    """Write ``report`` as greppable text: one ``file:line:col: RULE name message`` line per
    finding, then its flow, fix and edit indented, then the problems and a summary line."""
    for f in report.findings:
        out.write(f"{f} [{f.cause}]\n")
        out.write("  flow: " + " -> ".join(f"{s.file}:{s.line}:{s.col} {s.note}"
                                           for s in f.flow) + "\n")
        out.write(f"  fix: {f.fix}\n")
        if f.edit is not None:
            e = f.edit
            out.write(f"  edit: {e.file}:{e.line}:{e.col}-{e.end_line}:{e.end_col} "
                      f"{e.description}: {e.replacement!r}\n")
    for p in report.problems:
        out.write(f"{p.file}:{p.line}: not analysed: {p.message}\n")
    verdict = "PASS" if report.passed else "FAIL"
    out.write(f"{verdict} {len(report.findings)} finding(s) in {report.files} file(s), "
              f"{report.lines} lines ({report.suppressed} suppressed, "
              f"{len(report.problems)} not analysed)\n")
