"""stableprompt: cache-friendly prompts for LLM agent harnesses, with measured hit rates.

This module is the only public door: it re-exports the public names and holds no logic.
"""

from ._canonical import canonical_json
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
)
from ._policy import CachePolicy, PolicyTable, cache_policy

__version__ = "0.1.0"

__all__ = [
    "BreakpointError",
    "CachePolicy",
    "CanonicalizationError",
    "CaptureError",
    "ConfigurationError",
    "DuplicateToolError",
    "HistoryError",
    "InputError",
    "LedgerError",
    "PinnedHeadError",
    "PolicyError",
    "PolicyTable",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderTimeoutError",
    "StablePromptError",
    "TailSlotError",
    "TokenizerUnavailableError",
    "ToolError",
    "ToolNameError",
    "ToolSchemaError",
    "UsageParseError",
    "VolatileContentError",
    "__version__",
    "cache_policy",
    "canonical_json",
]
