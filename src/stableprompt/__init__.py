"""stableprompt: cache-friendly prompts for LLM agent harnesses, with measured hit rates.

This module is the only public door: it re-exports the public names and holds no logic.
"""

from ._canonical import canonical_json
from ._client import (
    AnthropicClient,
    AsyncAnthropicClient,
    AsyncOpenAIClient,
    AsyncOpenAICompatibleClient,
    OpenAIClient,
    OpenAICompatibleClient,
)
from ._diff import Divergence, diff
from ._exceptions import (
    BreakpointError,
    CanonicalizationError,
    CaptureError,
    ConfigurationError,
    DuplicateToolError,
    HistoryError,
    InputError,
    LedgerError,
    PinnedHeadError,
    PolicyError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderTimeoutError,
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
from ._ledger._ledger import Ledger, LedgerSpillWarning
from ._ledger._usage_record import UsageRecord
from ._lint._linter import LintFinding, LintPair, LintReport, lint_capture, lint_requests
from ._policy import CachePolicy, PolicyTable, cache_policy
from ._prompt._builder import Conversation, PinnedHead, PromptBuilder
from ._prompt._compaction import CacheEvent, CompactionPlan, plan_compaction
from ._prompt._messages import Message, ToolCall
from ._prompt._rendered import RenderedPrompt
from ._prompt._tools import Repair, Tool, ToolSet
from ._recording._recorder import Recorder
from ._recording._transport import AsyncRecordingTransport, RecordingTransport
from ._report._otel import export_otel
from ._segment import Segment
from ._tokens import ByteTokenizer, SegmentTokenCounter, TiktokenTokenizer, Tokenizer, get_tokenizer
from ._usage import CacheUsage
from ._volatility import VolatileSpan, scan_volatile
from ._wire._formats import segment_request
from ._wire._request import ProviderRequest
from ._wire._segmenter import SegmentedRequest
from .providers import parse_stream, parse_usage

__version__ = "0.1.0"

__all__ = [
    "AnthropicClient",
    "AsyncAnthropicClient",
    "AsyncOpenAIClient",
    "AsyncOpenAICompatibleClient",
    "AsyncRecordingTransport",
    "BreakpointError",
    "ByteTokenizer",
    "CacheEvent",
    "CachePolicy",
    "CacheUsage",
    "CanonicalizationError",
    "CaptureError",
    "CompactionPlan",
    "ConfigurationError",
    "Conversation",
    "Divergence",
    "DuplicateToolError",
    "HistoryError",
    "InputError",
    "Ledger",
    "LedgerError",
    "LedgerSpillWarning",
    "LintFinding",
    "LintPair",
    "LintReport",
    "Message",
    "OpenAIClient",
    "OpenAICompatibleClient",
    "PinnedHead",
    "PinnedHeadError",
    "PolicyError",
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
    "StablePromptError",
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
    "UsageParseError",
    "UsageRecord",
    "VolatileContentError",
    "VolatileContentWarning",
    "VolatileSpan",
    "WorkloadUnavailableError",
    "__version__",
    "cache_policy",
    "canonical_json",
    "diff",
    "export_otel",
    "get_tokenizer",
    "lint_capture",
    "lint_requests",
    "parse_stream",
    "parse_usage",
    "plan_compaction",
    "scan_volatile",
    "segment_request",
]
