"""First guesses: "did you mean" for a mistyped key or keyword argument.

One place computes suggestions (:func:`did_you_mean`, :mod:`difflib`) and one decorator
(:func:`check_keywords`) turns an unknown keyword argument into a typed
:class:`~stableprompt.ArgumentNameError` that names the right spelling, instead of Python's
plain ``TypeError: got an unexpected keyword argument``.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import ParamSpec, TypeVar

from .._exceptions import ArgumentNameError

__all__ = ["check_keywords", "did_you_mean", "suggestion"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def suggestion(word: str, choices: Iterable[str]) -> str | None:
    """The closest of ``choices`` to ``word`` (difflib, cutoff 0.6), or ``None``."""
    found = difflib.get_close_matches(word, sorted(set(choices)), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(word: str, choices: Iterable[str], *,
                 aliases: Mapping[str, Sequence[str]] | None = None) -> str:
    """``" (did you mean 'x'?)"`` for the closest choice, or ``""`` when none is close.

    ``aliases`` maps known other names (another provider's spelling, ``schema``) to the
    right ones (``("input_schema", "parameters")``); an alias wins over difflib.
    """
    options = set(choices)
    named = [a for a in (aliases or {}).get(word, ()) if a in options]
    if not named:
        found = suggestion(word, options)
        named = [found] if found is not None else []
    return f" (did you mean {' or '.join(map(repr, named))}?)" if named else ""


def check_keywords(where: str, *, aliases: Mapping[str, Sequence[str]] | None = None
                   ) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorate a function (or ``__init__``) so an unknown keyword argument raises
    :class:`~stableprompt.ArgumentNameError` (code ``argument-name``, ``segment``
    ``"<where>(<keyword>=)"``) naming the closest real parameter. The signature, as type
    checkers and ``inspect.signature`` see it, is unchanged; a call with known keywords pays
    one set comparison.

    Args:
        where: What the message calls the callable, e.g. ``"Tool"``.
        aliases: Other spellings of parameters (``{"schema": ("input_schema",
            "parameters")}``).
    """
    def decorate(func: Callable[_P, _R]) -> Callable[_P, _R]:
        params = inspect.signature(func).parameters.values()
        names = frozenset(p.name for p in params
                          if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                          and p.name != "self")

        @functools.wraps(func)
        def checked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            if kwargs and not names.issuperset(kwargs):
                unknown = sorted(set(kwargs) - names)[0]
                raise ArgumentNameError(
                    f"{where}() got an unknown keyword argument {unknown!r}"
                    f"{did_you_mean(unknown, names, aliases=aliases)}; its keywords are "
                    f"{', '.join(sorted(names))}", code="argument-name",
                    segment=f"{where}({unknown}=)")
            return func(*args, **kwargs)

        return checked

    return decorate
