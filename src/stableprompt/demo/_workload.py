"""The demo workload: real BFCL v4 multi-turn sessions scripted as agent-loop transcripts.

Each BFCL v4 ``multi_turn_base`` session (:func:`stableprompt.demo._bfcl.load_multi_turn_base`)
becomes a :class:`WorkloadSession`:

* its real tool docs, repaired to JSON Schema (``"type": "dict"`` -> ``"object"``, ...; every
  fix is counted in :attr:`Workload.repairs`) and kept in BFCL's own order for harnesses that
  register tools as they come;
* its user turns, in order;
* its ground-truth calls (strings such as ``"cd(folder='document')"``, parsed with :mod:`ast`;
  positional arguments are named after the tool's parameters in schema order) as the scripted
  assistant tool calls, one call per model turn, with deterministic ids
  (``call_<session>_t<turn>_c<k>``);
* a deterministic tool result per call, generated from the tool's BFCL ``response`` schema
  (values derived from CRC-32 of the call id, never random);
* a short final assistant text per user turn.

So one user turn with ``k`` ground-truth calls costs ``k + 1`` model calls, and the transcript
grows the way an agent loop's does: user text, tool call, tool result, tool call, ..., answer.

When the BFCL data cannot be fetched, :func:`synthetic_workload` is a small bundled workload of
our own (3 sessions, 8 tools), always labelled ``"synthetic"``.

The emulator learns what to answer from :meth:`Workload.responder`: it reads the session id
from the request's ``metadata.user_id`` and the newest scripted event (a tool result id or a
user text) from the end of the conversation, so it follows the script whatever the harness
did to the rest of the request (reordering, compaction, volatile blocks).
"""

from __future__ import annotations

import ast
import zlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._canonical import canonical_json
from .._exceptions import InputError
from .._prompt._tools import ToolSet
from ..emulator import AssistantTurn, ToolCall
from ._bfcl import BFCL_VERSION, BfclSession, load_multi_turn_base
from ._synthetic import SYNTHETIC_SESSIONS
from ._system import SYSTEM_PROMPT

__all__ = [
    "BFCL_WORKLOAD",
    "SYNTHETIC_WORKLOAD",
    "ScriptedCall",
    "ScriptedTurn",
    "Workload",
    "WorkloadSession",
    "bfcl_workload",
    "parse_call",
    "synthetic_workload",
]

BFCL_WORKLOAD = "bfcl-v4-multi_turn_base"
SYNTHETIC_WORKLOAD = "synthetic"


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """One scripted tool call and its deterministic result.

    Attributes:
        id: Call id, unique in the workload (``call_<session key>_t<turn>_c<k>``).
        name: Tool name.
        arguments: Keyword arguments, in the order the ground truth gives them.
        result: The tool result text (canonical JSON).
    """

    id: str
    name: str
    arguments: Mapping[str, Any]
    result: str


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    """One user turn: the user's text, the calls the agent makes, its final answer.

    Attributes:
        index: 0-based turn number in the session.
        user: The user's message text.
        calls: Scripted tool calls, one per model call, in order.
        final_text: The assistant's closing text for this turn.
    """

    index: int
    user: str
    calls: tuple[ScriptedCall, ...]
    final_text: str

    @property
    def model_calls(self) -> int:
        """Model calls this turn costs: one per tool call plus the closing answer."""
        return len(self.calls) + 1


@dataclass(frozen=True)
class WorkloadSession:
    """One conversation of the workload.

    Attributes:
        id: Session id (BFCL id such as ``multi_turn_base_0``, or ``synthetic_0``).
        key: Short key used in call ids (``s000``).
        tools: The session's tools, canonical (the SDK's view).
        tool_order: Tool names in the source's order (a naive harness registers them so).
        turns: The scripted turns.
        services: The API classes the tools belong to (BFCL ``involved_classes``).
    """

    id: str
    key: str
    tools: ToolSet
    tool_order: tuple[str, ...]
    turns: tuple[ScriptedTurn, ...]
    services: tuple[str, ...] = ()
    _calls: dict[str, tuple[int, int]] = field(init=False, repr=False, compare=False)
    _texts: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        calls = {c.id: (t.index, k) for t in self.turns for k, c in enumerate(t.calls)}
        texts: dict[str, int] = {}
        for turn in self.turns:
            texts.setdefault(turn.user, turn.index)
        object.__setattr__(self, "_calls", calls)
        object.__setattr__(self, "_texts", texts)

    @property
    def model_calls(self) -> int:
        """Model calls the whole session costs."""
        return sum(t.model_calls for t in self.turns)

    def call(self, call_id: str) -> ScriptedCall:
        """The scripted call with id ``call_id``.

        Raises:
            KeyError: No call of this session has that id.
        """
        turn, k = self._calls[call_id]
        return self.turns[turn].calls[k]

    def next_after_user(self, text: str) -> AssistantTurn | None:
        """The assistant turn answering user text ``text``, or ``None`` if it is not a turn's."""
        index = self._texts.get(text)
        if index is None:
            return None
        return _step(self.turns[index], 0)

    def next_after_result(self, call_id: str) -> AssistantTurn | None:
        """The assistant turn after the result of ``call_id``, or ``None`` if unknown."""
        where = self._calls.get(call_id)
        if where is None:
            return None
        turn, k = where
        return _step(self.turns[turn], k + 1)


def _step(turn: ScriptedTurn, k: int) -> AssistantTurn:
    if k < len(turn.calls):
        call = turn.calls[k]
        return AssistantTurn(tool_calls=(ToolCall(call.name, dict(call.arguments), call.id),))
    return AssistantTurn(text=turn.final_text)


@dataclass(frozen=True)
class Workload:
    """A set of scripted sessions plus the fixed system prompt the scenarios share.

    Attributes:
        name: ``"bfcl-v4-multi_turn_base"`` or ``"synthetic"``.
        synthetic: True for our bundled synthetic workload (never real data).
        source: Where the sessions come from.
        sessions: The sessions, in source order.
        total_sessions: Sessions available in the source (before :meth:`select`).
        repairs: Tool-schema repairs applied per rule (``{"type-dict": 41, ...}``).
        system_prompt: The agent system prompt (fixed text, ~1,500 tokens).
    """

    name: str
    synthetic: bool
    source: str
    sessions: tuple[WorkloadSession, ...]
    total_sessions: int
    repairs: Mapping[str, int]
    system_prompt: str = SYSTEM_PROMPT

    @property
    def model_calls(self) -> int:
        """Model calls one scenario makes over all sessions."""
        return sum(s.model_calls for s in self.sessions)

    def select(self, count: int | None, *, skip: int = 0) -> Workload:
        """The first ``count`` sessions after the first ``skip`` (all the rest for ``None``);
        repairs are recounted. ``skip`` splits a workload into parts that share no session
        (e.g. a half to learn a cache policy on and a half to test it on).

        Raises:
            InputError: ``count`` < 1, ``skip`` < 0, or no session left after ``skip``
                (code ``demo-sessions``).
        """
        if skip < 0 or (skip and skip >= len(self.sessions)):
            raise InputError(f"cannot skip {skip} of {len(self.sessions)} sessions",
                             code="demo-sessions")
        if skip == 0 and (count is None or count >= len(self.sessions)):
            return self
        if count is not None and count < 1:
            raise InputError(f"--sessions must be >= 1 or 'all', got {count}",
                             code="demo-sessions")
        chosen = self.sessions[skip:] if count is None else self.sessions[skip:skip + count]
        return Workload(self.name, self.synthetic, self.source, chosen, self.total_sessions,
                        _repair_counts(chosen), self.system_prompt)

    def session(self, session_id: str) -> WorkloadSession:
        """The session named ``session_id``.

        Raises:
            KeyError: No such session.
        """
        for session in self.sessions:
            if session.id == session_id:
                return session
        raise KeyError(session_id)

    def with_short_call_ids(self) -> Workload:
        """The same workload with 9-character alphanumeric tool-call ids
        (``call_s012_t03_c01`` -> ``012t03c01``), tool results unchanged.

        Mistral's chat templates refuse any other id ("Tool call IDs should be alphanumeric
        strings with length 9!", llama.cpp ``models/templates/mistralai-*.jinja``); templates
        that drop ids (Qwen2.5, ...) render the same prompt either way.

        Raises:
            InputError: A session has 100 or more turns or calls in a turn, or a key that is
                not ``s`` plus 3 digits (code ``workload-call``).
        """
        sessions = []
        for session in self.sessions:
            turns = []
            for turn in session.turns:
                calls = []
                for k, call in enumerate(turn.calls):
                    short = f"{session.key[1:]}t{turn.index:02d}c{k:02d}"
                    if len(short) != 9 or not short.isalnum():
                        raise InputError(f"{session.id}: no 9-character id for {call.id!r}",
                                         code="workload-call")
                    calls.append(replace(call, id=short))
                turns.append(replace(turn, calls=tuple(calls)))
            sessions.append(replace(session, turns=tuple(turns)))
        return replace(self, sessions=tuple(sessions))

    def responder(self) -> WorkloadResponder:
        """A responder for :class:`~stableprompt.emulator.Emulator` that follows the script."""
        return WorkloadResponder(self)

    def describe(self) -> dict[str, Any]:
        """JSON description: name, synthetic flag, source, session and call counts, repairs."""
        return {
            "name": self.name,
            "synthetic": self.synthetic,
            "source": self.source,
            "sessions": len(self.sessions),
            "sessions_available": self.total_sessions,
            "turns": sum(len(s.turns) for s in self.sessions),
            "tool_calls": sum(len(t.calls) for s in self.sessions for t in s.turns),
            "model_calls_per_scenario": self.model_calls,
            "tool_schema_repairs": dict(sorted(self.repairs.items())),
        }


class WorkloadResponder:
    """Request body -> the scripted assistant turn, for any of the three wire formats.

    The session comes from ``metadata.user_id`` (a subagent's ``<session>/agent<k>`` follows
    ``<session>``'s script); the step from the newest scripted event at
    the end of the conversation: the last tool result whose id is a scripted call, or the last
    user text that is a turn's text (other text, such as volatile tail blocks, is skipped).

    Raises (to the emulator, which answers 500): ``LookupError`` when the request names no
    known session or holds no scripted event.
    """

    def __init__(self, workload: Workload) -> None:
        self._sessions = {s.id: s for s in workload.sessions}

    def __call__(self, body: Mapping[str, Any]) -> AssistantTurn:
        metadata = body.get("metadata")
        sid = metadata.get("user_id") if isinstance(metadata, Mapping) else None
        session = (self._sessions.get(sid) or self._sessions.get(sid.partition("/")[0])
                   if isinstance(sid, str) else None)
        if session is None:
            raise LookupError(f"request names no workload session (metadata.user_id={sid!r})")
        for kind, value in _events_backwards(body):
            turn = (session.next_after_result(value) if kind == "result"
                    else session.next_after_user(value))
            if turn is not None:
                return turn
        raise LookupError(f"no scripted event found in the request for session {sid!r}")


def _events_backwards(body: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """``("result", call_id)`` and ``("text", text)`` events, newest first."""
    items = body.get("messages", body.get("input"))
    if isinstance(items, str):
        yield "text", items
        return
    if not isinstance(items, list):
        return
    for item in reversed(items):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "function_call_output" and isinstance(item.get("call_id"), str):
            yield "result", item["call_id"]  # OpenAI Responses
            continue
        role = item.get("role")
        if role == "tool" and isinstance(item.get("tool_call_id"), str):
            yield "result", item["tool_call_id"]  # OpenAI Chat
            continue
        if role != "user":
            continue
        content = item.get("content")
        if isinstance(content, str):
            yield "text", content
            continue
        if not isinstance(content, list):
            continue
        for block in reversed(content):
            if not isinstance(block, Mapping):
                continue
            if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                yield "result", block["tool_use_id"]
            elif block.get("type") in ("text", "input_text") and isinstance(block.get("text"),
                                                                             str):
                yield "text", block["text"]


# ----------------------------------------------------------------------------- building


def parse_call(source: str, parameters: Sequence[str]) -> tuple[str, dict[str, Any]]:
    """Parse a BFCL ground-truth call string into ``(name, keyword arguments)``.

    Args:
        source: E.g. ``"mv(source='a.pdf', destination='temp')"`` or ``"sort('a.pdf')"``.
        parameters: The tool's parameter names in schema order; positional arguments take
            these names in order.

    Returns:
        The function name and its arguments (positional first, then keywords, as written).

    Raises:
        InputError: Not a single call of a plain name with literal arguments, or more
            positional arguments than parameters (code ``workload-call``).
    """
    try:
        node = ast.parse(source.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError("not a call of a plain function name")
        if len(node.args) > len(parameters):
            raise ValueError(f"{len(node.args)} positional arguments for "
                             f"{len(parameters)} parameters")
        arguments: dict[str, Any] = {}
        for name, arg in zip(parameters, node.args, strict=False):
            arguments[name] = ast.literal_eval(arg)
        for keyword in node.keywords:
            if keyword.arg is None:
                raise ValueError("**kwargs is not a literal argument")
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
    except (SyntaxError, ValueError) as exc:
        raise InputError(f"cannot parse ground-truth call {source!r}: {exc}",
                         code="workload-call") from exc
    return node.func.id, arguments


def _fake_value(schema: Any, seed: str, depth: int = 0) -> Any:
    """A deterministic value of the JSON-schema-ish ``schema`` (BFCL ``response`` shapes)."""
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    number = zlib.crc32(seed.encode())
    if kind in ("dict", "object"):
        props = schema.get("properties") if depth < 3 else None
        if not isinstance(props, Mapping):
            return {}
        return {k: _fake_value(v, f"{seed}/{k}", depth + 1) for k, v in props.items()}
    if kind in ("array", "tuple", "list"):
        return [_fake_value(schema.get("items"), f"{seed}/{i}", depth + 1) for i in range(2)]
    if kind in ("integer", "int"):
        return number % 1000
    if kind in ("number", "float"):
        return (number % 100_000) / 100
    if kind in ("boolean", "bool"):
        return True
    label = seed.rsplit("/", 1)[-1].replace("_", " ")
    return f"{label} {number % 10_000:04d}"


def _result(call_id: str, name: str, arguments: Mapping[str, Any], response: Any) -> str:
    value = _fake_value(response, f"{call_id}/{name}") if isinstance(response, Mapping) else {}
    if not isinstance(value, dict) or not value:
        value = {"status": "ok"}
    return canonical_json(value).decode()


def _final_text(calls: Sequence[ScriptedCall]) -> str:
    if not calls:
        return "There was nothing to run for this request; no tool was called."
    names = [c.name for c in calls]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    plural = "call" if len(calls) == 1 else "calls"
    return f"Done: {len(calls)} tool {plural} ({listed}) completed successfully."


def _session(
    sid: str, key: str, docs: Sequence[Mapping[str, Any]], turns: Sequence[str],
    truth: Sequence[Sequence[str]], services: Sequence[str],
) -> WorkloadSession:
    tools = ToolSet.from_dicts(docs, repair=True)
    by_name = {str(d["name"]): d for d in docs}
    order: list[str] = []
    for raw in docs:  # BFCL repeats no names within a session; keep the first if it ever does
        if raw["name"] not in order:
            order.append(str(raw["name"]))
    scripted = []
    for t, (text, calls) in enumerate(zip(turns, truth, strict=True)):
        made = []
        for k, source in enumerate(calls):
            name = source.split("(", 1)[0].strip()
            doc: Mapping[str, Any] = by_name.get(name) or {}
            params = list(doc.get("parameters", {}).get("properties", {}))
            name, arguments = parse_call(source, params)
            if name not in tools:
                raise InputError(f"{sid}: ground-truth call {source!r} names no tool of the "
                                 "session", code="workload-call")
            call_id = f"call_{key}_t{t:02d}_c{k:02d}"
            result = _result(call_id, name, arguments, doc.get("response"))
            made.append(ScriptedCall(call_id, name, arguments, result))
        scripted.append(ScriptedTurn(t, text, tuple(made), _final_text(made)))
    return WorkloadSession(sid, key, tools, tuple(order), tuple(scripted), tuple(services))


def _repair_counts(sessions: Sequence[WorkloadSession]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for session in sessions:
        counts.update(r.rule for r in session.tools.repairs)
    return dict(counts)


def _from_bfcl(entry: BfclSession, index: int) -> WorkloadSession:
    texts = []
    for t, messages in enumerate(entry.turns):
        users = [m["content"] for m in messages if m.get("role") == "user"]
        if len(users) != 1 or not isinstance(users[0], str):
            raise InputError(f"{entry.id}: turn {t} does not hold exactly one user text",
                             code="workload-turn")
        texts.append(users[0])
    return _session(entry.id, f"s{index:03d}", entry.tool_docs, texts, entry.ground_truth,
                    entry.involved_classes)


def bfcl_workload(*, download: bool = True) -> Workload:
    """All 200 BFCL v4 ``multi_turn_base`` sessions as a scripted workload.

    Raises:
        WorkloadUnavailableError: The BFCL data cannot be fetched or read (offline: the
            message says how to fix it; ``--workload synthetic`` runs without it).
    """
    entries = load_multi_turn_base(download=download)
    sessions = tuple(_from_bfcl(entry, i) for i, entry in enumerate(entries))
    return Workload(
        BFCL_WORKLOAD, False,
        f"bfcl-eval=={BFCL_VERSION} (PyPI, Apache-2.0): BFCL_v4_multi_turn_base.json, "
        "possible_answer/, multi_turn_func_doc/",
        sessions, len(sessions), _repair_counts(sessions))


def synthetic_workload() -> Workload:
    """Our bundled synthetic workload (3 sessions, 8 tools), labelled ``"synthetic"``.

    Not real data: a stand-in so the demo runs offline. Same construction as BFCL sessions.
    """
    sessions = tuple(
        _session(sid, f"s{i:03d}", docs, [t for t, _ in turns], [c for _, c in turns],
                 ("NotesAPI",))
        for i, (sid, docs, turns) in enumerate(SYNTHETIC_SESSIONS)
    )
    return Workload(SYNTHETIC_WORKLOAD, True,
                    "stableprompt bundled synthetic sessions (not real data)", sessions,
                    len(sessions), _repair_counts(sessions))
