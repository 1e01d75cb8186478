"""RenderedPrompt: head + history + tail as segments, bytes and fingerprints.

``to_anthropic`` / ``to_openai_chat`` / ``to_openai_responses`` delegate to the wire format
modules (``_wire.<format>.render``), which assemble bodies from bytes serialized once (tools
once per head, each message once per wire format), so rendering turn N+1 serializes only what
is new. Top-level keys are in sorted order, so the same logical request always gives the same
body bytes.

A turn does not loop over the whole history either: the conversation owns a history memo
(:attr:`RenderedPrompt.history_memo`, shared by its renders and copied by ``fork``) where each
format keeps the joined bytes of the history's stable prefix (Anthropic: the role groups
before the first one an SDK breakpoint can land on; OpenAI: every message rendered so far),
the user breakpoints in it, and the fingerprint chain state after it. Each entry records how
many messages it covers and the chained prefix digest of the last one; it is used only when
that digest still matches (:meth:`RenderedPrompt.message_digest`, O(1)), so compaction,
forks and rebases never reuse stale bytes. The request fingerprint is chained from
per-message segment digests the same way (``ProviderRequest.fingerprint``, lazily), equal to
what ``segment_request`` gives for the body.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .._canonical import canonical_json
from .._economics._cache_policy import CachePolicy
from .._exceptions import (
    BreakpointWarning,
    HistoryError,
    InputError,
    MethodNameError,
)
from .._policy import cache_rules, model_features, surely_below_minimum
from .._public import public
from .._segment import Segment, fingerprint_of, sum_tokens
from .._wire import anthropic, bedrock_converse, gemini, openai_chat, openai_responses
from .._wire._openai import allowed_tools as openai_allowed_tools
from .._wire._parts import HeadParts, check_model
from .._wire._request import ProviderRequest
from ._messages import Message, as_user_text
from ._policy_ttls import breakpoint_history_ttl, check_gemini_policy, openai_ttls

__all__ = ["RenderedPrompt"]

ANTHROPIC_MAX_BREAKPOINTS = anthropic.MAX_BREAKPOINTS


def tail_text(slot: str, value: str) -> str:
    """A tail slot as the text the wire formats send: ``<slot>\nvalue\n</slot>``."""
    return f"<{slot}>\n{value}\n</{slot}>"


MASK_SLOT = "allowed_tools"
"""The reserved tail slot of the tool mask (``render(allowed_tools=)``, and tool changes a
request cannot state natively)."""


def allowed_tools_note(names: Sequence[str]) -> str:
    """The tool mask's text: the tools that may be used this turn (sorted names)."""
    if not names:
        return "No tools may be used this turn."
    return "Only these tools may be used this turn: " + ", ".join(names) + "."


@dataclass(frozen=True, eq=False)
class RenderedPrompt:
    """Head + history + tail, rendered.

    Attributes:
        segments: Ordered segments: ``tool:<name>``..., ``system[i]``..., ``messages[i]``...,
            ``tail:<slot>``... Each has kind, name, byte range, digest, chained prefix digest
            and token count.
        data: All segment bytes; ``data[s.start:s.end]`` reproduces segment ``s`` (joined
            when first read).
        history_memo: The conversation's per-history memo, shared by its renders: the wire
            formats keep joined prefix bytes and chain states there (see
            ``_wire._parts.history_entry``); entries are validated against
            :meth:`message_digest`, never trusted by identity.
    """

    head: HeadParts = field(repr=False)
    message_list: Sequence[Message] = field(repr=False, compare=False)
    """The history without a copy: its first :attr:`message_count` items are
    :attr:`messages` (the conversation's own append-only list; never take its ``len``)."""
    message_count: int = field(repr=False)
    tail: tuple[tuple[str, bytes], ...] = field(repr=False)
    make_segments: Callable[[], Sequence[Segment]] = field(repr=False, compare=False)
    """Makes :attr:`segments` (when first read)."""
    head_data: bytes = field(repr=False)
    previous_breakpoint: int | None = field(default=None, repr=False)
    history_memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    tail_texts: tuple[str, ...] = field(default=(), repr=False, compare=False)
    """Tail slots as ``<slot>\nvalue\n</slot>`` texts (:func:`tail_text`), in declaration
    order: what the wire formats send as the tail."""
    history_segments: Sequence[Segment] = field(default=(), repr=False, compare=False)
    """The history messages' segments, one per message (``segments`` between head and tail):
    a sequence whose first ``len(messages)`` items are those (the conversation's own
    append-only list, read in O(1) by :meth:`message_digest`)."""
    history_tokens: int | None = field(default=None, repr=False, compare=False)
    """Tokens of the history messages' segments (``None`` without a tokenizer): kept by the
    conversation as a running total, so :attr:`tokens` is O(tail), not O(history)."""
    disabled_tools: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    """Tools of the head disabled for this request (``Conversation.disable_tools``)."""
    pending_tool_change: bool = field(default=False, repr=False, compare=False)
    """A tool change the history does not state yet (it could not be placed)."""
    tool_change_count: int = field(default=0, repr=False, compare=False)
    """Tool-change (``system``) messages in the history: formats without a form for them
    render the history without them."""
    system_text_count: int = field(default=0, repr=False, compare=False)
    """Operator-instruction (``system`` text) messages in the history: Anthropic models
    without mid-conversation system messages get them as user text."""
    cache_write: bool = field(default=True, repr=False)
    """Whether the SDK's end-of-history breakpoint ends the history (the default: the request
    writes what it adds to the cache) or stays where the previous request's was, so the
    request reads the cached prefix and writes nothing after it
    (``Conversation.summarization_request(cache_write=False)``, see there)."""

    @cached_property
    def messages(self) -> tuple[Message, ...]:
        """The history messages, in order (made when first read)."""
        return tuple(itertools.islice(self.message_list, self.message_count))

    def __reduce__(self) -> tuple[Any, ...]:
        return (RenderedPrompt._restore, (self.head, self.messages, self.tail,
                                          tuple(self.segments), self.head_data,
                                          self.previous_breakpoint, self.tail_texts,
                                          self.cache_write))

    @classmethod
    def _restore(cls, head: HeadParts, messages: tuple[Message, ...],
                 tail: tuple[tuple[str, bytes], ...], segments: tuple[Segment, ...],
                 head_data: bytes, previous_breakpoint: int | None,
                 tail_texts: tuple[str, ...], cache_write: bool = True) -> RenderedPrompt:
        """Rebuild a pickled prompt from its segments (with a history memo of its own)."""
        first = len(segments) - len(tail) - len(messages)
        history = segments[first:first + len(messages)]
        return cls(head=head, message_list=messages, message_count=len(messages), tail=tail,
                   make_segments=lambda: segments,
                   head_data=head_data, previous_breakpoint=previous_breakpoint,
                   tail_texts=tail_texts, history_segments=history,
                   history_tokens=sum_tokens(history), cache_write=cache_write)

    @cached_property
    def segments(self) -> Sequence[Segment]:
        """Ordered segments: ``tool:<name>``..., ``system[i]``..., ``messages[i]``...,
        ``tail:<slot>``... (see the class docstring); made when first read."""
        return self.make_segments()

    @cached_property
    def data(self) -> bytes:
        """All segment bytes; ``data[s.start:s.end]`` reproduces segment ``s``."""
        return b"".join([self.head_data, *(m.data for m in self.messages),
                         *(data for _, data in self.tail)])

    def message_digest(self, index: int) -> str:
        """Chained prefix digest (hex) through history message ``index`` (head included).

        Raises:
            IndexError: ``index`` is not ``0 <= index < len(messages)``.
        """
        if not 0 <= index < self.message_count:
            raise IndexError(f"message index {index} out of range")
        return self.history_segments[index].prefix_digest

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the whole rendered prompt, tail included (``sp2:<hex>``)."""
        return fingerprint_of(self.segments)

    @property
    def prefix_fingerprint(self) -> str:
        """Fingerprint of the cacheable part: head + history, without the tail."""
        return fingerprint_of([s for s in self.segments if s.kind != "tail"])

    @property
    def head_fingerprint(self) -> str:
        """Fingerprint of the pinned head (names the cache lineage)."""
        return self.head.fingerprint

    @property
    def tokens(self) -> int | None:
        """Total tokens over all segments (head + history + tail), ``None`` without a
        tokenizer. O(tail): the head's and the history's totals are kept."""
        head, history = self.head.tokens, self.history_tokens
        if head is None:
            return None
        if history is None:  # a prompt made without it (by hand): from the segments
            return sum_tokens(self.segments)
        segments = self.segments
        tail = sum_tokens(segments[len(segments) - len(self.tail):]) if self.tail else 0
        return None if tail is None else head + history + tail

    def _check_not_empty(self) -> None:
        if not self.message_count and not self.tail:
            raise HistoryError("nothing to send: the conversation has no message and no tail "
                               "(providers require at least one message)",
                               code="history-empty")

    if not TYPE_CHECKING:  # runtime only: type checkers still flag the name

        @property
        def to_openai(self) -> Any:
            """A first guess: raises, naming the two real methods. A property, not a
            ``__getattr__`` hook: with one, CPython 3.11 specializes no attribute read of
            the class (every ``prompt.<field>`` in the renderers took ~4x as long)."""
            raise MethodNameError(
                "RenderedPrompt has no to_openai(): use to_openai_chat(...) for Chat "
                "Completions (/v1/chat/completions) or to_openai_responses(...) for the "
                "Responses API (/v1/responses)", code="method-name",
                segment="RenderedPrompt.to_openai")


    # -- Anthropic --------------------------------------------------------------------------

    def to_anthropic(
        self,
        *,
        model: str,
        max_tokens: int,
        history_ttl: str = "5m",
        max_breakpoints: int = ANTHROPIC_MAX_BREAKPOINTS,
        tail_role: str | None = None,
        cache_policy: CachePolicy | None = None,
        request_kind: str = "main",
        **params: Any,
    ) -> ProviderRequest:
        """Render an Anthropic Messages request (tools -> system -> messages).

        Breakpoints (``cache_control``): user-placed ones are kept where the user put them;
        the SDK adds one at the end of the head and one at the end of the stable history
        (before the tail). When the previous render's history breakpoint is 20 or more blocks
        back (beyond Anthropic's lookback), a breakpoint is also kept there so the earlier
        entry is still read. SDK breakpoints are dropped (carry, then head) when the budget
        is exceeded. The tail is the last content, after every breakpoint.

        Args:
            model: Model id (part of the fingerprint and the cache key).
            max_tokens: Output token limit.
            history_ttl: TTL of the SDK's end-of-history breakpoint (``"5m"``/``"1h"``).
            max_breakpoints: Breakpoint budget (Anthropic: 4).
            tail_role: Role of the message holding the volatile tail. ``None`` (automatic):
                ``"system"``, a mid-conversation system message after the last user turn,
                where the model has them (``model_features("anthropic", model)``, dated data
                with its source) and the placement rules allow it (the history ends with a
                user turn); ``"user"`` otherwise: the tail slots as user text after the last
                user turn (``<slot>`` tags, the ``<system-reminder>`` form every model
                accepts). ``"system"`` forces the system form (a model without it answers
                400); ``"user"`` forces the user form. The history's blocks, the head and
                every breakpoint are the same bytes either way: only where the tail blocks
                go changes. Cost: none in cache terms (the tail is after the last
                breakpoint in both forms); the system form is the prompt-injection-safe one
                (operator text never appears as the user's).
            cache_policy: A :class:`~stableprompt.CachePolicy`: the end-of-history TTL is
                its ``history`` for ``request_kind`` (leave ``history_ttl`` at its default);
                its ``head`` (unset: the provider default, ``"5m"``) must be the TTL the
                head was frozen with (``freeze(head_ttl=...)``), since the head's bytes are
                fixed. Refused (``_prompt._policy_ttls``): a TTL the model does not offer, a
                history TTL longer than the head's, ``explicit_cache`` (Gemini's).
            request_kind: ``"main"``, ``"subagent"`` or ``"one-shot"``: which of the
                policy's TTLs apply.
            **params: Other body fields (``tool_choice``, ``thinking``, ``temperature``,
                ``stream``, ``metadata``...), canonicalized.

        Breakpoints below the minimum: the SDK does not spend its head or end-of-history
        breakpoint on a prefix surely shorter than the model's minimum cacheable length
        (``min_cacheable_tokens`` in the policy table; "surely": the head tokenizer's estimate times
        ``TOKEN_ESTIMATE_MARGIN`` is still below it), since such a marker writes nothing, and
        warns once per head, model and place. It needs token counts (a head built with
        ``tokenizer=None`` places them all) and a known model (an unknown one has only the
        provider's conservative default). User-placed breakpoints are kept as placed.

        Raises:
            BreakpointError: user-placed breakpoints exceed the budget (code
                ``breakpoint-budget``), fill it so that the SDK's end-of-history breakpoint
                would be dropped (``breakpoint-evicts-history``, naming them), or a longer TTL
                follows a shorter one (code ``breakpoint-ttl-order``); a policy's head TTL
                is not the frozen one (``cache-policy-head-ttl``).
            PolicyError: ``cache_policy`` asks for a TTL the model does not offer (code
                ``cache-policy``), a history TTL longer than the head's
                (``cache-policy-ttl-order``) or an explicit cache
                (``cache-policy-explicit-cache``).
            InputError: ``tail_role`` unknown, or ``"system"`` where a system message cannot
                go (empty history, or it ends with an assistant turn): code
                ``render-tail-role``.

        Warns:
            BreakpointWarning: an SDK breakpoint not placed (code
                ``breakpoint-below-minimum``, with the segment, tokens and minimum).

        Source: platform.claude.com/docs/en/build-with-claude/prompt-caching (at most 4
        breakpoints, 20-block lookback, longer TTLs before shorter; "Shorter prompts cannot
        be cached, even if marked with cache_control"); mid-conversation system messages:
        platform.claude.com/docs/en/build-with-claude/mid-conversation-system-messages.
        """
        check_model(model)
        self._check_not_empty()
        history_ttl = breakpoint_history_ttl(
            "anthropic", model, cache_policy, request_kind, history_ttl=history_ttl,
            head_ttl=self.head.head_ttl, method="to_anthropic()") or history_ttl
        features = model_features("anthropic", model)
        beta = features.tool_changes_beta
        prompt = self._stated_tools(in_history=beta is not None, native=False,
                                    text_as_user=not features.system_messages)
        role = anthropic.tail_role_for(prompt, supported=features.system_messages,
                                       asked=tail_role)
        content, fingerprints = anthropic.render(
            prompt, model=model, max_tokens=max_tokens, history_ttl=history_ttl,
            max_breakpoints=max_breakpoints, params=params,
            short=prompt._short_places(model), tail_role=role)
        headers = {anthropic.BETA_HEADER: beta} if beta and prompt.tool_change_count else {}
        return ProviderRequest._rendered(
            anthropic.WIRE_FORMAT, anthropic.ENDPOINT, content, fingerprints,
            tail_count=len(prompt.tail_texts), params={"model": model, **params},
            headers=headers)

    def _stated_tools(self, *, in_history: bool, native: bool,
                      text_as_user: bool = False) -> RenderedPrompt:
        """This prompt as a format states its tool changes and instructions: ``in_history``
        (Anthropic system messages) keeps the tool-change messages, else the history is
        rendered without them (a memo of its own); ``native`` (a request-level form, e.g.
        OpenAI ``allowed_tools``) needs no tail note, else disabled tools, or a change the
        history does not state yet, add the mask note to the tail (unless the caller's
        ``render(allowed_tools=)`` already put one there); ``text_as_user`` sends operator
        instructions as ``<system-reminder>`` user text (a model without system
        messages)."""
        note = bool(self.disabled_tools) if not in_history else self.pending_tool_change
        note = note and not native and not any(
            t.startswith(f"<{MASK_SLOT}>") for t in self.tail_texts)
        drop = not in_history and self.tool_change_count > 0
        convert = text_as_user and self.system_text_count > 0
        if not (note or drop or convert):
            return self
        changes: dict[str, Any] = {}
        if note:
            enabled = sorted({t.name for t in self.head.tools} - self.disabled_tools)
            text = allowed_tools_note(enabled)
            changes["tail_texts"] = (*self.tail_texts, tail_text(MASK_SLOT, text))
            changes["tail"] = (*self.tail, (MASK_SLOT, canonical_json(
                {"slot": MASK_SLOT, "text": text})))
        if drop or convert:
            kept: list[int] = []
            messages: list[Message] = []
            for i in range(self.message_count):
                message = self.message_list[i]
                if message.role == "system":
                    if message.tool_changes:
                        if drop:
                            continue
                    elif convert:
                        message = as_user_text(message)
                kept.append(i)
                messages.append(message)
            previous = self.previous_breakpoint
            if previous is not None:  # its index among the kept messages
                previous = bisect.bisect_right(kept, previous) - 1
            changes.update(
                message_list=messages, message_count=len(kept),
                history_segments=[self.history_segments[i] for i in kept],
                history_memo=self.history_memo.setdefault(f"variant-{drop:d}{convert:d}", {}),
                previous_breakpoint=None if previous is None or previous < 0 else previous,
                tool_change_count=self.tool_change_count if not drop else 0,
                system_text_count=0 if convert else self.system_text_count)
        return dataclasses.replace(self, **changes)

    def _short_places(self, model: str, provider: str = "anthropic"
                      ) -> frozenset[tuple[str, int]]:
        """The SDK breakpoint places whose prefix is surely below ``model``'s minimum at
        ``provider`` (see :meth:`to_anthropic`), each warned about once per head, model and
        place kind."""
        policy = cache_rules(provider, model)
        if policy.conservative or not policy.min_cacheable_tokens:
            return frozenset()
        head = self.head
        tokens = head.tokens
        if tokens is None:
            return frozenset()
        if not surely_below_minimum(policy, tokens):
            return frozenset()
        short: list[tuple[tuple[str, int], str, int]] = []
        if head.system:
            short.append((("system", len(head.system) - 1), f"system[{len(head.system) - 1}]",
                          tokens))
        elif len(head.tools):
            short.append((("tool", len(head.tools) - 1), "tools", tokens))
        if self.message_count:
            for segment in itertools.islice(self.history_segments, self.message_count):
                tokens += segment.tokens or 0
                if not surely_below_minimum(policy, tokens):
                    break
            else:
                last = self.message_count - 1
                short.append((("message", last), f"messages[{last}]", tokens))
        warned: set[tuple[str, str]] = head.wire_memo.setdefault(
            "anthropic-short-warned" if provider == "anthropic" else f"{provider}-short-warned",
            set())
        for place, segment_name, count in short:
            if (model, place[0]) in warned:
                continue
            warned.add((model, place[0]))
            which = "end-of-history" if place[0] == "message" else "end-of-head"
            warnings.warn(BreakpointWarning(
                f"the SDK's {which} cache breakpoint ({segment_name}) is not placed: the prefix "
                f"it would end is about {count} tokens (the head tokenizer's estimate), below "
                f"{model}'s minimum cacheable length of {policy.min_cacheable_tokens} tokens "
                f"({policy.source.split('; ')[-1]}), so it would write nothing and spend one "
                f"of the {policy.breakpoint_budget or anthropic.MAX_BREAKPOINTS} breakpoints; it "
                "is placed once the prefix is long enough", code="breakpoint-below-minimum",
                segment=segment_name, tokens=count, minimum=policy.min_cacheable_tokens),
                stacklevel=3)
        return frozenset(place for place, _, _ in short)

    # -- OpenAI -----------------------------------------------------------------------------

    def to_openai_chat(self, *, model: str, prompt_cache_key: bool | str | None = None,
                       system_role: str = "system", tail_role: str | None = None,
                       prompt_cache_ttl: str | None = None,
                       prompt_cache_mode: str | None = None, history_ttl: str | None = None,
                       cache_policy: CachePolicy | None = None, request_kind: str = "main",
                       **params: Any) -> ProviderRequest:
        """Render an OpenAI Chat Completions request (tools, system, history, tail last).

        Args:
            model: Model id.
            prompt_cache_key: ``True`` derives a routing key from the head fingerprint (same
                lineage -> same key), a str is sent as is, ``None`` sends none.
            system_role: ``"system"`` or ``"developer"``.
            tail_role: Role of the final tail message. Default: ``"developer"`` for models with
                an implicit breakpoint "at the end of the latest eligible user or tool message"
                (GPT-5.6+, per the policy table), so that breakpoint lands at the end of the
                stable history rather than on the volatile tail; ``"user"`` otherwise (some
                OpenAI-compatible chat templates reject a late system/developer message).
            prompt_cache_ttl: Turns explicit caching on (GPT-5.6+ only: models whose policy
                has a breakpoint budget): ``prompt_cache_options.ttl`` (Chat: ``"30m"``;
                Responses: ``"30m"`` or ``"12h"``) and ``prompt_cache_breakpoint`` markers,
                placed as for Anthropic: one at the end of the system text (a head of tools
                only has none: a tool holds no content part), one at the end of the history
                (on the last text part of the last message that has one), user-placed
                breakpoints kept (they take the request's TTL). In this mode every string
                content of the history is sent as one text part, so a message has the same
                bytes whether or not this request marks it; bytes differ from the
                default (implicit-only) render, so switching mode starts a new prefix.
            prompt_cache_mode: ``"implicit"`` (OpenAI's default: one implicit breakpoint
                plus the latest 3 explicit ones written) or ``"explicit"`` (no implicit one;
                the latest 4 written). Also turns explicit caching on; ``None`` sends no
                ``mode``.
            history_ttl: TTL of the end-of-history breakpoint when it should differ from
                ``prompt_cache_ttl`` (e.g. ``prompt_cache_ttl="12h"`` for the head,
                ``history_ttl="30m"`` for the history); longer TTLs must come first.
            cache_policy: A :class:`~stableprompt.CachePolicy`: its ``head`` TTL for
                ``request_kind`` becomes ``prompt_cache_ttl`` and its ``history`` TTL
                ``history_ttl`` (leave both arguments unset); a policy choosing neither
                changes nothing (implicit caching). A TTL the API does not offer for the
                model, or ``explicit_cache`` (Gemini's), is a ``PolicyError``.
            request_kind: ``"main"``, ``"subagent"`` or ``"one-shot"``.
            **params: Other body fields, canonicalized.

        Cost of explicit caching (``_policy``): a write is 1.25x the uncached input price
        for ``30m``, 2.5x for ``12h``; a read 0.1x. The end-of-history breakpoint writes the
        turn's new tokens once, so every later turn reads the whole prefix.

        Raises:
            InputError: bad arguments (code ``render-param``), or explicit caching asked of
                a model without it (code ``render-explicit-cache``).
            PolicyError: ``cache_policy`` asks for a TTL the API does not offer for the
                model (code ``cache-policy``) or an explicit cache
                (``cache-policy-explicit-cache``).
            BreakpointError: user-placed breakpoints over the write budget
                (``breakpoint-budget`` / ``breakpoint-evicts-history``) or a longer TTL after
                a shorter one (``breakpoint-ttl-order``), as :meth:`to_anthropic`.

        Source: developers.openai.com/api/docs/guides/prompt-caching (``prompt_cache_key``
        "is combined with the prefix hash"; tools are part of the cached prefix; implicit
        breakpoints for GPT-5.6 and later); openai-python ``PromptCacheOptions`` ("Each
        request can write up to four breakpoints ... considers up to the latest 80").
        """
        check_model(model)
        self._check_not_empty()
        if cache_policy is not None:
            prompt_cache_ttl, history_ttl = openai_ttls(
                openai_chat.WIRE_FORMAT, model, cache_policy, request_kind,
                prompt_cache_ttl=prompt_cache_ttl, history_ttl=history_ttl,
                method="to_openai_chat()")
        prompt, params = self._openai_tools(openai_chat.WIRE_FORMAT, model, params)
        content, fingerprints = openai_chat.render(
            prompt, model=model, prompt_cache_key=prompt_cache_key, system_role=system_role,
            tail_role=tail_role, params=params, prompt_cache_ttl=prompt_cache_ttl,
            prompt_cache_mode=prompt_cache_mode, history_ttl=history_ttl)
        return ProviderRequest._rendered(
            openai_chat.WIRE_FORMAT, openai_chat.ENDPOINT, content, fingerprints,
            tail_count=1 if prompt.tail else 0, params={"model": model, **params})

    def to_openai_responses(self, *, model: str, prompt_cache_key: bool | str | None = None,
                            system_role: str = "developer", tail_role: str | None = None,
                            prompt_cache_ttl: str | None = None,
                            prompt_cache_mode: str | None = None,
                            history_ttl: str | None = None,
                            cache_policy: CachePolicy | None = None,
                            request_kind: str = "main",
                            **params: Any) -> ProviderRequest:
        """Render an OpenAI Responses request: system as the first input message, then
        history items, tail last. Arguments as :meth:`to_openai_chat`.

        Source: openai-python ``responses/response_create_params.py``.
        """
        check_model(model)
        self._check_not_empty()
        if cache_policy is not None:
            prompt_cache_ttl, history_ttl = openai_ttls(
                openai_responses.WIRE_FORMAT, model, cache_policy, request_kind,
                prompt_cache_ttl=prompt_cache_ttl, history_ttl=history_ttl,
                method="to_openai_responses()")
        prompt, params = self._openai_tools(openai_responses.WIRE_FORMAT, model, params)
        content, fingerprints = openai_responses.render(
            prompt, model=model, prompt_cache_key=prompt_cache_key, system_role=system_role,
            tail_role=tail_role, params=params, prompt_cache_ttl=prompt_cache_ttl,
            prompt_cache_mode=prompt_cache_mode, history_ttl=history_ttl)
        return ProviderRequest._rendered(
            openai_responses.WIRE_FORMAT, openai_responses.ENDPOINT, content, fingerprints,
            tail_count=1 if prompt.tail else 0, params={"model": model, **params})

    def _openai_tools(self, wire_format: str, model: str, params: dict[str, Any]
                      ) -> tuple[RenderedPrompt, dict[str, Any]]:
        """This prompt and params as an OpenAI request states its tool changes: the history
        without tool-change messages, and ``tool_choice: allowed_tools`` naming the enabled
        tools where the model has it (``model_features``), else the tail mask note.

        Raises:
            InputError: ``tool_choice`` given as a dict while tools are disabled (code
                ``render-param``: pass ``"auto"`` or ``"required"``, which become the
                ``allowed_tools`` mode).
        """
        native = model_features("openai", model).allowed_tools
        prompt = self._stated_tools(in_history=False, native=native)
        if native and self.disabled_tools:
            mode = params.get("tool_choice", "auto")
            if mode not in ("auto", "required"):
                raise InputError(
                    f"tool_choice {mode!r} cannot be combined with disabled tools (sent as "
                    "tool_choice allowed_tools): pass 'auto' or 'required'",
                    code="render-param", pointer="/tool_choice")
            enabled = sorted({t.name for t in self.head.tools} - self.disabled_tools)
            params = {**params, "tool_choice": openai_allowed_tools(wire_format, enabled, mode)}
        return prompt, params


    # -- Gemini and Bedrock Converse -----------------------------------------------------------

    def to_gemini(self, *, model: str, stream: bool = False, cache: Any = None,
                  cache_policy: CachePolicy | None = None, request_kind: str = "main",
                  **params: Any) -> ProviderRequest:
        """Render a Gemini ``generateContent`` request: ``systemInstruction`` (one part per
        system block), ``tools`` (one ``functionDeclarations`` list, canonical order, the
        schema as ``parametersJsonSchema``), ``contents`` (role groups ``user`` / ``model``,
        function responses in user turns), the tail last. Gemini has no breakpoints:
        implicit caching reads the longest cached prefix on its own.

        Args:
            model: Model id; it goes in the URL path (``ProviderRequest.path``
                ``/v1beta/models/<model>:generateContent``), not the body.
            stream: Render for ``streamGenerateContent?alt=sse``.
            cache: A :class:`~stableprompt.GeminiCache` that holds this prompt's frozen head
                (and leading history): the body then references it (``cachedContent``),
                without ``systemInstruction`` / ``tools`` / ``toolConfig`` and without the
                history the cache holds. A cache that fell back to implicit caching (see
                ``GeminiCache.explicit``) renders the full body.
            cache_policy: A :class:`~stableprompt.CachePolicy`. ``explicit_cache=True`` is
                what ``cache`` holds: it must be passed (a render creates no cache, whose
                storage is billed per token-hour). Head / history TTLs are refused: implicit
                caching has none to choose (``GeminiCache(ttl_s=...)`` sets an explicit
                cache's). Keep-alive settings are the scheduler's, not the render's.
            request_kind: ``"main"``, ``"subagent"`` or ``"one-shot"``.
            **params: Other body fields (``generationConfig``, ``toolConfig``,
                ``safetySettings``...), canonicalized.

        Raises:
            PolicyError: the policy sets a TTL (code ``cache-policy``) or asks for an explicit
                cache without ``cache`` (code ``cache-policy-explicit-cache``).

        Source: ``googleapis/python-genai`` ``types.py`` (``GenerateContentConfig``,
        ``FunctionDeclaration.parameters_json_schema``, ``CachedContent``);
        ai.google.dev/gemini-api/docs/caching (PROVIDERS.md §4, §15).
        """
        check_model(model)
        self._check_not_empty()
        check_gemini_policy(cache_policy, request_kind, cache)
        name, covered = None, 0
        if cache is not None:
            name, covered = cache.reference_for(self, model)
        # No mid-conversation system role: instructions as <system-reminder> user text, tool
        # changes as the tail's allowed-tools note.
        prompt = self._stated_tools(in_history=False, native=False, text_as_user=True)
        content = gemini.render(prompt, params=params, cached_content=name,
                                cached_messages=covered)
        return ProviderRequest._rendered(
            gemini.WIRE_FORMAT, gemini.endpoint_for(model, stream=stream), content, None,
            tail_count=len(self.tail_texts), params={"model": model, **params})

    def to_bedrock_converse(self, *, model_id: str, stream: bool = False,
                            history_ttl: str = "5m",
                            max_breakpoints: int = bedrock_converse.MAX_BREAKPOINTS,
                            tool_choice: dict[str, Any] | None = None,
                            cache_policy: CachePolicy | None = None,
                            request_kind: str = "main",
                            **params: Any) -> ProviderRequest:
        """Render an AWS Bedrock Converse request: ``toolConfig.tools`` (``toolSpec``,
        canonical order), ``system``, ``messages`` (alternating role groups, tool results in
        user turns), the tail last, with ``cachePoint`` blocks placed as
        :meth:`to_anthropic` places ``cache_control`` (user-placed kept; end of head; end of
        stable history; a carry past the 20-block lookback; at most 4). A TTL the model does
        not offer raises; an SDK breakpoint whose prefix is surely below the model's minimum
        is not placed (warned once), as in :meth:`to_anthropic`, with the ``bedrock``
        policy entries.

        Args:
            model_id: Bedrock model id or inference-profile ARN; it goes in the URL path
                (``/model/<id>/converse``, percent-encoded), not the body.
            stream: Render for ConverseStream (``/converse-stream``).
            history_ttl: TTL of the SDK's end-of-history cache point (``"5m"`` / ``"1h"``).
            max_breakpoints: Cache point budget (Bedrock: 4).
            tool_choice: ``toolConfig.toolChoice`` (``{"auto": {}}``, ``{"any": {}}``,
                ``{"tool": {"name": ...}}``).
            cache_policy: As :meth:`to_anthropic`.
            request_kind: As :meth:`to_anthropic`.
            **params: Other body fields (``inferenceConfig``,
                ``additionalModelRequestFields``, ``requestMetadata``...), canonicalized.

        Source: botocore ``data/bedrock-runtime/2023-09-30/service-2.json``
        (``ConverseRequest``, ``CachePointBlock``, ``CacheTTL``);
        docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html.
        """
        check_model(model_id)
        self._check_not_empty()
        history_ttl = breakpoint_history_ttl(
            "bedrock", model_id, cache_policy, request_kind, history_ttl=history_ttl,
            head_ttl=self.head.head_ttl, method="to_bedrock_converse()") or history_ttl
        policy = cache_rules("bedrock", model_id)
        # Converse messages are user / assistant only (botocore ``ConversationRole``):
        # instructions as <system-reminder> user text, tool changes as the tail's note.
        prompt = self._stated_tools(in_history=False, native=False, text_as_user=True)
        content = bedrock_converse.render(
            prompt, model_id=model_id, history_ttl=history_ttl, max_breakpoints=max_breakpoints,
            params=params, policy=policy, short=self._short_places(model_id, "bedrock"),
            tool_choice=tool_choice)
        return ProviderRequest._rendered(
            bedrock_converse.WIRE_FORMAT, bedrock_converse.endpoint_for(model_id, stream=stream),
            content, None, tail_count=len(prompt.tail_texts),
            params={"model": model_id, **params})


public(RenderedPrompt)
