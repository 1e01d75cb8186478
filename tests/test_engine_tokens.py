"""Tests for ``_recording._engine_tokens``: the engine's token view of a request.

Offline, an ``httpx.MockTransport`` plays llama-server's ``/apply-template``, ``/tokenize``
and ``/detokenize``, with a tokenizer built like llama.cpp's (``src/llama-vocab.cpp``):
special tokens split the text first (longest first, leftmost, ``rstrip`` eating the spaces
after it; control tokens only with ``parse_special``), then each raw fragment is tokenized on
its own with SPM's space prefix after a special. Its word-level vocabulary makes a wrong cut
visible. Tests marked ``real_engine`` run against the llama-server at
conftest's ``llama_url``: incremental tokenization equals whole-text tokenization there."""

from __future__ import annotations

import dataclasses
import random
import re
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stableprompt import (
    EngineRequestError,
    InputError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
)
from stableprompt._canonical import loads
from stableprompt._recording._engine_tokens import MARGIN_BYTES, EnginePrompt, EngineTokenizer

URL = "http://engine.test"


@dataclasses.dataclass
class Special:
    """A special token of the fake vocabulary."""

    id: int
    control: bool = True
    rstrip: bool = False


class FakeEngine:
    """llama-server's three endpoints over a small llama.cpp-shaped tokenizer."""

    BOS, EOS = 1, 2

    def __init__(self, *, add_eos: bool = False, extra: dict[str, Special] | None = None):
        self.specials: dict[str, Special] = {
            "<s>": Special(self.BOS), "</s>": Special(self.EOS),
            "<|im_start|>": Special(3), "<|im_end|>": Special(4),
            "<|end|>": Special(5, rstrip=True), "<tool>": Special(6, control=False),
            **(extra or {})}
        self.by_id = {s.id: text for text, s in self.specials.items()}
        self.add_eos = add_eos
        self.words: dict[str, int] = {}
        self.requests: list[tuple[str, Any]] = []
        self.fail: tuple[int, bytes] | None = None

    # tokenizer
    def partition(self, text: str, parse_special: bool) -> list[str | int]:
        fragments: list[str | int] = [text]
        for special in sorted(self.specials, key=len, reverse=True):
            info = self.specials[special]
            if not parse_special and info.control:
                continue
            out: list[str | int] = []
            for fragment in fragments:
                if isinstance(fragment, int):
                    out.append(fragment)
                    continue
                rest = fragment
                while (at := rest.find(special)) >= 0:
                    if at:
                        out.append(rest[:at])
                    out.append(info.id)
                    rest = rest[at + len(special):]
                    if info.rstrip:
                        rest = rest.lstrip()
                if rest:
                    out.append(rest)
            fragments = out
        return fragments

    def word_id(self, word: str) -> int:
        return self.words.setdefault(word, 1000 + len(self.words))

    def tokenize(self, text: str, add_special: bool, parse_special: bool) -> list[int]:
        ids = [self.BOS] if add_special else []
        prev_special = True
        for fragment in self.partition(text, parse_special):
            if isinstance(fragment, int):
                ids.append(fragment)
                prev_special = True
                continue
            raw = (" " if prev_special else "") + fragment
            ids += [self.word_id(w) for w in re.findall(r" ?\S+|\s", raw)]
            prev_special = False
        if add_special and self.add_eos:
            ids.append(self.EOS)
        return ids

    def piece(self, token: int) -> str:
        if token in self.by_id:
            return self.by_id[token]
        return next(w for w, i in self.words.items() if i == token)

    # endpoints
    def render(self, chat: dict[str, Any]) -> str:
        out = ""
        if chat.get("tools"):
            out += "<|im_start|>system\n# Tools\n" + "\n".join(
                str(t["function"]) for t in chat["tools"]) + "<|im_end|>\n"
        for message in chat["messages"]:
            content = message.get("content", "")
            if isinstance(content, list):
                content = "".join(part.get("text", "") for part in content)
            for call in message.get("tool_calls", []):
                content += f"\n<tool>{call['function']['arguments']}"
            out += f"<|im_start|>{message['role']}\n{content}<|im_end|>\n"
        return out + "<|im_start|>assistant\n"

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = loads(request.content)
        self.requests.append((request.url.path, body))
        if self.fail is not None:
            return httpx.Response(self.fail[0], content=self.fail[1])
        if request.url.path == "/apply-template":
            return httpx.Response(200, json={"prompt": self.render(body)})
        if request.url.path == "/detokenize":
            return httpx.Response(200, json={"content": "".join(
                self.piece(t) for t in body["tokens"])})
        content = body["content"]
        ids: list[int] = []
        for index, part in enumerate(content if isinstance(content, list) else [content]):
            if isinstance(part, int):
                ids.append(part)
            else:
                ids += self.tokenize(part, body["add_special"] and index == 0,
                                     body["parse_special"])
        if body["with_pieces"]:
            if any(t < 0 for t in ids):
                return httpx.Response(500, json={"error": {"message": "invalid token"}})
            return httpx.Response(200, json={"tokens": [
                {"id": t, "piece": self.piece(t)} for t in ids]})
        return httpx.Response(200, json={"tokens": ids})

    def asked(self, path: str = "/tokenize") -> list[Any]:
        return [body for p, body in self.requests if p == path]


@pytest.fixture
def engine() -> FakeEngine:
    """A fresh fake engine."""
    return FakeEngine()


def _tokenizer(engine: FakeEngine, **kwargs: Any) -> EngineTokenizer:
    return EngineTokenizer(URL, client=httpx.Client(transport=httpx.MockTransport(
        engine.handle)), **kwargs)


def _session(turns: int) -> dict[str, Any]:
    """An Anthropic body with ``turns`` user/assistant exchanges (tool calls included; ids
    of 9 alphanumerics, as Mistral templates require)."""
    messages: list[dict[str, Any]] = []
    for k in range(turns):
        messages.append({"role": "user", "content": f"question {k}: " + "word " * 30})
        messages.append({"role": "assistant", "content": [
            {"type": "text", "text": f"answer {k}"},
            {"type": "tool_use", "id": f"c{k:08d}", "name": "lookup", "input": {"q": k}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"c{k:08d}", "content": "result " * 20}]})
    return {"system": "You are terse. " * 20, "messages": messages, "max_tokens": 10,
            "tools": [{"name": "lookup", "description": "Look it up.",
                       "input_schema": {"type": "object"}}]}


# --- the prompt ----------------------------------------------------------------------------

def test_prompt_tokens_render_then_tokenize_with_the_prompt_flags(engine: FakeEngine) -> None:
    """The converted body goes to /apply-template; its text to /tokenize with add_special
    and parse_special on, as the server tokenizes a prompt."""
    tok = _tokenizer(engine)
    prompt = tok.prompt_tokens("anthropic", _session(1))
    assert isinstance(prompt, EnginePrompt)
    assert engine.asked("/apply-template")[0]["messages"][0]["role"] == "system"
    assert engine.asked()[0] == {"content": prompt.text, "add_special": True,
                                 "parse_special": True, "with_pieces": True}
    assert prompt.tokens == tuple(engine.tokenize(prompt.text, True, True))
    assert prompt.tokens[0] == FakeEngine.BOS
    with pytest.raises(dataclasses.FrozenInstanceError):
        prompt.text = "x"  # type: ignore[misc]


def test_same_body_asks_once_and_same_text_tokenizes_once(engine: FakeEngine) -> None:
    """A repeated body costs no request; another body rendering the same text costs only
    /apply-template."""
    tok = _tokenizer(engine)
    first = tok.prompt_tokens("anthropic", _session(1))
    assert tok.prompt_tokens("anthropic", _session(1)) is first
    assert tok.calls == {"/apply-template": 1, "/tokenize": 1}
    chat = {"messages": [{"role": "system", "content": "You are terse. " * 20}]}
    tok.prompt_tokens("openai-chat", chat)
    tok.prompt_tokens("openai-chat", {"messages": [
        {"role": "system", "content": [{"type": "text", "text": "You are terse. " * 20}]}]})
    assert tok.calls == {"/apply-template": 3, "/tokenize": 2}
    assert tok.stats["full"] == 2


def test_memos_are_lru_of_max_entries(engine: FakeEngine) -> None:
    """Beyond max_entries the least recently used prompt is asked again."""
    tok = _tokenizer(engine, max_entries=2, incremental=False)
    for text in ("a", "b", "a", "c", "a", "b"):
        tok.tokenize_prompt(text)
    assert [b["content"] for b in engine.asked()] == ["a", "b", "c", "b"]


def test_bad_bodies_fail_before_any_request(engine: FakeEngine) -> None:
    """A body the server would reject raises EngineRequestError without a request."""
    tok = _tokenizer(engine)
    with pytest.raises(EngineRequestError):
        tok.prompt_tokens("openai-responses", {"model": "m"})
    assert tok.calls == {} and engine.requests == []


def test_max_entries_must_be_positive() -> None:
    """A memo of no entries is a configuration mistake."""
    with pytest.raises(InputError):
        EngineTokenizer(URL, max_entries=0)


# --- incremental tokenization --------------------------------------------------------------

def test_a_growing_session_asks_only_for_the_tail(engine: FakeEngine) -> None:
    """Each turn tokenizes from the last safe cut on, and gives the whole-text tokens."""
    tok = _tokenizer(engine)
    full = _tokenizer(FakeEngine(), incremental=False)
    for turns in range(1, 7):
        got = tok.prompt_tokens("anthropic", _session(turns))
        assert got.tokens == tuple(engine.tokenize(got.text, True, True))
        assert full.prompt_tokens("anthropic", _session(turns)).text == got.text
    assert tok.stats["incremental"] == 5 and tok.stats["full"] == 1
    tails = [b for b in engine.asked() if b["add_special"] is False and b["parse_special"]
             and isinstance(b["content"], str)]
    assert len(tails) == 5 and all(t["content"].startswith("<|im_") for t in tails)
    asked = sum(len(b["content"]) for b in engine.asked() if isinstance(b["content"], str))
    assert asked < len(got.text) * 2.5  # vs about 3.5x the last text for six whole texts
    assert tok.stats["reused_tokens"] > len(got.tokens)


def test_the_tail_starts_with_the_cut_token_so_rstrip_and_space_prefix_hold(
        engine: FakeEngine) -> None:
    """After an rstrip special the spaces go and the next fragment gets SPM's space
    prefix; both need the special's text at the start of the tail."""
    tok = _tokenizer(engine)
    head = "x" * MARGIN_BYTES
    base = f"{head}<|end|>   \n  tail words " + "y" * MARGIN_BYTES
    tok.tokenize_prompt(base)
    new = base + " more"
    assert tok.tokenize_prompt(new).tokens == tuple(engine.tokenize(new, True, True))
    assert tok.stats["incremental"] == 1
    assert engine.asked()[-1]["content"].startswith("<|end|>   \n")


def test_cuts_stay_clear_of_the_divergence(engine: FakeEngine) -> None:
    """A special within MARGIN_BYTES of where the texts part is not a cut."""
    tok = _tokenizer(engine)
    tok.tokenize_prompt("a" * 40 + "<|im_end|>" + "b" * (MARGIN_BYTES - 1) + "c")
    tok.tokenize_prompt("a" * 40 + "<|im_end|>" + "b" * (MARGIN_BYTES - 1) + "d")
    assert tok.stats == {"full": 2, "incremental": 0, "reused_tokens": 0}


def test_user_defined_tokens_are_not_cuts(engine: FakeEngine) -> None:
    """A token split out even without parse_special fails the control check."""
    tok = _tokenizer(engine)
    text = "w " * 20 + "<tool>" + "z" * (2 * MARGIN_BYTES)
    tok.tokenize_prompt(text)
    tok.tokenize_prompt(text + "!")
    assert tok.stats["incremental"] == 0
    checks = [b for b in engine.asked() if isinstance(b["content"], list)]
    assert [b["parse_special"] for b in checks] == [True, False]
    assert all(b["with_pieces"] is False for b in checks)  # a separator has no piece


def test_a_token_shadowed_by_a_longer_special_is_not_a_cut() -> None:
    """When a longer special claims some occurrences, the counts differ: no cut there, the
    cut falls back to the longer special before it (after BOS, " q", " ")."""
    engine = FakeEngine(extra={"<|im_end|>!": Special(7)})
    tok = _tokenizer(engine)
    text = "q <|im_end|>!" + "p " * 200 + "<|im_end|>" + "r" * (2 * MARGIN_BYTES)
    tok.tokenize_prompt(text)
    new = text + " s"
    assert tok.tokenize_prompt(new).tokens == tuple(engine.tokenize(new, True, True))
    assert tok.stats["incremental"] == 1 and tok.stats["reused_tokens"] == 3


def test_models_that_add_eos_get_it_after_the_tail() -> None:
    """The closing specials of add_special come after the tail (found once by a probe)."""
    engine = FakeEngine(add_eos=True)
    tok = _tokenizer(engine)
    for turns in (2, 3):
        got = tok.prompt_tokens("anthropic", _session(turns))
        assert got.tokens == tuple(engine.tokenize(got.text, True, True))
        assert got.tokens[-1] == FakeEngine.EOS
    assert tok.stats["incremental"] == 1


FRAGMENTS = ["<|im_start|>", "<|im_end|>", "<|end|>", "<tool>", "<s>", "<|im_", "end|>",
             " ", "  ", "\n", "\t", "word", " word", "é", "😀", "{\"a\": 1}", "x" * 90]


@given(st.lists(st.tuples(st.integers(0, 10**6), st.lists(st.sampled_from(FRAGMENTS),
                                                           min_size=1, max_size=40)),
                min_size=2, max_size=12))
def test_incremental_equals_whole_text_tokenization(steps: list[tuple[int, list[str]]]) -> None:
    """Whatever the edits (cut back anywhere, append anything), the tokens are the whole
    text's."""
    engine = FakeEngine()
    tok = _tokenizer(engine, max_entries=4)
    text = ""
    for keep, fragments in steps:
        text = text[:keep % (len(text) + 1)] + "".join(fragments) * 4
        assert tok.tokenize_prompt(text).tokens == tuple(engine.tokenize(text, True, True))


# --- replies and pieces --------------------------------------------------------------------

def test_text_tokens_have_no_specials(engine: FakeEngine) -> None:
    """A reply is tokenized without BOS and without splitting out control tokens."""
    tok = _tokenizer(engine)
    ids = tok.text_tokens("ok <|im_end|>")
    assert engine.asked()[-1]["add_special"] is False
    assert engine.asked()[-1]["parse_special"] is False
    assert 4 not in ids and FakeEngine.BOS not in ids


def test_pieces_come_from_the_tokenization_and_detokenize_joins(engine: FakeEngine) -> None:
    """Pieces of known tokens cost nothing; unknown ids cost one /detokenize each."""
    tok = _tokenizer(engine)
    prompt = tok.tokenize_prompt("<|im_start|>user hello there")
    calls = dict(tok.calls)
    assert tok.pieces(prompt.tokens) == (b"<s>", b"<|im_start|>", b" user", b" hello",
                                         b" there")
    assert tok.calls == calls
    unknown = engine.word_id(" unseen")
    assert tok.pieces([unknown, unknown]) == (b" unseen", b" unseen")
    assert tok.calls["/detokenize"] == 1
    assert tok.detokenize(prompt.tokens[1:]) == "<|im_start|> user hello there"


def test_byte_pieces_are_bytes() -> None:
    """A piece sent as byte values (not valid UTF-8) is kept as those bytes."""
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"tokens": [{"id": 7, "piece": [0xE6, 0x97]}]})
    tok = EngineTokenizer(URL, client=httpx.Client(transport=httpx.MockTransport(handle)))
    assert tok.text_tokens("x") == (7,)
    assert tok.pieces([7]) == (b"\xe6\x97",)


# --- errors and threads --------------------------------------------------------------------

@pytest.mark.parametrize(("status", "body", "error", "code"), [
    (500, b'{"error": {"message": "boom"}}', ProviderHTTPError, "provider-http"),
    (400, b'{"error": {"message": "Cannot continue"}}', ProviderHTTPError, "provider-http"),
    (200, b"<html>", ProviderError, "provider-invalid-json"),
    (200, b'{"nope": 1}', ProviderError, "provider-invalid-json"),
])
def test_answers_map_to_provider_errors(engine: FakeEngine, status: int, body: bytes,
                                        error: type[ProviderError], code: str) -> None:
    """Error answers and answers that are not the endpoint's JSON are ProviderErrors."""
    engine.fail = (status, body)
    tok = _tokenizer(engine)
    with pytest.raises(error) as info:
        tok.prompt_tokens("openai-chat", {"messages": []})
    assert info.value.code == code
    if isinstance(info.value, ProviderHTTPError):
        assert info.value.status_code == status and info.value.retryable == (status >= 500)


@pytest.mark.parametrize(("exc", "error"), [
    (httpx.ConnectError("refused"), ProviderConnectionError),
    (httpx.ReadTimeout("slow"), ProviderTimeoutError),
])
def test_transport_errors_are_ours(exc: Exception, error: type[ProviderError]) -> None:
    """httpx errors never escape: they map through _recording._errors."""
    def handle(request: httpx.Request) -> httpx.Response:
        raise exc
    tok = EngineTokenizer(URL, client=httpx.Client(transport=httpx.MockTransport(handle)))
    with pytest.raises(error) as info:
        tok.text_tokens("x")
    assert info.value.__cause__ is exc


def test_concurrent_callers_get_the_sequential_answers(engine: FakeEngine) -> None:
    """Eight threads asking for overlapping sessions get what one thread gets."""
    def body(m: int) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": "x <|im_end|> " * (40 * m)}]}

    reference = FakeEngine()
    sequential = _tokenizer(reference)
    expected = {m: [reference.piece(t) for t in sequential.prompt_tokens(
        "openai-chat", body(m)).tokens] for m in range(1, 9)}
    tok = _tokenizer(engine)
    results: dict[int, list[str]] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for m in range(n, 0, -1) if n % 2 else range(1, n + 1):
                tokens = tok.prompt_tokens("openai-chat", body(m)).tokens
                results[m] = [engine.piece(t) for t in tokens]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert results == expected


def test_a_given_client_stays_open(engine: FakeEngine) -> None:
    """close() closes only a client the tokenizer made."""
    client = httpx.Client(transport=httpx.MockTransport(engine.handle))
    with EngineTokenizer(URL, client=client) as tok:
        tok.text_tokens("x")
    assert not client.is_closed
    own = EngineTokenizer(URL)
    own.close()
    assert own._client.is_closed


# --- against a real llama-server -----------------------------------------------------------

@pytest.fixture
def real_url(llama_url: str) -> str:
    """The real llama-server's base URL (conftest ``llama_url``)."""
    return llama_url


@pytest.fixture
def real_pair(real_url: str) -> Iterator[tuple[EngineTokenizer, EngineTokenizer]]:
    """An incremental tokenizer and a whole-text one on the real engine."""
    with EngineTokenizer(real_url, timeout_s=60) as inc, \
            EngineTokenizer(real_url, timeout_s=60, incremental=False) as whole:
        yield inc, whole


def _tokens_or_error(tok: EngineTokenizer, body: dict[str, Any]) -> tuple[str, Any]:
    """``("tokens", ids)``, or ``("error", the server's message)`` when its chat template
    rejects the conversation (Mistral's strict alternation, say)."""
    try:
        return "tokens", tok.prompt_tokens("anthropic", body).tokens
    except ProviderHTTPError as exc:
        return "error", loads(exc.body)["error"]["message"]


@pytest.mark.real_engine
def test_real_prompt_tokens_match_the_count_endpoints(real_url: str) -> None:
    """prompt_tokens of a session has as many tokens as the engine's count endpoint (or
    fails with its message)."""
    with EngineTokenizer(real_url) as tok, httpx.Client(base_url=real_url) as client:
        for turns in (1, 2, 3):
            body = _session(turns)
            answer = client.post("/v1/messages/count_tokens", json=body)
            kind, value = _tokens_or_error(tok, body)
            if answer.is_success:
                assert (kind, len(value)) == ("tokens", answer.json()["input_tokens"])
            else:
                assert (kind, value) == ("error", answer.json()["error"]["message"])


@pytest.mark.real_engine
def test_real_incremental_equals_whole_text(
        real_pair: tuple[EngineTokenizer, EngineTokenizer]) -> None:
    """On the real tokenizer, 200 edited prompts (specials, spaces, rstrip tokens, UTF-8)
    tokenize incrementally to the whole-text tokens."""
    inc, whole = real_pair
    rng = random.Random(7)
    fragments = [*FRAGMENTS, "<|user|>", "<|assistant|>", "<|system|>", "<|endoftext|>",
                 "lorem ipsum dolor sit amet " * 5, "  indented", "\n\n", "日本語"]

    def chunk(n: int) -> str:
        return "".join(rng.choice(fragments) for _ in range(n))
    text = chunk(200)
    for _ in range(200):
        roll = rng.random()
        if roll < 0.5:
            text += chunk(rng.randint(1, 60))
        elif roll < 0.8:
            text = text[:rng.randint(0, len(text))] + chunk(rng.randint(1, 80))
        elif roll < 0.9:
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice([" ", "\n", "  \n"]) + text[at:]
        else:
            text = chunk(200)
        assert inc.tokenize_prompt(text).tokens == whole.tokenize_prompt(text).tokens


@pytest.mark.real_engine
def test_real_session_incremental_equals_whole_text(
        real_pair: tuple[EngineTokenizer, EngineTokenizer]) -> None:
    """A growing agent session: the same tokens either way."""
    inc, whole = real_pair
    for turns in range(1, 8):
        body = _session(turns)
        assert _tokens_or_error(inc, body) == _tokens_or_error(whole, body)


@pytest.mark.real_engine
def test_real_pieces_join_to_the_detokenized_text(real_url: str) -> None:
    """The pieces of a prompt's tokens join to what /detokenize gives for them."""
    with EngineTokenizer(real_url) as tok:
        prompt = tok.prompt_tokens("anthropic", _session(1))
        assert b"".join(tok.pieces(prompt.tokens)).decode("utf-8", "replace") == \
            tok.detokenize(prompt.tokens)
        assert tok.text_tokens("hello") == tok.text_tokens("hello")
        # In context, a reply continues the prompt's tokens as the engine tokenizes the next
        # prompt (no SentencePiece space prefix, as a standalone "hello" gets).
        reply = tok.generated_tokens(prompt, "hello there")
        joined = tok.tokenize_prompt(prompt.text + "hello there").tokens
        assert tuple(joined) == tuple(prompt.tokens) + reply
