"""The bounded fuzz layer (issue 9): every entry point that takes outside input answers with a
correct result or a typed :class:`~stableprompt.StablePromptError`, never a bare exception,
and never leaves a record nowhere.

Runs in CI with the ``ci`` hypothesis profile (derandomized: the same examples every run, about
40 s in all on 2 cores). Run it longer locally with another seed or more examples::

    HYPOTHESIS_PROFILE=fuzz pytest tests/test_fuzz.py            # 20x the examples, random
    pytest tests/test_fuzz.py --hypothesis-seed=12345            # one reproducible seed

(profiles are registered in ``tests/conftest.py``).
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from stableprompt import (
    CacheUsage,
    Ledger,
    LedgerSpillWarning,
    StablePromptError,
    Tool,
    ToolSet,
    UsageRecord,
    canonical_json,
    lint_capture,
    lint_requests,
    parse_usage,
    segment_request,
)
from stableprompt._ledger._schema import to_row
from stableprompt._usage import MAX_TOKEN_COUNT, USAGE_FIELDS
from stableprompt.providers import WIRE_FORMATS, parse_response, stream_accumulator

FIXTURES = Path(__file__).parent / "providers" / "fixtures"
LINT_FIXTURES = Path(__file__).parent / "fixtures" / "lint"
_HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]
SLOW = settings(suppress_health_check=_HEALTH)
# The costlier properties (a lint run, a ledger round trip per example) take a quarter.
COSTLY = settings(suppress_health_check=_HEALTH,
                  max_examples=max(10, (settings().max_examples or 100) // 4))

USAGE_KEYS = sorted({
    "input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens",
    "cache_creation", "ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens", "prompt_tokens",
    "completion_tokens", "prompt_tokens_details", "cached_tokens", "cache_write_tokens",
    "input_tokens_details", "output_tokens_details", "promptTokenCount", "candidatesTokenCount",
    "cachedContentTokenCount", "thoughtsTokenCount", "inputTokens", "outputTokens",
    "cacheReadInputTokens", "cacheWriteInputTokens", "prompt_cache_hit_tokens",
    "prompt_cache_miss_tokens", "usage", "timings", "cache_n", "prompt_n", "usageMetadata",
    "cacheDetails", "iterations", "x",
})
# Counts around every boundary that matters: 0, the parser bound, SQLite's and orjson's limits,
# and Python's 4,300-digit formatting limit.
COUNTS = st.one_of(
    st.integers(min_value=-3, max_value=10**6),
    st.sampled_from([MAX_TOKEN_COUNT, MAX_TOKEN_COUNT + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64,
                     -(2**63) - 1]),
    st.sampled_from([1, -1]).map(lambda sign: sign * 10**5000),  # built lazily: no repr
)
SCALARS = st.one_of(st.none(), st.booleans(), COUNTS,
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6))


def _json(keys: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        SCALARS,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=6),
        max_leaves=16,
    )


USAGE_VALUES = _json(st.sampled_from(USAGE_KEYS))
# Non-string keys too: reachable from the official SDKs' objects and from user dicts.
ODD_KEYS = st.one_of(st.sampled_from(USAGE_KEYS), st.integers(0, 3), st.none())


def _stored(usage: CacheUsage) -> None:
    """A parsed usage always fits a ledger row (every count inside SQLite's 64 bits)."""
    record = UsageRecord.model_validate({
        "wire_format": "anthropic",
        **{name: getattr(usage, name) for name in USAGE_FIELDS},
        "usage_raw": None,
    })
    to_row(record)
    for name in USAGE_FIELDS:
        value = getattr(usage, name)
        assert value is None or abs(value) < 2**62
    assert isinstance(usage.inconsistent, bool)  # messages never fail to build


@SLOW
@given(fmt=st.sampled_from(WIRE_FORMATS),
       usage=st.one_of(USAGE_VALUES, st.dictionaries(ODD_KEYS, USAGE_VALUES, max_size=5)))
def test_usage_parsers_answer_or_raise_typed(fmt: str, usage: Any) -> None:
    """parse_usage / parse_response: a storable CacheUsage or a UsageParseError."""
    for parse in (parse_usage, parse_response):
        try:
            result = parse(fmt, usage)
        except StablePromptError as exc:
            assert exc.code.startswith("usage-")
            str(exc)
        else:
            _stored(result)


def _sse_fixtures() -> list[tuple[str, bytes]]:
    names = {
        "anthropic_cached_ttl.sse": "anthropic", "anthropic_sdk_recorded.sse": "anthropic",
        "openai_chat_final_usage.sse": "openai-chat",
        "openai_chat_cumulative_usage.sse": "openai-chat",
        "openai_responses_completed.sse": "openai-responses",
        "gemini_stream.sse": "gemini", "llama_cpp_stream.sse": "llama-cpp",
        "bedrock_converse_stream.jsonl": "bedrock-converse",
    }
    return [(fmt, (FIXTURES / name).read_bytes()) for name, fmt in names.items()]


STREAMS = _sse_fixtures()


@SLOW
@given(data=st.data(), which=st.integers(0, len(STREAMS) - 1))
def test_stream_accumulators_on_mutated_streams(data: st.DataObject, which: int) -> None:
    """A real stream with bytes cut, flipped or replaced, fed in random chunks: a storable
    usage (possibly unknown or partial) or a UsageParseError; never a bare exception."""
    fmt, raw = STREAMS[which]
    body = bytearray(raw)
    for _ in range(data.draw(st.integers(0, 4), label="mutations")):
        if not body:
            break
        at = data.draw(st.integers(0, len(body) - 1), label="at")
        action = data.draw(st.sampled_from(["cut", "flip", "insert", "number"]), label="action")
        if action == "cut":
            del body[at:]
        elif action == "flip":
            body[at] ^= data.draw(st.integers(1, 255), label="bits")
        elif action == "insert":
            body[at:at] = data.draw(st.sampled_from(
                [b"\n\n", b"data: ", b'{"usage":', b"null", b"[DONE]", b"\x00", b"\r"]))
        else:
            body[at:at] = data.draw(st.sampled_from([b"9" * 20, b"-1", b"1e400", b"9" * 5000]),
                                    label="number")
    accumulator = stream_accumulator(fmt)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6), label="cuts"))
    try:
        start = 0
        for cut in [*cuts, len(body)]:
            accumulator.feed(bytes(body[start:cut]))
            start = max(start, cut)
        usage = accumulator.finish()
    except StablePromptError as exc:
        assert exc.code.startswith("usage-")
    else:
        _stored(usage)
        if usage.unknown_reason is None and not usage.is_unknown:
            assert not accumulator.interrupted


PY_VALUES = st.recursive(
    st.one_of(SCALARS, st.binary(max_size=3), st.frozensets(st.integers(0, 3), max_size=2),
              st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
                      max_size=2)),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner)
    | st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 2), COUNTS), inner,
                      max_size=4),
    max_leaves=12,
)


@SLOW
@given(value=PY_VALUES)
def test_canonical_json_answers_or_raises_typed(value: Any) -> None:
    """canonical_json: deterministic bytes that parse back, or a CanonicalizationError."""
    try:
        data = canonical_json(value)
    except StablePromptError as exc:
        assert exc.code.startswith("canonical-")
        return
    assert canonical_json(json.loads(data)) == data


def test_canonical_json_on_deep_and_circular_values() -> None:
    """Nesting past the limit and cycles are canonical-depth, not RecursionError."""
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    circular: dict[str, Any] = {}
    circular["self"] = circular
    for value in (deep, circular):
        with pytest.raises(StablePromptError) as info:
            canonical_json(value)
        assert info.value.code == "canonical-depth"


SCHEMA_KEYS = st.sampled_from([
    "type", "properties", "required", "items", "enum", "default", "anyOf", "oneOf", "allOf",
    "prefixItems", "additionalProperties", "description", "minimum", "const", "$ref", "$defs",
    "dependentRequired", "dependencies", "optional", "format", "examples", "not", "x",
])
SCHEMAS = st.recursive(
    st.one_of(SCALARS, st.sampled_from(["object", "string", "dict", "float", "any", "integer"])),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(SCHEMA_KEYS, inner, max_size=5),
    max_leaves=20,
)
TOOL_DICTS = st.one_of(
    st.fixed_dictionaries({"name": st.text(max_size=8) | st.sampled_from(["ok_name", "a.b"]),
                           "description": st.none() | st.text(max_size=8),
                           "input_schema": SCHEMAS}),
    st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
        {"name": st.sampled_from(["f", "g.h", ""]), "parameters": SCHEMAS})}),
    st.dictionaries(st.sampled_from(["name", "parameters", "input_schema", "type", "function",
                                     "strict", "x"]), SCHEMAS, max_size=4),
)


@SLOW
@given(dicts=st.lists(TOOL_DICTS, max_size=3), repair=st.booleans())
def test_tools_from_json_answer_or_raise_typed(dicts: list[Any], repair: bool) -> None:
    """Tool.from_dict / ToolSet.from_dicts on JSON-shaped input: tools whose canonical bytes
    round-trip, or a ToolError."""
    try:
        tools = ToolSet.from_dicts(dicts, repair=repair)
    except StablePromptError as exc:
        assert exc.code
        str(exc)
        return
    for tool in tools:
        assert Tool.from_dict(tool.to_dict()).canonical_bytes == tool.canonical_bytes


BODY_KEYS = st.sampled_from([
    "model", "messages", "input", "instructions", "system", "tools", "max_tokens", "role",
    "content", "type", "text", "cache_control", "prompt_cache_breakpoint", "tool_choice",
    "metadata", "user_id", "prompt_cache_key", "function", "name", "x",
])
BODIES = st.dictionaries(BODY_KEYS, _json(BODY_KEYS), max_size=6)


@SLOW
@given(fmt=st.sampled_from(["anthropic", "openai-chat", "openai-responses", "nope"]),
       body=st.one_of(BODIES, _json(BODY_KEYS)))
def test_segment_request_answers_or_raises_typed(fmt: str, body: Any) -> None:
    """segment_request: segments whose bytes tile the data, or a CaptureError."""
    try:
        segmented = segment_request(fmt, body)
    except StablePromptError as exc:
        assert exc.code.startswith("capture-")
        return
    end = 0
    for segment in segmented.segments:
        assert segment.start == end
        end = segment.end
    assert end == len(segmented.data)


def _capture_bodies() -> list[Any]:
    bodies = []
    for name in ("clean.jsonl", "sessions.jsonl"):
        for line in (LINT_FIXTURES / name).read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                bodies.append(record.get("request", record) if isinstance(record, dict)
                              else record)
    return bodies


CAPTURE = _capture_bodies()


def _nest(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


# Replacements: JSON values, and arrays nested around orjson's limits (it writes 255 levels
# and reads 1,024: a capture line may hold what canonical JSON refuses).
REPLACEMENTS = st.one_of(_json(BODY_KEYS), st.sampled_from([250, 256, 300, 1000]).map(_nest))


def _mutate(value: Any, data: st.DataObject, depth: int = 0) -> Any:
    """Replace one randomly chosen value somewhere inside ``value``."""
    if depth > 6 or not isinstance(value, (dict, list)) or not value or data.draw(
            st.integers(0, 3), label="stop") == 0:
        return data.draw(REPLACEMENTS, label="replacement")
    if isinstance(value, dict):
        key = data.draw(st.sampled_from(sorted(value)), label="key")
        return {**value, key: _mutate(value[key], data, depth + 1)}
    index = data.draw(st.integers(0, len(value) - 1), label="index")
    return [*value[:index], _mutate(value[index], data, depth + 1), *value[index + 1:]]


@COSTLY
@given(data=st.data())
def test_lint_on_mutated_captures_answers_or_raises_typed(data: st.DataObject,
                                                          tmp_path: Path) -> None:
    """Lint over a real capture with a few requests mutated (a missing model, wrong types,
    odd shapes, nesting past 255 levels): a report (bad requests as problems) or a
    CaptureError, and from the capture file the same requests paired and refused (codes may
    differ: a file's line may be a wrapper record, not a body)."""
    bodies = list(CAPTURE)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        i = data.draw(st.integers(0, len(bodies) - 1), label="request")
        bodies[i] = _mutate(bodies[i], data)
    assume(all(isinstance(b, dict) for b in bodies))
    try:
        report = lint_requests(bodies)
    except StablePromptError as exc:
        assert exc.code.startswith("capture-")
        return
    assert len(report.pairs) + len(report.problems) >= 1
    capture = tmp_path / "mutated.jsonl"
    try:
        capture.write_text("".join(json.dumps(b, separators=(",", ":"), ensure_ascii=False)
                                   + "\n" for b in bodies))
    except (ValueError, RecursionError):  # a huge int or a value json cannot write
        return
    from_file = lint_capture(capture)  # the same requests linted, the same ones refused
    assert [p.index for p in from_file.problems] == [p.index for p in report.problems]
    assert [p.index for p in from_file.pairs] == [p.index for p in report.pairs]


RECORDS = st.builds(
    lambda turn, read, content: UsageRecord.model_validate({
        "wire_format": "anthropic", "lineage": "sp1:h", "turn": turn,
        "cache_read_tokens": read, "content": content}),
    st.integers(0, 50), st.one_of(st.none(), COUNTS.filter(lambda n: abs(n) < 2**64)),
    st.text(max_size=400),
)


@COSTLY
@given(records=st.lists(RECORDS, min_size=1, max_size=8), limit=st.integers(0, 3000))
def test_spill_and_replay_on_a_size_limited_disk_lose_nothing(
        tmp_path_factory: pytest.TempPathFactory, records: list[UsageRecord],
        limit: int) -> None:
    """Writes that must spill onto a disk with ``limit`` bytes left: each record ends in the
    database, in quarantine (unstorable) or in memory with a warning; none is nowhere."""
    tmp = tmp_path_factory.mktemp("spill")
    db = tmp / "ledger.db"
    db.mkdir()  # unusable database path: every write spills
    led = Ledger(db, fallback_dir=tmp / "fallback")
    written = {"bytes": 0}
    real_write = os.write

    def small_disk(fd: int, chunk: bytes | memoryview) -> int:
        room = limit - written["bytes"]
        if room <= 0:
            raise OSError(28, "No space left on device")
        n = real_write(fd, bytes(chunk[:room]))
        written["bytes"] += n
        return n

    outcomes = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LedgerSpillWarning)
        os.write = small_disk  # type: ignore[assignment]
        try:
            outcomes = [led.write(record) for record in records]
        finally:
            os.write = real_write
        db.rmdir()
        led.replay_spill()
    stored = {r.record_id for r in led.records()}
    quarantined = set()
    for path in tmp.glob("*.quarantine.jsonl"):
        quarantined |= {json.loads(line)["record_id"] for line in path.read_text().splitlines()}
    for record, outcome in zip(records, outcomes, strict=True):
        assert outcome in ("spilled", "unflushed")
        assert record.record_id in stored | quarantined, (outcome, record)
    led.close()


def test_hypothesis_profile_is_derandomized_in_ci() -> None:
    """CI runs the same examples every time (a red fuzz run is reproducible)."""
    if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci":
        assert settings().derandomize
    assert math.isfinite(settings().max_examples or 0)
