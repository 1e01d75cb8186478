"""Harness scenarios: ours, six documented ways real harnesses break the prefix cache, and the
multi-agent fix.

Every scenario drives the same scripted sessions (same system prompt, tools, user turns, tool
calls and results) and differs only in how it builds request bodies:

* ``stableprompt``: the SDK as intended: :class:`~stableprompt.PromptBuilder` pins the head
  (canonical tools + system prompt), history is append-only, the clock goes into a volatile
  tail slot rendered after the last breakpoint, and the SDK places the breakpoints (end of head,
  end of history). The exact rendered bytes are sent.
* the failure scenarios build bodies as naive harnesses do: plain dicts (tools in the source's
  order, schemas as loaded, assistant messages kept as received), serialized as they are (key
  order included) by the client or the official SDKs, the incremental breakpoint pattern done
  right (end of system, last block of the last message), and one mistake each (a naive
  Responses body is its Chat Completions body converted once, :func:`responses_body`):

  - ``clock-in-system``: a current-time line at the top of the system prompt, refreshed on
    every call (as harnesses that inject "Today is ..." do).
  - ``tool-order-drift``: the tool list is re-ordered at every user turn, as MCP clients do
    when servers reconnect and re-list their tools in a different order.
  - ``key-order-drift``: every JSON object in the tool definitions is serialized with a
    different key order on every call, as non-sorting serializers over hash-ordered maps do
    (Anthropic: "some languages (e.g. Swift, Go) randomize key order during JSON conversion,
    breaking caches").
  - ``head-rewrite-compaction``: every :data:`COMPACT_EVERY_TURNS` user turns the harness
    compacts by rewriting the system prompt with a summary and dropping the history.
  - ``breakpoint-misplaced``: the last breakpoint sits on a per-call volatile block (a
    current-time block at the end of the last user message), so each write ends in content the
    next request never repeats. Anthropic only: OpenAI's automatic caching (before GPT-5.6) has
    no breakpoints to misplace.
  - ``subagent-spec-copies``: a multi-agent harness hands each user turn to a new subagent,
    and each subagent builds its own copy of the long spec with its own preamble first (no
    shared pin), so no subagent can read what another wrote.

* ``subagent-fork``: the same subagents forked from one pinned head
  (:meth:`~stableprompt.Conversation.fork`): every subagent's first call reads the head the
  first subagent wrote, a cross-session read.
* mid-session changes (SDK harnesses, every :data:`CHANGE_EVERY_TURNS` turns):
  ``system-message`` appends new operator instructions to the history
  (``Conversation.system``: a mid-conversation system message on models that have them,
  ``<system-reminder>`` user text or a developer message elsewhere) and ``system-edit``
  writes them into the system text (a new head, the habit);
  ``dynamic-tools`` withdraws and brings back a tool with ``disable_tools`` /
  ``enable_tools`` (an MCP-like server) and ``dynamic-tools-rebuild`` rebuilds the head
  with the tools offered (the habit).
* ``think-time``: the SDK harness with a person's think time between user turns (1 to 15
  minutes, seeded per session: :mod:`._think_time`), so its misses are TTL expiries only.
  Like every SDK harness (:attr:`Scenario.takes_policy`) it follows a
  :class:`~stableprompt.CachePolicy` (:attr:`HarnessSpec.cache_policy`): the same sessions
  re-run under other TTLs (:func:`~stableprompt.demo.policy_trial`).

The two multi-agent scenarios run each user turn as its own conversation (session id
``<session>/agent<k>`` in ``metadata.user_id``; the responder follows ``<session>``'s
script) and only on the first :data:`SUBAGENT_SESSIONS` sessions, to keep the demo short.

Each harness builds one wire shape (:data:`WIRES`): ``anthropic`` (Messages),
``openai-chat`` (Chat Completions) or ``openai-responses`` (Responses). The emulator demo uses
the first two; the llama-server demo all three (:data:`Scenario.wires` says which a scenario
supports).

Determinism: the clock text comes from the emulator's fake clock; the drift scenarios draw
from ``random.Random`` seeded with the scenario and session id; ids are scripted.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .._canonical import wire_json
from .._economics._cache_policy import CachePolicy
from .._exceptions import HistoryError
from .._policy import TTL_LABELS_S, cache_rules
from .._prompt._builder import Conversation, PinnedHead, PromptBuilder
from .._prompt._messages import tool_call_of
from .._wire import bedrock_converse, gemini
from .._wire._formats import assistant_turn
from .._wire._request import ProviderRequest
from ..emulator import AssistantTurn
from ._think_time import think_times
from ._workload import WorkloadSession

__all__ = [
    "CHANGE_EVERY_TURNS",
    "COMPACT_EVERY_TURNS",
    "EMULATOR_WIRES",
    "PROVIDERS",
    "PROVIDER_WIRES",
    "SCENARIOS",
    "SUBAGENT_SESSIONS",
    "WIRES",
    "Harness",
    "HarnessSpec",
    "Outgoing",
    "Reply",
    "Scenario",
    "clock_text",
    "dynamic_tool",
    "instruction_update",
    "responses_body",
    "scenario_names",
    "session_system_prompt",
    "tool_withdrawn",
]

PROVIDERS = ("anthropic", "openai", "gemini", "bedrock")
"""The emulated providers."""
WIRES = ("anthropic", "openai-chat", "openai-responses", "gemini", "bedrock-converse")
"""The wire shapes a harness can build."""
PROVIDER_WIRES = {"anthropic": "anthropic", "openai": "openai-chat", "gemini": "gemini",
                  "bedrock": "bedrock-converse"}
"""The wire shape the emulator demo sends per provider by default."""
PATH_WIRES = frozenset({"gemini", "bedrock-converse"})
"""Wire shapes whose model id is in the URL path (:attr:`Outgoing.path` says where)."""
EMULATOR_WIRES = {"anthropic": ("anthropic",), "openai": ("openai-chat", "openai-responses"),
                  "gemini": ("gemini",), "bedrock": ("bedrock-converse",)}
"""The wire shapes the emulator demo can send per provider (``run_demo(wire=...)``)."""
COMPACT_EVERY_TURNS = 2
SUBAGENT_SESSIONS = 10
"""Sessions the multi-agent scenarios run (the first ones of the workload)."""
MAX_TOKENS = 1024
"""Anthropic's required ``max_tokens`` when a run sets no output limit."""
_EPHEMERAL: dict[str, str] = {"type": "ephemeral"}
_CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}


def clock_text(now: float) -> str:
    """The volatile clock line, e.g. ``"Current time: 2026-01-01T00:00:06Z"``."""
    moment = datetime.fromtimestamp(now, UTC)
    return "Current time: " + moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def session_system_prompt(base: str, session: WorkloadSession) -> str:
    """The session's system prompt: the fixed agent prompt plus a fixed environment section.

    The environment section (session id and connected services) is constant within a session
    and differs between sessions, as the environment block of real harnesses does; so each
    session is its own cache lineage and the append-only ceiling is exact per session.
    """
    services = ", ".join(session.services) or "none"
    return (f"{base}\n# Environment\n\nSession: {session.id}. Connected services: {services}. "
            "Their current state is not shown here; use the tools to inspect it.\n")


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One request to send.

    Attributes:
        request: The SDK's :class:`~stableprompt.ProviderRequest` (its exact bytes are
            sent), or a plain dict sent as JSON as-is, in insertion order (naive harnesses).
    """

    request: ProviderRequest | dict[str, Any]
    path: str | None = None
    """The URL path of a dict body whose wire keeps the model there (Gemini, Converse)."""
    headers: Mapping[str, str] | None = None
    """Extra request headers (Gemini: ``x-stableprompt-session``, its only session carrier)."""

    def url_path(self) -> str | None:
        """The URL path to POST to: :attr:`path`, or the ProviderRequest's own."""
        if isinstance(self.request, ProviderRequest):
            return self.request.path
        return self.path

    def to_bytes(self) -> bytes:
        """The body bytes as sent (dicts: ``wire_json``, insertion order, compact)."""
        if isinstance(self.request, ProviderRequest):
            return self.request.content
        return wire_json(self.request)


@dataclass(frozen=True, slots=True)
class Reply:
    """The assistant turn the provider answered.

    Attributes:
        text: Assistant text (``""`` for none).
        tool_calls: ``(id, name, arguments)`` per tool call.
        message: The assistant message in the provider's wire shape, as a naive harness keeps it.
    """

    text: str
    tool_calls: tuple[tuple[str, str, dict[str, Any]], ...]
    message: dict[str, Any]

    @classmethod
    def from_response(cls, wire: str, response: Mapping[str, Any]) -> Reply:
        """Parse an Anthropic Messages (``wire`` ``"anthropic"``), OpenAI Responses
        (``"openai-responses"``) or Chat Completions (any other ``wire``) response body. A
        Responses reply is kept chat-shaped, as a naive Responses harness keeps its
        transcript (:func:`responses_body`).

        Raises:
            ValueError: The response has no assistant message.
        """
        fmt = wire if wire in ("anthropic", "openai-responses", *PATH_WIRES) else "openai-chat"
        try:
            turn = assistant_turn(fmt, response)
            shape = {"anthropic": "Anthropic tool_use",
                     "openai-responses": "Responses function_call", "gemini": "stableprompt",
                     "bedrock-converse": "stableprompt"}.get(fmt, "OpenAI tool call")
            calls = tuple((c.id, c.name, dict(c.arguments)) for c in
                          (tool_call_of(call, shape=shape) for call in turn.tool_calls))
        except HistoryError as exc:
            raise ValueError(f"no assistant message in the response: {exc}") from exc
        if wire == "anthropic":
            return cls(turn.text or "", calls, {"role": "assistant",
                                                "content": response["content"]})
        if wire == "gemini":
            return cls(turn.text or "", calls, dict(response["candidates"][0]["content"]))
        if wire == "bedrock-converse":
            return cls(turn.text or "", calls, dict(response["output"]["message"]))
        if fmt == "openai-responses":
            kept: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
            if calls:
                kept["tool_calls"] = [
                    {"id": i, "type": "function",
                     "function": {"name": n, "arguments": wire_json(a).decode()}}
                    for i, n, a in calls]
            return cls(turn.text or "", calls, kept)
        message = response["choices"][0]["message"]
        kept = {"role": "assistant", "content": message.get("content")}
        if message.get("tool_calls"):
            kept["tool_calls"] = message["tool_calls"]
        return cls(turn.text or "", calls, kept)

    @classmethod
    def from_turn(cls, wire: str, turn: AssistantTurn) -> Reply:
        """The reply to a scripted turn, kept in the shape a harness of ``wire`` keeps it:
        Anthropic content blocks, or a Chat Completions assistant message (both OpenAI wires:
        a naive Responses harness keeps its transcript chat-shaped, see
        :func:`responses_body`). Equal to :meth:`from_response` on the emulator's answer to
        the same turn; used where the backend's own text is not the script (the real engine
        runs a random-weight model).

        Raises:
            ValueError: A tool call has no id.
        """
        calls = []
        for call in turn.tool_calls:
            if call.id is None:
                raise ValueError(f"scripted tool call {call.name!r} has no id")
            calls.append((call.id, call.name, dict(call.arguments)))
        if wire == "anthropic":
            content: list[dict[str, Any]] = (
                [{"type": "text", "text": turn.text}] if turn.text else [])
            content += [{"type": "tool_use", "id": i, "name": n, "input": a}
                        for i, n, a in calls]
            return cls(turn.text, tuple(calls), {"role": "assistant", "content": content})
        if wire == "gemini":
            parts: list[dict[str, Any]] = [{"text": turn.text}] if turn.text else []
            parts += [{"functionCall": {"id": i, "name": n, "args": a}} for i, n, a in calls]
            return cls(turn.text, tuple(calls), {"role": "model", "parts": parts})
        if wire == "bedrock-converse":
            blocks: list[dict[str, Any]] = [{"text": turn.text}] if turn.text else []
            blocks += [{"toolUse": {"toolUseId": i, "name": n, "input": a}} for i, n, a in calls]
            return cls(turn.text, tuple(calls), {"role": "assistant", "content": blocks})
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if calls:
            message["tool_calls"] = [
                {"id": i, "type": "function",
                 "function": {"name": n, "arguments": wire_json(a).decode()}}
                for i, n, a in calls]
        return cls(turn.text, tuple(calls), message)


class Harness(ABC):
    """One scenario's harness for one session: keeps the transcript, builds each request."""

    def begin_turn(self, index: int) -> None:  # noqa: B027 - an optional hook
        """Called before user turn ``index`` (0-based) is appended (default: nothing)."""

    def turn_gap_s(self, index: int) -> float | None:
        """The user's think time before user turn ``index`` >= 1 (seconds); ``None``: the
        driver's ``TURN_GAP_S`` (default)."""
        return None

    @abstractmethod
    def user(self, text: str) -> None:
        """Append a user message."""

    @abstractmethod
    def request(self, now: float) -> Outgoing:
        """Build the next request at clock time ``now`` (seconds since the epoch)."""

    @abstractmethod
    def assistant(self, reply: Reply) -> None:
        """Append the assistant's reply."""

    @abstractmethod
    def tool_result(self, call_id: str, content: str) -> None:
        """Append the result of tool call ``call_id``."""


@dataclass(frozen=True, slots=True)
class HarnessSpec:
    """What a harness sends besides its transcript.

    Attributes:
        wire: ``"anthropic"``, ``"openai-chat"`` or ``"openai-responses"`` (:data:`WIRES`).
        model: Model id sent.
        system_prompt: The session's system prompt.
        max_tokens: Output limit sent (tokens): ``max_tokens`` (Anthropic, Chat) or
            ``max_output_tokens`` (Responses); ``None``: :data:`MAX_TOKENS` on Anthropic
            (required there), none on OpenAI.
        cache_policy: SDK harnesses only (:attr:`Scenario.takes_policy`): the
            :class:`~stableprompt.CachePolicy` their requests follow (the head frozen with
            its head TTL, the renderer given the policy); ``None``: the defaults.
    """

    wire: str
    model: str
    system_prompt: str
    max_tokens: int | None = None
    cache_policy: CachePolicy | None = None


@dataclass(frozen=True)
class Scenario:
    """A harness behaviour under test.

    Attributes:
        name: CLI / JSON name.
        title: One-line description.
        predicts: What this failure class costs, in words.
        providers: Emulated providers the scenario applies to.
        factory: ``(session, spec) -> Harness``.
        wires: Wire shapes its harness builds.
        engine_predicts: What it costs on llama-server with an append-stable template that
            puts the tools after the system text (Qwen2.5's), in words; ``""``: the scenario
            does not run on the engine.
        max_sessions: Run only the workload's first sessions (``None``: all).
    """

    name: str
    title: str
    predicts: str
    providers: tuple[str, ...]
    factory: Callable[[WorkloadSession, HarnessSpec], Harness]
    wires: tuple[str, ...] = WIRES
    engine_predicts: str = ""
    max_sessions: int | None = None

    def sessions(self, sessions: Sequence[WorkloadSession]) -> Sequence[WorkloadSession]:
        """The sessions of ``sessions`` this scenario runs (:attr:`max_sessions`)."""
        return sessions if self.max_sessions is None else sessions[:self.max_sessions]

    @property
    def takes_policy(self) -> bool:
        """Its harness is built on the SDK and follows a :class:`~stableprompt.CachePolicy`
        (:attr:`HarnessSpec.cache_policy`); naive harnesses place their own breakpoints."""
        return isinstance(self.factory, type) and issubclass(self.factory, SdkHarness)

    def harness(self, session: WorkloadSession, *, wire: str, model: str,
                system_prompt: str, max_tokens: int | None = None,
                cache_policy: CachePolicy | None = None) -> Harness:
        """A fresh harness for ``session`` sending ``wire`` bodies (see :class:`HarnessSpec`).

        Raises:
            ValueError: The scenario does not build ``wire`` bodies, or ``cache_policy`` is
                given to a scenario that does not take one (:attr:`takes_policy`).
        """
        if wire not in self.wires:
            raise ValueError(f"scenario {self.name!r} builds {', '.join(self.wires)} bodies, "
                             f"not {wire!r}")
        if cache_policy is not None and not self.takes_policy:
            raise ValueError(f"scenario {self.name!r} places its own breakpoints: it takes no "
                             "cache policy")
        return self.factory(session, HarnessSpec(wire, model, system_prompt, max_tokens,
                                                 cache_policy))


# --------------------------------------------------------------------------- stableprompt


class SdkHarness(Harness):
    """The SDK as intended: pinned head, append-only history, clock in a tail slot; with a
    :attr:`HarnessSpec.cache_policy`, its TTLs for :attr:`request_kind` (the head's at
    ``freeze``, the history's at render)."""

    request_kind = "main"
    """The policy's request kind of this harness's requests."""

    def __init__(self, session: WorkloadSession, spec: HarnessSpec) -> None:
        self._session = session
        self._spec = spec
        self._conversation: Conversation = self._head(spec.system_prompt,
                                                      session.tools).conversation()
        self._session_id = session.id
        self._metadata = {"user_id": session.id}

    def _head(self, system: str, tools: Any) -> PinnedHead:
        return PromptBuilder(tokenizer=None).system(system).tools(tools).tail_slot(
            "now").freeze(head_ttl=self._head_ttl())

    def _head_ttl(self) -> str:
        """The head breakpoint's TTL: the policy's for a breakpoint wire (Anthropic,
        Converse; ``None`` there is the provider's default), else ``"5m"`` (unused)."""
        policy, spec = self._spec.cache_policy, self._spec
        if policy is None or spec.wire not in ("anthropic", "bedrock-converse"):
            return "5m"
        provider = "anthropic" if spec.wire == "anthropic" else "bedrock"
        default = cache_rules(provider, spec.model).default_ttl_s
        labels = {s: label for label, s in TTL_LABELS_S.items()}
        return policy.for_kind(self.request_kind).head or labels.get(default or 300, "5m")

    def _policy_params(self) -> dict[str, Any]:
        """``cache_policy`` and ``request_kind`` for the renderer (none without a policy)."""
        policy = self._spec.cache_policy
        return {} if policy is None else {"cache_policy": policy,
                                          "request_kind": self.request_kind}

    def tail(self, now: float) -> dict[str, str]:
        """The tail slots' values for a call at ``now``."""
        return {"now": clock_text(now)}

    def user(self, text: str) -> None:
        self._conversation.user(text)

    def request(self, now: float) -> Outgoing:
        rendered = self._conversation.render(tail=self.tail(now))
        spec, limit = self._spec, self._spec.max_tokens
        policy = self._policy_params()
        if spec.wire == "anthropic":
            return Outgoing(rendered.to_anthropic(
                model=spec.model, max_tokens=limit or MAX_TOKENS, metadata=self._metadata,
                **policy))
        if spec.wire == "gemini":
            if policy:
                raise ValueError("the demo's Gemini harness takes no cache policy (implicit "
                                 "caching; an explicit cache is GeminiCache)")
            extra: dict[str, Any] = (
                {"generationConfig": {"maxOutputTokens": limit}} if limit else {})
            return Outgoing(rendered.to_gemini(model=spec.model, **extra),
                            headers={"x-stableprompt-session": self._metadata["user_id"]})
        if spec.wire == "bedrock-converse":
            return Outgoing(rendered.to_bedrock_converse(
                model_id=spec.model, inferenceConfig={"maxTokens": limit or MAX_TOKENS},
                requestMetadata={"session_id": self._metadata["user_id"]}, **policy))
        params: dict[str, Any] = {"metadata": self._metadata, **policy}
        if spec.wire == "openai-chat":
            if limit is not None:
                params["max_tokens"] = limit
            return Outgoing(rendered.to_openai_chat(
                model=spec.model, prompt_cache_key=self._session_id, **params))
        if limit is not None:
            params["max_output_tokens"] = limit
        return Outgoing(rendered.to_openai_responses(
            model=spec.model, prompt_cache_key=self._session_id, **params))

    def assistant(self, reply: Reply) -> None:
        calls = [{"id": i, "name": n, "arguments": a} for i, n, a in reply.tool_calls]
        self._conversation.assistant(reply.text or None, tool_calls=calls)

    def tool_result(self, call_id: str, content: str) -> None:
        self._conversation.tool_result(call_id, content)


# --------------------------------------------------------------------------- naive harnesses


class NaiveHarness(Harness):
    """Plain-dict request bodies, as a harness without stableprompt builds them.

    Tools in the source's order with their schemas as loaded (repaired to JSON Schema); the
    assistant message appended as received; breakpoints (Anthropic) at the end of the system
    prompt and on the last block of the last message, moved forward each call. Subclasses
    override one hook each to add their mistake. OpenAI harnesses keep a Chat Completions
    transcript; the Responses one converts each body (:func:`responses_body`).
    """

    def __init__(self, session: WorkloadSession, spec: HarnessSpec) -> None:
        self.session = session
        self.spec = spec
        self.anthropic = spec.wire == "anthropic"
        self.wire = spec.wire
        self.system = spec.system_prompt
        self.tools: list[dict[str, Any]] = [_tool_dict(session, name, spec.wire)
                                            for name in session.tool_order]
        self.call_names: dict[str, str] = {}  # Gemini names the function of a response
        self.messages: list[dict[str, Any]] = []
        self.user_id = session.id  # metadata.user_id: the conversation

    # -- hooks ---------------------------------------------------------------------------

    def system_text(self, now: float) -> str:
        """The system prompt as sent on this call."""
        return self.system

    def tools_for_request(self) -> list[dict[str, Any]]:
        """The tool list as sent on this call."""
        return self.tools

    def last_blocks(self, blocks: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        """Anthropic / Converse: the last message's blocks as sent (default: breakpoint on the
        last: its ``cache_control``, or a ``cachePoint`` block after it)."""
        if self.wire == "bedrock-converse":
            return [*blocks, dict(_CACHE_POINT)]
        return [*blocks[:-1], {**blocks[-1], "cache_control": dict(_EPHEMERAL)}]

    # -- transcript ----------------------------------------------------------------------

    def user(self, text: str) -> None:
        if self.anthropic:
            self.messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
        elif self.wire == "gemini":
            self.messages.append({"role": "user", "parts": [{"text": text}]})
        elif self.wire == "bedrock-converse":
            self._user_block({"text": text})
        else:
            self.messages.append({"role": "user", "content": text})

    def _user_block(self, block: dict[str, Any]) -> None:
        """Converse: roles alternate, so a user block joins a trailing user message."""
        if self.messages and self.messages[-1]["role"] == "user":
            last = self.messages[-1]
            self.messages[-1] = {**last, "content": [*last["content"], block]}
        else:
            self.messages.append({"role": "user", "content": [block]})

    def assistant(self, reply: Reply) -> None:
        self.messages.append(reply.message)
        for call_id, name, _ in reply.tool_calls:
            self.call_names[call_id] = name

    def tool_result(self, call_id: str, content: str) -> None:
        if self.wire == "gemini":
            self.messages.append({"role": "user", "parts": [{"functionResponse": {
                "id": call_id, "name": self.call_names.get(call_id, ""),
                "response": {"output": content}}}]})
            return
        if self.wire == "bedrock-converse":
            self._user_block({"toolResult": {"toolUseId": call_id,
                                             "content": [{"text": content}]}})
            return
        if self.anthropic:
            self.messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": content}]})
        else:
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})

    def request(self, now: float) -> Outgoing:
        system = self.system_text(now)
        spec = self.spec
        if self.wire == "gemini":
            body: dict[str, Any] = {
                "systemInstruction": {"parts": [{"text": system}]},
                "tools": [{"functionDeclarations": self.tools_for_request()}],
                "contents": list(self.messages),
            }
            if spec.max_tokens is not None:
                body["generationConfig"] = {"maxOutputTokens": spec.max_tokens}
            return Outgoing(body, path=gemini.endpoint_for(spec.model),
                            headers={"x-stableprompt-session": self.user_id})
        if self.wire == "bedrock-converse":
            messages = list(self.messages)
            last = messages[-1]
            messages[-1] = {**last, "content": self.last_blocks(list(last["content"]), now)}
            body = {
                "system": [{"text": system}, dict(_CACHE_POINT)],
                "toolConfig": {"tools": self.tools_for_request()},
                "messages": messages,
                "inferenceConfig": {"maxTokens": spec.max_tokens or MAX_TOKENS},
                "requestMetadata": {"session_id": self.user_id},
            }
            return Outgoing(body, path=bedrock_converse.endpoint_for(spec.model))
        if self.anthropic:
            messages = list(self.messages)
            last = messages[-1]
            messages[-1] = {**last, "content": self.last_blocks(list(last["content"]), now)}
            body = {
                "model": spec.model,
                "max_tokens": spec.max_tokens or MAX_TOKENS,
                "system": [{"type": "text", "text": system, "cache_control": dict(_EPHEMERAL)}],
                "tools": self.tools_for_request(),
                "messages": messages,
                "metadata": {"user_id": self.user_id},
            }
            return Outgoing(body)
        body = {
            "model": spec.model,
            "messages": [{"role": "system", "content": system}, *self.messages],
            "tools": self.tools_for_request(),
            "metadata": {"user_id": self.user_id},
            "prompt_cache_key": self.session.id,
        }
        if spec.max_tokens is not None:
            body["max_tokens"] = spec.max_tokens
        return Outgoing(responses_body(body) if spec.wire == "openai-responses" else body)


def responses_body(chat: Mapping[str, Any]) -> dict[str, Any]:
    """A naive harness's Chat Completions body as the Responses body the same harness sends.

    Every key keeps its place and every value its key order, so the scenario's mistake (a
    clock in the system text, re-ordered tools, shuffled schema keys, a rewritten head)
    reaches the Responses body unchanged:

    * ``messages`` becomes ``instructions`` (the leading system message's text, as a naive
      Responses harness passes its system prompt) then ``input``: a user or assistant text
      message as ``{"type": "message", "role", "content"}`` (llama-server reads an assistant
      item as a message only with its ``type``); an assistant's ``tool_calls`` as one
      ``{"type": "function_call", "call_id", "name", "arguments"}`` item each, after its text;
      a tool message as ``{"type": "function_call_output", "call_id", "output"}``;
    * each tool ``{"type": "function", "function": {...}}`` is flattened in place: the
      function object's keys, in their order, where ``function`` stood;
    * ``max_tokens`` is renamed ``max_output_tokens``; other keys pass unchanged.

    The input is not modified. Source: openai-python ``responses/response_create_params.py``
    (``instructions``, ``input`` items, ``FunctionToolParam``, ``max_output_tokens``).

    Raises:
        ValueError: A message has a role this conversion does not know.
    """
    out: dict[str, Any] = {}
    for key, value in chat.items():
        if key == "messages":
            items = list(value)
            if items and items[0].get("role") == "system":
                out["instructions"] = items.pop(0)["content"]
            out["input"] = [item for message in items for item in _input_items(message)]
        elif key == "tools":
            out["tools"] = [_flat_tool(tool) for tool in value]
        elif key == "max_tokens":
            out["max_output_tokens"] = value
        else:
            out[key] = value
    return out


def _input_items(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    if role == "tool":
        return [{"type": "function_call_output", "call_id": message["tool_call_id"],
                 "output": message["content"]}]
    if role not in ("user", "assistant", "system"):
        raise ValueError(f"cannot convert a {role!r} message to Responses input")
    items: list[dict[str, Any]] = []
    if message.get("content"):
        items.append({"type": "message", "role": role, "content": message["content"]})
    for call in message.get("tool_calls") or ():
        function = call["function"]
        items.append({"type": "function_call", "call_id": call["id"],
                      "name": function["name"], "arguments": function["arguments"]})
    return items


def _flat_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tool.items():
        if key == "function" and isinstance(value, Mapping):
            out.update(value)
        else:
            out[key] = value
    return out


def _tool_dict(session: WorkloadSession, name: str, wire: str) -> dict[str, Any]:
    tool = session.tools[name]
    if wire == "gemini":
        return gemini.tool(tool)
    if wire == "bedrock-converse":
        return bedrock_converse.tool(tool)
    return tool.to_anthropic() if wire == "anthropic" else tool.to_openai_chat()


class ClockInSystem(NaiveHarness):
    """A current-time line at the top of the system prompt, new on every call."""

    def system_text(self, now: float) -> str:
        return f"{clock_text(now)}\n\n{self.system}"


class ToolOrderDrift(NaiveHarness):
    """Tools re-listed in a new order at every user turn (MCP servers reconnecting)."""

    def __init__(self, session: WorkloadSession, spec: HarnessSpec) -> None:
        super().__init__(session, spec)
        self._rng = random.Random(f"tool-order-drift:{session.id}")

    def begin_turn(self, index: int) -> None:
        if index > 0:  # the first turn keeps the order the tools were registered in
            self.tools = _reorder(self.tools, self._rng)


def _reorder(items: Sequence[Any], rng: random.Random) -> list[Any]:
    """A seeded permutation that differs from the input whenever it can."""
    out = list(items)
    if len(out) < 2:
        return out
    while out == list(items):
        rng.shuffle(out)
    return out


class KeyOrderDrift(NaiveHarness):
    """Tool definitions serialized with a fresh key order on every call (hash-ordered maps)."""

    def __init__(self, session: WorkloadSession, spec: HarnessSpec) -> None:
        super().__init__(session, spec)
        self._rng = random.Random(f"key-order-drift:{session.id}")

    def tools_for_request(self) -> list[dict[str, Any]]:
        return [_shuffle_keys(tool, self._rng) for tool in self.tools]


def _shuffle_keys(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {k: _shuffle_keys(value[k], rng) for k in keys}
    if isinstance(value, list):
        return [_shuffle_keys(v, rng) for v in value]
    return value


class HeadRewriteCompaction(NaiveHarness):
    """Every few turns, summarize into the system prompt and drop the history."""

    def begin_turn(self, index: int) -> None:
        if index > 0 and index % COMPACT_EVERY_TURNS == 0 and self.messages:
            self.system = f"{self.system}\n# Summary of the conversation so far\n\n" + \
                _summary(self.session, index) + "\n"
            self.messages = []


def _summary(session: WorkloadSession, upto: int) -> str:
    """A deterministic stand-in for a model-written summary of turns ``< upto``."""
    lines = []
    for turn in session.turns[:upto]:
        names = ", ".join(c.name for c in turn.calls) or "no tools"
        lines.append(f"- The user asked: {turn.user!r}. Tools used: {names}. "
                     f"Outcome: {turn.final_text}")
    return "\n".join(lines)


class BreakpointMisplaced(NaiveHarness):
    """The last breakpoint on a per-call current-time block instead of the block before it."""

    def last_blocks(self, blocks: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        if self.wire == "bedrock-converse":
            return [*blocks, {"text": clock_text(now)}, dict(_CACHE_POINT)]
        return [*blocks, {"type": "text", "text": clock_text(now),
                          "cache_control": dict(_EPHEMERAL)}]


def subagent_id(session: WorkloadSession, index: int) -> str:
    """The conversation id of the subagent that handles user turn ``index`` (0-based)."""
    return f"{session.id}/agent{index + 1}"


class SubagentSpecCopies(NaiveHarness):
    """Each user turn goes to a new subagent that sends its own copy of the spec, after its
    own preamble: nothing before the history is shared between subagents."""

    _preamble = ""

    def begin_turn(self, index: int) -> None:
        self.messages = []
        self.user_id = subagent_id(self.session, index)
        self._preamble = (f"You are subagent {index + 1} of the orchestrator for "
                          f"{self.session.id}. Work on the one task you are given, then report "
                          "back.")

    def system_text(self, now: float) -> str:
        return f"{self._preamble}\n\n{self.system}"


class ForkedSubagents(SdkHarness):
    """Each user turn goes to a new subagent forked from one pinned head
    (:meth:`~stableprompt.Conversation.fork` of the head's empty conversation)."""

    request_kind = "subagent"

    def __init__(self, session: WorkloadSession, spec: HarnessSpec) -> None:
        super().__init__(session, spec)
        self._root = self._conversation
        self._session = session

    def begin_turn(self, index: int) -> None:
        self._conversation = self._root.fork()
        self._metadata = {"user_id": subagent_id(self._session, index)}


# ----------------------------------------------------------------- mid-session changes

CHANGE_EVERY_TURNS = 2
"""User turns between two instruction updates, and between two tool changes."""


def instruction_update(index: int) -> str:
    """The operator's instructions in force from user turn ``index`` on (a new one every
    :data:`CHANGE_EVERY_TURNS` turns)."""
    k = index // CHANGE_EVERY_TURNS
    return (f"Operator update {k}: keep each answer under {40 + 10 * k} words and name the "
            "tools you used.")


class SystemMessage(SdkHarness):
    """Instruction updates appended to the history with ``Conversation.system``: a
    mid-conversation system message after the user turn where the model has them
    (``<system-reminder>`` user text on other Anthropic models, a developer message on
    OpenAI), cached with the history."""

    def begin_turn(self, index: int) -> None:
        if index and index % CHANGE_EVERY_TURNS == 0:
            self._conversation.system(instruction_update(index))


class SystemEdit(SdkHarness):
    """Instruction updates written into the system text (the habit): a new head each time,
    the history rebased onto it."""

    def begin_turn(self, index: int) -> None:
        if index and index % CHANGE_EVERY_TURNS == 0:
            system = (f"{self._spec.system_prompt}\n# Operator update\n\n"
                      f"{instruction_update(index)}\n")
            self._conversation, _ = self._conversation.rebase(
                self._head(system, self._session.tools))


def dynamic_tool(session: WorkloadSession) -> str | None:
    """The tool an MCP-like server withdraws and brings back every
    :data:`CHANGE_EVERY_TURNS` turns: the first (source order) the session never calls, so
    the script stays valid; ``None`` when it calls them all."""
    called = {call.name for turn in session.turns for call in turn.calls}
    return next((name for name in session.tool_order if name not in called), None)


def tool_withdrawn(index: int) -> bool:
    """Whether the dynamic tool is withdrawn during user turn ``index``."""
    return (index // CHANGE_EVERY_TURNS) % 2 == 1


class DynamicTools(SdkHarness):
    """Tools withdrawn and brought back every few turns with ``disable_tools`` /
    ``enable_tools``: the head never changes."""

    def begin_turn(self, index: int) -> None:
        name = dynamic_tool(self._session)
        if name is not None and index and index % CHANGE_EVERY_TURNS == 0:
            change = (self._conversation.disable_tools if tool_withdrawn(index)
                      else self._conversation.enable_tools)
            change([name])


class DynamicToolsRebuild(SdkHarness):
    """The same tool changes made by rebuilding the head with the tools offered (the habit),
    the history rebased onto it."""

    def begin_turn(self, index: int) -> None:
        name = dynamic_tool(self._session)
        if name is not None and index and index % CHANGE_EVERY_TURNS == 0:
            tools = [t for t in self._session.tools
                     if not (tool_withdrawn(index) and t.name == name)]
            self._conversation, _ = self._conversation.rebase(
                self._head(self._spec.system_prompt, tools))


class ThinkTime(SdkHarness):
    """The SDK harness with a person's think time before each user turn (1 to 15 minutes,
    :func:`~stableprompt.demo._think_time.think_times`): its misses come from TTL expiry
    only, and a :attr:`HarnessSpec.cache_policy` re-runs the same sessions under other
    TTLs."""

    def __init__(self, session: WorkloadSession, spec: HarnessSpec) -> None:
        super().__init__(session, spec)
        self._gaps = think_times(session.id, len(session.turns))

    def turn_gap_s(self, index: int) -> float | None:
        return self._gaps[index - 1] if 0 < index <= len(self._gaps) else None


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("stableprompt", "the SDK: pinned head, append-only history, clock in the tail",
             "nothing: every call after the first reads the whole previous request, except "
             "its volatile tail", PROVIDERS, SdkHarness,
             engine_predicts="only its volatile tail: every call reads the whole previous "
             "prompt but the clock message (tens of tokens)"),
    Scenario("clock-in-system", "a current-time line at the top of the system prompt",
             "everything after the clock on every call: Anthropic reads nothing (the first "
             "breakpoint is after the clock); OpenAI keeps only the tools prefix",
             PROVIDERS, ClockInSystem,
             engine_predicts="nearly everything on every call: the clock opens the system "
             "turn, so only the template's opening and the clock's unchanged digits are read"),
    Scenario("tool-order-drift", "tools re-ordered at each user turn (MCP reconnects)",
             "the whole prompt on the first call of every user turn after the first; later "
             "calls of the turn read normally", PROVIDERS, ToolOrderDrift,
             engine_predicts="the first call of every later user turn re-prefills from the "
             "first moved tool on (the template renders tools after the system text, which "
             "is still read)"),
    Scenario("key-order-drift", "tool schema keys re-ordered on every call (unsorted maps)",
             "the whole prompt on every call: tools come first, so nothing after them "
             "matches", PROVIDERS, KeyOrderDrift,
             engine_predicts="every call re-prefills from the first tool on; the system text "
             "before the tools is still read (the template keeps wrapper keys in its own order "
             "but schema keys as sent)"),
    Scenario("head-rewrite-compaction",
             f"every {COMPACT_EVERY_TURNS} turns, a summary rewrites the system prompt",
             "on each compaction call, everything from the system prompt on (Anthropic: the "
             "whole prompt, its first breakpoint being after the system prompt); requests are "
             "shorter afterwards",
             PROVIDERS, HeadRewriteCompaction,
             engine_predicts="each compaction call re-prefills from the end of the original "
             "system text on (the summary is appended there, before the tools)"),
    Scenario("breakpoint-misplaced", "last breakpoint on a per-call current-time block",
             "all history on every call: only the head (system breakpoint) is read",
             ("anthropic", "bedrock"), BreakpointMisplaced,
             wires=("anthropic", "bedrock-converse"),
             engine_predicts="nearly nothing: llama-server ignores cache_control, so the "
             "misplaced breakpoint costs only its own clock block, like the SDK's tail "
             "(a client_mutation by the letter, about the same hit rate as stableprompt)"),
    Scenario("subagent-spec-copies",
             "each user turn to a new subagent with its own copy of the spec (no shared pin)",
             "the whole head on every subagent's first call: each copy starts with its own "
             "preamble, so no subagent reads another's (OpenAI keeps only the tools prefix); "
             "later calls of a subagent read normally",
             PROVIDERS, SubagentSpecCopies, max_sessions=SUBAGENT_SESSIONS),
    Scenario("subagent-fork", "each user turn to a new subagent forked from one pinned head",
             "nothing but what each subagent adds: its first call reads the head an earlier "
             "subagent wrote (a cross-session read, inside the ceiling)",
             PROVIDERS, ForkedSubagents, max_sessions=SUBAGENT_SESSIONS),
    Scenario("system-message",
             f"every {CHANGE_EVERY_TURNS} turns new operator instructions, appended as a "
             "mid-conversation system message (Conversation.system)",
             "nothing but the instructions' own tokens, written once with their turn: the "
             "whole history before them is read", PROVIDERS, SystemMessage),
    Scenario("system-edit",
             f"every {CHANGE_EVERY_TURNS} turns new operator instructions, written into the "
             "system text (a new head)",
             "on each update call, everything from the system prompt on (Anthropic: the whole "
             "prompt; OpenAI keeps the tools prefix)", PROVIDERS, SystemEdit),
    Scenario("dynamic-tools",
             f"every {CHANGE_EVERY_TURNS} turns a tool is withdrawn or brought back with "
             "disable_tools / enable_tools",
             "only the change's few tokens: Anthropic tool_removal / tool_addition blocks in "
             "the history (or the tail mask), OpenAI tool_choice allowed_tools",
             PROVIDERS, DynamicTools),
    Scenario("dynamic-tools-rebuild",
             f"every {CHANGE_EVERY_TURNS} turns a tool is withdrawn or brought back by "
             "rebuilding the head",
             "on each change call, the whole prompt: the tools come first",
             PROVIDERS, DynamicToolsRebuild),
    Scenario("think-time",
             "the SDK with 1-15 minutes of user think time between user turns (tool calls "
             "within a turn seconds apart)",
             "the whole prompt after every think-time gap longer than the cache TTL (5 "
             "minutes by default on Anthropic, Bedrock and OpenAI before GPT-5.5; Gemini's hour "
             "outlives every gap): the turn's first call writes it again (ttl_expired); a "
             "1-hour TTL keeps it for a higher write price (CachePolicy.from_ledger chooses)",
             PROVIDERS, ThinkTime),
)


def scenario_names(provider: str) -> tuple[str, ...]:
    """Names of the scenarios that apply to ``provider``, in run order."""
    return tuple(s.name for s in SCENARIOS if provider in s.providers)
