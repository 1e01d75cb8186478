"""A source-lint report as SARIF 2.1.0, the format code-scanning UIs read.

One run; ``tool.driver.rules`` lists every rule (id, slug, descriptions, default level, the
capture-lint cause as a tag); each result points at its sink, carries the flow as a
``codeFlow`` (source, calls, sink) and the source as a ``relatedLocation``, and a mechanical
edit as a ``fix``. Files that were not analysed become ``toolExecutionNotifications``.
Artifact URIs are the paths as reported, with ``/`` separators (relative paths stay relative;
absolute ones become ``file://`` URIs).

Source: OASIS SARIF 2.1.0 (errata 01), docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/;
``tests/fixtures/sarif/`` holds the JSON schema the output is validated against.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from .._version import __version__
from ._source_report import FlowStep, SourceFinding, SourceLintReport
from ._source_rules import RULES

__all__ = ["SARIF_SCHEMA", "to_sarif"]

SARIF_SCHEMA = ("https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/"
                "sarif-schema-2.1.0.json")
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def _uri(path: str) -> str:
    pure = PurePath(path)
    return pure.as_uri() if pure.is_absolute() else pure.as_posix()


def _location(file: str, line: int, col: int, *, end_line: int | None = None,
              end_col: int | None = None, message: str | None = None) -> dict[str, Any]:
    region: dict[str, Any] = {"startLine": max(line, 1), "startColumn": max(col, 1)}
    if end_line is not None and end_col is not None:
        region.update(endLine=max(end_line, 1), endColumn=max(end_col, 1))
    out: dict[str, Any] = {"physicalLocation": {"artifactLocation": {"uri": _uri(file)},
                                                "region": region}}
    if message is not None:
        out["message"] = {"text": message}
    return out


def _step(step: FlowStep) -> dict[str, Any]:
    return {"location": _location(step.file, step.line, step.col, message=step.note)}


def _result(finding: SourceFinding, index: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": finding.rule,
        "ruleIndex": index,
        "level": _LEVEL.get(finding.severity, "warning"),
        "message": {"text": f"{finding.message}. Fix: {finding.fix}"},
        "locations": [_location(finding.file, finding.line, finding.col,
                                end_line=finding.end_line, end_col=finding.end_col)],
        "codeFlows": [{"threadFlows": [{"locations": [_step(s) for s in finding.flow]}]}],
        "relatedLocations": [
            {"id": 1, **_location(finding.flow[0].file, finding.flow[0].line,
                                  finding.flow[0].col, message=finding.flow[0].note)}],
        "properties": {"cause": finding.cause, "name": finding.name},
    }
    if finding.edit is not None:
        e = finding.edit
        result["fixes"] = [{
            "description": {"text": e.description},
            "artifactChanges": [{
                "artifactLocation": {"uri": _uri(e.file)},
                "replacements": [{
                    "deletedRegion": {"startLine": e.line, "startColumn": e.col,
                                      "endLine": e.end_line, "endColumn": e.end_col},
                    "insertedContent": {"text": e.replacement},
                }],
            }],
        }]
    return result


def to_sarif(report: SourceLintReport) -> dict[str, Any]:
    """``report`` as one SARIF 2.1.0 log (a JSON-ready dict), deterministic for a report."""
    index = {r.id: i for i, r in enumerate(RULES)}
    rules = [{
        "id": r.id,
        "name": r.name,
        "shortDescription": {"text": r.summary},
        "fullDescription": {"text": f"{r.summary} (capture-lint cause: {r.cause})."},
        "help": {"text": f"Fix: {r.fix}"},
        "defaultConfiguration": {"level": _LEVEL[r.severity]},
        "properties": {"tags": ["prefix-cache", r.cause]},
    } for r in RULES]
    notifications = [{
        "level": "warning",
        "message": {"text": f"not analysed: {p.message}"},
        "locations": [_location(p.file, p.line or 1, 1)],
    } for p in report.problems]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "stableprompt", "semanticVersion": __version__,
                                "version": __version__, "rules": rules}},
            "invocations": [{"executionSuccessful": True,
                             "toolExecutionNotifications": notifications}],
            "results": [_result(f, index[f.rule]) for f in report.findings],
            "columnKind": "unicodeCodePoints",
        }],
    }
