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

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .._exceptions import PolicyError
from .._policy import TTL_LABELS_S
from .._public import public

if TYPE_CHECKING:
    from .._accounting._what_if import WhatIf

__all__ = ["REQUEST_KINDS", "CachePolicy", "KeepAlive", "RequestKind", "TtlChoice"]

RequestKind = Literal["main", "subagent", "one-shot"]
REQUEST_KINDS: tuple[RequestKind, ...] = ("main", "subagent", "one-shot")
"""The request kinds a policy may treat apart (module docstring)."""


def _check_label(label: str | None, where: str) -> None:
    if label is not None and label not in TTL_LABELS_S:
        raise ValueError(f"{where}: TTL {label!r} is not one of {sorted(TTL_LABELS_S)}")


def ttl_seconds(label: str | None, default_s: int | None) -> int | None:
    """Seconds of a TTL ``label``; ``default_s`` (the provider's default) for ``None``."""
    return default_s if label is None else TTL_LABELS_S[label]


class TtlChoice(BaseModel):
    """TTL labels of one request kind's two SDK breakpoints (``None``: provider default).

    Raises:
        pydantic.ValidationError: an unknown label, or a head TTL shorter than the history's
            (longer TTLs must come first).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    head: str | None = None
    history: str | None = None

    @model_validator(mode="after")
    def _order(self) -> TtlChoice:
        _check_label(self.head, "head")
        _check_label(self.history, "history")
        if (self.head is not None and self.history is not None
                and TTL_LABELS_S[self.head] < TTL_LABELS_S[self.history]):
            raise ValueError(f"head TTL {self.head!r} is shorter than history TTL "
                             f"{self.history!r}: longer TTLs must come first (Anthropic "
                             "prompt-caching docs, 'Mixing different TTLs')")
        return self


class KeepAlive(BaseModel):
    """Opt-in keep-alive: refresh an idle conversation's cached prefix.

    Attributes:
        interval_s: Seconds between the last request (or keep-alive) and the next keep-alive;
            must be shorter than the TTL it keeps (e.g. 270 for a 5-minute TTL: 30 s margin).
        max_pings: Hard cap of keep-alive requests per idle gap (the gap between two real
            requests of one conversation); ``0`` disables them.
        min_expected_saving_usd: Send a keep-alive only while the expected saving (from the
            observed gaps) exceeds its price by this much (USD, default 0).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    interval_s: float = Field(gt=0, allow_inf_nan=False)
    max_pings: int = Field(ge=0, le=10_000)
    min_expected_saving_usd: float = Field(default=0.0, ge=0, allow_inf_nan=False)


class CachePolicy(BaseModel):
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

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = ""
    head: str | None = None
    history: str | None = None
    by_kind: dict[str, TtlChoice] = Field(default_factory=dict)
    keep_alive: KeepAlive | None = None
    explicit_cache: bool = False

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "/" + "/".join(str(p) for p in first["loc"])
            code = "cache-policy-ttl-order" if "longer TTLs" in str(exc) else "cache-policy"
            raise PolicyError(f"invalid CachePolicy at {where}: {first['msg']}",
                              code=code) from exc

    @model_validator(mode="after")
    def _check(self) -> CachePolicy:
        TtlChoice(head=self.head, history=self.history)
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
    def from_file(cls, path: str | Path) -> CachePolicy:
        """Read a policy from a JSON file (the fields above).

        Raises:
            PolicyError: unreadable file, invalid JSON or invalid policy (code
                ``cache-policy``), naming the file.
        """
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise PolicyError(f"cannot read cache policy {path}: {exc.strerror or exc}",
                              code="cache-policy") from exc
        try:
            return cls.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "/" + "/".join(str(p) for p in first["loc"])
            raise PolicyError(f"{path}: invalid cache policy at {where}: {first['msg']}",
                              code="cache-policy") from exc
        except PolicyError as exc:
            raise PolicyError(f"{path}: {exc}", code=exc.code) from exc

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


def _minutes(seconds: float) -> str:
    if seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{math.floor(seconds / 60)}m{int(seconds % 60)}s"


public(CachePolicy, KeepAlive, TtlChoice)
