"""The TTLs a :class:`~stableprompt.CachePolicy` sets on a render, and the policies a render
cannot follow (``RenderedPrompt.to_*(cache_policy=...)``).

Every refusal is a :class:`~stableprompt.PolicyError` raised before anything is rendered, in
the policy's terms (its place, its label, the request kind) rather than in those of the render
arguments the policy stands for:

- **Breakpoint caches** (Anthropic Messages, Bedrock Converse): a place the policy leaves
  unset takes the provider's default TTL (Anthropic ``"5m"``). Refused: a TTL the provider
  does not offer for the model (code ``cache-policy``: ``"12h"`` or ``"30m"`` on Anthropic);
  a history TTL longer than the head's once the default is filled in (code
  ``cache-policy-ttl-order``: ``history="1h"`` with the head at its 5-minute default;
  "cache entries with longer TTL must appear before shorter TTLs", Anthropic prompt-caching
  docs, "Mixing different TTLs"). The head's TTL is frozen with its bytes: a policy asking
  for another is a :class:`~stableprompt.BreakpointError` (code ``cache-policy-head-ttl``),
  not a rewrite.
- **OpenAI** (Chat Completions, Responses): the head TTL becomes ``prompt_cache_ttl`` and the
  history's ``history_ttl``, each one the API offers for the model
  (``_policy.OPENAI_EXPLICIT_RULES``: Chat ``"30m"``, Responses ``"30m"`` / ``"12h"``, GPT-5.6
  and later; code ``cache-policy`` otherwise). A policy setting neither: implicit caching.
- **Gemini**: no breakpoints; implicit caching has no TTL to choose, so a policy setting one
  is refused (code ``cache-policy``; an explicit cache's lifetime is
  ``GeminiCache(ttl_s=...)``).
- **explicit_cache**: Gemini's ``cachedContents``, held by a
  :class:`~stableprompt.GeminiCache`: ``to_gemini`` uses the one passed as ``cache=`` and
  refuses the policy without one; every other render refuses it (code
  ``cache-policy-explicit-cache``).
"""

from __future__ import annotations

from typing import Any

from .._economics._cache_policy import CachePolicy, TtlChoice, refuse_explicit_cache
from .._exceptions import BreakpointError, InputError, PolicyError
from .._policy import TTL_LABELS_S, cache_rules, openai_explicit_rule

__all__ = ["breakpoint_history_ttl", "check_gemini_policy", "check_policy", "openai_ttls"]

_LABEL_OF_S = {seconds: label for label, seconds in TTL_LABELS_S.items()}
_PROVIDER_NAMES = {"anthropic": "Anthropic", "bedrock": "Bedrock"}


def _checked(cache_policy: object) -> CachePolicy:
    if not isinstance(cache_policy, CachePolicy):
        raise InputError(f"cache_policy must be a CachePolicy, got "
                         f"{type(cache_policy).__name__}", code="render-param")
    return cache_policy


def _not_offered(choice: TtlChoice, offered: tuple[str, ...], request_kind: str,
                 where: str) -> None:
    """Refuse a label of ``choice`` not in ``offered`` (``where``: who does not offer it)."""
    for place, label in (("head", choice.head), ("history", choice.history)):
        if label is not None and label not in offered:
            ttls = ", ".join(repr(t) for t in offered) or "none"
            raise PolicyError(
                f"the cache policy puts a {label} TTL on the {place} breakpoint of "
                f"{request_kind} requests, but {where} does not offer {label!r} (it offers "
                f"{ttls}): choose one of those for {place} in the policy",
                code="cache-policy")


def breakpoint_history_ttl(provider: str, model: str, cache_policy: CachePolicy | None,
                           request_kind: str, *, history_ttl: str, head_ttl: str | None,
                           method: str) -> str | None:
    """The end-of-history TTL label ``cache_policy`` sets on an Anthropic or Bedrock render
    of ``request_kind`` (``None`` without a policy: the caller's ``history_ttl`` stands).

    Args:
        provider: ``"anthropic"`` or ``"bedrock"`` (whose :func:`cache_rules` apply).
        model: Model id.
        cache_policy: The policy, or ``None``.
        request_kind: Which of the policy's TTLs apply.
        history_ttl: The render's own ``history_ttl`` argument (must be left at ``"5m"``).
        head_ttl: The TTL the head was frozen with.
        method: The render method, for messages (``"to_anthropic()"``).

    Raises:
        InputError: ``cache_policy`` not a CachePolicy, or given with ``history_ttl`` (code
            ``render-param``).
        PolicyError: module docstring (``cache-policy``, ``cache-policy-ttl-order``,
            ``cache-policy-explicit-cache``).
        BreakpointError: the policy's head TTL is not the frozen one (code
            ``cache-policy-head-ttl``).
    """
    if cache_policy is None:
        return None
    policy = _checked(cache_policy)
    if history_ttl != "5m":
        raise InputError("pass either cache_policy or history_ttl, not both",
                         code="render-param")
    head, history = _breakpoint_labels(provider, model, policy, request_kind, method,
                                       head_ttl=head_ttl)
    if head is not None and head != head_ttl:
        raise BreakpointError(
            f"cache_policy puts {head!r} on the head of {request_kind} requests, but this "
            f"head was frozen with head_ttl={head_ttl!r}: freeze the head with "
            f"head_ttl={head!r} (the head's bytes, its breakpoint included, are fixed)",
            code="cache-policy-head-ttl", segment="head")
    return history


def _breakpoint_labels(provider: str, model: str, policy: CachePolicy, request_kind: str,
                       method: str, *, head_ttl: str | None = None
                       ) -> tuple[str | None, str | None]:
    """(head, history) labels of ``policy`` on a breakpoint cache, the provider default
    filled in; checked (``breakpoint_history_ttl``) but for the frozen head. ``head_ttl``:
    the head's frozen TTL, for the advice only."""
    refuse_explicit_cache(policy, method)
    choice = policy.for_kind(request_kind)
    rules = cache_rules(provider, model)
    offered = tuple(_LABEL_OF_S[s] for s in rules.ttls_s if s in _LABEL_OF_S)
    name = _PROVIDER_NAMES.get(provider, provider)
    _not_offered(choice, offered, request_kind, f"{name} (model {model!r})")
    default = offered[0] if offered else None
    head, history = choice.head or default, choice.history or default
    if head is not None and history is not None and TTL_LABELS_S[head] < TTL_LABELS_S[history]:
        unset = " (the provider default: the policy sets no head TTL)" if choice.head is None \
            else ""
        freeze = (f" (this head is already frozen with head_ttl={history!r})"
                  if head_ttl == history else f" and freeze the head with head_ttl={history!r}")
        raise PolicyError(
            f"the cache policy asks for a {history} history breakpoint after a {head} "
            f"head{unset} on {request_kind} requests, but {name} needs longer TTLs first "
            f"('Mixing different TTLs'): set head={history!r} in the policy{freeze}",
            code="cache-policy-ttl-order")
    return head, history


def check_policy(wire_format: str, model: str, policy: CachePolicy, request_kind: str,
                 *, what: str = "its requests") -> None:
    """Refuse ``policy`` where a ``wire_format`` render to ``model`` would (module
    docstring), before anything is rendered: the checks of ``to_anthropic``,
    ``to_bedrock_converse``, ``to_openai_*`` and ``to_gemini`` without a prompt (all but the
    frozen head's TTL, and for Gemini an explicit cache, which a render gets as ``cache=``).

    Args:
        wire_format: ``"anthropic"``, ``"bedrock-converse"``, ``"openai-chat"``,
            ``"openai-responses"`` or ``"gemini"``; others are not checked.
        model: Model id.
        policy: The policy.
        request_kind: Which of its TTLs apply.
        what: Who cannot hold an explicit cache, for that message.

    Raises:
        PolicyError: as the render would (codes ``cache-policy``,
            ``cache-policy-ttl-order``, ``cache-policy-explicit-cache``).
    """
    if wire_format in ("anthropic", "bedrock-converse"):
        provider = "anthropic" if wire_format == "anthropic" else "bedrock"
        _breakpoint_labels(provider, model, policy, request_kind, what)
    elif wire_format in ("openai-chat", "openai-responses"):
        openai_ttls(wire_format, model, policy, request_kind, prompt_cache_ttl=None,
                    history_ttl=None, method=what)
    elif wire_format == "gemini":
        check_gemini_policy(policy, request_kind, None)


def openai_ttls(wire_format: str, model: str, cache_policy: object, request_kind: str, *,
                prompt_cache_ttl: str | None, history_ttl: str | None,
                method: str) -> tuple[str | None, str | None]:
    """(``prompt_cache_ttl``, ``history_ttl``) ``cache_policy`` sets on an OpenAI render;
    ``(None, None)`` for a policy choosing no TTL (implicit caching).

    Raises:
        InputError: ``cache_policy`` not a CachePolicy, or given with ``prompt_cache_ttl`` /
            ``history_ttl`` (code ``render-param``).
        PolicyError: a TTL the API does not offer for ``model`` (none before GPT-5.6: code
            ``cache-policy``), or ``explicit_cache`` (``cache-policy-explicit-cache``).
    """
    policy = _checked(cache_policy)
    if prompt_cache_ttl is not None or history_ttl is not None:
        raise InputError("pass either cache_policy or prompt_cache_ttl / history_ttl, "
                         "not both", code="render-param")
    refuse_explicit_cache(policy, method)
    choice = policy.for_kind(request_kind)
    head = choice.head or choice.history
    if head is None:
        return None, None
    rule = openai_explicit_rule(wire_format, model)
    if rule is None:
        raise PolicyError(
            f"the cache policy puts a {head} TTL on {request_kind} requests, but {model!r} "
            f"has no explicit prompt caching on {wire_format} (prompt_cache_options are "
            "GPT-5.6 and later, per the policy table): use a policy without head/history "
            "TTLs for this model (implicit caching)", code="cache-policy")
    _not_offered(choice, rule.ttls, request_kind,
                 f"{wire_format} (prompt_cache_options.ttl, model {model!r})")
    return head, (choice.history if choice.history != head else None)


def check_gemini_policy(cache_policy: object, request_kind: str, cache: Any) -> None:
    """Refuse what ``to_gemini`` cannot follow: a TTL (implicit caching has none to choose),
    an explicit head cache without the :class:`~stableprompt.GeminiCache` holding it.

    Raises:
        InputError: ``cache_policy`` not a CachePolicy (code ``render-param``).
        PolicyError: module docstring (``cache-policy``, ``cache-policy-explicit-cache``).
    """
    if cache_policy is None:
        return
    policy = _checked(cache_policy)
    choice = policy.for_kind(request_kind)
    if choice.head is not None or choice.history is not None:
        label = choice.head or choice.history
        raise PolicyError(
            f"the cache policy puts a {label} TTL on {request_kind} requests, but Gemini has "
            "no cache breakpoints: implicit caching has no TTL to choose (an explicit "
            "cache's lifetime is GeminiCache(ttl_s=...)); drop head/history from the policy "
            "for Gemini", code="cache-policy")
    if policy.explicit_cache and cache is None:
        raise PolicyError(
            "the cache policy asks for an explicit head cache (explicit_cache=True): create "
            "it with GeminiCache(model, http=...).create(prompt) and pass it as "
            "to_gemini(cache=...); a render does not create caches (their storage is billed "
            "per token-hour)", code="cache-policy-explicit-cache")
