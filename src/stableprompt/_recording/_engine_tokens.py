"""The engine's own token view of a request: llama-server's template and tokenizer, asked.

:class:`EngineTokenizer` turns a request body (Anthropic, OpenAI Responses or Chat) into the
exact token ids llama.cpp's ``llama-server`` prefills for it: the body is converted as the
server converts it (:func:`~stableprompt._wire.llama_cpp_requests.to_chat_completions`),
rendered with ``POST /apply-template`` (the server's ``oaicompat_chat_params_parse`` and chat
template; no KV cache touched) and tokenized with ``POST /tokenize`` with ``add_special`` and
``parse_special`` on, the flags the server uses for a prompt (``handle_count_tokens``,
``tokenize_mixed``; llama.cpp 0c1e570 via llama-cpp-python 0.3.36, ``tools/server/``).

**Asking only for what is new.** Repeats cost nothing: the prompt text is memoized by a
digest of the chat body, the tokens by a digest of the text (LRUs of ``max_entries``). A new
prompt that shares a prefix with a recent one is tokenized incrementally: the engine
tokenizes only the text from the last *cut* inside the shared prefix. A cut is an occurrence
of a control token (``<|im_start|>``, ``<|im_end|>``, ...). This is exact because of how
llama.cpp tokenizes (``src/llama-vocab.cpp``): ``tokenizer_st_partition`` first splits the
text at special-token occurrences (longest first, leftmost, non-overlapping), then each raw
fragment is tokenized on its own, and the only state carried across fragments is SPM's
space prefix, which is added after *any* special fragment (``is_prev_special``). So the ids
before a claimed special occurrence depend only on the text before it, and the ids from it
on depend only on the text from it (tokenizing the tail *starting with the special's text*
also reproduces its ``rstrip`` attribute and the SPM space prefix of the next fragment). A
cut is used only when it is safe:

- the token is verified a control token (its text tokenizes to itself with
  ``parse_special`` and differently without), its text starts and ends with a non-space
  character (no ``lstrip``/``rstrip`` run can reach into it) and cannot overlap itself;
- the text holds exactly as many occurrences of it as the token list holds the token (so the
  k-th token is the k-th occurrence);
- the cut ends at least :data:`MARGIN_BYTES` before the end of the shared prefix (so a special
  token crossing it would have to be longer than that: none of llama.cpp's vocabularies has
  one), and the tail's first token is the cut token again.

Otherwise the whole text is tokenized. ``EngineTokenizer(..., incremental=False)`` always
tokenizes the whole text (the reference the tests compare against).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from .._canonical import loads, wire_json
from .._exceptions import InputError, ProviderError
from .._wire.llama_cpp_requests import to_chat_completions
from ._errors import http_status_error, map_transport_error

__all__ = ["MARGIN_BYTES", "EnginePrompt", "EngineTokenizer"]

MARGIN_BYTES = 256
"""An incremental cut ends at least this many bytes before the end of the shared prefix."""
_BASES = 8
"""How many of the most recent prompts are tried as the base of an incremental tokenization."""
_SEPARATOR = -1
"""A token id placed between strings in one mixed ``/tokenize`` call (returned as it is)."""


@dataclass(frozen=True, slots=True)
class EnginePrompt:
    """A prompt as the engine sees it.

    Attributes:
        text: The prompt text ``/apply-template`` rendered (the chat template's output).
        tokens: Its token ids as ``/tokenize`` gives them with ``add_special`` and
            ``parse_special`` (BOS first when the model adds one): what the server prefills.
    """

    text: str
    tokens: tuple[int, ...]


@dataclass(slots=True)
class _Entry:
    """A tokenized prompt: its text bytes, tokens and, once a later prompt needed them, its
    safe cuts ``(token index, byte start, byte end)`` in text order."""

    prompt: EnginePrompt
    data: bytes
    cuts: tuple[tuple[int, int, int], ...] | None = None


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _common_prefix(a: bytes, b: bytes) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (bytes), by bisection on
    slice equality (memcmp)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _cut_shape(piece: bytes) -> bool:
    """A token text that may be a cut: valid UTF-8, at least two bytes, no space at either
    end, no proper prefix equal to a suffix (occurrences cannot overlap), and a character
    that is neither a letter, a digit nor a space (every chat-markup token has one: ``<``,
    ``|``, ``[``; this only spares verifying plain words)."""
    if len(piece) < 2:
        return False
    try:
        text = piece.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if text[0].isspace() or text[-1].isspace() or all(c.isalnum() or c.isspace() for c in text):
        return False
    return not any(piece[:k] == piece[-k:] for k in range(1, len(piece)))


class EngineTokenizer:
    """Token ids of requests as a running ``llama-server`` renders and tokenizes them.

    Args:
        base_url: The server, e.g. ``"http://127.0.0.1:8080"`` (no path).
        client: An ``httpx.Client`` to send with (kept open by :meth:`close`); a new one by
            default.
        timeout_s: Timeout of each request to the server, in seconds.
        max_entries: Size of each memo (chat body -> text, text -> tokens), least recently
            used out first.
        incremental: Tokenize only the tail after the last safe cut shared with a recent
            prompt (module docstring); ``False`` always tokenizes the whole text.

    Thread-safe: the memos are guarded by a lock, requests run outside it (two threads asking
    for the same new prompt at once may both ask the server; both get the same answer).

    Errors: :class:`~stableprompt.ProviderTimeoutError`,
    :class:`~stableprompt.ProviderConnectionError`, :class:`~stableprompt.ProviderHTTPError`
    (the server's 4xx/5xx answer, its message in ``body``) and :class:`ProviderError` with
    code ``provider-invalid-json`` (an answer that is not the endpoint's JSON); the caller's
    body errors are :class:`~stableprompt.EngineRequestError` before any request is sent.
    """

    def __init__(self, base_url: str, *, client: httpx.Client | None = None,
                 timeout_s: float = 10.0, max_entries: int = 1024,
                 incremental: bool = True) -> None:
        if max_entries < 1:
            raise InputError(f"max_entries must be at least 1, got {max_entries}",
                             code="engine-tokenizer-config")
        self._base = base_url.rstrip("/")
        self._own_client = client is None
        self._client = client if client is not None else httpx.Client()
        self._timeout_s = timeout_s
        self._max_entries = max_entries
        self._incremental = incremental
        self._lock = threading.Lock()
        self._texts: OrderedDict[bytes, str] = OrderedDict()
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self._pieces: dict[int, bytes] = {}
        self._control: dict[int, bool] = {}
        self._suffix: tuple[int, ...] | None = None
        self._calls: dict[str, int] = {}
        self._stats = {"full": 0, "incremental": 0, "reused_tokens": 0}

    # --- public API ------------------------------------------------------------------------

    @property
    def calls(self) -> Mapping[str, int]:
        """How many requests were sent to each endpoint path so far (a copy)."""
        with self._lock:
            return dict(self._calls)

    @property
    def stats(self) -> Mapping[str, int]:
        """Prompt tokenizations so far (a copy): ``full`` (whole text asked),
        ``incremental`` (only a tail asked) and ``reused_tokens`` (ids taken from a recent
        prompt instead of asked for; memo hits are not counted)."""
        with self._lock:
            return dict(self._stats)

    def close(self) -> None:
        """Close the HTTP client if this tokenizer created it."""
        if self._own_client:
            self._client.close()

    def __enter__(self) -> EngineTokenizer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def prompt_text(self, wire_format: str, body: Mapping[str, Any]) -> str:
        """The prompt text the server renders for ``body`` (``/apply-template`` of
        :func:`~stableprompt._wire.llama_cpp_requests.to_chat_completions`), memoized by
        a digest of the converted body.

        Raises:
            EngineRequestError: the server would reject the body while converting it.
            CanonicalizationError: a body value with no JSON form.
            ProviderError: as the class docstring.
        """
        chat = to_chat_completions(wire_format, body)
        payload = wire_json(chat)
        key = _digest(payload)
        with self._lock:
            text = self._texts.get(key)
            if text is not None:
                self._texts.move_to_end(key)
                return text
        answer = self._post("/apply-template", payload)
        text = answer.get("prompt") if isinstance(answer, dict) else None
        if not isinstance(text, str):
            raise self._invalid("/apply-template", "no string 'prompt'")
        with self._lock:
            self._remember(self._texts, key, text)
        return text

    def prompt_tokens(self, wire_format: str, body: Mapping[str, Any]) -> EnginePrompt:
        """The prompt text and token ids the server prefills for ``body`` (tokens).

        Args:
            wire_format: ``"anthropic"``, ``"openai-responses"`` or ``"openai-chat"``.
            body: The request body as decoded JSON.

        Raises:
            EngineRequestError, CanonicalizationError, ProviderError: as :meth:`prompt_text`.
        """
        return self.tokenize_prompt(self.prompt_text(wire_format, body))

    def tokenize_prompt(self, text: str) -> EnginePrompt:
        """``text`` tokenized as a prompt (``add_special`` and ``parse_special`` on), memoized
        by a digest of the text and incremental against recent prompts (module docstring).

        Raises:
            ProviderError: as the class docstring.
        """
        data = text.encode("utf-8")
        key = _digest(data)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry.prompt
            base = self._base_for(data) if self._incremental else None
        cut = self._cut_for(*base) if base is not None else None
        tokens = self._incremental_tokens(data, base[0], cut) if base and cut else None
        if tokens is None:
            tokens = self._tokenize(text, add_special=True, parse_special=True)
            with self._lock:
                self._stats["full"] += 1
        else:
            with self._lock:
                self._stats["incremental"] += 1
                self._stats["reused_tokens"] += cut[0] if cut is not None else 0
        entry = _Entry(EnginePrompt(text, tokens), data)
        with self._lock:
            self._remember(self._entries, key, entry)
        return entry.prompt

    def generated_tokens(self, prompt: EnginePrompt, text: str) -> tuple[int, ...]:
        """Token ids of a model's reply text as they follow ``prompt`` in the engine's slot:
        the tokens of ``prompt.text + text`` (tokenized as a prompt, incrementally: only the
        reply is new) after the prompt's own. In context, not standalone: SentencePiece puts
        a space prefix on a text tokenized alone, which the generated ids never have. When the
        joined text does not start with the prompt's tokens (a merge across the boundary),
        the reply is tokenized alone (``add_special`` and ``parse_special`` off).

        The engine's sampled ids equal these when the model emits the canonical tokenization
        of its text (real models nearly always; a random-weight model not always).

        Raises:
            ProviderError: as the class docstring.
        """
        joined = self.tokenize_prompt(prompt.text + text).tokens
        size = len(prompt.tokens)
        if tuple(joined[:size]) == tuple(prompt.tokens):
            return tuple(joined[size:])
        return self.text_tokens(text)

    def text_tokens(self, text: str) -> tuple[int, ...]:
        """Token ids of ``text`` alone: ``/tokenize`` with ``add_special`` and
        ``parse_special`` off (no BOS; a special token's text stays text).

        Raises:
            ProviderError: as the class docstring.
        """
        return self._tokenize(text, add_special=False, parse_special=False)

    def pieces(self, tokens: Sequence[int]) -> tuple[bytes, ...]:
        """Each token's text as the engine writes it (``common_token_to_piece`` with
        specials shown; bytes, since a token may hold part of a UTF-8 character). Pieces of
        tokens this tokenizer produced are known already; any other id is asked for with one
        ``/detokenize`` each (which returns text: a partial UTF-8 piece comes back as
        U+FFFD there).

        ``b"".join(tok.pieces(prompt.tokens[i - 8:i + 8]))`` is the text around token ``i``
        as the engine tokenized it.

        Raises:
            ProviderError: as the class docstring.
        """
        with self._lock:
            missing = sorted({t for t in tokens if t not in self._pieces})
        for token in missing:
            piece = self.detokenize([token]).encode("utf-8")
            with self._lock:
                self._pieces.setdefault(token, piece)
        with self._lock:
            return tuple(self._pieces[t] for t in tokens)

    def detokenize(self, tokens: Sequence[int]) -> str:
        """``POST /detokenize``: the pieces of ``tokens`` joined (the server's
        ``tokens_to_str``).

        Raises:
            ProviderError: as the class docstring.
        """
        answer = self._post("/detokenize", wire_json({"tokens": list(tokens)}))
        content = answer.get("content") if isinstance(answer, dict) else None
        if not isinstance(content, str):
            raise self._invalid("/detokenize", "no string 'content'")
        return content

    # --- HTTP ------------------------------------------------------------------------------

    def _post(self, path: str, payload: bytes) -> Any:
        """POST ``payload`` (JSON bytes) to ``path``; the decoded JSON answer."""
        url = self._base + path
        with self._lock:
            self._calls[path] = self._calls.get(path, 0) + 1
        try:
            response = self._client.post(url, content=payload, timeout=self._timeout_s,
                                         headers={"content-type": "application/json"})
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
            raise map_transport_error(exc) from exc
        if response.status_code >= 300:
            raise http_status_error(response.status_code, response.content, url=url)
        try:
            return loads(response.content)
        except ValueError as exc:
            raise self._invalid(path, "not JSON") from exc

    @staticmethod
    def _invalid(path: str, what: str) -> ProviderError:
        return ProviderError(f"llama-server {path} answered {what}",
                             code="provider-invalid-json")

    def _tokenize_raw(self, content: str | list[str | int], *, add_special: bool,
                      parse_special: bool, with_pieces: bool) -> list[Any]:
        """``POST /tokenize``; its ``tokens`` list (ids, or ``{"id", "piece"}`` objects)."""
        answer = self._post("/tokenize", wire_json({
            "content": content, "add_special": add_special, "parse_special": parse_special,
            "with_pieces": with_pieces}))
        raw = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(raw, list):
            raise self._invalid("/tokenize", "no 'tokens' list")
        return raw

    def _tokenize(self, text: str, *, add_special: bool,
                  parse_special: bool) -> tuple[int, ...]:
        """Token ids of ``text``; their pieces are learnt on the way (``with_pieces``)."""
        ids: list[int] = []
        learnt: list[tuple[int, bytes]] = []
        for item in self._tokenize_raw(text, add_special=add_special,
                                       parse_special=parse_special, with_pieces=True):
            token = item.get("id") if isinstance(item, dict) else None
            piece = item.get("piece") if isinstance(item, dict) else None
            if not isinstance(token, int) or isinstance(token, bool):
                raise self._invalid("/tokenize", "a token without an integer 'id'")
            if isinstance(piece, str):
                learnt.append((token, piece.encode("utf-8")))
            elif isinstance(piece, list) and all(
                    type(b) is int and 0 <= b < 256 for b in piece):
                learnt.append((token, bytes(piece)))  # not valid UTF-8: the byte values
            else:
                raise self._invalid("/tokenize", "a piece that is neither text nor bytes")
            ids.append(token)
        with self._lock:
            for token, piece in learnt:
                self._pieces.setdefault(token, piece)
        return tuple(ids)

    # --- memo and incremental tokenization ------------------------------------------------

    def _remember(self, memo: OrderedDict[bytes, Any], key: bytes, value: Any) -> None:
        """Insert under the lock, evicting the least recently used beyond ``max_entries``."""
        memo[key] = value
        memo.move_to_end(key)
        while len(memo) > self._max_entries:
            memo.popitem(last=False)

    def _base_for(self, data: bytes) -> tuple[_Entry, int] | None:
        """Under the lock: the recent prompt sharing the longest prefix with ``data`` (bytes),
        when that prefix is long enough to hold a cut."""
        best: tuple[_Entry, int] | None = None
        for entry in list(reversed(self._entries.values()))[:_BASES]:
            shared = _common_prefix(entry.data, data)
            if shared > MARGIN_BYTES and (best is None or shared > best[1]):
                best = (entry, shared)
        return best

    def _cut_for(self, base: _Entry, shared: int) -> tuple[int, int, int] | None:
        """``base``'s last cut ending :data:`MARGIN_BYTES` before ``shared`` bytes (its cuts
        found on first need)."""
        cuts = base.cuts
        if cuts is None:
            cuts = self._cuts(base.data, base.prompt.tokens)
            with self._lock:
                base.cuts = cuts
        usable = [cut for cut in cuts if cut[2] + MARGIN_BYTES <= shared]
        return usable[-1] if usable else None

    def _incremental_tokens(self, data: bytes, base: _Entry,
                            cut: tuple[int, int, int]) -> tuple[int, ...] | None:
        """The tokens of ``data``: ``base``'s up to the cut token, then the engine's
        tokens of its text from the cut on (no BOS), then the closing specials (EOS when
        the model adds one); ``None`` when the tail does not start with the cut token."""
        index, start, _ = cut
        suffix = self._special_suffix()
        tail = self._tokenize(data[start:].decode("utf-8"), add_special=False,
                              parse_special=True)
        if not tail or tail[0] != base.prompt.tokens[index]:
            return None
        return base.prompt.tokens[:index] + tail + suffix

    def _special_suffix(self) -> tuple[int, ...]:
        """The ids ``add_special`` appends after the text (EOS for models with
        ``add_eos``), found once by tokenizing a probe with and without it."""
        with self._lock:
            if self._suffix is not None:
                return self._suffix
        probe = "x"
        plain = self._tokenize(probe, add_special=False, parse_special=False)
        full = self._tokenize(probe, add_special=True, parse_special=False)
        suffix: tuple[int, ...] = ()
        for offset in range(len(full) - len(plain) + 1):
            if full[offset:offset + len(plain)] == plain:
                suffix = full[offset + len(plain):]
                break
        with self._lock:
            self._suffix = suffix
        return suffix

    def _cuts(self, data: bytes, tokens: tuple[int, ...]) -> tuple[tuple[int, int, int], ...]:
        """The safe cuts of a tokenized prompt (module docstring), in text order. Only
        tokens whose text occurs in ``data`` exactly as often as they occur in ``tokens``
        are candidates; those not yet known are verified (once per tokenizer)."""
        positions: dict[int, list[int]] = {}
        for i, t in enumerate(tokens):
            positions.setdefault(t, []).append(i)
        with self._lock:
            shaped = {t: self._pieces[t] for t in positions
                      if t in self._pieces and _cut_shape(self._pieces[t])}
        counted = {t: piece for t, piece in shaped.items()
                   if data.count(piece) == len(positions[t])}
        with self._lock:
            unknown = [t for t in counted if t not in self._control]
        if unknown:
            self._verify_control(unknown, counted)
        cuts: list[tuple[int, int, int]] = []
        for token, piece in counted.items():
            with self._lock:
                if not self._control.get(token):
                    continue
            at = -len(piece)
            for i in positions[token]:
                at = data.find(piece, at + len(piece))
                cuts.append((i, at, at + len(piece)))
        return tuple(sorted(cuts))

    def _verify_control(self, ids: list[int], pieces: Mapping[int, bytes]) -> None:
        """Record which ``ids`` are control tokens: each piece tokenizes to exactly its id
        with ``parse_special`` and to something else without (two mixed ``/tokenize`` calls
        without pieces, the strings separated by the id :data:`_SEPARATOR`)."""
        content: list[str | int] = []
        for token in ids:
            if content:
                content.append(_SEPARATOR)
            content.append(pieces[token].decode("utf-8"))
        groups = []
        for parse_special in (True, False):
            raw = self._tokenize_raw(content, add_special=False, parse_special=parse_special,
                                     with_pieces=False)
            if not all(type(t) is int for t in raw):
                raise self._invalid("/tokenize", "a token id that is not an integer")
            groups.append(self._split(raw, len(ids)))
        with self._lock:
            for token, on, off in zip(ids, *groups, strict=True):
                self._control[token] = on == [token] and off != [token]

    @staticmethod
    def _split(raw: list[int], count: int) -> list[list[int]]:
        """Split a mixed ``/tokenize`` answer at the separators into ``count`` groups."""
        parts: list[list[int]] = [[]]
        for token in raw:
            if token == _SEPARATOR:
                parts.append([])
            else:
                parts[-1].append(token)
        if len(parts) != count:
            raise ProviderError("llama-server /tokenize did not keep the separators of a "
                                "mixed content list", code="provider-invalid-json")
        return parts
