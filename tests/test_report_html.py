"""Tests for the HTML report (`_report/_html.py`) and its charts (`_report/_charts.py`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stableprompt import Ledger, UsageRecord
from stableprompt._cli import main
from stableprompt._report import _charts
from stableprompt._report._command import html_report, summarize

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
HOSTILE = "</code></td><script>alert('x')</script>&amp;"


def _rec(i: int, *, scenario: str = "s", session: str = "a", total: int = 4000,
         read: int = 0, verdict: str = "hit", detail: dict[str, Any] | None = None,
         model: str = "claude-sonnet-4-5") -> UsageRecord:
    write = total - read if verdict in ("cold", "client_mutation") else 0
    return UsageRecord(
        ts_utc=T0 + timedelta(seconds=30 * i), scenario=scenario, session_id=session, turn=i,
        wire_format="anthropic", provider="anthropic", model=model, input_tokens_total=total,
        cache_read_tokens=read, cache_write_tokens=write, uncached_tokens=total - read - write,
        output_tokens=20, predicted_cache_read_tokens=read,
        verdict=verdict,  # type: ignore[arg-type]
        verdict_detail=detail or {}, status_code=200)


def _mutation(i: int, **kwargs: Any) -> UsageRecord:
    detail = {"cause": "volatile-token", "segment": "system[0]", "segment_kind": "system",
              "path": "/system/0/text", "lost_tokens": 3900, "snippet_a": "Time: 10:00",
              "snippet_b": "Time: 10:05"}
    return _rec(i, verdict="client_mutation", detail=detail, **kwargs)


def _records() -> list[UsageRecord]:
    """Two scenarios, two sessions each; ``drift`` has a cliff (read share 97% -> 0%)."""
    out = []
    for n, scenario in enumerate(("stable", "drift")):
        for s in range(2):
            base = 40 * n + 10 * s
            out.append(_rec(base, scenario=scenario, session=f"s{s}", verdict="cold"))
            for i in range(1, 5):
                if scenario == "drift" and i == 3:
                    out.append(_mutation(base + i, scenario=scenario, session=f"s{s}"))
                else:
                    out.append(_rec(base + i, scenario=scenario, session=f"s{s}",
                                    total=4000 + 100 * i, read=3900 + 100 * (i - 1)))
    return sorted(out, key=lambda r: r.ts_utc)


def _ledger(path: Path, records: list[UsageRecord]) -> Path:
    with Ledger(path) as ledger:
        for record in records:
            assert ledger.write(record) == "committed"
    return path


def _svgs(page: str) -> list[str]:
    return re.findall(r"<svg.*?</svg>", page, flags=re.S)


# --------------------------------------------------------------------------- page


def test_page_has_two_matplotlib_charts_and_says_what_drew_them() -> None:
    """With matplotlib the page has the read-share and cost charts as inline SVG (well-formed
    XML, internal references only), names matplotlib and its version, and has no scripts."""
    import matplotlib

    report = summarize(_records())
    page = html_report(report, title="t")
    svgs = _svgs(page)
    assert len(svgs) == 2
    for svg in svgs:
        ET.fromstring(svg)
    assert f"Charts drawn by matplotlib {matplotlib.__version__}" in page
    assert "<script" not in page and "<link" not in page and "<img" not in page
    assert set(re.findall(r"(?:src|href)=\"(.)", page)) <= {"#"}  # only in-page references
    assert "drift: 2 sessions, 2 cliffs" in svgs[0] and "cliff: client-mutation" in svgs[0]
    drift = report.scenarios["drift"].totals
    assert f"${drift.cost_usd:,.4f} actual" in svgs[1]
    assert "<h2>Causes, by lost tokens</h2>" in page
    assert "Misses: calls that lost tokens (2)" in page
    assert "&#x27;Time: 10:00&#x27;" in page and "/system/0/text" in page


def test_user_strings_are_escaped_everywhere() -> None:
    """Scenario and session ids, paths and snippets holding markup (a ``<script>`` snippet)
    are escaped in the tables and in the charts' SVG text; a ``$`` stays a ``$``."""
    detail = {"cause": "volatile-token", "segment": "system[0]<b>", "segment_kind": "system",
              "path": "/system/0/<i>", "lost_tokens": 3900, "snippet_a": HOSTILE,
              "snippet_b": "<script src=https://example.com/x.js></script>"}
    scenario, session = "<script>s</script> $5 $6", "<img src=x onerror=alert(1)>"
    records = [_rec(0, scenario=scenario, session=session, verdict="cold"),
               _rec(1, scenario=scenario, session=session, total=4100, read=4000),
               _rec(2, scenario=scenario, session=session, verdict="client_mutation",
                    detail=detail)]
    page = html_report(summarize(records), title="<b>t</b>", intro=["<u>banner</u>"],
                       notes=["<em>note</em>"])
    assert "<script" not in page and "<img" not in page and "<b>" not in page
    assert "<i>" not in page and "<u>" not in page and "<em>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&amp;amp;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    for svg in _svgs(page):
        ET.fromstring(svg)
        assert "&lt;script&gt;s&lt;/script&gt; $5 $6" in svg


def test_without_matplotlib_the_tables_remain_and_each_chart_says_how(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With matplotlib not importable, the page has no chart, says in each chart's place how
    to get it (the report extra), and still has every table."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert _charts.plotting_library() is None
    page = html_report(summarize(_records()), title="t")
    assert "<svg" not in page
    assert page.count("Chart not drawn: matplotlib is not installed") == 2
    assert page.count("pip install &#x27;stableprompt[report]&#x27;") == 3  # + the drawn-by line
    for heading in ("<h2>Scenarios</h2>", "<h2>Turn boundary</h2>",
                    "<h2>Causes, by lost tokens</h2>", "<h2>Sessions</h2>"):
        assert heading in page
    assert "Misses: calls that lost tokens (2)" in page and "or more (2)" in page


def test_nothing_to_draw() -> None:
    """A report with no calls, or with no priced call, gets a line in place of the chart,
    not an empty figure."""
    page = html_report(summarize([]), title="t")
    assert "<svg" not in page and page.count("Nothing to draw") == 2
    unpriced = html_report(summarize(_records(), price=False), title="t")
    assert len(_svgs(unpriced)) == 1 and unpriced.count("Nothing to draw") == 1


def test_one_call_and_many_scenarios_draw_without_warnings() -> None:
    """A single call (a zero-width time axis) draws without warnings (they are errors here);
    past MAX_PANELS scenarios the chart says how many it left out."""
    assert len(_svgs(html_report(summarize([_rec(0, verdict="cold")]), title="t"))) == 2
    many = [_rec(i, scenario=f"s{i:02d}", verdict="cold") for i in range(_charts.MAX_PANELS + 2)]
    svgs = _svgs(html_report(summarize(many), title="t"))
    assert all("2 more scenarios not drawn" in svg for svg in svgs)


LAST_DATE = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
FIRST_DATE = datetime(1, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("dates", [[LAST_DATE], [T0, LAST_DATE], [FIRST_DATE, T0],
                                   [FIRST_DATE, LAST_DATE]],
                         ids=["9999", "2026-9999", "0001-2026", "0001-9999"])
def test_dates_at_the_ends_of_the_calendar_are_drawn(dates: list[datetime], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """`report --html` on calls dated 9999-12-31 or year 1 draws both charts (the time axis
    kept within matplotlib's years 1-9999), not a ValueError from matplotlib.dates."""
    records = [_rec(i, verdict="cold" if i == 0 else "hit", read=0 if i == 0 else 3900)
               .model_copy(update={"ts_utc": ts}) for i, ts in enumerate(dates)]
    db = _ledger(tmp_path / "calls.db", records)
    out = tmp_path / "r.html"
    assert main(["report", str(db), "--html", str(out)]) == 0
    capsys.readouterr()
    svgs = _svgs(out.read_text())
    assert len(svgs) == 2
    for svg in svgs:
        ET.fromstring(svg)


def test_charts_leave_matplotlib_settings_alone() -> None:
    """Drawing uses its own rc settings and never imports pyplot (no global backend)."""
    import matplotlib

    before = dict(matplotlib.rcParams)
    had_pyplot = "matplotlib.pyplot" in sys.modules
    html_report(summarize(_records()), title="t")
    assert dict(matplotlib.rcParams) == before
    assert ("matplotlib.pyplot" in sys.modules) == had_pyplot


# --------------------------------------------------------------------------- determinism, imports

_RENDER = """
import sys
from stableprompt._cli import main
sys.exit(main(["report", sys.argv[1], "--html", sys.argv[2]]))
"""


def test_what_if_is_a_section_of_the_page(tmp_path: Path) -> None:
    """``report --what-if --html``: the page has the what-if section (a table of the
    candidate policies like the text one, and the text report's sentences under it); without
    ``--what-if`` it has none."""
    db = _ledger(tmp_path / "calls.db", _records())
    with_it, without = tmp_path / "w.html", tmp_path / "p.html"
    assert main(["report", str(db), "--what-if", "--html", str(with_it)]) == 0
    assert main(["report", str(db), "--html", str(without)]) == 0
    page = with_it.read_text()
    section = page[page.index("<h2>What-if"):page.index("<h2>Sessions")]
    assert "<h3>anthropic (cheapest first)</h3>" in section
    for column in ("policy", "cost", "vs paid", "hit rate", "ttl expired", "keep-alives"):
        assert f"<th>{column}</th>" in section
    assert "<td>default</td>" in section and "<td>1h</td>" in section
    assert "calls replayed; paid $" in section and "hindsight bound" in section
    assert "CachePolicy.from_ledger: " in section
    assert "What-if" not in without.read_text()


def test_what_if_with_nothing_to_replay_says_so() -> None:
    """No priced call (an unknown model): the section says there is nothing to replay."""
    records = [_rec(i, model="no-such-model-x") for i in range(3)]
    page = html_report(summarize(records, what_if=True), title="t")
    assert "<h2>What-if" in page and "No call to replay" in page


def test_same_ledger_same_bytes(tmp_path: Path) -> None:
    """`report --html` on one ledger writes byte-identical pages in processes with different
    hash seeds (SVG ids salted, no dates in the metadata)."""
    db = _ledger(tmp_path / "calls.db", _records())
    pages = []
    for seed in ("0", "12345"):
        out = tmp_path / f"r{seed}.html"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-c", _RENDER, str(db), str(out)], check=True,
                       env=env, capture_output=True)
        pages.append(out.read_bytes())
    assert pages[0] == pages[1]
    assert b"<dc:date>" not in pages[0] and len(_svgs(pages[0].decode())) == 2


_LOADED = """
import io, contextlib, sys
from stableprompt._cli import main
import stableprompt._report._command
with contextlib.redirect_stdout(io.StringIO()):
    main(sys.argv[1:])
print(sorted(m for m in sys.modules if m.split(".")[0] in ("matplotlib", "playwright")))
"""


def test_matplotlib_is_imported_only_to_draw() -> None:
    """`stableprompt lint` and importing the report command load no matplotlib."""
    clean = Path(__file__).parent / "fixtures" / "lint" / "clean.jsonl"
    out = subprocess.run([sys.executable, "-c", _LOADED, "lint", "--json", str(clean)],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --------------------------------------------------------------------------- browser


@pytest.mark.browser
def test_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    """The written page renders in headless Chromium (file://, offline) to a PNG: no console
    errors, no request leaves the file, and both charts have a non-zero size."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is absent (Debian: apt-get install chromium; .ci/run does)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed")
    db = _ledger(tmp_path / "calls.db", _records())
    page_path = tmp_path / "r.html"
    assert main(["report", str(db), "--html", str(page_path)]) == 0
    problems: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: problems.append(str(exc)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri(), wait_until="load")
            sizes = page.evaluate("[...document.querySelectorAll('svg.chart')].map(s => {"
                                  "const r = s.getBoundingClientRect();"
                                  "return [r.width, r.height]; })")
            png = tmp_path / "r.png"
            page.screenshot(path=str(png), full_page=True)
        finally:
            browser.close()
    assert problems == []
    assert requests == [page_path.as_uri()]
    assert len(sizes) == 2 and all(w > 100 and h > 100 for w, h in sizes), sizes
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_session_ids_are_shown_short_as_in_the_text_report() -> None:
    """Long session ids (two UUIDv7 of one day, sharing their leading digits) are shown in the
    misses, cliffs and sessions tables as the text report shows them (``_ids.short_ids``),
    the full id in the cell's ``title``; the page never shows a full id as cell text."""
    from stableprompt._report._ids import short_ids

    uuids = ["019af3c2-7b1e-7cc0-9a57-2f0c5b8e41d3", "019af3c2-7b1e-7cc0-9a57-8e6d1a0f77b2"]
    records = sorted([_rec(10 * s + i, scenario=scenario, session=uuids[s], verdict="cold")
                      if i == 0 else
                      _mutation(10 * s + i, scenario=scenario, session=uuids[s]) if i == 3 else
                      _rec(10 * s + i, scenario=scenario, session=uuids[s],
                           total=4000 + 100 * i, read=3900 + 100 * (i - 1))
                      for scenario in ("drift",) for s in range(2) for i in range(5)],
                     key=lambda r: r.ts_utc)
    page = html_report(summarize(records), title="t")
    shown = short_ids(uuids)
    assert set(shown.values()) == {"…2f0c5b8e…", "…8e6d1a0f…"}
    for full in uuids:
        cell = f'<td title="{full}">{shown[full]}</td>'
        assert page.count(cell) == 3, full  # a miss, a cliff, a session row
        assert f">{full}<" not in page
