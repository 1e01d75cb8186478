"""The one rule that tells a session's main agent from a branch (a subagent, a side agent).

Used by the recorder while it records (``_recording._predecessor``: whether a request that
changed its session's head is a new branch or the session's own head change, verdict_detail
``agent``) and by the what-if on the rows afterwards (``_accounting._what_if``: the request
kind of each lineage of a session). When the harness names its agents in request headers
(``_recording._identity``), the recorder keeps that name and the rule is not needed.

A branch opens a conversation of its own: its first request does not carry the session's
history (another first message) and is much smaller than the session's previous request
(:data:`FRESH_SHARE`), or it replaces the head wholesale (tools *and* system, or either of
them *and* the cache-key parameters), which a harness editing its own head (a clock in the
system prompt, a tool added) does not do.
"""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["BRANCH_HEAD_PARTS", "FRESH_SHARE", "fresh_conversation", "is_branch"]

FRESH_SHARE = 0.8
"""A branch's first request smaller than this share of the session's previous request starts
a conversation of its own (Claude Code's subagent: 6,384 input tokens after its parent's
11,868; Codex's: 6,177 after 9,096, the harness tests) rather than continuing the history
under a changed head (which keeps, and grows, the request)."""

BRANCH_HEAD_PARTS = 2
"""Head parts (``tool``, ``system``, ``param``) that differ at once in a request that replaces
its session's head wholesale (Claude Code's subagent: another tool set and another system
prompt; the issue's trace: tools, system and ``thinking`` together)."""


def fresh_conversation(size: int | None, previous: int | None) -> bool:
    """A request of ``size`` tokens after its session's previous request of ``previous``
    tokens (both provider-reported or both our estimates) is a conversation of its own,
    not the session's history under another head: it is under :data:`FRESH_SHARE` of it
    (unknown sizes count as fresh)."""
    return size is None or previous is None or size < FRESH_SHARE * previous


def is_branch(changed_parts: Collection[str], first_message_changed: bool,
              size: int | None, previous: int | None) -> bool:
    """A request whose head differs from its session's previous request is a new branch
    (subagent / side agent) rather than the session's own head change: its first message is
    another (``first_message_changed``: it does not continue the history; compared whole,
    every content block) and either it is a fresh conversation
    (:func:`fresh_conversation`) or :data:`BRANCH_HEAD_PARTS` or more of its head parts
    (``changed_parts``: kinds among ``tool``, ``system``, ``param`` whose segments differ)
    changed at once."""
    if not first_message_changed:
        return False
    return (fresh_conversation(size, previous)
            or len(set(changed_parts) & {"tool", "system", "param"}) >= BRANCH_HEAD_PARTS)
