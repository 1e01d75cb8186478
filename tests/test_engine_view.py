"""The backend seam: exact predictions from an engine's own token view (``_engine_view``).

A fake llama-server plays both parts: the HTTP engine behind the official OpenAI SDK (one slot
holding the previous prompt plus its generated tokens; cached = min(LCP, n - 1)) and the token
client the recorder asks (its chat template and a byte-level tokenizer). The real engine is
exercised by the ``real_engine`` tests.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
import pytest

from stableprompt._recording._engine_view import SlotMemory, common_prefix
from stableprompt._recording._recorder import Recorder
from stableprompt._recording._transport import RecordingTransport

KEY = "sk-proj-SECRETKEYdonotleak0123456789abcdef"
SYSTEM = "You are a careful assistant for a billing system. " * 8
TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "get_invoice", "description": "Fetch an invoice.",
        "parameters": {"type": "object", "properties": {"id": {"type": "string"},
                                                         "year": {"type": "integer"}}}}},
]


@dataclass(frozen=True)
class Prompt:
    text: str
    tokens: tuple[int, ...]


class FakeLlama:
    """Template: system text, then the tools (wrapper rebuilt, parameters as sent), then each
    message; the generation prompt last. Tokens: UTF-8 bytes (+ a BOS of 256)."""

    def __init__(self, *, rerender_last: bool = False) -> None:
        self.slot: tuple[int, ...] = ()
        self.rerender_last = rerender_last
        self.asked = 0

    def render(self, body: Mapping[str, Any]) -> str:
        messages = list(body["messages"])
        out = []
        for i, m in enumerate(messages):
            content = m.get("content") or ""
            if m["role"] == "system" and body.get("tools"):
                tools = [{"type": "function", "function": {
                    "name": t["function"]["name"],
                    "description": t["function"].get("description", ""),
                    "parameters": t["function"].get("parameters", {})}} for t in body["tools"]]
                content += "\n# Tools\n" + "\n".join(json.dumps(t) for t in tools)
            last = self.rerender_last and i == len(messages) - 1
            out.append(f"<|{m['role']}{'*' if last else ''}|>{content}<|end|>\n")
        return "".join(out) + "<|assistant|>"

    @staticmethod
    def tokenize(text: str, bos: bool = True) -> tuple[int, ...]:
        return ((256,) if bos else ()) + tuple(text.encode())

    # -- EngineTokens
    def prompt_tokens(self, wire_format: str, body: Mapping[str, Any]) -> Prompt:
        assert wire_format == "openai-chat"
        self.asked += 1
        text = self.render(body)
        return Prompt(text, self.tokenize(text))

    def generated_tokens(self, prompt: Prompt, text: str) -> tuple[int, ...]:
        return self.tokenize(text, bos=False)

    def detokenize(self, tokens: Sequence[int]) -> str:
        return bytes(t for t in tokens if t < 256).decode("utf-8", "replace")

    # -- HTTP
    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        tokens = self.tokenize(self.render(body))
        cached = min(common_prefix(self.slot, tokens), len(tokens) - 1)
        reply = "ok"
        generated = self.tokenize(reply, bos=False)
        self.slot = tokens + generated[:-1]  # the last sampled token is never evaluated
        return httpx2.Response(200, json={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "tiny",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": reply}}],
            "usage": {"prompt_tokens": len(tokens), "completion_tokens": len(generated),
                      "total_tokens": len(tokens) + len(generated),
                      "prompt_tokens_details": {"cached_tokens": cached}},
            "timings": {"cache_n": cached, "prompt_n": len(tokens) - cached}})


def client(engine: FakeLlama, recorder: Recorder) -> openai.OpenAI:
    http = httpx2.Client(transport=RecordingTransport(httpx2.MockTransport(engine),
                                                      recorder=recorder))
    return openai.OpenAI(api_key=KEY, base_url="http://127.0.0.1:8080/v1", http_client=http,
                         max_retries=0)


def conversation(who: str, turns: int, *, system: str = SYSTEM,
                 replay: str = "answer") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for t in range(turns):
        if t:
            messages.append({"role": "assistant", "content": replay})
        messages.append({"role": "user", "content": f"{who} asks question {t}"})
    return messages


def run(engine: FakeLlama, bodies: list[dict[str, Any]], **recorder_kw: Any) -> Recorder:
    recorder = Recorder(tokenizer="bytes/4", provider="llama-cpp", engine=engine,
                        **recorder_kw)
    sdk = client(engine, recorder)
    for body in bodies:
        sdk.chat.completions.create(model=body.get("model", "tiny"), max_tokens=4,
                                    messages=body["messages"], tools=body.get("tools", TOOLS))
    return recorder


def test_append_only_predictions_are_exact_engine_tokens() -> None:
    engine = FakeLlama()
    recorder = run(engine, [{"messages": conversation("ann", t)} for t in (1, 2, 3)])
    first, *later = recorder.records
    assert first.verdict == "cold" and first.predicted_cache_read_tokens == 0
    for record in recorder.records:
        assert record.predicted_cache_read_tokens == record.cache_read_tokens
        assert record.verdict_detail["token_view"] == "engine"
    assert [r.verdict for r in later] == ["hit", "hit"]
    assert all(r.cache_read_tokens for r in later)


def test_an_exact_repeat_predicts_all_but_the_last_token() -> None:
    body = {"messages": conversation("ann", 2)}
    recorder = run(FakeLlama(), [body, body])
    second = recorder.records[1]
    assert second.cache_read_tokens == second.input_tokens_total - 1  # type: ignore[operator]
    assert second.predicted_cache_read_tokens == second.cache_read_tokens


def test_replayed_reply_tokens_are_read_from_the_slot() -> None:
    """The slot keeps the generated tokens: a harness replaying the reply verbatim reads them."""
    recorder = run(FakeLlama(), [{"messages": conversation("ann", 1)},
                                 {"messages": conversation("ann", 2, replay="ok")}])
    first, second = recorder.records
    assert second.cache_read_tokens == second.predicted_cache_read_tokens
    assert second.cache_read_tokens > first.input_tokens_total  # type: ignore[operator]
    assert second.verdict_detail["replayed_reply_tokens"] == 1  # "ok": 2 tokens, 1 evaluated


def test_a_clock_in_the_system_prompt_is_a_client_mutation_with_the_divergent_token() -> None:
    bodies = [{"messages": conversation("ann", t, system=f"Now: 10:0{t}. " + SYSTEM)}
              for t in (1, 2)]
    recorder = run(FakeLlama(), bodies, session_id="s1")
    second = recorder.records[1]
    assert second.verdict == "client_mutation"
    assert second.predicted_cache_read_tokens == second.cache_read_tokens
    div: dict[str, Any] = second.verdict_detail["engine_divergence"]  # type: ignore[assignment]
    assert div["token_index"] == second.cache_read_tokens
    assert div["before"].endswith("Now: 10:0") and div["sent"].startswith("2")
    assert div["previous"].startswith("1")


def test_a_change_the_template_does_not_render_is_not_a_mutation() -> None:
    """Tool wrapper key order and the model name are invisible to this engine's prompt."""
    wrapper = [{"function": dict(reversed(list(TOOLS[0]["function"].items()))),
                "type": "function"}]
    bodies: list[dict[str, Any]] = [
        {"messages": conversation("ann", 1)},
        {"messages": conversation("ann", 2), "tools": wrapper, "model": "other"}]
    recorder = run(FakeLlama(), bodies, session_id="s1")
    second = recorder.records[1]
    assert second.verdict == "hit"
    assert second.predicted_cache_read_tokens == second.cache_read_tokens
    assert "engine_ignores_change" in second.verdict_detail


def test_a_template_that_rerenders_history_is_named_not_blamed_on_the_client() -> None:
    recorder = run(FakeLlama(rerender_last=True),
                   [{"messages": conversation("ann", t)} for t in (1, 2)])
    second = recorder.records[1]
    assert second.verdict == "provider_miss"
    assert second.verdict_detail["reason"] == "template-not-append-stable"
    assert second.predicted_cache_read_tokens == second.cache_read_tokens
    div: dict[str, Any] = second.verdict_detail["engine_divergence"]  # type: ignore[assignment]
    assert div["previous"].startswith("*")


def test_another_conversation_on_the_single_slot_is_the_predecessor_of_the_prediction() -> None:
    """Each session has its own environment line at the end of the system prompt (its own
    lineage); one slot: bob's first call reads ann's shared part, then ann's slot is gone."""
    bodies = [{"messages": conversation("ann", 1, system=SYSTEM + "env: ann")},
              {"messages": conversation("bob", 1, system=SYSTEM + "env: bob")},
              {"messages": conversation("ann", 2, system=SYSTEM + "env: ann")}]
    recorder = run(FakeLlama(), bodies)
    bob, ann2 = recorder.records[1:]
    assert bob.verdict == "cold"
    assert bob.predicted_cache_read_tokens == bob.cache_read_tokens
    assert bob.cache_read_tokens and bob.cache_read_tokens > len(SYSTEM)
    assert ann2.verdict == "provider_miss"
    assert ann2.verdict_detail["reason"] == "slot-taken"
    assert ann2.verdict_detail["slot_predecessor_id"] == bob.record_id
    assert ann2.predicted_cache_read_tokens == ann2.cache_read_tokens


def test_an_engine_that_cannot_answer_falls_back_to_estimates() -> None:
    class Broken(FakeLlama):
        def prompt_tokens(self, wire_format: str, body: Mapping[str, Any]) -> Prompt:
            raise RuntimeError("engine down")

    recorder = run(Broken(), [{"messages": conversation("ann", t)} for t in (1, 2)])
    for record in recorder.records:
        assert record.verdict_detail["engine_view_error"] == "RuntimeError: engine down"
        assert "token_view" not in record.verdict_detail
    assert recorder.records[1].verdict == "hit"


def test_other_providers_are_not_sent_to_the_engine() -> None:
    engine = FakeLlama()
    recorder = Recorder(tokenizer="bytes/4", provider="vllm", engine=engine)
    client(engine, recorder).chat.completions.create(
        model="tiny", max_tokens=4, messages=conversation("ann", 1))  # type: ignore[arg-type]
    assert engine.asked == 0
    assert "token_view" not in recorder.records[0].verdict_detail


def test_common_prefix_and_slots() -> None:
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2, 3], [1, 2, 3]) == 3
    assert common_prefix([1, 2, 3, 4], [1, 2, 9, 4]) == 2
    long = list(range(100_000))
    assert common_prefix(long, [*long[:77_777], -1 % 2**32]) == 77_777
    slots = SlotMemory(2)
    slots.remember("a", [1, 2, 3], None)
    slots.remember("b", [1, 5], None)
    assert slots.best([1, 2, 9]) == (2, "a", 3)
    slots.remember("c", [7], None)  # evicts the least recently used ("a")
    assert slots.best([1, 2, 9]) == (1, "b", 2)
    with pytest.raises(ValueError, match="slots"):
        SlotMemory(0)


def test_close_closes_only_an_engine_client_the_recorder_made() -> None:
    with Recorder(tokenizer="bytes/4", provider="llama-cpp",
                  engine="http://127.0.0.1:9") as recorder:
        made = recorder.engine
    assert made is not None and made._client.is_closed  # type: ignore[attr-defined]
    engine = FakeLlama()
    engine.close = lambda: pytest.fail("closed an engine it did not make")  # type: ignore[attr-defined]
    Recorder(engine=engine).close()


def test_recorders_on_one_engine_can_share_its_slot_memory() -> None:
    engine, slots = FakeLlama(), SlotMemory(1)
    first = Recorder(tokenizer="bytes/4", provider="llama-cpp", engine=engine,
                     engine_slots=slots)
    client(engine, first).chat.completions.create(
        model="tiny", max_tokens=4, messages=conversation("ann", 1))  # type: ignore[arg-type]
    second = Recorder(tokenizer="bytes/4", provider="llama-cpp", engine=engine,
                      engine_slots=slots)
    client(engine, second).chat.completions.create(
        model="tiny", max_tokens=4, messages=conversation("bob", 1))  # type: ignore[arg-type]
    record = second.records[0]
    assert record.cache_read_tokens
    assert record.predicted_cache_read_tokens == record.cache_read_tokens


def _with_tail(messages: list[dict[str, Any]], clock: str) -> list[dict[str, Any]]:
    """stableprompt's OpenAI rendering: the volatile tail as a final user message."""
    return [*messages, {"role": "user", "content": f"<now>\nCurrent time: {clock}\n</now>"}]


def _tailed_session(session_id: str, engine: FakeLlama) -> Recorder:
    turn1 = conversation("ann", 1)
    turn2 = [*turn1, {"role": "assistant", "content": "answer"},
             {"role": "user", "content": "ann asks question 1"}]
    return run(engine, [{"messages": _with_tail(turn1, "10:00")},
                        {"messages": _with_tail(turn2, "10:01")}], session_id=session_id)


def test_a_volatile_tail_the_next_turn_replaces_is_no_mutation() -> None:
    """Losing the previous request's tail message (a clock) is what an append-only harness
    loses: a hit, the tail's engine tokens named, the prediction still exact."""
    second = _tailed_session("s1", FakeLlama()).records[1]
    assert second.verdict == "hit"
    assert second.predicted_cache_read_tokens == second.cache_read_tokens
    tail = second.verdict_detail["volatile_tail_tokens"]
    assert isinstance(tail, int) and 0 < tail < 60


def test_a_template_that_rerenders_before_the_tail_is_named() -> None:
    """When the previous prompt without its tail is still no prefix of the next one, the
    template re-rendered earlier content: provider_miss, with the divergent token."""
    second = _tailed_session("s1", FakeLlama(rerender_last=True)).records[1]
    assert second.verdict == "provider_miss"
    assert second.verdict_detail["reason"] == "template-not-append-stable"
    assert second.predicted_cache_read_tokens == second.cache_read_tokens
    div: dict[str, Any] = second.verdict_detail["engine_divergence"]  # type: ignore[assignment]
    assert div["previous"].startswith("*")


def test_untailed_body_drops_the_tail_blocks_or_message() -> None:
    """The tail is cut from the divergent block of the last message on, or the whole message
    when it starts there; a segment outside the last message has no untailed body."""
    from stableprompt._recording._engine_view import untailed_body
    from stableprompt._wire._formats import segment_request

    anthropic = segment_request("anthropic", {"model": "m", "max_tokens": 1, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "q"},
                                     {"type": "text", "text": "<now>x</now>"}]}]})
    index = next(i for i, s in enumerate(anthropic.segments)
                 if s.path == "/messages/0/content/1")
    cut = untailed_body(anthropic, index)
    assert cut is not None and cut["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "q"}]}]
    assert len(anthropic.body["messages"][0]["content"]) == 2  # not modified
    chat = segment_request("openai-chat", {"model": "m", "messages": [
        {"role": "user", "content": "q"}, {"role": "user", "content": "<now>x</now>"}]})
    last = next(i for i, s in enumerate(chat.segments) if s.path == "/messages/1")
    first = next(i for i, s in enumerate(chat.segments) if s.path == "/messages/0")
    assert untailed_body(chat, last) == {"model": "m", "messages": [
        {"role": "user", "content": "q"}]}
    assert untailed_body(chat, first) is None
    assert untailed_body(chat, 99) is None


@pytest.mark.parametrize("engine", ["not a url", "", "ftp://x", 12345])
def test_a_bad_engine_is_refused_at_construction(engine: Any) -> None:
    from stableprompt import ConfigurationError

    with pytest.raises(ConfigurationError) as info:
        Recorder(engine=engine)
    assert info.value.code == "engine-url"


@pytest.mark.parametrize("slots", [0, -1, True, 1.5, "2"])
def test_bad_engine_slots_are_refused(slots: Any) -> None:
    from stableprompt import ConfigurationError

    with pytest.raises(ConfigurationError) as info:
        Recorder(engine_slots=slots)
    assert info.value.code == "engine-slots"
