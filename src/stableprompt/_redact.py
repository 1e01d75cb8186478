"""Secret scrubbing: API keys out of every text stableprompt stores, logs or raises.

:func:`redact` replaces known secret values (the request's own credential header values,
:func:`secrets_in_headers`, with their fragments) and key-shaped strings (``sk-...``,
``AIza...``, ``gsk_...``, ``xai-...``, ``pplx-...``, ``hf_...``, GitHub, Slack, Stripe and
GitLab tokens, AWS access key ids and ``aws_secret_access_key=...``, JSON Web Tokens,
``Bearer ...``, ``x-api-key: ...``) with ``[REDACTED]``. Pure functions of their arguments;
used by the ledger, the recorder, the transports' error mapping and the OTel export.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, AnyStr, TypeVar

__all__ = ["KEY_CONTEXT", "MIN_SECRET_CHARS", "is_secret_name", "redact", "redact_slice",
           "scrub_json_in_place", "scrubbed_entries", "scrubbed_items", "secrets_in_headers"]

_REDACTED = "[REDACTED]"
_START = r"(?:(?<![A-Za-z0-9])|(?<=\\[nrtbf]))"
"""Where a key can start: not inside a word, or right after a JSON escape (``\\n``, ``\\t``,
...): a diff snippet or a stored body is JSON text, where a key on its own line follows the
letter ``n`` of ``\\n``."""
_SECRET_PATTERNS = (
    # Anthropic (sk-ant-api03-...), OpenAI (sk-..., sk-proj-...), and other sk- style keys.
    re.compile(_START + r"sk-[A-Za-z0-9_\-]{16,}"),
    # Google API keys (x-goog-api-key / ?key=).
    re.compile(_START + r"AIza[0-9A-Za-z_\-]{35}"),
    # Other providers' and platforms' key shapes a prompt or tool result may carry: Groq
    # (gsk_), xAI (xai-), Perplexity (pplx-), Hugging Face (hf_), GitHub (ghp_/gho_/ghu_/
    # ghs_/ghr_, github_pat_), AWS access key ids (AKIA/ASIA), JSON Web Tokens (eyJ...).
    re.compile(_START + r"(?:gsk_|xai-|pplx-|hf_|gh[pousr]_|github_pat_)"
               r"[A-Za-z0-9_]{20,}"),
    # Slack (xoxb-/xoxp-/...), Stripe (sk_live_/rk_test_/...), GitLab (glpat-).
    re.compile(_START + r"(?:xox[abposr]-[A-Za-z0-9\-]{10,}|(?:sk|rk)_(?:live|test)_"
               r"[A-Za-z0-9]{16,}|glpat-[A-Za-z0-9_\-]{20,})"),
    re.compile(_START + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"),
    re.compile(r"(?:(?<![A-Za-z0-9_\-])|(?<=\\[nrtbf]))"
               r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    # A header or assignment naming the key: "x-api-key: ...", "api_key=...", "Bearer ...".
    re.compile(
        r"(?i)((?:x-api-key|x-goog-api-key|api[-_]?key|authorization|"
        r"(?:aws[-_]?)?secret[-_]?access[-_]?key)[\"']?\s*[:=]\s*[\"']?"
        r"(?:(?:bearer|basic)\s+)?)[^\s\"',;}&]+"
    ),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/\-]{8,}=*"),
    # HTTP Basic credentials, as a server echoing its Authorization header sends them.
    re.compile(r"(?i)(basic\s+)[A-Za-z0-9+/]{8,}=*"),
    # The password of a URL's user info: "http://user:password@host" keeps "http://user:".
    re.compile(r"(?i)([a-z][a-z0-9+.\-]*://[^\s/:@\"']*:)[^\s/@\"']+(?=@)"),
)
_ANY_SECRET = re.compile("|".join(
    f"(?i:{p.pattern[4:]})" if p.pattern.startswith("(?i)") else f"(?:{p.pattern})"
    for p in _SECRET_PATTERNS))
"""Matches where any of :data:`_SECRET_PATTERNS` matches (their alternation): most texts hold
no key, and one search tells so instead of one substitution per pattern."""
_KEY_LITERALS = ("sk-", "aiza", "gsk_", "xai-", "pplx-", "hf_", "ghp_", "gho_", "ghu_", "ghs_",
                 "ghr_", "github_pat_", "xox", "_live_", "_test_", "glpat-", "akia", "asia",
                 "eyj", "key", "authorization", "bearer", "basic", "://")
"""Lower-case text every match of one of :data:`_SECRET_PATTERNS` holds (``key`` for every
``...key`` name): a text (ASCII-lowered) holding none of them holds no key-shaped string, and
``in`` tests tell so faster than the patterns' scans (which try each position). A new
pattern must add its literal here (``tests/test_secrets.py`` checks it on key-shaped text)."""
_KEY_LITERALS_BYTES = tuple(literal.encode("ascii") for literal in _KEY_LITERALS)


def may_hold_key(text: str | bytes) -> bool:
    """``False`` only when no pattern of :data:`_SECRET_PATTERNS` can match in ``text``.
    Non-ASCII text is always ``True``: case-insensitive ``re`` matching also folds a few
    non-ASCII letters onto ASCII ones (``K`` Kelvin sign, long ``s``), which lowering does not
    undo."""
    if isinstance(text, str):
        if not text.isascii():
            return True
        lowered = text.lower()
        return any(literal in lowered for literal in _KEY_LITERALS)
    lowered_bytes = text.lower()
    return any(literal in lowered_bytes for literal in _KEY_LITERALS_BYTES)


_SECRET_PATTERNS_BYTES = tuple(re.compile(p.pattern.encode("ascii")) for p in _SECRET_PATTERNS)
_SECRET_KEYS = re.compile(
    r"(?i)^(?:x-api-key|x-goog-api-key|api[-_]?key|authorization|proxy-authorization)$"
)
_SECRET_NAMES = frozenset({"x-api-key", "x-goog-api-key", "apikey", "api-key", "api_key",
                           "authorization", "proxy-authorization"})
"""What :data:`_SECRET_KEYS` matches, lower-cased: the set look-up of an ASCII name (every
HTTP header name; ASCII lowering is the pattern's case folding there) costs a tenth of the
pattern's match; ``tests/test_secrets.py`` checks the two agree."""


def is_secret_name(name: str) -> bool:
    """True when ``name`` (a header name or a JSON key) names a credential: ``x-api-key``,
    ``x-goog-api-key``, ``api-key`` / ``api_key`` / ``apikey``, ``authorization`` or
    ``proxy-authorization``, in any case."""
    if name.isascii():  # the pattern's ``$`` also matches before one final newline
        return (name[:-1] if name.endswith("\n") else name).lower() in _SECRET_NAMES
    return _SECRET_KEYS.match(name) is not None  # Unicode case folding (e.g. the Kelvin sign)

_T = TypeVar("_T")

MIN_SECRET_CHARS = 8
"""Shortest secret :func:`redact` scrubs by value, and the shortest fragment of a longer
secret it scrubs (characters). Shorter values are not keys; scrubbing them would mangle text."""


def _redact_text(text: str, secrets: tuple[str, ...], fragments: bool) -> str:
    for pattern in _SECRET_PATTERNS if may_hold_key(text) and _ANY_SECRET.search(text) else ():
        # first: a known key's prefix must not hide a whole key
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + _REDACTED, text)
        else:
            text = pattern.sub(_REDACTED, text)
    for secret in secrets:
        text = _strip_secret(text, secret, fragments)
    return text


KEY_CONTEXT = 256
"""Characters :func:`redact_slice` searches for keys beyond each edge of a slice, past the
run of key characters the edge falls in: room for a header name, its separator and scheme
(``x-api-key: Bearer ``, ``aws_secret_access_key = "``) before a value that reaches into the
slice, and for a key's minimum length after a prefix cut by the slice's end."""

_RUN_BREAK = re.compile(r"[\s\"',;}&]")
"""What ends a run of characters a key or a credential value can hold (every pattern's value
part excludes these; only the header and scheme prefixes cross them)."""
_RUN_BREAK_BYTES = re.compile(_RUN_BREAK.pattern.encode("ascii"))


def _run_start(text: Any, at: int, breaks: re.Pattern[Any]) -> int:
    """The start of the run of non-break characters that ends at ``at`` (``at`` itself when
    ``text[at - 1]`` is a break), searched backwards in chunks (cost: the run's length)."""
    pos = at
    while pos > 0:
        lo = max(0, pos - 512)
        last = None
        for last in breaks.finditer(text, lo, pos):  # noqa: B007 - the last match is wanted
            pass
        if last is not None:
            return int(last.end())
        pos = lo
    return 0


def _run_end(text: Any, at: int, breaks: re.Pattern[Any]) -> int:
    """The end of the run of non-break characters that starts at ``at``."""
    found = breaks.search(text, at)
    return len(text) if found is None else found.start()


def redact_slice(text: AnyStr, start: int, end: int) -> AnyStr:
    """``text[start:end]`` with every key-shaped string that overlaps it replaced by
    ``[REDACTED]``: a snippet cut from a value never shows the tail of a key whose ``sk-``
    prefix fell outside the window, nor the head of one cut at its end.

    Keys are searched in a window around the slice, not in the whole text (a snippet costs
    in proportion to what it shows): from :data:`KEY_CONTEXT` characters before the start of
    the run of key characters (:data:`_RUN_BREAK`) the slice's start falls in, to
    :data:`KEY_CONTEXT` characters after the end of the run its end falls in, each bound
    widened to the whole run it lands in. So a key or credential value of any length that
    reaches into the slice is found whole, with its prefix (``Bearer``, ``x-api-key:``) when
    that lies within :data:`KEY_CONTEXT` characters of the value. Equal to the plain slice
    when no key overlaps it (str or bytes, as given)."""
    binary = isinstance(text, bytes)
    breaks = _RUN_BREAK_BYTES if binary else _RUN_BREAK
    start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
    if end <= start:
        return text[start:end]
    lo = _run_start(text, max(0, _run_start(text, start, breaks) - KEY_CONTEXT), breaks)
    hi = _run_end(text, min(len(text), _run_end(text, end, breaks) + KEY_CONTEXT), breaks)
    window = text[lo:hi]
    if not may_hold_key(window):
        return text[start:end]
    patterns: tuple[re.Pattern[Any], ...] = _SECRET_PATTERNS_BYTES if binary else _SECRET_PATTERNS
    spans: list[tuple[int, int]] = []
    for pattern in patterns:
        for m in pattern.finditer(window):
            begin, stop = (m.end(1) if pattern.groups else m.start()) + lo, m.end() + lo
            if begin < end and stop > start:
                spans.append((max(begin, start), min(stop, end)))
    if not spans:
        return text[start:end]
    marker: Any = _REDACTED.encode("ascii") if binary else _REDACTED
    parts: list[Any] = []
    pos = start
    for begin, stop in sorted(spans):
        if stop <= pos:
            continue
        if begin > pos:
            parts.append(text[pos:begin])
        parts.append(marker)
        pos = stop
    parts.append(text[pos:end])
    joined: AnyStr = marker[:0].join(parts)
    return joined


def _strip_secret(text: str, secret: str, fragments: bool) -> str:
    """``text`` with ``secret`` and (``fragments``) every run of at least
    :data:`MIN_SECRET_CHARS` of its characters (a truncated or partly masked echo) replaced by
    ``[REDACTED]``."""
    size = MIN_SECRET_CHARS
    if len(secret) < size or len(text) < size:  # no room for the secret nor a fragment
        return text
    text = text.replace(secret, _REDACTED)
    if not fragments:
        return text
    for start in range(len(secret) - size + 1):
        window = secret[start : start + size]
        at = text.find(window)
        while at >= 0:
            end = at + size
            while end < len(text) and start + end - at < len(secret) and (
                    text[end] == secret[start + end - at]):
                end += 1
            text = text[:at] + _REDACTED + text[end:]
            at = text.find(window, at + len(_REDACTED))
    return text


def secrets_in_headers(headers: Any) -> tuple[str, ...]:
    """The credential values of a request's headers: the ``Authorization`` /
    ``Proxy-Authorization`` token (without its scheme, whatever whitespace follows it),
    ``x-api-key``, ``api-key`` (Azure), ``x-goog-api-key``; a value holding commas (a header
    sent twice, joined) gives each part too; values shorter than :data:`MIN_SECRET_CHARS` are
    left out.

    Args:
        headers: An httpx/httpx2 ``Headers`` or any mapping of header names to values
            (``None``: no secrets).

    Returns:
        The distinct secret values, longest first (so a key is scrubbed before its fragments).
    """
    found: set[str] = set()
    try:
        items = list(headers.items()) if headers is not None else []
    except Exception:
        return ()
    for name, value in items:
        if not isinstance(name, str) or not isinstance(value, str):
            continue
        if not is_secret_name(name):
            continue
        # the whole value, and each comma-separated part: a header sent twice arrives
        # joined by ", " (httpx's ``items()``), and each part is a credential of its own
        for part in (value, *value.split(",")) if "," in value else (value,):
            token = _without_scheme(part.strip())
            if len(token) >= MIN_SECRET_CHARS:
                found.add(token)
    return tuple(sorted(found, key=len, reverse=True))


def _without_scheme(token: str) -> str:
    """``token`` without a leading ``Bearer`` / ``Basic`` / ``Token`` scheme and the
    whitespace after it (a space, a tab, several)."""
    pieces = token.split(None, 1)
    if len(pieces) == 2 and pieces[0].lower() in ("bearer", "basic", "token"):
        return pieces[1].strip()
    return token


def redact(value: _T, *, secrets: Iterable[str] = (), fragments: bool = True) -> _T:
    """Scrub API keys from a string or a JSON value: known ``secrets`` and key-shaped text.

    Replaced with ``[REDACTED]``: each of ``secrets`` (exact values of at least
    :data:`MIN_SECRET_CHARS` characters, e.g. the key the request was sent with, and with
    ``fragments`` every run of at least that many of its characters, as a server echoing part
    of a key would send);
    ``sk-...`` keys (Anthropic ``sk-ant-...``, OpenAI ``sk-proj-...``; at least 16 characters
    after ``sk-``), Google ``AIza...`` keys, the value after ``x-api-key``/``api_key``/
    ``Authorization`` (``:`` or ``=``), ``Bearer`` tokens, HTTP ``Basic`` credentials, the
    password of a URL's user info (``http://user:[REDACTED]@host``), and the whole value of a
    dict entry whose key is ``x-api-key``, ``api_key``, ``authorization`` (any case). Dict keys and
    non-string scalars are kept.

    Args:
        value: A ``str``, or a JSON value (``dict``/``list`` nesting ``str``, numbers, ...).
        secrets: Exact secret values to remove wherever they occur (see
            :func:`secrets_in_headers`).
        fragments: Also remove runs of :data:`MIN_SECRET_CHARS`+ characters of a secret
            (for provider text; ``False`` for text the caller wrote, such as a request body or
            a label, where a weak key's word could be ordinary text).

    Returns:
        A scrubbed copy of the same shape (the input is not modified).
    """
    return _redact(value, tuple(sorted(set(secrets), key=len, reverse=True)), fragments)


def scrub_json_in_place(value: Any) -> Any:
    """Scrub key-shaped strings from a JSON value the caller just built (a command's output),
    in place: every ``str`` value and every ``str`` dict key (:func:`redact`'s patterns; the
    whole value of a dict entry whose key names a credential), in lists and dicts at any
    depth. Costs one pass over the strings, the output itself never re-scanned as text (the
    report's ``--json`` of a million calls), and each distinct string is scanned once (the
    same keys repeat in every per-session object). Returns ``value`` (a new string when it
    is one).

    A dict or list with a ``scrub_later`` method (``_subcommand.LazyJsonObject`` /
    ``LazyJsonArray``: entries made as they are encoded, e.g. every session of a report) is
    not walked: ``scrub_later()`` makes it scrub its entries as it makes them
    (:func:`scrubbed_entries`, :func:`scrubbed_items`: the same text as scrubbing them here).
    """
    return _scrub_in_place(value, {})


def _scrub_in_place(value: Any, done: dict[str, str]) -> Any:
    """:func:`scrub_json_in_place` with ``done``: each string scanned so far -> its scrubbed
    text (scrubbing is a function of the string alone)."""
    if isinstance(value, str):
        clean = done.get(value)
        if clean is None:
            clean = done[value] = _redact_text(value, (), True)
        return clean
    kind = type(value)  # a plain list or dict (nearly all) is not asked for scrub_later
    if (kind is not list and kind is not dict and isinstance(value, (list, dict))
            and hasattr(value, "scrub_later")):
        value.scrub_later()  # made as it is encoded: scrubbed then
        return value
    if isinstance(value, list):
        for i, item in enumerate(value):
            value[i] = _scrub_in_place(item, done)
        return value
    if isinstance(value, dict):
        items = list(value.items())
        value.clear()
        for key, item in items:
            if isinstance(key, str):
                value[_scrub_in_place(key, done)] = (
                    _REDACTED if is_secret_name(key) else _scrub_in_place(item, done))
            else:
                value[key] = _scrub_in_place(item, done)
        return value
    return value


_LAZY_CACHE = 4096
"""Strings a lazy container's scrubbing remembers (then forgets them all): scrubbing is a
function of the string alone, so the cache changes no output, only bounds its memory."""


def _bounded_scrub() -> Callable[[Any], Any]:
    done: dict[str, str] = {}

    def scrub(value: Any) -> Any:
        if len(done) > _LAZY_CACHE:
            done.clear()
        return _scrub_in_place(value, done)

    return scrub


def scrubbed_entries(keys: Callable[[], Iterable[str]],
                     items: Callable[[], Iterable[tuple[str, Any]]]
                     ) -> Iterator[tuple[str, Any]]:
    """The entries of a JSON object made as they are encoded (``items()``, keys in the same
    order as ``keys()``), scrubbed as :func:`scrub_json_in_place` scrubs a dict: each key and
    value, a value whose key names a credential replaced whole. Two keys that scrub to the
    same text make one entry there (at the first key's place, with the last value): when a
    first pass over ``keys()`` finds such a pair, the object is built whole and scrubbed as
    a dict (rare: secret-shaped keys); otherwise nothing is held."""
    scrub = _bounded_scrub()
    changed: dict[str, str] = {}
    for key in keys():
        clean = scrub(key)
        if clean != key:
            changed[key] = clean
    if changed:
        outputs = set(changed.values())
        if len(outputs) < len(changed) or any(k in outputs for k in keys() if k not in changed):
            whole = _scrub_in_place(dict(items()), {})
            yield from whole.items()
            return
    for key, item in items():
        yield changed.get(key, key), (_REDACTED if is_secret_name(key) else scrub(item))


def scrubbed_items(items: Iterable[Any]) -> Iterator[Any]:
    """The items of a JSON array made as they are encoded, each scrubbed as
    :func:`scrub_json_in_place` scrubs a list's items."""
    scrub = _bounded_scrub()
    for item in items:
        yield scrub(item)


def _redact(value: _T, secrets: tuple[str, ...], fragments: bool) -> _T:
    if isinstance(value, str):
        return _redact_text(value, secrets, fragments)  # type: ignore[return-value]
    if isinstance(value, dict):
        return {  # type: ignore[return-value]
            key: (_REDACTED if isinstance(key, str) and is_secret_name(key)
                  else _redact(item, secrets, fragments))
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return type(value)(_redact(item, secrets, fragments) for item in value)
    return value
