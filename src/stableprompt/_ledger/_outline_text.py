"""The ``segment_digests`` column as the ledger itself handles it: which row a delta outline
continues, and a delta made whole before that row is pruned.

The format is the recorder's (``_recording._outline``: format 1 whole, format 2 a delta of
another row's outline); this module reads it as text only, so the ledger needs no segment
objects:

    1|<kinds>|<tokens>|<breakpoints>|<prefix digests>|<opening>
    2|<base record id>|<shared>|<kinds>|<tokens>|<breakpoints>|<prefix digests>|<opening>

A delta's first ``<shared>`` segments are its base's (kind letters, token counts and
prefix digests of :data:`DIGEST_HEX` hex digits each); its ``<breakpoints>`` and
``<opening>`` are its own request's, whole. So a delta and the whole text
:func:`whole_outline` makes of it decode to the same segments
(``tests/test_outline.py``). :meth:`Ledger.prune <stableprompt.Ledger.prune>` uses it: a
row kept whose outline continues a row being deleted is rewritten whole first, so a reader
of the kept row (another process, another host) still compares the next turn with it
segment by segment instead of by fingerprint alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["DELTA_PREFIX", "DIGEST_HEX", "MAX_DEPTH", "RECORD_ID", "delta_base", "made_whole",
           "whole_outline"]

DIGEST_HEX = 32
"""Hex digits of each segment's chained prefix digest in an outline (16 bytes)."""

MAX_DEPTH = 16
"""Delta outlines (format 2) in a row's chain at most: a row whose base is this deep stores its
outline whole, so reading any outline takes at most this many more rows; a deeper chain (not
written by the recorder) reads as no outline."""

DELTA_PREFIX = "2|"
"""How a delta outline (format 2) starts."""

RECORD_ID = re.compile(r"[0-9a-f]{32}")
"""A record id as a delta outline names its base row."""


def delta_base(text: str) -> str | None:
    """The record id of the row a delta outline (format 2) continues, else ``None`` (a whole
    outline, or text that is not an outline)."""
    if not text.startswith(DELTA_PREFIX):
        return None
    parts = text.split("|", 3)
    return parts[1] if len(parts) == 4 and RECORD_ID.fullmatch(parts[1]) else None


def whole_outline(delta: str, base: str) -> str | None:
    """``delta`` (a format-2 outline) written whole (format 1), given its base row's whole
    outline ``base``: the base's first ``<shared>`` kind letters, token counts and prefix
    digests, then the delta's own; the delta's breakpoints and opening.

    Returns:
        The whole text, or ``None`` when ``delta`` is not a well-formed delta or ``base`` not
        a well-formed whole outline with at least ``<shared>`` segments (the row is then left
        as it is: it already reads as no outline).
    """
    own = delta.split("|")
    prior = base.split("|")
    if len(own) != 8 or own[0] != "2" or len(prior) != 6 or prior[0] != "1":
        return None
    shared_text = own[2]
    if not shared_text.isdigit():
        return None
    shared = int(shared_text)
    kinds, counts, digests = prior[1], prior[2], prior[4]
    tokens = counts.split(",") if counts else []
    if not 0 < shared <= len(kinds) or len(tokens) != len(kinds) or (
            len(digests) != len(kinds) * DIGEST_HEX):
        return None
    own_tokens = [own[4]] if own[4] else []
    return "|".join((
        "1", kinds[:shared] + own[3], ",".join([*tokens[:shared], *own_tokens]), own[5],
        digests[:shared * DIGEST_HEX] + own[6], own[7]))


def made_whole(text: str, outline_of: Callable[[str], str | None]) -> str | None:
    """``text`` (a row's outline) written whole: a delta resolved through its chain of bases,
    each read by ``outline_of`` (a record id to that row's ``segment_digests``, ``None`` when
    the row or its outline is not there), at most :data:`MAX_DEPTH` deltas deep, as
    ``_recording._outline.decode_outline`` reads them; ``text`` itself when it is no delta.

    Returns:
        The whole text, or ``None`` when the chain does not resolve: a base is missing, the
        chain is deeper than :data:`MAX_DEPTH` (or loops), or a step is malformed
        (:func:`whole_outline`). At most :data:`MAX_DEPTH` calls of ``outline_of``.
    """
    chain = [text]
    base = delta_base(text)
    while base is not None:
        if len(chain) > MAX_DEPTH:
            return None
        prior = outline_of(base)
        if prior is None:
            return None
        chain.append(prior)
        base = delta_base(prior)
    made: str | None = chain.pop()
    for delta in reversed(chain):
        made = None if made is None else whole_outline(delta, made)
    return made
