"""The ordering contract as a builder: PromptBuilder -> PinnedHead -> Conversation.

Order is tools -> system -> history -> tail. The head (tools + system) is frozen once built;
history is append-only and kept as the exact canonical bytes; volatile tail slots are rendered
last and never persisted; compaction replaces a span of history, never the head.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import date
from types import MappingProxyType
from typing import Any

from .._canonical import canonical_json, checked_json, loads
from .._exceptions import (
    BreakpointError,
    CompactionCostWarning,
    HistoryError,
    InputError,
    PinnedHeadError,
    TailSlotError,
    ToolError,
    VolatileContentError,
    VolatileContentWarning,
)
from .._frozen import frozen_instance
from .._public import public
from .._segment import (
    Segment,
    SegmentSpec,
    Snapshot,
    build_segments,
    fingerprint_of,
    new_spec,
    sum_tokens,
)
from .._tokens import SegmentTokenCounter, Tokenizer, get_tokenizer
from .._volatility import head_strings, scan_volatile
from .._wire._parts import check_ttl
from .._wire.anthropic import text_block_bytes
from ._advice import CompactionAdvice, TurnLog, advise_compaction, served_by, worth_advising
from ._compaction import CacheEvent
from ._messages import (
    Message,
    ToolCall,
    assistant_message,
    system_message,
    tool_change_message,
    tool_result_message,
    user_message,
)
from ._rendered import RenderedPrompt, allowed_tools_note, tail_text
from ._responses import response_body, response_message
from ._suggest import check_keywords
from ._tools import Tool, ToolSet

__all__ = ["Conversation", "PinnedHead", "PromptBuilder"]

DEFAULT_SUMMARY_INSTRUCTION = (
    "Summarize the conversation so far for your own later use: the user's goals, decisions "
    "made, tool results that still matter, and open questions. Be complete but concise."
)
_TEXT_PREFIX_BYTES = len(b'{"text":')
#: Tail slot names the SDK uses itself.
RESERVED_SLOTS = ("allowed_tools", "summarize")
_HISTORY_FORMAT = "stableprompt-history/1"


def _counter(tokenizer: Tokenizer | str | None) -> SegmentTokenCounter | None:
    if tokenizer is None:
        return None
    resolved = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
    return SegmentTokenCounter(resolved)


def _tail_data(slot: str, value: str) -> bytes:
    """A tail slot's segment bytes ``{"slot","text"}``. For exact str names and values the
    one thing that can fail is a lone surrogate, which orjson refuses; the checked
    serialization (:func:`canonical_json`: also the path of anything else) then names it
    (``canonical-surrogate``).

    Raises:
        CanonicalizationError: a lone surrogate, or a str subclass (``canonical-type``).
    """
    if type(slot) is str and type(value) is str:
        try:
            return checked_json({"slot": slot, "text": value})
        except TypeError:  # orjson.JSONEncodeError: the checks below name it
            pass
    return canonical_json({"slot": slot, "text": value})


def _count(counter: SegmentTokenCounter | None, data: bytes) -> int | None:
    return None if counter is None else counter.count(data)


class PromptBuilder:
    """Collects the pinned head (system text blocks + tools) and the volatile tail slots.

    Example::

        head = (PromptBuilder().system("You are a careful agent.").tools([search])
                .tail_slot("now").freeze())
        # the same, as keywords:
        head = PromptBuilder(system="You are a careful agent.", tools=[search],
                             tail_slots=["now"]).freeze()

    Args:
        system: Shorthand for :meth:`system`: one text, or several text blocks in order.
        tools: Shorthand for :meth:`tools`.
        tail_slots: Shorthand for :meth:`tail_slot`: slot names (all required), or a mapping
            of slot name -> required.
        tokenizer: Tokenizer or encoding name for segment token counts (default
            ``"cl100k_base"``); ``None`` disables counting (``Segment.tokens`` is ``None``).
        strict: Raise :class:`VolatileContentError` instead of warning when the head holds
            volatile content at :meth:`freeze`.

    Raises:
        InputError: as the methods the shorthands stand for.
        ArgumentNameError: an unknown keyword such as ``sytem=`` (code ``argument-name``); the
            message names the right spelling.
    """

    @check_keywords("PromptBuilder", aliases={"tail": ("tail_slots",), "slots": ("tail_slots",),
                                              "tool": ("tools",), "encoding": ("tokenizer",)})
    def __init__(self, *, system: str | Sequence[str] | None = None,
                 tools: Iterable[Tool | Mapping[str, Any]] | ToolSet | None = None,
                 tail_slots: Sequence[str] | Mapping[str, bool] | None = None,
                 tokenizer: Tokenizer | str | None = "cl100k_base",
                 strict: bool = False) -> None:
        self._system: list[tuple[str, str | None]] = []
        self._tools: list[Tool] = []
        self._slots: dict[str, bool] = {}
        self._tokenizer = tokenizer
        self._strict = strict
        self._frozen = False
        if system is not None:
            if not isinstance(system, (str, list, tuple)):
                raise PinnedHeadError(f"system takes a str or a list of str, got "
                                      f"{type(system).__name__}", code="head-system",
                                      segment="system[0]")
            for text in ([system] if isinstance(system, str) else system):
                self.system(text)
        if tools is not None:
            if isinstance(tools, (Tool, Mapping)):
                raise ToolError(f"tools= takes a list of tools, got one {type(tools).__name__}:"
                                " write tools=[x]", code="tool-shape-unknown",
                                tool=getattr(tools, "name", None) if isinstance(tools, Tool)
                                else None)
            self.tools(tools)
        if tail_slots is not None:
            if isinstance(tail_slots, str):
                raise TailSlotError("tail_slots takes a list of slot names, not a str "
                                    f"(did you mean tail_slots=[{tail_slots!r}]?)",
                                    code="tail-slot-name")
            slots = (tail_slots.items() if isinstance(tail_slots, Mapping)
                     else ((name, True) for name in tail_slots))
            for name, required in slots:
                self.tail_slot(name, required=required)

    def _check_open(self) -> None:
        if self._frozen:
            raise PinnedHeadError(
                "this builder was frozen; build a new PromptBuilder for a new head (lineage)",
                code="head-frozen",
            )

    def system(self, text: str, *, cache_ttl: str | None = None) -> PromptBuilder:
        """Append a system text block. ``cache_ttl`` (``"5m"``/``"1h"``) places a user
        breakpoint on it. Returns the builder."""
        self._check_open()
        if not isinstance(text, str) or not text:
            raise PinnedHeadError("system text must be a non-empty str", code="head-system",
                                  segment=f"system[{len(self._system)}]")
        self._system.append((text, check_ttl(cache_ttl, f"system[{len(self._system)}]")))
        return self

    def tool(self, tool: Tool | Mapping[str, Any]) -> PromptBuilder:
        """Add one tool (a :class:`Tool` or a provider-shaped dict). Returns the builder."""
        self._check_open()
        self._tools.append(tool if isinstance(tool, Tool) else Tool.from_dict(tool))
        return self

    def tools(self, tools: Iterable[Tool | Mapping[str, Any]] | ToolSet) -> PromptBuilder:
        """Add several tools (Tool objects or provider-shaped tool dicts, see
        :meth:`Tool.from_dict`). Order does not matter: the head sorts tools by name.

        Raises:
            ToolError: ``tools`` is one tool or one dict rather than a list of them (code
                ``tool-shape-unknown``; the message names ``.tool(x)`` and ``.tools([x])``).
        """
        if isinstance(tools, (Tool, Mapping, str, bytes)) or not isinstance(tools, Iterable):
            raise ToolError(
                f"tools() takes a list of tools, got one {type(tools).__name__}: write "
                ".tool(x) or .tools([x])", code="tool-shape-unknown")
        for tool in tools:
            self.tool(tool)
        return self

    def tail_slot(self, name: str, *, required: bool = True) -> PromptBuilder:
        """Declare a volatile tail slot, filled at ``render(tail={name: text})``."""
        self._check_open()
        if not isinstance(name, str) or not name.isidentifier():
            raise TailSlotError(f"tail slot name must be an identifier, got {name!r}",
                                code="tail-slot-name")
        if name in self._slots:
            raise TailSlotError(f"tail slot {name!r} declared twice", code="tail-slot-duplicate")
        if name in RESERVED_SLOTS:
            raise TailSlotError(f"tail slot name {name!r} is reserved by the SDK",
                                code="tail-slot-reserved", segment=f"tail:{name}")
        self._slots[name] = required
        return self

    def freeze(self, *, head_ttl: str = "5m", strict: bool | None = None) -> PinnedHead:
        """Freeze the head. After this the builder refuses changes.

        Args:
            head_ttl: TTL of the cache breakpoint the SDK places at the end of the head
                (``"5m"`` or ``"1h"``).
            strict: Raise instead of warning on volatile content in the head; ``None`` keeps
                the builder's ``strict``.

        Raises:
            DuplicateToolError / ToolError: invalid tools.
            VolatileContentError: volatile content in the head and ``strict=True``.

        Warns:
            VolatileContentWarning: volatile content in the head (default), one per match,
                with segment, kind, character start and byte offset.
        """
        self._check_open()
        if strict is not None and type(strict) is not bool:
            raise InputError(f"strict must be a bool, got {type(strict).__name__}",
                             code="head-param")
        if head_ttl is None:
            raise BreakpointError("head_ttl must be '5m' or '1h', got None",
                                  code="breakpoint-ttl", segment="head")
        head = PinnedHead(
            ToolSet(self._tools),
            tuple(self._system),
            dict(self._slots),
            tokenizer=self._tokenizer,
            head_ttl=check_ttl(head_ttl, "head") or "5m",
            strict=self._strict if strict is None else strict,
        )
        self._frozen = True
        return head


class PinnedHead:
    """The frozen head: tools (canonical order) then system blocks. Immutable.

    Heads pickle and copy (rebuilt from their tools, system blocks and slots, with the same
    bytes and fingerprint).

    Attributes:
        tools: The ToolSet.
        system: System text blocks, in order.
        tail_slots: Declared tail slot names -> required (read-only mapping).
        segments: Head segments (``tool:<name>`` then ``system[i]``).
        data: Head bytes (``data[s.start:s.end]`` is segment ``s``).
        fingerprint: Head fingerprint ``sp2:<hex>``: names the cache lineage.
        head_ttl: TTL label of the SDK's end-of-head breakpoint.
        wire_memo: Head-level wire bytes (tools per format), serialized once by the ``_wire``
            renderers; not part of equality or pickles.
    """

    __slots__ = ("_counter", "_digest", "_fingerprint", "_frozen", "_system_ttls", "_tokenizer",
                 "_tokens", "data", "head_ttl", "segments", "system", "tail_slots", "tools",
                 "wire_memo")

    tools: ToolSet
    system: tuple[str, ...]
    tail_slots: Mapping[str, bool]
    segments: tuple[Segment, ...]
    data: bytes
    head_ttl: str
    _system_ttls: tuple[str | None, ...]
    _digest: bytes
    _fingerprint: str
    _tokens: int | None
    _counter: SegmentTokenCounter | None
    _tokenizer: Tokenizer | str | None
    wire_memo: dict[str, Any]
    _frozen: bool

    def __init__(self, tools: ToolSet, system: tuple[tuple[str, str | None], ...],
                 tail_slots: Mapping[str, bool], *, tokenizer: Tokenizer | str | None,
                 head_ttl: str, strict: bool, lint: bool = True) -> None:
        counter = _counter(tokenizer)
        specs = [SegmentSpec("tool", f"tool:{t.name}", t.canonical_bytes, f"/tools/{i}",
                             None, t.name) for i, t in enumerate(tools)]
        specs += [SegmentSpec("system", f"system[{i}]", text_block_bytes(text), f"/system/{i}",
                              ttl) for i, (text, ttl) in enumerate(system)]
        counts = [_count(counter, s.data) for s in specs]
        segments, data, digest = build_segments(specs, token_counts=counts)
        for name, value in (("tools", tools), ("system", tuple(t for t, _ in system)),
                            ("_system_ttls", tuple(ttl for _, ttl in system)),
                            ("tail_slots", MappingProxyType(dict(tail_slots))),
                            ("segments", segments), ("data", data), ("_digest", digest),
                            ("_counter", counter), ("_tokenizer", tokenizer),
                            ("head_ttl", head_ttl), ("wire_memo", {}),
                            ("_fingerprint", fingerprint_of(segments)),
                            ("_tokens", sum_tokens(segments))):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_frozen", True)
        if lint:
            self._lint(strict)

    def __setattr__(self, name: str, value: object) -> None:
        raise PinnedHeadError(
            f"the pinned head is frozen (tried to set {name!r}); build a new head with "
            "PromptBuilder for a new lineage", code="head-frozen")

    def __delattr__(self, name: str) -> None:
        raise PinnedHeadError("the pinned head is frozen", code="head-frozen")

    def __reduce__(self) -> tuple[Any, ...]:
        tokenizer = self._tokenizer if isinstance(self._tokenizer, str) or (
            self._tokenizer is None) else self._tokenizer.name
        return (PinnedHead._from_parts, (tuple(self.tools), tuple(zip(
            self.system, self._system_ttls, strict=True)), dict(self.tail_slots), tokenizer,
            self.head_ttl))

    @classmethod
    def _from_parts(cls, tools: tuple[Tool, ...], system: tuple[tuple[str, str | None], ...],
                    slots: dict[str, bool], tokenizer: str | None, head_ttl: str) -> PinnedHead:
        """Rebuild a pickled head (no volatile-content lint: it passed at freeze time)."""
        return cls(ToolSet(tools), system, slots, tokenizer=tokenizer, head_ttl=head_ttl,
                   strict=False, lint=False)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PinnedHead) and self.data == other.data
                and self._system_ttls == other._system_ttls
                and dict(self.tail_slots) == dict(other.tail_slots)
                and self.head_ttl == other.head_ttl)

    def __hash__(self) -> int:
        return hash((self.data, self.head_ttl))

    def __repr__(self) -> str:
        return (f"PinnedHead(tools={len(self.tools)}, system_blocks={len(self.system)}, "
                f"fingerprint={self.fingerprint[:16]}...)")

    @property
    def fingerprint(self) -> str:
        """Head fingerprint ``sp2:<hex>`` (the lineage name)."""
        return self._fingerprint

    @property
    def tokens(self) -> int | None:
        """Total head tokens, or ``None`` without a tokenizer."""
        return self._tokens

    @property
    def system_ttls(self) -> tuple[str | None, ...]:
        """User-placed breakpoint TTL per system block."""
        return self._system_ttls

    def _texts(self) -> Iterator[tuple[Segment, str]]:
        """Every text of the head that could be volatile: system blocks, and each tool's
        strings as :func:`~stableprompt._volatility.head_strings` walks them (description,
        schema descriptions; schema constants such as ``default`` are skipped)."""
        for segment in self.segments:
            if segment.kind == "system":
                yield segment, self.system[int(segment.name[7:-1])]
                continue
            tool = self.tools[segment.label]
            yield from ((segment, text) for _, text in head_strings(tool.to_dict()))

    def _lint(self, strict: bool) -> None:
        for segment, text in self._texts():
            for span in scan_volatile(text):
                # Byte offset of the match inside the head data.
                if segment.kind == "system":
                    escaped = len(canonical_json(text[:span.start])) - 2
                    offset = segment.start + _TEXT_PREFIX_BYTES + 1 + escaped
                else:  # inside the tool JSON: find the escaped match
                    needle = canonical_json(span.text)[1:-1]
                    offset = segment.start + self.data[segment.start:segment.end].find(needle)
                message = (f"volatile {span.kind} {span.text!r} in {segment.name} at character "
                           f"{span.start} (byte {offset}): it changes the head's bytes whenever "
                           "it changes and breaks the prefix cache; move it to a tail slot")
                if strict:
                    raise VolatileContentError(message, code="head-volatile",
                                               segment=segment.name, offset=offset)
                warnings.warn(VolatileContentWarning(
                    message, segment=segment.name, kind=span.kind, text=span.text,
                    start=span.start, offset=offset), stacklevel=5)

    def conversation(self, *, clock: Callable[[], float] | None = None) -> Conversation:
        """Start an empty append-only conversation on this head; ``clock`` as for
        :class:`Conversation`."""
        return Conversation(self, clock=clock)

    def resume(self, exported: bytes) -> Conversation:
        """Resume a conversation exported by :meth:`Conversation.export` on this head.

        The stored message bytes are reused exactly (each is checked to be canonical), so the
        resumed conversation renders byte-identically to the one that was exported.

        Raises:
            HistoryError: not an export, exported on another head (code
                ``history-other-head``), or bytes edited since (code ``history-bytes``).
        """
        return Conversation._resume(self, exported)


class Conversation:
    """Append-only history on a pinned head; renders head + history + tail.

    Each appended message is canonicalized once and its bytes, chained digest and token
    count are kept, so rendering turn N+1 only processes what is new. The tool protocol is
    enforced as providers require it: every tool call is answered (``tool_result``) before the
    next user or assistant message, and before rendering.

    Conversations pickle and copy through :meth:`export` / :meth:`PinnedHead.resume`.

    Args:
        head: The pinned head.
        clock: Seconds, for the turn times :meth:`compaction_advice` reads (default
            ``time.monotonic``; only differences are used). Each :meth:`render` of a history
            not rendered just before is a turn.
    """

    def __init__(self, head: PinnedHead, *, clock: Callable[[], float] | None = None) -> None:
        self.head = head
        self._clock: Callable[[], float] = time.monotonic if clock is None else clock
        self._turns = TurnLog()
        # (provider, model) named by the last response given to add_response
        self._served_by: tuple[str, str] | None = None
        self._messages: list[Message] = []
        self._segments: list[Segment] = []
        self._token_sums: list[int | None] = []
        """Tokens of the history through each message (``None`` once one is unknown):
        ``RenderedPrompt.tokens`` in O(1)."""
        self._open_calls: dict[str, str] = {}
        self._seen_calls: set[str] = set()
        # History lengths of the last two distinct rendered histories: the previous one is
        # where the last request's history breakpoint was (see RenderedPrompt.to_anthropic).
        self._anchors: tuple[int | None, int | None] = (None, None)
        # The wire formats' per-history memo (RenderedPrompt.history_memo): entries are
        # validated by chained digest, so compaction needs no invalidation; forks copy it.
        self._memo: dict[str, Any] = {}
        # Tools disabled as the history states it (its tool-change messages folded) and as
        # the caller last asked (enable_tools / disable_tools): they differ while a change is
        # pending (written into history by the next render that can place it).
        self._history_disabled: frozenset[str] = frozenset()
        self._disabled: frozenset[str] = frozenset()
        self._tool_change_count = 0
        # Operator instructions (system()) not in the history yet, and those that are.
        self._pending_system: list[Message] = []
        self._system_text_count = 0

    def __reduce__(self) -> tuple[Any, ...]:
        return (Conversation._resume, (self.head, self.export()))

    # -- appending --------------------------------------------------------------------------

    @property
    def messages(self) -> tuple[Message, ...]:
        """History messages in order."""
        return tuple(self._messages)

    @property
    def open_tool_calls(self) -> tuple[str, ...]:
        """Ids of tool calls not answered yet, in call order."""
        return tuple(self._open_calls)

    def _admit(self, message: Message) -> Message:
        """Check the tool protocol for ``message``, then append it."""
        last = self._messages[-1].role if self._messages else None
        if message.role == "system":
            if last not in ("user", "tool", "system") or self._open_calls:
                raise HistoryError(
                    "a system message must follow a user turn (a user message or the results "
                    "of every open tool call)", code="history-system-placement",
                    pointer=f"/messages/{len(self._messages)}")
            for i, (_, name) in enumerate(message.tool_changes):
                if name not in self.head.tools.names:
                    raise HistoryError(f"tool {name!r} is not in the pinned head",
                                       code="history-unknown-tool",
                                       pointer=f"/content/{i}/name")
        elif last == "system" and message.role != "assistant":
            raise HistoryError(
                "the history ends with a mid-conversation system message (a tool change or "
                "operator instructions), which must be followed by an assistant turn: append "
                "the answer first", code="history-system-placement",
                pointer=f"/messages/{len(self._messages)}")
        if message.role in ("user", "assistant") and self._open_calls:
            raise HistoryError(
                f"tool call(s) {', '.join(self._open_calls)} are not answered: append their "
                "tool_result first (providers reject a tool call without its result)",
                code="history-open-calls")
        calls = message.tool_calls
        for i, call in enumerate(calls):
            if call.name not in self.head.tools.names:
                raise HistoryError(f"tool {call.name!r} is not in the pinned head",
                                   code="history-unknown-tool", pointer=f"/tool_calls/{i}/name")
            if call.id in self._seen_calls:
                raise HistoryError(f"tool call id {call.id!r} already used",
                                   code="history-duplicate-call", pointer=f"/tool_calls/{i}/id")
        for call_id in message.tool_result_ids:
            if call_id not in self._open_calls:
                raise HistoryError(f"no open tool call with id {call_id!r}",
                                   code="history-tool-result", pointer="/tool_call_id")
        self._append(message)
        if message.role == "system":
            self._fold_changes(message)
        for call in calls:
            self._seen_calls.add(call.id)
            self._open_calls[call.id] = call.name
        for call_id in message.tool_result_ids:
            del self._open_calls[call_id]
        return message

    def _append(self, message: Message) -> None:
        index = len(self._messages)
        previous = self._segments[-1] if self._segments else None
        start = previous.end if previous else len(self.head.data)
        raw = bytes.fromhex(previous.prefix_digest) if previous else self.head._digest
        spec = SegmentSpec("message", f"messages[{index}]", message.data, f"/messages/{index}",
                           message.breakpoint, message.role)
        tokens = _count(self.head._counter, message.data)
        segments, _, _ = build_segments([spec], start=start, previous=raw,
                                        token_counts=[tokens])
        total = self._token_sums[-1] if self._token_sums else 0
        self._messages.append(message)
        self._segments.append(segments[0])
        self._token_sums.append(None if total is None or tokens is None else total + tokens)

    def user(self, content: str | Sequence[str], *, cache_breakpoint: str | None = None) -> Message:
        """Append a user message (one or several non-empty text blocks).

        ``cache_breakpoint`` (``"5m"``/``"1h"``) places a user breakpoint after it, kept
        where it is on every later render.

        Raises:
            HistoryError: empty or non-str text, or unanswered tool calls
                (code ``history-open-calls``).
            BreakpointError: a TTL other than ``"5m"``/``"1h"``.
        """
        return self._admit(user_message(content, breakpoint=cache_breakpoint))

    def assistant(self, text: str | None = None, *,
                  tool_calls: Sequence[ToolCall | Mapping[str, Any]] = (),
                  cache_breakpoint: str | None = None) -> Message:
        """Append an assistant turn: optional text and tool calls (``ToolCall`` or dicts with
        ``id``, ``name``, ``arguments``).

        Raises:
            HistoryError: no content, empty text, an unknown tool name (tools are masked,
                never removed: every callable tool must be in the head), a reused call id, or
                unanswered earlier tool calls.
        """
        return self._admit(assistant_message(text, tool_calls, breakpoint=cache_breakpoint))

    def add_response(self, response: Any, *, reasoning: str = "keep", choice: int | None = None,
                     cache_breakpoint: str | None = None) -> Message:
        """Append the assistant turn of a provider response and return it; its
        ``tool_calls`` are the calls to answer with :meth:`tool_result`.

        Args:
            response: An Anthropic Messages response, an OpenAI Chat Completion or a Responses
                response: a dict (the JSON body) or an official SDK object (read with its
                ``model_dump(mode="json", exclude_unset=True)``). Text blocks are joined into
                one text block; tool calls keep their ids and names, JSON-string arguments
                are parsed once into canonical form; blocks stay in response order.
            reasoning: Reasoning content (Anthropic ``thinking``/``redacted_thinking``
                blocks, Responses ``reasoning`` items, Chat ``reasoning_content``):
                ``"keep"`` (default) stores it exactly as received, in its place, and
                replays it byte-for-byte when rendered to the same format (another format
                raises ``history-reasoning-format``); ``"drop"`` leaves it out, refused on a
                turn that calls tools (the providers need that turn's reasoning back with the
                results: ``_policy.REASONING_RULES``); ``"error"`` raises if there is any.
            choice: The Chat Completion choice (Gemini: candidate) to add; ``None``
                requires exactly one.
            cache_breakpoint: As for :meth:`assistant`.

        Raises:
            HistoryError: Not a response of the three formats, or a malformed one (code
                ``history-response``; an SDK object whose ``model_dump`` fails too), several
                choices and no ``choice`` (``history-choices``), ``reasoning="error"`` with
                reasoning (``history-reasoning``), ``"drop"`` on a tool-calling turn
                (``history-reasoning-required``), a tool call that is not valid
                (``history-tool-call``, ``history-unknown-tool``, ``history-duplicate-call``),
                or unanswered earlier calls; ``pointer`` is a path in the response.

        Warns:
            IncompleteResponseWarning: the response was cut short (``max_tokens``,
                ``length``, ``incomplete``); the turn is added as it is.
        """
        body = response_body(response)
        message = self._admit(response_message(
            body, reasoning=reasoning, choice=choice, breakpoint=cache_breakpoint,
            tool_names=self.head.tools.names, seen_calls=self._seen_calls))
        self._served_by = served_by(body) or self._served_by
        return message

    def tool_result(self, tool_call_id: str, content: Any, *, is_error: bool = False,
                    cache_breakpoint: str | None = None) -> Message:
        """Append the result of an earlier tool call (text, or JSON stored canonically).

        Raises:
            HistoryError: ``tool_call_id`` names no open call (code ``history-tool-result``),
                or ``is_error`` is not a bool.
        """
        if tool_call_id not in self._open_calls:
            raise HistoryError(f"no open tool call with id {tool_call_id!r}",
                               code="history-tool-result", pointer="/tool_call_id")
        return self._admit(tool_result_message(tool_call_id, content, is_error=is_error,
                                               breakpoint=cache_breakpoint))

    # -- tool changes -------------------------------------------------------------------------

    def enable_tools(self, names: Sequence[str]) -> None:
        """Make tools of the pinned head callable again from the next request on, without a
        new head (the head's bytes and fingerprint never change).

        Each request states the change the cheapest way its provider allows:

        * Anthropic models with mid-conversation tool changes (``model_features``): one
          ``role: "system"`` message of ``tool_addition`` / ``tool_removal`` blocks in the
          history, right after the user turn it follows, sent with the ``anthropic-beta``
          header in :attr:`ProviderRequest.headers`. Cost: the blocks' few tokens, written
          to the cache once with that turn; the whole prefix before them stays cached.
        * OpenAI models with ``allowed_tools``: ``tool_choice: {"type": "allowed_tools",
          ...}`` naming the enabled tools (nothing in the history). Cost: none in tokens
          beyond the parameter; ``tools`` and the history stay byte-identical, so the whole
          prefix stays cached (``tool_choice`` is not among the settings OpenAI documents as
          changing the prefix).
        * Everywhere else (and while a change cannot be placed yet): the existing masking,
          a tail note naming the tools that may be used (``render(allowed_tools=...)``).
          Cost: the note's tokens on every turn, never cached; nothing cached is lost.

        Rebuilding the head instead (``PromptBuilder`` with other tools) changes its first
        bytes: every cached token of the conversation is written again.

        The change is written into the history by the next :meth:`render` whose history
        ends with a user turn (a user message or answered tool calls), so the system message
        always follows a user turn and is followed by the assistant's answer, as Anthropic's
        placement rules require; until then it is pending (sent as the tail note). Enabling
        an enabled tool changes nothing.

        Raises:
            ToolError: ``names`` is not a non-empty list of str, or names a tool not in the
                pinned head (code ``tool-unknown``).
        """
        self._disabled = self._disabled - self._tool_names(names)

    def disable_tools(self, names: Sequence[str]) -> None:
        """Stop offering tools of the pinned head from the next request on, without a new
        head: see :meth:`enable_tools` for how each provider is told and what it costs.
        Their tool calls already in the history stay valid.

        Raises:
            ToolError: as :meth:`enable_tools`.
        """
        self._disabled = self._disabled | self._tool_names(names)

    @property
    def enabled_tools(self) -> tuple[str, ...]:
        """Names of the head's tools currently enabled (pending changes included), sorted."""
        return tuple(sorted(set(self.head.tools.names) - self._disabled))

    def _tool_names(self, names: Sequence[str]) -> frozenset[str]:
        if isinstance(names, str) or not isinstance(names, (list, tuple, set, frozenset)) \
                or not names or not all(isinstance(n, str) for n in names):
            raise ToolError("tool changes take a non-empty list of tool names",
                            code="tool-unknown")
        unknown = sorted(set(names) - set(self.head.tools.names))
        if unknown:
            raise ToolError(f"cannot change tool(s) {', '.join(unknown)}: not in the pinned "
                            "head (tool changes name tools of the frozen head; a new tool needs "
                            "a new head)", code="tool-unknown", tool=unknown[0])
        return frozenset(names)

    def _fold_changes(self, message: Message) -> None:
        if not message.tool_changes:  # operator instructions
            self._system_text_count += 1
            return
        disabled = set(self._history_disabled)
        for change, name in message.tool_changes:
            (disabled.discard if change == "addition" else disabled.add)(name)
        self._history_disabled = frozenset(disabled)
        self._tool_change_count += 1

    def _recount_changes(self) -> None:
        """Fold the history's tool changes again (after compaction): changes of a replaced
        span that still hold become pending again."""
        self._history_disabled, self._tool_change_count = frozenset(), 0
        self._system_text_count = 0
        for message in self._messages:
            if message.role == "system":
                self._fold_changes(message)

    def _flush_changes(self) -> None:
        """Write the pending tool change, then the pending instructions, into the history
        when they can go there (the history ends with a user turn, every tool call
        answered)."""
        if not self._messages or self._messages[-1].role not in ("user", "tool") \
                or self._open_calls:
            return
        if self._disabled != self._history_disabled:
            removed = sorted(self._disabled - self._history_disabled)
            added = sorted(self._history_disabled - self._disabled)
            self._admit(tool_change_message([("removal", n) for n in removed]
                                            + [("addition", n) for n in added]))
        pending, self._pending_system = self._pending_system, []
        for message in pending:
            self._admit(message)

    def system(self, text: str) -> None:
        """Append operator instructions to the history as a mid-conversation system message,
        without a new head: they hold from the next request on and stay in the history
        (cached with it), unlike a tail slot, which is sent (uncached) on every request.

        Sent as a ``role: "system"`` message on Anthropic models that have them
        (``model_features``), as ``<system-reminder>`` user text in the same place on the
        others, and as a ``developer`` message on OpenAI. Cost: the text's tokens, written
        to the cache once with its turn; the whole prefix before it stays cached. Rewriting
        the system text instead makes a new head: the whole conversation is written again.

        Placed like a tool change (see :meth:`enable_tools`): by the next :meth:`render`
        whose history ends with a user turn, so it follows that turn and is followed by the
        assistant's answer; a pending one is not exported.

        Raises:
            HistoryError: ``text`` is not a non-empty str (code ``history-empty-text``).
        """
        self._pending_system.append(system_message(text))

    # -- export / resume --------------------------------------------------------------------

    def export(self) -> bytes:
        """The history as canonical JSON bytes (messages as their exact stored bytes), for
        :meth:`PinnedHead.resume`. Contains prompt text: store it as you would the prompt.
        Tool changes already in the history are exported with it; a pending one (see
        :meth:`enable_tools`) is not: render first."""
        return canonical_json({
            "anchors": list(self._anchors),
            "format": _HISTORY_FORMAT,
            "head": self.head.fingerprint,
            "messages": [{"breakpoint": m.breakpoint, "data": m.data.decode()}
                         for m in self._messages],
        })

    @classmethod
    def _resume(cls, head: PinnedHead, exported: bytes) -> Conversation:
        try:
            value = loads(exported)
            ok = isinstance(value, dict) and value.get("format") == _HISTORY_FORMAT
        except ValueError:
            ok = False
        if not ok:
            raise HistoryError(f"not a {_HISTORY_FORMAT} export", code="history-export")
        if value["head"] != head.fingerprint:
            raise HistoryError(f"this history was exported on head {value['head']}, not on "
                               f"{head.fingerprint}", code="history-other-head")
        conversation = cls(head)
        for i, item in enumerate(value["messages"]):
            try:
                message = Message.from_bytes(item["data"].encode(), item["breakpoint"])
            except HistoryError as exc:
                raise HistoryError(exc.message, code=exc.code, pointer=f"/messages/{i}") from exc
            conversation._admit(message)
        first, second = value.get("anchors", [None, None])
        conversation._anchors = (first, second)
        conversation._disabled = conversation._history_disabled  # no change pending
        return conversation

    # -- rendering --------------------------------------------------------------------------

    def _tail_specs(self, tail: Mapping[str, str] | None,
                    extra: Sequence[tuple[str, str]] = ()) -> list[tuple[str, str]]:
        """The ``(slot, value)`` pairs of a render's tail, in declaration order, checked."""
        if tail is not None and type(tail) is not dict and not isinstance(tail, Mapping):
            raise TailSlotError(f"tail must be a mapping of slot name to str, got "
                                f"{type(tail).__name__}", code="tail-slot-type")
        declared = self.head.tail_slots
        if tail:
            if not tail.keys() <= declared.keys():
                unknown = sorted(set(tail) - set(declared), key=str)
                raise TailSlotError(f"undeclared tail slot(s): {', '.join(map(str, unknown))}; "
                                    "declare them with PromptBuilder.tail_slot()",
                                    code="tail-slot-undeclared", segment=f"tail:{unknown[0]}")
        else:
            tail = {}
        missing = [n for n, required in declared.items() if required and n not in tail]
        if missing:
            raise TailSlotError(f"missing tail slot(s): {', '.join(missing)}",
                                code="tail-slot-missing", segment=f"tail:{missing[0]}")
        items = [(n, tail[n]) for n in declared if n in tail]
        items.extend(extra)
        for name, value in items:
            if not isinstance(value, str):
                raise TailSlotError(f"tail slot {name!r} must be str, got {type(value).__name__}",
                                    code="tail-slot-type", segment=f"tail:{name}")
        return items

    def _check_complete(self) -> None:
        if self._open_calls:
            raise HistoryError(
                f"tool call(s) {', '.join(self._open_calls)} are not answered: a request with a "
                "tool call and no result is rejected by providers", code="history-open-calls")

    def render(self, *, tail: Mapping[str, str] | None = None,
               allowed_tools: Sequence[str] | None = None) -> RenderedPrompt:
        """Render head + history + tail.

        Rendering is idempotent: the same history, tail and earlier rendered histories give
        the same bytes. The conversation remembers the history length of the last distinct
        rendered history, so the Anthropic body can keep a breakpoint where the previous
        request's was when it is beyond the 20-block lookback.

        Args:
            tail: Values for the declared tail slots (str each).
            allowed_tools: Restrict tool use for this turn without touching the head (mask,
                don't remove): adds a tail note naming the allowed tools. Costs only the
                note's tokens; changing ``tool_choice`` instead would invalidate Anthropic's
                messages cache, and removing tools would invalidate everything.

        Raises:
            TailSlotError: missing, undeclared or non-str tail slot.
            ToolError: ``allowed_tools`` is empty, not a list of str, or names a tool not in
                the head.
            HistoryError: unanswered tool calls (code ``history-open-calls``).
        """
        self._check_complete()
        extra: list[tuple[str, str]] = []
        if allowed_tools is not None:
            if isinstance(allowed_tools, str) or not all(
                    isinstance(t, str) for t in allowed_tools) or not allowed_tools:
                raise ToolError("allowed_tools must be a non-empty list of tool names",
                                code="tool-unknown")
            unknown = sorted(set(allowed_tools) - set(self.head.tools.names))
            if unknown:
                raise ToolError(f"allowed_tools names unknown tool(s): {', '.join(unknown)}",
                                code="tool-unknown", tool=unknown[0])
            extra.append(("allowed_tools", allowed_tools_note(
                sorted(set(allowed_tools) - self._disabled))))
        items = self._tail_specs(tail, extra)
        self._flush_changes()
        length = len(self._messages)
        if self._anchors[1] != length:  # a new request: one turn
            self._anchors = (self._anchors[1], length)
            head_tokens = self.head.tokens
            history = self._token_sums[-1] if self._token_sums else 0
            self._turns.observe(self._clock(), None if head_tokens is None or history is None
                                else head_tokens + history)
        return self._render(items)

    def _render(self, tail: Sequence[tuple[str, str]], *,
                cache_write: bool = True) -> RenderedPrompt:
        """Head + history + the ``(slot, value)`` tail items (checked) as a RenderedPrompt;
        ``cache_write=False``: its end-of-history breakpoint stays at the end of the last
        rendered history (see :meth:`summarization_request`).

        Raises:
            CanonicalizationError: a tail value is no valid text (a lone surrogate).
        """
        datas = [_tail_data(name, value) for name, value in tail]
        head, history, count = self.head, self._segments, len(self._segments)

        def segments() -> Snapshot[Segment]:
            # made when first read: the wire formats never need them
            specs = [new_spec("tail", f"tail:{name}", data, "", None, name)
                     for (name, _), data in zip(tail, datas, strict=True)]
            last = history[count - 1] if count else None
            counter = head._counter
            tail_segments, _, _ = build_segments(
                specs, start=last.end if last else len(head.data),
                previous=bytes.fromhex(last.prefix_digest) if last else head._digest,
                token_counts=None if counter is None else [_count(counter, d) for d in datas])
            return Snapshot((head.segments, len(head.segments)), (history, count),
                            (tail_segments, len(tail_segments)))

        previous = self._anchors[0] if self._anchors[1] == len(self._messages) else self._anchors[1]
        if not cache_write:  # the last rendered history: written by the request sent with it
            previous = self._anchors[1] or None
        return frozen_instance(RenderedPrompt, {
            "head": head,
            "message_list": self._messages,  # append-only: a copy took ~8 us at 3,000
            "message_count": len(self._messages),
            "tail": tuple([(name, data) for (name, _), data in zip(tail, datas, strict=True)]),
            "make_segments": segments,
            "head_data": head.data,
            "previous_breakpoint": None if previous is None else previous - 1,
            "history_memo": self._memo,
            "tail_texts": tuple([tail_text(name, value) for name, value in tail]),
            "history_segments": history,
            "history_tokens": self._token_sums[count - 1] if count else 0,
            "disabled_tools": self._disabled,
            "pending_tool_change": self._disabled != self._history_disabled,
            "tool_change_count": self._tool_change_count,
            "system_text_count": self._system_text_count,
            "cache_write": cache_write,
        })

    def fork(self) -> Conversation:
        """An independent branch sharing this history's bytes; later appends on either side
        are invisible to the other."""
        other = Conversation(self.head)
        other._messages = list(self._messages)
        other._segments = list(self._segments)
        other._token_sums = list(self._token_sums)
        other._open_calls = dict(self._open_calls)
        other._seen_calls = set(self._seen_calls)
        other._anchors = self._anchors
        other._memo = dict(self._memo)
        other._history_disabled, other._disabled = self._history_disabled, self._disabled
        other._tool_change_count = self._tool_change_count
        other._pending_system = list(self._pending_system)
        other._system_text_count = self._system_text_count
        other._clock, other._turns = self._clock, self._turns.copy()
        other._served_by = self._served_by
        return other

    # -- compaction -------------------------------------------------------------------------

    def summarization_request(
        self, instruction: str = DEFAULT_SUMMARY_INSTRUCTION, *, cache_write: bool = True
    ) -> RenderedPrompt:
        """Render head + full history + a tail instruction asking for a summary.

        The prefix (head + history) is byte-identical to a normal render's, so the
        summarization call reads the cached prefix instead of re-prefilling it
        (cache-safe forking). Declared tail slots are not required here. It is not a turn
        (:meth:`compaction_advice` does not count it).

        Args:
            instruction: The summarize instruction, sent as the ``summarize`` tail slot
                (after every breakpoint: never written to the cache).
            cache_write: ``True`` (default): the SDK's end-of-history breakpoint ends the
                history, as on every turn, so the call also writes what the history gained
                since the last request (typically the last answer and tool results).
                ``False``, for a one-shot summary whose prefix is about to be replaced: that
                breakpoint stays where the last rendered request put it (the end of the
                history :meth:`render` last returned, already written), so the call reads
                the whole cached prefix through it and writes nothing new; the rest is sent
                as uncached input (1x instead of the write premium, e.g. Anthropic 1.25x at
                5 minutes, 2x at 1 hour). With no earlier render (or after a compaction)
                the history gets no SDK breakpoint. The head's breakpoint stays (the head
                survives every compaction, so writing it is never wasted), and so do
                user-placed breakpoints. :attr:`CompactionAdvice.summary_cache_write` says
                which is cheaper. Formats without breakpoints (Gemini, OpenAI's implicit
                caching) write on their own and are unchanged; OpenAI explicit caching
                (``prompt_cache_ttl``) gets no end-of-history marker.

        Source: a cache read needs a breakpoint at or after the cached prefix's end: "The
        system checks at most 20 positions per breakpoint, counting the breakpoint itself
        as the first", and a write happens at each breakpoint whose prefix is not cached
        yet (https://platform.claude.com/docs/en/build-with-claude/prompt-caching). A
        breakpoint exactly at the end of the previously written history reads it and has
        nothing new to write; none is placed on the summary tail.

        Raises:
            HistoryError: empty/non-str instruction (code ``history-compact-summary``) or
                unanswered tool calls.
            InputError: ``cache_write`` is not a bool (code ``render-param``).
        """
        if not isinstance(instruction, str) or not instruction:
            raise HistoryError("instruction must be a non-empty str",
                               code="history-compact-summary")
        if type(cache_write) is not bool:
            raise InputError(f"cache_write must be a bool, got {cache_write!r}",
                             code="render-param", pointer="/cache_write")
        self._check_complete()
        return self._render([("summarize", instruction)], cache_write=cache_write)

    def _span(self, start: int, end: int | None) -> int:
        """``end`` of a compaction span ``[start, end)`` (``None``: the history's end),
        checked.

        Raises:
            HistoryError: a span outside the history or one separating a tool call from its
                result (code ``history-compact-span``), unanswered tool calls.
        """
        count = len(self._messages)
        end = count if end is None else end
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (start, end)) or not (
                0 <= start < end <= count):
            raise HistoryError(f"compaction span [{start}, {end}) is not within 0..{count}",
                               code="history-compact-span")
        self._check_complete()
        inside = {c.id for m in self._messages[start:end] for c in m.tool_calls}
        answered = {i for m in self._messages[start:end] for i in m.tool_result_ids}
        if inside != answered:
            raise HistoryError("compaction span separates a tool call from its result",
                               code="history-compact-span")
        return end

    def compaction_advice(self, *, summary_tokens: int, start: int = 0, end: int | None = None,
                          provider: str | None = None, model: str | None = None,
                          remaining_turns: int | None = None,
                          new_tokens_per_turn: int | None = None, ttl: str | None = None,
                          now: float | None = None, day: date | None = None
                          ) -> CompactionAdvice:
        """Price compacting history messages ``[start, end)`` now, against keeping them.

        Tokens of cache destroyed vs tokens saved on every later turn, over the expected
        remaining turns, at the observed turn rate, in input-token equivalents and USD, with
        the summarization call itself (and whether to send it with
        ``summarization_request(cache_write=False)``). The cost model is
        :func:`plan_compaction`'s, priced with the model's genai-prices unit prices (or the
        cache rules' multipliers when it has none); the estimates below are used for what is
        not given, each named in :attr:`CompactionAdvice.notes`. A cache is assumed warm
        unless the last turn is older than the TTL; when turns come further apart than the
        TTL, later turns are priced as writing their prefix again.

        Args:
            summary_tokens: Expected tokens of the summary message (for a summary in hand,
                its token count; ``compact`` counts it itself).
            start, end: The span, as for :meth:`compact`.
            provider, model: Whose cache rules and prices apply (e.g. ``"anthropic"``,
                ``"claude-sonnet-4-6"``); default: those named by the last response given
                to :meth:`add_response`.
            remaining_turns: Later turns expected; default: as many more as this
                conversation has observed (its distinct rendered requests), or the history's
                assistant turns when it observed none (e.g. resumed); at least 1.
            new_tokens_per_turn: Tokens a later turn adds; default: the mean growth of head +
                history between the turns observed since the last compaction, else the
                history's tokens per assistant turn.
            ttl: Cache TTL label of the writes (``"5m"``, ``"1h"`` for Anthropic;
                ``"30m"``, ``"12h"`` for OpenAI explicit caching); default: the provider's
                default.
            now: Time of the advice on the conversation's clock (seconds); default: now.
            day: Day of the prices (genai-prices); default: today (UTC).

        Returns:
            CompactionAdvice. USD fields are ``None`` (never $0) when genai-prices has no
            price for the model; the token-equivalent numbers are there either way.

        Raises:
            InputError: the head has no tokenizer (code ``compaction-tokens``); no provider
                or model given or learned (code ``compaction-model``); a bad count, ``ttl``,
                ``now`` or ``day`` (code ``compaction-input``).
            HistoryError: a bad span (code ``history-compact-span``) or unanswered tool
                calls.
            PolicyError: a provider without cache rules (code ``policy-unknown-provider``).
        """
        end = self._span(start, end)
        return self._advice(start, end, summary_tokens, provider=provider, model=model,
                            remaining_turns=remaining_turns,
                            new_tokens_per_turn=new_tokens_per_turn, ttl=ttl, now=now, day=day)

    def _advice(self, start: int, end: int, summary_tokens: object, *,
                now: float | None = None, **options: Any) -> CompactionAdvice:
        """:func:`advise_compaction` on this conversation (span checked), ``options`` as
        :meth:`compaction_advice` takes them."""
        return advise_compaction(
            head_tokens=self.head.tokens, token_sums=self._token_sums,
            written=self._anchors[1], turns=self._turns, served=self._served_by,
            assistant_turns=sum(m.role == "assistant" for m in self._messages),
            start=start, end=end, summary_tokens=summary_tokens,
            now_s=self._clock() if now is None else now, **options)

    def compact(self, summary: str, *, start: int = 0, end: int | None = None,
                prefix: str = "", advise: bool = True, provider: str | None = None,
                model: str | None = None) -> CacheEvent:
        """Replace history messages ``[start, end)`` with one summary message (tail-only:
        the head is never touched).

        Args:
            summary: Summary text (e.g. the answer to :meth:`summarization_request`), stored
                as given.
            start: First message index replaced (0 = right after the head).
            end: One past the last replaced index (default: end of history).
            prefix: Text put before the summary in the same message, e.g.
                ``"Summary of the earlier conversation:\n"`` (default: none).
            advise: Consult :meth:`compaction_advice` (with its default estimates and the
                summary's own token count) and warn when compacting does not pay. It is
                consulted only when enough is known: a tokenizer on the head, and a provider
                and model passed, or named by the last response (a model the cache-rules
                table does not know is then skipped). ``False``: no advice, no warning.
            provider, model: As for :meth:`compaction_advice`.

        Returns:
            CacheEvent with the cached-prefix tokens this invalidates, the tokens that survive
            (head + history before ``start``) and the tokens saved on every later turn.

        Raises:
            HistoryError: bad span, empty summary, unanswered tool calls, or a span that
                separates a tool call from its result (code ``history-compact-span``).
            InputError / PolicyError: a bad ``provider`` or ``model`` passed (see
                :meth:`compaction_advice`); nothing is compacted then.

        Warns:
            CompactionCostWarning: compacting does not pay within the expected turns, even
                with the cheaper summarization call (the whole compaction is judged, its
                summarization call included: the warning is for tuning when to compact). The
                message has the numbers; the compaction is done all the same.
        """
        end = self._span(start, end)
        if not isinstance(summary, str) or not summary:
            raise HistoryError("summary must be a non-empty str", code="history-compact-summary")
        if not isinstance(prefix, str):
            raise HistoryError("prefix must be a str", code="history-compact-summary")
        if type(advise) is not bool:
            raise InputError(f"advise must be a bool, got {advise!r}", code="compaction-input",
                             pointer="/advise")
        head_tokens = sum_tokens(self.head.segments)
        kept_tokens = sum_tokens(self._segments[:start])
        removed_tokens = sum_tokens(self._segments[start:end])
        invalidated = sum_tokens(self._segments[start:])
        before_fp = self._prefix_fingerprint()
        made = user_message(prefix + summary)  # raises for no valid text: nothing changed yet
        advice = self._compact_advice(start, end, made, provider, model) if advise else None
        rest = self._messages[end:]
        kept = self._messages, self._segments, self._token_sums
        self._messages = self._messages[:start]
        self._segments = self._segments[:start]
        self._token_sums = self._token_sums[:start]
        try:
            self._append(made)
            summary_tokens = self._segments[-1].tokens
            for message in rest:
                self._append(message)
        except BaseException:  # a tokenizer that raised: the history stays as it was
            self._messages, self._segments, self._token_sums = kept
            raise
        self._anchors = (None, None)
        self._turns.compacted()
        self._recount_changes()
        if advice is not None and not advice.pays_off:
            warnings.warn(CompactionCostWarning(str(advice), advice=advice), stacklevel=2)
        surviving = (None if head_tokens is None or kept_tokens is None
                     else head_tokens + kept_tokens)
        saved = (None if removed_tokens is None or summary_tokens is None
                 else removed_tokens - summary_tokens)
        return CacheEvent(
            kind="compaction",
            lineage=self.head.fingerprint,
            prefix_before=before_fp,
            prefix_after=self._prefix_fingerprint(),
            invalidated_tokens=invalidated,
            surviving_tokens=surviving,
            removed_tokens=removed_tokens,
            summary_tokens=summary_tokens,
            saved_tokens_per_turn=saved,
            summary=prefix + summary,
        )

    def _compact_advice(self, start: int, end: int, made: Message, provider: str | None,
                        model: str | None) -> CompactionAdvice | None:
        """The advice :meth:`compact` consults, or ``None`` when too little is known (see
        :func:`worth_advising`).

        Raises:
            InputError / PolicyError: a bad ``provider`` or ``model`` passed.
        """
        counter = self.head._counter
        if counter is None or not worth_advising(self._served_by, provider, model):
            return None
        return self._advice(start, end, counter.count(made.data), provider=provider,
                            model=model)

    def _prefix_fingerprint(self) -> str:
        return fingerprint_of(self._segments) if self._segments else self.head.fingerprint

    def rebase(self, head: PinnedHead) -> tuple[Conversation, CacheEvent]:
        """Move this history onto a different head: a new lineage, reported explicitly.

        Returns the new conversation and a ``head-change`` CacheEvent: every cached token of
        the old lineage is invalidated (the head comes first, so nothing after it survives);
        rebasing onto an identical head invalidates nothing.

        Raises:
            HistoryError: the history calls a tool the new head lacks (code
                ``history-unknown-tool``, pointer ``/messages/<i>``).
        """
        other = Conversation(head)
        for i, message in enumerate(self._messages):
            try:
                other._admit(message)
            except HistoryError as exc:
                raise HistoryError(exc.message, code=exc.code,
                                   pointer=f"/messages/{i}{exc.pointer or ''}") from exc
        other._disabled = self._disabled & frozenset(head.tools.names)
        other._clock, other._turns = self._clock, self._turns.copy()
        other._turns.compacted()  # a new prefix: growth is measured anew
        other._served_by = self._served_by
        same = head.fingerprint == self.head.fingerprint
        old = sum_tokens([*self.head.segments, *self._segments])
        return other, CacheEvent(
            kind="head-change",
            lineage=head.fingerprint,
            prefix_before=self._prefix_fingerprint(),
            prefix_after=other._prefix_fingerprint(),
            invalidated_tokens=0 if same else old,
            surviving_tokens=old if same else 0,
            removed_tokens=0,
            summary_tokens=0,
            saved_tokens_per_turn=0,
        )


public(Conversation, PinnedHead, PromptBuilder)
