"""Causes of lost cache reads, ranked by lost tokens and lost dollars, each with its fix; the
same calls by the user action behind them (:func:`rank_actions`).

:func:`rank_causes` groups the included calls of a report (:class:`~._calls.CallRow`) that
lost tokens by ``(cause, segment, path)`` and ranks the groups by lost tokens, then lost USD.
History positions are grouped as one (:func:`group_key`: ``messages[7].content[1]`` and
``messages[9].content[1]`` are both ``messages[*].content[1]``): the same mistake repeated
on every turn is one cause, not one per message index.
The one-line fix of a prefix-change cause is lint's (:data:`stableprompt._lint._findings.
CAUSE_FIXES`, the same text ``stableprompt lint`` prints); causes that are not prefix changes
(the verdicts ``ttl_expired``, ``provider_miss``, ``lookback-exceeded`` and ``header-change``,
a changed cache-relevant request header) have theirs here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._diff import CAUSE_FIXES, FINDING_FIXES
from ._actions import ACTIONS
from ._calls import CallRow

__all__ = ["OTHER_FIXES", "ActionRow", "ActionTally", "CauseRow", "CauseTally", "fix_for",
           "group_key", "rank_actions", "rank_causes"]

_HISTORY_INDEX = re.compile(r"^(messages|input|contents)(\[|/)\d+")

OTHER_FIXES: Mapping[str, str] = {
    "lookback-exceeded": "add a breakpoint within 20 blocks of the end of the previously "
    "cached prefix (end of stable history) so the provider can find the entry",
    "ttl-expired": "keep the gap between calls of a session under the cache TTL, or use a "
    "longer TTL (1h breakpoints, prompt_cache_retention) for slow sessions",
    "provider-miss": "nothing to change in the prompt: the prefix was stable; check routing "
    "(a stable prompt_cache_key / session affinity) and concurrency on the provider side",
    "no-breakpoint": FINDING_FIXES["no-breakpoints"][1]
    + " (or record through `stableprompt proxy --stabilize`, which places them)",
    "breakpoints-below-minimum": FINDING_FIXES["breakpoint-below-minimum"][1],
    "header-change": "send the same beta and version headers (anthropic-beta, "
    "anthropic-version, openai-beta, organization/project) on every request of a session; a "
    "gateway or proxy must forward them unchanged (a reordered anthropic-beta list is fine: "
    "it is read as a set)",
}
"""Fixes for causes that lint does not report (not prefix changes)."""


def fix_for(cause: str) -> str | None:
    """The one-line fix for ``cause``: lint's for a prefix change, else :data:`OTHER_FIXES`."""
    return CAUSE_FIXES.get(cause) or OTHER_FIXES.get(cause)


@dataclass
class CauseRow:
    """Calls that lost tokens for one ``(cause, segment, path)``.

    Attributes:
        cause: A ``_diff.CAUSES`` slug, ``lookback-exceeded``, ``ttl-expired`` or
            ``provider-miss``.
        segment: First divergent segment (``system[0]``; history index as ``*``), ``None``
            when not a prefix change.
        path: JSON pointer of the first differing value (history index as ``*``), ``None``
            when not a prefix change.
        calls: Calls in the group.
        lost_tokens: Tokens they lost (sum of :attr:`CallRow.lost_tokens`).
        lost_usd: What those tokens cost beyond a cache read; ``None`` when any call of the
            group could not be priced.
        fix: The one-line fix (:func:`fix_for`), ``None`` for an unknown cause.
        example_id: The record id of the group's first call.
    """

    cause: str
    segment: str | None
    path: str | None
    calls: int = 0
    lost_tokens: int = 0
    lost_usd: float | None = 0.0
    fix: str | None = None
    example_id: str = ""

    def to_json(self) -> dict[str, Any]:
        """``cause, segment, path, calls, lost_tokens, lost_usd, fix, example_id``."""
        return {"cause": self.cause, "segment": self.segment, "path": self.path,
                "calls": self.calls, "lost_tokens": self.lost_tokens,
                "lost_usd": None if self.lost_usd is None else round(self.lost_usd, 6),
                "fix": self.fix, "example_id": self.example_id}


def group_key(row: CallRow) -> tuple[str, str | None, str | None]:
    """``(cause, segment, path)`` of a row, the history index replaced by ``*``."""
    segment, path = row.segment, row.path
    if row.segment_kind == "message":
        if segment is not None:
            segment = _HISTORY_INDEX.sub(r"\1\2*", segment)
        if path is not None:
            path = "/" + _HISTORY_INDEX.sub(r"\1\2*", path[1:]) if path.startswith("/") else path
    return (row.cause or "", segment, path)


def rank_causes(rows: Iterable[CallRow]) -> list[CauseRow]:
    """Group the included calls that lost tokens (or changed their prefix) by cause, segment
    and path; most lost tokens first, then most lost USD, then first seen."""
    tally = CauseTally()
    for row in rows:
        tally.add(row)
    return tally.ranked()


class CauseTally:
    """:func:`rank_causes` one row at a time (a streaming report holds no rows): memory in
    the number of distinct ``(cause, segment, path)`` groups."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str | None, str | None], CauseRow] = {}

    def add(self, row: CallRow) -> None:
        """Count ``row`` in its group when it is included and lost tokens (or changed its
        prefix)."""
        if not row.included or row.cause is None:
            return
        if row.lost_tokens <= 0 and row.verdict != "client_mutation":
            return
        key = group_key(row)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = CauseRow(*key, fix=fix_for(row.cause),
                                                 example_id=row.id)
        group.calls += 1
        group.lost_tokens += row.lost_tokens
        group.lost_usd = (None if group.lost_usd is None or row.lost_usd is None
                          else group.lost_usd + row.lost_usd)

    def ranked(self) -> list[CauseRow]:
        """The groups, most lost tokens first, then most lost USD, then first seen."""
        return sorted(self._groups.values(), key=lambda g: (-g.lost_tokens,
                                                            -(g.lost_usd or 0.0)))


@dataclass
class ActionRow:
    """The breaks of one user action.

    Attributes:
        action: One of :data:`~._actions.ACTIONS`.
        calls: Calls that broke so.
        lost_tokens: Tokens they lost (sum of :attr:`CallRow.lost_tokens`).
        lost_usd: What those tokens cost beyond a cache read (USD); ``None`` when any call
            of the group could not be priced.
        example_id: The record id of the group's first call.
    """

    action: str
    calls: int = 0
    lost_tokens: int = 0
    lost_usd: float | None = 0.0
    example_id: str = ""

    def to_json(self) -> dict[str, Any]:
        """``action, calls, lost_tokens, lost_usd, example_id``."""
        return {"action": self.action, "calls": self.calls, "lost_tokens": self.lost_tokens,
                "lost_usd": None if self.lost_usd is None else round(self.lost_usd, 6),
                "example_id": self.example_id}


def rank_actions(rows: Iterable[CallRow]) -> list[ActionRow]:
    """The included calls with an action (:attr:`CallRow.action`) that lost tokens or changed
    their prefix, grouped by action; most lost USD first, then most lost tokens, then
    :data:`~._actions.ACTIONS` order."""
    tally = ActionTally()
    for row in rows:
        tally.add(row)
    return tally.ranked()


class ActionTally:
    """:func:`rank_actions` one row at a time (a streaming report holds no rows)."""

    def __init__(self) -> None:
        self._groups: dict[str, ActionRow] = {}

    def add(self, row: CallRow) -> None:
        """Count ``row`` under its action when it is included and lost tokens (or changed its
        prefix)."""
        if not row.included or row.action is None:
            return
        if row.lost_tokens <= 0 and row.verdict != "client_mutation":
            return
        group = self._groups.get(row.action)
        if group is None:
            group = self._groups[row.action] = ActionRow(row.action, example_id=row.id)
        group.calls += 1
        group.lost_tokens += row.lost_tokens
        group.lost_usd = (None if group.lost_usd is None or row.lost_usd is None
                          else group.lost_usd + row.lost_usd)

    def ranked(self) -> list[ActionRow]:
        """Most lost USD first, then most lost tokens, then :data:`~._actions.ACTIONS`
        order."""
        return sorted(self._groups.values(), key=lambda g: (-(g.lost_usd or 0.0),
                                                            -g.lost_tokens,
                                                            ACTIONS.index(g.action)))
