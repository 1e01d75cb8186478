"""The user action behind a break, where the ledger can tell, and what each action cost.

A break (a call that lost cache reads, or changed its prefix) is the doing of something the
user or the harness did. From a ledger row alone (``verdict_detail``) and the size of the
request it was compared with, :func:`action_of` names:

- ``model switch``: cause ``model-change``;
- ``header change``: cause ``header-change`` (a beta or version header dropped or added);
- ``subagent``: the recorder named the call a branch of its session (``verdict_detail["agent"]``
  of kind ``subagent``: the harness's headers, or the one branch rule
  ``_economics._request_kind.is_branch``) and it lost reads (a ``client_mutation``, or a
  ``cold`` first call that could have read a prefix another call cached: ``shared_prefix``);
- ``tool change``: cause ``tool-added``, ``tool-removed`` or ``tool-reorder`` otherwise;
- ``compaction``: the history was rewritten into a shorter request: the recorder continued
  the conversation under a rewritten first message (``predecessor_rule``
  ``same-head-recent``), or the request is at most :data:`SHRINK` of the one it was compared
  with while its history changed (``client_mutation``);
- ``other change``: any other prefix change (a ``client_mutation`` of another cause), and
  ``no breakpoint`` / ``provider or TTL`` for the misses that are no prefix change.

Not told apart here, for want of evidence in the row: a resume (a harness restarted on the
same conversation looks like its next turn, and its edits like any other); it lands in the
action of its change.

:func:`~._causes.rank_actions` sums calls, lost tokens and lost USD per action (the USD is
:attr:`~._calls.CallRow.lost_usd`: what the lost tokens cost beyond a cache read).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ACTIONS", "SHRINK", "action_of"]

SHRINK = 0.75
"""A changed history in a request at most this share of the compared request's input total
(provider tokens): a compaction."""

ACTIONS = ("model switch", "header change", "subagent", "tool change", "compaction",
           "other change", "no breakpoint", "provider or TTL")
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
    agent = detail.get("agent")
    if (agent is not None and isinstance(agent, Mapping) and agent.get("kind") == "subagent"
            and (verdict == "client_mutation"
                 or (verdict == "cold" and detail.get("shared_prefix") is not None))):
        return "subagent"
    if verdict != "client_mutation":
        return None
    cause = detail.get("cause")
    found = _BY_CAUSE.get(cause) if isinstance(cause, str) else None
    if found in ("model switch", "header change"):
        return found
    shrunk = (input_tokens is not None and bool(compared_input_tokens)
              and input_tokens <= (compared_input_tokens or 0) * SHRINK)
    if found is not None:
        return found
    if shrunk or detail.get("predecessor_rule") == "same-head-recent":
        return "compaction"
    return "other change"
