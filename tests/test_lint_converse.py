"""Lint on Converse and Gemini captures (public bug log B21): Converse requests are segmented
as Converse (cachePoint blocks are breakpoints), Gemini requests with a cachedContent
reference are understood."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stableprompt import PromptBuilder, Tool
from stableprompt._lint._linter import lint_capture, lint_requests

TOOLS = [Tool("get_weather", "Weather for a city.",
              {"type": "object", "properties": {"city": {"type": "string"}},
               "required": ["city"]})]
MODEL = "anthropic.claude-sonnet-4-5-20250929-v1:0"


def _requests(to: str) -> list[Any]:
    head = (PromptBuilder(tokenizer=None).system("You answer weather questions. " * 50)
            .tools(TOOLS).tail_slot("now").freeze())
    conv = head.conversation()
    out = []
    for turn in range(3):
        conv.user(f"Weather in city {turn}?")
        rendered = conv.render(tail={"now": f"12:0{turn}"})
        out.append(rendered.to_bedrock_converse(model_id=MODEL) if to == "bedrock"
                   else rendered.to_gemini(model="gemini-2.5-pro"))
        conv.assistant(f"Sunny in city {turn}.")
    return out


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and "cachePoint" in v)]
    return value


def _capture(tmp_path: Path, requests: list[Any], strip: bool = False) -> Path:
    path = tmp_path / "capture.jsonl"
    with path.open("w") as f:
        for request in requests:
            body = _strip(request.body) if strip else request.body
            f.write(json.dumps({"session": "s1", "url": request.path, "request": body}) + "\n")
    return path


def test_converse_capture_with_cache_points_has_no_no_breakpoints(tmp_path: Path) -> None:
    """A Converse capture (URL /model/<id>/converse, bodies with cachePoint blocks) is linted
    as bedrock-converse: its cache points count as breakpoints, so no no-breakpoints claim;
    the turns pair and break nowhere."""
    report = lint_capture(_capture(tmp_path, _requests("bedrock")))
    assert report.finding("no-breakpoints") is None
    assert {p.wire_format for p in report.pairs} == {"bedrock-converse"}
    assert not report.problems
    assert all(p.divergence is None or p.expected for p in report.pairs)


def test_converse_capture_without_markers_gets_no_breakpoints(tmp_path: Path) -> None:
    """The same capture with every cachePoint block stripped gets the no-breakpoints finding
    on every request, worded for Bedrock."""
    report = lint_capture(_capture(tmp_path, _requests("bedrock"), strip=True))
    finding = report.finding("no-breakpoints")
    assert finding is not None
    assert len(finding.requests) == 3
    assert "cachePoint" in finding.message


def test_converse_requests_lint_and_bodies_alone_need_the_url() -> None:
    """ProviderRequests carry their path (the model): linted as Converse. Bodies alone are
    still detected as Converse, never as Anthropic, and the problem names the URL path."""
    report = lint_requests(_requests("bedrock"))
    assert report.finding("no-breakpoints") is None
    report = lint_requests([*(r.body for r in _requests("bedrock")), _requests("bedrock")[0]])
    assert report.problems and "URL path" in report.problems[0].message


def test_gemini_capture_lints_with_the_model_from_the_url(tmp_path: Path) -> None:
    """Gemini bodies (model in the URL) lint without problems and without breakpoint claims;
    a request that references a cachedContent has no head of its own and is understood."""
    requests = _requests("gemini")
    report = lint_capture(_capture(tmp_path, requests))
    assert not report.problems
    assert report.finding("no-breakpoints") is None
    cached = {"cachedContent": "cachedContents/abc",
              "contents": requests[-1].body["contents"][2:]}
    path = tmp_path / "cached.jsonl"
    path.write_text(json.dumps({"url": requests[-1].path, "request": cached}) + "\n")
    report = lint_capture(path)
    assert not report.problems
    assert report.pairs[0].wire_format == "gemini"


def test_bedrock_rules_cover_the_user_guide_table() -> None:
    """Every model of the Bedrock prompt-caching table (PROVIDERS.md §6.3) has its own rule,
    inference profiles and ARNs included: Claude 3.7 Sonnet and Opus 4 cache from 1,024
    tokens (they fell to the conservative 4,096 default, so a 1,024-4,095-token prefix was
    predicted to read nothing), Opus 4.6 from 4,096 with 5 minutes only."""
    from stableprompt._policy import cache_rules

    table = {"anthropic.claude-3-7-sonnet-20250219-v1:0": (1024, (300,)),
             "us.anthropic.claude-opus-4-20250514-v1:0": (1024, (300,)),
             "anthropic.claude-opus-4-6-v1": (4096, (300,)),
             "arn:aws:bedrock:us-east-1:123456789012:inference-profile/"
             "global.anthropic.claude-sonnet-4-5-20250929-v1:0": (4096, (300, 3600)),
             "anthropic.claude-sonnet-4-6": (1024, (300,)),
             "anthropic.claude-opus-4-5-20251101-v1:0": (4096, (300, 3600))}
    for model, (minimum, ttls) in table.items():
        rule = cache_rules("bedrock", model)
        assert not rule.conservative, model
        assert (rule.min_cacheable_tokens, rule.ttls_s) == (minimum, ttls), model
