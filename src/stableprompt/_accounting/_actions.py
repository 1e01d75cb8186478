"""The user action behind a break, where the ledger can tell, and what each action cost.

A break (a call that lost cache reads, or changed its prefix) is the doing of something the
user or the harness did. From a ledger row alone (``verdict_detail``) and the size of the
request it was compared with, :func:`action_of` names:

- ``model switch``: cause ``model-change``;
- ``tool change``: cause ``tool-added``, ``tool-removed`` or ``tool-reorder``;
- ``header change``: cause ``header-change`` (a beta or version header dropped or added);
- ``compaction``: the history was rewritten into a shorter request: the recorder continued
  the conversation under a rewritten first message (``predecessor_rule``
  ``same-head-recent``), or the request is shorter than the one it was compared with by more
  than :data:`COMPACTION_SHRINK` while its prefix changed (``client_mutation``);
- ``other change``: any other prefix change (a ``client_mutation`` of another cause), and
  ``no breakpoint`` / ``provider or TTL`` for the misses that are no prefix change.

Not told apart here, for want of evidence in the row: a resume (a harness restarted on the
same conversation looks like its next turn) and a subagent's first call (its own tools and
system under the same session id look like a head change); both land in ``other change``.

:func:`~._causes.rank_actions` sums calls, lost tokens and lost USD per action (the USD is
:attr:`~._calls.CallRow.lost_usd`: what the lost tokens cost beyond a cache read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ACTIONS", "COMPACTION_SHRINK", "action_of"]

COMPACTION_SHRINK = 0.75
"""A changed prefix in a request at most this share of the compared request's input total
(provider tokens) is a compaction."""

ACTIONS = ("model switch", "tool change", "header change", "compaction", "other change",
           "no breakpoint", "provider or TTL")
"""The actions :func:`action_of` names, in display order."""

_BY_CAUSE: Mapping[str, str] = {
    "model-change": "model switch", "tool-added": "tool change",
    "tool-removed": "tool change", "tool-reorder": "tool change",
    "header-change": "header change",
}


def action_of(verdict: str, detail: Mapping[str, Any], input_tokens: int | None,
              compared_input_tokens: int | None) -> str | None:
    """The user action behind a call's break (:data:`ACTIONS`), ``None`` for a call that did
    not break (a hit, a cold first call, below the minimum, unknown).

    Args:
        verdict: The call's verdict.
        detail: Its ``verdict_detail``.
        input_tokens: Its reported input total (provider tokens), if known.
        compared_input_tokens: The reported input total of the request it was compared with
            (its ``predecessor_id``), if known.
    """
    if verdict == "no_breakpoint" or (verdict == "below_minimum"
                                      and detail.get("reason") == "no-breakpoint"):
        return "no breakpoint"
    if verdict in ("provider_miss", "ttl_expired"):
        return "provider or TTL"
    if verdict != "client_mutation":
        return None
    cause = detail.get("cause")
    found = _BY_CAUSE.get(cause) if isinstance(cause, str) else None
    if found is not None:
        return found
    if detail.get("predecessor_rule") == "same-head-recent":
        return "compaction"
    if (input_tokens is not None and compared_input_tokens
            and input_tokens <= compared_input_tokens * COMPACTION_SHRINK):
        return "compaction"
    return "other change"
