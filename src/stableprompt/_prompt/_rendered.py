"""RenderedPrompt (segments, bytes, fingerprints) and the provider request bodies built from it.

Bodies are assembled from bytes that were serialized once (tools once per head, each message
once per wire format), so rendering turn N+1 serializes only what is new. Top-level keys are
in sorted order, so the same logical request always gives the same body bytes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from .._canonical import canonical_json, loads
from .._exceptions import BreakpointError, CanonicalizationError, HistoryError, InputError
from .._policy import TTL_LABELS_S, cache_policy
from .._public import public
from .._segment import Segment, fingerprint_of, sum_tokens
from .._wire._segmenter import SegmentedRequest, segment_request
from ._messages import Message, cache_control, check_ttl, text_block_bytes

if TYPE_CHECKING:
    from ._builder import PinnedHead

__all__ = ["ProviderRequest", "RenderedPrompt"]

#: Anthropic lookback window: "The system checks at most 20 positions per breakpoint, counting
#: the breakpoint itself as the first" (platform.claude.com prompt-caching docs, 2026).
ANTHROPIC_LOOKBACK_BLOCKS = 20
ANTHROPIC_MAX_BREAKPOINTS = 4
_T = TypeVar("_T")


@dataclass(frozen=True)
class ProviderRequest:
    """A provider request body, ready to send.

    Attributes:
        wire_format: ``anthropic``, ``openai-chat`` or ``openai-responses``.
        path: URL path to POST to (``/v1/messages``, ``/v1/chat/completions``,
            ``/v1/responses``).
        content: The exact body bytes (UTF-8 JSON) to send.
    """

    wire_format: str
    path: str
    content: bytes = field(repr=False)

    @cached_property
    def body(self) -> dict[str, Any]:
        """The body as a fresh dict (decoded from ``content``)."""
        value: dict[str, Any] = loads(self.content)
        return value

    @cached_property
    def segmented(self) -> SegmentedRequest:
        """The body split into cache-order segments, exactly as a recorder or linter sees it."""
        return segment_request(self.wire_format, self.body)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """Cache-order segments of the body (params, tools, system, messages)."""
        return self.segmented.segments

    @property
    def data(self) -> bytes:
        """Concatenated segment bytes."""
        return self.segmented.data

    @property
    def fingerprint(self) -> str:
        """Request fingerprint: covers the cache-key parameters (model, tool_choice, thinking,
        reasoning effort, response schema) and every segment."""
        return self.segmented.fingerprint

    @property
    def head_fingerprint(self) -> str:
        """Model-scoped head fingerprint: the cache lineage of this request."""
        return self.segmented.head_fingerprint


@dataclass(frozen=True, eq=False)
class RenderedPrompt:
    """Head + history + tail, rendered.

    Attributes:
        segments: Ordered segments: ``tool:<name>``..., ``system[i]``..., ``messages[i]``...,
            ``tail:<slot>``... Each has kind, name, byte range, digest, chained prefix digest
            and token count.
        data: All segment bytes; ``data[s.start:s.end]`` reproduces segment ``s``.
    """

    head: PinnedHead = field(repr=False)
    messages: tuple[Message, ...] = field(repr=False)
    tail: tuple[tuple[str, bytes], ...] = field(repr=False)
    segments: tuple[Segment, ...]
    data: bytes = field(repr=False)
    previous_breakpoint: int | None = field(default=None, repr=False)

    @property
    def fingerprint(self) -> str:
        """Fingerprint of the whole rendered prompt, tail included (``sp1:<hex>``)."""
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
        """Total tokens over all segments, ``None`` without a tokenizer."""
        return sum_tokens(self.segments)

    def _check_not_empty(self) -> None:
        if not self.messages and not self.tail:
            raise HistoryError("nothing to send: the conversation has no message and no tail "
                               "(providers require at least one message)",
                               code="history-empty")

    def _tail_texts(self) -> list[str]:
        return [f"<{name}>\n{loads(data)['text']}\n</{name}>" for name, data in self.tail]

    # -- Anthropic --------------------------------------------------------------------------

    def to_anthropic(
        self,
        *,
        model: str,
        max_tokens: int,
        history_ttl: str = "5m",
        max_breakpoints: int = ANTHROPIC_MAX_BREAKPOINTS,
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
            **params: Other body fields (``tool_choice``, ``thinking``, ``temperature``,
                ``stream``, ``metadata``...), canonicalized.

        Raises:
            BreakpointError: user-placed breakpoints exceed the budget, or a longer TTL
                follows a shorter one (code ``breakpoint-ttl-order``).

        Source: platform.claude.com/docs/en/build-with-claude/prompt-caching (at most 4
        breakpoints, 20-block lookback, longer TTLs before shorter).
        """
        _check_model(model)
        self._check_not_empty()
        if type(max_tokens) is not int or max_tokens < 0:
            raise InputError(f"max_tokens must be an int >= 0, got {max_tokens!r}",
                             code="render-param", pointer="/max_tokens")
        if check_ttl(history_ttl, "history") is None:
            raise BreakpointError("history_ttl must be '5m' or '1h'", code="breakpoint-ttl")
        if type(max_breakpoints) is not int or not 1 <= max_breakpoints <= (
                ANTHROPIC_MAX_BREAKPOINTS):
            raise BreakpointError(
                f"max_breakpoints must be 1..{ANTHROPIC_MAX_BREAKPOINTS} (Anthropic's budget), "
                f"got {max_breakpoints!r}", code="breakpoint-budget")
        head = self.head
        # Group history into Anthropic messages: user and tool results share the user role.
        groups: list[tuple[str, list[tuple[int, int]]]] = []  # role, [(message idx, block idx)]
        for mi, message in enumerate(self.messages):
            role = "assistant" if message.role == "assistant" else "user"
            blocks = [(mi, bi) for bi in range(len(message.anthropic_blocks()))]
            if groups and groups[-1][0] == role:
                groups[-1][1].extend(blocks)
            else:
                groups.append((role, blocks))

        marks = self._anthropic_breakpoints(history_ttl, max_breakpoints)
        tool_bytes = list(_head_wire(head, "anthropic-tools", lambda: tuple(
            canonical_json(t) for t in head.tools.to_anthropic())))
        system_bytes = [text_block_bytes(t) for t in head.system]
        for (where, index), ttl in marks.items():
            if where == "tool":
                tool = list(head.tools)[index].to_anthropic()
                tool["cache_control"] = cache_control(ttl)
                tool_bytes[index] = canonical_json(tool)
            elif where == "system":
                system_bytes[index] = text_block_bytes(head.system[index], cache_ttl=ttl)

        messages_bytes: list[bytes] = []
        tail_blocks = [text_block_bytes(t) for t in self._tail_texts()]
        for gi, (role, blocks) in enumerate(groups):
            parts = []
            for mi, bi in blocks:
                wire = self.messages[mi].anthropic_blocks()
                mark = marks.get(("message", mi)) if bi == len(wire) - 1 else None
                parts.append(self.messages[mi].anthropic_block_with_breakpoint(bi, mark)
                             if mark else wire[bi])
            if gi == len(groups) - 1 and role == "user" and tail_blocks:
                parts.extend(tail_blocks)
                tail_blocks = []
            messages_bytes.append(_message(role, parts))
        if tail_blocks:
            messages_bytes.append(_message("user", tail_blocks))

        fields: dict[str, bytes] = {
            "max_tokens": canonical_json(max_tokens),
            "messages": b"[" + b",".join(messages_bytes) + b"]",
            "model": canonical_json(model),
        }
        if system_bytes:
            fields["system"] = b"[" + b",".join(system_bytes) + b"]"
        if tool_bytes:
            fields["tools"] = b"[" + b",".join(tool_bytes) + b"]"
        return ProviderRequest("anthropic", "/v1/messages", _body(fields, params))

    def _anthropic_breakpoints(self, history_ttl: str,
                               budget: int) -> dict[tuple[str, int], str]:
        """Choose breakpoint positions -> TTL label, in prompt order."""
        head = self.head
        user: dict[tuple[str, int], str] = {}
        for i, ttl in enumerate(head.system_ttls):
            if ttl:
                user[("system", i)] = ttl
        for mi, message in enumerate(self.messages):
            if message.breakpoint:
                user[("message", mi)] = message.breakpoint
        if len(user) > budget:
            raise BreakpointError(
                f"{len(user)} user-placed cache breakpoints exceed the budget of {budget}",
                code="breakpoint-budget")
        sdk: list[tuple[tuple[str, int], str]] = []  # in priority order: history, head, carry
        if self.messages:
            sdk.append((("message", len(self.messages) - 1), history_ttl))
        if head.system:
            sdk.append((("system", len(head.system) - 1), head.head_ttl))
        elif len(head.tools):
            sdk.append((("tool", len(head.tools) - 1), head.head_ttl))
        carry = self.previous_breakpoint
        if carry is not None and carry < len(self.messages) - 1:
            distance = sum(len(m.anthropic_blocks()) for m in self.messages[carry + 1:])
            if distance >= ANTHROPIC_LOOKBACK_BLOCKS:
                sdk.append((("message", carry), history_ttl))
        marks = dict(user)
        for key, ttl in sdk:
            if key not in marks and len(marks) < budget:
                marks[key] = ttl
        order = {"tool": 0, "system": 1, "message": 2}
        ranked = sorted(marks.items(), key=lambda kv: (order[kv[0][0]], kv[0][1]))
        for (earlier, ttl_a), (later, ttl_b) in itertools.pairwise(ranked):
            if TTL_LABELS_S[ttl_b] > TTL_LABELS_S[ttl_a]:
                raise BreakpointError(
                    f"a {ttl_b} breakpoint at {later[0]} {later[1]} follows a {ttl_a} "
                    f"breakpoint at {earlier[0]} {earlier[1]}: longer TTLs must come first "
                    "(raise head_ttl/history_ttl or move the breakpoint)",
                    code="breakpoint-ttl-order", segment=f"{later[0]}[{later[1]}]")
        return dict(ranked)

    # -- OpenAI -----------------------------------------------------------------------------

    def _openai_checks(self, model: str, prompt_cache_key: bool | str | None,
                       system_role: str, tail_role: str | None) -> str | None:
        """Validate the OpenAI render arguments; return the prompt_cache_key to send."""
        _check_model(model)
        self._check_not_empty()
        if system_role not in ("system", "developer"):
            raise InputError(f"system_role must be 'system' or 'developer', got {system_role!r}",
                             code="render-param")
        if tail_role not in (None, "user", "developer", "system"):
            raise InputError(f"tail_role must be 'user', 'developer' or 'system', got "
                             f"{tail_role!r}", code="render-param")
        if prompt_cache_key is True:
            return "sp-" + self.head.fingerprint.split(":", 1)[1][:24]
        if prompt_cache_key in (None, False):
            return None
        if not isinstance(prompt_cache_key, str) or not prompt_cache_key:
            raise InputError("prompt_cache_key must be True, a non-empty str, or None",
                             code="render-param", pointer="/prompt_cache_key")
        return prompt_cache_key

    def to_openai_chat(self, *, model: str, prompt_cache_key: bool | str | None = None,
                       system_role: str = "system", tail_role: str | None = None,
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
            **params: Other body fields, canonicalized.

        Source: developers.openai.com/api/docs/guides/prompt-caching (``prompt_cache_key``
        "is combined with the prefix hash"; tools are part of the cached prefix; implicit
        breakpoints for GPT-5.6 and later).
        """
        key = self._openai_checks(model, prompt_cache_key, system_role, tail_role)
        head = self.head
        parts: list[bytes] = []
        if head.system:
            content: Any = head.system[0] if len(head.system) == 1 else [
                {"text": t, "type": "text"} for t in head.system]
            parts.append(canonical_json({"content": content, "role": system_role}))
        for message in self.messages:
            parts.extend(message.openai_chat())
        tail = self._tail_texts()
        if tail:
            role = tail_role or _openai_tail_role(model)
            parts.append(canonical_json({"content": "\n".join(tail), "role": role}))
        fields = {"messages": b"[" + b",".join(parts) + b"]", "model": canonical_json(model)}
        if len(head.tools):
            fields["tools"] = _head_wire(head, "openai-chat-tools",
                                         lambda: canonical_json(head.tools.to_openai_chat()))
        if key:
            params = {**params, "prompt_cache_key": key}
        return ProviderRequest("openai-chat", "/v1/chat/completions", _body(fields, params))

    def to_openai_responses(self, *, model: str, prompt_cache_key: bool | str | None = None,
                            system_role: str = "developer", tail_role: str | None = None,
                            **params: Any) -> ProviderRequest:
        """Render an OpenAI Responses request: system as the first input message, then
        history items, tail last. Arguments as :meth:`to_openai_chat`.

        Source: openai-python ``responses/response_create_params.py``.
        """
        key = self._openai_checks(model, prompt_cache_key, system_role, tail_role)
        head = self.head
        items: list[bytes] = []
        if head.system:
            items.append(canonical_json({
                "content": [{"text": t, "type": "input_text"} for t in head.system],
                "role": system_role, "type": "message"}))
        for message in self.messages:
            items.extend(message.openai_responses())
        tail = self._tail_texts()
        if tail:
            items.append(canonical_json({
                "content": [{"text": "\n".join(tail), "type": "input_text"}],
                "role": tail_role or _openai_tail_role(model), "type": "message"}))
        fields = {"input": b"[" + b",".join(items) + b"]", "model": canonical_json(model)}
        if len(head.tools):
            fields["tools"] = _head_wire(
                head, "openai-responses-tools",
                lambda: canonical_json(head.tools.to_openai_responses()))
        if key:
            params = {**params, "prompt_cache_key": key}
        return ProviderRequest("openai-responses", "/v1/responses", _body(fields, params))


def _openai_tail_role(model: str) -> str:
    """``developer`` where the policy says the model places implicit breakpoints at the latest
    user/tool message (it has a breakpoint budget), else ``user``."""
    return "developer" if cache_policy("openai", model).breakpoint_budget else "user"


def _head_wire(head: PinnedHead, key: str, build: Callable[[], _T]) -> _T:
    """Serialize a head-level piece once per head and wire format."""
    cache: dict[str, Any] = head._wire
    if key not in cache:
        cache[key] = build()
    value: _T = cache[key]
    return value


def _check_model(model: object) -> None:
    if not isinstance(model, str) or not model:
        raise InputError(f"model must be a non-empty str, got {model!r}", code="render-param",
                         pointer="/model")


def _message(role: str, blocks: Sequence[bytes]) -> bytes:
    return b'{"content":[' + b",".join(blocks) + b'],"role":' + canonical_json(role) + b"}"


def _body(fields: dict[str, bytes], params: Mapping[str, Any]) -> bytes:
    """Join pre-serialized top-level fields and params in sorted key order."""
    clash = sorted(set(fields) & set(params))
    if clash:
        raise InputError(f"parameter(s) {', '.join(clash)} are set by the renderer; pass them "
                         "as the named arguments", code="render-param-clash")
    merged = dict(fields)
    for key, value in params.items():
        try:
            merged[key] = canonical_json(value)
        except CanonicalizationError as exc:
            raise CanonicalizationError(exc.message, code=exc.code,
                                        pointer=f"/{key}{exc.pointer or ''}") from exc
    return b"{" + b",".join(canonical_json(k) + b":" + merged[k] for k in sorted(merged)) + b"}"


public(ProviderRequest, RenderedPrompt)
