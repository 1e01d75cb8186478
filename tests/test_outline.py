"""The segment outline a ledger row keeps (``segment_digests``, schema v4): its codec, and a
predecessor rebuilt from a row without content attributing as the in-process request did."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pydantic
import pytest

from stableprompt import cache_rules
from stableprompt._ledger._usage_record import UsageRecord
from stableprompt._policy import CacheRules
from stableprompt._recording._attribution import Attribution, attribute
from stableprompt._recording._call import RequestState
from stableprompt._recording._outline import (
    DIGEST_HEX,
    MAX_DEPTH,
    MAX_SEGMENTS,
    MIN_SHARED_SEGMENTS,
    decode_outline,
    encode_outline,
    outline_base,
    outline_common,
)
from stableprompt._recording._predecessor import call_from_record, common_segments, opening_of
from stableprompt._usage import CacheUsage
from test_attribution import (
    ANTHROPIC,
    LONG_SYSTEM,
    OPENAI_OLD,
    anthropic_body,
    anthropic_usage,
    chat_body,
    chat_usage,
    prefix_tokens,
    state,
)
from test_transport import SYSTEM_BLOCKS

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _outline(s: RequestState) -> str:
    assert s.segmented is not None and s.segment_tokens is not None
    text = encode_outline(s.segmented.segments, s.segment_tokens)
    assert text is not None
    return text


def _as_row(s: RequestState, wire: str = "anthropic") -> tuple[RequestState, RequestState]:
    """``s`` as another process reads it from a ledger row without content (its outline
    only), and ``s`` itself with that row's send time and id (the in-process comparand)."""
    record = UsageRecord(record_id="row-1", ts_utc=T0, wire_format=wire,  # type: ignore[arg-type]
                         provider="anthropic" if wire == "anthropic" else "openai",
                         lineage=s.head_fingerprint, request_fingerprint=s.fingerprint,
                         request_tokens=s.request_tokens, segment_digests=_outline(s))
    call = call_from_record(record, s.head_fingerprint, count=lambda _: [])
    assert call.state is not None and call.state.segmented is None
    assert call.state.outline is not None
    return call.state, dataclasses.replace(s, ts=call.state.ts, record_id="row-1")


def _both(one: RequestState, two_body: dict[str, Any], gap_s: float, usage: CacheUsage | None,
          policy: CacheRules, wire: str = "anthropic") -> tuple[Attribution, Attribution]:
    row, kept = _as_row(one, wire)
    two = state(two_body, row.ts + gap_s, wire)
    return (attribute(two, predecessor=kept, usage=usage, policy=policy),
            attribute(two, predecessor=row, usage=usage, policy=policy))


def test_outline_round_trips_kinds_roles_breakpoints_tokens_and_short_digests() -> None:
    """Each segment's kind (a message's role), breakpoint TTL, token count and the first 32
    hex digits of its chained prefix digest come back from the text, nothing else."""
    one = state(anthropic_body(3, history_ttl="1h"), 0.0)
    assert one.segmented is not None and one.segment_tokens is not None
    text = _outline(one)
    decoded = decode_outline(text)
    assert decoded is not None
    segments, tokens = decoded.segments, decoded.tokens
    assert tokens == list(one.segment_tokens)
    assert decoded.opening == opening_of(one.segmented) and decoded.opening is not None
    for got, want in zip(segments, one.segmented.segments, strict=True):
        assert got.kind == want.kind and got.breakpoint == want.breakpoint
        assert got.prefix_digest == want.prefix_digest[:DIGEST_HEX]
        assert got.label == (want.label if want.label in ("user", "assistant", "tool") else "")
    assert [s.breakpoint for s in segments if s.breakpoint] == ["1h", "1h"]
    assert len(text) < 40 * len(segments) + 64  # about 37 bytes per segment, the opening
    UsageRecord(wire_format="anthropic", segment_digests=text)  # the record accepts it


def test_a_request_beyond_the_bound_gets_no_outline() -> None:
    """Beyond MAX_SEGMENTS segments a row keeps no outline (the column's size bound); the
    mismatch of counts and segments is a ValueError."""
    one = state(anthropic_body(1), 0.0)
    assert one.segmented is not None and one.segment_tokens is not None
    segments = list(one.segmented.segments)
    many = segments * (MAX_SEGMENTS // len(segments) + 1)
    assert encode_outline(many, [1] * len(many)) is None
    assert encode_outline(many[:MAX_SEGMENTS], [1] * MAX_SEGMENTS) is not None
    with pytest.raises(ValueError, match="token counts"):
        encode_outline(segments, [1])


@pytest.mark.parametrize("bad", ["2|s|1||" + "a" * 32 + "|", "1|s|1,2||" + "a" * 32 + "|",
                                 "1|s|1|4=5m|" + "a" * 32 + "|", "1|s|1||" + "a" * 31 + "|",
                                 "1|s|x|||", "1|s|1||" + "a" * 32, "1|m|1||" + "a" * 32 + "|ab"])
def test_a_malformed_outline_is_none_not_guessed(bad: str) -> None:
    """Another version, a count or digest length that disagrees with the kinds, a breakpoint
    past the end, a missing or short opening: no outline (the row is then compared by its
    fingerprint, as before v4)."""
    assert decode_outline(bad) is None


def test_the_record_refuses_text_outside_the_outline_alphabet() -> None:
    """``segment_digests`` is not scrubbed, so it accepts nothing but the outline alphabet:
    no caller text and no key can be stored in it."""
    with pytest.raises(pydantic.ValidationError):
        UsageRecord(wire_format="anthropic",
                    segment_digests="1|s|1||sk-ant-api03-" + "A" * 19 + "|")


def test_outline_common_is_the_chained_digest_lcp() -> None:
    """The binary search over short digests finds the segments the full digests share."""
    one = state(anthropic_body(4), 0.0)
    assert one.segmented is not None
    changed = anthropic_body(6)
    changed["messages"][2]["content"][0]["text"] = "edited"
    for body in (anthropic_body(6), changed, anthropic_body(2)):
        two = state(body, 1.0)
        assert two.segmented is not None
        row, _ = _as_row(one)
        assert row.outline is not None
        found = outline_common(row.outline, two.segmented.segments)
        assert found == common_segments(one, two.segmented.segments)
        assert common_segments(row, two.segmented.segments) == found


@pytest.mark.parametrize(("ttl", "gap_s", "verdict"), [
    ("5m", 30.0, "hit"), ("1h", 1200.0, "hit"), ("5m", 1200.0, "ttl_expired")])
def test_a_row_predecessor_attributes_a_grown_turn_as_in_process(
        ttl: str, gap_s: float, verdict: str) -> None:
    """A conversation that grew: the verdict, prediction, LCP, read entry and every detail
    are those of the in-process comparison (breakpoints and their TTLs from the outline)."""
    one = state(anthropic_body(3, history_ttl=ttl), 0.0)
    two_body = anthropic_body(4, history_ttl=ttl)
    read = prefix_tokens(one, "messages[4].content[0]") if verdict == "hit" else 0
    total = one.request_tokens or 0
    wrote = 0 if verdict == "hit" else total + 40  # expired: all written again
    kept, row = _both(one, two_body, gap_s, anthropic_usage(total + 40, read, wrote), ANTHROPIC)
    assert kept.verdict == verdict
    assert row == kept
    assert row.read_entry_digest == kept.read_entry_digest


def test_a_row_predecessor_finds_a_mutation_and_its_segment() -> None:
    """A message edited in the middle: a client mutation losing the same tokens, named at the
    same segment and path; the bytes-level evidence (offset, snippets) needs the content."""
    one = state(anthropic_body(4), 0.0)
    changed = anthropic_body(5)
    changed["messages"][2]["content"][0]["text"] = "question one, rephrased"
    usage = anthropic_usage(4000, prefix_tokens(one, "system[0]"))
    kept, row = _both(one, changed, 30.0, usage, ANTHROPIC)
    assert kept.verdict == row.verdict == "client_mutation"
    assert row.predicted_cache_read_tokens == kept.predicted_cache_read_tokens
    for key in ("lost_tokens", "segment", "segment_kind", "stable_prefix_tokens", "ttl_s",
                "relation"):
        assert row.detail[key] == kept.detail[key], key
    # the segment's own path; the body's diff points inside it
    assert kept.detail["path"].startswith(row.detail["path"] + "/")
    assert "snippet_a" in kept.detail and "snippet_a" not in row.detail
    # the shared prefix ends where the changed segment starts (the body's reaches into it)
    assert row.lcp_bytes is not None and kept.lcp_bytes is not None
    assert row.lcp_tokens is not None and kept.lcp_tokens is not None
    assert row.lcp_bytes <= kept.lcp_bytes and row.lcp_tokens <= kept.lcp_tokens
    assert "segment digests only" in row.detail["predecessor_body"]


def test_a_row_predecessor_on_an_automatic_cache_attributes_as_in_process() -> None:
    """OpenAI's automatic cache: a grown chat conversation, same attribution from the row."""
    one = state(chat_body(3), 0.0, "openai-chat")
    two_body = chat_body(4)
    total = one.request_tokens or 0
    usage = chat_usage(total + 30, 3072)
    kept, row = _both(one, two_body, 30.0, usage, OPENAI_OLD, "openai-chat")
    assert kept.verdict == "hit"
    assert row == kept


def test_a_row_predecessor_keeps_the_implicit_breakpoint_of_a_budgeted_cache() -> None:
    """A model with implicit breakpoints (the last user or tool message): the outline's
    roles place it as the body does."""
    policy = cache_rules("openai", "gpt-5.6")
    if not policy.breakpoint_budget:
        pytest.skip("no breakpoint budget in this policy table")
    one = state(chat_body(3, system=LONG_SYSTEM * 3), 0.0, "openai-chat")
    two_body = chat_body(4, system=LONG_SYSTEM * 3)
    usage = chat_usage(9000, 4096)
    kept, row = _both(one, two_body, 30.0, usage, policy, "openai-chat")
    assert row == kept


def test_a_row_of_a_call_without_session_id_keeps_its_conversation() -> None:
    """A call without session id is named by its first message: the row's outline keeps that
    digest, so another host's later turn of the conversation is its own (same conversation),
    not another conversation sharing the head."""
    one = state(anthropic_body(3), 0.0)
    record = UsageRecord(record_id="row-1", ts_utc=T0, wire_format="anthropic",
                         model="claude-sonnet-4-6", lineage=one.head_fingerprint,
                         request_fingerprint=one.fingerprint, segment_digests=_outline(one))
    earlier = call_from_record(record, one.head_fingerprint, count=lambda _: [])
    two = state(anthropic_body(4), 30.0)
    assert earlier.opening is not None and earlier.opening == opening_of(two.segmented)
    later = dataclasses.replace(earlier, ts=earlier.ts + 30, state=two, opening=opening_of(
        two.segmented))
    assert earlier.same_conversation(later)


def test_a_delta_outline_is_its_requests_outline_through_its_base() -> None:
    """A later turn's outline stored as a delta of its predecessor's row (format 2: the base
    row's id, the segments shared, then its own) decodes, through the base, to the outline
    stored whole, with this request's breakpoints (the base's moved on); it is shorter by
    the shared segments. Without a base, an unknown base, a base shorter than the shared
    count, or a chain deeper than MAX_DEPTH, there is no outline."""
    one = state(anthropic_body(3), 0.0)
    two = state(anthropic_body(4), 10.0)
    assert one.segmented is not None and two.segmented is not None
    assert two.segment_tokens is not None
    shared = common_segments(one, two.segmented.segments)
    assert shared >= MIN_SHARED_SEGMENTS
    base_id = "a" * 32
    delta = encode_outline(two.segmented.segments, two.segment_tokens, (base_id, shared))
    whole = _outline(two)
    assert delta is not None and delta.startswith(f"2|{base_id}|{shared}|")
    assert len(delta) < len(whole) - 30 * shared
    assert outline_base(delta) == base_id and outline_base(whole) is None
    UsageRecord(wire_format="anthropic", segment_digests=delta)  # the record accepts it
    base = decode_outline(_outline(one))
    got = decode_outline(delta, {base_id: base}.get)
    want = decode_outline(whole)
    assert got is not None and want is not None and base is not None
    assert (got.segments, got.tokens, got.opening, got.depth) == (
        want.segments, want.tokens, want.opening, 1)
    # the breakpoint on one's last message moved to two's: the shared segment has none now
    assert [i for i, s in enumerate(base.segments) if s.breakpoint] != [
        i for i, s in enumerate(got.segments) if s.breakpoint]
    assert decode_outline(delta) is None  # no resolver
    assert decode_outline(delta, lambda _: None) is None  # the base row is not there
    short = dataclasses.replace(base, segments=base.segments[:2], tokens=base.tokens[:2])
    assert decode_outline(delta, {base_id: short}.get) is None
    deep = dataclasses.replace(base, depth=MAX_DEPTH)
    assert decode_outline(delta, {base_id: deep}.get) is None


def test_another_process_reads_a_conversation_stored_as_deltas(tmp_path: Any) -> None:
    """A conversation recorded by one recorder (each turn's outline a delta of the previous
    row's, one in MAX_DEPTH + 1 whole), continued by a second recorder on the same ledger
    whose lineage rows are fewer than the chain (LINEAGE_DEPTH 2: the bases are fetched by
    id): the next turn is compared with the last row and attributed as in one process."""
    import stableprompt._recording._memory as memory_module
    from stableprompt import Ledger, Recorder
    from test_transport import FakeProvider, anthropic_sdk, conversation

    def send(client: Any, turns: int) -> None:
        client.messages.create(model="claude-sonnet-4-6", max_tokens=5, system=SYSTEM_BLOCKS,
                               messages=conversation(turns))

    fake, path = FakeProvider(), tmp_path / "calls.db"
    with Ledger(path) as ledger:
        first = Recorder(tokenizer="bytes/4", ledger=ledger)
        client = anthropic_sdk(fake, first)
        for turns in range(1, MAX_DEPTH + 8):
            send(client, turns)
        first.close()
        kinds = [r.segment_digests[:2] for r in first.records if r.segment_digests]
    # whole while a turn shares fewer than MIN_SHARED_SEGMENTS segments, then deltas, and
    # whole again after MAX_DEPTH deltas in a row
    runs = "".join("d" if k == "2|" else "w" for k in kinds).split("w")
    assert max(len(run) for run in runs) == MAX_DEPTH and kinds[-1] == "2|", kinds
    with pytest.MonkeyPatch.context() as patch, Ledger(path) as ledger:
        patch.setattr(memory_module, "LINEAGE_DEPTH", 2)
        second = Recorder(tokenizer="bytes/4", ledger=ledger)
        send(anthropic_sdk(fake, second), MAX_DEPTH + 8)
        second.close()
    (row,) = second.records
    assert row.predecessor_id == first.records[-1].record_id
    assert row.verdict == "hit" and row.cache_read_tokens
    assert row.predicted_cache_read_tokens == row.cache_read_tokens
    # compared segment by segment through the resolved outline, not by fingerprint alone
    assert "predecessor_body" not in row.verdict_detail, row.verdict_detail


def test_a_delta_made_whole_reads_as_the_delta_does() -> None:
    """`whole_outline` (what `Ledger.prune` writes into a kept row whose base goes) decodes
    to the delta's segments, tokens and opening, at depth 0; malformed input gives None."""
    from stableprompt._ledger._outline_text import whole_outline

    base_id = "b" * 32
    for turns in (3, 5, 9):
        one, two = state(anthropic_body(turns), 0.0), state(anthropic_body(turns + 1), 10.0)
        assert one.segmented is not None and two.segmented is not None
        assert two.segment_tokens is not None
        shared = common_segments(one, two.segmented.segments)
        delta = encode_outline(two.segmented.segments, two.segment_tokens, (base_id, shared))
        assert delta is not None
        base = _outline(one)
        made = whole_outline(delta, base)
        assert made == _outline(two)  # byte for byte what the recorder writes whole
        got, want = decode_outline(made), decode_outline(delta, {base_id: decode_outline(base)}.get)
        assert got is not None and want is not None
        assert (got.segments, got.tokens, got.opening, got.depth) == (
            want.segments, want.tokens, want.opening, 0)
        assert whole_outline(base, base) is None  # not a delta
        assert whole_outline(delta, delta) is None  # the base is not whole
        short = "|".join(["1", "pp", "1,2", "", "0" * 64, ""])
        assert whole_outline(delta, short) is None  # fewer segments than it shares
        assert whole_outline(delta.replace(f"|{shared}|", "|x|", 1), base) is None


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_pruning_keeps_a_kept_rows_outline_readable(tmp_path: Any, backend: str,
                                                    request: pytest.FixtureRequest) -> None:
    """A conversation stored as delta outlines, pruned in its middle: the kept rows whose
    bases went are rewritten whole first, so a second process continuing it still compares
    the next turn with the last row through its outline (not by fingerprint alone); the rows
    kept decode to the outlines they had. On SQLite and on a real PostgreSQL (skipped with
    the reason where none can start)."""
    import stableprompt._recording._memory as memory_module
    from stableprompt import Ledger, Recorder
    from stableprompt._ledger._outline_text import delta_base
    from test_transport import FakeProvider, anthropic_sdk, conversation

    def send(client: Any, turns: int) -> None:
        client.messages.create(model="claude-sonnet-4-6", max_tokens=5, system=SYSTEM_BLOCKS,
                               messages=conversation(turns))

    fake = FakeProvider()
    path = tmp_path / "calls.db" if backend == "sqlite" else request.getfixturevalue("pg_url")
    with Ledger(path, spill_dir=tmp_path) as ledger:
        first = Recorder(tokenizer="bytes/4", ledger=ledger)
        client = anthropic_sdk(fake, first)
        for turns in range(1, 14):
            send(client, turns)
        first.close()
        rows = {r.record_id: r for r in ledger.records()}

        def decoded(record_id: str) -> Any:
            text = rows[record_id].segment_digests
            return None if text is None else decode_outline(text, lambda b: decoded(b))

        before = {i: decoded(i) for i in rows}
        ordered = sorted(rows.values(), key=lambda r: r.ts_utc)
        cut_at = next(i for i, r in enumerate(ordered) if i > 2 and r.segment_digests
                      and delta_base(r.segment_digests) is not None)
        assert ordered[-1].segment_digests is not None
        assert delta_base(ordered[-1].segment_digests) is not None  # the chain crosses it
        assert ledger.prune(ordered[cut_at].ts_utc) == cut_at
        kept = {r.record_id: r for r in ledger.records()}
        assert set(kept) == {r.record_id for r in ordered[cut_at:]}
        first_kept = kept[ordered[cut_at].record_id].segment_digests
        assert first_kept is not None and first_kept.startswith("1|")  # made whole
        rows = kept
        for record_id in kept:  # every kept outline still reads, as before the prune
            got, want = decoded(record_id), before[record_id]
            assert got is not None and (got.segments, got.tokens, got.opening) == (
                want.segments, want.tokens, want.opening)
    with pytest.MonkeyPatch.context() as patch, Ledger(path, spill_dir=tmp_path) as ledger:
        patch.setattr(memory_module, "LINEAGE_DEPTH", 2)
        second = Recorder(tokenizer="bytes/4", ledger=ledger)
        send(anthropic_sdk(fake, second), 14)
        second.close()
    (row,) = second.records
    assert row.predecessor_id == ordered[-1].record_id
    assert row.verdict == "hit" and row.predicted_cache_read_tokens == row.cache_read_tokens
    assert "predecessor_body" not in row.verdict_detail, row.verdict_detail


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_pruning_resolves_a_kept_rows_chain_no_deeper_than_a_reader_does(
        tmp_path: Any, backend: str, request: pytest.FixtureRequest) -> None:
    """The rows kept by `Ledger.prune` are made whole through at most MAX_DEPTH bases, as
    `decode_outline` reads them: a chain of deltas written into the table directly (1,200
    rows, far deeper than any recorder writes) neither exhausts Python's stack nor becomes
    readable by the prune; a kept row MAX_DEPTH deltas deep is made whole, one deeper is
    left as it reads (no outline). Every kept row decodes after as it did before. On SQLite
    and a real PostgreSQL (skipped with the reason where none can start)."""
    from stableprompt import Ledger

    digests = "0123456789abcdef" * 2

    def rid(i: int) -> str:
        return f"{i:032x}"

    def whole(n: int) -> str:
        return f"1|{'p' * n}|{','.join(['5'] * n)}||{digests * n}|"

    def delta(base: int) -> str:
        return f"2|{rid(base)}|9|u|7||{digests}|"

    def record(i: int, text: str) -> UsageRecord:
        return UsageRecord(record_id=rid(i), ts_utc=T0 + timedelta(seconds=i),
                           wire_format="anthropic", provider="anthropic", lineage="l",
                           request_fingerprint=f"f{i}", segment_digests=text)

    def outlines(ledger: Ledger) -> dict[str, Any]:
        texts = {r.record_id: r.segment_digests for r in ledger.records()}

        def decoded(record_id: str, depth: int = 0) -> Any:  # as the recorder's reader
            text = texts.get(record_id)
            return None if text is None or depth > MAX_DEPTH else decode_outline(
                text, lambda base: decoded(base, depth + 1))

        return {i: None if (o := decoded(i)) is None else (o.segments, o.tokens, o.opening)
                for i in texts}

    chains = {1: 1200, 2000: MAX_DEPTH + 1, 3000: MAX_DEPTH + 2}  # first row: rows in chain
    records = [record(first + k, whole(10) if k == 0 else delta(first + k - 1))
               for first, rows in chains.items() for k in range(rows)]
    cut = {first: first + rows - 1 for first, rows in chains.items()}  # kept: each last row
    path = tmp_path / "calls.db" if backend == "sqlite" else request.getfixturevalue("pg_url")
    with Ledger(path, spill_dir=tmp_path) as ledger:
        assert ledger._insert_many(ledger._require_conn(), records) == []
        conn = ledger._require_conn()
        for first in chains:  # keep only each chain's last row: shift the others back
            conn.execute('UPDATE calls SET "ts_utc" = ? WHERE "record_id" BETWEEN ? AND ?',
                         ("2026-01-01T00:00:00.000000+00:00", rid(first), rid(cut[first] - 1)))
        before = outlines(ledger)
        assert ledger.prune(datetime(2026, 6, 1, tzinfo=UTC)) == len(records) - len(chains)
        after = outlines(ledger)
        assert set(after) == {rid(last) for last in cut.values()}
        assert {i: after[i] for i in after} == {i: before[i] for i in after}
        assert after[rid(cut[2000])] is not None  # MAX_DEPTH deep: made whole, still read
        assert after[rid(cut[1])] is None and after[rid(cut[3000])] is None
        raw = dict(conn.execute('SELECT "record_id", "segment_digests" FROM calls').fetchall())
        assert raw[rid(cut[2000])].startswith("1|")
        assert raw[rid(cut[3000])] == delta(cut[3000] - 1)  # left as it was


def test_prunings_outline_pass_scans_the_ledger_without_its_write_lock(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Ledger.prune` finds and resolves the kept rows to make whole (a scan of every kept
    row: about 0.85 s on 200,000 rows) while other writers may still write: only the
    rewrites take the write lock, then each batch of deletions, so a live ledger's writers
    are not held for the scan. A writer with no busy timeout writes during the resolution;
    the rows are made whole and pruned as before."""
    import sqlite3

    import stableprompt._ledger._ledger as ledger_module
    from stableprompt import Ledger
    from stableprompt._ledger._outline_text import made_whole

    digests = "0123456789abcdef" * 2
    path = tmp_path / "calls.db"
    records = [UsageRecord(record_id=f"{i:032x}", ts_utc=T0 + timedelta(seconds=i),
                           wire_format="anthropic", provider="anthropic", lineage="l",
                           request_fingerprint=f"f{i}", segment_digests=text)
               for i, text in ((1, f"1|{'p' * 10}|{','.join(['5'] * 10)}||{digests * 10}|"),
                               (2, f"2|{1:032x}|9|u|7||{digests}|"))]
    written: list[str] = []

    def made_whole_while_another_writes(text: str, outline_of: Any) -> str | None:
        other = sqlite3.connect(path, timeout=0, isolation_level=None)
        try:
            other.execute("INSERT INTO meta (key, value) VALUES ('probe', 'x')")
            written.append("probe")
        finally:
            other.close()
        return made_whole(text, outline_of)

    monkeypatch.setattr(ledger_module, "made_whole", made_whole_while_another_writes)
    with Ledger(path) as ledger:
        for record in records:
            assert ledger.write(record) == "committed"
        assert ledger.prune(T0 + timedelta(seconds=2)) == 1
        (kept,) = ledger.records()
    assert written == ["probe"]
    assert kept.segment_digests is not None and kept.segment_digests.startswith("1|")
