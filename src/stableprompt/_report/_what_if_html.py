"""``stableprompt report --what-if --html PATH``: the what-if replay as an HTML section.

The same content as the text report (``_what_if_text``): one table per provider family, each
candidate policy's replayed cost, its difference from what was paid, hit rate,
``ttl_expired`` calls and keep-alive requests, then one column per request kind; under it the
sentences :func:`~stableprompt._report._what_if_text.what_if_lines` writes (what was paid,
the policy used replayed, the cheapest and its saving, the hindsight bound, the break-even
and the notes). Every text from the ledger is HTML-escaped; the same replay gives the same
bytes.
"""

from __future__ import annotations

import html

from .._accounting._what_if import WhatIf
from ._text import format_int, format_pct, format_usd
from ._what_if_text import what_if_lines

__all__ = ["what_if_section"]

_KINDS = ("main", "subagent", "one-shot")


def _signed_usd(value: float) -> str:
    return ("+" if value > 0 else "−" if value < 0 else "") + format_usd(abs(value))


def _table(provider: str, result: WhatIf) -> str:
    e = html.escape
    kinds = [k for k in _KINDS if any(k in o.by_kind for o in result.outcomes)]
    head = "".join(f"<th>{e(c)}</th>" for c in (
        "policy", "cost", "vs paid", "hit rate", "ttl expired", "keep-alives",
        *(f"{k} cost" for k in kinds)))
    rows = []
    for outcome in result.outcomes:
        cells = [format_usd(outcome.usd), _signed_usd(outcome.usd - result.recorded_usd),
                 format_pct(outcome.hit_rate), format_int(outcome.ttl_expired),
                 format_int(outcome.keepalive_pings),
                 *(format_usd(outcome.kind_usd(k)) for k in kinds)]
        rows.append(f"<tr><td>{e(outcome.policy.label())}</td>"
                    + "".join(f"<td class=n>{e(c)}</td>" for c in cells) + "</tr>")
    lines = "".join(f'<p class="note">{e(line.strip())}</p>' for line in what_if_lines(result))
    return (f"<h3>{e(provider)} (cheapest first)</h3><table><tr>{head}</tr>{''.join(rows)}"
            f"</table>{lines}")


def what_if_section(results: dict[str, WhatIf] | None) -> str:
    """The what-if section of the HTML report (module docstring): ``""`` when the report was
    made without the replay (``results`` is ``None``), a sentence saying why when there is
    nothing to replay."""
    if results is None:
        return ""
    title = ("<h2>What-if: the calls replayed under other cache policies</h2>"
             '<p class="note">Each policy\'s cost had the calls been sent with its TTLs (per '
             "breakpoint place and request kind) and keep-alive, at linear unit prices.</p>")
    if not results:
        return (f'{title}<p class="note">No call to replay (no provider with known usage and '
                "a priced model).</p>")
    return title + "".join(_table(provider, result) for provider, result in results.items())
