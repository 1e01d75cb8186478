"""CachePolicy: the user's caching choice (TTL per breakpoint place and request kind,
keep-alive), a value the builder, the proxy and the what-if replay all read.

Provider facts (which TTLs exist, what a write at each costs) are :class:`~stableprompt.CacheRules`
in ``_policy``; a :class:`CachePolicy` only chooses among them:

- **places**: ``head`` (the breakpoint at the end of the tools and system prompt) and
  ``history`` (the breakpoint at the end of the stable history). ``None`` means the provider's
  default TTL (Anthropic ``"5m"``; OpenAI GPT-5.6+ ``"30m"``).
- **request kinds**: ``"main"`` (the agent the user talks to), ``"subagent"`` (a conversation
  forked from another session's prefix) and ``"one-shot"`` (a single-call session such as a
  summarizer); :meth:`CachePolicy.for_kind` resolves a kind's TTLs.
- **keep-alive** (:class:`KeepAlive`): while a conversation is idle, a request that reads the
  cached prefix every ``interval_s`` seconds refreshes its TTL (a cache read restarts the TTL
  clock: Anthropic "refreshed for no additional cost each time the cached content is used";
  OpenAI GPT-5.6+ ">= 30 min after the latest write or reuse";
  ``CacheRules.ttl_refreshed_on_read``), at most ``max_pings`` times per idle gap.

TTL order: Anthropic requires "cache entries with longer TTL must appear before shorter TTLs"
(platform.claude.com/docs/en/build-with-claude/prompt-caching, "Mixing different TTLs"); the
head comes before the history, so a head TTL shorter than the history's is a
:class:`~stableprompt.PolicyError` (code ``cache-policy-ttl-order``) when the policy is made.

A policy is JSON (``stableprompt proxy --cache-policy FILE``): :meth:`CachePolicy.from_file`.
"""

from __future__ import annotations

import codecs
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .._exceptions import PolicyError
from .._policy import TTL_LABELS_S
from .._public import public

if TYPE_CHECKING:
    from .._accounting._what_if import WhatIf

__all__ = ["MAX_PRIOR_GAPS", "REQUEST_KINDS", "CachePolicy", "KeepAlive", "RequestKind",
           "TtlChoice", "gap_quantiles", "refuse_explicit_cache"]

RequestKind = Literal["main", "subagent", "one-shot"]
REQUEST_KINDS: tuple[RequestKind, ...] = ("main", "subagent", "one-shot")
"""The request kinds a policy may treat apart (module docstring)."""


def _check_label(label: str | None, where: str) -> None:
    if label is not None and label not in TTL_LABELS_S:
        raise ValueError(f"{where}: TTL {label!r} is not one of {sorted(TTL_LABELS_S)}")


def _check_order(head: str | None, history: str | None) -> None:
    """Known labels, the head's TTL not shorter than the history's (ValueError)."""
    _check_label(head, "head")
    _check_label(history, "history")
    if (head is not None and history is not None
            and TTL_LABELS_S[head] < TTL_LABELS_S[history]):
        raise ValueError(f"head TTL {head!r} is shorter than history TTL {history!r}: longer "
                         "TTLs must come first (Anthropic prompt-caching docs, 'Mixing "
                         "different TTLs')")


def ttl_seconds(label: str | None, default_s: int | None) -> int | None:
    """Seconds of a TTL ``label``; ``default_s`` (the provider's default) for ``None``."""
    return default_s if label is None else TTL_LABELS_S[label]


def policy_error(exc: ValidationError, prefix: str = "") -> PolicyError:
    """A :class:`~stableprompt.PolicyError` for a policy value that failed validation: its
    first problem and where (JSON pointer); code ``cache-policy-ttl-order`` for a longer TTL
    after a shorter one, else ``cache-policy``."""
    first = exc.errors()[0]
    where = "/" + "/".join(str(p) for p in first["loc"])
    inner = first.get("ctx", {}).get("error")
    if isinstance(inner, PolicyError) and inner.args:  # a nested value's own error
        text = str(inner.args[0])
        head, _, message = text.partition(": ")
        nested = head.removeprefix("invalid cache policy at ")
        if nested != head and message:
            where = where.rstrip("/") + (nested if nested != "/" else "") or "/"
        else:
            message = text
        return PolicyError(f"{prefix}invalid cache policy at {where}: {message}",
                           code=inner.code)
    message = str(first["msg"]).removeprefix("Value error, ")
    code = "cache-policy-ttl-order" if "longer TTLs" in message else "cache-policy"
    return PolicyError(f"{prefix}invalid cache policy at {where}: {message}", code=code)


class _PolicyValue(BaseModel):
    """A frozen policy value whose invalid construction is a ``PolicyError``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise policy_error(exc) from exc


class TtlChoice(_PolicyValue):
    """TTL labels of one request kind's two SDK breakpoints (``None``: provider default).

    Raises:
        pydantic.ValidationError: an unknown label, or a head TTL shorter than the history's
            (longer TTLs must come first).
    """


    head: str | None = None
    history: str | None = None

    @model_validator(mode="after")
    def _order(self) -> TtlChoice:
        _check_order(self.head, self.history)
        return self


class KeepAlive(_PolicyValue):
    """Opt-in keep-alive: refresh an idle conversation's cached prefix.

    Attributes:
        interval_s: Seconds between the last request (or keep-alive) and the next keep-alive;
            must be shorter than the TTL it keeps (e.g. 270 for a 5-minute TTL: 30 s margin).
        max_pings: Hard cap of keep-alive requests per idle gap (the gap between two real
            requests of one conversation); ``0`` disables them.
        min_expected_saving_usd: Send a keep-alive only while the expected saving (from the
            observed gaps) exceeds its price by this much (USD, default 0).
        prior_gaps_s: Idle gaps (seconds) the scheduler's estimate of the next gap starts
            from, before a conversation shows its own (``KeepAliveScheduler``): the gaps of
            the traffic a policy was chosen on (:meth:`CachePolicy.from_ledger`'s candidates
            carry at most :data:`MAX_PRIOR_GAPS` quantiles of it). Empty: the scheduler's
            default prior.
        closes_conversations: The harness ends each conversation on the scheduler when it is
            done (``KeepAliveScheduler.close_conversation``), so no ping follows its last
            request. ``False`` (default): the what-if replays the pings a scheduler sends
            after a conversation's last request until its rule or cap stops them.
    """


    interval_s: float = Field(gt=0, allow_inf_nan=False)
    max_pings: int = Field(ge=0, le=10_000)
    min_expected_saving_usd: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    prior_gaps_s: tuple[float, ...] = Field(default=(), max_length=1000)
    closes_conversations: bool = False

    @model_validator(mode="after")
    def _gaps(self) -> KeepAlive:
        if any(not (math.isfinite(g) and g >= 0) for g in self.prior_gaps_s):
            raise ValueError("prior_gaps_s must be finite gaps in seconds >= 0")
        return self


MAX_PRIOR_GAPS = 64
"""Quantiles of the observed gaps a chosen keep-alive carries (:attr:`KeepAlive.prior_gaps_s`):
enough to keep the distribution's shape, small enough for a policy file."""


def gap_quantiles(gaps: list[float], count: int = MAX_PRIOR_GAPS) -> tuple[float, ...]:
    """``count`` evenly spaced quantiles of ``gaps`` (all of them when there are fewer), in
    seconds rounded to 0.1, ascending."""
    ordered = sorted(gaps)
    if len(ordered) <= count:
        return tuple(round(g, 1) for g in ordered)
    step = (len(ordered) - 1) / (count - 1)
    return tuple(round(ordered[round(i * step)], 1) for i in range(count))


class CachePolicy(_PolicyValue):
    """A caching choice: TTL per breakpoint place and request kind, keep-alive, and (Gemini)
    an explicit cache of the head.

    Attributes:
        name: Short label shown by the what-if (``"5m"``, ``"1h head + 5m history"``).
        head: TTL label of the head breakpoint (``None``: the provider's default).
        history: TTL label of the end-of-history breakpoint (``None``: default).
        by_kind: Overrides per request kind (``{"subagent": TtlChoice(head="1h")}``).
        keep_alive: :class:`KeepAlive` settings, ``None`` for none.
        explicit_cache: Gemini: hold the head in an explicit ``cachedContents`` cache (storage
            billed per token-hour, ``ExplicitCacheRule``) instead of relying on implicit
            caching.

    Raises:
        PolicyError: an unknown TTL label, a head TTL shorter than the history's (code
            ``cache-policy-ttl-order``), a keep-alive interval not shorter than the TTL it
            keeps, or an unknown request kind (code ``cache-policy``).
    """


    name: str = ""
    head: str | None = None
    history: str | None = None
    by_kind: dict[str, TtlChoice] = Field(default_factory=dict)
    keep_alive: KeepAlive | None = None
    explicit_cache: bool = False

    @model_validator(mode="after")
    def _check(self) -> CachePolicy:
        _check_order(self.head, self.history)
        unknown = sorted(set(self.by_kind) - set(REQUEST_KINDS))
        if unknown:
            raise ValueError(f"unknown request kind(s) {unknown}: use {list(REQUEST_KINDS)}")
        if self.keep_alive is not None:
            for kind in REQUEST_KINDS:
                choice = self.for_kind(kind)
                shortest = min((TTL_LABELS_S[t] for t in (choice.head, choice.history)
                                if t is not None), default=None)
                if shortest is not None and self.keep_alive.interval_s >= shortest:
                    raise ValueError(f"keep_alive.interval_s {self.keep_alive.interval_s} is "
                                     f"not shorter than the {kind} TTL ({shortest} s)")
        return self

    def for_kind(self, kind: str = "main") -> TtlChoice:
        """The TTL labels used for requests of ``kind`` (its override, else the policy's own).

        Raises:
            PolicyError: ``kind`` is not one of :data:`REQUEST_KINDS` (code ``cache-policy``).
        """
        if kind not in REQUEST_KINDS:
            raise PolicyError(f"unknown request kind {kind!r}: use {list(REQUEST_KINDS)}",
                              code="cache-policy")
        return self.by_kind.get(kind) or TtlChoice(head=self.head, history=self.history)

    def label(self) -> str:
        """:attr:`name`, else a description built from the choices."""
        if self.name:
            return self.name
        main = self.for_kind("main")
        head, history = main.head or "default", main.history or "default"
        text = head if head == history else f"{head} head + {history} history"
        for kind, choice in self.by_kind.items():
            if kind != "main":
                text += f"; {kind} {choice.head or 'default'}/{choice.history or 'default'}"
        if self.keep_alive is not None:
            text += (f" + keep-alive every {_minutes(self.keep_alive.interval_s)} "
                     f"(max {self.keep_alive.max_pings})")
        if self.explicit_cache:
            text += " + explicit head cache"
        return text

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> CachePolicy:
        """Read a policy from a JSON file (the fields above), UTF-8 encoded; a leading UTF-8
        byte-order mark is accepted (RFC 8259 section 8.1 lets a parser ignore it).

        Raises:
            PolicyError: ``path`` is not a path, the file is unreadable, not UTF-8, not JSON
                or not a valid policy (code ``cache-policy``, or ``cache-policy-ttl-order``
                for a longer TTL after a shorter one), naming the file.
        """
        if not isinstance(path, (str, os.PathLike)):
            raise PolicyError(f"a cache policy file is a path (str or os.PathLike), not "
                              f"{type(path).__name__} {path!r}", code="cache-policy")
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise PolicyError(f"cannot read cache policy {path}: {exc.strerror or exc}",
                              code="cache-policy") from exc
        try:
            text = _json_text(data)
        except ValueError as exc:
            raise PolicyError(f"cache policy {path} {exc}: save it as UTF-8 JSON",
                              code="cache-policy") from exc
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            raise policy_error(exc, f"{path}: ") from exc

    @classmethod
    def from_ledger(cls, ledger: Any, *, provider: str | None = None,
                    since: Any = None, policies: Any = None) -> CachePolicy:
        """The cheapest policy for ``ledger``'s traffic, by the what-if replay
        (:func:`~stableprompt.what_if`): per request kind, the candidate whose replayed cost
        is lowest. The chosen policy's ``name`` states it and its break-even against the
        provider default (``WhatIf.choice``).

        Args:
            ledger: A :class:`~stableprompt.Ledger`, a path or URL, or an iterable of
                :class:`~stableprompt.UsageRecord`.
            provider: The provider family to choose for (needed when the ledger holds
                several).
            since: Only records at or after this time (a ``datetime``), when reading a ledger.
            policies: The candidates to choose among (an iterable of :class:`CachePolicy`;
                default: ``candidate_policies`` of the provider's rules, keep-alive
                included). E.g. TTL choices only, for a harness that sends no keep-alive.

        Raises:
            PolicyError: no priced call of the provider in the ledger, or several providers
                and none named (code ``cache-policy``).
        """
        from .._accounting._what_if import what_if

        result: WhatIf = what_if(ledger, provider=provider, since=since, policies=policies)
        return result.recommended()


def refuse_explicit_cache(policy: CachePolicy, where: str) -> None:
    """Refuse a policy with :attr:`CachePolicy.explicit_cache` where no explicit cache can be
    held (``where``: ``"to_anthropic()"``, ``"the proxy's stabilizer"``...).

    Raises:
        PolicyError: code ``cache-policy-explicit-cache``, pointing at
            :class:`~stableprompt.GeminiCache`.
    """
    if policy.explicit_cache:
        raise PolicyError(
            f"the cache policy asks for an explicit head cache (explicit_cache=True), which "
            f"is Gemini's cachedContents (GeminiCache): {where} has no explicit cache to "
            "hold it; drop explicit_cache from the policy here, or on Gemini pass the "
            "GeminiCache to to_gemini(cache=...)", code="cache-policy-explicit-cache")


def _json_text(data: bytes) -> str:
    """``data`` decoded as UTF-8 (a leading UTF-8 byte-order mark dropped).

    Raises:
        ValueError: UTF-16 (a UTF-16 byte-order mark, or NUL bytes) or not UTF-8; the
            message says which, as a predicate ("is not UTF-8 (byte offset 12)").
    """
    if data[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        raise ValueError("starts with a UTF-16 byte-order mark")
    if b"\x00" in data:  # UTF-16 without a byte-order mark decodes as UTF-8
        raise ValueError("has NUL bytes (UTF-16 text?)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"is not UTF-8 (byte offset {exc.start})") from exc


def _minutes(seconds: float) -> str:
    if seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{math.floor(seconds / 60)}m{int(seconds % 60)}s"


public(CachePolicy, KeepAlive, TtlChoice)
