"""The detectors behind :func:`stableprompt._volatility.scan_volatile`: patterns and scanner.

Everything here works on raw candidates, ``(start, end, kind)`` character spans that may
overlap: the compiled patterns and word lists, :class:`Scanner` (which finds the digit runs of
a text and tries only the few anchored patterns that fit each run's length and neighbours),
the heuristics that tell random ids from identifiers, and :func:`suppress_examples` (documented
values: examples, formats, defaults, fixed dates). Resolving overlaps, byte offsets and the
public API live in :mod:`stableprompt._volatility`, whose docstring lists the kinds and what is
deliberately not flagged.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["Candidate", "Scanner", "line_candidates", "suppress_examples"]

# --------------------------------------------------------------------------------------------
# Pattern pieces. Digit-first patterns are only ever tried at the start of a digit run whose
# left neighbour is not a letter or digit (see ``_boundary_before``), so they need no leading
# lookbehind. ``_NRB`` is the right boundary of a numeric token: not glued to a letter/digit and
# not continuing a dotted/colon/slash/dash number ("1.2.2026.5", "10:30:45:12").
_NRB = r"(?![^\W_])(?![.:/-][0-9])"
_YEAR = r"(?:19|20)[0-9][0-9]"
_MM = r"(?:0[1-9]|1[0-2])"
_DD = r"(?:0[1-9]|[12][0-9]|3[01])"
_HMS = r"(?:[01][0-9]|2[0-3]):[0-5][0-9](?::[0-5][0-9](?:[.,][0-9]{1,9})?)?"
_TZ = (
    r"(?:\s?(?:Z|UTC|GMT|UT)(?:[+-](?:[01]?[0-9]|2[0-3])(?::?[0-5][0-9])?)?(?![^\W_])"
    r"|\s?[+-](?:[01][0-9]|2[0-3]):?[0-5][0-9](?![0-9])"
    r"|\s[A-Z]{1,4}T(?![^\W_]))?"
)
_AMPM = r"\s?[AaPp](?:\.[Mm]\.|[Mm])(?![^\W_])"
# A clock time without boundaries; the hour is validated in Python (_clock_ok).
_CLOCK_CORE = rf"[0-9]{{1,2}}:[0-5][0-9](?::[0-5][0-9](?:[.,][0-9]{{1,9}})?)?(?:{_AMPM})?"

_ISO_RE = re.compile(  # 2026-11-30, 2026/11/30, with an optional ISO / file-name style time
    rf"{_YEAR}(?P<sep>[-/.]){_MM}(?P=sep){_DD}"
    rf"(?:(?P<t>(?:[T ]|\s?T\s?){_HMS}{_TZ})"
    rf"|(?P<ft>[T_ -](?:[01][0-9]|2[0-3])(?P<fs>[-.])[0-5][0-9](?P=fs)[0-5][0-9]))?{_NRB}"
)
_ISO_BASIC_RE = re.compile(  # 20261130T140322Z
    rf"{_YEAR}{_MM}{_DD}T(?:[01][0-9]|2[0-3])[0-5][0-9](?:[0-5][0-9](?:\.[0-9]+)?)?"
    rf"(?:Z|[+-][0-9]{{4}})?{_NRB}"
)
_NUMERIC_DATE_RE = re.compile(rf"([0-9]{{1,2}})([/.-])([0-9]{{1,2}})\2{_YEAR}{_NRB}")
_CLOCK_RE = re.compile(
    rf"(?P<h>[0-9]{{1,2}}):(?P<m>[0-5][0-9])(?::(?P<s>[0-5][0-9])(?:[.,][0-9]{{1,9}})?)?"
    rf"(?P<ampm>{_AMPM})?{_TZ}{_NRB}"
)
_RANGE_TAIL_RE = re.compile(rf"\s*(?:-|–|—|to|until|till)\s*{_CLOCK_CORE}(?![^\W_])", re.I)
_RANGE_HEAD_RE = re.compile(rf"(?<![^\W_]){_CLOCK_CORE}\s*(?:-|–|—|to|until|till)\s*$", re.I)
# After the day of a named date: "30", "30th, 2026", "30 14:03:22 2026" (ctime).
_DAY_TAIL_RE = re.compile(
    rf"(?P<d>[0-9]{{1,2}})(?:st|nd|rd|th)?"
    rf"(?:(?P<ctime>\s+{_HMS}\s+{_YEAR})|,?\s+(?P<y>{_YEAR}))?{_NRB}"
)
# Day-first named dates: "30 November 2026", "30th of Nov".
_DAY_FIRST_RE = re.compile(
    rf"(?P<d>[0-9]{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>[A-Za-z]{{3,9}})\.?"
    rf"(?:,?\s+(?P<y>{_YEAR}))?{_NRB}"
)
_DATE_TIME_JOIN_RE = re.compile(r"(?:,?\s+(?:at\s+|@\s*)?|T)", re.I)
_EPOCH_RE = re.compile(r"(?:[0-9]{13}|[0-9]{10}(?:\.[0-9]{1,9})?)(?![\w]|[.,][0-9])")
_PHONE_BEFORE_RE = re.compile(r"(?:\+[0-9]{1,3}[\s.-]?|(?:tel|phone|fax|mobile)\W{0,3})$", re.I)
_UUID_RE = re.compile(
    r"(?<![0-9A-Za-z])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
    r"-[0-9a-fA-F]{12}(?![0-9A-Za-z])"
)
_HEX_RE = re.compile(r"(?<![0-9A-Za-z])(?:0[xX])?[0-9a-fA-F]{16,}(?![0-9A-Za-z])")
_ID_TAIL_RE = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")
_JWT_RE = re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*(?![A-Za-z0-9_-])")
_B64_SPLIT_RE = re.compile(r"[-_+/=]+")
_WORDY_RE = re.compile(r"[A-Z][a-z]{2,}|[a-z]{4,}|[A-Z]{5,}")
_DIGIT_GROUP_RE = re.compile(r"[0-9]+")
_LETTER_GROUP_RE = re.compile(r"[A-Za-z]+")
_PLAIN_WORD_RE = re.compile(r"[a-z]{2,}|[A-Z][a-z]+|[A-Z]{2,5}|[0-9]{1,4}")
_ALPHABET_RE = re.compile(r"0123456789|abcdefgh|ABCDEFGH")
_NONCE_TAIL_RE = re.compile(r"[A-Za-z0-9._+/-]*=*")
_NONCE_LABEL_RE = re.compile(
    r"(?:(?<=\\[nrt])|(?<![^\W_]))"
    r"(?:c?nonce|request[-_ ]?id|req[-_]?id|trace[-_ ]?id|span[-_ ]?id|correlation[-_ ]?id"
    r"|session[-_ ]?(?:id|key|token)|idempotency[-_ ]?key|run[-_ ]?id|invocation[-_ ]?id"
    r"|execution[-_ ]?id|job[-_ ]?id|cache[-_ ]?buster|csrf[-_ ]?token|build[-_ ]?id)"
    r"(?:\\?[\"'])?\s*[:=]\s*(?:\\?[\"'])?$",
    re.I,
)
_COUNTER_PROGRESS_RE = re.compile(r"\s*(?:of|/)\s*[0-9]{1,6}(?![^\W_])", re.I)
_COUNTER_BARE_END_RE = re.compile(r"\s*(?:$|[\])},;|]|\.(?:\s|$)|\\[nrt])", re.M)
_COUNTER_LABELS = frozenset(
    ["turn", "step", "attempt", "iteration", "round", "retry", "try", "run", "cycle", "loop"]
)
_COUNTER_KV_LABELS = frozenset(["turn", "iteration", "attempt", "retry", "step"])
_COUNTER_BARE_LABELS = frozenset(["turn", "iteration", "attempt"])
_MONTHS = frozenset(
    (
        "jan", "january", "feb", "february", "mar", "march", "apr", "april", "may", "jun",
        "june", "jul", "july", "aug", "august", "sep", "sept", "september", "oct", "october",
        "nov", "november", "dec", "december",
    )
)  # fmt: skip
_WEEKDAYS = frozenset(
    (
        "mon", "monday", "tue", "tues", "tuesday", "wed", "wednesday", "thu", "thur", "thurs",
        "thursday", "fri", "friday", "sat", "saturday", "sun", "sunday",
    )
)  # fmt: skip
# Example markers: a span right after one of these (or in the list that follows) is skipped.
_EXAMPLE_BEFORE_RE = re.compile(
    r"(?:\be\.?g\b\.?|\bi\.e\.|\bfor (?:example|instance)|\bsuch as|\blike|\bexamples?"
    r"|\bdefaults?(?: to| is)?|\bsamples?|\bformat(?:ted)?(?: as| of| is| like)?)"
    r"[\s\"'`:=,(\[{\\]*"
    # one more example in between: "e.g. '20210101' for January 1st, 2021"
    r"(?:[^\s\"'`]{1,24}[\"'`]?\s*(?:or|and|to|for|represents|means|is|=)[\s\"'`(\[\\]*)?$",
    re.I,
)
_LIST_SEPARATOR_RE = re.compile(
    r"[\s\"'`,;/|()\[\]\\=]*(?:(?:or|and|to|for|through|until|represents|means|vs\.?)"
    r"[\s\"'`,(\[\\]*)?",
    re.I,
)
# Dates stated as fixed facts: "released 2024-09-13", "API version 2023-06-01",
# "shutdown date: 2026-08-10", "must be after 14/03/2024".
_FIXED_DATE_BEFORE_RE = re.compile(
    r"\b(?:released?|deprecated|shutdown|sunset|retire[sd]?|cut-?off|versions?|since|after"
    r"|before|between|effective|expir(?:es|ed|y|ation)|launched|published|founded|born)\b"
    r"(?:\s+[A-Za-z]{1,8}){0,2}[\s\"'`:=(\[\\]*$",
    re.I,
)
_DATE_KINDS = frozenset({"date", "timestamp"})
# Cheap substring pre-checks (lowercase) before the regexes above: each regex matches only
# if one of its hints occurs in the window.
_EXAMPLE_HINTS = (
    "e.g",
    "eg",
    "i.e.",
    "example",
    "instance",
    "such as",
    "like",
    "default",
    "sample",
    "format",
)
_FIXED_DATE_HINTS = (
    "releas",
    "deprecat",
    "shutdown",
    "sunset",
    "retire",
    "cut",
    "version",
    "since",
    "after",
    "before",
    "between",
    "effective",
    "expir",
    "launched",
    "published",
    "founded",
    "born",
)
# -- short key=value nonces ("cch=36ee5"), paths, environment and model lines -------------------
#: A ``key=value`` / ``key: value`` separator followed by a 5-15 character letters-and-digits
#: value (``:`` may be followed by spaces, ``=`` not); the key is read back from it
#: (``_kv_key``), so the regex engine, not Python, walks the text.
_KV_SEP_RE = re.compile(
    r"(?:=|:[ \t]*)(?=(?P<v>[0-9A-Za-z]{5,15})(?![0-9A-Za-z_-]|\.[0-9A-Za-z]))")
_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
#: Last ``_``/``-`` part of a key that names a per-request value (``x_cache_key``, ``sid``).
_NONCE_KEY_PARTS = frozenset({
    "nonce", "id", "rid", "sid", "tid", "uid", "token", "tok", "hash", "sig", "signature",
    "salt", "cch", "session", "sess", "trace", "span", "seed", "state", "etag", "cb", "rnd",
    "rand", "random", "bust", "buster", "key", "ts", "request", "req", "run", "build",
})
_HEX_CHARS = frozenset("0123456789abcdef")
_LETTER_RUN4_RE = re.compile(r"[A-Za-z]{4,}")
_PLACEHOLDER_USERS = frozenset({
    "user", "username", "you", "me", "name", "example", "your-name", "yourname", "your_name",
    "someone", "foo", "bar", "alice", "bob", "john", "jane", "demo", "test", "runner",
})
# Home and temp-dir paths: they name one machine, user or run. "/tmp" and "/home" alone, and
# placeholder users ("/home/user", "/Users/<you>"), are stable documentation.
_PATH_RE = re.compile(
    r"(?<![\w.~/\\-])"
    r"(?:(?:/private)?/var/folders/[A-Za-z0-9_+-]+"
    r"|/tmp/(?=[^/\s\"'`]*[0-9])[A-Za-z0-9._-]+"
    r"|/(?:home|Users)/(?P<user>[A-Za-z0-9._-]+)"
    r"|[A-Za-z]:\\{1,2}Users\\{1,2}(?P<wuser>[A-Za-z0-9._ -]+?)(?=\\|$|[\s\"'`]))"
    r"(?:[/\\][^\s\"'`<>|,;)\]]*)?"
)
_PATH_HINTS = ("/home/", "/Users/", "/tmp/", "/var/folders/", ":\\Users\\", ":\\\\Users")
# "Working directory: /x", "cwd=/x", "hostname: box-12", "Current branch: feat/x",
# "On branch main": what an agent harness's env block says about this machine and checkout.
# "Host: devbox-7" and "git status: 3 files modified, branch main" (a one-line summary) too.
_ENV_LINE_RE = re.compile(
    r"^[ \t>*-]*(?:(?:current |present )?working[ _-]?dir(?:ectory)?|cwd|pwd"
    r"|current[ _-]?dir(?:ectory)?|host(?:[ _-]?name)?|machine[ _-]?name"
    r"|(?:current|git)[ _-]?branch|git[ _-]?status"
    r")[ \t]*[:=][ \t]*(?P<v>\S[^\n]*?)[ \t]*$"
    r"|^[ \t]*On branch (?P<b>\S+)[ \t]*$",
    re.I | re.M,
)
_ENV_HINTS = ("dir", "cwd", "pwd", "host", "machine", "branch", "status")
#: Host values that name no one machine (an HTTP example's ``Host:`` header, loopback).
_STABLE_HOSTS_RE = re.compile(
    r"(?:localhost|127\.0\.0\.1|0\.0\.0\.0|\[?::1\]?|(?:[\w-]+\.)*example\.(?:com|org|net))"
    r"(?::[0-9]+)?",
    re.I,
)
# Porcelain status lines after a "Status:" / "git status" header, and commit lines after
# "Recent commits:": the working tree's state at one moment.
_GIT_BLOCK_RE = re.compile(
    r"^[ \t]*(?:git ?status|status|recent commits)[ \t]*:[^\n]*\n"
    r"(?P<body>(?:[ \t]*(?:[MADRCU?! ]{1,2} \S[^\n]*|[0-9a-f]{7,12} [^\n]*)(?:\n|$))+)",
    re.I | re.M,
)
_GIT_ENTRY_RE = re.compile(r"^[ \t]*(?:[MADRCU?! ]{1,2} \S[^\n]*|[0-9a-f]{7,12} [^\n]*)$", re.M)
# The model or provider named in the head: a model switch then changes the head's bytes.
_MODEL_ID = (r"(?:claude|gpt|chatgpt|o[1-9]|gemini|gemma|llama|mistral|mixtral|codestral"
             r"|deepseek|qwen|grok|command|phi|kimi|glm)(?:[-.:/_][A-Za-z0-9.:_-]*)?"
             r"(?<![.:_-])")
_PROVIDERS = (r"anthropic|openai|google|vertex(?: ai)?|gemini|mistral|deepseek|meta|x\.?ai"
              r"|azure(?: openai)?|bedrock|amazon bedrock|openrouter|ollama|groq|together(?: ai)?")
_MODEL_LINE_RE = re.compile(
    r"^[ \t>*-]*(?:model(?:[ _-]?(?:id|name))?|llm|provider|ai[ _-]?provider|api[ _-]?provider)"
    rf"[ \t]*[:=][ \t]*(?P<v>(?:{_MODEL_ID}|{_PROVIDERS})(?![\w-]))[ \t.]*$"
    rf"|\b(?:powered by|the exact model id is|model (?:named|called)|you are running on)"
    rf"[ \t]+(?:the[ \t]+)?(?:model[ \t]+)?"
    rf"(?P<p>{_MODEL_ID}(?:[ \t]+(?:(?-i:[A-Z][a-z]+)|[0-9]+(?:\.[0-9]+)?)(?![\w-])){{0,3}})"
    r"(?![\w-])"
    # "You are running on provider anthropic": a provider only where the model is meant
    # ("powered by Google" may describe a tool's backend, stable content).
    rf"|\b(?:you are|you're) running on[ \t]+(?:the[ \t]+)?(?:provider[ \t]+)?"
    rf"(?P<q>{_PROVIDERS})(?![\w-])",
    re.I | re.M,
)
_MODEL_HINTS = ("model", "llm", "provider", "powered by", "running on")

_EXAMPLE_WINDOW = 40
_EPOCH_MIN = 1_000_000_000  # 2001-09-09T01:46:40Z, the first 10-digit second
_EPOCH_MAX = 4_102_444_800  # 2100-01-01T00:00:00Z
_WELL_KNOWN_NUMBERS = frozenset({"2147483647", "2147483648", "1234567890", "4294967295"})
_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-")
_NONCE_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._+/-")
_SPACE = frozenset(" \t")

Candidate = tuple[int, int, str]
"""A raw span: ``(start, end, kind)``, character offsets, half-open."""


def _digit_runs(text: str) -> list[tuple[int, int]]:
    """Maximal runs of ASCII digits as (start, end), in order.

    Sparse digits (prose, schemas): one memchr pass per digit character. Dense digits (logs,
    tables): one regex pass.
    """
    positions: list[int] = []
    dense = len(text) // 32
    find = text.find
    for digit in "0123456789":
        i = find(digit)
        while i != -1:
            positions.append(i)
            i = find(digit, i + 1)
        if len(positions) > dense:
            return [m.span() for m in _DIGIT_GROUP_RE.finditer(text)]
    if not positions:
        return []
    positions.sort()
    runs: list[tuple[int, int]] = []
    start = prev = positions[0]
    for p in positions[1:]:
        if p != prev + 1:
            runs.append((start, prev + 1))
            start = p
        prev = p
    runs.append((start, prev + 1))
    return runs


def _boundary_before(text: str, i: int) -> bool:
    """True if position ``i`` starts a token: no letter/digit before it, or a JSON escape."""
    if i == 0:
        return True
    ch = text[i - 1]
    if not ch.isalnum():
        return True
    return ch in "nrt" and i >= 2 and text[i - 2] == "\\"


def _word_before(text: str, i: int, skip: str) -> tuple[str, int]:
    """The letters-only word ending before ``i`` after skipping ``skip`` chars: (word, start)."""
    j = i
    while j > 0 and text[j - 1] in skip:
        j -= 1
    k = j
    while k > 0 and text[k - 1].isalpha() and j - k < 12:
        if k >= 2 and text[k - 2] == "\\" and text[k - 1] in "nrt":
            break  # a JSON escape ("\\nTurn") is not part of the word
        k -= 1
    if k == j or not _boundary_before(text, k):
        return "", i
    return text[k:j], k


_PLACEHOLDER_UUIDS = frozenset(
    {
        "12345678123456781234567812345678",
        "123e4567e89b12d3a456426614174000",  # the RFC 4122 / Wikipedia example
        "123e4567e89b42d3a456556642440000",
    }
)


def _placeholder_hex(value: str) -> bool:
    """Documentation placeholders: one repeated digit, counting sequences, well-known UUIDs."""
    body = value.replace("-", "").lower()
    return (
        len(set(body)) <= 2 or "123456789" in body or "abcdef" in body or body in _PLACEHOLDER_UUIDS
    )


def _clock_ok(m: re.Match[str]) -> bool:
    hour = m.group("h")
    if m.group("ampm"):
        return 1 <= int(hour) <= 12
    if m.group("s") is not None:
        return int(hour) <= 23
    return len(hour) == 2 and int(hour) <= 23


def _round_clock(m: re.Match[str]) -> bool:
    """Round times (xx:00/15/30/45, seconds 00 or none) and 23:59(:59) are formats/schedules."""
    minute, second = m.group("m"), m.group("s")
    if m.group("h") == "23" and minute == "59" and second in (None, "59"):
        return True
    return minute in ("00", "15", "30", "45") and second in (None, "00")


class Scanner:
    """Collects raw candidates for one text; overlaps are resolved by the caller.

    ``Scanner(text).run()`` returns every :data:`Candidate` found, possibly overlapping and
    not sorted; each needs an ASCII digit, so text without digits yields none.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.out: list[Candidate] = []
        self.dates: list[tuple[int, int]] = []
        self.clocks: dict[int, tuple[int, bool]] = {}  # start -> (end, is_round)
        self.skip_clock: set[int] = set()
        self.id_end = -1
        self.nonce_end = -1

    def run(self) -> list[Candidate]:
        text = self.text
        n = len(text)
        for a, b in _digit_runs(text):
            length = b - a
            nxt = text[b] if b < n else ""
            if _boundary_before(text, a):
                if length == 4 and nxt in "-/.":
                    self._iso(a)
                elif length == 8 and nxt == "T":
                    m = _ISO_BASIC_RE.match(text, a)
                    if m:
                        self.out.append((a, m.end(), "timestamp"))
                elif length <= 2:
                    if nxt == ":":
                        self._clock(a)
                    elif nxt in "/.-":
                        self._numeric_date(a)
                    elif nxt and (nxt.isspace() or nxt in "snrt"):
                        self._day_first(a)
                elif length in (10, 13):
                    self._epoch(a)
            if length <= 2 and a > 0 and text[a - 1] in _SPACE:
                self._day_after_month(a)
            if length <= 6 and a > 0 and (text[a - 1].isspace() or text[a - 1] in "#:"):
                self._counter(a, b)
            if a >= self.id_end:
                self._id_run(a, b)
            if a >= self.nonce_end:
                self._nonce(a, b)
        if "=" in text or ":" in text:
            self._kv_nonces()
        for start, end in self.dates:
            self.out.append((start, end, "date"))
            join = _DATE_TIME_JOIN_RE.match(text, end)
            if join is not None and join.end() in self.clocks:
                self.out.append((start, self.clocks[join.end()][0], "timestamp"))
        for start, (end, is_round) in self.clocks.items():
            if not is_round and start not in self.skip_clock:
                self.out.append((start, end, "clock-time"))
        return self.out

    # -- dates and times ----------------------------------------------------------------------
    def _iso(self, a: int) -> None:
        m = _ISO_RE.match(self.text, a)
        if m is None:
            return
        if m.group("t") or m.group("ft"):
            self.out.append((a, m.end(), "timestamp"))
        elif not (
            (a >= 2 and self.text[a - 1] in "-_" and self.text[a - 2].isalnum())
            or (a >= 1 and self.text[a - 1] == "/")
        ):  # not a versioned name ("gpt-4.1-2025-04-14") nor a path ("spec/2025-06-18/")
            self.dates.append((a, m.end()))

    def _numeric_date(self, a: int) -> None:
        m = _NUMERIC_DATE_RE.match(self.text, a)
        if m is None:
            return
        x, y = int(m.group(1)), int(m.group(3))
        if x >= 1 and y >= 1 and ((x <= 12 and y <= 31) or (y <= 12 and x <= 31)):
            self.dates.append((a, m.end()))

    def _clock(self, a: int) -> None:
        text = self.text
        if a > 1 and text[a - 1] in ".:" and text[a - 2].isdigit():
            return
        m = _CLOCK_RE.match(text, a)
        if m is None or not _clock_ok(m):
            return
        if (a > 0 and text[a - 1] == "[") or text.startswith("]", m.end()):
            return  # a slice, "data[12:16]"
        tail = _RANGE_TAIL_RE.match(text, m.end())
        if tail is not None or _RANGE_HEAD_RE.search(text, max(0, a - 24), a):
            self.skip_clock.add(a)  # a schedule ("09:00-17:00"), not a clock
        self.clocks[a] = (m.end(), _round_clock(m))

    def _day_after_month(self, a: int) -> None:
        """Named month-first dates: "Nov 30, 2026", "Monday, November 30", ctime."""
        text = self.text
        month, start = _word_before(text, a, " \t.")
        if month.lower() not in _MONTHS:
            return
        m = _DAY_TAIL_RE.match(text, a)
        if m is None or not 1 <= int(m.group("d")) <= 31:
            return
        weekday, wd_start = _word_before(text, start, " \t,.")
        has_weekday = weekday.lower() in _WEEKDAYS
        if has_weekday:
            start = wd_start
        if m.group("ctime"):
            if has_weekday:
                self.out.append((start, m.end(), "timestamp"))
        elif m.group("y") or has_weekday:
            self.dates.append((start, m.end()))

    def _day_first(self, a: int) -> None:
        """Day-first named dates: "30 November 2026", "Mon, 30 Nov 2026"."""
        m = _DAY_FIRST_RE.match(self.text, a)
        if m is None or m.group("mon").lower() not in _MONTHS:
            return
        if not 1 <= int(m.group("d")) <= 31:
            return
        weekday, wd_start = _word_before(self.text, a, " \t,.")
        has_weekday = weekday.lower() in _WEEKDAYS
        if m.group("y") or has_weekday:
            self.dates.append((wd_start if has_weekday else a, m.end()))

    def _epoch(self, a: int) -> None:
        text = self.text
        if a > 0 and text[a - 1] in "$€£#+.,/-":
            return
        m = _EPOCH_RE.match(text, a)
        if m is None:
            return
        digits = m.group().split(".", 1)[0]
        value = int(digits) // (1000 if len(digits) == 13 else 1)
        if digits[:10] in _WELL_KNOWN_NUMBERS or len(set(digits)) <= 2 or digits.endswith("000000"):
            return  # INT32_MAX, "1234567890", 2000000000: constants and placeholders
        if _EPOCH_MIN <= value < _EPOCH_MAX and not _PHONE_BEFORE_RE.search(
            text, max(0, a - 12), a
        ):
            self.out.append((a, m.end(), "epoch"))

    # -- counters -----------------------------------------------------------------------------
    def _counter(self, a: int, b: int) -> None:
        """ "Turn 17", "Step 4 of 10", "attempt #3", "turn: 5", "retry_count: 2"."""
        text = self.text
        j = a
        while j > 0 and text[j - 1] in _SPACE:
            j -= 1
        if b < len(text) and text[b].isalnum():
            return  # "4xx", "3rd"
        sep = ""
        if j > 0 and text[j - 1] in "#:":
            sep = text[j - 1]
            j -= 1
            while j > 0 and text[j - 1] in _SPACE:
                j -= 1
        word, start = _word_before(text, j, "")
        label = word.lower()
        if label in ("count", "number", "no") and start > 0 and text[start - 1] in "-_ ":
            base, base_start = _word_before(text, start - 1, "")
            if sep == ":" and base.lower() in _COUNTER_KV_LABELS:
                self.out.append((base_start, b, "counter"))
            return
        if label not in _COUNTER_LABELS or (not sep and j == a):
            return
        progress = _COUNTER_PROGRESS_RE.match(text, b)
        if progress is not None and sep in ("", "#"):
            self.out.append((start, progress.end(), "counter"))
        elif (
            sep == "#"
            or (sep and label in _COUNTER_KV_LABELS)
            or (not sep and label in _COUNTER_BARE_LABELS and _COUNTER_BARE_END_RE.match(text, b))
        ):
            self.out.append((start, b, "counter"))

    # -- ids ----------------------------------------------------------------------------------
    def _id_run(self, a: int, b: int) -> None:
        """Classify the run of base64/base64url characters around a digit run."""
        text = self.text
        start, end = _extent(text, a, b, _ID_CHARS, _ID_TAIL_RE)
        self.id_end = end
        if start >= 2 and text[start - 1] == "\\" and text[start] in "nrt":
            start += 1  # a JSON escape letter is not part of the token
        if text.startswith("eyJ", start):
            jwt = _JWT_RE.match(text, start)
            if jwt is not None:
                self.id_end = jwt.end()
                self.out.append((start, jwt.end(), "base64-id"))
                return
        if end - start < 16:
            return
        for m in _UUID_RE.finditer(text, start, end):
            if not _placeholder_hex(m.group()):
                self.out.append((m.start(), m.end(), "uuid"))
        for m in _HEX_RE.finditer(text, start, end):
            body = m.group()
            if body[:2] in ("0x", "0X"):
                body = body[2:]
            digits = sum(ch.isdigit() for ch in body)
            if (
                len(body) >= 16
                and 2 <= digits <= len(body) - 2
                and (body.islower() or body.isupper())
                and not _placeholder_hex(body)
            ):
                self.out.append((m.start(), m.end(), "hex-id"))
        if end - start >= 20:
            self._base64(start, end)

    def _base64(self, start: int, end: int) -> None:
        text = self.text
        run = text[start:end]
        if "/" in run and (
            (start > 0 and text[start - 1] in ".:~")
            or run.startswith("/")
            or any(_PLAIN_WORD_RE.fullmatch(piece) for piece in run.split("/"))
        ):
            offset = start  # a path or URL: judge each "/"-separated piece on its own
            for piece in run.split("/"):
                if len(piece) >= 20 and _run_is_id(piece):
                    self.out.append((offset, offset + len(piece), "base64-id"))
                offset += len(piece) + 1
        elif _run_is_id(run):
            self.out.append((start, end, "base64-id"))

    def _nonce(self, a: int, b: int) -> None:
        """The value of a labelled id (``request_id=...``) around a digit run."""
        text = self.text
        start, end = _extent(text, a, b, _NONCE_CHARS, _NONCE_TAIL_RE)
        self.nonce_end = end
        while end > start and text[end - 1] in ".":
            end -= 1
        if not 6 <= end - start <= 128 or not text[start].isalnum():
            return
        j = start
        while j > 0 and text[j - 1] in " \t\"'\\":
            j -= 1
        if j == 0 or text[j - 1] not in ":=":
            return
        if sum(ch.isdigit() for ch in text[start:end]) < 2 or text.startswith("(", end):
            return  # "hashlib.sha1(...)": code, not a value
        if _NONCE_LABEL_RE.search(text, max(0, start - 48), start):
            self.out.append((start, end, "nonce"))


    def _kv_nonces(self) -> None:
        """Short ``key=value`` / ``key: value`` nonces: ``cch=36ee5``, ``trace: 9f8e7d6c5b``,
        ``sid=a8k3z9``. A single-case hex value of 5 to 15 characters with letters and digits
        is a nonce under any key after ``=`` (16+ is a ``hex-id``), after ``:`` from 8
        characters or under a nonce-like key (``Color: FF5733`` is prose); another
        letters-and-digits value only under a nonce-like key. Numbers alone
        (``version=12345``, ``port: 8080``) are never one: sizes, versions and limits are
        stable. Each separator (found by ``str.find``) is matched with a value after it; only
        those read their key back."""
        text = self.text
        for m in _kv_separators(text):
            key = _kv_key(text, m.start())
            if key is None:
                continue
            value = m.group("v")
            lower = value.lower()
            digits = sum(ch.isdigit() for ch in value)
            if not digits or digits == len(value) or _placeholder_hex(value):
                continue
            hexy = set(lower) <= _HEX_CHARS and (value.islower() or value.isupper())
            part = re.split(r"[_-]", key.lower())[-1]
            if hexy and text[m.start()] == ":" and len(value) < 8 and part not in _NONCE_KEY_PARTS:
                continue  # prose: "Color: FF5733", "state: CA94105" are not ids
            if hexy or (part in _NONCE_KEY_PARTS and digits >= 2
                        and len(_DIGIT_GROUP_RE.findall(value)) >= 2
                        and not _LETTER_RUN4_RE.search(value)):
                self.out.append((m.start("v"), m.end("v"), "nonce"))


def _kv_separators(text: str) -> Iterator[re.Match[str]]:
    """The matches of ``_KV_SEP_RE.finditer(text)``, in order, found at the ``=`` and ``:``
    of ``text`` (``str.find``) instead of by the regex engine stepping through every
    character (a 10 KB system prompt with a few separators: ~70 us to a few). The same
    matches: one can start only at a separator, and what one consumes (``=``, or ``:`` and
    blanks) holds no other separator, so no later match starts inside it
    (``tests/test_volatility.py`` checks them against ``finditer``)."""
    positions: list[int] = []
    for separator in "=:":
        at = text.find(separator)
        while at != -1:
            positions.append(at)
            at = text.find(separator, at + 1)
    positions.sort()
    match = _KV_SEP_RE.match
    for at in positions:
        found = match(text, at)
        if found is not None:
            yield found


def _kv_key(text: str, sep: int) -> str | None:
    """The key right before the separator at ``sep``: 1-32 of ``[A-Za-z0-9_-]`` starting with
    a letter or ``_``, not glued to a word, a dot or a dash before it; else ``None``."""
    start = sep
    while start > 0 and sep - start < 32 and text[start - 1] in _KEY_CHARS:
        start -= 1
    if start == sep or (start > 0 and (text[start - 1] in _KEY_CHARS or text[start - 1] == "."
                                       or text[start - 1].isalnum())):
        return None
    if not (text[start].isalpha() or text[start] == "_") or not text[start].isascii():
        return None
    return text[start:sep]


def line_candidates(text: str) -> list[Candidate]:
    """Candidates that need no digit: home / temp-dir paths (``path``), ``environment`` lines (the
    working directory, hostname, git branch and status of one machine and checkout) and
    ``model-name`` lines (``Model: claude-sonnet-4-5``, ``powered by gpt-5.2``). Each regex
    runs only when a cheap substring hint occurs in the text."""
    out: list[Candidate] = []
    if any(hint in text for hint in _PATH_HINTS):
        for m in _PATH_RE.finditer(text):
            user = m.group("user") or m.group("wuser")
            if user is not None and (user.lower() in _PLACEHOLDER_USERS or user.startswith("<")):
                continue
            end = m.end()
            while end > m.start() and text[end - 1] in ".:":
                end -= 1  # a sentence's full stop is not part of the path
            out.append((m.start(), end, "path"))
    lower = text.lower()
    if any(hint in lower for hint in _ENV_HINTS):
        for m in _ENV_LINE_RE.finditer(text):
            group = "v" if m.group("v") is not None else "b"
            if group == "v" and _STABLE_HOSTS_RE.fullmatch(m.group("v")):
                continue  # "Host: localhost", "Host: api.example.com": no one machine
            if group == "v" and any(c in m.group("v") for c in " \t") and m.group(0).lstrip(
                    " \t>*-").lower().startswith(("host", "machine")):
                continue  # "Host: the person who runs the meeting": prose, not a host name
            out.append((m.start(group), m.end(group), "environment"))
    if "status" in lower or "commits" in lower:
        for block in _GIT_BLOCK_RE.finditer(text):
            for m in _GIT_ENTRY_RE.finditer(text, block.start("body"), block.end("body")):
                line_end = m.end() if not text.endswith("\n", 0, m.end()) else m.end() - 1
                start = m.start() + len(m.group()) - len(m.group().lstrip(" \t"))
                out.append((start, line_end, "environment"))
    if any(hint in lower for hint in _MODEL_HINTS):
        for m in _MODEL_LINE_RE.finditer(text):
            group = next(g for g in ("v", "p", "q") if m.group(g) is not None)
            out.append((m.start(group), m.end(group), "model-name"))
    return out


def _extent(
    text: str, a: int, b: int, chars: frozenset[str], tail: re.Pattern[str]
) -> tuple[int, int]:
    """The token around the digit run ``text[a:b]``: ``chars`` extend it to the left, ``tail``
    (matched at ``b``) to the right. Returns ``(start, end)``, character offsets."""
    start = a
    while start > 0 and text[start - 1] in chars:
        start -= 1
    m = tail.match(text, b)
    return start, m.end() if m is not None else b


def _run_is_id(run: str) -> bool:
    """Whether a base64/base64url run is an id: a long chunk of it, or all of it, looks random."""
    if len(run) > 2048:  # an embedded blob (image, file), not an id
        return False
    chunks = [c for c in _B64_SPLIT_RE.split(run) if c]
    longest = max(chunks, key=len, default="")
    if len(longest) >= 16 and _looks_random(longest):
        return True
    # Standard base64 splits into short chunks at '+' and '/'; judge the whole. (Not for '-'
    # and '_': joined, "gpt-4-turbo-2024-04-09" would look random.)
    return ("+" in run or "/" in run) and _looks_random("".join(chunks))


def _looks_random(chunk: str) -> bool:
    """Whether an alphanumeric chunk (16+ chars) looks like a random id rather than words.

    Identifiers (``BetaToolSearchToolBm25``, ``convert_utf8_to_utf16``) are mostly made of
    word-like letter runs; random base62/base32/base36 is not. Tuned on random ids and on the
    identifiers of the Python standard library and common packages: about 10% of random
    20-char base62/base32 ids and 25% of base36 ids are missed, in exchange for almost no
    identifier being flagged.
    """
    n = len(chunk)
    if n < 16 or _ALPHABET_RE.search(chunk):
        return False
    digits = sum(ch.isdigit() for ch in chunk)
    if digits == 0 or digits == n:
        return False
    if chunk.lower() != chunk and chunk.upper() != chunk:  # mixed case: base62 / base64url
        wordy = sum(m.end() - m.start() for m in _WORDY_RE.finditer(chunk))
        return wordy * 20 < n * 11
    # single case + digits: base32 / base36 (ULIDs); hex is caught by hex-id
    if len(_DIGIT_GROUP_RE.findall(chunk)) < 2 or digits * 6 < n or (n - digits) * 4 < n:
        return False
    wordish = sum(
        len(run)
        for run in _LETTER_GROUP_RE.findall(chunk)
        if len(run) >= 4 and sum(ch in "aeiouAEIOU" for ch in run) * 4 >= len(run)
    )
    return wordish * 5 < n * 2


def suppress_examples(text: str, spans: list[Candidate]) -> list[Candidate]:
    """Drop documented values: examples, formats, defaults, fixed-date facts, and their lists."""
    kept: list[Candidate] = []
    last_example_end = -1
    for start, end, kind in spans:
        in_list = (
            last_example_end >= 0
            and start - last_example_end <= _EXAMPLE_WINDOW
            and _LIST_SEPARATOR_RE.fullmatch(text, last_example_end, start) is not None
        )
        lo = max(0, start - _EXAMPLE_WINDOW)
        window = text[lo:start].lower()
        if (
            in_list
            or (
                any(hint in window for hint in _EXAMPLE_HINTS)
                and _EXAMPLE_BEFORE_RE.search(text, lo, start)
            )
            or (
                kind in _DATE_KINDS
                and any(hint in window for hint in _FIXED_DATE_HINTS)
                and _FIXED_DATE_BEFORE_RE.search(text, lo, start)
            )
        ):
            last_example_end = end
            continue
        kept.append((start, end, kind))
    return kept
