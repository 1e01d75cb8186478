"""Who sent a request, from what the harness itself sends: its session id and its agent.

Agent harnesses name their conversation, and the agent inside it, in request headers (never
stored: only the ids they carry are kept, as ``session_id`` and ``verdict_detail["agent"]``).
Observed on the pinned CLIs of ``tests/test_harness_cli.py`` (the headers of every request,
December 2026):

- Claude Code 2.1.332: ``X-Claude-Code-Session-Id`` on every request (the same id as the
  ``session_id`` packed into ``metadata.user_id``, ``_wire.anthropic.session_hint``); a
  subagent's requests add ``x-claude-code-agent-id`` (its agent id); the main agent's carry
  none.
- Codex CLI 0.171.0: ``session-id`` on every request (also its ``prompt_cache_key``) and
  ``thread-id``, the agent's thread: equal to the session id for the main agent, the spawned
  thread's id for a subagent, whose requests also carry ``x-openai-subagent``
  (``collab_spawn``) and ``x-codex-parent-thread-id``.

A header sent by the caller through stableprompt (``x-stableprompt-session``) comes first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._http import SESSION_HEADER, header

__all__ = ["AGENT_HEADERS", "SESSION_HEADERS", "Agent", "agent_from_headers",
           "session_from_headers"]

SESSION_HEADERS = (SESSION_HEADER, "x-claude-code-session-id", "session-id")
"""Request headers naming the session, first found wins (lower case)."""

AGENT_HEADERS = ("x-claude-code-agent-id", "x-claude-code-parent-agent-id",
                 "x-openai-subagent", "thread-id", "x-codex-parent-thread-id")
"""Request headers naming an agent other than the session's main one, and its parent
(lower case)."""


@dataclass(frozen=True, slots=True)
class Agent:
    """An agent of a session other than its main one (a subagent, a side agent).

    Attributes:
        id: The harness's id of the agent (Claude Code's agent id, Codex's thread id).
        source: The header it was read from.
        parent: The agent that started it, when the headers say (Claude Code's
            ``x-claude-code-parent-agent-id``, Codex's ``x-codex-parent-thread-id``): the
            branch point of the conversation tree.
    """

    id: str
    source: str
    parent: str | None = None

    def to_json(self) -> dict[str, str]:
        """``{"kind": "subagent", "id", "source"}`` and ``parent`` when known
        (``verdict_detail["agent"]``)."""
        out = {"kind": "subagent", "id": self.id, "source": f"header {self.source}"}
        if self.parent:
            out["parent"] = self.parent
        return out


def session_from_headers(headers: Any) -> str | None:
    """The session id the request's headers name (:data:`SESSION_HEADERS`), or ``None``.
    Never raises."""
    for name in SESSION_HEADERS:
        value = header(headers, name)
        if value:
            return value
    return None


def agent_from_headers(headers: Any) -> Agent | None:
    """The agent other than the main one that the request's headers name, or ``None`` (the
    main agent, or headers that say nothing). Never raises.

    Claude Code: ``x-claude-code-agent-id``. Codex: ``x-openai-subagent`` with the thread
    id (``thread-id``), or a ``thread-id`` other than the ``session-id``.
    """
    claude = header(headers, "x-claude-code-agent-id")
    if claude:
        return Agent(claude, "x-claude-code-agent-id",
                     header(headers, "x-claude-code-parent-agent-id"))
    thread = header(headers, "thread-id")
    parent = header(headers, "x-codex-parent-thread-id")
    if header(headers, "x-openai-subagent"):
        return Agent(thread or header(headers, "x-openai-subagent") or "?",
                     "thread-id" if thread else "x-openai-subagent", parent)
    session = header(headers, "session-id")
    if thread and session and thread != session:
        return Agent(thread, "thread-id", parent)
    return None
