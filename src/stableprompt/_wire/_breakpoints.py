"""Cache breakpoint placement: one rule for every format with explicit markers.

Anthropic ``cache_control`` and OpenAI (GPT-5.6+) ``prompt_cache_breakpoint`` markers are
placed by the same rule: user-placed breakpoints are kept where the user put them; the SDK
adds one at the end of the stable history and one at the end of the head (and, where the
provider has a lookback window, one kept where the previous request's history breakpoint
was); SDK breakpoints are dropped (carry, then head) past the budget; a longer TTL after a
shorter one is refused. The formats differ only in their arguments: the budget, the
lookback, the TTL labels and which places can hold a marker.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from .._exceptions import BreakpointError
from .._policy import TTL_LABELS_S
from ._parts import HeadParts, PromptParts, check_ttl, memo

__all__ = ["Place", "breakpoints", "check_sdk_marks", "lookback_carry", "place_name"]

_PLACE_ORDER = {"tool": 0, "system": 1, "message": 2}
_PLACE_NAMES = {"tool": "tools", "system": "system", "message": "messages"}

Place = tuple[str, int]
"""Where a breakpoint goes: ``("tool" | "system" | "message", index)``."""


def place_name(place: Place) -> str:
    """A place as a segment-style name: ``tools[2]``, ``system[0]``, ``messages[5]``."""
    return f"{_PLACE_NAMES[place[0]]}[{place[1]}]"


def breakpoints(prompt: PromptParts, history_ttl: str, budget: int, *,
                known: Sequence[tuple[int, str]] = (), scan_from: int = 0,
                short: frozenset[Place] = frozenset(), lookback: int | None = None,
                head_ttl: str | None = None, user_ttl: str | None = None,
                tool_marks: bool = True) -> tuple[dict[Place, str], dict[Place, str]]:
    """Choose breakpoint places -> TTL label, in prompt order; returns ``(marks, user)``,
    ``user`` the user-placed ones (system blocks and messages).

    User-placed ones are kept where the user put them; the SDK adds one at the end of the
    stable history (for a request that writes nothing new, ``prompt.cache_write`` false:
    where the previous request's was, see :func:`_history_place`), one at the end of the
    head, and, when ``lookback`` is a number and the
    previous render's history breakpoint is that many blocks back or more, one kept there
    (carry; Anthropic's 20-block window, ``None`` where matching has no lookback limit);
    SDK breakpoints are dropped (carry, then head) past the budget. SDK places in ``short``
    (their prefix is below the model's minimum cacheable length, see
    ``RenderedPrompt.to_anthropic``) are not spent: a marker there would write nothing.

    Args:
        head_ttl: TTL label of the SDK's end-of-head breakpoint (default: the head's own
            ``head_ttl``).
        user_ttl: When given, every user-placed breakpoint takes this label (a format whose
            labels differ from the builder's ``5m`` / ``1h``: OpenAI markers inherit the
            request's TTL).
        tool_marks: Whether a tool definition can hold a marker (OpenAI: no; a head of tools
            only then gets no end-of-head breakpoint).

    Raises:
        BreakpointError: user-placed breakpoints exceed the budget (code
            ``breakpoint-budget``), fill it so that the SDK's end-of-history breakpoint has no
            room (code ``breakpoint-evicts-history``: never dropped silently), or a longer TTL
            follows a shorter one (code ``breakpoint-ttl-order``).
    """
    head, messages, count = prompt.head, prompt.message_list, prompt.message_count
    system_marks, head_mark = memo(head, _HEAD_MARKS_KEY, lambda: _head_marks(head))
    user: dict[Place, str] = dict(system_marks)
    for mi, known_ttl in known:
        user[("message", mi)] = known_ttl
    for mi in range(scan_from, count):
        ttl = messages[mi].breakpoint
        if ttl:
            user[("message", mi)] = ttl
    if user_ttl is not None:
        user = dict.fromkeys(user, user_ttl)
    if head_mark is not None and not tool_marks and head_mark[0][0] == "tool":
        head_mark = None
    if head_mark is not None and head_ttl is not None:
        head_mark = (head_mark[0], head_ttl)
    if len(user) > budget:
        raise BreakpointError(
            f"{len(user)} user-placed cache breakpoints exceed the budget of {budget}",
            code="breakpoint-budget")
    sdk: list[tuple[Place, str]] = []  # in priority order: history, head, carry
    history = _history_place(prompt, count)
    if history is not None and ("message", count - 1) not in short:
        sdk.append((history, history_ttl))
    if head_mark is not None and head_mark[0] not in short:
        sdk.append(head_mark)
    carry = None if lookback is None or not prompt.cache_write else lookback_carry(
        prompt.previous_breakpoint, count, lambda mi: len(messages[mi].wire_blocks), lookback)
    if carry is not None:
        sdk.append((("message", carry), history_ttl))
    marks = dict(user)
    for key, ttl in sdk:
        if key not in marks and len(marks) < budget:
            marks[key] = ttl
    if history is not None and history not in marks and ("message", count - 1) not in short:
        placed = ", ".join(place_name(place) for place in sorted(user, key=_place_rank))
        raise BreakpointError(
            f"the {len(user)} user-placed cache breakpoints ({placed}) fill the budget of "
            f"{budget}, which would drop the SDK's end-of-history breakpoint (every turn would "
            "then write the history again): remove one, or place it on the last message",
            code="breakpoint-evicts-history", segment=f"messages[{count - 1}]")
    if len(marks) < 2:
        return marks, user
    ranked = sorted(marks.items(), key=_rank)
    for (earlier, ttl_a), (later, ttl_b) in itertools.pairwise(ranked):
        if ttl_a != ttl_b and TTL_LABELS_S[ttl_b] > TTL_LABELS_S[ttl_a]:
            raise BreakpointError(
                f"a {ttl_b} breakpoint at {later[0]} {later[1]} follows a {ttl_a} "
                f"breakpoint at {earlier[0]} {earlier[1]}: longer TTLs must come first "
                "(raise head_ttl/history_ttl or move the breakpoint)",
                code="breakpoint-ttl-order", segment=f"{later[0]}[{later[1]}]")
    return dict(ranked), user


def _history_place(prompt: PromptParts, count: int) -> Place | None:
    """Where the SDK's end-of-history breakpoint goes: on the last message; or, for a
    request that writes nothing new (``prompt.cache_write`` false), where the previous
    request's was (``previous_breakpoint``, already written), so it reads the whole cached
    prefix through the breakpoint and adds no entry after it; ``None`` when there is no
    history, or no earlier request to read from."""
    if not count:
        return None
    if prompt.cache_write:
        return ("message", count - 1)
    previous = prompt.previous_breakpoint
    if previous is None or not 0 <= previous < count:
        return None
    return ("message", previous)


def _rank(mark: tuple[Place, str]) -> tuple[int, int]:
    return _place_rank(mark[0])


def _place_rank(place: Place) -> tuple[int, int]:
    """A place's position in the prompt: tools, then system, then messages."""
    return _PLACE_ORDER[place[0]], place[1]


_HEAD_MARKS_KEY = "breakpoint-head-marks"
"""Head memo key: :func:`_head_marks`."""


def _head_marks(head: HeadParts) -> tuple[tuple[tuple[Place, str], ...], tuple[Place, str] | None]:
    """The head's user-placed breakpoints (its system blocks', in order) and the SDK's
    end-of-head one (``None`` for a head with neither system nor tools)."""
    system = tuple((("system", i), ttl) for i, ttl in enumerate(head.system_ttls) if ttl)
    if head.system:
        return system, (("system", len(head.system) - 1), head.head_ttl)
    if len(head.tools):
        return system, (("tool", len(head.tools) - 1), head.head_ttl)
    return system, None


def lookback_carry(previous: int | None, count: int, blocks_of: Callable[[int], int],
                   lookback: int) -> int | None:
    """Where to keep the previous request's history breakpoint (the carry), or ``None``.

    The one rule the builder (:func:`breakpoints`) and the stabilizer
    (``_recording._stabilize``) share: the previous request's end-of-history breakpoint sat
    on message ``previous``; this request has ``count`` messages and its own breakpoint on
    the last. When the blocks after message ``previous`` (``blocks_of(i)``: content blocks of
    message ``i``, a string content being one) number ``lookback`` or more, the new
    breakpoint's lookback cannot reach the entry written at ``previous``, so a breakpoint is
    kept there too: message ``previous`` is returned. Source (Anthropic, 20): "The system
    checks at most 20 positions per breakpoint, counting the breakpoint itself as the first"
    (platform.claude.com/docs/en/build-with-claude/prompt-caching).
    """
    if previous is None or not 0 <= previous < count - 1:
        return None
    distance = 0
    for index in range(count - 1, previous, -1):
        distance += blocks_of(index)
        if distance >= lookback:
            return previous
    return None


def check_sdk_marks(history_ttl: str, max_breakpoints: int, budget: int,
                    whose: str) -> None:
    """The render arguments of a breakpoint cache checked: ``history_ttl`` a label
    (``"5m"`` / ``"1h"``), ``max_breakpoints`` an int in ``1..budget`` (``whose`` budget:
    "Anthropic's budget", "Bedrock's checkpoint budget").

    Raises:
        BreakpointError: codes ``breakpoint-ttl`` / ``breakpoint-budget``.
    """
    if check_ttl(history_ttl, "history") is None:
        raise BreakpointError("history_ttl must be '5m' or '1h'", code="breakpoint-ttl")
    if type(max_breakpoints) is not int or not 1 <= max_breakpoints <= budget:
        raise BreakpointError(f"max_breakpoints must be 1..{budget} ({whose}), got "
                              f"{max_breakpoints!r}", code="breakpoint-budget")
