"""GeminiCache: a Gemini explicit cache (``cachedContents``) for a frozen head, managed.

Gemini's explicit caches are created, extended and deleted by the client and billed per
token-hour of storage on top of (discounted) reads (PROVIDERS.md §4.3, §15). A
:class:`GeminiCache` holds one for a pinned head (system instruction + tools, optionally the
leading history): :meth:`create` makes it (``POST /v1beta/cachedContents``), :meth:`extend`
sets a new TTL while the conversation lives (``PATCH``: only ``ttl`` / ``expireTime`` may
change), :meth:`delete` removes it; used as a context manager it is deleted at the end, also
on failure. ``RenderedPrompt.to_gemini(cache=...)`` then renders requests that reference it
(no ``systemInstruction`` / ``tools`` / ``toolConfig``, as the API requires).

Where explicit caching is not offered (Gemini 4 Argon and later, the Interactions API: the
``_policy`` explicit-cache rules) the cache falls back: :attr:`explicit` is False,
:attr:`fallback_reason` says why (and a warning once), nothing is created and requests are
rendered whole, for implicit caching.

Prices: :meth:`storage_usd` (tokens x hours x the model's storage price) and
:meth:`break_even_reads` (how many reads within the TTL pay for that storage: each read saves
``input - read`` per token) come from the dated policy entry; unknown prices give ``None``.
"""

from __future__ import annotations

import hashlib
import warnings
from types import TracebackType
from typing import Any

import httpx

from .._canonical import loads
from .._exceptions import ConfigurationError, InputError
from .._policy import EXPLICIT_CACHE_APIS, ExplicitCacheRule, explicit_cache_rule
from .._public import public
from .._wire import gemini

__all__ = ["GeminiCache"]

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com"


class GeminiCache:
    """A managed Gemini explicit cache for one pinned head (and leading history).

    Args:
        model: Gemini model id (``gemini-2.5-pro``); requests must use the same one.
        http: An ``httpx.Client`` to call the API with (wrap its transport in a
            :class:`~stableprompt.RecordingTransport` to record the generate calls too).
        api_key: Sent as ``x-goog-api-key``.
        base_url: API root (default Google's; the emulator's for tests).
        ttl_s: Lifetime asked at creation and by :meth:`extend` (seconds; default: the
            model's default, one hour).
        api: ``"generateContent"`` or ``"interactions"`` (the latter has no explicit caching).
        rule: Override the policy's explicit-cache rule (prices, support) for this model.

    Raises:
        ConfigurationError: ``api`` unknown (code ``gemini-cache-api``).
        InputError: ``ttl_s`` not a finite number of seconds > 0 (code ``gemini-cache-ttl``).
    """

    def __init__(self, model: str, *, http: Any, api_key: str = "",
                 base_url: str = GEMINI_BASE_URL, ttl_s: float | None = None,
                 api: str = "generateContent", rule: ExplicitCacheRule | None = None) -> None:
        if api not in EXPLICIT_CACHE_APIS:
            raise ConfigurationError(f"unknown Gemini API {api!r}; expected one of "
                                     f"{', '.join(EXPLICIT_CACHE_APIS)}", code="gemini-cache-api")
        self.model = model[len("models/"):] if model.startswith("models/") else model
        self.rule = rule or explicit_cache_rule(self.model)
        self.ttl_s = ttl_s if ttl_s is not None else float(self.rule.default_ttl_s or 3600)
        gemini.duration(self.ttl_s)  # a TTL the API would refuse fails here, typed
        self._http, self._key, self._base = http, api_key, base_url.rstrip("/")
        self.name: str | None = None
        self.tokens: int | None = None
        self.head_fingerprint: str | None = None
        self.messages = 0
        self._leading: str | None = None
        self.fallback_reason: str | None = None
        if not EXPLICIT_CACHE_APIS[api]:
            self.fallback_reason = (f"the {api} API supports only implicit caching "
                                    f"({self.rule.source}): requests are rendered whole")
        elif not self.rule.supported:
            self.fallback_reason = (f"{self.model} has no explicit caching ({self.rule.source}, "
                                    f"as of {self.rule.as_of}): implicit caching applies, "
                                    "requests are rendered whole")
        if self.fallback_reason is not None:
            warnings.warn(self.fallback_reason, UserWarning, stacklevel=2)

    @property
    def explicit(self) -> bool:
        """Whether an explicit cache is used (False: the fallback, implicit caching)."""
        return self.fallback_reason is None

    def _url(self, path: str) -> str:
        return f"{self._base}/v1beta/{path}"

    def _call(self, method: str, path: str, content: bytes | None = None) -> Any:
        response = self._http.request(method, self._url(path), content=content, headers={
            "content-type": "application/json", "x-goog-api-key": self._key})
        response.raise_for_status()
        return loads(response.content) if response.content else {}

    def create(self, prompt: Any, *, messages: int = 0) -> GeminiCache:
        """Create the cache for ``prompt``'s head and its first ``messages`` history messages
        (a rendered prompt of the conversation); nothing on the fallback.

        Raises:
            InputError: ``messages`` beyond the prompt's history (code ``gemini-cache``), a
                cache already held (code ``gemini-cache-held``: a second create would leave
                the first billed and unreachable; :meth:`delete` it first), or an answer
                without a cache ``name`` (code ``gemini-cache-answer``, pointer ``/name``).
            httpx.HTTPStatusError: the API refused it (below the minimum, ...).
        """
        if not 0 <= messages <= prompt.message_count:
            raise InputError(f"messages={messages}: the prompt has {prompt.message_count}",
                             code="gemini-cache")
        if self.name is not None:
            raise InputError(f"this GeminiCache already holds {self.name}: delete() it before "
                             "creating another (it would stay billed, unreachable, until its "
                             "TTL ends)", code="gemini-cache-held")
        if not self.explicit:
            return self
        body = gemini.cache_body(prompt, model=self.model, ttl_s=self.ttl_s, messages=messages)
        created = self._call("POST", "cachedContents", body)
        name = created.get("name") if isinstance(created, dict) else None
        if not isinstance(name, str) or not name:
            raise InputError(f"the cachedContents create answer has no cache name: {created!r}",
                             code="gemini-cache-answer", pointer="/name")
        self.name = name
        usage = created.get("usageMetadata")
        tokens = usage.get("totalTokenCount") if isinstance(usage, dict) else None
        # a count that is not a non-negative int is unknown (storage_usd() None), never priced
        self.tokens = tokens if isinstance(tokens, int) and not isinstance(tokens, bool) \
            and tokens > 0 else None
        self.head_fingerprint = prompt.head.fingerprint
        self.messages = messages
        self._leading = _leading_digest(prompt, messages)
        return self

    def extend(self, ttl_s: float | None = None) -> None:
        """Set the cache's TTL to ``ttl_s`` seconds from now (default: :attr:`ttl_s`).

        Raises:
            InputError: ``ttl_s`` not a finite number of seconds > 0 (code
                ``gemini-cache-ttl``).
            httpx.HTTPStatusError: the API refused it (404: the cache expired).
        """
        seconds = gemini.duration(self.ttl_s if ttl_s is None else ttl_s)
        if self.name is None:
            return
        self._call("PATCH", f"{self.name}?updateMask=ttl", f'{{"ttl":"{seconds}"}}'.encode())

    def delete(self) -> None:
        """Delete the cache (no-op when none was created or it is already deleted; a 404,
        the cache expired or deleted elsewhere, counts as deleted).

        Raises:
            httpx.HTTPError: the delete failed otherwise; :attr:`name` is kept, so it can be
                tried again (the cache is billed until it is deleted or expires).
        """
        if self.name is None:
            return
        try:
            self._call("DELETE", self.name)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 404:
                raise
        self.name = None

    def __enter__(self) -> GeminiCache:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Delete the cache. When the block failed, a failed delete does not hide its error:
        it is added to that error as a note (and warned), and the block's error goes on."""
        if exc is None:
            self.delete()
            return
        try:
            self.delete()
        except Exception as failure:
            message = (f"the Gemini cache {self.name} could not be deleted "
                       f"({type(failure).__name__}: {failure}); it is billed until its TTL "
                       "ends")
            exc.add_note(message)
            warnings.warn(message, UserWarning, stacklevel=2)

    def reference_for(self, prompt: Any, model: str) -> tuple[str | None, int]:
        """``(cache name, history messages it holds)`` for a request rendering ``prompt``
        to ``model``; ``(None, 0)`` on the fallback or before :meth:`create`.

        Raises:
            InputError: another model or another head than the cache's, or a history that
                does not start with the messages the cache holds (another conversation, or
                this one after a compaction: the request would send the model the cache's
                messages, not this prompt's); code ``gemini-cache``.
        """
        if self.name is None:
            return None, 0
        if model.removeprefix("models/") != self.model:
            raise InputError(f"the cache {self.name} is for {self.model}, not {model}",
                             code="gemini-cache")
        if prompt.head.fingerprint != self.head_fingerprint:
            raise InputError(f"the cache {self.name} holds another head", code="gemini-cache")
        if self.messages and (prompt.message_count < self.messages
                              or _leading_digest(prompt, self.messages) != self._leading):
            raise InputError(
                f"the cache {self.name} holds {self.messages} leading message(s) this prompt "
                "does not start with (another conversation, or this one compacted): render "
                "without cache=, or create a cache for this history", code="gemini-cache")
        return self.name, self.messages

    def storage_usd(self, hours: float | None = None) -> float | None:
        """Storage price of the cache for ``hours`` (default: its TTL), USD; ``None`` when
        the price or the token count is unknown (``ExplicitCacheRule.storage_usd``)."""
        if self.tokens is None:
            return None
        return self.rule.storage_usd(self.tokens, self.ttl_s / 3600 if hours is None else hours)

    def break_even_reads(self, hours: float | None = None) -> int | None:
        """Reads the cache must serve within ``hours`` (default: its TTL) to pay for its
        storage (``ExplicitCacheRule.break_even_reads``); ``None`` when a price is
        unknown."""
        if self.tokens is None:
            return None
        return self.rule.break_even_reads(self.tokens,
                                          self.ttl_s / 3600 if hours is None else hours)


def _leading_digest(prompt: Any, count: int) -> str | None:
    """The chained prefix digest (head included) through ``prompt``'s first ``count``
    history messages, ``None`` for none: O(1) from the builder's kept digests, else (a
    prompt made by hand) over those messages' bytes."""
    if not count:
        return None
    if len(getattr(prompt, "history_segments", ())) >= count:
        return str(prompt.message_digest(count - 1))
    digest = hashlib.sha256(prompt.head.fingerprint.encode())
    for i in range(count):
        digest.update(prompt.message_list[i].data)
    return digest.hexdigest()


public(GeminiCache)
