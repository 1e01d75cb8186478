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

__all__ = ["DELTA_PREFIX", "DIGEST_HEX", "delta_base", "whole_outline"]

DIGEST_HEX = 32
"""Hex digits of each segment's chained prefix digest in an outline (16 bytes)."""

DELTA_PREFIX = "2|"
"""How a delta outline (format 2) starts."""

_RECORD_ID = re.compile(r"[0-9a-f]{32}")


def delta_base(text: str) -> str | None:
    """The record id of the row a delta outline (format 2) continues, else ``None`` (a whole
    outline, or text that is not an outline)."""
    if not text.startswith(DELTA_PREFIX):
        return None
    parts = text.split("|", 3)
    return parts[1] if len(parts) == 4 and _RECORD_ID.fullmatch(parts[1]) else None


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
