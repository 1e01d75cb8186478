"""The frame every emulated endpoint shares: top-level checks, the assistant turn, the answer.

Each endpoint module (``_anthropic``, ``_chat``, ``_responses``) describes its top-level
parameters with an :class:`Endpoint`: the names it accepts, the ones it requires, how its
provider words the two errors, and the prefix of the tool-call ids it assigns. A handler then

1. opens the body with :func:`open_request` (unknown, stateful and missing parameters, model),
2. renders and accounts the prompt its own way,
3. asks :func:`reply` for the responder's turn fitted to the output limit,
4. returns :func:`answer`: the payload as JSON, or its SSE events when streaming.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ._answers import Usage, WireContext, WireError, WireResult, json_result
from ._checks import expect_object, expect_str
from ._responders import FittedTurn, fit_turn
from ._store import PendingWrite

__all__ = ["Endpoint", "answer", "open_request", "reply"]


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Top-level parameter rules of one emulated endpoint, in its provider's wording.

    Attributes:
        params: Every accepted top-level parameter name.
        required: Names that must be present, checked in this order (``"model"`` among them).
        unknown: The error for a parameter not in ``params``, given its name.
        missing: The error for a missing required parameter, given its name.
        call_prefix: Prefix of the tool-call ids the emulator assigns, e.g. ``"call_emu"``
            gives ``call_emu_000007_0`` (request 7, first call).
        stateful: Parameters that need server-side state the emulator does not keep: a request
            that sets one (to anything but ``null`` or ``false``) is a 400.
    """

    params: frozenset[str]
    required: tuple[str, ...]
    unknown: Callable[[str], WireError]
    missing: Callable[[str], WireError]
    call_prefix: str
    stateful: tuple[str, ...] = ()


def open_request(body: Any, endpoint: Endpoint) -> tuple[dict[str, Any], str]:
    """Check a decoded body's top level against ``endpoint``; return it and its model id.

    Checks run in a fixed order, so a body with several faults always gets the same error:
    the body is an object, unknown parameters (by sorted name), stateful parameters, required
    parameters, then ``model`` is a non-empty string.

    Raises:
        WireError: The first fault found (400).
    """
    req = expect_object(body, "body")
    for name in sorted(req):
        if name not in endpoint.params:
            raise endpoint.unknown(name)
    for name in endpoint.stateful:
        if req.get(name) not in (None, False):
            raise WireError(f"{name}: not supported by the stableprompt emulator, which keeps "
                            "no server-side state; send the full input instead", param=name)
    for name in endpoint.required:
        if name not in req:
            raise endpoint.missing(name)
    return req, expect_str(req["model"], "model", empty=False)


def reply(
    req: dict[str, Any], ctx: WireContext, endpoint: Endpoint, *, max_tokens: int | None
) -> FittedTurn:
    """Ask the responder for this request's turn, fitted to ``max_tokens`` (tokens; ``None``:
    no limit), with counter-based call ids.

    Raises:
        TypeError: The responder returned something other than an ``AssistantTurn``.
    """
    return fit_turn(ctx.responder(req), tokenizer=ctx.tokenizer, max_tokens=max_tokens,
                    call_id=lambda k: f"{endpoint.call_prefix}_{ctx.seq:06d}_{k}")


def answer(
    payload: dict[str, Any],
    *,
    stream: bool,
    events: Callable[[dict[str, Any]], tuple[bytes, ...]],
    model: str,
    usage: Usage,
    pending: tuple[PendingWrite, ...],
) -> WireResult:
    """A 200 answer: ``payload`` as JSON, or ``events(payload)`` as an SSE stream.

    Args:
        payload: The provider's non-streaming response object.
        stream: The request asked for SSE.
        events: Builds the SSE event sequence (encoded events, in order) from ``payload``.
        model: Model id, for the request log.
        usage: Normalized usage, for the request log and the totals.
        pending: Cache writes to publish once the response has started.
    """
    if not stream:
        return json_result(payload, pending=pending, model=model, usage=usage)
    return WireResult(200, "text/event-stream", events(payload), pending=pending, model=model,
                      usage=usage, streamed=True)
