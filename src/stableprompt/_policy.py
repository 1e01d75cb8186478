"""Provider prefix-cache rules as data: minimums, granularity, TTLs, breakpoint budgets, prices.

Every number here is a provider fact that changes over time, so each entry carries its
``source`` (doc URL or repository file) and ``as_of`` date. Users override any entry with
:meth:`PolicyTable.with_overrides`; nothing in stableprompt hard-codes these numbers elsewhere.
Lookups for an unknown model fall back to the provider's conservative default (the largest
minimum the provider documents), and the returned policy says so (``conservative=True``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._canonical import loads
from ._exceptions import PolicyError
from ._public import public

__all__ = [
    "CACHE_HEADERS",
    "CONTENT_SHAPES",
    "ESTIMATED_SEGMENT_FRAMING_TOKENS",
    "ESTIMATED_SPAN_FRACTION",
    "EXPLICIT_CACHE_APIS",
    "EXPLICIT_CACHE_RULES",
    "INLINE_TOOLS_BETA",
    "KEEPALIVE_OUTPUT_TOKENS",
    "KEEPALIVE_WIRE_FORMATS",
    "MODEL_FEATURES",
    "OPENAI_EXPLICIT_RULES",
    "POLICY_TABLE_VERSION",
    "REASONING_RULES",
    "TOKEN_ESTIMATE_MARGIN",
    "TOLERANCE_FRACTION",
    "TOOL_CHANGES_BETA",
    "TTL_LABELS_S",
    "CacheRules",
    "ContentShapeRule",
    "ExplicitCacheRule",
    "HeaderRule",
    "ModelFeatures",
    "OpenAIExplicitRule",
    "PolicyTable",
    "ReasoningRule",
    "cache_rules",
    "content_shape_change",
    "content_shape_rule",
    "default_policies",
    "describe_header_change",
    "estimate_allowance_tokens",
    "explicit_cache_rule",
    "header_changes",
    "header_items",
    "header_rules",
    "keepalive_unsupported",
    "model_features",
    "openai_explicit_rule",
    "provider_of_wire_format",
    "reasoning_rule",
    "surely_below_minimum",
    "takes_cache_options",
    "text_block_of",
]

POLICY_TABLE_VERSION = "2026-12-07"

TTL_LABELS_S: Mapping[str, int] = {"5m": 300, "30m": 1800, "1h": 3600, "12h": 43200, "24h": 86400}
"""Every TTL label a request body may carry, in seconds: the one table that turns a label into
a duration. Anthropic ``cache_control.ttl`` (``"5m"``, ``"1h"``); OpenAI
``prompt_cache_options.ttl`` and breakpoint ``ttl`` (``"30m"``, ``"12h"``, GPT-5.6+) and
``prompt_cache_retention`` (``"24h"``). Which labels a given model accepts is its policy's
``ttls_s`` (sources cited per entry below); the labels' meaning is the same everywhere."""

TOLERANCE_FRACTION = 0.05
"""Share of a request's reported ``input_tokens_total`` by which reported cache reads may
differ from the prediction (on top of one granule) and still count as a ``hit``: absorbs the
tokenizer and template differences between our estimate and the provider's count (the
attribution's tolerance, ``_recording._attribution``; the report's, ``_accounting._calls``)."""

ESTIMATED_SPAN_FRACTION = 0.05
"""Share of an estimated span (our tokens of a predicted read that no reported size covers:
``verdict_detail["estimated_span_tokens"]``) by which the reported read may differ from the
prediction, on top of one granule, of the request's measured density offset
(``|token_scale - 1|`` of the span) and of :data:`ESTIMATED_SEGMENT_FRAMING_TOKENS` per
segment in the span, and still agree (``_accounting._calls.agreement_of``): content density
differs between our tokenizer and a provider's (``reference/ENGINES.md``: 0.72x to 1.24x of
cl100k by content type). A read that stopped at another breakpoint than predicted stays a
disagreement unless the blocks between the two breakpoints are smaller than the allowance."""

ESTIMATED_SEGMENT_FRAMING_TOKENS = 8
"""Tokens per segment of an estimated span by which the reported read may differ from the
prediction (see :data:`ESTIMATED_SPAN_FRACTION`): we count each block as the JSON it is sent
as (``{"role":..., "block": {...}}``), a provider frames it with its own chat template, so
each block boundary in the span carries a framing difference. Measured (2026-12-07) on
first reads of an entry ending at an earlier breakpoint: Claude Code 11 tokens over 3
segments (two runs), aider on Anthropic 6 over 2, the demo's ``breakpoint-misplaced`` and
``subagent-fork`` at most 9 over 2 (4.5 per segment); 8 is about twice the largest."""

def estimate_allowance_tokens(span: int, segments: int | None, token_scale: object) -> int | None:
    """Tokens by which a reported read may differ from a prediction that rests on an estimated
    span (on top of the granularity): :data:`ESTIMATED_SPAN_FRACTION` of the span (our
    tokens) plus the request's density offset (``|token_scale - 1|`` of it; a scale that is
    not a finite positive number adds none) and :data:`ESTIMATED_SEGMENT_FRAMING_TOKENS` per
    segment in it (1 segment when unknown); ``None`` when that is too large for a float (a
    hand-edited row). The one rule of the report's agreement
    (``_accounting._calls.agreement_of``) and of the sizes the recorder learns from a read
    (``_recording._attribution``)."""
    offset = (abs(token_scale - 1) if isinstance(token_scale, (int, float))
              and not isinstance(token_scale, bool) and math.isfinite(token_scale)
              and token_scale > 0 else 0.0)
    framing = ESTIMATED_SEGMENT_FRAMING_TOKENS * (segments if segments and segments > 0 else 1)
    try:
        return framing + math.ceil((ESTIMATED_SPAN_FRACTION + offset) * span)
    except OverflowError:  # beyond a float: no row the recorder writes
        return None


TOKEN_ESTIMATE_MARGIN = 1.25
"""How much denser than our cl100k estimate a provider's tokenizer may be on prompt content
(measured: tool schemas 1.24x, system text 1.04x, user text 0.86x, assistant tool calls 0.72x
of cl100k; ``reference/ENGINES.md``, 2026-11). A prefix counts as surely below a model's
``min_cacheable_tokens`` only when its estimate times this margin is still below it."""

_ANTHROPIC_DOC = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"
_ANTHROPIC_SKILLS = "anthropics/skills@0da71c3b:skills/claude-api/shared/prompt-caching.md"
_OPENAI_DOC = "https://developers.openai.com/api/docs/guides/prompt-caching"
_OPENAI_12H = ("https://www.w3cschool.cn/openai_api/openai-api-docs-prompt-caching.html "
               "(guide mirror of 2026-11-04: 12h on Responses, write 2.5x; the official English "
               "12h text was not seen)")
_GEMINI_DOC = "https://ai.google.dev/gemini-api/docs/caching"
_GEMINI_DOC_2026 = ("https://ai.google.dev/gemini-api/docs/generate-content/caching"
                    "?authuser=31&hl=zh-cn")
_GEMINI_PRICE = "https://discuss.ai.google.dev/t/question-about-gemini-api-caching-pricing/107349"
_GEMINI_INTERACTIONS = "https://ai.google.dev/gemini-api/docs/caching?authuser=7&hl=en"
_GEMINI_BLOCKS = ("observed, not documented: googleapis/python-genai#2064 (2026-02, "
                  "gemini-3-flash-preview: cachedContentTokenCount 2,037 / 2,040 / 4,085 / "
                  "4,087 / 6,134), https://simonwillison.net/2025/May/9/gemini-implicit-caching/ "
                  "(gemini-2.5-flash: 200,658 = 98 x 2,048 - 46), 0xPlaygrounds/rig#2375 "
                  "(gemini-2.5-flash: 99.6% of 18,497)")
_GEMINI_BLOCK_TOKENS = 2048
"""Gemini implicit-cache reads land on multiples of 2,048 tokens of the server's input, less a
few template tokens it keeps out of ``promptTokenCount`` (8-46 in the samples of
``_GEMINI_BLOCKS``). The docs give no granularity; the three public samples (two models) agree."""
_DEEPSEEK_DOC = "https://api-docs.deepseek.com/guides/kv_cache"
_BEDROCK_DOC = "https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html"
_VLLM_DOC = "vllm-project/vllm:docs/design/prefix_caching.md"
_SGLANG_DOC = "sgl-project/sglang server args (radix cache, page_size)"
_LLAMA_DOC = "ggml-org/llama.cpp@00efb3e1:tools/server/server-task.cpp"
_OPENROUTER_DOC = "https://openrouter.ai/docs/features/prompt-caching"
_XAI_DOC = "https://docs.x.ai/developers/advanced-api-usage/prompt-caching/usage-and-pricing"


class CacheRules(BaseModel):
    """One provider/model family's prefix-cache rules.

    Attributes:
        provider: Provider family (``anthropic``, ``openai``, ``gemini``, ``deepseek``,
            ``bedrock``, ``vllm``, ``sglang``, ``llama-cpp``, ``openrouter``, ``xai``).
        model_pattern: ``fnmatch`` pattern over the model id (``"claude-opus-4-5*"``).
        min_cacheable_tokens: Prefixes shorter than this (tokens) are never cached; both
            cache counters report 0.
        granularity_tokens: Reported cache reads are floored to a multiple of this (tokens).
        recompute_last_token: The engine always recomputes the final prompt token (vLLM).
        ttls_s: Available TTLs in seconds, default first; empty when there is no TTL (self-hosted
            engines evict by capacity only).
        ttl_refreshed_on_read: A cache read restarts the TTL clock.
        breakpoint_budget: Maximum explicit cache breakpoints per request, ``None`` when the
            provider caches automatically with no markers.
        lookback_blocks: Blocks checked backwards from each breakpoint for an earlier entry.
        automatic: Prefixes are cached without markers.
        implicit_interval_tokens: Automatic caches that keep entries only every N tokens
            (OpenAI GPT-5.5: "Every 2,048 tokens"), ``None`` when entries can end at any
            block boundary.
        read_multiplier: Price of a cache-read token as a multiple of a fresh input token.
        write_multipliers: Price of a cache-write token per TTL label (``{"5m": 1.25}``).
        source: Where these numbers come from (URL or ``repo@commit:path``).
        as_of: Date (ISO) the source was read.
        conservative: True when the model is unknown and the provider default was used.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    model_pattern: str = "*"
    min_cacheable_tokens: int = Field(ge=0)
    granularity_tokens: int = Field(default=1, ge=1)
    recompute_last_token: bool = False
    ttls_s: tuple[int, ...] = ()
    ttl_refreshed_on_read: bool = True
    breakpoint_budget: int | None = None
    lookback_blocks: int | None = None
    automatic: bool = True
    implicit_interval_tokens: int | None = Field(default=None, ge=1)
    read_multiplier: float = Field(default=1.0, ge=0)
    write_multipliers: dict[str, float] = Field(default_factory=dict)
    source: str
    as_of: str
    conservative: bool = False

    @property
    def default_ttl_s(self) -> int | None:
        """The TTL (seconds) used when a request does not choose one; ``None`` if no TTL."""
        return self.ttls_s[0] if self.ttls_s else None


def _anthropic(pattern: str, minimum: int, source: str = _ANTHROPIC_SKILLS) -> CacheRules:
    return CacheRules(
        provider="anthropic",
        model_pattern=pattern,
        min_cacheable_tokens=minimum,
        ttls_s=(300, 3600),
        breakpoint_budget=4,
        lookback_blocks=20,
        automatic=False,
        read_multiplier=0.1,
        write_multipliers={"5m": 1.25, "1h": 2.0},
        source=f"{source}; {_ANTHROPIC_DOC}",
        as_of="2026-10-15",
    )


def _bedrock(pattern: str, minimum: int, ttls: tuple[int, ...]) -> CacheRules:
    return CacheRules(
        provider="bedrock",
        model_pattern=pattern,
        min_cacheable_tokens=minimum,
        ttls_s=ttls,
        breakpoint_budget=4,
        lookback_blocks=20,
        automatic=False,
        read_multiplier=0.1,
        write_multipliers={"5m": 1.25, "1h": 2.0},
        source=_BEDROCK_DOC,
        as_of="2026-08-07",
    )


def _openai(pattern: str, minimum: int, granularity: int, modern: bool,
            ttls_s: tuple[int, ...] | None = None, interval: int | None = None) -> CacheRules:
    return CacheRules(
        provider="openai",
        model_pattern=pattern,
        min_cacheable_tokens=minimum,
        granularity_tokens=granularity,
        # GPT-5.6+: >= 30 min after the latest write or reuse. Earlier models: 5-10 min idle
        # ("in_memory", the documented default) or 24 h with prompt_cache_retention="24h" (a
        # 24 h default for organizations without ZDR since 2026-05-29 is UNVERIFIED: override
        # ttls_s if your organization has it).
        # GPT-5.6+ "12h": Responses only (OPENAI_EXPLICIT_RULES), write 2.5x.
        ttls_s=ttls_s or ((1800, 43200) if modern else (300, 86400)),
        breakpoint_budget=4 if modern else None,
        automatic=True,
        implicit_interval_tokens=interval,
        # Pre-5.6 read discounts are model-dependent (50-90%, UNVERIFIED per model): 0.5 is the
        # conservative end; override per model where the pricing page says otherwise.
        read_multiplier=0.1 if modern else 0.5,
        write_multipliers={"30m": 1.25, "12h": 2.5} if modern else {},
        source=_OPENAI_DOC + ("; " + _OPENAI_12H if modern else ""),
        as_of="2026-08-21",
    )


def takes_cache_options(policy: CacheRules) -> bool:
    """Whether requests to ``policy``'s models may carry ``prompt_cache_options`` (OpenAI
    GPT-5.6+: explicit breakpoints, TTL and ``comparison_response_id`` diagnostics; older
    models answer 400): the models with a breakpoint budget on an automatic cache
    (PROVIDERS.md §15: "GPT-5.6+: ``prompt_cache_options{mode, ttl}`` +
    ``prompt_cache_breakpoint``")."""
    return policy.automatic and policy.breakpoint_budget is not None


KEEPALIVE_WIRE_FORMATS = ("anthropic", "openai-chat", "openai-responses")
"""Wire formats whose requests a keep-alive ping can be made of (``KeepAliveScheduler``): the
request cut after its last cache breakpoint (Anthropic ``cache_control``, OpenAI
``prompt_cache_breakpoint`` or the implicit one). Not Bedrock Converse (a signed request the
scheduler does not re-sign) nor Gemini (no TTL a read is documented to refresh)."""


KEEPALIVE_OUTPUT_TOKENS: Mapping[str, int] = {"anthropic": 1, "openai-chat": 1,
                                              "openai-responses": 16}
"""Output tokens a keep-alive ping asks for (and may be billed) per wire format: one, but 16
on Responses, the smallest ``max_output_tokens`` it accepts ("integer below minimum value.
Expected a value >= 16")."""


def keepalive_unsupported(wire_format: str, rules: CacheRules) -> tuple[str, str] | None:
    """Why requests of ``wire_format`` to a model with ``rules`` cannot be kept alive, as
    ``(code, reason)`` (``no-ttl``, ``no-explicit-ttl``, ``wire-format``); ``None`` when they
    can. The one rule the scheduler, the demo and the what-if's candidates follow."""
    if not rules.ttls_s or not rules.ttl_refreshed_on_read:
        return "no-ttl", f"{rules.provider} entries have no TTL a read refreshes"
    if wire_format not in KEEPALIVE_WIRE_FORMATS:
        return "wire-format", f"no keep-alive for {wire_format!r} requests"
    if wire_format != "anthropic" and not takes_cache_options(rules):
        return ("no-explicit-ttl", f"{rules.provider} model {rules.model_pattern!r} has no "
                "documented TTL refreshed by a read (GPT-5.6 and later do)")
    return None


def _simple(provider: str, minimum: int, source: str, **kw: Any) -> CacheRules:
    return CacheRules(provider=provider, min_cacheable_tokens=minimum, source=source, **kw)


def _gemini(pattern: str, minimum: int, source: str, *, as_of: str) -> CacheRules:
    return _simple("gemini", minimum, f"{source}; reads: {_GEMINI_BLOCKS}", model_pattern=pattern,
                   granularity_tokens=_GEMINI_BLOCK_TOKENS,
                   implicit_interval_tokens=_GEMINI_BLOCK_TOKENS, ttls_s=(3600,),
                   read_multiplier=0.25, as_of=as_of)


def default_policies() -> tuple[CacheRules, ...]:
    """The shipped table, most specific pattern first within each provider.

    The last entry of each provider is its conservative default (pattern ``"*"``).
    Sources are cited per entry; see ``shared/reference/PROVIDERS.md`` for the quotes.
    """
    return (
        # Anthropic minimums: newest skills guidance (Opus 5 era). Sources disagree on Opus 4.7
        # (2,048 vs 4,096); the newer source wins, override if your account measures otherwise.
        _anthropic("claude-opus-5*", 512),
        _anthropic("claude-fable-5-1*", 512),
        _anthropic("claude-mythos-5-1*", 512),
        _anthropic("claude-opus-4-8*", 1024),
        _anthropic("claude-sonnet-5*", 1024),
        _anthropic("claude-sonnet-4-6*", 1024),
        _anthropic("claude-sonnet-4-5*", 1024),
        _anthropic("claude-opus-4-1*", 1024),
        _anthropic("claude-opus-4-0*", 1024),
        _anthropic("claude-opus-4-2*", 1024),
        _anthropic("claude-sonnet-4-0*", 1024),
        _anthropic("claude-sonnet-4-2*", 1024),
        _anthropic("claude-3-7-sonnet*", 1024, _ANTHROPIC_DOC),
        _anthropic("claude-opus-4-7*", 2048),
        _anthropic("claude-mythos-preview*", 2048),
        _anthropic("claude-3-5-haiku*", 2048),
        _anthropic("claude-3-haiku*", 2048, _ANTHROPIC_DOC),
        _anthropic("claude-opus-4-6*", 4096),
        _anthropic("claude-opus-4-5*", 4096),
        _anthropic("claude-haiku-4-5*", 4096),
        _anthropic("*", 4096).model_copy(update={"conservative": True}),
        # OpenAI: GPT-5.6+ exact boundaries, 1,024 minimum; earlier: 2,048 minimum, 128 rounding.
        _openai("gpt-5.6*", 1024, 1, modern=True),
        _openai("gpt-5.7*", 1024, 1, modern=True),
        _openai("gpt-5.8*", 1024, 1, modern=True),
        _openai("gpt-6*", 1024, 1, modern=True),
        # GPT-5.5: implicit breakpoints every 2,048 tokens (reads land on 2,048 multiples,
        # reported minus hidden tokens and floored to 128), ~30 min up to 24 h, "24h" only.
        _openai("gpt-5.5*", 2048, 2048, modern=False, ttls_s=(1800, 86400), interval=2048),
        # "2,048 tokens for models older than GPT-5.6", reads floored to 128: the documented
        # rule for the families below; any other model id gets it too, marked conservative.
        *(_openai(p, 2048, 128, modern=False) for p in (
            "gpt-5", "gpt-5-*", "gpt-5.0*", "gpt-5.1*", "gpt-5.2*", "gpt-5.3*", "gpt-5.4*",
            "gpt-4*", "o1*", "o3*", "o4*", "gpt-3.5*", "chatgpt-*", "codex-*")),
        _openai("*", 2048, 128, modern=False).model_copy(update={"conservative": True}),
        # Gemini implicit minimums (PROVIDERS.md §15, survey of 2026-12-07): Gemini 4 Argon,
        # 3.8 / 3.6 Flash and 3 Pro preview 4,096; 2.5 Flash / Pro 2,048 (the 2026-06-26 doc;
        # 1,024 for 2.5 Flash in 2025). Explicit caches have the same minimums; their TTL
        # default is one hour (ttls_s). Read discount 75% at launch (90% per Vertex, UNVERIFIED
        # per model): 0.25 is the conservative end.
        # Implicit reads come in 2,048-token blocks (_GEMINI_BLOCK_TOKENS: observed in public
        # traffic on 2.5 Flash and 3 Flash Preview, taken for every Gemini model): the
        # granularity predictions are floored to and agreement is judged within.
        *(_gemini(p, 4096, _GEMINI_DOC_2026, as_of="2026-12-07")
          for p in ("gemini-4*", "gemini-3.8*", "gemini-3.6*", "gemini-3*pro*")),
        *(_gemini(p, 2048, _GEMINI_DOC, as_of="2026-06-26")
          for p in ("gemini-2.5-flash*", "gemini-2.5-pro*")),
        _gemini("*", 4096, _GEMINI_DOC, as_of="2026-06-26").model_copy(
            update={"conservative": True}),
        _simple("deepseek", 64, _DEEPSEEK_DOC, granularity_tokens=64, read_multiplier=0.1,
                as_of="2026-08-01"),
        _bedrock("*claude-sonnet-4-6*", 1024, (300,)),
        _bedrock("*claude-opus-4-5*", 4096, (300, 3600)),
        _bedrock("*claude-sonnet-4-5*", 4096, (300, 3600)),
        _bedrock("*claude-haiku-4-5*", 4096, (300, 3600)),
        # the rest of the user guide's table (PROVIDERS.md §6.3): Opus 4.6, Opus 4
        # (claude-opus-4-20250514; Opus 4.1 is not in the table) and Claude 3.7 Sonnet
        _bedrock("*claude-opus-4-6*", 4096, (300,)),
        _bedrock("*claude-opus-4-2025*", 1024, (300,)),
        _bedrock("*claude-3-7-sonnet*", 1024, (300,)),
        _bedrock("*", 4096, (300,)).model_copy(update={"conservative": True}),
        # Self-hosted engines and the rest: one documented rule per provider (engine defaults:
        # vLLM 16-token blocks, SGLang page size 1), not a per-model guess.
        _simple("vllm", 16, _VLLM_DOC, granularity_tokens=16, recompute_last_token=True,
                as_of="2026-08-01"),
        _simple("sglang", 1, _SGLANG_DOC, recompute_last_token=True, as_of="2026-08-01"),
        _simple("llama-cpp", 1, _LLAMA_DOC, recompute_last_token=True, as_of="2026-02-15"),
        _simple("openrouter", 1024, _OPENROUTER_DOC, read_multiplier=0.1, ttls_s=(300,),
                as_of="2026-08-01", conservative=True),
        _simple("xai", 1024, _XAI_DOC, read_multiplier=0.25, as_of="2026-08-01",
                conservative=True),
    )


_LOOKUPS_KEPT = 1024
"""Lookups a table remembers (one per provider and model id; every render looks one up)."""


class PolicyTable:
    """An ordered, overridable table of :class:`CacheRules` entries.

    Lookup returns the first entry of the provider whose ``model_pattern`` matches the model id.
    """

    def __init__(self, policies: Iterable[CacheRules] | None = None) -> None:
        self._policies: tuple[CacheRules, ...] = tuple(
            default_policies() if policies is None else policies
        )
        self._found: dict[tuple[str, str], CacheRules] = {}  # lookups (the table is immutable)

    @property
    def policies(self) -> tuple[CacheRules, ...]:
        """All entries, in lookup order."""
        return self._policies

    @property
    def providers(self) -> tuple[str, ...]:
        """Provider families with at least one entry, sorted."""
        return tuple(sorted({p.provider for p in self._policies}))

    def lookup(self, provider: str, model: str) -> CacheRules:
        """Return the policy for ``model`` at ``provider``.

        Raises:
            PolicyError: ``provider`` has no entry (code ``policy-unknown-provider``).
        """
        found = self._found.get((provider, model))
        if found is not None:
            return found
        for policy in self._policies:
            if policy.provider == provider and fnmatchcase(model, policy.model_pattern):
                if len(self._found) >= _LOOKUPS_KEPT:
                    self._found.clear()
                self._found[provider, model] = policy
                return policy
        raise PolicyError(
            f"no cache policy for provider {provider!r}; known: {', '.join(self.providers)}",
            code="policy-unknown-provider",
        )

    def with_overrides(self, *policies: CacheRules) -> PolicyTable:
        """Return a new table where ``policies`` take precedence over the existing entries."""
        return PolicyTable((*policies, *self._policies))

    def override(self, provider: str, model_pattern: str, **changes: Any) -> PolicyTable:
        """Return a new table with one entry changed, e.g. ``min_cacheable_tokens=2048``.

        The entry that currently matches ``model_pattern`` is copied with ``changes`` and put
        first. Unknown field names raise :class:`PolicyError` (code ``policy-field``).
        """
        base = self.lookup(provider, model_pattern)
        unknown = sorted(set(changes) - set(CacheRules.model_fields))
        if unknown:
            raise PolicyError(f"unknown policy field(s): {', '.join(unknown)}", code="policy-field")
        data = base.model_dump()
        data.update(changes, model_pattern=model_pattern, conservative=False)
        return self.with_overrides(CacheRules.model_validate(data))


_DEFAULT_TABLE = PolicyTable()


def cache_rules(provider: str, model: str, table: PolicyTable | None = None) -> CacheRules:
    """Look up the cache policy for ``provider``/``model`` in ``table`` (default: shipped)."""
    return (table or _DEFAULT_TABLE).lookup(provider, model)


def surely_below_minimum(policy: CacheRules, tokens: int) -> bool:
    """Whether a prefix our tokenizer estimates at ``tokens`` is surely shorter than
    ``policy``'s ``min_cacheable_tokens``: the estimate times :data:`TOKEN_ESTIMATE_MARGIN` is
    still below it. Never for a conservative policy (an unknown model: only the provider's
    default minimum is known) or one without a minimum. The one rule both the builder
    (``RenderedPrompt.to_anthropic``) and the stabilizer (``_recording._stabilize``) use to
    not spend a cache breakpoint that would write nothing."""
    if policy.conservative or not policy.min_cacheable_tokens:
        return False
    return tokens < policy.min_cacheable_tokens / TOKEN_ESTIMATE_MARGIN


class ReasoningRule(BaseModel):
    """When a wire format's reasoning content (thinking blocks, reasoning items) may be left
    out of a later request, as the provider documents it.

    Attributes:
        wire_format: The format whose responses carry it (``anthropic``, ``openai-responses``,
            ``openai-chat``).
        kinds: The block / item types it covers (``thinking``, ``redacted_thinking``,
            ``reasoning``) or, for Chat, the message fields (``reasoning_content``).
        required_in_tool_turn: The assistant turn that made tool calls must be sent back with
            its reasoning, unmodified, while the tool results are answered: dropping it there
            is an error (Anthropic: a 400 or degraded reasoning; OpenAI: degraded reasoning).
        earlier_turns_droppable: Reasoning of earlier, finished turns may be omitted.
        omitting_changes_prefix: Leaving reasoning out of an already-sent turn changes the
            request's bytes at that turn, so the cached prefix after it is lost.
        source: Doc URL the rule is read from.
        as_of: Date (ISO) the source was read.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    wire_format: str
    kinds: tuple[str, ...]
    required_in_tool_turn: bool
    earlier_turns_droppable: bool
    omitting_changes_prefix: bool = True
    source: str
    as_of: str


REASONING_RULES: tuple[ReasoningRule, ...] = (
    # "during tool use, you must pass thinking blocks back to the API for the last assistant
    # message"; thinking blocks of previous turns may be omitted (the API strips them from
    # context on older models; Opus 4.5+ / Sonnet 4.6+ keep them by default), and omitting
    # them changes the messages-cache prefix (PROVIDERS.md, "Thinking blocks").
    ReasoningRule(
        wire_format="anthropic", kinds=("thinking", "redacted_thinking"),
        required_in_tool_turn=True, earlier_turns_droppable=True,
        source="https://platform.claude.com/docs/en/build-with-claude/extended-thinking"
               "#preserving-thinking-blocks; " + _ANTHROPIC_DOC,
        as_of="2026-12-01"),
    # "when doing function calling with a reasoning model in the Responses API, pass back any
    # reasoning items returned with the last function call (in addition to the output of the
    # function)"; with store=false, ask for include=["reasoning.encrypted_content"].
    ReasoningRule(
        wire_format="openai-responses", kinds=("reasoning",),
        required_in_tool_turn=True, earlier_turns_droppable=True,
        source="https://developers.openai.com/api/docs/guides/reasoning"
               "#keeping-reasoning-items-in-context",
        as_of="2026-12-01"),
    # DeepSeek thinking mode: reasoning_content of the tool-call sub-turns is sent back
    # within the same user turn; earlier turns' reasoning_content is ignored by the API.
    ReasoningRule(
        wire_format="openai-chat", kinds=("reasoning_content", "reasoning"),
        required_in_tool_turn=True, earlier_turns_droppable=True,
        source="https://api-docs.deepseek.com/guides/thinking_mode", as_of="2026-12-01"),
    # Gemini: thought parts (summaries, "thought": true) need not come back; what a
    # function-calling turn needs back is the thoughtSignature on its functionCall part
    # (Gemini 3+: 400 "Function call is missing a thought_signature"), which the builder
    # keeps on the tool call whatever the reasoning mode.
    ReasoningRule(
        wire_format="gemini", kinds=("thought",), required_in_tool_turn=False,
        earlier_turns_droppable=True,
        source="https://ai.google.dev/gemini-api/docs/thought-signatures (read through "
               "https://docs.apiyi.com/en/faq/gemini-thought-signature-missing)",
        as_of="2026-12-07"),
    # Converse: Claude's thinking comes back as reasoningContent blocks (text + signature, or
    # redactedContent), under Anthropic's rule: the tool-calling turn's reasoning goes back.
    ReasoningRule(
        wire_format="bedrock-converse", kinds=("reasoningContent",),
        required_in_tool_turn=True, earlier_turns_droppable=True,
        source="https://platform.claude.com/docs/en/build-with-claude/extended-thinking"
               "#preserving-thinking-blocks; botocore bedrock-runtime 2023-09-30 "
               "ReasoningContentBlock",
        as_of="2026-12-07"),
)
"""Per wire format: when reasoning content may be dropped (sources and dates per entry)."""


def reasoning_rule(wire_format: str) -> ReasoningRule:
    """The :data:`REASONING_RULES` entry of ``wire_format``.

    Raises:
        PolicyError: no rule for that format (code ``policy-unknown-provider``).
    """
    for rule in REASONING_RULES:
        if rule.wire_format == wire_format:
            return rule
    raise PolicyError(f"no reasoning rule for wire format {wire_format!r}",
                      code="policy-unknown-provider")


public(CacheRules, PolicyTable, cache_rules)


# -- explicit (client-managed) caches: Gemini cachedContents -----------------------------------


class ExplicitCacheRule(BaseModel):
    """Whether a model offers explicit caches, their default lifetime and their prices.

    Attributes:
        provider: ``gemini``.
        model_pattern: ``fnmatch`` pattern over the model id.
        supported: The model accepts ``cachedContents`` (else only implicit caching).
        default_ttl_s: Lifetime of a cache created without ``ttl`` / ``expireTime`` (seconds).
        storage_usd_per_mtok_hour: Storage price, USD per million cached tokens per hour;
            ``None`` when unknown (the report then says so; override it).
        read_usd_per_mtok: Price of a cached-token read, USD per million; ``None``: unknown.
        input_usd_per_mtok: Price of a fresh input token, USD per million; ``None``: unknown.
        source: Where these facts come from.
        as_of: Date (ISO) the source was read.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = "gemini"
    model_pattern: str = "*"
    supported: bool = True
    default_ttl_s: int | None = 3600
    storage_usd_per_mtok_hour: float | None = None
    read_usd_per_mtok: float | None = None
    input_usd_per_mtok: float | None = None
    source: str
    as_of: str

    def storage_usd(self, tokens: int, hours: float) -> float | None:
        """Storage of a cache of ``tokens`` tokens for ``hours`` hours (USD): tokens x hours x
        :attr:`storage_usd_per_mtok_hour` / 1e6 ("Storage duration ... billed based on the
        TTL", PROVIDERS.md §4.3); ``None`` when the price is unknown. The one storage rule
        (the report's per-cache storage, ``GeminiCache.storage_usd``, the what-if replay)."""
        if self.storage_usd_per_mtok_hour is None:
            return None
        return tokens / 1e6 * self.storage_usd_per_mtok_hour * hours

    def break_even_reads(self, tokens: int, hours: float) -> int | None:
        """Reads a cache of ``tokens`` tokens must serve within ``hours`` to pay for its
        storage: ``ceil(storage / saving per read)``, a read saving ``input - read`` price per
        cached token; ``None`` when a price is unknown or a read saves nothing."""
        storage = self.storage_usd(tokens, hours)
        fresh, read = self.input_usd_per_mtok, self.read_usd_per_mtok
        if storage is None or fresh is None or read is None:
            return None
        saving = tokens / 1e6 * (fresh - read)
        return math.ceil(storage / saving - 1e-9) if saving > 0 else None


EXPLICIT_CACHE_RULES: tuple[ExplicitCacheRule, ...] = (
    # "Explicit is unsupported on Gemini 4 Argon+ and on the Interactions API" (PROVIDERS.md
    # §15): later Gemini 4 models are taken to follow Argon.
    ExplicitCacheRule(model_pattern="gemini-4*", supported=False, default_ttl_s=None,
                      source=_GEMINI_DOC_2026, as_of="2026-12-07"),
    # 2.5 Pro: "$0.125 read, $4.50 per 1M tok·h" storage (pricing page as quoted); input
    # $1.25 per 1M (prompts up to 200k tokens, the same pricing page).
    ExplicitCacheRule(model_pattern="gemini-2.5-pro*", storage_usd_per_mtok_hour=4.50,
                      read_usd_per_mtok=0.125, input_usd_per_mtok=1.25,
                      source=f"{_GEMINI_PRICE}; {_GEMINI_DOC}", as_of="2026-12-07"),
    ExplicitCacheRule(source=_GEMINI_DOC, as_of="2026-06-26"),
)
"""Per model, first match wins; the last entry is the default (supported, prices unknown)."""

EXPLICIT_CACHE_APIS: Mapping[str, bool] = {"generateContent": True, "interactions": False}
"""Which Gemini APIs accept explicit caches: the Interactions API "only supports implicit
caching" (``_GEMINI_INTERACTIONS``, 2026-07-07)."""


def explicit_cache_rule(model: str, table: Any = None,
                        rules: Iterable[ExplicitCacheRule] | None = None) -> ExplicitCacheRule:
    """The :data:`EXPLICIT_CACHE_RULES` entry for a Gemini ``model`` (``models/`` prefix
    ignored); ``rules`` replaces the table (``table`` is accepted for symmetry with
    :func:`cache_rules` and unused)."""
    name = model[len("models/"):] if model.startswith("models/") else model
    for rule in (EXPLICIT_CACHE_RULES if rules is None else rules):
        if fnmatchcase(name, rule.model_pattern):
            return rule
    return EXPLICIT_CACHE_RULES[-1]


# -- content shapes --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContentShapeRule:
    """Whether ``"content": "x"`` and ``[{"type": <text type>, "text": "x"}]`` share a cache
    prefix on one provider, with the evidence (the one rule the emulator, the attribution and
    lint follow).

    Attributes:
        provider: ``anthropic`` or ``openai``.
        cache_alike: ``True`` only when the provider documents that the two shapes hit the same
            cache entry; otherwise they are treated as different bytes (a shape change in
            already-sent content is a break).
        text_type: The text block's ``type`` (``"text"``; Responses input parts are
            ``"input_text"``).
        finding: What the provider documents, one sentence (the fix texts quote it).
        source: Where (SDK file or doc URL), or what was searched when nothing says.
        as_of: Date the sources were read.
        url: The one page a fix text cites (the provider's prompt-caching doc); the full
            evidence stays in ``source``.
    """

    provider: str
    cache_alike: bool
    text_type: str
    finding: str
    source: str
    as_of: str
    url: str


CONTENT_SHAPES: Mapping[str, ContentShapeRule] = {
    "anthropic": ContentShapeRule(
        "anthropic", False, "text",
        "Anthropic documents a string content as shorthand for one text block and the two "
        "messages as equivalent inputs, but its prompt-caching docs do not say they share a "
        "cache prefix (caching is of '100% identical prompt segments', block by block)",
        "anthropics/anthropic-sdk-python:src/anthropic/types/message_create_params.py "
        "(messages: 'Using a `string` for `content` is shorthand for an array of one content "
        "block of type \"text\". The following input messages are equivalent'); "
        + _ANTHROPIC_DOC + " (no statement on content shapes)",
        "2026-12-01", _ANTHROPIC_DOC),
    "openai": ContentShapeRule(
        "openai", False, "text",
        "OpenAI documents content as a string or an array of content parts without saying "
        "they are equivalent, and caching as 'exact prefix matches'",
        "openai/openai-python:src/openai/types/chat/chat_completion_user_message_param.py "
        "(content: Union[str, Iterable[ChatCompletionContentPartParam]], 'The contents of "
        "the user message.'); " + _OPENAI_DOC + "; searched 2026-12-01: docs, pages and issues "
        "corpora for string vs content-part caching, no statement found",
        "2026-12-01", _OPENAI_DOC),
}
"""The content-shape rule per provider (see :class:`ContentShapeRule`). Undocumented means
different: neither provider says the two shapes cache alike, so both are ``False``."""

_WIRE_PROVIDER = {"anthropic": "anthropic", "openai-chat": "openai", "openai-responses": "openai",
                  "gemini": "gemini", "bedrock-converse": "bedrock"}


def provider_of_wire_format(wire_format: str) -> str:
    """The provider family a request of ``wire_format`` goes to when nothing else says
    (no known host, no override): ``anthropic`` for the Anthropic format, ``gemini`` and
    ``bedrock`` for theirs, else ``openai`` (the emulator and any OpenAI-wire server)."""
    return _WIRE_PROVIDER.get(wire_format, "openai")


def content_shape_rule(provider_or_format: str) -> ContentShapeRule | None:
    """The rule for a provider (``anthropic``, ``openai``) or a wire format (``openai-chat``,
    ``openai-responses``), or ``None`` when there is none (the shapes are then different)."""
    return CONTENT_SHAPES.get(_WIRE_PROVIDER.get(provider_or_format, provider_or_format))


def text_block_of(provider_or_format: str, text: str) -> dict[str, str] | None:
    """The text block a string content stands for when the rule says the two shapes cache
    alike (so callers render both alike), else ``None`` (keep the string as sent)."""
    rule = content_shape_rule(provider_or_format)
    if rule is None or not rule.cache_alike:
        return None
    text_type = "input_text" if provider_or_format == "openai-responses" else rule.text_type
    return {"type": text_type, "text": text}


_TEXT_TYPES = ("text", "input_text", "output_text")
_MARKERS = ("cache_control", "prompt_cache_breakpoint")


def _text_of(value: Any) -> tuple[bool, str] | None:
    """``(is_string, text)`` of a content value that is a string, a text block or a list of
    one text block (markers aside), else ``None``."""
    if isinstance(value, str):
        return True, value
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if (isinstance(value, Mapping) and value.get("type") in _TEXT_TYPES
            and isinstance(value.get("text"), str)
            and all(k in ("type", "text", *_MARKERS) for k in value)):
        return False, value["text"]
    return None


def content_shape_change(segment_a: bytes, segment_b: bytes) -> bool:
    """Whether two message segments (segment data: ``{"role", "content"}`` for string content,
    ``{"role", "block"}`` per content block) hold the same text in the two shapes: a string
    on one side, one text block on the other, same role."""
    try:
        a, b = loads(segment_a), loads(segment_b)
    except ValueError:
        return False
    if not (isinstance(a, Mapping) and isinstance(b, Mapping)) or a.get("role") != b.get("role"):
        return False
    x = _text_of(a["content"] if "content" in a else a.get("block"))
    y = _text_of(b["content"] if "content" in b else b.get("block"))
    return x is not None and y is not None and x[0] != y[0] and x[1] == y[1]


# -- mid-conversation system messages (Anthropic) ---------------------------------------------


# -- model features: what a request may carry beyond cache markers ----------------------------

_MID_CONV_DOC = ("https://platform.claude.com/docs/en/build-with-claude/"
                 "mid-conversation-system-messages")
_TOOL_CHANGES_DOC = "https://platform.claude.com/docs/zh-TW/models/opus-5/whats-new-opus-5"
_ANTHROPIC_SDK_SYSTEM = ("anthropics/anthropic-sdk-python:src/anthropic/types/"
                         "system_message_param.py, types/beta/beta_system_message_param.py, "
                         "types/beta/beta_request_tool_addition_block_param.py, "
                         "lib/tools/_tool_dispatch.py")
_OPENAI_ALLOWED = ("openai/openai-python:src/openai/types/chat/"
                   "chat_completion_allowed_tool_choice_param.py, "
                   "types/responses/tool_choice_allowed_param.py")

TOOL_CHANGES_BETA = "mid-conversation-tool-changes-2026-07-01"
"""``anthropic-beta`` value enabling ``tool_addition`` / ``tool_removal`` blocks in a
``role: "system"`` message (source: the Opus 5 what's-new page, ``_TOOL_CHANGES_DOC``; the SDK's
``types/anthropic_beta_param.py`` lists it)."""

INLINE_TOOLS_BETA = "inline-tools-2026-09-15"
"""``anthropic-beta`` value allowing a ``tool_definition`` (a tool defined by value) in a
``tool_addition`` block (UNVERIFIED beyond a third-party blog, PROVIDERS.md §15.1)."""


class ModelFeatures(BaseModel):
    """Request shapes one provider/model family accepts beyond the cache rules.

    Attributes:
        provider: Provider family (``anthropic``, ``openai``, ``bedrock``).
        model_pattern: ``fnmatch`` pattern over the model id.
        system_messages: Mid-conversation ``{"role": "system"}`` messages in ``messages[]``
            (Anthropic): text only; after a ``user`` turn; last or followed by an
            ``assistant`` turn; never ``messages[0]`` nor right after another system message.
            Unsupported models answer 400 ``role 'system' is not supported on this model``.
        tool_changes_beta: The ``anthropic-beta`` value under which a system message may carry
            ``tool_addition`` / ``tool_removal`` blocks naming tools of ``tools[]``; ``None``
            when the model has no such blocks.
        allowed_tools: ``tool_choice: {"type": "allowed_tools", ...}`` (OpenAI Chat and
            Responses): restricts the callable tools without changing ``tools``.
        source: Where (doc URL or SDK file).
        as_of: Date (ISO) the source was read.
        conservative: True when the model is unknown and the provider default (no feature)
            was used.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    model_pattern: str = "*"
    system_messages: bool = False
    tool_changes_beta: str | None = None
    allowed_tools: bool = False
    source: str
    as_of: str
    conservative: bool = False


def _claude_features(provider: str, pattern: str, supported: bool) -> ModelFeatures:
    # Tool changes travel inside a mid-conversation system message, so a model has them only
    # where it has system messages (the beta was announced with Opus 5: per-model support
    # beyond "models that accept role: system" is UNVERIFIED; override if a model refuses it).
    return ModelFeatures(
        provider=provider, model_pattern=pattern, system_messages=supported,
        tool_changes_beta=TOOL_CHANGES_BETA if supported else None,
        source=f"{_MID_CONV_DOC}; {_TOOL_CHANGES_DOC}; {_ANTHROPIC_SDK_SYSTEM}",
        as_of="2026-12-07")


_SYSTEM_MESSAGE_MODELS = (
    # "Fable 5.1, Mythos 5.1, Fable 5, Mythos 5, Opus 5.5, Opus 4.8, Opus 5, Sonnet 5.5,
    # Haiku 5.5; not Sonnet 5" (mid-conversation system messages doc, PROVIDERS.md §15.1).
    # Most specific first: "claude-sonnet-5*" would also match Sonnet 5.5.
    ("claude-sonnet-5-5*", True), ("claude-sonnet-5*", False),
    ("claude-fable-5*", True), ("claude-mythos-5*", True), ("claude-opus-5*", True),
    ("claude-opus-4-8*", True), ("claude-haiku-5-5*", True),
)

MODEL_FEATURES: tuple[ModelFeatures, ...] = (
    *(_claude_features("anthropic", p, ok) for p, ok in _SYSTEM_MESSAGE_MODELS),
    _claude_features("anthropic", "*", False).model_copy(update={"conservative": True}),
    # "Available on the Claude API, Claude in Amazon Bedrock and Google Cloud": the same
    # models by their Bedrock ids (for the Bedrock renderer, when it lands).
    *(_claude_features("bedrock", "*" + p, ok) for p, ok in _SYSTEM_MESSAGE_MODELS),
    _claude_features("bedrock", "*", False).model_copy(update={"conservative": True}),
    # allowed_tools tool_choice: in the SDK's Chat and Responses params with no model list;
    # documented with GPT-5 (2025-08). Earlier models: UNVERIFIED, so not assumed.
    *(ModelFeatures(provider="openai", model_pattern=p, allowed_tools=True,
                    source=_OPENAI_ALLOWED + "; " + _OPENAI_DOC, as_of="2026-12-07")
      for p in ("gpt-5*", "gpt-6*")),
    ModelFeatures(provider="openai", source=_OPENAI_ALLOWED, as_of="2026-12-07",
                  conservative=True),
)
"""The shipped feature table, most specific pattern first within each provider; the last
entry of each provider is its default (no feature, ``conservative=True``)."""


def model_features(provider: str, model: str,
                   table: Iterable[ModelFeatures] | None = None) -> ModelFeatures:
    """The first entry of ``table`` (default :data:`MODEL_FEATURES`) for ``provider`` whose
    pattern matches ``model``; a provider without entries gets none of the features
    (``conservative=True``)."""
    for entry in MODEL_FEATURES if table is None else table:
        if entry.provider == provider and fnmatchcase(model, entry.model_pattern):
            return entry
    return ModelFeatures(provider=provider, source="no entry", as_of=POLICY_TABLE_VERSION,
                         conservative=True)


@dataclass(frozen=True, slots=True)
class OpenAIExplicitRule:
    """OpenAI explicit prompt caching on one API (GPT-5.6+: models whose
    :class:`CacheRules` has a ``breakpoint_budget``).

    Attributes:
        wire_format: ``openai-chat`` or ``openai-responses``.
        ttls: ``prompt_cache_options.ttl`` / breakpoint ``ttl`` labels this API accepts,
            default first.
        written_explicit_mode: Explicit breakpoints written per request with ``mode:
            "explicit"`` (the latest ones).
        written_implicit_mode: The same with ``mode: "implicit"`` (the implicit breakpoint
            takes one of the write slots).
        considered: Latest breakpoints in the conversation considered for matching.
        source: Where.
        as_of: Date (ISO) the source was read.
    """

    wire_format: str
    ttls: tuple[str, ...]
    written_explicit_mode: int
    written_implicit_mode: int
    considered: int
    source: str
    as_of: str


_OPENAI_OPTIONS = ("openai/openai-python@3.63:src/openai/types/{}.py (PromptCacheOptions: "
                   "'Each request can write up to four breakpoints ... considers up to the "
                   "latest 80 breakpoints'; mode: 'writes up to the latest three explicit "
                   "breakpoints' with implicit)")

OPENAI_EXPLICIT_RULES: Mapping[str, OpenAIExplicitRule] = {
    # Chat: prompt_cache_options.ttl is Literal["30m"] in the SDK ("currently the only
    # supported value"), so markers stay at 30m too.
    "openai-chat": OpenAIExplicitRule(
        "openai-chat", ("30m",), 4, 3, 80,
        _OPENAI_OPTIONS.format("chat/completion_create_params") + "; " + _OPENAI_DOC,
        "2026-12-07"),
    # Responses: ttl "30m" | "12h" (12h writes cost 2.5x: CacheRules.write_multipliers).
    "openai-responses": OpenAIExplicitRule(
        "openai-responses", ("30m", "12h"), 4, 3, 80,
        _OPENAI_OPTIONS.format("responses/response_create_params") + "; " + _OPENAI_12H,
        "2026-12-07"),
}
"""OpenAI explicit caching per API (sources per entry; PROVIDERS.md §2.3 and §15)."""


def openai_explicit_rule(wire_format: str, model: str) -> OpenAIExplicitRule | None:
    """The explicit-caching rule of ``wire_format`` when ``model`` has explicit caching (its
    OpenAI policy has a ``breakpoint_budget``: GPT-5.6 and later), else ``None``."""
    rule = OPENAI_EXPLICIT_RULES.get(wire_format)
    if rule is None or not takes_cache_options(cache_rules("openai", model)):
        return None
    return rule


public(ModelFeatures, model_features)



# -- request headers that are cache-relevant parameters ----------------------------------------

_BETA_HEADERS_DOC = "https://docs.anthropic.com/en/api/beta-headers"
_ANTHROPIC_VERSIONS_DOC = "https://docs.anthropic.com/en/api/versioning"
_ANTHROPIC_SDK_BETAS = ("anthropics/anthropic-sdk-python@2.17.0:src/anthropic/resources/beta/"
                        "messages/messages.py ('anthropic-beta': \",\".join(str(e) for e in "
                        "betas)), _base_client.py (client and call headers merged into one)")
_OPENAI_SDK_HEADERS = ("openai/openai-python@3.63.0:src/openai/_client.py (OpenAI-Organization, "
                       "OpenAI-Project), resources/beta/assistants.py ('OpenAI-Beta': "
                       "'assistants=v2')")
_XAI_ROUTING_DOC = "https://docs.x.ai/developers/advanced-api-usage/prompt-caching/multi-turn"


@dataclass(frozen=True, slots=True)
class HeaderRule:
    """A request header that selects what the provider does with the request, compared
    between requests like a cache-key body parameter (allow-listed: no other header is ever
    recorded, and none of these carries a credential).

    Attributes:
        name: Header name, lower case.
        wire_formats: The request formats it belongs to.
        separator: ``","`` when the provider reads the value as a set of comma-separated
            items (order and repeats carry no meaning, so a gateway that reorders them
            changes nothing); ``None`` when the value is compared as one string.
        effect: What a change of it changes, one phrase (the report's cause detail).
        source: Where (doc URL, SDK file).
        as_of: Date (ISO) the source was read.
    """

    name: str
    wire_formats: tuple[str, ...]
    separator: str | None
    effect: str
    source: str
    as_of: str


CACHE_HEADERS: tuple[HeaderRule, ...] = (
    HeaderRule(
        "anthropic-beta", ("anthropic",), ",",
        "the beta features on; a beta can change what the model is sent: tools, thinking, "
        "context management",
        f"{_BETA_HEADERS_DOC} (several betas: one header, names separated by commas); "
        + _ANTHROPIC_SDK_BETAS, "2026-12-07"),
    HeaderRule(
        "anthropic-version", ("anthropic",), None, "the API version the request is read as",
        f"{_ANTHROPIC_VERSIONS_DOC}; anthropics/anthropic-sdk-python@2.17.0:src/anthropic/"
        "_client.py (default header anthropic-version)", "2026-12-07"),
    HeaderRule(
        "openai-beta", ("openai-chat", "openai-responses"), None,
        "the beta API surface the request is read as; not documented as a list, so compared "
        "as one string", _OPENAI_SDK_HEADERS, "2026-12-07"),
    HeaderRule(
        "openai-organization", ("openai-chat", "openai-responses"), None,
        "the organization the request runs in: 'Prompt caches are not shared between "
        "organizations'", f"{_OPENAI_DOC}; {_OPENAI_SDK_HEADERS}", "2026-12-07"),
    HeaderRule(
        "openai-project", ("openai-chat", "openai-responses"), None,
        "the project the request runs in, in an organization whose caches are its own",
        f"{_OPENAI_DOC}; {_OPENAI_SDK_HEADERS}", "2026-12-07"),
    HeaderRule(
        "x-grok-conv-id", ("openai-chat",), None,
        "the xAI server the request is routed to: same id, same server, same cache",
        _XAI_ROUTING_DOC, "2026-12-07"),
)
"""Request headers kept in ledger rows (``UsageRecord.request_headers``) and proxy captures and
compared between a request and the one it is compared with (the attribution's
``header_changes``). Only these are ever recorded: API keys, ``authorization`` and every other
header never are. ``anthropic-beta`` is the one set-valued header (the only one documented as a
comma-separated list); a dropped or added beta is a change, a reordered list is not."""

_HEADERS_BY_FORMAT: Mapping[str, tuple[HeaderRule, ...]] = {
    wire: tuple(rule for rule in CACHE_HEADERS if wire in rule.wire_formats)
    for wire in {w for rule in CACHE_HEADERS for w in rule.wire_formats}
}
_HEADER_RULES: Mapping[str, HeaderRule] = {rule.name: rule for rule in CACHE_HEADERS}


def header_rules(wire_format: str) -> tuple[HeaderRule, ...]:
    """The :data:`CACHE_HEADERS` of requests in ``wire_format`` (empty for other formats:
    Gemini and Bedrock Converse carry their betas in the body)."""
    return _HEADERS_BY_FORMAT.get(wire_format, ())


def header_items(name: str, value: str) -> tuple[str, ...]:
    """The comparable form of header ``name``'s ``value``: for a set-valued header
    (:attr:`HeaderRule.separator`) its distinct non-empty items, sorted; else the value
    stripped, as one item."""
    rule = _HEADER_RULES.get(name)
    if rule is None or rule.separator is None:
        return (value.strip(),)
    return tuple(sorted({item.strip() for item in value.split(rule.separator)
                         if item.strip()}))


def header_changes(before: Mapping[str, str] | None, after: Mapping[str, str] | None
                   ) -> list[dict[str, Any]]:
    """How the allow-listed headers of two requests differ, in :data:`CACHE_HEADERS` order:
    one ``{"header", "before", "after"}`` per changed header (values as sent, ``None`` when
    absent), with ``"removed"`` / ``"added"`` items for a set-valued one. Equal sets in
    another order are no change. Empty when either side is unknown (``None``: a row recorded
    before headers were kept)."""
    if before is None or after is None or before == after:  # the common case: as sent before
        return []
    out: list[dict[str, Any]] = []
    for rule in CACHE_HEADERS:
        a, b = before.get(rule.name), after.get(rule.name)
        items_a = () if a is None else header_items(rule.name, a)
        items_b = () if b is None else header_items(rule.name, b)
        if items_a == items_b and (a is None) == (b is None):
            continue
        change: dict[str, Any] = {"header": rule.name, "before": a, "after": b}
        if rule.separator is not None:
            change["removed"] = [x for x in items_a if x not in items_b]
            change["added"] = [x for x in items_b if x not in items_a]
        out.append(change)
    return out


def describe_header_change(change: Mapping[str, Any]) -> str:
    """One line for a :func:`header_changes` entry, e.g. ``"anthropic-beta: dropped
    'context-1m-2025-08-07'"`` or ``"anthropic-version: '2023-06-01' -> '2026-01-01'"``."""
    name = str(change.get("header"))
    parts: list[str] = []
    removed, added = change.get("removed"), change.get("added")
    if isinstance(removed, list) or isinstance(added, list):
        if removed:
            parts.append("dropped " + ", ".join(repr(x) for x in removed))
        if added:
            parts.append("added " + ", ".join(repr(x) for x in added))
        if not parts:
            parts.append("sent empty" if change.get("after") is not None else "not sent")
    else:
        before, after = change.get("before"), change.get("after")
        parts.append(f"{'not sent' if before is None else repr(before)} -> "
                     f"{'not sent' if after is None else repr(after)}")
    rule = _HEADER_RULES.get(name)
    effect = f" ({rule.effect})" if rule is not None else ""
    return f"{name}: {'; '.join(parts)}{effect}"
