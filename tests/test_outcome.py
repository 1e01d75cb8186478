"""Recording as values: (Pending, Observation) -> Outcome -> UsageRecord.

The golden table ``fixtures/recording/golden_records.json`` was written by the recorder before
its redesign (``Recorder.finish`` with a dozen keyword arguments): the redesign keeps every
field of every record of the five kinds of answer byte for byte. Fingerprints re-tagged
``sp1:`` -> ``sp2:`` by issue 26 item 7 (the fingerprint version; the hex digests of these
recorded requests did not move: the chain is unchanged). Issue 29 added
``verdict_detail["head_tokens"]`` (1,395: the head's size for the what-if replay), the only
change. Issue 26 item 4 added ``request_headers`` (``{}``: these calls send no allow-listed
header), the only change. Issue 30 item 2 added ``segment_digests`` (schema v4: the request's
segment outline, the same for the five: five segments, params / system / user / assistant /
user, 1,493 tokens as ``request_tokens``, the system block's 5m breakpoint, the last prefix
digest the request fingerprint's first 32 hex digits), the only change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from stableprompt import CacheUsage, Recorder
from stableprompt._recording._attribution import attribute
from stableprompt._recording._call import Pending
from stableprompt._recording._observer import Observation
from stableprompt._recording._outcome import outcome_of, record_of

GOLDEN = json.loads(
    (Path(__file__).parent / "fixtures" / "recording" / "golden_records.json").read_text())
KEY = "sk-ant-api03-" + "k" * 40
SYSTEM = "You are a careful assistant. " * 200


def _body(turn: int) -> bytes:
    messages: list[dict[str, Any]] = []
    for i in range(turn):
        messages.append({"role": "user", "content": f"question {i}"})
        if i < turn - 1:
            messages.append({"role": "assistant", "content": f"answer {i}"})
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64, "system": [
        {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}],
        "messages": messages}).encode()


def _answer(read: int, write: int, uncached: int = 5) -> bytes:
    return json.dumps({"id": "msg_1", "type": "message", "role": "assistant",
                       "content": [{"type": "text", "text": "ok"}],
                       "usage": {"input_tokens": uncached, "cache_read_input_tokens": read,
                                 "cache_creation_input_tokens": write,
                                 "output_tokens": 2}}).encode()


_USAGE = CacheUsage(wire_format="anthropic", input_tokens_total=1410, uncached_tokens=10,
                    cache_read_tokens=1400, cache_write_tokens=0, output_tokens=3)
CASES: dict[str, Observation] = {
    "success": Observation(status_code=200, body=_answer(1400, 0), latency_ms=12.0),
    "transport_error": Observation(error=httpx.ConnectError("connection refused"),
                                   latency_ms=3.0),
    "non_2xx": Observation(status_code=529, body=b'{"type":"error","error":{"type":'
                           b'"overloaded_error","message":"Overloaded"}}', latency_ms=4.0),
    "error_event_in_2xx_stream": Observation(
        status_code=200, usage=_USAGE, provider_error="overloaded_error", response_id="msg_2",
        ttft_ms=7.0, latency_ms=9.0),
    "incomplete": Observation(status_code=200, usage=_USAGE, response_id="msg_3", ttft_ms=-1.0,
                              incomplete="stream ended before its final event",
                              latency_ms=8.0),
}


def _second_call() -> tuple[Recorder, Pending]:
    """A recorder that recorded one cold call, and the conversation's second call started."""
    now = [1_700_000_000.0]
    recorder = Recorder(None, tokenizer="bytes/4", clock=lambda: now[0], monotonic=lambda: 5.0,
                        session_id="s1")
    first = recorder.start("/v1/messages", {"x-api-key": KEY}, _body(1),
                           host="api.anthropic.com")
    assert first is not None
    recorder.finish(first, Observation(status_code=200, body=_answer(0, 1400),
                                       latency_ms=10.0))
    now[0] += 30
    pending = recorder.start("/v1/messages", {"x-api-key": KEY}, _body(2),
                             host="api.anthropic.com")
    assert pending is not None
    return recorder, pending


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_kind_of_answer_gives_the_golden_record(case: str) -> None:
    """Success, transport error, non-2xx, an error event in a 2xx stream and an incomplete
    stream each give the record the recorder gave before its redesign, field for field."""
    recorder, pending = _second_call()
    record = recorder.finish(pending, CASES[case])
    assert record is not None
    assert record.model_dump(mode="json", exclude={"record_id", "predecessor_id"}) \
        == GOLDEN[case]
    assert KEY not in record.model_dump_json()


def test_outcome_and_record_are_pure_functions_of_their_values() -> None:
    """outcome_of and record_of give equal values for equal inputs and change nothing they
    are given; the recorder's record is record_of its outcome and attribution."""
    recorder, pending = _second_call()
    observation = CASES["incomplete"]
    first = outcome_of(pending, observation, policies=recorder.policies,
                       tokenizer="bytes/4", now=5.0)
    again = outcome_of(pending, observation, policies=recorder.policies,
                       tokenizer="bytes/4", now=5.0)
    assert first == again
    assert first.unknown_reason == "stream ended before its final event"
    assert first.ttft_ms == 0.0 and first.usage == _USAGE and first.policy is not None
    assert pending.state is not None
    comparison = pending.comparison
    attribution = attribute(pending.state, predecessor=comparison.predecessor,
                            session_previous=comparison.session_previous, usage=first.usage,
                            policy=first.policy, unknown_reason=first.unknown_reason)
    record = record_of(pending, first, attribution, scenario=None)
    assert record.verdict == "unknown"
    assert record.verdict_detail["verdict_if_complete"] == "hit"
    assert record.model_dump(mode="json", exclude={"record_id", "predecessor_id"}) \
        == GOLDEN["incomplete"]
    assert not pending.finished  # nothing was stored or remembered


def test_attribute_alone_turns_a_failed_call_unknown() -> None:
    """attribute() decides the verdict of a failed call too: unknown, with the verdict the
    prefix gives kept as verdict_if_complete; without a reason it is that verdict."""
    recorder, pending = _second_call()
    assert pending.state is not None
    policy = recorder.policies.lookup("anthropic", "claude-sonnet-4-5")
    comparison = pending.comparison
    plain = attribute(pending.state, predecessor=comparison.predecessor, usage=_USAGE,
                      policy=policy)
    failed = attribute(pending.state, predecessor=comparison.predecessor, usage=_USAGE,
                       policy=policy, unknown_reason="the call failed (ProviderError)")
    assert plain.verdict == "hit" and "verdict_if_complete" not in plain.detail
    assert failed.verdict == "unknown"
    assert failed.detail["verdict_if_complete"] == "hit"
    assert failed.detail["unknown_reason"] == "the call failed (ProviderError)"
    assert failed.predicted_cache_read_tokens == plain.predicted_cache_read_tokens


def test_a_call_finished_without_an_observation_is_recorded_as_no_answer() -> None:
    """finish(pending) with no observation records a call that got no answer: no status,
    verdict unknown, the latency measured by the recorder's clock."""
    recorder, pending = _second_call()
    record = recorder.finish(pending)
    assert record is not None and record.status_code is None
    assert record.verdict == "unknown" and record.latency_ms == 0.0
    assert recorder.finish(pending) is record  # finishing twice gives the first record


@pytest.mark.parametrize("odd", [
    {"status_code": 200, "latency_ms": float("nan")},
    {"status_code": 200, "latency_ms": -5.0, "ttft_ms": float("inf")},
    {"status_code": 200, "latency_ms": 3.0, "response_id": 12345},
    {"status_code": "200", "latency_ms": 3.0},
    {"status_code": 0, "latency_ms": 3.0},
    {"status_code": 999, "latency_ms": 3.0},
])
def test_odd_observations_keep_the_usage_and_the_row(odd: dict[str, Any]) -> None:
    """Odd measurements (NaN, negative or infinite times, a non-string response id) are
    dropped, not the call: its usage, scenario and turn are kept; a status that no HTTP
    answer has (a string, 0, 999) is a failed call, still one record (the reviewer found
    such rows losing their usage, or no record at all)."""
    recorder, pending = _second_call()
    recorder.scenario = "odd"
    record = recorder.finish(pending, Observation(body=_answer(1400, 0), **odd))
    assert record is not None and record.scenario == "odd" and record.turn == 2
    assert "recorder_error" not in record.verdict_detail
    if odd["status_code"] == 200:
        assert record.cache_read_tokens == 1400 and record.verdict == "hit"
        assert record.latency_ms is not None and record.latency_ms >= 0
        assert record.ttft_ms is None and record.response_id in (None, "msg_1")
    else:
        assert record.verdict == "unknown"
        assert record.error_class in ("ProviderError", "ProviderHTTPError")
