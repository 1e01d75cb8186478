"""stableprompt: cache-friendly prompts for LLM agent harnesses, with measured hit rates.

This module is the only public door: it re-exports the public names and holds no logic.

The door is lazy (PEP 562): :data:`_EXPORTS` maps each public name to the private module that
defines it, and a name's module is imported on first access. Importing any submodule runs this
file, so an eager door would load the whole package for ``stableprompt lint``. Type checkers
and IDEs read the ``TYPE_CHECKING`` block below, which imports the same names from the same
modules (a test keeps the two in step). Every public class and function says
``__module__ == "stableprompt"`` from its definition on, so pickles name ``stableprompt.<Name>``
and survive moves of the private modules. The public sub-namespaces ``providers``, ``emulator``,
``demo`` and ``testing`` are attributes too, imported on first access.
"""

import importlib as _importlib
import typing as _typing

from ._version import __version__

#: Public name -> the private module (relative to this package) that defines it.
_EXPORTS: dict[str, str] = {
    "AnthropicClient": "_client",
    "ArgumentNameError": "_exceptions",
    "AsyncAnthropicClient": "_client",
    "AsyncKeepAliveScheduler": "_client._keepalive",
    "AsyncOpenAIClient": "_client",
    "AsyncOpenAICompatibleClient": "_client",
    "AsyncRecordingTransport": "_recording._transport",
    "BreakpointError": "_exceptions",
    "BreakpointWarning": "_exceptions",
    "ByteTokenizer": "_tokens",
    "CacheEvent": "_prompt._compaction",
    "CachePolicy": "_economics._cache_policy",
    "CacheRules": "_policy",
    "CacheUsage": "_usage",
    "CanonicalizationError": "_exceptions",
    "CaptureError": "_exceptions",
    "CompactionAdvice": "_prompt._advice",
    "CompactionCostWarning": "_exceptions",
    "CompactionPlan": "_prompt._compaction",
    "ConfigurationError": "_exceptions",
    "Conversation": "_prompt._builder",
    "Divergence": "_diff",
    "DuplicateToolError": "_exceptions",
    "EngineError": "_exceptions",
    "EngineRequestError": "_exceptions",
    "GeminiCache": "_client._gemini_cache",
    "HistoryError": "_exceptions",
    "IncompleteResponseWarning": "_exceptions",
    "InputError": "_exceptions",
    "KeepAlive": "_economics._cache_policy",
    "KeepAliveScheduler": "_client._keepalive",
    "KeepAliveStatus": "_client._keepalive",
    "Ledger": "_ledger._ledger",
    "LedgerError": "_exceptions",
    "LedgerSpillWarning": "_exceptions",
    "LintFinding": "_lint._linter",
    "LintPair": "_lint._linter",
    "LintReport": "_lint._linter",
    "Message": "_prompt._messages",
    "MethodNameError": "_exceptions",
    "ModelFeatures": "_policy",
    "OTelSink": "_report._otel",
    "OpenAIClient": "_client",
    "OpenAICompatibleClient": "_client",
    "PingResult": "_client._keepalive",
    "PinnedHead": "_prompt._builder",
    "PinnedHeadError": "_exceptions",
    "PolicyError": "_exceptions",
    "PolicyOutcome": "_accounting._what_if",
    "PolicyTable": "_policy",
    "PromptBuilder": "_prompt._builder",
    "ProviderConnectionError": "_exceptions",
    "ProviderError": "_exceptions",
    "ProviderHTTPError": "_exceptions",
    "ProviderRequest": "_wire._request",
    "ProviderTimeoutError": "_exceptions",
    "Recorder": "_recording._recorder",
    "RecordingTransport": "_recording._transport",
    "RenderedPrompt": "_prompt._rendered",
    "Repair": "_prompt._tools",
    "Segment": "_segment",
    "SegmentTokenCounter": "_tokens",
    "SegmentedRequest": "_wire._segmenter",
    "SourceError": "_exceptions",
    "SourceFinding": "_lint._source_report",
    "SourceLintReport": "_lint._source_report",
    "StablePromptError": "_exceptions",
    "Summary": "_accounting._summary",
    "TailSlotError": "_exceptions",
    "TiktokenTokenizer": "_tokens",
    "Tokenizer": "_tokens",
    "TokenizerUnavailableError": "_exceptions",
    "Tool": "_prompt._tools",
    "ToolCall": "_prompt._messages",
    "ToolError": "_exceptions",
    "ToolNameError": "_exceptions",
    "ToolSchemaError": "_exceptions",
    "ToolSet": "_prompt._tools",
    "TtlChoice": "_economics._cache_policy",
    "UsageParseError": "_exceptions",
    "UsageRecord": "_ledger._usage_record",
    "VolatileContentError": "_exceptions",
    "VolatileContentWarning": "_exceptions",
    "VolatileSpan": "_volatility",
    "WhatIf": "_accounting._what_if",
    "WorkloadUnavailableError": "_exceptions",
    "cache_rules": "_policy",
    "canonical_json": "_canonical",
    "diff": "_diff",
    "divergences": "_diff",
    "export_otel": "_report._otel",
    "get_tokenizer": "_tokens",
    "lint_capture": "_lint._linter",
    "lint_requests": "_lint._linter",
    "lint_source": "_lint._source",
    "model_features": "_policy",
    "parse_stream": "_wire._registry",
    "parse_usage": "_wire._registry",
    "plan_compaction": "_prompt._compaction",
    "record_bedrock": "_recording._botocore",
    "scan_volatile": "_volatility",
    "segment_request": "_wire._formats",
    "summarize": "_accounting._summary",
    "what_if": "_accounting._what_if",
}

#: Public sub-namespaces, imported on first attribute access.
_SUBMODULES = frozenset({"demo", "emulator", "providers", "testing"})

if _typing.TYPE_CHECKING:
    from . import demo as demo
    from . import emulator as emulator
    from . import providers as providers
    from . import testing as testing
    from ._accounting._summary import Summary, summarize
    from ._accounting._what_if import PolicyOutcome, WhatIf, what_if
    from ._canonical import canonical_json
    from ._client import (
        AnthropicClient,
        AsyncAnthropicClient,
        AsyncOpenAIClient,
        AsyncOpenAICompatibleClient,
        OpenAIClient,
        OpenAICompatibleClient,
    )
    from ._client._gemini_cache import GeminiCache
    from ._client._keepalive import (
        AsyncKeepAliveScheduler,
        KeepAliveScheduler,
        KeepAliveStatus,
        PingResult,
    )
    from ._diff import (
        Divergence,
        diff,
        divergences,
    )
    from ._economics._cache_policy import CachePolicy, KeepAlive, TtlChoice
    from ._exceptions import (
        ArgumentNameError,
        BreakpointError,
        BreakpointWarning,
        CanonicalizationError,
        CaptureError,
        CompactionCostWarning,
        ConfigurationError,
        DuplicateToolError,
        EngineError,
        EngineRequestError,
        HistoryError,
        IncompleteResponseWarning,
        InputError,
        LedgerError,
        LedgerSpillWarning,
        MethodNameError,
        PinnedHeadError,
        PolicyError,
        ProviderConnectionError,
        ProviderError,
        ProviderHTTPError,
        ProviderTimeoutError,
        SourceError,
        StablePromptError,
        TailSlotError,
        TokenizerUnavailableError,
        ToolError,
        ToolNameError,
        ToolSchemaError,
        UsageParseError,
        VolatileContentError,
        VolatileContentWarning,
        WorkloadUnavailableError,
    )
    from ._ledger._ledger import Ledger
    from ._ledger._usage_record import UsageRecord
    from ._lint._linter import (
        LintFinding,
        LintPair,
        LintReport,
        lint_capture,
        lint_requests,
    )
    from ._lint._source import lint_source
    from ._lint._source_report import (
        SourceFinding,
        SourceLintReport,
    )
    from ._policy import (
        CacheRules,
        ModelFeatures,
        PolicyTable,
        cache_rules,
        model_features,
    )
    from ._prompt._advice import CompactionAdvice
    from ._prompt._builder import (
        Conversation,
        PinnedHead,
        PromptBuilder,
    )
    from ._prompt._compaction import (
        CacheEvent,
        CompactionPlan,
        plan_compaction,
    )
    from ._prompt._messages import (
        Message,
        ToolCall,
    )
    from ._prompt._rendered import RenderedPrompt
    from ._prompt._tools import (
        Repair,
        Tool,
        ToolSet,
    )
    from ._recording._botocore import record_bedrock
    from ._recording._recorder import Recorder
    from ._recording._transport import (
        AsyncRecordingTransport,
        RecordingTransport,
    )
    from ._report._otel import OTelSink, export_otel
    from ._segment import Segment
    from ._tokens import (
        ByteTokenizer,
        SegmentTokenCounter,
        TiktokenTokenizer,
        Tokenizer,
        get_tokenizer,
    )
    from ._usage import CacheUsage
    from ._volatility import (
        VolatileSpan,
        scan_volatile,
    )
    from ._wire._formats import segment_request
    from ._wire._registry import (
        parse_stream,
        parse_usage,
    )
    from ._wire._request import ProviderRequest
    from ._wire._segmenter import SegmentedRequest

__all__ = [
    "AnthropicClient",
    "ArgumentNameError",
    "AsyncAnthropicClient",
    "AsyncKeepAliveScheduler",
    "AsyncOpenAIClient",
    "AsyncOpenAICompatibleClient",
    "AsyncRecordingTransport",
    "BreakpointError",
    "BreakpointWarning",
    "ByteTokenizer",
    "CacheEvent",
    "CachePolicy",
    "CacheRules",
    "CacheUsage",
    "CanonicalizationError",
    "CaptureError",
    "CompactionAdvice",
    "CompactionCostWarning",
    "CompactionPlan",
    "ConfigurationError",
    "Conversation",
    "Divergence",
    "DuplicateToolError",
    "EngineError",
    "EngineRequestError",
    "GeminiCache",
    "HistoryError",
    "IncompleteResponseWarning",
    "InputError",
    "KeepAlive",
    "KeepAliveScheduler",
    "KeepAliveStatus",
    "Ledger",
    "LedgerError",
    "LedgerSpillWarning",
    "LintFinding",
    "LintPair",
    "LintReport",
    "Message",
    "MethodNameError",
    "ModelFeatures",
    "OTelSink",
    "OpenAIClient",
    "OpenAICompatibleClient",
    "PingResult",
    "PinnedHead",
    "PinnedHeadError",
    "PolicyError",
    "PolicyOutcome",
    "PolicyTable",
    "PromptBuilder",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderRequest",
    "ProviderTimeoutError",
    "Recorder",
    "RecordingTransport",
    "RenderedPrompt",
    "Repair",
    "Segment",
    "SegmentTokenCounter",
    "SegmentedRequest",
    "SourceError",
    "SourceFinding",
    "SourceLintReport",
    "StablePromptError",
    "Summary",
    "TailSlotError",
    "TiktokenTokenizer",
    "Tokenizer",
    "TokenizerUnavailableError",
    "Tool",
    "ToolCall",
    "ToolError",
    "ToolNameError",
    "ToolSchemaError",
    "ToolSet",
    "TtlChoice",
    "UsageParseError",
    "UsageRecord",
    "VolatileContentError",
    "VolatileContentWarning",
    "VolatileSpan",
    "WhatIf",
    "WorkloadUnavailableError",
    "__version__",
    "cache_rules",
    "canonical_json",
    "diff",
    "divergences",
    "export_otel",
    "get_tokenizer",
    "lint_capture",
    "lint_requests",
    "lint_source",
    "model_features",
    "parse_stream",
    "parse_usage",
    "plan_compaction",
    "record_bedrock",
    "scan_volatile",
    "segment_request",
    "summarize",
    "what_if",
]


def __getattr__(name: str) -> object:
    """Import the module of public name ``name`` on first access (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(_importlib.import_module(f".{module}", __name__), name)
    elif name in _SUBMODULES:
        value = _importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, *_SUBMODULES})
