"""JSON value checks for emulated requests: each returns the value or raises a 400.

A check names the offending field by its location in the request (``messages[2].role``,
``tools.0.name``): that string is the message's prefix and OpenAI's ``param``. Types follow
JSON: an integer is never a boolean, an object is a ``dict`` as decoded.
"""

from __future__ import annotations

from typing import Any

from ._wire import WireError

__all__ = [
    "expect_bool",
    "expect_int",
    "expect_list",
    "expect_messages",
    "expect_object",
    "expect_str",
]


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


def expect_bool(value: Any, where: str) -> bool:
    """Return ``value`` if it is a boolean, else raise a 400 naming ``where``."""
    if not isinstance(value, bool):
        raise WireError(f"{where}: expected a boolean, got {_kind(value)}", param=where)
    return value


def _kind(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer",
             float: "number", type(None): "null"}
    return names.get(type(value), type(value).__name__)
