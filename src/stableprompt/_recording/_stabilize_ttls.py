"""The TTLs a :class:`~stableprompt.CachePolicy` gives the Anthropic breakpoints of a stabilized
request (``stableprompt proxy --stabilize --cache-policy FILE``, ``RecordingTransport(
stabilize=True, cache_policy=...)``).

Two places, as in the builder: the **head** (a breakpoint on a tool or a system block) and the
**history** (a breakpoint on a message's content block, nested in a tool result or not, and the
top-level ``cache_control`` of automatic caching, which marks the last cacheable block). The
request kind is always ``"main"`` (:data:`REQUEST_KIND`): one request body does not say
whether a subagent sent it (a subagent is a session forked from another's prefix, which only
the ledger shows after the fact: ``_accounting._what_if``), so a policy's ``by_kind`` overrides
other than ``main`` do not apply here.

- **Breakpoints the stabilizer places** (the client placed none) get the policy's TTL of their
  place: :func:`policy_ttls`. ``None`` in the policy is the provider's default.
- **Breakpoints the harness placed itself keep their TTL, unless they have none**: a marker
  with a ``ttl`` of its own (``"5m"`` included) is the harness's choice and is never changed;
  a marker without one asks for the provider's default (5 minutes), which the policy replaces:
  it gets the policy's TTL of its place (:func:`retime`), only ever lengthened, and at most
  the shortest TTL of the markers before it. So no rewrite puts a longer TTL after a shorter
  one (Anthropic rejects it: "cache entries with longer TTL must appear before shorter TTLs",
  platform.claude.com/docs/en/build-with-claude/prompt-caching, "Mixing different TTLs"); a
  body whose own markers break that rule is not repaired (its ``ttl`` values are the
  harness's), only not made worse. The rewrite is named ``breakpoint-ttl`` on the row.

What a request means is unchanged: a TTL changes how long the provider keeps the prefix and
what a write costs (1.25x the input price at 5 minutes, 2x at 1 hour), never the prompt.
A TTL the model's cache rules do not offer (:attr:`CacheRules.ttls_s`) is not sent: the
provider default is used instead and the row says so (``cache_policy_skipped``). So is a
history TTL longer than the head's (``CachePolicy(history="1h")`` leaves the head at the 5m
default): the history is sent at the head's TTL, and ``cache_policy_skipped`` says so.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .._economics._cache_policy import CachePolicy
from .._policy import TTL_LABELS_S, CacheRules
from .._wire import anthropic
from .._wire._parts import BREAKPOINT_TTLS

__all__ = ["REQUEST_KIND", "PolicyTtls", "policy_ttls", "retime"]

REQUEST_KIND = "main"
"""The request kind whose TTLs a policy gives a stabilized request (module docstring)."""

_DEFAULT = "5m"
"""Anthropic's TTL of a marker without ``ttl``."""
_LABEL_OF_S = {seconds: label for label, seconds in TTL_LABELS_S.items()}


@dataclass(frozen=True, slots=True)
class PolicyTtls:
    """The TTL labels of one request's two places, and why a policy's choice was not used.

    Attributes:
        head: TTL label of the head place (``"5m"``, ``"1h"``).
        history: TTL label of the history place; never longer than ``head``.
        skipped: Why a label of the policy was replaced by the default (``None``: it was not).
    """

    head: str
    history: str
    skipped: str | None = None

    def of(self, place: str) -> str:
        """The label of ``place`` (``"head"`` or ``"history"``)."""
        return self.head if place == "head" else self.history


def policy_ttls(cache_policy: CachePolicy | None, rules: CacheRules | None,
                model: str | None) -> PolicyTtls:
    """The labels ``cache_policy`` sets for a request to ``model`` (:data:`REQUEST_KIND`).

    Args:
        cache_policy: The policy (``None``: the default everywhere).
        rules: The model's cache rules (``None``: unknown; then the labels Anthropic offers,
            ``5m`` and ``1h``, are accepted).
        model: The model id, for the skip reason.

    Returns:
        :class:`PolicyTtls`; a label the rules do not offer becomes the default, with the
        reason in ``skipped``; the history is capped at the head (longer TTLs first), also
        said in ``skipped``.
    """
    if cache_policy is None:
        return PolicyTtls(_DEFAULT, _DEFAULT)
    choice = cache_policy.for_kind(REQUEST_KIND)
    offered = [label for label in BREAKPOINT_TTLS
               if rules is None or not rules.ttls_s or TTL_LABELS_S[label] in rules.ttls_s]
    skipped: list[str] = []
    labels: list[str] = []
    for place, label in (("head", choice.head), ("history", choice.history)):
        if label is None:
            labels.append(_DEFAULT)
        elif label in offered:
            labels.append(label)
        else:
            skipped.append(f"{place} TTL {label!r} is not offered for {model or 'this model'} "
                           f"(offered: {', '.join(offered) or 'none'}): "
                           f"the default {_DEFAULT!r} was used")
            labels.append(_DEFAULT)
    head, history = labels
    if TTL_LABELS_S[history] > TTL_LABELS_S[head]:
        if choice.head is None:
            why, fix = "the default: the policy sets none", f"set head={history!r} in it"
        else:
            why, fix = "the default, for the TTL skipped", "use a head TTL the model offers"
        skipped.append(f"history TTL {history!r} is longer than the head's {head!r} ({why}): "
                       f"longer TTLs must come first, so the history was sent at {head!r}; "
                       f"{fix}")
        history = head
    return PolicyTtls(head, history, "; ".join(skipped) or None)


def markers(parsed: dict[str, Any]) -> Iterator[tuple[dict[str, Any], str]]:
    """Every object of a Messages body holding ``cache_control``, in prompt order (tools,
    system, messages with nested tool-result blocks before their holder, then the top-level
    one, which marks the last cacheable block), with its place (``"head"`` / ``"history"``)."""
    key = anthropic.MARKER_KEY
    tools, system, messages = parsed.get("tools"), parsed.get("system"), parsed.get("messages")
    for holder, place in ((tools, "head"), (system, "head")):
        if isinstance(holder, list):
            for item in holder:
                if isinstance(item, dict) and key in item:
                    yield item, place
    if isinstance(messages, list):
        for message in messages:
            content = message.get("content") if isinstance(message, dict) else None
            if not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict):
                    continue
                inner = block.get("content")
                if isinstance(inner, list):
                    for part in inner:
                        if isinstance(part, dict) and key in part:
                            yield part, "history"
                if key in block:
                    yield block, "history"
    if key in parsed:
        yield parsed, "history"


def _seconds(control: Any) -> int | None:
    """Seconds of a ``cache_control`` value (no ``ttl``: 5 minutes), ``None`` when it is not
    one we can read."""
    if not isinstance(control, dict):
        return None
    return TTL_LABELS_S.get(str(control.get("ttl", _DEFAULT)))


def retime(parsed: dict[str, Any], ttls: PolicyTtls) -> int:
    """Give the harness's markers without ``ttl`` their place's TTL from ``ttls``, in place
    (module docstring: only lengthened, never beyond a marker before it); the markers
    changed (each gains one member, ``ttl``). A marker that cannot be read (not an object,
    an unknown ``ttl``) stops the walk: nothing after it is changed."""
    key = anthropic.MARKER_KEY
    cap: float = math.inf
    changed = 0
    for holder, place in list(markers(parsed)):
        control = holder[key]
        current = _seconds(control)
        if current is None:
            return changed
        if "ttl" not in control:
            wanted = min(TTL_LABELS_S[ttls.of(place)], cap)
            if wanted > current and wanted in _LABEL_OF_S:
                holder[key] = {**control, "ttl": _LABEL_OF_S[int(wanted)]}
                current = int(wanted)
                changed += 1
        cap = min(cap, current)
    return changed
