"""The backend seam for prediction: a self-hosted engine's own token view of each request.

Closed providers are estimated (``_attribution``: documented cache order, our tokenizer,
prefix counts anchored on reported prompt sizes). An engine that exposes its chat template and
tokenizer (llama.cpp's ``llama-server``: ``POST /apply-template`` then ``POST /tokenize``) can
be *asked*: its token ids of the prompt, in the template's cache order, make the prediction
exact. What the engine keeps is modelled here, as data the pure attribution reads:

- :class:`EngineTokens`: the protocol an engine client implements (the llama-server one is
  :class:`~stableprompt._recording._engine_tokens.EngineTokenizer`).
- :class:`SlotMemory`: what the engine's slots hold after each call: the prompt's tokens plus
  the tokens it generated ("Cached tokens = the common token prefix with the slot's previous
  prompt, one-token granularity ... It also keeps the tokens it generated",
  ``reference/ENGINES.md``). On a single-slot server (``-np 1 --cache-ram 0``) the slot's
  previous request, of any lineage, is the predecessor; with several slots the slot sharing
  the longest prefix is taken (llama-server picks by prompt similarity, else the least recently
  used slot: an approximation there).
- :class:`EngineEvidence`: the exact numbers one call's attribution uses (prompt size, LCP with
  the slot, LCP with the compared request, the first divergent token and the text around it;
  when only the compared request's volatile tail changed, the same against that request
  without its tail, :func:`untailed_body`, which tells the tail's loss from a template's).

Token sequences are stored as ``array("I")`` (4 bytes per token): a 16k-token prompt holds
64 KB, not the ~0.5 MB of a tuple of Python ints.
"""

from __future__ import annotations

import dataclasses
import threading
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._diff import diff, is_expected_divergence
from .._exceptions import ConfigurationError
from .._redact import redact
from .._wire._segmenter import SegmentedRequest
from ._call import RequestState

__all__ = [
    "DIVERGENCE_CONTEXT_TOKENS",
    "EngineEvidence",
    "EnginePromptView",
    "EngineTokens",
    "SlotMemory",
    "as_tokens",
    "common_prefix",
    "divergence_detail",
    "engine_of",
    "observe_engine",
    "untailed_body",
]

DIVERGENCE_CONTEXT_TOKENS = 12
"""Tokens of text shown on each side of a first divergent token."""


class EnginePromptView(Protocol):
    """A prompt as the engine renders and tokenizes it."""

    @property
    def text(self) -> str:
        """The prompt text after the engine's chat template."""
        ...

    @property
    def tokens(self) -> Sequence[int]:
        """Its token ids, as the engine tokenizes a prompt (BOS included)."""
        ...


class EngineTokens(Protocol):
    """What the recorder asks a self-hosted engine (all calls may raise
    :class:`~stableprompt.ProviderError`; the recorder then falls back to estimates)."""

    def prompt_tokens(self, wire_format: str, body: Mapping[str, Any]) -> EnginePromptView:
        """The prompt of a request body (``wire_format`` as recorded) in engine tokens."""
        ...

    def generated_tokens(self, prompt: Any, text: str) -> tuple[int, ...]:
        """Token ids of a reply text as they follow ``prompt`` (a view this engine returned)
        in its slot."""
        ...

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The text of ``tokens`` as the engine renders them."""
        ...


def as_tokens(tokens: Sequence[int]) -> array[int]:
    """``tokens`` as a compact ``array("I")``."""
    return tokens if isinstance(tokens, array) and tokens.typecode == "I" else array("I", tokens)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences (tokens).

    Compares the arrays' bytes in halving chunks (C-speed slice comparisons), so a 16k-token
    prompt costs a few dozen comparisons rather than a Python loop over every token.
    """
    left, right = as_tokens(a), as_tokens(b)
    n = min(len(left), len(right))
    lo, hi = 0, n  # invariant: left[:lo] == right[:lo]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if left[lo:mid] == right[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True, slots=True)
class EngineEvidence:
    """The engine's exact numbers for one call (all counts in engine tokens).

    Attributes:
        prompt_tokens: Tokens of this request's prompt (BOS and template markup included).
        slot_lcp_tokens: Longest common prefix with what the engine's slot holds (the previous
            request's prompt plus its generated tokens): what the engine can reuse.
        slot_record_id: ``record_id`` of the call that filled that slot (``None``: empty).
        base_tokens: Prompt tokens of the compared request (lineage or session predecessor),
            ``None`` when it has no engine view.
        base_lcp_tokens: Longest common prefix with the compared request's prompt plus its
            generated tokens, ``None`` with ``base_tokens``.
        divergence: Where this prompt first differs from the compared request's, as the engine
            tokenized both (:func:`divergence_detail`), when it lost tokens of that prompt.
        replayed_reply_tokens: How far the slot LCP reaches past the slot's prompt into the
            reply it generated (a harness replaying the model's reply verbatim), else 0. Those
            tokens are predicted from the canonical tokenization of the reply's text; the engine
            holds its sampled ids, which a model may spell differently.
        untailed_tokens: When this request changed only the compared request's volatile tail
            (its last message, ``stableprompt lint``'s expected divergence): prompt tokens of
            the compared request without that tail (:func:`untailed_body`); else ``None``.
        untailed_lcp_tokens: Longest common prefix of this prompt with that one, ``None``
            with ``untailed_tokens``. Below ``untailed_tokens``, the template re-rendered
            what came before the tail.
        untailed_divergence: The first divergent token against that prompt, when it is not
            a prefix of this one.
    """

    prompt_tokens: int
    slot_lcp_tokens: int
    slot_record_id: str | None
    base_tokens: int | None = None
    base_lcp_tokens: int | None = None
    divergence: dict[str, Any] | None = None
    replayed_reply_tokens: int = 0
    untailed_tokens: int | None = None
    untailed_lcp_tokens: int | None = None
    untailed_divergence: dict[str, Any] | None = None


class SlotMemory:
    """What the engine's slots hold: per slot, the last prompt's tokens plus its generated
    tokens, and the call that put them there. Thread-safe.

    Args:
        slots: Number of server slots (``llama-server -np``).
    """

    @classmethod
    def of(cls, slots: int | SlotMemory) -> SlotMemory:
        """``slots`` itself, or a new memory of that many slots (``Recorder(engine_slots=)``).

        Raises:
            ConfigurationError: not an int >= 1 (``llama-server -np``) nor a SlotMemory (code
                ``engine-slots``).
        """
        if isinstance(slots, SlotMemory):
            return slots
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ConfigurationError(
                f"engine_slots must be an int >= 1 (llama-server -np) or a SlotMemory, got "
                f"{slots!r}", code="engine-slots")
        return cls(slots)

    def __init__(self, slots: int = 1) -> None:
        if slots < 1:
            raise ValueError(f"slots must be >= 1, got {slots}")
        self.slots = slots
        self._held: list[tuple[str, array[int], int]] = []  # most recently used last
        self._lock = threading.Lock()

    def best(self, tokens: Sequence[int]) -> tuple[int, str | None, int]:
        """``(lcp tokens, record_id, prompt tokens)`` of the slot sharing the longest prefix
        with ``tokens`` (``(0, None, 0)`` when every slot is empty); ``prompt tokens`` is the
        prompt's part of what that slot holds (the rest is the reply it generated)."""
        with self._lock:
            held = list(self._held)
        best: tuple[int, str | None, int] = (0, None, 0)
        for record_id, content, prompt in reversed(held):
            lcp = common_prefix(content, tokens)
            if lcp > best[0] or best[1] is None:
                best = (lcp, record_id, prompt)
        return best

    def remember(self, record_id: str, content: Sequence[int], replaced: str | None,
                 prompt_tokens: int | None = None) -> None:
        """A call finished: its slot (the one holding ``replaced``, else the least recently
        used) now holds ``content``: ``prompt_tokens`` of prompt (default: all), then the
        generated tokens."""
        held = as_tokens(content)
        entry = (record_id, held, len(held) if prompt_tokens is None else prompt_tokens)
        with self._lock:
            index = next((i for i, (rid, *_) in enumerate(self._held) if rid == replaced),
                         None)
            if index is not None:
                del self._held[index]
            elif len(self._held) >= self.slots:
                del self._held[0]
            self._held.append(entry)


def divergence_detail(engine: EngineTokens, previous: Sequence[int], sent: Sequence[int],
                      index: int) -> dict[str, Any]:
    """The first divergent token and the text around it, as the engine tokenized both prompts:
    ``{"token_index", "before", "previous", "sent"}`` (``before``: the
    :data:`DIVERGENCE_CONTEXT_TOKENS` tokens shared just before it; ``previous`` / ``sent``:
    what followed in the compared prompt and in this one).

    Raises:
        ProviderError: The engine could not detokenize.
    """
    lo = max(index - DIVERGENCE_CONTEXT_TOKENS, 0)
    hi = index + DIVERGENCE_CONTEXT_TOKENS
    return {
        "token_index": index,
        "before": engine.detokenize(list(sent[lo:index])),
        "previous": engine.detokenize(list(previous[index:hi])),
        "sent": engine.detokenize(list(sent[index:hi])),
    }


def untailed_body(segmented: SegmentedRequest, index: int) -> dict[str, Any] | None:
    """The request body of ``segmented`` without its volatile tail, which starts at segment
    ``index`` of its last message: the message's blocks from that one on, or the whole
    message when the tail starts it (stableprompt's OpenAI tail message; a last message the
    next turn replaced). The input is not modified.

    Returns:
        The shortened body, or ``None`` when segment ``index`` is not in the body's last
        ``messages`` / ``input`` item.
    """
    if not 0 <= index < len(segmented.segments):
        return None
    parts = segmented.segments[index].path.split("/")[1:]
    body = segmented.body
    if len(parts) < 2 or not parts[1].isdigit():
        return None
    key, position = parts[0], int(parts[1])
    items = body.get(key)
    if not isinstance(items, list) or position != len(items) - 1:
        return None
    out = dict(body)
    if len(parts) >= 4 and parts[2] == "content" and parts[3].isdigit() and int(parts[3]) > 0:
        message = items[position]
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            return None
        out[key] = [*items[:position], {**message, "content": content[:int(parts[3])]}]
    else:
        out[key] = items[:position]
    return out


def observe_engine(engine: EngineTokens, slots: SlotMemory, wire_format: str,
                   request: RequestState, base: RequestState | None, reply: str | None,
                   detail: dict[str, Any],
                   output_tokens: int | None = None) -> tuple[EngineEvidence, array[int]]:
    """The engine's view of one call: the evidence attribution reads, and what the slot holds
    after it (the prompt's tokens, then the reply's when there is one).

    Args:
        engine: The engine's token client.
        slots: What the engine's slots hold before this call.
        wire_format: The request's format, as recorded.
        request: The request (its ``segmented`` body is rendered and tokenized).
        base: The request it is compared with (lineage or session predecessor), if any.
        reply: The text the engine generated, ``None`` for a failed call.
        detail: ``verdict_detail`` being built: ``engine_untailed_error`` is added when the
            engine cannot render the compared request without its tail.
        output_tokens: Tokens the engine generated (the usage's output count), when
            reported: the slot keeps ``output_tokens - 1`` of the reply's tokens (the last
            sampled token is never evaluated; measured on llama-server: a verbatim replay of a
            3-token reply read 2 of them).

    Raises:
        ProviderError: The engine could not render, tokenize or detokenize.
        ValueError: ``request`` has no segmented body.
    """
    if request.segmented is None:
        raise ValueError("the request was not segmented")
    view = engine.prompt_tokens(wire_format, request.segmented.body)
    tokens = as_tokens(view.tokens)
    slot_lcp, slot_id, slot_prompt = slots.best(tokens)
    replayed = max(slot_lcp - slot_prompt, 0) if slot_id is not None else 0
    evidence = EngineEvidence(len(tokens), slot_lcp, slot_id, replayed_reply_tokens=replayed)
    if base is not None and base.engine_tokens is not None:
        size = base.engine_prompt_tokens or 0
        lcp = common_prefix(base.engine_tokens, tokens)
        evidence = dataclasses.replace(
            evidence, base_tokens=size, base_lcp_tokens=lcp,
            divergence=divergence_detail(engine, base.engine_tokens, tokens, lcp)
            if lcp < size else None)
        if lcp < size:
            evidence = _untailed(engine, wire_format, request, base, tokens, evidence, detail)
    if not reply:
        return evidence, tokens
    generated = as_tokens(engine.generated_tokens(view, reply))
    if output_tokens is not None:
        generated = generated[: max(output_tokens - 1, 0)]
    return evidence, tokens + generated


def _untailed(engine: EngineTokens, wire_format: str, request: RequestState,
              base: RequestState, tokens: array[int], evidence: EngineEvidence,
              detail: dict[str, Any]) -> EngineEvidence:
    """When ``request`` changed only ``base``'s volatile tail, add the engine's view of
    ``base`` without it (:class:`EngineEvidence` ``untailed_*``)."""
    if base.segmented is None or request.segmented is None:
        return evidence
    div = diff(base.segmented, request.segmented)
    if div is None or not is_expected_divergence(base.segmented, request.segmented, div):
        return evidence
    body = untailed_body(base.segmented, div.segment_index)
    if body is None:
        return evidence
    try:
        cut = as_tokens(engine.prompt_tokens(wire_format, body).tokens)
        lcp = common_prefix(cut, tokens)
        return dataclasses.replace(
            evidence, untailed_tokens=len(cut), untailed_lcp_tokens=lcp,
            untailed_divergence=divergence_detail(engine, cut, tokens, lcp)
            if lcp < len(cut) else None)
    except Exception as exc:
        detail["engine_untailed_error"] = redact(f"{type(exc).__name__}: {exc}")
        return evidence


def engine_of(engine: EngineTokens | str | None) -> EngineTokens | None:
    """The engine client for ``Recorder(engine=...)``: a base URL becomes llama-server's token
    client (``_engine_tokens.EngineTokenizer``, loaded only then); a client is checked.

    Raises:
        ConfigurationError: not an ``http(s)://host...`` URL nor an engine client (code
            ``engine-url``).
    """
    if engine is None:
        return None
    if isinstance(engine, str):
        scheme, _, rest = engine.partition("://")
        if scheme not in ("http", "https") or not rest.strip("/"):
            raise ConfigurationError(
                f"engine must be the engine's base URL (http://host:port), got "
                f"{redact(engine)!r}", code="engine-url")
        from ._engine_tokens import EngineTokenizer

        return EngineTokenizer(engine)
    if not all(callable(getattr(engine, name, None))
               for name in ("prompt_tokens", "generated_tokens", "detokenize")):
        raise ConfigurationError(
            f"engine must be a base URL or an engine client (prompt_tokens, generated_tokens, "
            f"detokenize), got {type(engine).__name__}", code="engine-url")
    return engine
