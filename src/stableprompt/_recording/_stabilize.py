"""Opt-in request stabilizing: rewrites that cannot change a request's meaning, only its order.

:class:`Stabilizer` (one per transport or proxy: it remembers what it saw) takes a request body
as sent (Anthropic Messages, Chat Completions or Responses) and returns it with

- **tools sorted** (``tool-order``): by name; a tool without a string name (a Responses hosted
  tool such as ``{"type": "web_search"}``) after the named ones, by its canonical bytes;
  duplicate names tie-broken by their canonical bytes, so any input order gives one output
  order. Cache breakpoints stay where they were *by position*: the ``cache_control`` of the
  i-th tool goes to the i-th tool after sorting, so a client that marked its last tool still
  marks the end of its tools;
- **schemas in canonical form** (``schema-key-order``): each tool's input schema as
  :func:`~stableprompt._prompt._tool_schema.canonical_schema` writes it (keyword keys sorted,
  set-like arrays such as ``required`` sorted, order-bearing arrays such as ``enum`` kept,
  and ``properties`` **in the order sent**: that order is what a model writes, OpenAI
  Structured Outputs following the schema's key order and Gemini pinning it with
  ``propertyOrdering``, so it is never sorted). A schema that is not valid JSON Schema is
  left as it is;
- **properties pinned** (``property-order``): a harness that sends one tool's ``properties``
  in different orders from call to call (hash-ordered maps) gets, for that tool, the order
  it sent first (per tool name and schema content, for this stabilizer's life): one of its
  own orders, kept, rather than a sorted one it never wrote;
- for OpenAI (Chat Completions, Responses, when the call goes to OpenAI itself: ``provider``
  is in :data:`PROMPT_CACHE_KEY_PROVIDERS`), a ``prompt_cache_key`` when the client sent
  none (``prompt-cache-key``): the lineage key of the (stabilized) head, as
  ``prompt_cache_key=True`` renders it (``sp-`` + 24 hex digits of the head fingerprint), so
  requests sharing tools and system prompt are routed to the same cache. Another server
  speaking the OpenAI wire (vLLM, llama.cpp, DeepSeek, a gateway of unknown kind) gets none:
  the key does nothing there, and a strict server may reject a field it does not know;
- for Anthropic, when the client placed **no cache breakpoint** at all (no ``cache_control``
  key anywhere in the body: on a tool, a system block, a content block, nested in a tool
  result, or at the top level), the ones the SDK's own renders carry
  (``RenderedPrompt.to_anthropic``): one at the end of the stable head (``head-breakpoint``:
  on the last system block when ``system`` is a list of blocks, else on the last tool; a
  string ``system`` with no tools gets none), one at the end of history
  (``history-breakpoint``: on the last content block of the last message, or, when that
  message's content is a string or its last block cannot carry a marker (``thinking``, an
  empty text), as top-level ``cache_control``, Anthropic's automatic caching, which marks the
  last cacheable block), and, when the request continues one this stabilizer marked and the
  blocks since its history breakpoint reach the 20-block lookback, one kept there (the
  builder's carry: the one rule, :func:`~stableprompt._wire._breakpoints.lookback_carry`). All
  are 5-minute markers (``{"type": "ephemeral"}``), so the TTL order (longer first) holds,
  and three fit the 4-marker budget; with a :class:`~stableprompt.CachePolicy`
  (``Stabilizer(cache_policy=...)``, ``stableprompt proxy --cache-policy FILE``) the head one
  takes the policy's ``head`` TTL and the others its ``history`` TTL, for request kind
  ``main`` (``_stabilize_ttls``: the policy guarantees head >= history). Content shapes
  are never changed (a string content is not turned into a text block). A breakpoint
  whose prefix is surely below the model's minimum cacheable length is not placed, by the
  builder's rule
  (:func:`~stableprompt._policy.surely_below_minimum`), when a token counter is given.
  **No history breakpoint on a lineage whose history was seen rewritten**: a history
  breakpoint pays a write (1.25x) that only a later request continuing that history reads;
  when requests of a lineage twice in a row continue none of the histories it marked while
  repeating history it saw (an earlier message edited, a volatile value injected into an
  old turn, a compaction), it stops placing them there (the head breakpoint stays). A
  request without messages gets none. A client that placed any breakpoint of its own is
  left as it is, so a stabilized body (which now has markers) is not rewritten again;
  with a cache policy, its markers without a ``ttl`` of their own (the provider default)
  get the policy's TTL of their place, only lengthened and never beyond a marker before
  them (``breakpoint-ttl``; markers with a ``ttl`` keep it: ``_stabilize_ttls``).

JSON object key order and ``required`` order carry no meaning for a provider, and tool order
none for the model's choice, but all of them reach the prompt's tokens: a harness that lists
its tools in another order after an MCP reconnect loses its whole cached prefix.

Left as sent, with the reason in ``verdict_detail["stabilize_skipped"]``: a body holding an
integer literal of 19 or more digits outside strings (orjson would read it as a float), and a
body with **duplicate object keys** (``{"a": 1, "a": 2}``: a parser keeps one of the values,
orjson and Python the last, so a rewrite would drop the other where the provider might read
it differently). Duplicates are detected on the raw bytes only when a rewrite is due: the
members a body spells (a key's closing quote followed by a colon) are counted against the
members of its re-serialized parse, in C; a key ending in a backslash (the one spelling the
count cannot see) is checked with ``json.loads(object_pairs_hook=...)``.

Idempotent: a body already in this form (for OpenAI: with a ``prompt_cache_key`` of its own;
for Anthropic: with a breakpoint of its own) is returned as the *same bytes* (no
re-serialization), and stabilizing a stabilized body changes nothing. A rewritten body is the
parsed body re-serialized compactly with every other key in its original order
(:func:`~stableprompt._canonical.wire_json`); providers tokenize the parsed value, not the
whitespace. Anything unexpected (not JSON, another format) leaves the body untouched. Which
rewrites were made is returned, for the ledger row (``verdict_detail["stabilized"]``), with
the evidence ``stableprompt report`` estimates the savings from (:meth:`Stabilizer.stabilize`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from .._canonical import INT_MAX, INT_MIN, canonical_json, loads, wire_json
from .._economics._cache_policy import CachePolicy, refuse_explicit_cache
from .._policy import CacheRules, cache_rules, surely_below_minimum
from .._prompt._tool_schema import canonical_schema, properties_orders, with_properties_orders
from .._wire import anthropic, openai_chat, openai_responses
from .._wire._breakpoints import lookback_carry
from .._wire._formats import REQUEST_FORMATS, detect, segment_request
from .._wire._openai import lineage_key
from .._wire._segmenter import SegmentedRequest
from ._stabilize_ttls import PolicyTtls, policy_ttls, retime

__all__ = ["PROMPT_CACHE_KEY_PROVIDERS", "STABILIZE_REWRITES", "SegmentCounter", "Stabilizer",
           "stabilize", "stabilize_with_evidence"]

PROMPT_CACHE_KEY_PROVIDERS = frozenset({"openai"})
"""Provider families whose API documents ``prompt_cache_key`` as a routing key and so get one
from :func:`stabilize` (``shared/reference/PROVIDERS.md``, OpenAI's prompt-caching guide)."""

STABILIZE_REWRITES = ("tool-order", "schema-key-order", "property-order", "prompt-cache-key",
                      "head-breakpoint", "history-breakpoint", "breakpoint-ttl")
"""The rewrites :func:`stabilize` may make, as named in ``verdict_detail["stabilized"]``
(``breakpoint-ttl``: a cache policy's TTL given to the client's own markers without one)."""

TOOL_REWRITES = frozenset({"tool-order", "schema-key-order", "property-order"})
"""The rewrites of ``tools``: they change which prefix a request shares with earlier ones."""

SegmentCounter = Callable[[SegmentedRequest], Sequence[int]]
"""Estimated tokens of each segment of a request, in segment order (``Recorder.segment_tokens``)."""

_Tool = dict[str, Any]

#: Wire format -> the module whose ``tool_name`` / ``tool_schema`` read a sent ``tools[]``
#: entry (Anthropic ``tools[].input_schema``; Chat ``tools[].function.parameters``; Responses
#: ``tools[].parameters``).
_SHAPES: dict[str, ModuleType] = {
    "anthropic": anthropic, "openai-chat": openai_chat, "openai-responses": openai_responses}

_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})
#: Continuing requests in a row that read none of a lineage's history breakpoints while
#: repeating its history, after which the lineage gets no more history breakpoints.
REWRITE_SIGHTINGS = 2
#: Entries each of the stabilizer's memories keeps (the oldest are dropped first).
MEMORY_ENTRIES = 65536

_DIGITS = re.compile(rb"\d{19,}")
_STRING_OR_WIDE_NUMBER = re.compile(rb'"(?:[^"\\]|\\.)*"|(?<![\w.])-?\d{19,}(?![\d.eE])')
"""A JSON string (skipped whole) or an integer literal of 19+ digits outside strings."""
_MEMBER = re.compile(rb'(?<!\\)"[ \t\r\n]*:')
"""A key's closing quote and its colon: one per object member (inside a string a quote is
always escaped, so never there), except a key ending in an escaped backslash (``"a\\":``)."""


def _wide_integer_at(body: bytes) -> int | None:
    """Byte offset of a JSON integer literal outside ``INT_MIN..INT_MAX`` (-2**63..2**64-1),
    which orjson parses as a float: a rewrite could not keep it exact; else ``None``. Digits
    inside strings (a nanosecond timestamp, an id in a message) do not count; the string-aware
    scan runs only when the body holds a run of 19+ digits at all (every wider literal has
    one)."""
    if _DIGITS.search(body) is None:
        return None
    for match in _STRING_OR_WIDE_NUMBER.finditer(body):
        literal = match.group()
        if literal[:1] != b'"' and not INT_MIN <= int(literal) <= INT_MAX:
            return match.start()
    return None


def _duplicate_key(body: bytes, out: bytes, added: int) -> str | None:
    """A key that an object of ``body`` spells twice (the parse kept one value), else
    ``None``. ``out``: the parse re-serialized after edits that added ``added`` members (and
    removed none). Members are counted on both byte strings (C speed); the exact check
    (``json.loads`` with ``object_pairs_hook``) runs only when the counts differ or a key may
    end in a backslash, which the count cannot see."""
    if len(_MEMBER.findall(body)) + added == len(_MEMBER.findall(out)) \
            and b'\\\\"' not in body:
        return None
    found: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen and not found:
                found.append(key)
            seen.add(key)
        return dict(items)

    json.loads(body, object_pairs_hook=pairs)
    return found[0] if found else None


def _sort_key(tool: _Tool, name: Any) -> tuple[int, str, bytes]:
    """Named tools first, by name; then those without a string name; ties by their bytes."""
    return (0, name, b"") if isinstance(name, str) else (1, "", canonical_json(tool))


def _sorted_tools(tools: list[_Tool], name_of: Callable[[_Tool], Any]) -> list[_Tool] | None:
    """``tools`` in canonical order (:func:`_sort_key`; breakpoints kept by position);
    ``None`` when they are in that order already."""
    names = [name_of(tool) for tool in tools]
    counts: dict[Any, int] = {}
    for name in names:
        if isinstance(name, str):
            counts[name] = counts.get(name, 0) + 1
    keys = [(0, n, canonical_json(t) if counts[n] > 1 else b"") if isinstance(n, str)
            else _sort_key(t, n) for t, n in zip(tools, names, strict=True)]
    order = sorted(range(len(tools)), key=keys.__getitem__)
    if order == list(range(len(tools))):
        return None
    markers = [tool.get("cache_control") for tool in tools]
    out = []
    for position, index in enumerate(order):
        tool = {k: v for k, v in tools[index].items() if k != "cache_control"}
        if markers[position] is not None:
            tool["cache_control"] = markers[position]
        out.append(tool)
    return out


@functools.lru_cache(maxsize=4096)
def _canonical_of(raw: bytes, name: str) -> bytes | None:
    """The canonical bytes of the schema written ``raw`` (``None``: not valid JSON Schema);
    memoized, as a harness sends the same schemas on every call."""
    try:
        return canonical_schema(loads(raw), name, False, [])
    except Exception:  # not valid JSON Schema: not ours to rewrite
        return None


@functools.lru_cache(maxsize=4096)
def _orders_of(raw: bytes) -> tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]:
    """``(content digest, properties orders)`` of the schema written ``raw``: the digest is
    the same for every order of its keys and ``properties`` (fully sorted bytes)."""
    schema = loads(raw)
    digest = hashlib.blake2b(canonical_json(schema), digest_size=12).hexdigest()
    return digest, tuple(properties_orders(schema).items())


def _markable(block: Any) -> bool:
    """Whether a content or system block may carry ``cache_control`` (not reasoning, not an
    empty text, which Anthropic rejects a marker on)."""
    if not isinstance(block, dict) or block.get("type") in _UNMARKABLE:
        return False
    return block.get("type") != "text" or bool(block.get("text"))


def _blocks(message: Any) -> int:
    """Content blocks of a sent message (a string content is one)."""
    content = message.get("content") if isinstance(message, dict) else None
    return len(content) if isinstance(content, list) else 1


def _prefix_tokens(segmented: SegmentedRequest, counts: Sequence[int] | None
                   ) -> tuple[int, int, int] | None:
    """Estimated tokens through the tools, through the system, and through the history."""
    if counts is None:
        return None
    tools = system = history = 0
    for segment, tokens in zip(segmented.segments, counts, strict=True):
        if segment.kind == "tool":
            tools += tokens
        elif segment.kind == "system":
            system += tokens
        elif segment.kind == "message":
            history += tokens
    return tools, tools + system, tools + system + history


def _message_index(path: str) -> int:
    """The message index of a message segment's body pointer (``/messages/3/content/0``)."""
    return int(path.split("/", 3)[2])


class _Memory:
    """A bounded insertion-ordered map (the oldest entries are dropped past ``size``)."""

    def __init__(self, size: int = MEMORY_ENTRIES) -> None:
        self.size = size
        self.items: dict[Any, Any] = {}

    def get(self, key: Any, default: Any = None) -> Any:
        return self.items.get(key, default)

    def __contains__(self, key: Any) -> bool:
        return key in self.items

    def put(self, key: Any, value: Any = True) -> None:
        self.items.pop(key, None)
        self.items[key] = value
        while len(self.items) > self.size:
            del self.items[next(iter(self.items))]


@dataclass
class _Lineage:
    """What the stabilizer saw of one lineage's histories.

    Attributes:
        marked: Chained digest of a message segment where a history breakpoint was placed ->
            that message's index (what a later request continuing it reads).
        chains: Chained digests of the message segments of the lineage's requests.
        blocks: Digests of the message segments after each request's first message.
        sightings: Continuing requests in a row that read no ``marked`` place but repeat
            ``chains`` or ``blocks``.
        rewritten: History seen rewritten: no more history breakpoints here.
    """

    marked: _Memory = field(default_factory=lambda: _Memory(4096))
    chains: _Memory = field(default_factory=lambda: _Memory(16384))
    blocks: _Memory = field(default_factory=lambda: _Memory(16384))
    sightings: int = 0
    rewritten: bool = False


def _shared(seen: _Memory, segmented: SegmentedRequest) -> str | None:
    """The name of the last segment of the longest prefix ``segmented`` shares with a request
    whose chain is in ``seen`` (the chain is cumulative: the last segment found ends it),
    ``None`` when it shares none; then ``seen`` learns this request's chain."""
    shared: str | None = None
    for segment in segmented.segments:
        if segment.prefix_digest in seen:
            shared = segment.name
    for segment in segmented.segments:
        seen.put(segment.prefix_digest)
    return shared


def _through(segmented: SegmentedRequest, counts: Sequence[int], name: str | None
             ) -> int | None:
    """Estimated tokens of ``segmented`` through its segment called ``name`` (0 for
    ``None``); ``None`` when it has no segment of that name."""
    if name is None:
        return 0
    total = 0
    for segment, tokens in zip(segmented.segments, counts, strict=True):
        total += tokens
        if segment.name == name:
            return total
    return None


class Stabilizer:
    """Stabilizes request bodies (module docstring), remembering what it saw: the first
    ``properties`` order of each tool, which lineages had their history rewritten, where it
    placed history breakpoints (for the lookback carry), and the prefixes of the requests as
    the clients wrote them and as stabilized (for the savings evidence). One per transport or
    proxy; bounded memory (:data:`MEMORY_ENTRIES` per memory). Thread-safe: one call at a
    time (a transport shared by threads calls it on each caller's thread).

    Args:
        cache_policy: TTLs for the Anthropic breakpoints (``_stabilize_ttls``: the ones placed,
            and the client's own without a ``ttl``); ``None``: 5 minutes, client markers
            untouched.

    Raises:
        PolicyError: the policy asks for an explicit head cache, Gemini's (code
            ``cache-policy-explicit-cache``): a stabilizer only places breakpoints.
    """

    def __init__(self, cache_policy: CachePolicy | None = None) -> None:
        if cache_policy is not None:
            refuse_explicit_cache(cache_policy, "the stabilizer (it places breakpoints)")
        self.cache_policy = cache_policy
        self._lock = threading.Lock()
        self._pins = _Memory(4096)  # (wire, tool name, schema digest) -> properties orders
        self._lineages = _Memory(1024)  # head fingerprint -> _Lineage
        self._sent = _Memory()  # chained digests of requests as the clients wrote them
        self._stable = _Memory()  # chained digests of requests as stabilized

    def stabilize(self, body: bytes, path: str | None = None, *,
                  count: SegmentCounter | None = None,
                  policy: Callable[[str], CacheRules] | None = None,
                  provider: str | None = None) -> tuple[bytes, list[str], dict[str, Any]]:
        """The stabilized body, the rewrites made, and the row's evidence.

        Args:
            body: The request body as sent.
            path: The URL path, for the wire format (else the body's shape decides).
            provider: The provider family the call goes to when known (an override, or a
                known API host: :func:`~stableprompt._wire._formats.known_provider`), else
                ``None``; only one in :data:`PROMPT_CACHE_KEY_PROVIDERS` gets a
                ``prompt_cache_key``.
            count: Estimated tokens per segment of a request, for the model minimum of the
                Anthropic breakpoints and the savings evidence (``None``: breakpoints placed
                whatever the prefix length, no evidence).
            policy: The cache policy of a model id (default: the shipped table's
                ``anthropic`` entry); a lookup that raises means no minimum is known.

        Returns:
            ``(body, [], evidence)`` when nothing was rewritten (the very same bytes), else
            the new body, the names of the rewrites made (in :data:`STABILIZE_REWRITES`
            order) and the evidence, for ``verdict_detail``:

            - ``stabilize_skipped``: why a body was left as sent although it may have needed
              rewrites (an integer literal a rewrite could not keep exact, a duplicate key);
            - ``cache_policy_skipped``: a TTL of the cache policy the model's rules do not
              offer, replaced by the default (``_stabilize_ttls.policy_ttls``);
            - ``stabilized_tools``: a digest (16 hex digits, BLAKE2b) of the ``tools`` list
              as the client sent it (tool rewrites only);
            - ``client_shared_tokens``: estimated tokens (``count``) of the longest prefix
              the request *as the client wrote it* shares with an earlier request as its
              client wrote it, through this stabilizer: what it could have read had nothing
              been rewritten (the counterfactual);
            - ``stabilized_shared_tokens``: the same for the request as stabilized, against
              earlier stabilized requests: what it can read now. Both with tool rewrites and
              a ``count``; the report credits the difference (``_accounting._stabilized``).

            Never raises.
        """
        try:
            with self._lock:
                return self._stabilize(body, path, count, policy, provider)
        except Exception:
            return body, [], {}

    __call__ = stabilize

    def _stabilize(self, body: bytes, path: str | None, count: SegmentCounter | None,
                   policy: Callable[[str], CacheRules] | None, provider: str | None
                   ) -> tuple[bytes, list[str], dict[str, Any]]:
        wide = _wide_integer_at(body)
        if wide is not None:
            # orjson reads an integer beyond 64 bits as a float: re-serialized, its value
            # would change. Left as sent, and the row says why.
            return body, [], {"stabilize_skipped": f"an integer literal of 19 or more digits "
                              f"at byte {wide} (a rewrite could not keep it exact)"}
        parsed = loads(body)
        if not isinstance(parsed, dict):
            return body, [], {}
        wire = detect(parsed, path)
        if wire not in REQUEST_FORMATS or wire not in _SHAPES:
            return body, [], {}
        client: SegmentedRequest | None = None
        if count is not None:
            with contextlib.suppress(Exception):  # a body the segmenter refuses: no evidence
                client = segment_request(wire, parsed)  # before any edit: as the client wrote it
        done: list[str] = []
        evidence: dict[str, Any] = {}
        tools = parsed.get("tools")
        if isinstance(tools, list) and tools and all(isinstance(tool, dict) for tool in tools):
            sent = wire_json(tools)
            done += self._tools(parsed, tools, _SHAPES[wire], wire)
            if done:
                evidence["stabilized_tools"] = hashlib.blake2b(sent, digest_size=8).hexdigest()
        segmented: SegmentedRequest | None = None
        counts: Sequence[int] | None = None
        with contextlib.suppress(Exception):  # a body the segmenter refuses: the rest
            segmented = segment_request(wire, parsed) if done or client is None else client
            counts = count(segmented) if count is not None else None
        added = 0  # members the edits add (none removes any): for the duplicate-key check
        if wire == "anthropic":
            rules_of = policy or functools.partial(cache_rules, "anthropic")
            ttls = self._ttls(parsed.get("model"), rules_of)
            # any cache_control key anywhere (nested blocks too) is the client's own breakpoint
            if b'"cache_control"' not in body and segmented is not None:
                placed, members = self._breakpoints(parsed, segmented, counts, rules_of, ttls)
                done += placed
                added += members
            elif self.cache_policy is not None and b'"cache_control"' in body:
                retimed = retime(parsed, ttls)  # the client's markers without a ttl
                if retimed:
                    done.append("breakpoint-ttl")
                    added += retimed
            if self.cache_policy is not None and ttls.skipped and done:
                evidence["cache_policy_skipped"] = ttls.skipped
        elif provider in PROMPT_CACHE_KEY_PROVIDERS and "prompt_cache_key" not in parsed:
            if segmented is None:
                segmented = segment_request(wire, parsed)
            parsed["prompt_cache_key"] = lineage_key(segmented.head_fingerprint)
            done.append("prompt-cache-key")
            added += 1
        if client is not None and segmented is not None and counts is not None:
            with contextlib.suppress(Exception):  # no estimate: the rewrites still stand
                # both measured on the stabilized request's tokens, by segment name (names
                # are positions: tools[2], system, messages[4]...), so two prefixes ending at
                # the same place count the same whatever their tools' order; the client's
                # own count only where the stabilized request has no such segment
                shared, stable = _shared(self._sent, client), _shared(self._stable, segmented)
                if TOOL_REWRITES.intersection(done):
                    through = _through(segmented, counts, shared)
                    if through is None and count is not None:
                        through = _through(client, count(client), shared)
                    evidence["client_shared_tokens"] = through
                    evidence["stabilized_shared_tokens"] = _through(segmented, counts, stable)
        if not done:
            return body, [], {}
        out = wire_json(parsed)
        duplicate = _duplicate_key(body, out, added)
        if duplicate is not None:
            return body, [], {"stabilize_skipped": f"duplicate key {json.dumps(duplicate)} "
                              "in an object (a rewrite would keep one of its values)"}
        return out, [name for name in STABILIZE_REWRITES if name in done], evidence

    def _tools(self, parsed: dict[str, Any], tools: list[_Tool], shape: ModuleType,
               wire: str) -> list[str]:
        """Sort ``tools``, pin their ``properties`` orders and canonicalize their schemas, in
        ``parsed`` (ours: edited in place); the rewrites made."""
        done: list[str] = []
        ordered = _sorted_tools(tools, shape.tool_name)
        if ordered is not None:
            parsed["tools"] = tools = ordered
            done.append("tool-order")
        pinned = schemas = False
        for tool in tools:
            where = shape.tool_schema(tool)
            if where is None:
                continue
            holder, key = where
            raw = wire_json(holder[key])
            name = shape.tool_name(tool)
            digest, orders = _orders_of(raw)
            pin = (wire, str(name), digest)
            first = self._pins.get(pin)
            if first is None:
                self._pins.put(pin, orders)
            elif first != orders:  # the harness shuffled them: its first order, kept
                holder[key] = with_properties_orders(holder[key], dict(first))
                raw = wire_json(holder[key])
                pinned = True
            canonical = _canonical_of(raw, str(name))
            if canonical is not None and canonical != raw:
                holder[key] = loads(canonical)
                schemas = True
        if schemas:
            done.append("schema-key-order")
        if pinned:
            done.append("property-order")
        return done

    def _ttls(self, model: Any, policy_of: Callable[[str], CacheRules]) -> PolicyTtls:
        """The TTLs this stabilizer's cache policy gives a request to ``model``
        (``_stabilize_ttls``); the default everywhere without a policy."""
        rules: CacheRules | None = None
        if self.cache_policy is not None and isinstance(model, str):
            with contextlib.suppress(Exception):  # no rules: the labels Anthropic offers
                rules = policy_of(model)
        return policy_ttls(self.cache_policy, rules, model if isinstance(model, str) else None)

    def _breakpoints(self, parsed: dict[str, Any], segmented: SegmentedRequest,
                     counts: Sequence[int] | None, policy_of: Callable[[str], CacheRules],
                     ttls: PolicyTtls) -> tuple[list[str], int]:
        """Place the head, history and carried breakpoints of a Messages body without any
        (module docstring), in place, at ``ttls``; the rewrites made and the members added
        (``cache_control``, its ``type`` and any ``ttl``, per marker). ``segmented``: the
        body as it is now (markers are not segment bytes, so placing them does not change
        it); ``counts``: its tokens."""
        messages = parsed.get("messages")
        if not isinstance(messages, list) or not messages or anthropic.MARKER_KEY in parsed:
            return [], 0
        if segmented.breakpoints:
            return [], 0
        model = parsed.get("model")
        try:
            policy: CacheRules | None = policy_of(model) if isinstance(model, str) else None
        except Exception:  # no policy for this provider: nothing known to be too short
            policy = None
        budget = policy.breakpoint_budget if policy is not None and policy.breakpoint_budget \
            else anthropic.MAX_BREAKPOINTS
        prefixes = _prefix_tokens(segmented, counts)

        def short(tokens: int) -> bool:
            return policy is not None and surely_below_minimum(policy, tokens)

        lineage: _Lineage = self._lineages.get(segmented.head_fingerprint) or _Lineage()
        self._lineages.put(segmented.head_fingerprint, lineage)
        previous = self._history_seen(lineage, segmented, len(messages))
        done: list[str] = []
        markers = 0
        marker = anthropic.cache_control(ttls.history)
        members = 0
        last = messages[-1]
        content = last.get("content") if isinstance(last, dict) else None
        history = [s for s in segmented.segments if s.kind == "message"]
        if not lineage.rewritten and (prefixes is None or not short(prefixes[2])):
            if isinstance(content, list) and content and _markable(content[-1]):
                content[-1][anthropic.MARKER_KEY] = dict(marker)
            else:  # automatic caching: the provider marks the last cacheable block
                parsed[anthropic.MARKER_KEY] = dict(marker)
            done.append("history-breakpoint")
            markers += 1
            members += 1 + len(marker)
            if history:
                lineage.marked.put(history[-1].prefix_digest, len(messages) - 1)
            carry = lookback_carry(previous, len(messages), lambda i: _blocks(messages[i]),
                                   anthropic.LOOKBACK_BLOCKS)
            if carry is not None and markers < budget:
                carried = messages[carry].get("content") if isinstance(messages[carry], dict) \
                    else None
                if isinstance(carried, list) and carried and _markable(carried[-1]):
                    carried[-1][anthropic.MARKER_KEY] = dict(marker)
                    markers += 1
                    members += 1 + len(marker)
        if markers >= budget:
            return done, members
        system, tools = parsed.get("system"), parsed.get("tools")
        head: tuple[dict[str, Any], int] | None = None
        if isinstance(system, list) and system and _markable(system[-1]):
            head = system[-1], 1
        elif isinstance(tools, list) and tools and isinstance(tools[-1], dict) \
                and not isinstance(system, list):
            head = tools[-1], 0
        if head is not None and (prefixes is None or not short(prefixes[head[1]])):
            head_marker = anthropic.cache_control(ttls.head)
            head[0][anthropic.MARKER_KEY] = head_marker
            done.insert(0, "head-breakpoint")
            members += 1 + len(head_marker)
        return done, members

    def _history_seen(self, lineage: _Lineage, segmented: SegmentedRequest, count: int
                      ) -> int | None:
        """Learn this request's history; the message index of the history breakpoint of the
        marked request it continues (the longest), ``None`` when it continues none. A request
        of two or more messages that continues none but repeats the lineage's history (its
        chain meets a known one, or a message after its first was seen before) is a rewrite
        sighting; :data:`REWRITE_SIGHTINGS` in a row mark the lineage ``rewritten``."""
        history = [s for s in segmented.segments if s.kind == "message"]
        previous: int | None = None
        repeats = False
        for segment in history:
            index = lineage.marked.get(segment.prefix_digest)
            if index is not None:
                previous = index
            if segment.prefix_digest in lineage.chains or (
                    _message_index(segment.path) > 0 and segment.digest in lineage.blocks):
                repeats = True
        if previous is not None:
            lineage.sightings = 0
        elif count > 1 and repeats:
            lineage.sightings += 1
            if lineage.sightings >= REWRITE_SIGHTINGS:
                lineage.rewritten = True
        for segment in history:
            lineage.chains.put(segment.prefix_digest)
            if _message_index(segment.path) > 0:
                lineage.blocks.put(segment.digest)
        return previous


def stabilize(body: bytes, path: str | None = None, *, count: SegmentCounter | None = None,
              policy: Callable[[str], CacheRules] | None = None,
              provider: str | None = None) -> tuple[bytes, list[str]]:
    """The stabilized body and the rewrites made, by a fresh :class:`Stabilizer` (it has
    seen nothing before: no pinned order, no carry, no savings evidence beyond this body).

    Returns:
        ``(body, [])`` when nothing was rewritten (the very same bytes), else the new body
        and the names of the rewrites made, in :data:`STABILIZE_REWRITES` order. Never
        raises.
    """
    out, rewrites, _ = Stabilizer().stabilize(body, path, count=count, policy=policy,
                                              provider=provider)
    return out, rewrites


def stabilize_with_evidence(body: bytes, path: str | None = None, *,
                            count: SegmentCounter | None = None,
                            policy: Callable[[str], CacheRules] | None = None,
                            provider: str | None = None
                            ) -> tuple[bytes, list[str], dict[str, Any]]:
    """:meth:`Stabilizer.stabilize` by a fresh :class:`Stabilizer` (see :func:`stabilize`)."""
    return Stabilizer().stabilize(body, path, count=count, policy=policy, provider=provider)
