"""Lint's output (text, ``--all``, ``--json``) is byte for byte what it was before the
clock-capture cuts of issue 30 item 5 (format detection reading blocks in C, the volatility
windows of a divergence kept for the next pair, ``key=value`` separators found by
``str.find``): the same capture linted with the code they replaced patched back in (the
walk kept in ``test_formats_detect``, the uncached window scan, the regex pass) prints the
same bytes. Captures: a clock in every request's system prompt (``benchmarks/lint.py``'s,
every head new), and random conversations with appends, items inserted inside the history,
edits, reorders, cuts, compactions, head and system changes and malformed items, with and
without a clock."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stableprompt import _volatility, _volatility_patterns
from stableprompt._cli import main
from stableprompt._wire import _formats
from test_formats_detect import _walked
from test_lint_reuse import _conversation, _write, interleaved, plans
from test_resegment import PATHS


def _bench_capture() -> Any:
    """``benchmarks/lint.py``'s ``build_capture`` (the benchmark's own capture)."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "lint.py"
    spec = importlib.util.spec_from_file_location("_lint_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_capture

_OUTPUTS: tuple[list[str], ...] = ([], ["--all"], ["--json"])


def _printed(path: Path, extra: list[str]) -> bytes:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["lint", str(path), "--exit-zero", *extra])
    return out.getvalue().encode()


def _before_and_after(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    after = [_printed(path, extra) for extra in _OUTPUTS]
    with monkeypatch.context() as patched:
        patched.setattr(_formats, "_is_converse", lambda body, plain=None: _walked(body))
        patched.setattr(_volatility, "_kind_covering", _volatility._kind_covering.__wrapped__)
        patched.setattr(_volatility_patterns, "_kv_separators",
                        _volatility_patterns._KV_SEP_RE.finditer)
        before = [_printed(path, extra) for extra in _OUTPUTS]
    assert after == before
    assert all(after)


def test_clock_capture_prints_what_it_printed(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "clock.jsonl"
    _bench_capture()(path, requests=60, sessions=4, clock=True)
    _before_and_after(path, monkeypatch)
    assert b"volatile-token" in _printed(path, ["--json"])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(wire=st.sampled_from(sorted(PATHS)), conversations=st.lists(plans, min_size=1,
                                                                     max_size=3),
       order=st.lists(st.integers(0, 2), max_size=30),
       clock=st.booleans(), insert=st.none() | st.integers(0, 50))
def test_edited_captures_print_what_they_printed(
        wire: str, conversations: list[Any], order: list[int], clock: bool,
        insert: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    queues = [_conversation(wire, plan, f"Task {c}.") for c, plan in enumerate(conversations)]
    if insert is not None:  # from one request on, an item inserted inside the history
        key = "input" if wire == "openai-responses" else "messages"
        for queue in queues:
            for body in queue[insert % len(queue):]:
                history = body[key]
                history.insert(insert % (len(history) + 1), copy.deepcopy(history[-1]))
    records: list[dict[str, Any]] = []
    for c, body in interleaved(queues, order):
        if clock:  # a clock at the start of the system prompt: every head new
            stamp = f"Current time: 2026-11-30T00:{len(records) % 60:02d}:0{c}Z\n\n"
            for key in ("system", "instructions"):
                if isinstance(body.get(key), str):
                    body[key] = stamp + body[key]
                elif isinstance(body.get(key), list):
                    body[key] = [{**body[key][0], "text": stamp + body[key][0]["text"]},
                                 *body[key][1:]]
        records.append(body)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.jsonl"
        _write(path, records)
        _before_and_after(path, monkeypatch)
