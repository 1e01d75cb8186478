"""What a wire renderer reads, and the body assembly every request format shares.

The ``_wire`` request formats render a prompt without knowing the builder's classes: they read
the members declared here (:class:`PromptParts` and what it holds), which
:class:`~stableprompt.RenderedPrompt`, :class:`~stableprompt.PinnedHead`,
:class:`~stableprompt.Message` and :class:`~stableprompt.Tool` satisfy structurally. Each
``wire_memo`` is a per-object dict where a format keeps the bytes it serialized once (keys are
format-prefixed, e.g. ``"anthropic"``), so a later render reuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from .._canonical import canonical_json
from .._exceptions import BreakpointError, CanonicalizationError, InputError

__all__ = [
    "BREAKPOINT_TTLS",
    "HeadParts",
    "MessageParts",
    "PromptParts",
    "ToolParts",
    "ToolsParts",
    "check_model",
    "check_ttl",
    "join_body",
    "joined",
    "memo",
    "tool_fields",
]

_T = TypeVar("_T")

BREAKPOINT_TTLS = ("5m", "1h")
"""The TTL labels a cache breakpoint placed through the builder may ask for."""


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
    def tail_texts(self) -> tuple[str, ...]:
        """Tail slots as ``<slot>\\nvalue\\n</slot>`` texts, in declaration order."""
        ...
    @property
    def previous_breakpoint(self) -> int | None:
        """Index of the message the previous render's history breakpoint was on."""
        ...


def memo(owner: HeadParts | MessageParts, key: str, build: Callable[[], _T]) -> _T:
    """Serialize a piece once per owner and key (``owner.wire_memo[key]``)."""
    cache = owner.wire_memo
    if key not in cache:
        cache[key] = build()
    value: _T = cache[key]
    return value


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


def join_body(fields: Mapping[str, bytes], params: Mapping[str, Any]) -> bytes:
    """Join pre-serialized top-level fields and canonicalized params in sorted key order.

    Raises:
        InputError: a param names a field the renderer sets (code ``render-param-clash``).
        CanonicalizationError: a param value is not canonical JSON (pointer ``/<param>...``).
    """
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


def joined(parts: Sequence[bytes]) -> bytes:
    """A JSON array of pre-serialized values."""
    return b"[" + b",".join(parts) + b"]"
