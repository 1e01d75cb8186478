"""What OpenAI Chat Completions and Responses share: render checks, the tail role, the
``sp-`` lineage cache key, message segmenting and the ``prompt_cache_key`` session hint."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._canonical import canonical_json, decoded_json, loads
from .._exceptions import CaptureError, InputError
from .._policy import cache_rules, openai_explicit_rule
from .._segment import chain_pieces
from ._breakpoints import Place, breakpoints
from ._parts import (
    Fingerprints,
    HeadParts,
    MessageParts,
    PromptParts,
    ToolParts,
    check_model,
    check_reasoning,
    envelope,
    extend_prefix,
    history_entry,
    joined,
    memo,
    param_bytes,
    param_datas,
    request_fingerprints,
    segment_datas,
    store_entry,
    tool_json,
)
from ._segmenter import SegmentBuilder

__all__ = [
    "CACHE_MODES",
    "DIAGNOSTICS_OPTION",
    "LINEAGE_KEY_PREFIX",
    "MARKER_KEY",
    "OPTIONS_KEY",
    "SYSTEM_ROLES",
    "ExplicitCache",
    "allowed_tools",
    "body",
    "diagnostics_request",
    "explicit_cache",
    "fingerprints",
    "history",
    "marked_bytes",
    "marker",
    "parts_bytes",
    "render_checks",
    "segment_message",
    "session_hint",
    "system_item",
    "system_parts",
    "tail_role",
]

MARKER_KEY = "prompt_cache_breakpoint"
"""The breakpoint marker's key on an input item (GPT-5.6+)."""

LINEAGE_KEY_PREFIX = "sp-"
"""Prefix of the ``prompt_cache_key`` stableprompt derives from a head fingerprint
(``prompt_cache_key=True``): it names a lineage, never a conversation."""

SYSTEM_ROLES = ("system", "developer")


def lineage_key(head_fingerprint: str) -> str:
    """The ``prompt_cache_key`` naming the lineage of ``head_fingerprint`` (``sp-`` + 24 hex
    digits of the digest): what ``prompt_cache_key=True`` sends."""
    return LINEAGE_KEY_PREFIX + head_fingerprint.split(":", 1)[1][:24]


def render_checks(head_fingerprint: str, model: str, prompt_cache_key: bool | str | None,
                  system_role: str, tail_role: str | None) -> str | None:
    """Validate the OpenAI render arguments; return the ``prompt_cache_key`` to send.

    Raises:
        InputError: bad model, role or key (code ``render-param``).
    """
    check_model(model)
    if system_role not in SYSTEM_ROLES:
        raise InputError(f"system_role must be 'system' or 'developer', got {system_role!r}",
                         code="render-param")
    if tail_role not in (None, "user", "developer", "system"):
        raise InputError(f"tail_role must be 'user', 'developer' or 'system', got "
                         f"{tail_role!r}", code="render-param")
    if prompt_cache_key is True:
        return lineage_key(head_fingerprint)
    if prompt_cache_key in (None, False):
        return None
    if not isinstance(prompt_cache_key, str) or not prompt_cache_key:
        raise InputError("prompt_cache_key must be True, a non-empty str, or None",
                         code="render-param", pointer="/prompt_cache_key")
    return prompt_cache_key


def body(head: HeadParts, history: list[bytes | memoryview], *, history_key: str,
         tool: Callable[[ToolParts], Any], memo_key: str, model: str, key: str | None,
         params: Mapping[str, Any]) -> bytes:
    """An OpenAI body around the pieces of its ``history_key`` array: ``model``, ``tools``
    (serialized once per head under ``memo_key``), the ``prompt_cache_key`` when there is
    one, the params, in sorted key order (the envelope joined once per head, model, key and
    params: ``_parts.envelope``).

    Raises:
        InputError: a param clash; CanonicalizationError: a param is no canonical JSON.
    """
    def fields() -> dict[str, bytes]:
        made = {"model": param_bytes("model", model)}
        if len(head.tools):
            made["tools"] = memo(head, memo_key,
                                 lambda: joined([tool_json(tool, t) for t in head.tools]))
        return made

    if key:
        params = {**params, "prompt_cache_key": key}
    before, after = envelope(memo(head, memo_key + "-envelopes", dict), (type(model), model),
                             fields, history_key, params)
    return b"".join([*before, *history, *after])


def render(prompt: PromptParts, *, wire_format: str, history_key: str,
           serialize: Callable[[MessageParts], tuple[bytes, ...]], system: bytes | None,
           tail: bytes | None, tool: Callable[[ToolParts], Any], tools_memo_key: str,
           segment: Callable[[Any, SegmentBuilder], None], names: tuple[str, ...],
           reserved: frozenset[str], model: str, key: str | None, params: Mapping[str, Any],
           system_role: str, explicit: ExplicitCache | None = None,
           text_type: str = "text") -> tuple[bytes, Fingerprints | None]:
    """An OpenAI body (``tools``, the system item, the history under ``history_key``, the
    tail item last) and its lazy fingerprints (:func:`fingerprints`): what Chat Completions
    and Responses share once their items are made.

    With ``explicit`` (see :func:`explicit_cache`): every string content of the history is
    sent as one text part of ``text_type`` (so a message has the same bytes whether this
    request marks it or not), the marks are ``prompt_cache_breakpoint`` objects on the last
    text part of the marked items, and ``prompt_cache_options`` is added; ``system`` must
    then be the system item in that parts form with its marks. The fingerprints then come
    from the segmented body.

    Raises:
        InputError: a param clash (:func:`._parts.body_pieces`).
        HistoryError: see :func:`history`.
    """
    first, last = [system] if system else [], [tail] if tail else []
    if explicit is None:
        pieces = history(prompt, wire_format, serialize, first, last)
    else:
        params = {**params, OPTIONS_KEY: explicit.options}
        pieces = history(prompt, wire_format, lambda m: parts_bytes(
            m, wire_format, serialize, text_type), first, last, variant="-parts",
            fresh_last=lambda m: marked_bytes(
                m, explicit.marks.get(("message", prompt.message_count - 1)), explicit.ttl,
                serialize, text_type))
    content = body(prompt.head, pieces, history_key=history_key, tool=tool,
                   memo_key=tools_memo_key, model=model, key=key, params=params)
    if explicit is not None:
        return content, None
    return content, fingerprints(
        prompt, wire_format=wire_format, names=names, model=model, key=key, params=params,
        reserved=reserved,
        head_body=lambda: head_only_body(prompt.head, system, history_key=history_key,
                                         tools_memo_key=tools_memo_key, tool=tool),
        segment=segment, serialize=serialize, tail=tail, system_role=system_role)


def history(prompt: PromptParts, wire_format: str,
            serialize: Callable[[MessageParts], tuple[bytes, ...]],
            first: list[bytes], last: list[bytes], *, variant: str = "",
            fresh_last: Callable[[MessageParts], tuple[bytes, ...]] | None = None
            ) -> list[bytes | memoryview]:
    """The pieces of the messages / input array: ``first`` items, every history message's
    items (``serialize``, memoized per message), ``last`` items.

    The joined items of the history rendered so far are kept in the history memo under
    ``<wire_format><variant>-body`` (validated by chained digest), so a turn serializes and
    copies only what is new plus one copy of the whole array into the body. With
    ``fresh_last`` the last message's items are ``fresh_last(message)`` (made every render:
    it holds this request's end-of-history breakpoint) and the memo stops before it.

    Raises:
        HistoryError: a new message holds reasoning of another format (see
            :func:`check_reasoning`).
    """
    messages, count = prompt.message_list, prompt.message_count
    key = wire_format + variant + "-body"
    stop = count - 1 if fresh_last is not None and count else count
    found = history_entry(prompt, key)
    done, prefix = found if found is not None and found[0] <= stop else (0, None)
    check_reasoning(prompt, wire_format, done)
    new = [item for i in range(done, stop) for item in serialize(messages[i])]
    if new or prefix is None:
        prefix = extend_prefix(prefix, new)
        store_entry(prompt, key, stop, prefix)
    items: list[bytes | memoryview] = [*first]
    if prefix[1]:
        items.append(memoryview(prefix[0])[:prefix[1]])
    if stop < count:
        assert fresh_last is not None
        items.extend(fresh_last(messages[stop]))
    items.extend(last)
    pieces: list[bytes | memoryview] = [b"["]
    for i, item in enumerate(items):
        if i:
            pieces.append(b",")
        pieces.append(item)
    pieces.append(b"]")
    return pieces


def system_item(head: HeadParts, wire_format: str, system_role: str,
                make: Callable[[HeadParts, str], bytes]) -> bytes | None:
    """The format's system item for ``system_role`` (``make(head, system_role)``),
    serialized once per head, format and role; ``None`` for a head without system text."""
    if not head.system:
        return None
    key = _SYSTEM_KEYS.get((wire_format, system_role))
    if key is None:
        key = _SYSTEM_KEYS[wire_format, system_role] = f"{wire_format}-system-{system_role}"
    return memo(head, key, lambda: make(head, system_role))


_SYSTEM_KEYS: dict[tuple[str, str], str] = {}
"""Head memo keys of the system items, per format and role (made once)."""


def head_only_body(head: HeadParts, system: bytes | None, *, history_key: str,
                   tools_memo_key: str, tool: Callable[[ToolParts], Any]) -> bytes:
    """A body holding only the head: the tools (serialized once per head under
    ``tools_memo_key``) and the system item, under the format's ``history_key``."""
    tools = memo(head, tools_memo_key, lambda: joined([tool_json(tool, t) for t in head.tools]))
    return (b'{"' + history_key.encode() + b'":' + joined([system] if system else [])
            + b',"tools":' + (tools if len(head.tools) else b"[]") + b"}")


def fingerprints(prompt: PromptParts, *, wire_format: str, names: tuple[str, ...], model: str,
                 key: str | None, params: Mapping[str, Any], reserved: frozenset[str],
                 head_body: Callable[[], bytes], segment: Callable[[Any, SegmentBuilder], None],
                 serialize: Callable[[MessageParts], tuple[bytes, ...]],
                 tail: bytes | None, system_role: str
                 ) -> Fingerprints | None:
    """``(fingerprint, head_fingerprint)`` of an OpenAI body, as :func:`segment_request`
    would give them, chained incrementally (lazily, on first use).

    ``head_body`` is a body holding only the tools and the system item (segmented once per
    head and ``system_role``), ``serialize`` a message's items, ``tail`` the tail item.
    ``None`` (the segmented body decides) when ``params`` hold a field the segmenter reads as
    content, or without history (a tail item may then count as leading system).
    """
    if reserved & params.keys() or not prompt.message_count:
        return None

    def message(state: bytes, m: MessageParts) -> bytes:
        # Not memoized: chained once (the history memo keeps the state after it); a second,
        # wrapped copy of every message would double what a conversation holds.
        for item in serialize(m):
            for pieces in _item_pieces(loads(item)):
                state = chain_pieces(state, "message", pieces)
        return state

    def make() -> tuple[str, str]:
        values = {**params, "prompt_cache_key": key} if key else params
        tail_segments = () if tail is None else tuple([
            ("message", b"".join(pieces)) for pieces in _item_pieces(loads(tail))])
        return request_fingerprints(
            prompt, f"{wire_format}:{system_role}", param_datas(names, model, values),
            lambda: segment_datas(MARKER_KEY, lambda b: segment(loads(head_body()), b)),
            message, tail_segments)

    return make


_ROLE_HEADS = {role: b'{"role":' + canonical_json(role)
               for role in ("user", "assistant", "tool", "system", "developer")}


def _item_pieces(item: dict[str, Any]) -> list[tuple[bytes, ...]]:
    """The ``message`` segments :func:`segment_message` makes of one rendered, non-leading
    item (a dict :func:`loads` just gave, consumed here: ``decoded_json`` serializes its
    parts; no marker: the renderer places none), each as the pieces of its bytes, without a
    builder: one per content block (``{"role":..,"block":..}``), or one for string / null
    content (``{"role":..,"content":..}``), then one for the other fields.
    tests/test_incremental_render.py checks every render against the segmenter."""
    out: list[tuple[bytes, ...]] = []
    if "role" in item or "content" in item:
        role = item.pop("role", None)
        content = item.pop("content", None)
        head = _ROLE_HEADS.get(role) if type(role) is str else None
        if head is None:
            head = b'{"role":' + decoded_json(role, kept=False)
        if type(content) is list:
            out.extend([(head, b',"block":', decoded_json(block, kept=False), b"}")
                        for block in content])
        else:
            out.append((head, b',"content":', decoded_json(content, kept=False), b"}"))
    if item:  # the other fields, in their (sorted) order
        out.append((decoded_json(item, kept=False),))
    return out


# -- explicit caching (GPT-5.6+) ----------------------------------------------------------------

OPTIONS_KEY = "prompt_cache_options"
"""Body object with the request's cache ``ttl`` / ``mode`` (and ``comparison_response_id``)."""

CACHE_MODES = ("implicit", "explicit")


@dataclass(frozen=True, slots=True)
class ExplicitCache:
    """One request's explicit caching: its ``prompt_cache_options`` and breakpoint marks.

    Attributes:
        ttl: The request's TTL label (``prompt_cache_options.ttl``); a marker with this TTL
            omits its own ``ttl`` (it inherits).
        options: The ``prompt_cache_options`` object sent.
        marks: Place -> TTL label of each ``prompt_cache_breakpoint`` (system parts and
            history messages; see ``_breakpoints.breakpoints``).
    """

    ttl: str
    options: Mapping[str, str]
    marks: Mapping[Place, str]


def explicit_cache(prompt: PromptParts, *, wire_format: str, model: str, ttl: str | None,
                   mode: str | None, history_ttl: str | None,
                   params: Mapping[str, Any]) -> ExplicitCache | None:
    """The explicit caching a render asked for (``None`` when ``ttl``, ``mode`` and
    ``history_ttl`` are all ``None``): its options and its breakpoint places, by the one
    placement rule (``_breakpoints.breakpoints``: user-placed breakpoints kept, the SDK's at
    the end of the head's system text and at the end of the history, budget and TTL order
    checked) with the API's write budget (``_policy.OPENAI_EXPLICIT_RULES``: 4 explicit
    breakpoints written in ``explicit`` mode, 3 beside the implicit one) and no lookback
    (matching considers the latest 80 breakpoints, with no block window). User-placed
    breakpoints (``5m`` / ``1h``, Anthropic labels) take the request's TTL here.

    Raises:
        InputError: the model has no explicit caching (code ``render-explicit-cache``), a TTL
            or mode the API does not accept (``render-param``), or ``prompt_cache_options``
            also given as a param (``render-param``).
        BreakpointError: see ``_breakpoints.breakpoints``.
    """
    if ttl is None and mode is None and history_ttl is None:
        return None
    rule = openai_explicit_rule(wire_format, model)
    if rule is None:
        raise InputError(
            f"{model!r} has no explicit prompt caching (prompt_cache_breakpoint and "
            "prompt_cache_options are GPT-5.6 and later, per the policy table): drop "
            "prompt_cache_ttl / prompt_cache_mode / history_ttl, or override the policy",
            code="render-explicit-cache", pointer="/prompt_cache_options")
    for name, value in (("prompt_cache_ttl", ttl), ("history_ttl", history_ttl)):
        if value is not None and value not in rule.ttls:
            raise InputError(f"{name} must be one of {rule.ttls} on {wire_format}, got "
                             f"{value!r}", code="render-param", pointer="/prompt_cache_options")
    if mode is not None and mode not in CACHE_MODES:
        raise InputError(f"prompt_cache_mode must be 'implicit' or 'explicit', got {mode!r}",
                         code="render-param", pointer="/prompt_cache_options/mode")
    if OPTIONS_KEY in params:
        raise InputError("prompt_cache_options is made from prompt_cache_ttl / "
                         "prompt_cache_mode: do not pass it as a param too",
                         code="render-param", pointer="/prompt_cache_options")
    ttl = ttl or rule.ttls[0]
    budget = rule.written_explicit_mode if mode == "explicit" else rule.written_implicit_mode
    marks, _ = breakpoints(prompt, history_ttl or ttl, budget, lookback=None, head_ttl=ttl,
                           user_ttl=ttl, tool_marks=False)
    options = {"ttl": ttl} if mode is None else {"mode": mode, "ttl": ttl}
    return ExplicitCache(ttl, options, marks)


def system_parts(head: HeadParts, role: str, explicit: ExplicitCache, text_type: str,
                 extra: Mapping[str, str]) -> bytes | None:
    """The system item in parts form (one text part per system block), with the marks of
    ``explicit`` on its parts, plus the ``extra`` fields (Responses: ``"type": "message"``);
    ``None`` for a head without system text."""
    if not head.system:
        return None
    parts: list[dict[str, Any]] = []
    for i, text in enumerate(head.system):
        part: dict[str, Any] = {"text": text, "type": text_type}
        mark = explicit.marks.get(("system", i))
        if mark is not None:
            part[MARKER_KEY] = marker(None if mark == explicit.ttl else mark)
        parts.append(part)
    return canonical_json({"content": parts, "role": role, **extra})


def marker(ttl: str | None) -> dict[str, str]:
    """A ``prompt_cache_breakpoint`` object: ``{"mode": "explicit"}``, plus ``ttl`` when it
    differs from the request's (``None``: inherit). Source: openai-python
    ``chat/chat_completion_content_part_text_param.py`` (``PromptCacheBreakpoint``)."""
    return {"mode": "explicit"} if ttl is None else {"mode": "explicit", "ttl": ttl}


def _part_key(item: Mapping[str, Any]) -> str | None:
    """Where an item keeps its content parts: ``output`` (a Responses
    ``function_call_output``), ``content`` (a message; not a Responses assistant replay,
    whose string content has no input part), else ``None``."""
    if item.get("type") == "function_call_output":
        return "output"
    if item.get("type") == "message" and item.get("role") == "assistant":
        return None
    return "content" if "content" in item else None


def _as_parts(item: dict[str, Any], text_type: str) -> dict[str, Any]:
    key = _part_key(item)
    if key is not None and isinstance(item.get(key), str):
        item[key] = [{"text": item[key], "type": text_type}]
    return item


def parts_bytes(message: MessageParts, wire_format: str,
                serialize: Callable[[MessageParts], tuple[bytes, ...]],
                text_type: str) -> tuple[bytes, ...]:
    """A message's items with every string content as one text part (and a
    ``prompt_cache_breakpoint`` inheriting the request's TTL on its last text part when the
    user placed a breakpoint on it), serialized once per message."""
    cache = message.wire_memo
    key = wire_format + "-parts"
    found: tuple[bytes, ...] | None = cache.get(key)
    if found is None:
        found = cache[key] = marked_bytes(message, "user" if message.breakpoint else None,
                                          None, serialize, text_type)
    return found


def marked_bytes(message: MessageParts, ttl: str | None, request_ttl: str | None,
                 serialize: Callable[[MessageParts], tuple[bytes, ...]],
                 text_type: str) -> tuple[bytes, ...]:
    """A message's items in parts form with a breakpoint of ``ttl`` on the last text part of
    its last item that has one (``ttl`` ``None``: no breakpoint; equal to ``request_ttl`` or
    ``"user"``: one inheriting the request's TTL). A message with no text part (an assistant
    turn of tool calls only) takes no breakpoint."""
    items = [_as_parts(loads(item), text_type) for item in serialize(message)]
    if ttl is not None:
        for item in reversed(items):
            key = _part_key(item)
            parts = item.get(key) if key else None
            if isinstance(parts, list) and parts and isinstance(parts[-1], dict) \
                    and parts[-1].get("type") == text_type:
                parts[-1][MARKER_KEY] = marker(None if ttl in ("user", request_ttl) else ttl)
                break
    return tuple([canonical_json(item) for item in items])


def allowed_tools(wire_format: str, names: Sequence[str], mode: str) -> dict[str, Any]:
    """``tool_choice`` restricting the callable tools to ``names`` without changing
    ``tools``: Chat ``{"type": "allowed_tools", "allowed_tools": {"mode", "tools":
    [{"type": "function", "function": {"name"}}]}}``, Responses ``{"type": "allowed_tools",
    "mode", "tools": [{"type": "function", "name"}]}``. Source: openai-python
    ``chat/chat_completion_allowed_tool_choice_param.py``,
    ``responses/tool_choice_allowed_param.py``."""
    if wire_format == "openai-chat":
        return {"allowed_tools": {"mode": mode, "tools": [
            {"function": {"name": n}, "type": "function"} for n in names]},
            "type": "allowed_tools"}
    return {"mode": mode, "tools": [{"name": n, "type": "function"} for n in names],
            "type": "allowed_tools"}


def tail_role(model: str) -> str:
    """``developer`` where the policy says the model places implicit breakpoints at the latest
    user/tool message (it has a breakpoint budget), else ``user``."""
    return "developer" if cache_rules("openai", model).breakpoint_budget else "user"


def segment_message(b: SegmentBuilder, message: Any, base: str, path: str,
                    leading: bool) -> bool:
    """Add one chat message / Responses input item; returns whether it still counts as the
    leading system part (system and developer messages before any other)."""
    if not isinstance(message, Mapping):
        if isinstance(message, str):  # Responses allows bare strings? keep as content
            b.content("message", base, path, "user", message)
            return False
        raise CaptureError("input item must be an object", code="capture-shape", pointer=path)
    role = message.get("role")
    is_system = leading and role in SYSTEM_ROLES
    kind = "system" if is_system else "message"
    rest = {k: v for k, v in message.items() if k not in ("role", "content")}
    if "content" in message or "role" in message:
        b.content(kind, base, path, role, message.get("content"))
    if rest:
        b.rest(kind, base, path, role, rest)
    return is_system


def session_hint(body: Mapping[str, Any]) -> tuple[str, bool] | None:
    """``(prompt_cache_key, names_a_conversation)``: a key stableprompt derived from a head
    (``sp-...``) names a lineage only, so it scopes candidates but is no session."""
    key = body.get("prompt_cache_key")
    if not isinstance(key, str) or not key:
        return None
    return key, not key.startswith(LINEAGE_KEY_PREFIX)


DIAGNOSTICS_OPTION = OPTIONS_KEY
"""Body object holding ``comparison_response_id`` (Responses; the emulator's chat too)."""


def diagnostics_request(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{"comparison_response_id": ...}`` when the body asks for a cache comparison."""
    options = body.get(DIAGNOSTICS_OPTION)
    if isinstance(options, Mapping) and "comparison_response_id" in options:
        return {"comparison_response_id": options["comparison_response_id"]}
    return None
