"""Python agent harnesses from PyPI, unpatched, through ``stableprompt proxy`` to the emulator
(issue 26's acceptance): the OpenAI Agents SDK (function tools, an agent as a tool, a handoff;
on the Responses API and on Chat Completions) and aider (its CLI editing a file in a git
repository over two runs: on Anthropic Messages with its ``--cache-prompts`` breakpoints, and
on OpenAI Chat Completions), each in its own virtualenv made once
under the stableprompt cache (``peer_envs.HARNESSES``; an unreachable registry skips with
pip's error).

The model's turns come from scripted responders (the Agents SDK:
``test_harness_cli.CliResponder``, the last ``[task:NAME]`` marker in a user text picks the
script, the tool results after it the step; aider: :class:`AiderResponder`, SEARCH/REPLACE
answers).
The harnesses reach only loopback: their base URL is the proxy, ``HTTPS_PROXY``/``HTTP_PROXY``
point at a refusing loopback sink, analytics and version checks are off.

Each run asserts: every call 200 with one ledger row; every miss explained where the
independent ground truth (``ground_truth``: a plain JSON diff in cache order) puts the first
difference (``harness_truth.check_misses``); the what-if replay of the policy used equals what
was paid within 1%; agreement (the report's: predicted cache reads equal the reported ones
within the granularity, or within the allowance of an estimated span):
``test_harness_cli.assert_agreement``, 100% on every harness, the only inexact predictions
the first reads at an intermediate cache breakpoint whose entry size no response had reported
before (aider's repo map behind its chat-files breakpoint).

Found here: aider streams OpenAI Chat Completions through LiteLLM without
``stream_options.include_usage``, so such a stream carries no usage at all (the rows are
``unknown``, their reason says so); the OpenAI run uses ``--no-stream``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import peer_envs
from stableprompt import UsageRecord, what_if
from stableprompt.emulator import AssistantTurn, ToolCall
from test_harness_cli import (
    _TASK,
    CliResponder,
    Session,
    Sink,
    agreement,
    assert_agreement,
    assert_every_call,
    assert_ground_truth,
    base_env,
    check_diagnostics,
    run_session,
    sink,
)

pytestmark = pytest.mark.harness

__all__ = ["sink"]  # the sink fixture, shared with test_harness_cli

HERE = Path(__file__).parent
AGENTS_RUN = HERE / "openai_agents_run.py"


def _harness(name: str) -> Path:
    """The interpreter of a harness's virtualenv (made on first use)."""
    try:
        return peer_envs.peer_python(name)
    except peer_envs.PeerEnvError as exc:
        if exc.unreachable:
            pytest.skip(f"package registry unreachable: {exc}")
        pytest.fail(f"cannot create the virtualenv of {exc}")


def assert_what_if_as_used(records: list[UsageRecord]) -> None:
    """The replay of the policy the harness used reproduces what it paid within 1%; no
    candidate beats the hindsight bound."""
    result = what_if(records)
    assert result.calls == len(records)
    assert result.as_used.usd == pytest.approx(result.recorded_usd, rel=0.01)
    assert all(o.usd >= result.hindsight_usd - 1e-12 for o in result.outcomes)
    print(f"what-if: paid ${result.recorded_usd:.6f}, as used ${result.as_used.usd:.6f} "
          f"({result.as_used.usd / result.recorded_usd - 1:+.3%}), cheapest "
          f"{result.cheapest.policy.label()} ${result.cheapest.usd:.6f}")


def summary(name: str, session: Session) -> str:
    rows = session.records
    misses = sum(r.verdict == "client_mutation" for r in rows)
    verdicts: dict[str, int] = {}
    for r in rows:
        verdicts[r.verdict] = verdicts.get(r.verdict, 0) + 1
    return (f"{name}: {len(session.emulator_statuses)} calls, {session.ledger_rows} rows, "
            f"{misses} client mutations, verdicts {verdicts}, "
            f"agreement {agreement(rows):.1%}")


def _no_check(rows: list[UsageRecord]) -> None:
    pass


# -- OpenAI Agents SDK -----------------------------------------------------------------------


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
def test_openai_agents_sdk_session_with_tools_sub_agent_and_handoff(
        api: str, sink: Sink, tmp_path: Path) -> None:
    """Three user turns: three function tools; an agent as a tool (its own run on the input
    the model wrote); a handoff to another agent that reads a note: every call 200, one
    ledger row each, misses as the ground truth, what-if within 1%, agreement >= 99%."""
    python = _harness("openai_agents")
    responder = CliResponder(
        scripts={"one": [ToolCall("write_note", {"name": "a", "text": "alpha"}),
                         ToolCall("read_note", {"name": "a"}),
                         ToolCall("add", {"a": 2, "b": 3})],
                 "two": [ToolCall("summarize_notes", {"input": "[task:sub] summarize note a"})],
                 "sub": [ToolCall("read_note", {"name": "a"})],
                 "three": [ToolCall("read_note", {"name": "a"}),
                           ToolCall("transfer_to_checker", {}),
                           ToolCall("read_note", {"name": "a"})]},
        finals={"one": "one done", "two": "two done", "sub": "a says alpha",
                "three": "checked: sound"})
    env = {**base_env(tmp_path / "home", sink), "PYTHONHASHSEED": "0",
           "OPENAI_AGENTS_DISABLE_TRACING": "1", "OPENAI_BASE_URL": "{proxy}/v1"}
    wire = "openai-responses" if api == "responses" else "openai-chat"
    session = run_session(tmp_path, responder, [
        ([str(python), str(AGENTS_RUN), api], env)],
        check_diagnostics(wire) if api == "responses" else _no_check)
    assert_every_call(session, minimum=10)
    out = json.loads(session.outputs[0].stdout)
    assert out["finals"] == ["one done", "two done", "checked: sound"], out
    assert out["agents"] == ["assistant", "assistant", "checker"], out
    assert out["notes"] == {"a": "alpha"}
    assert {"one", "two", "sub", "three"} <= set(responder.seen)
    assert_ground_truth(session)
    assert_what_if_as_used(session.records)
    print(summary(f"openai-agents {api}", session))
    assert_agreement(session.records)


# -- aider -----------------------------------------------------------------------------------

GREET = 'def greet():\n    return "hi"\n'
CHECK = ("from hello import greet\n"
         "assert greet('x') == 'hi x', greet('x')\n"
         "assert farewell('x') == 'bye x' if 'farewell' in dir(__import__('hello')) else True\n")


def _edit(search: str, replace: str) -> str:
    """An answer in aider's ``diff`` edit format (one SEARCH/REPLACE block on hello.py)."""
    return (f"Editing hello.py.\n\nhello.py\n```python\n<<<<<<< SEARCH\n{search}=======\n"
            f"{replace}>>>>>>> REPLACE\n```\n")


AIDER_SCRIPTS: dict[str, list[str]] = {
    # the first edit breaks the test; aider sends the test output back, the second fixes it
    "one": [_edit(GREET, 'def greet(name):\n    return "hello"\n'),
            _edit('def greet(name):\n    return "hello"\n',
                  'def greet(name):\n    return f"hi {name}"\n')],
    "two": [_edit('def greet(name):\n    return f"hi {name}"\n',
                  'def greet(name):\n    return f"hi {name}"\n\n\n'
                  'def farewell(name):\n    return f"bye {name}"\n')],
}
FINAL_HELLO = ('def greet(name):\n    return f"hi {name}"\n\n\n'
               'def farewell(name):\n    return f"bye {name}"\n')


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict))
    return ""


class AiderResponder:
    """aider's model: a commit-message request (its system prompt asks for one) gets a
    one-line message; a chat request gets the step of the task named by the last
    ``[task:NAME]`` in a user message, the step being the number of edits (assistant messages
    with a SEARCH/REPLACE block) after it (aider sends the test output back as a user message,
    and adds "I committed ..." / "Ok." pairs); past the last step, a closing text."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, body: Mapping[str, Any]) -> AssistantTurn:
        messages = list(body.get("messages") or [])
        system = _text(body.get("system")) + "".join(
            _text(m.get("content")) for m in messages if m.get("role") == "system")
        if "commit message" in system:
            self.seen.append("commit")
            return AssistantTurn(text="feat: scripted edit of hello.py")
        task, step = None, 0
        for message in messages:
            found = _TASK.findall(_text(message.get("content")))
            if message.get("role") == "user" and found:
                task, step = found[-1], 0
            elif message.get("role") == "assistant" and "<<<<<<< SEARCH" in _text(
                    message.get("content")):
                step += 1
        if task is None:
            return AssistantTurn(text="ok")
        self.seen.append(task)
        script = AIDER_SCRIPTS[task]
        return AssistantTurn(text=script[step] if step < len(script) else "Done.")


AIDER_MODELS = {"anthropic": "claude-sonnet-4-5", "openai": "openai/gpt-5.6"}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_aider_edits_a_file_over_several_runs(provider: str, sink: Sink, tmp_path: Path) -> None:
    """aider's session (:func:`aider_session`) on Anthropic with ``--cache-prompts`` (its
    breakpoints on the system prompt, the repo map and the chat files; streamed) and on OpenAI
    Chat Completions (automatic caching; ``--no-stream``, so the answers carry usage): misses
    as the ground truth, what-if within 1%, agreement (:func:`assert_agreement`)."""
    session, _ = aider_session(provider, sink, tmp_path, stream=provider == "anthropic")
    assert_ground_truth(session)
    assert_what_if_as_used(session.records)
    print(summary(f"aider {provider}", session))
    assert_agreement(session.records)


def test_aider_streaming_openai_chat_without_usage_keeps_every_row(
        sink: Sink, tmp_path: Path) -> None:
    """aider's default on OpenAI: streamed Chat Completions without
    ``stream_options.include_usage`` (LiteLLM 1.81 does not ask), so the streams carry no
    usage. Every call still has its row; each streamed one is ``unknown`` with the reason
    (the request did not ask for usage) and its cost counted unknown, never as zero; the
    non-streamed commit-message calls are priced."""
    session, _ = aider_session("openai", sink, tmp_path, stream=True)
    streamed = [r for r in session.records if r.verdict == "unknown"]
    assert len(streamed) >= 3 and len(session.records) - len(streamed) >= 2
    for row in streamed:
        assert row.cache_read_tokens is None and row.input_tokens_total is None, row
        reason = row.verdict_detail.get("unknown_reason")
        assert isinstance(reason, str) and "include_usage" in reason, row.verdict_detail
    from stableprompt._accounting._summary import summarize

    overall = summarize(session.records).overall
    assert overall.unknown_usage == len(streamed) and not overall.cost_complete
    print(f"aider openai streamed: {len(session.records)} calls, {len(streamed)} without usage "
          f"({streamed[0].verdict_detail['unknown_reason']})")


def aider_session(provider: str, sink: Sink, tmp_path: Path, *, stream: bool
                  ) -> tuple[Session, AiderResponder]:
    """aider (``--message``, ``--yes-always``, ``--auto-test``) in a git repository with a
    repo map: the first run's edit fails the test and aider sends the output back for a fix;
    the second run restores the chat history and adds a function; each edit is committed with
    a message from the (weak) model. Asserts that every call was answered 200 with one ledger
    row, the file's end state, and the scripted steps and commit messages were asked for.
    ``stream``: aider's default streaming, else ``--no-stream``."""
    python = _harness("aider")
    aider = python.with_name("aider")
    work = tmp_path / "work"
    work.mkdir()
    (work / "hello.py").write_text(GREET)
    (work / "check.py").write_text(CHECK)
    (work / "util.py").write_text("".join(
        f"def helper_{i}(value):\n    \"\"\"Helper {i}: scale by {i}.\"\"\"\n"
        f"    return value * {i}\n\n\n" for i in range(40)))
    env = {**base_env(tmp_path / "home", sink), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "ANTHROPIC_API_KEY": "sk-ant-emulator-key", "OPENAI_API_KEY": "sk-emulator-key",
           "AIDER_ANALYTICS_DISABLE": "1", "AIDER_CHECK_UPDATE": "false",
           "PYTHONHASHSEED": "0"}
    for git in (["git", "init", "-q"], ["git", "add", "-A"],
                ["git", "commit", "-qm", "start"]):
        subprocess.run(git, cwd=work, env=env, check=True)
    # The base URL through the environment (run_session puts the proxy's URL there): aider
    # has no Anthropic base-URL option, LiteLLM (its client) reads ANTHROPIC_API_BASE; the
    # OpenAI one is aider's --openai-api-base as its environment variable.
    env.update({"ANTHROPIC_API_BASE": "{proxy}"} if provider == "anthropic" else
               {"AIDER_OPENAI_API_BASE": "{proxy}/v1"})
    common = [str(aider), "--model", AIDER_MODELS[provider], "--edit-format", "diff",
              "--yes-always", "--no-check-update", "--analytics-disable",
              "--no-show-release-notes", "--no-show-model-warnings", "--no-pretty",
              "--no-fancy-input", "--disable-playwright", "--no-detect-urls",
              "--map-tokens", "1024", "--map-refresh", "files",
              "--test-cmd", "python check.py", "--auto-test", "hello.py",
              # OpenAI: aider streams through LiteLLM without stream_options.include_usage, so
              # the stream carries no usage and no observer knows its cache reads (the rows
              # say so: verdict unknown); the non-streamed answers carry it.
              *(["--cache-prompts"] if provider == "anthropic" else []),
              *([] if stream else ["--no-stream"])]
    responder = AiderResponder()
    session = run_session(tmp_path, responder, [
        ([*common, "--message", "[task:one] make greet take a name"], env),
        ([*common, "--restore-chat-history", "--message",
          "[task:two] add a farewell function"], env)],
        check_diagnostics("anthropic") if provider == "anthropic" else _no_check)
    assert_every_call(session, minimum=5)
    assert (work / "hello.py").read_text() == FINAL_HELLO
    assert responder.seen.count("one") == 2 and "two" in responder.seen, responder.seen
    assert "commit" in responder.seen
    return session, responder
