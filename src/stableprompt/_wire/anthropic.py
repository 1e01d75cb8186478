"""Anthropic Messages API (wire format ``"anthropic"``): everything the SDK knows about it.

Requests: endpoint, cache-key params, tool and block shapes, breakpoint placement, body
assembly and segmenting. Responses: usage parsing and stream accumulation.

Semantics (PROVIDERS.md §1; docs.claude.com/en/docs/build-with-claude/prompt-caching and
``anthropic-sdk-python`` ``types/usage.py`` / ``types/message.py``): ``input_tokens`` is only the
uncached remainder after the last breakpoint; the total prompt is
``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``. The
``cache_creation`` object (``ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens``) is a
TTL breakdown whose sum *equals* ``cache_creation_input_tokens``: it is never added on top.

Also used for Anthropic-on-Bedrock via InvokeModel and Anthropic-compatible servers, which
return the same ``usage`` shape.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._canonical import canonical_json, checked_json, loads, unescape_pointer
from .._exceptions import CaptureError, HistoryError, InputError, UsageParseError
from .._segment import chain_pieces
from .._sse import SSEEvent
from .._usage import CacheUsage
from ._base import Clock, SSEStreamAccumulator
from ._breakpoints import Place, check_sdk_marks
from ._breakpoints import breakpoints as place_breakpoints
from ._fields import (
    TTLSplit,
    UsageKeys,
    child,
    exclusive_usage,
    opt_obj,
    req_int,
    response_usage,
)
from ._parts import (
    APPEND_LOCK,
    BREAKPOINT_TTLS,
    AssistantTurn,
    Datas,
    Envelope,
    Fingerprints,
    HeadParts,
    MessageParts,
    PromptParts,
    ToolParts,
    TurnPart,
    check_model,
    check_reasoning,
    envelope,
    history_entry,
    joined,
    memo,
    param_bytes,
    param_datas,
    request_fingerprints,
    response_text,
    segment_datas,
    store_entry,
    tool_fields,
    tool_json,
)
from ._segmenter import SegmentBuilder, require_list, tool_label

__all__ = [
    "WIRE_FORMAT",
    "AnthropicStreamAccumulator",
    "assistant_turn",
    "parse_response",
    "parse_usage",
]

WIRE_FORMAT = "anthropic"

_WRITE_KEY = "cache_creation_input_tokens"
_KEYS = UsageKeys("input_tokens", "cache_read_input_tokens", _WRITE_KEY, "output_tokens")


def parse_usage(usage: object, pointer: str = "") -> CacheUsage:
    """Normalize an Anthropic ``usage`` object.

    Args:
        usage: The ``usage`` object of a Message (or the accumulated ``usage`` of a stream):
            ``{"input_tokens", "cache_creation_input_tokens"?, "cache_read_input_tokens"?,
            "cache_creation"?: {"ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens"},
            "output_tokens"?, ...}``. A ``dict`` or an SDK ``Usage`` model.
        pointer: JSON pointer of ``usage`` inside its document (prefix of error pointers).

    Returns:
        CacheUsage with ``uncached = input_tokens``, ``cache_read = cache_read_input_tokens``,
        ``cache_write = cache_creation_input_tokens`` (or the TTL split's sum when only the
        split was sent) and the 5m/1h split. The total is known only when both cache fields
        were sent.

    Raises:
        UsageParseError: ``input_tokens`` missing (``usage-missing``), a count negative
            (``usage-negative``) or not an integer (``usage-type``); ``pointer`` names it.
    """
    return exclusive_usage(
        WIRE_FORMAT, usage, pointer, what="Anthropic usage", keys=_KEYS, split=_ttl_split
    )


def _ttl_split(obj: Mapping[str, Any], pointer: str) -> TTLSplit | None:
    """The ``cache_creation`` TTL split; its sum is the write (the docs: they are equal)."""
    ttl = opt_obj(obj, "cache_creation", pointer)
    if ttl is None:
        return None
    ttl_pointer = child(pointer, "cache_creation")
    write_5m = req_int(ttl, "ephemeral_5m_input_tokens", ttl_pointer)
    write_1h = req_int(ttl, "ephemeral_1h_input_tokens", ttl_pointer)
    return TTLSplit(write_5m, write_1h, write_5m + write_1h)


def parse_response(body: object) -> CacheUsage:
    """Normalize the usage of a non-streaming Messages response body (``body["usage"]``).

    Raises:
        UsageParseError: ``usage-missing`` at ``/usage`` when the body has none (e.g. an error
            body), otherwise as :func:`parse_usage` with pointers under ``/usage``.
    """
    return response_usage(body, parse_usage, "Anthropic response body")


class AnthropicStreamAccumulator(SSEStreamAccumulator):
    """Accumulate usage from a Messages SSE stream.

    Rule (PROVIDERS.md §1.2, as the SDK's ``lib/streaming/_messages.py`` does): start from
    ``message_start.message.usage``, then overwrite it with every non-null field of each
    ``message_delta.usage``. Counts are cumulative: never summed. The TTL split exists only in
    ``message_start``: when a ``message_delta`` changes ``cache_creation_input_tokens``, the
    split no longer describes the final count, so the 5m/1h fields become unknown (``None``;
    the raw ``cache_creation`` object stays in ``raw``). ``response_id`` is ``message.id``.
    Content-bearing events (for TTFT): ``content_block_delta`` of any kind (text, tool input
    JSON, thinking) and the start of a ``tool_use`` block. A stream that ended after
    ``message_start`` but before its terminal ``message_stop`` keeps the input side and reports
    ``output_tokens`` as unknown (a ``message_delta`` is not final until ``message_stop``).
    """

    wire_format = WIRE_FORMAT

    def __init__(self, *, clock: Clock | None = None, start: float | None = None) -> None:
        super().__init__(clock=clock, start=start)
        self._usage: dict[str, Any] | None = None
        # key -> (byte offset of the event that last set it, pointer of its usage object)
        self._sources: dict[str, tuple[int, str]] = {}
        self._saw_delta = False
        self._stopped = False
        self._split_stale = False

    @property
    def terminal(self) -> bool:
        """See :attr:`StreamAccumulator.terminal`."""
        return self._stopped

    def _event(self, event: SSEEvent) -> None:
        if event.event == "ping" or (
            self.first_content_at is not None and event.event == "content_block_delta"
        ):
            return  # nothing left to learn from these: skip decoding
        obj = self._decode_object(event.data, event.offset)
        if obj is None:
            return
        kind = obj.get("type", event.event)
        if kind == "content_block_delta":
            self._mark_content()
        elif kind == "content_block_start":
            block = obj.get("content_block")
            if isinstance(block, Mapping) and block.get("type") in ("tool_use", "server_tool_use"):
                self._mark_content()
        elif kind == "message_start":
            message = obj.get("message")
            if isinstance(message, Mapping):
                self._identify(message, "id", "model")
                usage = message.get("usage")
                if isinstance(usage, Mapping):
                    self._usage = dict(usage)
                    self._sources = {key: (event.offset, "/message/usage") for key in usage}
        elif kind == "message_delta":
            usage = obj.get("usage")
            if isinstance(usage, Mapping):
                self._saw_delta = True
                if self._usage is None:  # no (decodable) message_start: input side unknown
                    return
                written = usage.get(_WRITE_KEY)
                if written is not None and written != self._usage.get(_WRITE_KEY, written):
                    self._split_stale = True
                for key, value in usage.items():
                    if value is not None:
                        self._usage[key] = value
                        self._sources[key] = (event.offset, "/usage")
        elif kind == "message_stop":
            self._stopped = True
        elif kind == "error":
            error = obj.get("error")
            self.error = str(error.get("type", error)) if isinstance(error, Mapping) else str(error)

    def _parse(self, usage: dict[str, Any]) -> CacheUsage:
        """The accumulated ``usage`` object, normalized (a hook for dialects that read
        Anthropic-shaped streams with other semantics)."""
        return parse_usage(usage)

    def _finish(self) -> CacheUsage:
        if self._usage is None:
            if not (self._saw_delta or self._stopped):
                return self._unknown("stream ended before message_start: no usage reported")
            return self._unknown("the stream has no decodable message_start: input counts "
                                 "unknown", interrupted=not self._stopped)
        try:
            usage = self._parse(self._usage)
        except UsageParseError as exc:
            key = unescape_pointer((exc.pointer or "/").split("/")[1])
            offset, base = self._sources.get(key, (None, ""))
            exc.pointer = f"{base}{exc.pointer}"
            exc.offset = offset
            raise
        if self._split_stale:
            usage = usage.model_copy(
                update={"cache_write_5m_tokens": None, "cache_write_1h_tokens": None})
        if not self._saw_delta:
            return self._partial(usage, "stream ended before message_delta: output_tokens unknown")
        if not self._stopped:  # a later message_delta may still have raised output_tokens
            return self._partial(usage, "stream ended before message_stop: output_tokens unknown")
        return usage


# -- requests: endpoint, cache key, shapes, breakpoints, body assembly, segmenting -------------

ENDPOINT = "/v1/messages"
"""URL path of the Messages API."""

#: Request parameters that are part of the cache key, ``model`` first.
CACHE_KEY_PARAMS = ("model", "tool_choice", "thinking", "output_config", "speed", "output_format")

HISTORY_KEY = "messages"
"""The body key holding the conversation history."""

CONTENT_KEYS = ("system", "messages", "cache_control")
"""Top-level body keys besides the cache-key params and ``tools`` that this format reads."""

MARKER_KEY = "cache_control"
"""The breakpoint marker's key on a tool, system block or content block."""
MARKER_BYTES = MARKER_KEY.encode()

#: Lookback window: "The system checks at most 20 positions per breakpoint, counting the
#: breakpoint itself as the first" (platform.claude.com prompt-caching docs, 2026).
LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4


def cache_control(ttl: str) -> dict[str, str]:
    """The ``cache_control`` marker: ``{"type": "ephemeral"}`` means 5 minutes,
    ``"ttl": "1h"`` asks for one hour (platform.claude.com prompt-caching docs)."""
    return {"type": "ephemeral"} if ttl == "5m" else {"ttl": ttl, "type": "ephemeral"}


def _tail_blocks(texts: tuple[str, ...]) -> tuple[bytes, ...]:
    """The text blocks of the tail ``texts`` (checked when the tail was rendered)."""
    return tuple([checked_json({"text": t, "type": "text"}) for t in texts])


def text_block_bytes(text: str, *, cache_ttl: str | None = None) -> bytes:
    """Canonical bytes of a text block, optionally with ``cache_control``."""
    block: dict[str, Any] = {"text": text, "type": "text"}
    if cache_ttl is not None:
        block[MARKER_KEY] = cache_control(cache_ttl)
    return canonical_json(block)


def tool(t: ToolParts) -> dict[str, Any]:
    """A ``tools[]`` entry: ``{"name", "description", "input_schema"}`` (plus ``"strict"``
    when set). Source: ``anthropic.types.ToolParam`` (SDK 2.14)."""
    return tool_fields(t, "input_schema")


def tool_name(entry: dict[str, Any]) -> Any:
    """A sent ``tools[]`` entry's name (any value: the caller checks it is a str)."""
    return entry.get("name")


def tool_schema(entry: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """Where a sent ``tools[]`` entry keeps its input schema: ``(entry, "input_schema")``,
    ``None`` when it has none (a server tool)."""
    return (entry, "input_schema") if isinstance(entry.get("input_schema"), dict) else None


def block(canonical: Mapping[str, Any]) -> dict[str, Any]:
    """The content block for one canonical block (``text``, ``tool_use``, ``tool_result``,
    a kept ``thinking`` / ``redacted_thinking`` block, replayed as received, and a tool change
    as a ``tool_addition`` / ``tool_removal`` block referencing a tool of ``tools[]``).

    Source: tool_use / tool_result block shapes, platform.claude.com/docs/en/agents-and-tools
    /tool-use/implement-tool-use; tool changes: anthropic-sdk-python
    ``types/beta/beta_request_tool_addition_block_param.py`` (``{"type": "tool_addition",
    "tool": {"type": "tool_reference", "name": ...}}``) and ``lib/tools/_beta_runner.py``.
    """
    kind = canonical["type"]
    if kind == "text":
        return {"text": canonical["text"], "type": "text"}
    if kind == "reasoning":  # a thinking / redacted_thinking block, exactly as received
        if canonical["format"] != WIRE_FORMAT:
            raise HistoryError(f"{canonical['format']} reasoning content cannot be sent to "
                               "Anthropic", code="history-reasoning-format")
        return dict(canonical["item"])
    if kind == "tool_call":
        return {"id": canonical["id"], "input": canonical["arguments"], "name": canonical["name"],
                "type": "tool_use"}
    if kind == "tool_change":  # in a role: "system" message (beta TOOL_CHANGES_BETA)
        return {"tool": {"name": canonical["name"], "type": "tool_reference"},
                "type": "tool_" + canonical["change"]}
    out = {"content": canonical["content"], "tool_use_id": canonical["tool_call_id"],
           "type": "tool_result"}
    if canonical.get("is_error"):
        out["is_error"] = True
    return out


def message_blocks(message: MessageParts) -> tuple[bytes, ...]:
    """A message's content blocks (canonical bytes, no marker), serialized once (its
    canonical blocks were checked when the message was made: ``checked_json``)."""
    cache = message.wire_memo
    found: tuple[bytes, ...] | None = cache.get(WIRE_FORMAT)
    if found is None:
        found = cache[WIRE_FORMAT] = tuple([checked_json(block(b)) for b in message.wire_blocks])
    return found


_MARKERS = {ttl: b'{"' + MARKER_BYTES + b'":' + canonical_json(cache_control(ttl)) + b","
            for ttl in BREAKPOINT_TTLS}
"""``{"cache_control":<marker>,`` per TTL: the start of a marked block whose keys all sort
after ``cache_control`` (every block shape the SDK renders)."""


def block_with_breakpoint(message: MessageParts, index: int, ttl: str) -> bytes:
    """Block ``index`` of ``message`` with a ``cache_control`` marker of ``ttl``: its stored
    bytes with the marker spliced in as the first key where that is the sorted place (no
    key before it sorts lower), else serialized again."""
    data = message_blocks(message)[index]
    first = data[2:data.find(b'"', 2)]  # the first (lowest) key, as written
    if data.startswith(b'{"') and first > MARKER_BYTES and b"\\" not in first:
        return _MARKERS[ttl] + data[1:]
    marked = block(message.wire_blocks[index])
    marked[MARKER_KEY] = cache_control(ttl)
    return checked_json(marked)


def breakpoints(prompt: PromptParts, history_ttl: str, budget: int, *,
                known: Sequence[tuple[int, str]] = (), scan_from: int = 0,
                short: frozenset[Place] = frozenset()) -> tuple[dict[Place, str], dict[Place, str]]:
    """Anthropic's breakpoint places: the shared rule (:func:`._breakpoints.breakpoints`)
    with the :data:`LOOKBACK_BLOCKS` window and the head's own TTL.

    Raises:
        BreakpointError: see :func:`._breakpoints.breakpoints`.
    """
    return place_breakpoints(prompt, history_ttl, budget, known=known, scan_from=scan_from,
                             short=short, lookback=LOOKBACK_BLOCKS)


TAIL_ROLES = ("user", "system")
"""Roles the tail's message may have: ``user`` (the tail slots as user text after the last
user turn, the ``<system-reminder>``-style form every model accepts) or ``system`` (a
mid-conversation system message)."""


def tail_role_for(prompt: PromptParts, *, supported: bool, asked: str | None) -> str:
    """The role of the tail's message: ``asked``, or when ``None`` ``system`` where the model
    has mid-conversation system messages (``supported``, from ``_policy.model_features``)
    and the placement rules allow it, else ``user``.

    Placement (platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages):
    a system message must follow a ``user`` turn, cannot be ``messages[0]``, cannot directly
    follow another system message (the tail then joins it) and must be last or followed by an
    ``assistant`` turn (the tail is last).

    Raises:
        InputError: ``asked`` is not a role of :data:`TAIL_ROLES`, or is ``system`` where the
            placement rules forbid it (code ``render-tail-role``, naming the rule).
    """
    if asked is not None and asked not in TAIL_ROLES:
        raise InputError(f"tail_role must be 'user', 'system' or None (automatic), got "
                         f"{asked!r}", code="render-tail-role", pointer="/tail_role")
    if not prompt.tail_texts:
        return "user"
    count = prompt.message_count
    last = _role(prompt.message_list[count - 1]) if count else None
    if asked == "user" and last != "system":
        return "user"
    if last == "system":  # a tool change: the tail joins it (it must stay last)
        if asked == "user":
            raise InputError("tail_role='user' cannot be placed: the history ends with a tool "
                             "change (a system message), which must be last or followed by an "
                             "assistant turn; use tail_role=None or 'system'",
                             code="render-tail-role", segment=f"messages[{count}]")
        return "system"
    if last == "user":
        return "system" if asked == "system" or supported else "user"
    if asked is None:
        return "user"
    where = ("the history is empty and a system message cannot be messages[0]" if last is None
             else "the history ends with an assistant turn and a system message must follow a "
             "user turn")
    raise InputError(f"tail_role='system' cannot be placed: {where}; use tail_role='user' or "
                     "None (automatic), or append the user turn first", code="render-tail-role",
                     segment=f"messages[{count}]")


def _message(role: str, blocks: Sequence[bytes]) -> bytes:
    return b"".join((b'{"content":[', b",".join(blocks), _ROLE_TAILS[role]))


_ROLE_TAILS = {role: b'],"role":' + canonical_json(role) + b"}"
               for role in ("user", "assistant", "system")}


def render(prompt: PromptParts, *, model: str, max_tokens: int, history_ttl: str,
           max_breakpoints: int, params: Mapping[str, Any],
           short: frozenset[Place] = frozenset(),
           tail_role: str = "user") -> tuple[bytes, Fingerprints | None]:
    """The Messages request body (tools -> system -> messages, tail last) as exact bytes,
    and what gives its ``(fingerprint, head_fingerprint)``, as :func:`segment_request` would,
    chained incrementally when first called (``None`` when ``params`` hold a field the
    segmenter reads as content: the segmented body decides).

    See :meth:`RenderedPrompt.to_anthropic <stableprompt.RenderedPrompt.to_anthropic>` for
    the arguments and the breakpoint rules; ``prompt`` is already checked non-empty;
    ``short`` are the SDK places not to spend (see :func:`breakpoints`); ``tail_role`` is
    the role of the tail's message (checked by the caller, see :func:`tail_role_for`): the
    tail blocks join the last history message when it has that role, else they are a
    message of their own at the end. The history's blocks are the same bytes either way.

    Raises:
        InputError: bad ``max_tokens`` (code ``render-param``) or a param clash.
        BreakpointError: bad ``history_ttl`` / ``max_breakpoints``, or see :func:`breakpoints`.
    """
    check_model(model)
    if type(max_tokens) is not int or max_tokens < 0:
        raise InputError(f"max_tokens must be an int >= 0, got {max_tokens!r}",
                         code="render-param", pointer="/max_tokens")
    check_sdk_marks(history_ttl, max_breakpoints, MAX_BREAKPOINTS, "Anthropic's budget")
    head, messages, count = prompt.head, prompt.message_list, prompt.message_count
    stable = _last_group(messages, count)
    found = history_entry(prompt, _BODY_KEY)
    if found is not None and not _reusable(messages, count, found[0], stable):
        found = None
    done, (prefix, known) = found if found is not None else (0, (None, ()))
    check_reasoning(prompt, WIRE_FORMAT, done)

    marks, user = breakpoints(prompt, history_ttl, max_breakpoints, known=known,
                              scan_from=done, short=short)
    head_fields, envelopes = _head_fields(head, tuple(
        [(place, ttl) for place, ttl in marks.items() if place[0] != "message"]))

    # The role groups before the last one (user text and tool results share the user role)
    # join the memo's prefix with their user-placed breakpoints only; the last group (the
    # end-of-history breakpoint) and the tail are rendered every time, and the group of a
    # carried breakpoint is spliced into the prefix with its marker.
    tail = _tail_blocks(prompt.tail_texts)
    groups = _groups(messages, done, count)
    stable_groups = [g for g in groups if g[2] <= stable]
    if stable_groups or found is None:
        known = (*known, *((mi, m.breakpoint) for mi in range(done, stable)
                           if (m := messages[mi]).breakpoint))
        prefix = _extend(prefix, [_group(messages, g, user) for g in stable_groups],
                         [g[1] for g in stable_groups])
        store_entry(prompt, _BODY_KEY, stable, (prefix, known))
    assert prefix is not None
    fresh: list[bytes] = []
    tail_in_group = False
    if groups:  # the last group (it ends past ``stable``), with the tail when it has its role
        last = groups[-1]
        tail_in_group = last[0] == tail_role
        fresh.append(_group(messages, last, marks, tail if tail_in_group else ()))
    if tail and not tail_in_group:
        fresh.append(_message(tail_role, tail))

    before, after = envelope(envelopes, (type(model), model, max_tokens), lambda: {
        "max_tokens": param_bytes("max_tokens", max_tokens),
        "model": param_bytes("model", model), **head_fields}, "messages", params)
    history: list[bytes | memoryview] = [*before, b"["]
    buffer, length, offsets, firsts, ngroups = prefix
    view = memoryview(buffer)
    carry = prompt.previous_breakpoint
    if (carry is not None and 0 <= carry < stable and ("message", carry) in marks
            and ("message", carry) not in user):
        g = bisect.bisect_right(firsts, carry, 0, ngroups) - 1
        following = g + 1 < ngroups
        group = (_role(messages[firsts[g]]), firsts[g], firsts[g + 1] if following else stable)
        history.append(view[:offsets[g]])
        history.append(_group(messages, group, marks))
        history.append(view[offsets[g + 1] - 1 if following else length:length])
    elif length:
        history.append(view[:length])
    if length and fresh:
        history.append(b",")
    history.append(b",".join(fresh))
    history.append(b"]")
    history.extend(after)
    content = b"".join(history)
    if _SEGMENTED_FIELDS & params.keys():
        return content, None

    def fingerprints() -> tuple[str, str]:
        # what the segmenter makes of a tail text block: {"role":"user","block":<block>}
        return request_fingerprints(
            prompt, WIRE_FORMAT, param_datas(CACHE_KEY_PARAMS, model, params),
            lambda: _head_datas(head), _chain_message,
            tuple([("message", _ROLE_HEADS[tail_role] + block + b"}") for block in tail]))

    return content, fingerprints


_BODY_KEY = "anthropic-body"
"""History memo key: the joined role groups before the last one (user-placed breakpoints
only) with each group's byte offset and first message, and the user-placed breakpoints."""

Prefix = tuple[bytearray, int, list[int], list[int], int]
"""``(buffer, length, group offsets, group first messages, group count)``: the parts of the
buffer and lists up to ``length`` / ``group count`` are this holder's, and never change."""


def _extend(prefix: Prefix | None, parts: list[bytes], firsts: list[int]) -> Prefix:
    """``prefix`` with the groups ``parts`` (first messages ``firsts``) appended, in place
    when nobody went further (amortized O(new)), else on a copy (see ``extend_prefix``)."""
    if prefix is None:
        prefix = (bytearray(), 0, [], [], 0)
    buffer, length, offsets, starts, count = prefix
    with APPEND_LOCK:
        if len(buffer) != length or len(offsets) != count:
            buffer = bytearray(memoryview(buffer)[:length])
            offsets, starts = offsets[:count], starts[:count]
        at = length + 1 if length else 0  # where the first new group starts
        for part, first in zip(parts, firsts, strict=True):
            offsets.append(at)
            starts.append(first)
            at += len(part) + 1
        grown = b",".join(parts)
        if length and parts:
            grown = b"," + grown
        try:
            buffer += grown
        except BufferError:  # another thread is joining a view of it into its body
            buffer = bytearray(memoryview(buffer)[:length]) + grown
    return buffer, length + len(grown), offsets, starts, count + len(parts)


def _group(messages: Sequence[MessageParts], group: tuple[str, int, int],
           marks: Mapping[Place, str], extra: Sequence[bytes] = ()) -> bytes:
    """One role group's message, its last blocks marked per ``marks``, ``extra`` blocks
    (the tail) appended."""
    role, first, end = group
    parts: list[bytes] = []
    for mi in range(first, end):
        message = messages[mi]
        wire = message_blocks(message)
        mark = marks.get(("message", mi)) if marks else None
        at = _markable(message) if mark else None
        if mark and at is not None:
            parts.extend(wire[:at])
            parts.append(block_with_breakpoint(message, at, mark))
            parts.extend(wire[at + 1:])
        else:
            parts.extend(wire)
    parts.extend(extra)
    return _message(role, parts)


def _markable(message: MessageParts) -> int | None:
    """Index of the last block of ``message`` that may carry ``cache_control`` (thinking
    blocks cannot: "Thinking blocks cannot be marked directly with cache_control", so a
    breakpoint on a message ending in one goes on the block before it), or ``None``."""
    blocks = message.wire_blocks
    for index in range(len(blocks) - 1, -1, -1):
        if blocks[index].get("type") != "reasoning":
            return index
    return None


def _role(message: MessageParts) -> str:
    role = message.role
    return role if role in ("assistant", "system") else "user"


def _groups(messages: Sequence[MessageParts], start: int,
            stop: int) -> list[tuple[str, int, int]]:
    """``(role, first, end)`` of the role groups of ``messages[start:stop]``."""
    groups: list[tuple[str, int, int]] = []
    for mi in range(start, stop):
        role = _role(messages[mi])
        if groups and groups[-1][0] == role:
            groups[-1] = (role, groups[-1][1], mi + 1)
        else:
            groups.append((role, mi, mi + 1))
    return groups


def _last_group(messages: Sequence[MessageParts], count: int) -> int:
    """First message of the last role group of ``messages[:count]`` (it holds the
    end-of-history breakpoint and may still grow); the groups before it never change."""
    first = count - 1
    if first < 0:
        return 0
    role = _role(messages[first])
    while first and _role(messages[first - 1]) == role:
        first -= 1
    return first


def _reusable(messages: Sequence[MessageParts], count: int, done: int, stable: int) -> bool:
    """A memo prefix of ``done`` messages serves this render of ``messages[:count]``: it ends
    before ``stable`` and at a role-group boundary (after a compaction the next message may
    share its role)."""
    if done > stable:
        return False
    return not (0 < done < count
                and _role(messages[done - 1]) == _role(messages[done]))


HeadFields = tuple[dict[str, bytes], dict[Any, Envelope]]
"""The ``system`` and ``tools`` fields for a set of head marks, and the body envelopes
around them (``_parts.envelope``)."""


def _head_fields(head: Any, marks: tuple[tuple[Place, str], ...]) -> HeadFields:
    """The ``system`` and ``tools`` fields with the head's breakpoints ``marks``, joined once
    per head and set of marks (the marks on the head rarely change), and the cache of the
    body envelopes around them."""
    cache: dict[tuple[tuple[Place, str], ...], HeadFields] = memo(
        head, "anthropic-head-fields", dict)
    found = cache.get(marks)
    if found is not None:
        return found
    tool_bytes = list(_tool_bytes(head))
    system_bytes = [text_block_bytes(t) for t in head.system]
    tools = list(head.tools)
    for (where, index), ttl in marks:
        if where == "tool":
            tool_bytes[index] = tool_json(tool, tools[index], cache_control=cache_control(ttl))
        elif where == "system":
            system_bytes[index] = text_block_bytes(head.system[index], cache_ttl=ttl)
    fields: dict[str, bytes] = {}
    if system_bytes:
        fields["system"] = joined(system_bytes)
    if tool_bytes:
        fields["tools"] = joined(tool_bytes)
    if len(cache) >= 16:
        cache.clear()
    found = cache[marks] = (fields, {})
    return found


_SEGMENTED_FIELDS = frozenset({"tools", "system", "messages"})


def _tool_bytes(head: HeadParts) -> tuple[bytes, ...]:
    """Each tool's ``tools[]`` entry as canonical bytes, serialized once per head."""
    return memo(head, "anthropic-tools", lambda: tuple(
        tool_json(tool, t) for t in head.tools))


def _head_datas(head: Any) -> Datas:
    tools = _tool_bytes(head)
    body = loads(b'{"messages":[],"system":' + joined([text_block_bytes(t) for t in head.system])
                 + b',"tools":' + joined(list(tools)) + b"}")
    return segment_datas(MARKER_KEY, lambda b: segment(body, b))


_ROLE_HEADS = {role: b'{"role":' + canonical_json(role) + b',"block":'
               for role in ("user", "assistant", "system")}


def _chain_message(state: bytes, message: MessageParts) -> bytes:
    # The segmenter makes one segment per block: {"role":<group role>,"block":<block>}, the
    # block in its (sorted) key order as rendered, with no marker (it is removed) and no other
    # top-level key to strip; chained here from the block's memoized bytes without building
    # that wrapped copy. tests/test_incremental_render.py checks it against the segmenter.
    head = _ROLE_HEADS[_role(message)]
    for data in message_blocks(message):
        state = chain_pieces(state, "message", (head, data, b"}"))
    return state


def segment(body: Mapping[str, Any], b: SegmentBuilder) -> None:
    """Add the segments of a Messages body: tools, system, then one per content block.

    A top-level ``cache_control`` (automatic caching) marks the last cacheable block.
    """
    segment_head(body, b)
    for i, message in enumerate(require_list(body, "messages", required=True)):
        segment_item(b, message, i, False)
    top = body.get(MARKER_KEY)
    if isinstance(top, Mapping):
        b.mark_last(str(top.get("ttl", "5m")))


def segment_head(body: Mapping[str, Any], b: SegmentBuilder) -> None:
    """Add the segments before the history: tools, then system."""
    for i, entry in enumerate(require_list(body, "tools", required=False)):
        b.add("tool", f"tools[{i}]", entry, f"/tools/{i}", tool_label(entry))
    system = body.get("system")
    if isinstance(system, list):
        for i, item in enumerate(system):
            b.add("system", f"system[{i}]", item, f"/system/{i}")
    elif system is not None:
        b.add("system", "system", system, "/system")


def segment_item(b: SegmentBuilder, message: Any, i: int, leading: bool) -> bool:
    """Add the segments of ``messages[i]`` (one per content block); they depend on the
    message and its index only (``leading`` is unused here: Anthropic has no leading system
    messages), so the result is always False."""
    if not isinstance(message, Mapping):
        raise CaptureError("message must be an object", code="capture-shape",
                           pointer=f"/messages/{i}")
    b.content("message", f"messages[{i}]", f"/messages/{i}", message.get("role"),
              message.get("content"))
    return False


_LEGACY_USER_ID_SESSION = re.compile(r"_session_([0-9A-Za-z-]{8,})$")
"""Claude Code before 2.1.x: ``user_<sha256>_account_<uuid>_session_<uuid>``."""


def session_hint(body: Mapping[str, Any]) -> str | None:
    """``metadata.user_id``: names a session (or a user) when the harness sets it.

    Claude Code packs its session id into the value: a JSON object string
    ``{"device_id": ..., "account_uuid": ..., "session_id": ...}`` (2.1.332, captured by
    ``tests/test_harness_cli.py``; the same id as its ``X-Claude-Code-Session-Id`` header), or
    ``user_<hash>_account_<uuid>_session_<uuid>`` (earlier versions): the session id is
    returned, not the ~150-character value (whose device id is the same for every session
    of a machine). Any other string is returned as sent.
    """
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("user_id"), str):
        return None
    value = str(metadata["user_id"])
    if value.startswith("{"):
        try:
            packed = json.loads(value)
        except ValueError:
            return value
        session = packed.get("session_id") if isinstance(packed, dict) else None
        return session if isinstance(session, str) and session else value
    legacy = _LEGACY_USER_ID_SESSION.search(value)
    return legacy.group(1) if legacy is not None else value


# -- cache diagnostics (beta) -------------------------------------------------------------------

BETA_HEADER = "anthropic-beta"
"""The request header naming beta features (comma-separated values)."""

DIAGNOSTICS_BETA = "cache-diagnosis-2026-04-07"
"""``anthropic-beta`` value enabling ``diagnostics.previous_message_id`` (``anthropics/skills``
``prompt-caching.md``; ``anthropic`` SDK ``types/beta/beta_diagnostics_param.py``)."""

DIAGNOSTIC_EVENTS = frozenset({"message_start", "message_delta"})
"""Stream events that may carry the response's ``diagnostics`` object."""


def diagnostics_fields(previous_response_id: str | None) -> dict[str, Any]:
    """Body fields asking for a cache comparison with ``previous_response_id`` (``null`` on
    a lineage's first turn opts in without a comparison)."""
    return {"diagnostics": {"previous_message_id": previous_response_id}}


def diagnostics_request(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The diagnostics a request body asks for (its ``diagnostics`` object), or ``None``."""
    value = body.get("diagnostics")
    return {"diagnostics": dict(value)} if isinstance(value, Mapping) else None


_INCOMPLETE_STOPS = frozenset({"max_tokens", "model_context_window_exceeded"})
"""``stop_reason`` values of a turn cut short (platform.claude.com/docs/en/api/messages)."""


def assistant_turn(response: Mapping[str, Any]) -> AssistantTurn:
    """The assistant turn of a Messages response: ``text`` blocks joined, ``tool_use`` blocks
    as tool calls (``input`` kept as the arguments object), ``thinking`` /
    ``redacted_thinking`` blocks as reasoning (kept exactly, with their ``signature``), all
    in response order in ``parts``; ``incomplete`` is the ``stop_reason`` of a cut turn.

    Raises:
        HistoryError: ``role`` is not ``assistant`` (pointer ``/role``), ``content`` is not a
            list of blocks, a text block's ``text`` is not a string (pointer
            ``/content/<i>/text``), or a block type is not one of those (pointer
            ``/content/<i>``); code ``history-response``.
    """
    role = response.get("role", "assistant")
    if role != "assistant":
        raise HistoryError(f"a Messages response must have role 'assistant', got {role!r}",
                           code="history-response", pointer="/role")
    content = response.get("content")
    if not isinstance(content, list):
        raise HistoryError("an Anthropic Messages response needs a 'content' list",
                           code="history-response", pointer="/content")
    parts: list[TurnPart] = []
    for i, block in enumerate(content):
        where = f"/content/{i}"
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            parts.append(TurnPart("text", where, response_text(block, where, "a text block's")))
        elif kind == "tool_use":
            # every key: a typo is named (tool_call_of)
            parts.append(TurnPart("tool_call", where, dict(block)))
        elif kind in ("thinking", "redacted_thinking"):
            parts.append(TurnPart("reasoning", where, dict(block)))
        else:
            raise HistoryError(f"unsupported content block type {kind!r} in a Messages "
                               "response", code="history-response", pointer=where)
    stop = response.get("stop_reason")
    return AssistantTurn.of(parts, f"stop_reason {stop}" if stop in _INCOMPLETE_STOPS else None)
