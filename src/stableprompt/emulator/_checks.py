"""JSON value checks for emulated requests: each returns the value or raises a 400.

A check names the offending field by its location in the request (``messages[2].role``,
``tools.0.name``): that string is the message's prefix and OpenAI's ``param``. Types follow
JSON: an integer is never a boolean, an object is a ``dict`` as decoded, and a number written
with a fraction or exponent (``1e9``, ``16.0``) is not an integer: both providers require an
integer for their token limits.
"""

from __future__ import annotations

from typing import Any

from ._answers import Flavor, WireError

__all__ = [
    "MAX_OUTPUT_TOKENS",
    "expect_bool",
    "expect_int",
    "expect_list",
    "expect_messages",
    "expect_object",
    "expect_output_limit",
    "expect_str",
]

MAX_OUTPUT_TOKENS = 128_000
"""Emulator limit on a request's output-token limit (tokens), the same for every model: the
largest per-model maximum output the providers document for current models (Anthropic: "Max
output 128K tokens" for Claude Opus 5, Sonnet 5 and Fable 5,
https://platform.claude.com/docs/models/overview; OpenAI: 128,000 max output tokens for the
GPT-5 family, https://platform.openai.com/docs/models). Models with a lower documented
maximum (Claude Haiku 4.5: 64K) are not modelled: the emulator accepts up to 128,000 for them."""


def expect_object(value: Any, where: str) -> dict[str, Any]:
    """Return ``value`` if it is a JSON object, else raise a 400 naming ``where``."""
    if not isinstance(value, dict):
        raise WireError(f"{where}: expected an object, got {_kind(value)}", param=where)
    return value


def expect_list(value: Any, where: str) -> list[Any]:
    """Return ``value`` if it is a JSON array, else raise a 400 naming ``where``."""
    if not isinstance(value, list):
        raise WireError(f"{where}: expected an array, got {_kind(value)}", param=where)
    return value


def expect_messages(value: Any) -> list[Any]:
    """Return the ``messages`` array if it holds at least one message, else raise a 400."""
    messages = expect_list(value, "messages")
    if not messages:
        raise WireError("messages: at least one message is required", param="messages")
    return messages


def expect_str(value: Any, where: str, *, empty: bool = True) -> str:
    """Return ``value`` if it is a string (non-empty unless ``empty``), else raise a 400."""
    if not isinstance(value, str):
        raise WireError(f"{where}: expected a string, got {_kind(value)}", param=where)
    if not empty and not value:
        raise WireError(f"{where}: must not be empty", param=where)
    return value


def expect_int(value: Any, where: str, *, minimum: int = 0) -> int:
    """Return ``value`` if it is an integer >= ``minimum`` (not a bool), else raise a 400."""
    if type(value) is not int:
        raise WireError(f"{where}: expected an integer, got {_kind(value)}", param=where)
    if value < minimum:
        raise WireError(f"{where}: must be >= {minimum}, got {value}", param=where)
    return value


def expect_output_limit(
    value: Any, where: str, model: str, provider: Flavor, *, minimum: int
) -> int:
    """Return an output-token limit (``max_tokens``, ``max_output_tokens``, ...) if it is an
    integer in ``minimum..MAX_OUTPUT_TOKENS``, else raise a 400 in ``provider``'s wording.

    Raises:
        WireError: Not an integer (floats included), below ``minimum``, or above
            :data:`MAX_OUTPUT_TOKENS` (OpenAI ``code`` ``invalid_value``).
    """
    limit = expect_int(value, where, minimum=minimum)
    if limit <= MAX_OUTPUT_TOKENS:
        return limit
    if provider == "anthropic":
        message = (f"{where}: {limit} > {MAX_OUTPUT_TOKENS}, which is the maximum allowed "
                   f"number of output tokens for {model} (stableprompt emulator limit)")
    else:
        message = (f"{where} is too large: {limit}. This model supports at most "
                   f"{MAX_OUTPUT_TOKENS} completion tokens, whereas you provided {limit} "
                   "(stableprompt emulator limit).")
    raise WireError(message, param=where, code=None if provider == "anthropic"
                    else "invalid_value")


def expect_bool(value: Any, where: str) -> bool:
    """Return ``value`` if it is a boolean, else raise a 400 naming ``where``."""
    if not isinstance(value, bool):
        raise WireError(f"{where}: expected a boolean, got {_kind(value)}", param=where)
    return value


def _kind(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
             float: "number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
