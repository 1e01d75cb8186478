"""What a wire renderer reads, and the body assembly every request format shares.

The ``_wire`` request formats render a prompt without knowing the builder's classes: they read
the members declared here (:class:`PromptParts` and what it holds), which
:class:`~stableprompt.RenderedPrompt`, :class:`~stableprompt.PinnedHead`,
:class:`~stableprompt.Message` and :class:`~stableprompt.Tool` satisfy structurally. Each
``wire_memo`` is a per-object dict where a format keeps the bytes it serialized once (keys are
format-prefixed, e.g. ``"anthropic"``), so a later render reuses them. A prompt's
``history_memo`` (owned by the conversation) holds per-history state: joined prefix bytes and
fingerprint chain states, each entry validated by the chained digest of the last message it
covers (:func:`history_entry`), never by object identity.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from .._canonical import canonical_json, raw_json
from .._exceptions import BreakpointError, CanonicalizationError, HistoryError, InputError
from .._segment import chain, tag
from ._schema_order import param_json
from ._segmenter import SegmentBuilder

__all__ = [
    "APPEND_LOCK",
    "BREAKPOINT_TTLS",
    "AssistantTurn",
    "Datas",
    "Envelope",
    "Fingerprints",
    "HeadParts",
    "MessageParts",
    "PromptParts",
    "ToolParts",
    "ToolsParts",
    "TurnPart",
    "a_or_an",
    "body_pieces",
    "check_model",
    "check_reasoning",
    "check_ttl",
    "chosen",
    "covered",
    "envelope",
    "extend_prefix",
    "history_entry",
    "joined",
    "memo",
    "param_bytes",
    "param_datas",
    "request_fingerprints",
    "response_text",
    "role_groups",
    "segment_datas",
    "store_entry",
    "tool_fields",
    "tool_json",
]

_T = TypeVar("_T")

BREAKPOINT_TTLS = ("5m", "1h")
"""The TTL labels a cache breakpoint placed through the builder may ask for."""


class TurnPart(NamedTuple):
    """One piece of an assistant turn, in response order.

    Attributes:
        kind: ``text`` (``value`` a str), ``tool_call`` (``value`` the call in the format's
            own shape) or ``reasoning`` (``value`` the block / item exactly as received:
            Anthropic ``thinking`` / ``redacted_thinking`` blocks, Responses ``reasoning``
            items, or ``{"reasoning_content": ...}`` for a Chat message's field).
        pointer: JSON pointer of the piece in the response body (``/content/1``,
            ``/output/0``, ``/choices/0/message/tool_calls/0``).
        value: See ``kind``.
        signature: An opaque signature the provider attached to this piece and needs back
            unchanged with it (Gemini ``thoughtSignature`` on a ``functionCall`` or text
            part), as received; ``None`` without one.
    """

    kind: str
    pointer: str
    value: Any
    signature: str | None = None


class AssistantTurn(NamedTuple):
    """What a provider response says the assistant did (each format's ``assistant_turn``).

    Attributes:
        text: The generated text (text blocks / output text joined), ``None`` when empty.
        tool_calls: Tool calls in the format's own shape, every key as received (validated
            by the builder's ``tool_call_of`` in that shape, so a typo is named).
        reasoning: JSON pointers of reasoning content in the response (Anthropic
            ``thinking`` blocks, Responses ``reasoning`` items, Chat ``reasoning_content``).
        parts: Text, tool calls and reasoning in response order, with their pointers.
        incomplete: Why the response was cut short (Anthropic ``stop_reason``
            ``max_tokens``, Chat ``finish_reason`` ``length``, Responses ``status``
            ``incomplete`` and its reason), ``None`` for a complete turn.
    """

    text: str | None
    tool_calls: tuple[Mapping[str, Any], ...]
    reasoning: tuple[str, ...]
    parts: tuple[TurnPart, ...] = ()
    incomplete: str | None = None

    @classmethod
    def of(cls, parts: Iterable[TurnPart], incomplete: str | None = None) -> AssistantTurn:
        """The turn made of ``parts`` (in response order): ``text`` is their text values
        joined (``None`` when empty), ``tool_calls`` their tool-call values, ``reasoning``
        their reasoning pointers, each in order."""
        kept = tuple(parts)
        return cls("".join(p.value for p in kept if p.kind == "text") or None,
                   tuple(p.value for p in kept if p.kind == "tool_call"),
                   tuple(p.pointer for p in kept if p.kind == "reasoning"), kept, incomplete)


class ToolParts(Protocol):
    """One canonical tool: what its wire shapes are made of."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str | None: ...
    @property
    def strict(self) -> bool | None: ...
    @property
    def input_schema(self) -> dict[str, Any]:
        """A fresh copy of the canonical JSON Schema."""
        ...
    @property
    def schema_bytes(self) -> bytes:
        """The canonical JSON Schema's bytes (keys sorted, ``properties`` in authored order:
        ``_prompt._tool_schema``)."""
        ...


class ToolsParts(Protocol):
    """The head's tools, in canonical order."""

    def __iter__(self) -> Iterator[ToolParts]: ...
    def __len__(self) -> int: ...


class HeadParts(Protocol):
    """The pinned head: tools, then system text blocks."""

    @property
    def tools(self) -> ToolsParts: ...
    @property
    def system(self) -> tuple[str, ...]: ...
    @property
    def system_ttls(self) -> tuple[str | None, ...]:
        """User-placed breakpoint TTL label per system block (``None``: no breakpoint)."""
        ...
    @property
    def head_ttl(self) -> str:
        """TTL label of the SDK's end-of-head breakpoint."""
        ...
    @property
    def fingerprint(self) -> str: ...
    @property
    def tokens(self) -> int | None:
        """Total head tokens, ``None`` without a tokenizer."""
        ...
    @property
    def wire_memo(self) -> dict[str, Any]: ...


class MessageParts(Protocol):
    """One history message in the provider-neutral canonical form (see ``_prompt._messages``)."""

    @property
    def role(self) -> str: ...
    @property
    def breakpoint(self) -> str | None: ...
    @property
    def wire_blocks(self) -> tuple[Mapping[str, Any], ...]:
        """The canonical content blocks (read-only: never mutate them)."""
        ...
    @property
    def wire_memo(self) -> dict[str, Any]: ...


class PromptParts(Protocol):
    """A rendered prompt: head, history and the volatile tail."""

    @property
    def head(self) -> HeadParts: ...
    @property
    def messages(self) -> tuple[MessageParts, ...]: ...
    @property
    def message_list(self) -> Sequence[MessageParts]:
        """The history for indexing in O(1) without a copy: its first
        :attr:`message_count` items are :attr:`messages` (it may hold later ones: never take
        its ``len``)."""
        ...
    @property
    def message_count(self) -> int:
        """``len(messages)``."""
        ...
    @property
    def tail_texts(self) -> tuple[str, ...]:
        """Tail slots as ``<slot>\\nvalue\\n</slot>`` texts, in declaration order."""
        ...
    @property
    def previous_breakpoint(self) -> int | None:
        """Index of the message the previous render's history breakpoint was on."""
        ...
    @property
    def cache_write(self) -> bool:
        """Whether the SDK's end-of-history breakpoint ends the history (the request writes
        what it adds: the default) or stays at :attr:`previous_breakpoint` (it reads the
        cache and writes nothing new: ``summarization_request(cache_write=False)``)."""
        ...
    @property
    def history_memo(self) -> dict[str, Any]:
        """A memo owned by the conversation (shared by its renders): formats keep per-history
        state here (joined bytes of a stable prefix, chain states), each entry validated by
        :meth:`message_digest` (see :func:`history_entry`)."""
        ...
    def message_digest(self, index: int) -> str:
        """The chained prefix digest (hex) through history message ``index``: it names head +
        messages ``[0, index]`` (O(1))."""
        ...


def memo(owner: HeadParts | MessageParts, key: str, build: Callable[[], _T]) -> _T:
    """Serialize a piece once per owner and key (``owner.wire_memo[key]``)."""
    cache = owner.wire_memo
    if key not in cache:
        cache[key] = build()
    value: _T = cache[key]
    return value


class _RawSchema:
    """A :class:`ToolParts` whose ``input_schema`` is its canonical bytes as raw JSON, so a
    sorted-keys serialization of a tool entry keeps the schema's ``properties`` order."""

    __slots__ = ("_tool",)

    def __init__(self, tool: ToolParts) -> None:
        self._tool = tool

    @property
    def name(self) -> str:
        return self._tool.name

    @property
    def description(self) -> str | None:
        return self._tool.description

    @property
    def strict(self) -> bool | None:
        return self._tool.strict

    @property
    def input_schema(self) -> Any:
        return raw_json(self._tool.schema_bytes)

    @property
    def schema_bytes(self) -> bytes:
        return self._tool.schema_bytes


def tool_json(shape: Callable[[ToolParts], Any], tool: ToolParts, **extra: Any) -> bytes:
    """Canonical bytes of a format's tool entry ``shape(tool)`` (plus top-level ``extra``
    members, a ``cache_control`` marker): keys sorted, the schema embedded as its canonical
    bytes, so its ``properties`` keep their authored order (``_prompt._tool_schema``: that
    order is what a model writes)."""
    entry = shape(_RawSchema(tool))
    entry.update(extra)
    return canonical_json(entry)


def tool_fields(tool: ToolParts, schema_key: str) -> dict[str, Any]:
    """``{"name", "description"?, <schema_key>, "strict"?}``: the fields every format's tool
    entry shares (``description`` omitted when ``None``, ``strict`` only when set)."""
    shaped: dict[str, Any] = {"name": tool.name}
    if tool.description is not None:
        shaped["description"] = tool.description
    shaped[schema_key] = tool.input_schema
    if tool.strict is not None:
        shaped["strict"] = tool.strict
    return shaped


def chosen(items: list[Any], choice: int | None, *, member: str, many: str) -> Any:
    """The alternative ``choice`` of a response's list at ``/member`` (Chat ``choices``,
    Gemini ``candidates``): the only one when ``choice`` is ``None``; ``None`` when there is no
    such index (the caller names what it needed there).

    Raises:
        HistoryError: several alternatives and no ``choice`` (``history-choices``, the message
            ``many`` followed by how to choose), or ``choice`` not an int >= 0
            (``history-type``).
    """
    if choice is None:
        if len(items) > 1:
            raise HistoryError(f"{many}: pass choice=<index> to say which one continues the "
                               "conversation", code="history-choices", pointer=f"/{member}")
        choice = 0
    if type(choice) is not int or choice < 0:
        raise HistoryError(f"choice must be an int >= 0, got {choice!r}", code="history-type",
                           pointer=f"/{member}")
    return items[choice] if choice < len(items) else None


def response_text(part: Mapping[str, Any], where: str, what: str) -> str:
    """The ``text`` of a response's text part at response pointer ``where``.

    Raises:
        HistoryError: It is not a string (code ``history-response``, pointer
            ``<where>/text``); ``what`` names the part in the message (``"a text block's"``).
    """
    text = part.get("text")
    if not isinstance(text, str):
        raise HistoryError(f"{what} 'text' must be a string, got {type(text).__name__}",
                           code="history-response", pointer=f"{where}/text")
    return text


def a_or_an(word: str) -> str:
    """``word`` with its indefinite article: ``"an openai-chat"``, ``"a gemini"`` (by its
    first letter: the wire-format names are read as words)."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"


def check_model(model: object) -> None:
    """Raises:
    InputError: ``model`` is not a non-empty str (code ``render-param``, pointer ``/model``).
    """
    if not isinstance(model, str) or not model:
        raise InputError(f"model must be a non-empty str, got {model!r}", code="render-param",
                         pointer="/model")


def check_ttl(ttl: str | None, where: str) -> str | None:
    """Validate a breakpoint TTL label (``"5m"``/``"1h"``) or ``None``; returns it.

    Raises:
        BreakpointError: any other value (code ``breakpoint-ttl``, segment ``where``).
    """
    if ttl is not None and (not isinstance(ttl, str) or ttl not in BREAKPOINT_TTLS):
        raise BreakpointError(
            f"cache breakpoint TTL must be one of {BREAKPOINT_TTLS}, got {ttl!r}",
            code="breakpoint-ttl", segment=where)
    return ttl


def check_reasoning(prompt: PromptParts, wire_format: str, start: int = 0) -> None:
    """Refuse to render reasoning content into a format that cannot carry it.

    Reasoning blocks (``{"type": "reasoning", "format", "item"}``, see ``_prompt._messages``)
    are replayed only to the format that produced them: an Anthropic ``thinking`` signature
    or a Responses ``encrypted_content`` means nothing to another provider, and dropping it
    silently would change what the model sees. Messages before ``start`` are known to hold
    none of another format (the format's history memo holds their bytes: serializing such a
    block raises), so a turn scans only its new messages.

    Raises:
        HistoryError: a message holds reasoning of another format (code
            ``history-reasoning-format``, pointer ``/messages/<i>/content/<j>``, segment
            ``messages[<i>]``; the first such block); add such responses with
            ``reasoning="drop"`` to send the history to another format.
    """
    messages = prompt.message_list
    for i in range(start, prompt.message_count):
        message = messages[i]
        if message.role != "assistant":
            continue
        for j, block in enumerate(message.wire_blocks):
            if block.get("type") == "reasoning" and (fmt := str(block["format"])) != wire_format:
                raise HistoryError(
                    f"messages[{i}] holds {fmt} reasoning content, which "
                    f"{a_or_an(wire_format)} request cannot carry (its signature / encrypted "
                    f"content is only valid at {fmt}): render this history to {fmt}, or add "
                    "such responses with reasoning='drop'",
                    code="history-reasoning-format", pointer=f"/messages/{i}/content/{j}",
                    segment=f"messages[{i}]")


def body_pieces(fields: Mapping[str, bytes], params: Mapping[str, Any]) -> list[bytes]:
    """The pieces of a body: pre-serialized top-level fields (their own bytes objects) and
    canonicalized params, in sorted key order, with the separators between them.

    Raises:
        InputError: a param names a field the renderer sets (code ``render-param-clash``).
        CanonicalizationError: a param value is not canonical JSON (pointer ``/<param>...``).
    """
    merged: Mapping[str, bytes] = fields
    if params:
        clash = sorted(fields.keys() & params.keys())
        if clash:
            raise InputError(f"parameter(s) {', '.join(clash)} are set by the renderer; pass "
                             "them as the named arguments", code="render-param-clash")
        merged = {**fields, **{key: param_bytes(key, value) for key, value in params.items()}}
    pieces: list[bytes] = []
    separator = b"{"
    for key in sorted(merged):
        pieces.append(separator)
        separator = b","
        pieces.append(_KEYS.get(key) or _key(key))
        pieces.append(merged[key])
    pieces.append(b"}" if pieces else b"{}")
    return pieces


_HOLE = bytes(bytearray(b"\0history\0"))
"""Stands for the history array among an envelope's pieces (found by identity: an object of
its own, never interned; canonical JSON has no raw NUL byte either)."""

Envelope = tuple[tuple[bytes, ...], tuple[bytes, ...]]
"""The pieces of a body before and after its history array (:func:`envelope`)."""


def envelope(cache: dict[Any, Envelope], key: Any, fields: Callable[[], Mapping[str, bytes]],
             history_key: str, params: Mapping[str, Any]) -> Envelope:
    """The pieces of the body before and after its ``history_key`` array: the other top-level
    fields (``fields()``, made on a miss) and ``params`` in sorted key order
    (:func:`body_pieces`), kept in ``cache`` under ``key`` and the params' canonical
    bytes (what a turn sends around its history rarely changes: the model, ``max_tokens``,
    the head's tools and system, the same params). The pieces are the fields' own bytes
    objects (the head's tools and system are shared, not copied per entry) and small
    separators: a body is ``b"".join([*before, *history, *after])``.

    Raises:
        InputError: a param names a field the renderer sets (code ``render-param-clash``).
        CanonicalizationError: a param value is not canonical JSON (pointer ``/<param>...``).
    """
    full = (key, tuple([(name, param_bytes(name, value)) for name, value in params.items()])
            if params else ())
    found = cache.get(full)
    if found is None:
        pieces = body_pieces({**fields(), history_key: _HOLE}, params)
        at = next(i for i, piece in enumerate(pieces) if piece is _HOLE)
        found = (tuple(pieces[:at]), tuple(pieces[at + 1:]))
        if len(cache) >= _MAX_ENTRIES:
            cache.clear()
        cache[full] = found
    return found


_KEYS: dict[str, bytes] = {}


def _key(key: str) -> bytes:
    """``"key":`` (the body's top-level keys are few: serialized once per process)."""
    found = _KEYS.get(key)
    if found is None:
        found = canonical_json(key) + b":"
        if len(_KEYS) < 256:
            _KEYS[key] = found
    return found


_STRINGS: dict[str, bytes] = {}
"""Canonical bytes of the str params seen (model ids, mostly), bounded: every render sends
its model and the fingerprint hashes it again."""


def param_bytes(key: str, value: Any) -> bytes:
    """A param's canonical bytes: keys sorted, except the ``properties`` of a response
    schema it holds (``response_format``, ``text.format``, ...), which keep the order they
    were written in: the order the model writes the fields
    (:func:`~stableprompt._wire._schema_order.param_json`).

    Raises:
        CanonicalizationError: not canonical JSON (pointer ``/<key>...``).
    """
    if type(value) is str:
        found = _STRINGS.get(value)
        if found is not None:
            return found
    try:
        data = param_json(key, value)
        if type(value) is str and len(value) <= 256 and len(_STRINGS) < 256:
            _STRINGS[value] = data
        return data
    except CanonicalizationError as exc:
        raise CanonicalizationError(exc.message, code=exc.code,
                                    pointer=f"/{key}{exc.pointer or ''}") from exc


def joined(parts: Sequence[bytes]) -> bytes:
    """A JSON array of pre-serialized values."""
    return b"[" + b",".join(parts) + b"]"


# -- per-history memo: incremental bodies and fingerprints ---------------------------------------

Datas = tuple[tuple[str, bytes], ...]
"""Segment ``(kind, bytes)`` pairs, as the request segmenter makes them (markers removed)."""

_MAX_ENTRIES = 32


def covered(prompt: PromptParts, count: int) -> str:
    """The token naming history ``[0, count)`` of ``prompt``: the chained digest of its last
    message (the head's fingerprint when ``count`` is 0)."""
    return prompt.message_digest(count - 1) if count else prompt.head.fingerprint


def history_entry(prompt: PromptParts, key: str) -> tuple[int, Any] | None:
    """``(count, payload)`` stored under ``key`` when it still describes ``prompt``'s first
    ``count`` messages (checked in O(1) through the chained digest of message ``count - 1``,
    so a compacted, forked or rebased history never reuses a stale entry); else ``None``."""
    entry = prompt.history_memo.get(key)
    if entry is None:
        return None
    count, token, payload = entry
    if count > prompt.message_count or covered(prompt, count) != token:
        return None
    return count, payload


def store_entry(prompt: PromptParts, key: str, count: int, payload: Any) -> None:
    """Remember ``payload`` for ``prompt``'s first ``count`` messages under ``key``."""
    cache = prompt.history_memo
    if key not in cache and len(cache) >= _MAX_ENTRIES:
        cache.clear()
    cache[key] = (count, covered(prompt, count), payload)


APPEND_LOCK = threading.Lock()
"""Held while a memo buffer is checked and extended in place."""


def extend_prefix(prefix: tuple[bytearray, int] | None,
                  parts: Sequence[bytes]) -> tuple[bytearray, int]:
    """``prefix`` (a buffer and the length of it that is ours) with ``parts`` appended,
    comma-separated. Appends in place (amortized O(new)) when nobody extended the buffer
    past our length; otherwise copies it (a fork, an older prompt, or another thread that
    went another way): bytes before a holder's length never change."""
    if prefix is None:
        buffer, length = bytearray(), 0
    else:
        buffer, length = prefix
    addition = b",".join(parts)
    if not addition and not parts:
        return buffer, length
    if length and parts:
        addition = b"," + addition
    with APPEND_LOCK:
        if len(buffer) != length:
            buffer = bytearray(memoryview(buffer)[:length])
        try:
            buffer += addition
        except BufferError:  # another thread is joining a view of it into its body
            buffer = bytearray(memoryview(buffer)[:length]) + addition
    return buffer, length + len(addition)


def segment_datas(marker_key: str, fill: Callable[[SegmentBuilder], object]) -> Datas:
    """The ``(kind, bytes)`` of the segments ``fill`` adds, made by the request segmenter
    itself, so they are exactly what :func:`segment_request` gives for the same body part."""
    builder = SegmentBuilder(marker_key)
    fill(builder)
    return tuple((s.kind, s.data) for s in builder.specs)


def param_datas(names: tuple[str, ...], model: str, params: Mapping[str, Any]) -> Datas:
    """The ``param`` segments of a rendered body: ``model`` and the cache-key ``params``
    present, in the format's cache-key order (their canonical bytes, as in the body).
    Remembered (bounded) when every param is a str (model ids, cache keys: hashable, and
    equal only when their bytes are): a turn keys its cached head chain state by them."""
    key = None
    if type(model) is str and all(type(value) is str for value in params.values()):
        key = (names, model, tuple(params.items()))
        found = _PARAM_DATAS.get(key)
        if found is not None:
            return found
    values = {**params, "model": model}
    datas = tuple(("param", param_bytes(n, values[n])) for n in names if n in values)
    if key is not None:
        if len(_PARAM_DATAS) >= 256:
            _PARAM_DATAS.clear()
        _PARAM_DATAS[key] = datas
    return datas


_PARAM_DATAS: dict[tuple[tuple[str, ...], str, tuple[tuple[str, Any], ...]], Datas] = {}


def _chained(state: bytes | None, datas: Datas) -> bytes | None:
    for kind, data in datas:
        state = chain(state, kind, data)
    return state


Fingerprints = Callable[[], tuple[str, str]]
"""Gives a rendered body's ``(fingerprint, head_fingerprint)``, computed when first called."""

ChainMessage = Callable[[bytes, MessageParts], bytes]
"""``(state, message) -> state``: the chain state after a message's request segments."""


def request_fingerprints(prompt: PromptParts, key: str, params: Datas,
                         head: Callable[[], Datas], message: ChainMessage,
                         tail: Datas) -> tuple[str, str]:
    """``(fingerprint, head_fingerprint)`` of a rendered body, equal to what
    :func:`segment_request` gives for it, chained incrementally.

    ``params`` are the cache-key param segments, ``head`` the tool and system segments
    (made once per head under ``key``), ``message`` chains a message's segments (made by the
    caller from its memoized wire bytes), ``tail`` the segments after history. The chain
    state after the head is kept per head and params; the state after history in the history
    memo, so a turn chains only the messages appended since the last render.
    """
    owner = prompt.head
    states_key = key + "-chain"
    states: dict[Datas, tuple[bytes, str, str]] | None = owner.wire_memo.get(states_key)
    if states is None:
        states = owner.wire_memo[states_key] = {}
    found_head = states.get(params)
    if found_head is None:
        if len(states) >= _MAX_ENTRIES:
            states.clear()
        after_head = _chained(_chained(None, params), memo(owner, key + "-segments", head))
        assert after_head is not None  # params always hold the model
        found_head = states[params] = (after_head, f"{key}-chain:{after_head.hex()}",
                                       tag(after_head))
    after, entry_key, head_fingerprint = found_head
    found = history_entry(prompt, entry_key)
    count, state = found if found is not None else (0, after)
    messages, total = prompt.message_list, prompt.message_count
    if count < total:
        for i in range(count, total):
            state = message(state, messages[i])
        store_entry(prompt, entry_key, total, state)
    final = _chained(state, tail)
    assert final is not None
    return tag(final), head_fingerprint


def role_groups(messages: Iterable[tuple[str, list[bytes]]], tail: list[bytes]
                ) -> list[tuple[str, list[bytes]]]:
    """Consecutive ``(role, blocks)`` of one role as one entry, the tail's blocks at the end
    of the last ``user`` entry (or an entry of their own): the history of a format whose
    roles must alternate and whose tool results ride in user turns (Gemini ``contents``,
    Converse ``messages``)."""
    groups: list[tuple[str, list[bytes]]] = []
    for role, blocks in messages:
        if groups and groups[-1][0] == role:
            groups[-1][1].extend(blocks)
        else:
            groups.append((role, list(blocks)))
    if tail:
        if groups and groups[-1][0] == "user":
            groups[-1][1].extend(tail)
        else:
            groups.append(("user", list(tail)))
    return groups
